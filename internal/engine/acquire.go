package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/pubsub"
)

// AcquireToken runs Redisson's acquire loop (PROTOCOL.md 2.8) for field on s: try;
// subscribe; try again; wait for a wake-up at most min(ttl, wait left);
// repeat. A waiter whose channel is subscribed already joins it before its
// first attempt and skips the second. wait < 0 waits until ctx ends; wait == 0 makes one attempt and
// does not subscribe. lease > 0 is a fixed lease, otherwise the watchdog
// renews the hold. It reports whether the lock was taken; ctx's error when
// ctx ended first (an acquisition that raced it is undone).
// It also returns the token a fenced lock's grant issued (0 for other
// kinds).
func (e *Engine) AcquireToken(ctx context.Context, s *Spec, field string, wait, lease time.Duration) (token int64, ok bool, err error) {
	if e.Closed() {
		return 0, false, hold.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	start := time.Now()
	var end time.Time // zero: no wait limit
	if wait >= 0 {
		end = start.Add(wait)
	}
	// The first attempt retries and settles for the budget (or the wait,
	// if longer): a Redis that cannot be reached fails a Lock instead of
	// hanging it. Attempts of a waiter go on while the wait lasts.
	first := end
	if first.IsZero() || first.Before(start.Add(e.Budget)) {
		first = start.Add(e.Budget)
	}
	var queued bool // a queueing attempt may have run
	if s.Cancel != nil && wait != 0 {
		if !e.arriveWaiter() {
			return 0, false, hold.ErrClosed
		}
		defer e.leaving.Done()
		// A fair waiter that leaves without the lock leaves the queue
		// first (whatever ended its wait). After a lost reply the
		// background settling of the attempt does it (see try).
		defer func() {
			if queued && !ok && errors.Is(err, hold.ErrClosed) {
				e.leaveOnClose(s, field, wait)
				return
			}
			if queued && !ok && !errors.Is(err, ErrAlreadyHeld) && !errors.Is(err, ErrUnresolved) {
				if cerr := e.cancelWait(ctx, s, field, wait); cerr != nil {
					if err == nil {
						err = fmt.Errorf("rlock: %q: leaving the fair lock's wait queue: %w", s.Name, cerr)
					} else {
						e.X.Log.Warn("rlock: leaving a fair lock's queue was refused; the entry is dropped when its reservation ends",
							"lock", s.Name, "err", cerr)
					}
				}
			}
		}()
	}
	var channel string
	var sub *pubsub.Sub
	if wait != 0 && s.Spin == nil {
		channel = s.Channel
		if s.WaitChannel != nil {
			channel = s.WaitChannel(field)
		}
		// A waiter on a channel already subscribed shares it before its
		// first attempt, which then needs no second one (see Join).
		sub = e.Hub.Join(channel)
	}
	defer func() { sub.Release() }()
	ttl, token, ok, err := e.try(ctx, s, field, lease, wait, first, &queued)
	if ok || err != nil {
		return token, ok, err
	}
	if wait == 0 {
		return 0, false, nil
	}
	left := func() time.Duration { return time.Until(end) }
	if !end.IsZero() && left() <= 0 {
		return 0, false, nil
	}
	if s.Spin != nil {
		return e.spin(ctx, s, field, lease, end)
	}
	tried := sub != nil // the last attempt came after the subscription
	if !tried {
		if sub, err = e.subscribe(ctx, s.Name, channel, end); sub == nil {
			return 0, false, err
		}
	}
	for {
		if !tried {
			ttl, token, ok, err = e.try(ctx, s, field, lease, wait, end, &queued)
			if ok || err != nil {
				return token, ok, err
			}
		}
		tried = false
		d := time.Duration(-1) // no expiry: wait for a message only
		if ttl >= 0 {
			d = ttl
		}
		if !end.IsZero() {
			r := left()
			if r <= 0 {
				return 0, false, nil
			}
			if d < 0 || r < d {
				d = r
			}
		}
		if _, err := sub.Wait(ctx, d); err != nil {
			if ctx.Err() != nil {
				return 0, false, ctx.Err()
			}
			if errors.Is(err, pubsub.ErrClosed) {
				return 0, false, hold.ErrClosed
			}
			return 0, false, fmt.Errorf("rlock: %q: waiting: %w", s.Name, err)
		}
	}
}

// spin is the wait of a spin lock (PROTOCOL.md 6): attempts with the spec's
// back-off between them, no subscription, until end (zero: until ctx
// ends). A sleep never runs past end.
func (e *Engine) spin(ctx context.Context, s *Spec, field string, lease time.Duration, end time.Time) (int64, bool, error) {
	bo := s.Spin()
	for {
		d := bo.Next()
		if !end.IsZero() {
			r := time.Until(end)
			if r <= 0 {
				return 0, false, nil
			}
			d = min(d, r)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, false, ctx.Err()
		case <-e.closing:
			t.Stop()
			return 0, false, hold.ErrClosed
		}
		_, token, ok, err := e.try(ctx, s, field, lease, -1, end, nil)
		if ok || err != nil {
			return token, ok, err
		}
		if !end.IsZero() && time.Until(end) <= 0 {
			return 0, false, nil
		}
	}
}

// try makes one acquire attempt, exactly: a refused call is resent until
// end (zero: until ctx ends) or the budget, whichever is later, a lost
// reply is settled, an
// acquisition that no replica acknowledged is released and tried again (as
// Redisson), and one that raced the end of ctx is undone. It returns the
// holder's TTL (-1: none) when another owner holds the lock.
//
// queued (when not nil) is set when a queueing attempt of a fair lock (wait
// != 0) may have run: the caller must then leave the queue if it gives up.
func (e *Engine) try(ctx context.Context, s *Spec, field string, lease, wait time.Duration, end time.Time, queued *bool) (ttl time.Duration, token int64, ok bool, err error) {
	t := e.Table
	h, err := t.Use(ctx, hold.Key{Kind: s.Kind, Name: s.Name, Field: field})
	if err != nil {
		return 0, 0, false, err
	}
	keep := false
	defer func() {
		if !keep {
			t.Done(h)
		}
	}()
	leaseMs := e.leaseMs(e.WatchdogTimeout)
	if lease > 0 {
		leaseMs = e.leaseMs(lease)
	}
	// Refused calls are resent, and a lost reply settled, while the wait
	// lasts (a Lock: until ctx ends), and for at least the budget.
	deadline := time.Now().Add(e.Budget)
	if end.IsZero() {
		deadline = time.Now().Add(100 * 365 * 24 * time.Hour) // bounded by ctx
	} else if end.After(deadline) {
		deadline = end
	}
	var stales int    // refusals that found another count than the caller's
	var stale Backoff // the pause before the next of them
	for attempt := 1; ; attempt++ {
		if attempt > 1 && time.Now().After(deadline) {
			return 0, 0, false, fmt.Errorf("rlock: %q: acquire: %w: the hold kept changing", s.Name, ErrTimeout)
		}
		before := t.Count(h)
		call := &Call{Script: s.Acquire, Name: s.Name, Field: field, Token: s.TokenKey, Stop: ctx.Done(), Forms: FormInt | FormStale | FormHeld}
		if s.TokenKey != "" {
			call.Forms |= FormPair // a fenced grant: {count, token}
		}
		call.Keys = s.AcquireKeys(call.keys[:0], field, h.Fence(NewFence))
		call.Attempt = Attempt{Field: field, LeaseMs: leaseMs, Expected: strconv.Itoa(before), Wait: wait, Once: wait == 0}
		call.Remake = s.AcquireArgs
		call.Args = s.AcquireArgs(call.args[:0], call.Attempt)
		sent := time.Now()
		out, err := e.Exactly(ctx, deadline, call)
		if err != nil || out.Fenced {
			h.BurnFence()
		}
		if queued != nil && (err == nil || errors.Is(err, ErrUnresolved)) {
			*queued = true
		}
		if errors.Is(err, ErrUnresolved) && time.Now().Before(deadline) && ctx.Err() == nil {
			// A waiter keeps settling while its wait lasts.
			if o, serr := e.settle(ctx, deadline, call, ctx.Done()); serr == nil {
				if errors.Is(err, ErrUnexpectedReply) {
					o.Unexpected = err
				}
				out, err = o, nil
			}
		}
		if errors.Is(err, ErrUnresolved) {
			keep = true
			e.Later(h, call, func(o Outcome) bool {
				if n, ran := settledAcquire(t, h, before, o); ran && t.Acquired(h, n, lease, sent, o.Recv) {
					// It ran, for a caller that has gone: undo it.
					if e.undo(s, h) {
						return true
					}
				}
				if s.Cancel != nil && wait != 0 {
					// A fair waiter gone: leave the queue, still in the
					// owner's slot (it cannot queue again meanwhile).
					e.leaveQueue(s, h, field, wait)
				}
				return false
			})
			if cerr := ctx.Err(); cerr != nil {
				return 0, 0, false, fmt.Errorf("rlock: %q: acquire: %w (the outcome is settled in the background: %w)", s.Name, cerr, err)
			}
			return 0, 0, false, fmt.Errorf("rlock: %q: acquire: %w", s.Name, err)
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("rlock: %q: acquire: %w", s.Name, err)
		}
		var n int
		if out.Fenced {
			var ran bool
			if n, ran = settledAcquire(t, h, before, out); !ran {
				if out.Unexpected != nil {
					return 0, 0, false, fmt.Errorf("rlock: %q: acquire: %w (it did not run)", s.Name, out.Unexpected)
				}
				continue // it did not run and now never will: send it again
			}
			token = out.Token
			// The fence read the grant unsynced: it counts only once the
			// replicas have it, as a grant that was answered.
			out.Reply = e.syncSettled(ctx, s.Name)
		} else if c, isStale := Stale(out.Reply); isStale {
			h.BurnFence()
			t.Observe(h, c)
			if err := e.staleAgain(ctx, &stales, &stale); err != nil {
				return 0, 0, false, fmt.Errorf("rlock: %q: acquire: %w", s.Name, err)
			}
			continue
		} else if c, tok, granted := Pair(out.Reply); granted {
			n, token = c, tok // a fenced-lock grant
		} else {
			r, err := out.Reply.Int()
			switch {
			case err != nil:
				if st, serr := out.Reply.Res.ToString(); serr == nil && st == "HELD" {
					return 0, 0, false, fmt.Errorf("%w: %q is already held by this owner (a non-reentrant lock)", ErrAlreadyHeld, s.Name)
				}
				return 0, 0, false, fmt.Errorf("rlock: %q: acquire: unexpected reply: %w", s.Name, err)
			case r < 0:
				return time.Duration(-2-r) * time.Millisecond, 0, false, nil
			case r == 0:
				h.BurnFence()
				return 0, 0, false, fmt.Errorf("rlock: %q: acquire: fenced on a fresh fence key", s.Name)
			}
			n = int(r)
		}
		if !t.Acquired(h, n, lease, sent, out.Recv) {
			keep = e.undo(s, h)
			return 0, 0, false, hold.ErrClosed
		}
		if out.Reply.Unsynced() {
			// Acquired on the master only: a failover now would lose it.
			// Release it and try again, as Redisson does.
			if keep = e.undo(s, h); keep {
				return 0, 0, false, fmt.Errorf("%w: %q: acquire: releasing the unsynced acquisition: outcome unknown", ErrNoSyncedReplicas, s.Name)
			}
			if err := e.UnsyncedGiveUp(s.Name, attempt, out.Reply); err != nil {
				return 0, 0, false, err
			}
			if err := e.X.Sync.Sleep(ctx); err != nil {
				return 0, 0, false, err
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			// The caller gave up while the reply was on its way: undo.
			keep = e.undo(s, h)
			return 0, 0, false, err
		}
		return 0, token, true, nil
	}
}

// settledAcquire decides a settled acquire call that expected the count
// before: the script runs only when it finds that count, so it ran exactly
// when the count is one more (a call that refused, or did not run, leaves
// it; a hold deleted behind the client's back leaves 0, which is recorded).
func settledAcquire(t *hold.Table, h *hold.Hold, before int, o Outcome) (count int, ran bool) {
	switch {
	case o.Refused:
		t.Observe(h, o.Count)
	case o.Count == before+1:
		return o.Count, true
	case o.Count != before:
		t.Observe(h, o.Count)
	}
	return 0, false
}

// undo releases one level for a caller that does not want it (gone, or an
// unsynced acquisition); the caller holds h's operation slot. It reports
// whether the slot was handed to background settling (the caller must then
// not give it back).
func (e *Engine) undo(s *Spec, h *hold.Hold) (keep bool) {
	// Not bounded by the caller's context (it has gone), but by Close.
	_, err, keep := e.unlockHeld(e.bgCtx, s, h)
	if err != nil && !errors.Is(err, ErrNoSyncedReplicas) {
		e.X.Log.Warn("rlock: releasing an abandoned acquisition failed; it expires with its lease", "lock", s.Name, "err", err)
		if !keep {
			// Nobody will unlock it: stop renewing, let the lease end it.
			e.Table.Abandon(h, fmt.Errorf("%w: %q: releasing an abandoned acquisition failed: %w", hold.ErrLockLost, s.Name, err))
		}
	}
	return keep
}

// UnsyncedGiveUp returns the error that ends an acquisition whose write no
// replica acknowledged (and which was given back) at its attempt-th try,
// or nil to try again. A WAIT that Redis refused for good (NOPERM) ends it
// at once: trying again cannot cure it.
func (e *Engine) UnsyncedGiveUp(name string, attempt int, r Reply) error {
	if attempt < e.X.Sync.Attempts && !SyncRefused(r.SyncErr) {
		return nil
	}
	if r.SyncErr != nil {
		return fmt.Errorf("%w: %q: acquire: %w", ErrNoSyncedReplicas, name, r.SyncErr)
	}
	return fmt.Errorf("%w: %q: acquire: %d replica(s), %d attempt(s)", ErrNoSyncedReplicas, name, r.Replicas, attempt)
}
