package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/scripts"
)

// The synchronizers (semaphores, count-down latch) keep no owner in Redis
// from which a lost reply could be settled, as a lock's count is. Their
// write scripts record their outcome instead (scripts/sync_prelude.lua): a
// call that changed data writes "<seq>:<value>" to its slot of the client's
// record key of the object, a hash, in the same atomic step. After a lost
// reply, scripts/sync_fence.lua reads the slot (the call ran) or fences the
// call (it never will). A slot is given to one call in flight at a time and
// given again only once that call's outcome is known (or, when it stays
// unknown, once the call can no longer reach Redis), so the record key
// holds as many fields as the client had calls in flight on the object at
// once, and no record is overwritten while it may still be read.

// RecordTTL is how long a record key lives after its last record, at
// least three quarters of it: the scripts set it again when less is left.
// It only bounds how long a lost reply can wait for its settling: a
// settling that starts later than RecordTTL/2 after its call (less with a
// command timeout of minutes: settleWindow) gives up as unknown, rather
// than read an expired record as "not run" (the quarter in between covers
// the settling's own way to Redis).
const RecordTTL = time.Hour

var recordTTLms = strconv.FormatInt(RecordTTL.Milliseconds(), 10)

// ops numbers a client's recorded calls (one sequence for the client, so
// a seq is never reused on any object) and gives each call in flight a
// slot of its record key that no other call in flight there has.
type ops struct {
	mu      sync.Mutex
	next    uint64
	objs    map[string]*objOps
	free    []*objOps // emptied entries, for reuse
	retired int       // slots held by calls whose outcome stayed unknown
	sweep   time.Time // when to look for retired slots that are free again
}

// objOps is the slots of one record key: slots[i].seq is the call that
// holds slot i, 0 when it is free, retired when its call's outcome stayed
// unknown (free again from slots[i].until).
type objOps struct {
	slots []slotUse
	n     int // slots not free
}

type slotUse struct {
	seq   uint64
	until time.Time
}

const retired = ^uint64(0)

func (o *ops) begin(record string) (seq uint64, slot int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.objs == nil {
		o.objs = make(map[string]*objOps)
	}
	// o.sweep is never later than the first retired slot's end, so every
	// slot whose call can no longer run is free before the scan below.
	if o.retired > 0 {
		if now := time.Now(); now.After(o.sweep) {
			o.sweepLocked(now)
		}
	}
	o.next++
	seq = o.next
	ob := o.objs[record]
	if ob == nil {
		if n := len(o.free); n > 0 {
			ob = o.free[n-1]
			o.free = o.free[:n-1]
		} else {
			ob = &objOps{}
		}
		o.objs[record] = ob
	}
	slot = len(ob.slots)
	for i, u := range ob.slots {
		if u.seq == 0 {
			slot = i
			break
		}
	}
	if slot == len(ob.slots) {
		ob.slots = append(ob.slots, slotUse{})
	}
	ob.slots[slot].seq = seq
	ob.n++
	return seq, slot
}

// end gives back the slot of seq: at once when the call's outcome is
// known; when it stays unknown, FenceTTL from now, the bound the fences
// rely on (a fence written now must outlive the lost call): until then a
// late run could overwrite the record of the slot's next call.
func (o *ops) end(record string, seq uint64, slot int, unknown bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ob := o.objs[record]
	if ob == nil || slot >= len(ob.slots) || ob.slots[slot].seq != seq {
		return
	}
	if unknown {
		until := time.Now().Add(FenceTTL)
		ob.slots[slot] = slotUse{retired, until}
		if o.retired == 0 || until.Before(o.sweep) {
			o.sweep = until
		}
		o.retired++
		return
	}
	ob.slots[slot].seq = 0
	ob.n--
	if ob.n == 0 {
		o.drop(record, ob)
	}
}

// sweepLocked frees the retired slots whose calls can no longer run, and
// sets when to look again.
func (o *ops) sweepLocked(now time.Time) {
	next := now.Add(FenceTTL)
	for record, ob := range o.objs {
		for i, u := range ob.slots {
			switch {
			case u.seq != retired:
			case now.After(u.until):
				ob.slots[i].seq = 0
				ob.n--
				o.retired--
			case u.until.Before(next):
				next = u.until
			}
		}
		if ob.n == 0 {
			o.drop(record, ob)
		}
	}
	o.sweep = next
}

// drop forgets a record key whose slots are all free: its next call
// starts again at slot 0.
func (o *ops) drop(record string, ob *objOps) {
	delete(o.objs, record)
	if len(o.free) < 64 && cap(ob.slots) <= 64 {
		ob.slots = ob.slots[:0]
		o.free = append(o.free, ob)
	}
}

// RecCall is one recorded script call of a synchronizer.
type RecCall struct {
	Script *scripts.Script
	Name   string   // the object's raw name: its slot, its record key
	Record string   // the record key, names.Record(Name, client id); "": made per call
	Keys   []string // the object's keys; the fence and record keys follow
	Args   []string // the operation's arguments; sync_prelude's come first
	// Fresh, when set, makes the operation's arguments again before every
	// send, in place of Args: arguments that hold the time (the
	// permit-expirable semaphore's now and a permit's expiry) must be
	// those of the moment the call goes, not of its first attempt: a
	// call resent after a refusal or a settled lost reply would else
	// hand out a permit whose lease has partly or wholly run.
	Fresh func() []string
	// NoSync: no replica sync (the count-down latch's countDown, as
	// Redisson's).
	NoSync bool
	// Undo, when set, runs in the background with the record of a call
	// whose reply was lost and whose caller had gone before it was
	// settled: an acquisition the caller does not know about is given
	// back. Its ctx ends when the client closes.
	Undo func(ctx context.Context, record string)
	// Redo: a call whose reply was lost and that the background settles
	// as not run is sent again (as a new call) in the background: a
	// release, a give-back, a countDown, which must happen once the
	// caller was told the outcome is unknown (it must not send it again
	// itself).
	Redo bool
	// Stop, when set, ends the settling early: the caller has gone, the
	// background settles the call (and runs Undo).
	Stop <-chan struct{}
	// Owed: a give-back (Undo) or a write sent again (Redo), which the
	// client owes to Redis. While the client closes it may still go until
	// one command timeout after Close began, instead of not at all:
	// Close waits for the background that sends it.
	Owed bool
}

// RecOutcome is what became of a recorded call.
type RecOutcome struct {
	// Reply: Redis answered (Settled false).
	Reply Reply
	// Settled: the reply was lost; Ran reports whether the call changed
	// data, Record is what it recorded.
	Settled bool
	Ran     bool
	Record  string
}

// Int returns the call's integer outcome: the reply, or after a lost reply
// the record (0 when it did not run).
func (o RecOutcome) Int() (int64, error) {
	if !o.Settled {
		return o.Reply.Int()
	}
	if !o.Ran {
		return 0, nil
	}
	return strconv.ParseInt(o.Record, 10, 64)
}

// errFenced is a call that found its own fence: it was settled as not run
// before it ran, so its reply can only reach a caller that kept waiting
// past the settling, which none does.
var errFenced = errors.New("rlock: a call ran after it was fenced")

// Recorded runs c once, exactly: a refused call (NotRun) is resent with
// back-off until deadline; a lost reply is settled from the record for the
// budget, never by resending: a call found to have run is reported from
// its record, one found not to have run (now fenced) is sent again as a
// new call while the deadline allows. When it is still unknown, it returns
// ErrUnresolved and settles it in the background (running c.Undo if it
// ran). With replica sync, a reply that no replica acknowledged comes back
// with Unsynced true; the caller decides (undo an acquisition, Resync a
// release).
func (e *Engine) Recorded(ctx context.Context, deadline time.Time, c *RecCall) (RecOutcome, error) {
	var bo Backoff
	for {
		if e.Closed() {
			// An owed call may still go until one command timeout after
			// Close began, one deadline for all of them (a call sent just
			// before it takes its own timeout, and settling its lost
			// reply one more).
			by := time.Unix(0, e.closeBy.Load())
			if !c.Owed || !time.Now().Before(by) {
				return RecOutcome{}, hold.ErrClosed
			}
			if by.Before(deadline) {
				deadline = by
			}
		}
		o, retry, err := e.recordedOnce(ctx, deadline, c, &bo)
		if !retry {
			return o, err
		}
		// The call was settled as not run (fenced): it is as if Redis had
		// refused it, and a new call (a new seq and fence) may go.
		d := bo.Next()
		if time.Now().Add(d).After(deadline) {
			return RecOutcome{}, fmt.Errorf("rlock: %q: %w", c.Name, err)
		}
		if serr := sleep(ctx, d); serr != nil {
			return RecOutcome{}, serr
		}
	}
}

// recordedOnce is one call of Recorded under one seq and fence: resent
// while Redis refuses it, settled after a lost reply. retry reports a call
// settled as not run (err says why its reply was lost).
func (e *Engine) recordedOnce(ctx context.Context, deadline time.Time, c *RecCall, bo *Backoff) (o RecOutcome, retry bool, err error) {
	record := c.Record
	if record == "" {
		record = names.Record(c.Name, e.ClientID)
	}
	// Slots are per record key, not per name: "x" and "{x}" share one
	// (Redisson's prefix rule), and a call on one must not overwrite the
	// record of an unsettled call on the other.
	seq, slot := e.ops.begin(record)
	sq, ss := strconv.FormatUint(seq, 10), strconv.Itoa(slot)
	fence := NewFence(c.Name)
	// One allocation for both lists.
	nk := len(c.Keys) + 2
	buf := make([]string, 0, nk+len(c.Args)+3)
	keys := append(append(buf[:0:nk], c.Keys...), fence, record)
	args := append(append(buf[nk:nk], sq, ss, recordTTLms), c.Args...)
	for {
		if c.Fresh != nil {
			args = append(args[:3], c.Fresh()...)
		}
		sent := time.Now()
		var r Reply
		if c.NoSync {
			r = e.X.RunPlain(ctx, c.Script, keys, args)
		} else {
			r = e.X.Run(ctx, c.Script, keys, args)
		}
		switch r.Class {
		case Done:
			if fencedStatus(r.Res) {
				e.ops.end(record, seq, slot, false)
				return RecOutcome{}, false, fmt.Errorf("%w: %q", errFenced, c.Name)
			}
			if _, ok := r.Integer(); ok {
				e.ops.end(record, seq, slot, false)
				return RecOutcome{Reply: r}, false, nil
			}
			// Every recorded script replies an integer or FENCED; any
			// other reply does not tell whether the call ran: settle it
			// from its record, as a lost one.
			r.Err = Unexpected(c.Script, r)
		case Failed:
			e.ops.end(record, seq, slot, false)
			return RecOutcome{}, false, r.Err
		case Closed:
			if e.Closed() {
				// It may still run: its slot is not given again before
				// it no longer can.
				e.ops.end(record, seq, slot, true)
				return RecOutcome{}, false, r.Err
			}
		case NotRun:
			d := bo.Next()
			if time.Now().Add(d).After(deadline) {
				e.ops.end(record, seq, slot, false)
				return RecOutcome{}, false, r.Err
			}
			if err := sleep(ctx, d); err != nil {
				e.ops.end(record, seq, slot, false)
				return RecOutcome{}, false, err
			}
			continue
		}
		// Unknown: settle, for the budget whatever ctx (unless c.Stop).
		o, err := e.settleRecord(time.Now().Add(e.Budget), sent, fence, record, sq, ss, c.Stop)
		if err == nil {
			e.ops.end(record, seq, slot, false)
			if !o.Ran {
				// Not run, or ran and changed nothing (a reply that was
				// unexpected included): sent again after a back-off, while
				// the deadline allows.
				return RecOutcome{}, true, r.Err
			}
			if !c.NoSync {
				// The settling read the record unsynced: wait for the
				// replicas to have the write before it counts.
				o.Reply = e.syncSettled(ctx, c.Name)
			}
			return o, false, nil
		}
		var perm *permanentError
		if errors.As(err, &perm) || errors.Is(err, hold.ErrClosed) {
			// It may still run: its slot is not given again before it
			// no longer can.
			e.ops.end(record, seq, slot, true)
			e.X.Log.Warn("rlock: the outcome of a call stays unknown; a permit it took, if it ran, stays taken (a permit with a lease comes back when it ends)",
				"object", c.Name, "script", c.Script.String(), "seq", sq, "record", record, "err", err)
			return RecOutcome{}, false, fmt.Errorf("%w: %w (then: %w)", ErrUnresolved, r.Err, err)
		}
		e.laterRecord(c, sent, fence, record, sq, seq, slot)
		return RecOutcome{}, false, fmt.Errorf("%w: %w (then: %w)", ErrUnresolved, r.Err, err)
	}
}

// settleWindow is how long after its send a lost call may still be
// settled: RecordTTL/2, less when a long command timeout could bring the
// settling call to Redis after the record's 45 minutes (a record lives at
// least three quarters of RecordTTL after its call ran).
func (e *Engine) settleWindow() time.Duration {
	return min(RecordTTL/2, RecordTTL*3/4-2*e.X.Timeout-time.Minute)
}

// settleRecord runs sync_fence.lua until Redis answers, deadline passes or
// stop is closed.
func (e *Engine) settleRecord(deadline, sent time.Time, fence, record, seq, slot string, stop <-chan struct{}) (RecOutcome, error) {
	var bo Backoff
	for {
		if time.Since(sent) > e.settleWindow() {
			// Its record, if any, may have expired before this call
			// reaches Redis: nil would not prove that it did not run.
			return RecOutcome{}, &permanentError{fmt.Errorf("sync_fence: the call was sent %v ago; its record may have expired", time.Since(sent).Round(time.Second))}
		}
		select {
		case <-stop:
			return RecOutcome{}, context.Canceled
		default:
		}
		r := e.X.RunPlain(context.Background(), scripts.SyncFence, []string{fence, record}, []string{seq, fenceTTLms, slot})
		switch r.Class {
		case Done:
			if r.Err != nil || r.Res.Error() != nil {
				// A nil reply: not run, fenced.
				return RecOutcome{Settled: true}, nil
			}
			s, err := r.Res.ToString()
			v, ok := strings.CutPrefix(s, seq+":")
			if err != nil || !ok {
				return RecOutcome{}, &permanentError{fmt.Errorf("sync_fence: unexpected reply %v", r.Res)}
			}
			return RecOutcome{Settled: true, Ran: true, Record: v}, nil
		case Failed:
			return RecOutcome{}, &permanentError{r.Err}
		case Closed:
			if e.Closed() {
				return RecOutcome{}, hold.ErrClosed
			}
		}
		d := bo.Next()
		if time.Now().Add(d).After(deadline) {
			return RecOutcome{}, r.Err
		}
		select {
		case <-time.After(d):
		case <-stop:
			return RecOutcome{}, r.Err
		case <-e.closing:
			return RecOutcome{}, hold.ErrClosed
		}
	}
}

// laterRecord settles c in the background until it is known or the engine
// closes, then runs c.Undo if the call ran.
func (e *Engine) laterRecord(c *RecCall, sent time.Time, fence, record, sq string, seq uint64, slot int) {
	ss := strconv.Itoa(slot)
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		var bo Backoff
		known := false
		defer func() {
			// Unknown, the call may still run: its slot is not given
			// again before it no longer can.
			e.ops.end(record, seq, slot, !known)
			if !known && e.Closed() {
				e.X.Log.Warn("rlock: client closed before the outcome of a call was known; a permit it took, if it ran, stays taken (a permit with a lease comes back when it ends)",
					"object", c.Name, "script", c.Script.String(), "seq", sq, "record", record)
			}
		}()
		for !e.Closed() {
			o, err := e.settleRecord(time.Now().Add(e.Budget), sent, fence, record, sq, ss, nil)
			if err == nil {
				known = true
				switch {
				case o.Ran && c.Undo != nil:
					c.Undo(e.bgCtx, o.Record)
				case !o.Ran && c.Redo:
					// Not run: the write is still owed. A new call, in
					// the background, for as long as the client lives.
					redo := *c
					redo.Stop, redo.Owed = nil, true
					if _, err := e.Recorded(e.bgCtx, time.Now().Add(RecordTTL/4), &redo); err != nil && !errors.Is(err, ErrUnresolved) {
						e.X.Log.Warn("rlock: a write whose outcome was unknown did not run, and sending it again failed",
							"object", c.Name, "script", c.Script.String(), "err", err)
					}
				case !o.Ran:
					e.X.Log.Info("rlock: a call whose outcome was unknown did not run", "object", c.Name, "script", c.Script.String())
				}
				return
			}
			var perm *permanentError
			if errors.As(err, &perm) {
				e.X.Log.Warn("rlock: cannot settle a lost reply; a permit it took, if it ran, stays taken (a permit with a lease comes back when it ends)",
					"object", c.Name, "script", c.Script.String(), "seq", sq, "record", record, "err", err)
				return
			}
			select {
			case <-time.After(bo.Next()):
			case <-e.closing:
			}
		}
	}()
}

// SyncResync is the replica sync of a recorded write that ran but that no
// replica acknowledged: it waits again (never resending the script) and
// returns ErrNoSyncedReplicas if none ever acknowledged.
func (e *Engine) SyncResync(ctx context.Context, name string, r Reply) error {
	return e.resync(ctx, name, r)
}

// fencedStatus reports whether res is the status FENCED (sync_prelude.lua),
// without the error an integer reply's ToString would allocate.
func fencedStatus(res rueidis.RedisResult) bool {
	m, err := res.ToMessage()
	if err != nil || !m.IsString() {
		return false
	}
	s, _ := m.ToString()
	return s == "FENCED"
}
