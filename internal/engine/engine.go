package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/pubsub"
	"github.com/goredisson/locks/scripts"
)

// FenceTTL is how long a fence key lives. A fence is written only after a
// lost reply; it must outlive the lost call, which can reach Redis no later
// than its connection lives (rueidis closes a connection whose replies are
// overdue after ConnWriteTimeout, 10s by default).
const FenceTTL = 5 * time.Minute

var fenceTTLms = strconv.FormatInt(FenceTTL.Milliseconds(), 10)

// FenceTTLArg is FenceTTL in ms, as the lock scripts take it.
func FenceTTLArg() string { return fenceTTLms }

// Engine is the shared machinery of one Client.
type Engine struct {
	X        *Executor
	Table    *hold.Table
	Hub      *pubsub.Hub
	ClientID string
	Publish  string // "PUBLISH" or "SPUBLISH"

	WatchdogTimeout     time.Duration
	WatchdogMs          string // WatchdogTimeout in ms, as a script argument
	SubscriptionTimeout time.Duration
	// Budget is how long one call retries a refused script (NotRun) and
	// tries to settle a lost reply before it gives up (Redisson retries 4
	// times, each bounded by the command timeout).
	Budget time.Duration

	ops ops // the recorded calls of the synchronizers (record.go)

	closing chan struct{}
	closeBy atomic.Int64    // set by Close (UnixNano): owed calls may go until then
	bgCtx   context.Context // cancelled by Close: background work stops waiting
	stopBg  context.CancelFunc
	once    sync.Once
	bg      sync.WaitGroup

	// leaving counts the fair waiters that Close may wake: each leaves its
	// queue before it returns, and Leavers gives them a command timeout to
	// do so (see leaveOnClose). lmu orders their arrival with closing.
	lmu     sync.Mutex
	leaving sync.WaitGroup
}

// New returns an Engine; the fields must be set before use.
func New() *Engine {
	e := &Engine{closing: make(chan struct{})}
	e.bgCtx, e.stopBg = context.WithCancel(context.Background())
	return e
}

// Close stops background settling and waits for it. A fair waiter that
// arrives after it fails with ErrClosed (see Leavers).
func (e *Engine) Close() {
	e.once.Do(func() {
		e.closeBy.Store(time.Now().Add(e.X.Timeout).UnixNano())
		e.lmu.Lock()
		close(e.closing)
		e.lmu.Unlock()
		e.stopBg()
	})
	e.bg.Wait()
}

// Leavers waits, after Close and once the waiters have been woken (the
// hub closed) and the hold table closed (so that no acquire still in
// flight counts), for the fair waiters to leave their queues, at most one
// command timeout: past it (Redis slow or gone) they go on with their own
// bound.
func (e *Engine) Leavers() {
	left := make(chan struct{})
	go func() { e.leaving.Wait(); close(left) }()
	t := time.NewTimer(e.X.Timeout)
	defer t.Stop()
	select {
	case <-left:
	case <-t.C:
	}
}

// arriveWaiter registers a fair waiter that must leave its queue if Close
// ends its wait; false once Close has begun. The caller calls
// e.leaving.Done() when it returns.
func (e *Engine) arriveWaiter() bool {
	e.lmu.Lock()
	defer e.lmu.Unlock()
	if e.Closed() {
		return false
	}
	e.leaving.Add(1)
	return true
}

// pause sleeps d, or less when ctx ends or the engine closes: a call
// retried in the background, whose caller stopped waiting, must not
// outlive its Client by a back-off.
func (e *Engine) pause(ctx context.Context, d time.Duration) error { return sleepOr(ctx, e.closing, d) }

// Closed reports whether Close was called.
func (e *Engine) Closed() bool {
	select {
	case <-e.closing:
		return true
	default:
		return false
	}
}

// leaseMs returns d in ms as a script argument.
func (e *Engine) leaseMs(d time.Duration) string {
	if d == e.WatchdogTimeout && e.WatchdogMs != "" {
		return e.WatchdogMs
	}
	return ms(d)
}

// NewFence returns a fresh fence key for an operation on name.
func NewFence(name string) string { return names.Fence(name, appendID) }

// appendID appends 32 lowercase hex characters from 128 random bits.
func appendID(b []byte) []byte {
	const hexdigits = "0123456789abcdef"
	for range 2 {
		v := rand.Uint64()
		for range 16 {
			b = append(b, hexdigits[v&15])
			v >>= 4
		}
	}
	return b
}

// Call is one fenced script call: its fence key is the last of Keys.
type Call struct {
	Script *scripts.Script
	Keys   []string
	Args   []string
	Name   string // the lock hash whose Field count the fence reads
	Field  string
	Token  string // a fenced lock's token key, which the fence reads too
	Prefix string // a read hold's timeout prefix, whose keys' TTL the fence reads
	// Stop, when set, ends Exactly's settling of a lost reply early
	// (ErrUnresolved): an acquire whose caller has gone hands the
	// settling to the background, which undoes the grant if it ran.
	Stop <-chan struct{}
	// Remake, when set, makes Args again from Attempt before the call is
	// sent again after a refusal (NotRun): an acquire's arguments may hold
	// the time (the fair lock's now, from which its reservation is dated),
	// which must be that of the send that runs.
	Remake  func(dst []string, a Attempt) []string
	Attempt Attempt
	// Forms are the forms of reply the script gives to this call; any
	// other is settled as a lost reply (zero: every form of the lock
	// scripts).
	Forms Forms

	keys [5]string // room for Keys and Args, so a call is one allocation
	args [8]string
}

func (c *Call) fence() string { return c.Keys[len(c.Keys)-1] }

// Outcome is what became of a fenced call.
type Outcome struct {
	// Reply is the script's reply when Redis answered (Fenced false).
	Reply Reply
	// Fenced: the reply was lost and the call has been fenced; Count is
	// the owner's count afterwards, from which the caller learns whether
	// it ran; Refused: the call ran but refused to act, the count not
	// being the expected one.
	Fenced  bool
	Count   int
	Refused bool
	// Token: the token key's value at the fence (a fenced lock's; the
	// token of the grant when it ran). TTL: the hash's PTTL then.
	Token int64
	TTL   time.Duration
	// Sent is when the fence was sent (zero for a reply); Recv when the
	// reply (or the fence's) was read.
	Sent, Recv time.Time
	// Unexpected, with Fenced: the call was answered with a reply that
	// the script never gives it (ErrUnexpectedReply), then settled. When
	// it did not run, an acquire or an unlock fails with it rather than
	// send the call again at once, as after a lost reply: whatever
	// answered so would most likely answer so again. The idempotent calls
	// (expire, cancel) are sent again after a back-off.
	Unexpected error
}

// Stale decodes a script's refusal, {count}: the owner's count was not
// the one the caller expected.
func Stale(r Reply) (count int, ok bool) {
	vals, n, ok := pair(r)
	if !ok || n != 1 {
		return 0, false
	}
	return int(vals[0]), true
}

// Pair decodes a reply {count, v}: a fenced-lock grant's token, a partial
// read unlock's TTL left in ms.
func Pair(r Reply) (count int, v int64, ok bool) {
	vals, n, ok := pair(r)
	if !ok || n != 2 {
		return 0, 0, false
	}
	return int(vals[0]), vals[1], true
}

// Forms is a set of the forms of reply of the lock scripts (see
// scripts/acquire.lua and scripts/unlock.lua).
type Forms uint8

const (
	FormInt   Forms = 1 << iota // an integer
	FormStale                   // {c}: refused, the count being c
	FormPair                    // {n, v} with n > 0: a fenced grant's token, a read unlock's TTL
	FormHeld                    // the status HELD: a non-reentrant re-acquire
	allForms  = FormInt | FormStale | FormPair | FormHeld
)

// Has reports whether r has one of the forms of f. Any other reply (a nil,
// a string, a map, an array of another length, or of a form another
// script gives) came from something else than the script called, or
// through something that changed it.
func (f Forms) Has(r Reply) bool {
	if f == 0 {
		f = allForms
	}
	m, err := r.Res.ToMessage()
	if err != nil {
		return false
	}
	if m.IsInt64() {
		return f&FormInt != 0
	}
	if vals, n, ok := pair(r); ok {
		return n == 1 && f&FormStale != 0 || n == 2 && vals[0] > 0 && f&FormPair != 0
	}
	s, err := m.ToString()
	return err == nil && s == "HELD" && f&FormHeld != 0
}

// Unexpected is the error of a reply that script s never gives.
func Unexpected(s *scripts.Script, r Reply) error {
	return fmt.Errorf("%w: %s replied %s", ErrUnexpectedReply, s, describe(r.Res))
}

// describe tells what a reply is, short whatever its size.
func describe(res rueidis.RedisResult) string {
	m, err := res.ToMessage()
	switch {
	case rueidis.IsRedisNil(err):
		return "nil"
	case err != nil:
		return err.Error()
	case m.IsString():
		v, _ := m.ToString()
		if len(v) <= 40 {
			return fmt.Sprintf("the string %q", v)
		}
		return fmt.Sprintf("a string of %d bytes, %q...", len(v), strings.ToValidUTF8(v[:40], ""))
	case m.IsArray():
		a, _ := m.ToArray()
		return fmt.Sprintf("an array of %d elements", len(a))
	case m.IsMap():
		mm, _ := m.ToMap()
		return fmt.Sprintf("a map of %d entries", len(mm))
	}
	return m.String() // a number, a boolean: short
}

// pair returns an array reply of one or two integers, without allocating.
func pair(r Reply) (vals [2]int64, n int, ok bool) {
	m, err := r.Res.ToMessage()
	if err != nil || !m.IsArray() {
		return vals, 0, false
	}
	arr, err := m.ToArray()
	if err != nil || len(arr) < 1 || len(arr) > 2 {
		return vals, 0, false
	}
	for i := range arr {
		if !arr[i].IsInt64() {
			return vals, 0, false // the scripts reply integers, not strings of digits
		}
		vals[i], _ = arr[i].AsInt64()
	}
	return vals, len(arr), true
}

// Exactly runs a fenced call and returns its outcome exactly: it is
// resent only when Redis refused it (NotRun), with back-off, while ctx
// lives and until deadline; a lost reply is settled with the fence script
// until deadline (whatever ctx), never by resending the call. It returns
// ErrUnresolved (wrapping the last error) when the outcome is still
// unknown at deadline: the caller then settles it in the background.
func (e *Engine) Exactly(ctx context.Context, deadline time.Time, c *Call) (Outcome, error) {
	var bo Backoff
	for {
		r := e.X.Run(ctx, c.Script, c.Keys, c.Args)
		switch r.Class {
		case Done:
			if c.Forms.Has(r) {
				return Outcome{Reply: r, Recv: time.Now()}, nil
			}
			// A reply these scripts never give does not tell whether
			// the call ran: settle it as a lost one.
			r.Err = Unexpected(c.Script, r)
		case Failed:
			return Outcome{}, r.Err
		case Closed:
			if e.Closed() {
				return Outcome{}, r.Err
			}
			// rueidis closed a connection with the call written (a
			// topology change): it may have run. Settle it.
		case NotRun:
			d := bo.Next()
			if time.Now().Add(d).After(deadline) {
				return Outcome{}, r.Err
			}
			if err := e.pause(ctx, d); err != nil {
				return Outcome{}, err
			}
			if c.Remake != nil {
				c.Args = c.Remake(c.args[:0], c.Attempt)
			}
			continue
		}
		// Unknown: settle, for the budget whatever ctx (unless c.Stop).
		o, err := e.settle(ctx, time.Now().Add(e.Budget), c, c.Stop)
		if err != nil {
			return Outcome{}, fmt.Errorf("%w: %w (then: %w)", ErrUnresolved, r.Err, err)
		}
		if errors.Is(r.Err, ErrUnexpectedReply) {
			o.Unexpected = r.Err
		}
		return o, nil
	}
}

// settle runs the fence script of c until Redis answers, deadline passes
// or stop is closed (nil: never).
func (e *Engine) settle(ctx context.Context, deadline time.Time, c *Call, stop <-chan struct{}) (Outcome, error) {
	var bo Backoff
	bg := context.WithoutCancel(ctx)
	for {
		select {
		case <-stop:
			// The caller has gone: the background settles it (a fence
			// call now would hold the caller for a command timeout).
			return Outcome{}, context.Canceled
		default:
		}
		// Unsynced: a plain call follows every redirect (rueidis mishandles
		// ASK with WAIT in one pipeline), and the fence is idempotent.
		keys := []string{c.Name, c.fence()}
		args := []string{c.Field, fenceTTLms}
		switch {
		case c.Token != "":
			keys, args = append(keys, c.Token), append(args, "t")
		case c.Prefix != "":
			keys, args = append(keys, c.Prefix), append(args, "r")
		}
		sent := time.Now()
		r := e.X.RunPlain(bg, scripts.Fence, keys, args)
		if r.Class == Done {
			vals, err := r.Res.AsIntSlice()
			if err != nil || len(vals) != 4 {
				// Nothing can make this reply right: stop settling.
				return Outcome{}, &permanentError{fmt.Errorf("fence: unexpected reply %v: %w", r.Res, err)}
			}
			return Outcome{Fenced: true, Count: int(vals[0]), Refused: vals[1] == 1, Token: vals[2],
				TTL: time.Duration(vals[3]) * time.Millisecond, Sent: sent, Recv: time.Now()}, nil
		}
		if r.Class == Failed {
			return Outcome{}, &permanentError{r.Err}
		}
		if r.Class == Closed && e.Closed() {
			return Outcome{}, r.Err
		}
		d := bo.Next()
		if time.Now().Add(d).After(deadline) {
			return Outcome{}, r.Err
		}
		select {
		case <-time.After(d):
		case <-stop:
			return Outcome{}, r.Err
		case <-e.closing:
			return Outcome{}, hold.ErrClosed
		}
	}
}

// permanentError is a fence call Redis refused for good.
type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// Later settles c in the background, after a call that returned
// ErrUnresolved, and then calls then with the owner's count after the
// fence, unless the engine closes first. The caller hands over its
// operation slot on h: Later gives it back when done, unless then reports
// that it handed the slot on again.
func (e *Engine) Later(h *hold.Hold, c *Call, then func(o Outcome) (keep bool)) {
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		var bo Backoff
		for !e.Closed() {
			o, err := e.settle(context.Background(), time.Now().Add(e.Budget), c, nil)
			if err == nil {
				if then(o) {
					return
				}
				break
			}
			var perm *permanentError
			if errors.As(err, &perm) {
				// The fence can never run (an ACL, say): give the slot
				// back; the hold, if any, expires with its lease.
				e.X.Log.Warn("rlock: cannot settle a lost reply; the hold, if any, expires with its lease", "lock", c.Name, "err", err)
				break
			}
			select { // a permanent error must not spin
			case <-time.After(bo.Next()):
			case <-e.closing:
			}
		}
		e.Table.Done(h)
	}()
}
