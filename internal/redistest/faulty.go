package redistest

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Fault is what a Faulty client does to a matching call.
type Fault int

const (
	// Drop: the request never reaches Redis; the caller gets a
	// connection error (it cannot tell the call did not run).
	Drop Fault = iota + 1
	// LoseReply: the call runs on Redis; its reply is lost and the caller
	// gets a connection error.
	LoseReply
	// Late: the caller gets a timeout at once; the request reaches Redis
	// Delay later (a request held up on another connection).
	Late
	// Refuse: Redis refuses the call with Err (BUSY, TRYAGAIN, ...); it
	// does not run.
	Refuse
	// Kill: the call is sent and, at the same moment, Rule.Kill kills the
	// client's connections on the server: the call may not have been
	// written, may have run with its reply lost, or may have been
	// answered. The caller gets whatever rueidis reports.
	Kill
	// Slow: the request reaches Redis Delay later and the caller waits
	// for its reply (a slow link, not a failure).
	Slow
	// Replace: the matching command does not run (with Rule.Ran: it
	// runs); its caller gets Rule.Reply instead of Redis's reply (a reply
	// the caller does not expect). The other commands of a DoMulti run.
	Replace
)

func (f Fault) String() string {
	switch f {
	case Drop:
		return "request dropped"
	case LoseReply:
		return "reply lost"
	case Late:
		return "request late"
	case Refuse:
		return "refused"
	case Kill:
		return "connection killed"
	case Slow:
		return "slow"
	case Replace:
		return "reply replaced"
	}
	return "fault?"
}

// ErrInjected is the connection error a Faulty client returns for Drop and
// LoseReply.
var ErrInjected = errors.New("redistest: injected connection failure")

// Rule picks calls and says what to do to them.
type Rule struct {
	Match func(args []string) bool // on each command's words
	Fault Fault
	Err   error // Refuse: the Redis error to return (see RedisError)
	// Reply, for Replace: what the caller gets; a real reply of the
	// server to another command (see Answer), so that it is exactly what
	// rueidis makes of those bytes.
	Reply rueidis.RedisResult
	Ran   bool          // Replace: the command runs; only its reply is replaced
	Delay time.Duration // Late: how long the request is held up
	Times int           // how many calls it hits (0: one)
	// After, for LoseReply, runs once the call ran on Redis and before
	// the caller learns of the lost reply: something that happens in the
	// window between a call's effect and its caller's next step.
	After func()
	// Kill, for Kill, kills the connections (for example CLIENT KILL ID
	// of the client's connections, found by their name).
	Kill func()
	// Arrived, for Slow, runs when the call reaches the slow link, before
	// its delay (to tell calls sent together from calls sent in turn).
	Arrived func()

	hits int
}

// Faulty wraps a rueidis client and injects faults into the calls that
// match its rules: Do and DoMulti (a DoMulti is hit as a whole when any
// of its commands matches). Everything else goes through untouched.
type Faulty struct {
	rueidis.Client

	mu    sync.Mutex
	rules []*Rule
	late  sync.WaitGroup

	chaosP     float64 // Chaos: the chance that a script call is hit
	chaosRules []Rule
	rnd        *rand.Rand
	injected   map[string]int // Chaos: faults injected, by kind

	seen []func([]string) bool // Count's matchers
	hits []int
}

// Count starts counting the calls that match m and returns a function that
// reports how many have returned to the caller (whatever happened to
// them).
func (f *Faulty) Count(m func([]string) bool) func() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := len(f.seen)
	f.seen = append(f.seen, m)
	f.hits = append(f.hits, 0)
	return func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.hits[i]
	}
}

// Chaos makes every script call (EVAL, EVALSHA) fail with probability p,
// with one of rules picked at random (their Match is ignored), on top of
// the explicit rules. seed fixes the sequence.
func (f *Faulty) Chaos(p float64, seed uint64, rules ...Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.chaosP, f.chaosRules = p, rules
	f.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	f.injected = make(map[string]int)
}

// Injected returns how many faults Chaos injected, by kind.
func (f *Faulty) Injected() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.injected))
	for k, v := range f.injected {
		out[k] = v
	}
	return out
}

// NewFaulty wraps c.
func NewFaulty(c rueidis.Client) *Faulty { return &Faulty{Client: c} }

// Inject adds a rule.
func (f *Faulty) Inject(r Rule) {
	if r.Times == 0 {
		r.Times = 1
	}
	f.mu.Lock()
	f.rules = append(f.rules, &r)
	f.mu.Unlock()
}

// Clear removes every rule.
func (f *Faulty) Clear() {
	f.mu.Lock()
	f.rules = nil
	f.mu.Unlock()
}

// Pending reports how many rule hits are left.
func (f *Faulty) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.rules {
		n += r.Times - r.hits
	}
	return n
}

// WaitLate waits for every late call to have been sent.
func (f *Faulty) WaitLate() { f.late.Wait() }

func (f *Faulty) match(cmds ...rueidis.Completed) (*Rule, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.chaosP > 0 && len(f.chaosRules) > 0 && isScriptCall(cmds) && f.rnd.Float64() < f.chaosP {
		r := f.chaosRules[f.rnd.IntN(len(f.chaosRules))]
		if r.Fault == Late && r.Delay == 0 {
			r.Delay = time.Duration(f.rnd.IntN(200)) * time.Millisecond
		}
		name := r.Fault.String()
		if r.Fault == Refuse && r.Err != nil {
			name = strings.Fields(r.Err.Error())[0]
		}
		f.injected[name]++
		return &r, -1
	}
	for _, r := range f.rules {
		if r.hits >= r.Times {
			continue
		}
		for i, c := range cmds {
			if r.Match(c.Commands()) {
				r.hits++
				return r, i
			}
		}
	}
	return nil, -1
}

func isScriptCall(cmds []rueidis.Completed) bool {
	for _, c := range cmds {
		if w := c.Commands(); len(w) > 0 && (strings.EqualFold(w[0], "EVALSHA") || strings.EqualFold(w[0], "EVAL")) {
			return true
		}
	}
	return false
}

// Do runs cmd, unless a rule says otherwise.
func (f *Faulty) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return f.DoMulti(ctx, cmd)[0]
}

// DoMulti runs cmds, unless a rule says otherwise.
func (f *Faulty) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	var counted []int
	f.mu.Lock()
	for i, m := range f.seen {
		for _, c := range cmds {
			if m(c.Commands()) {
				counted = append(counted, i)
				break
			}
		}
	}
	f.mu.Unlock()
	if len(counted) > 0 {
		defer func() {
			f.mu.Lock()
			for _, i := range counted {
				f.hits[i]++
			}
			f.mu.Unlock()
		}()
	}
	r, at := f.match(cmds...)
	if r == nil {
		return f.Client.DoMulti(ctx, cmds...)
	}
	fail := func(err error) []rueidis.RedisResult {
		out := make([]rueidis.RedisResult, len(cmds))
		for i := range out {
			out[i] = rueidis.NewErrorResult(err)
		}
		return out
	}
	switch r.Fault {
	case Drop:
		return fail(ErrInjected)
	case LoseReply:
		f.Client.DoMulti(context.WithoutCancel(ctx), cmds...)
		if r.After != nil {
			r.After()
		}
		return fail(ErrInjected)
	case Late:
		f.late.Add(1)
		go func() {
			defer f.late.Done()
			time.Sleep(r.Delay)
			f.Client.DoMulti(context.Background(), cmds...)
		}()
		return fail(context.DeadlineExceeded)
	case Refuse:
		return fail(r.Err)
	case Slow:
		if r.Arrived != nil {
			r.Arrived()
		}
		t := time.NewTimer(r.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fail(ctx.Err())
		}
		return f.Client.DoMulti(ctx, cmds...)
	case Replace:
		if at < 0 {
			return fail(errors.New("redistest: Replace is not a chaos fault"))
		}
		out := make([]rueidis.RedisResult, len(cmds))
		if r.Ran {
			copy(out, f.Client.DoMulti(context.WithoutCancel(ctx), cmds...))
		} else if len(cmds) > 1 {
			rest := append(append(make([]rueidis.Completed, 0, len(cmds)-1), cmds[:at]...), cmds[at+1:]...)
			res := f.Client.DoMulti(ctx, rest...)
			copy(out, res[:at])
			copy(out[at+1:], res[at:])
		}
		out[at] = r.Reply
		return out
	case Kill:
		done := make(chan []rueidis.RedisResult, 1)
		go func() { done <- f.Client.DoMulti(context.WithoutCancel(ctx), cmds...) }()
		r.Kill()
		return <-done
	}
	return f.Client.DoMulti(ctx, cmds...)
}

// Answer returns the server's reply to args (sent through c), to hand
// out later in place of another command's with Replace.
func Answer(ctx context.Context, c rueidis.Client, args ...string) rueidis.RedisResult {
	return c.Do(ctx, c.B().Arbitrary(args...).Build())
}

// RedisError returns a real Redis error reply with the text msg (for
// example "BUSY Redis is busy running a script"), obtained from the server
// behind c, for Rule.Err.
func RedisError(ctx context.Context, c rueidis.Client, msg string) error {
	err := c.Do(ctx, c.B().Eval().Script("return redis.error_reply(ARGV[1])").Numkeys(0).Arg(msg).Build()).Error()
	if _, ok := rueidis.IsRedisErr(err); !ok {
		return errors.New("redistest: no Redis error reply for " + msg)
	}
	return err
}
