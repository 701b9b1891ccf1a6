package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/scripts"
)

// ErrNotHeld: the owner does not hold the lock; rlock exports it.
var ErrNotHeld = errors.New("rlock: lock not held by the calling owner")

// ErrAlreadyHeld: a non-reentrant lock's owner tried to take it again;
// rlock exports it.
var ErrAlreadyHeld = errors.New("rlock: non-reentrant lock already held by the calling owner")

// Spec describes one lock kind for the acquire loop and the unlock: its
// scripts and how to call them. Every lock script follows one reply
// encoding (see scripts/acquire.lua and scripts/unlock.lua) and checks its
// fence key, the last of its keys.
type Spec struct {
	Kind    hold.Kind
	Name    string // the lock hash
	Channel string // where unlocks publish; waiters subscribe to it

	// Spin, when set, makes waiters poll with its back-off instead of
	// subscribing to Channel (the spin lock, PROTOCOL.md 6): it returns a
	// fresh back-off for one wait.
	Spin func() BackOff

	// TokenKey is a fenced lock's token key: a lost grant's reply is
	// settled with its value (see scripts/fence.lua).
	TokenKey string
	// UnlockTTL: a partial unlock restores no lease (a read lock's): its
	// reply tells the TTL the owner's holds have left; after a lost reply
	// the fence reads it from the keys under Prefix(field).
	UnlockTTL bool
	Prefix    func(field string) string

	// WaitChannel, when set, returns the channel a waiter of field
	// subscribes to (the fair lock's per-waiter channel, PROTOCOL.md 4.1);
	// otherwise waiters subscribe to Channel.
	WaitChannel func(field string) string
	// Cancel, when set, leaves the wait queue after a wait that may have
	// queued the owner ended without the lock (the fair lock's
	// acquireFailed, PROTOCOL.md 4.5); CancelKeys and CancelArgs build its
	// call, whose fence key is the last key. It must be idempotent while
	// the owner does not queue again: after a lost reply it is fenced and
	// sent again.
	Cancel     *scripts.Script
	CancelKeys func(dst []string, fence string) []string
	CancelArgs func(dst []string, field string, wait time.Duration) []string

	Acquire *scripts.Script
	// AcquireKeys and AcquireArgs append an acquire call's keys and
	// arguments to dst, for one owner field and fence key, and one
	// attempt (the script refuses to act on a count other than the
	// expected one; see scripts/acquire.lua). The fence key is the last
	// key.
	AcquireKeys func(dst []string, field, fence string) []string
	AcquireArgs func(dst []string, a Attempt) []string

	Unlock *scripts.Script
	// UnlockKeys and UnlockArgs append an unlock call's keys and
	// arguments; leaseMs is the lease a partial unlock restores, expected
	// as for AcquireArgs.
	UnlockKeys func(dst []string, field, fence string) []string
	UnlockArgs func(dst []string, field, leaseMs, expected string) []string
}

// Attempt is what an acquire call is built from.
type Attempt struct {
	Field    string
	LeaseMs  string // the lease in ms
	Expected string // the owner's count the caller expects
	// Wait is the caller's wait (< 0: unlimited); Once marks a single
	// attempt with no wait (a fair lock does not queue it).
	Wait time.Duration
	Once bool
}

// BackOff gives the delays between a spin lock's attempts.
type BackOff interface{ Next() time.Duration }

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// Unlock releases one level of field's hold. It returns the count left (0:
// released) and an error wrapping ErrNotHeld when field holds nothing. No
// renewal of the hold is sent once Unlock returns, when the count left is 0
// or the outcome is unknown (ErrUnresolved: renewal stops, as Redisson's,
// and the outcome is settled in the background).
func (e *Engine) Unlock(ctx context.Context, s *Spec, field string) (int, error) {
	h, err := e.Table.Use(ctx, hold.Key{Kind: s.Kind, Name: s.Name, Field: field})
	if err != nil {
		return 0, err
	}
	n, err, keep := e.unlockHeld(ctx, s, h)
	if !keep {
		e.Table.Done(h)
	}
	return n, err
}

// unlockHeld is Unlock for a caller holding h's operation slot. keep
// reports that the slot was handed to background settling.
func (e *Engine) unlockHeld(ctx context.Context, s *Spec, h *hold.Hold) (count int, err error, keep bool) {
	t := e.Table
	field := h.Key().Field
	t.BeginRelease(h)
	defer t.EndRelease(h)
	deadline := time.Now().Add(e.Budget)
	var stales int    // refusals that found another count than the caller's
	var stale Backoff // the pause before the next of them
	// gaveUp is an unlock that ends without having run: as Redisson,
	// renewal stops whatever the unlock's result.
	gaveUp := func(err error) (int, error, bool) {
		if t.Count(h) > 0 {
			t.Abandon(h, fmt.Errorf("%w: %q: an unlock failed, renewal stopped: %w", hold.ErrLockLost, s.Name, err))
		}
		return 0, fmt.Errorf("rlock: %q: unlock: %w", s.Name, err), false
	}
	for attempt := 1; ; attempt++ {
		if attempt > 1 && time.Now().After(deadline) {
			return gaveUp(fmt.Errorf("%w: the hold kept changing", ErrTimeout))
		}
		before := t.Count(h)
		call := &Call{Script: s.Unlock, Name: s.Name, Field: field, Token: s.TokenKey, Stop: ctx.Done(), Forms: FormInt | FormStale}
		if s.UnlockTTL {
			call.Forms |= FormPair // a partial read unlock: {count, ttl}
		}
		if s.Prefix != nil {
			call.Prefix = s.Prefix(field)
		}
		call.Keys = s.UnlockKeys(call.keys[:0], field, h.Fence(NewFence))
		call.Args = s.UnlockArgs(call.args[:0], field, e.leaseMs(t.Lease(h)), strconv.Itoa(before))
		sent := time.Now()
		out, err := e.Exactly(ctx, deadline, call)
		if err != nil || out.Fenced {
			h.BurnFence()
		}
		if errors.Is(err, ErrUnresolved) {
			cause := fmt.Errorf("%w: %q: the outcome of an unlock is unknown, renewal stopped: %w", hold.ErrLockLost, s.Name, err)
			t.Abandon(h, cause)
			e.Later(h, call, func(o Outcome) bool {
				if n, ran, _ := settledUnlock(t, h, before, o); ran {
					e.released(s, h, n, sent, o)
				}
				return false
			})
			return 0, fmt.Errorf("rlock: %q: unlock: %w", s.Name, err), true
		}
		if err != nil {
			// It did not run (refused until the budget or ctx ran out, or
			// failed for good): the hold runs out with its lease.
			return gaveUp(err)
		}
		if out.Fenced {
			n, ran, gone := settledUnlock(t, h, before, out)
			switch {
			case ran:
				e.released(s, h, n, sent, out)
				if r := e.syncSettled(ctx, s.Name); r.Unsynced() {
					return n, e.resync(ctx, s.Name, r), false
				}
				return n, nil, false
			case gone:
				return 0, e.notHeld(s, field), false
			case out.Unexpected != nil:
				return gaveUp(fmt.Errorf("%w (it did not run)", out.Unexpected))
			}
			continue // it did not run and now never will: send it again
		}
		if c, isStale := Stale(out.Reply); isStale {
			h.BurnFence()
			t.Observe(h, c) // a hold that is gone ends with ErrLockLost
			if err := e.staleAgain(ctx, &stales, &stale); err != nil {
				return gaveUp(err)
			}
			continue
		}
		if c, ttl, ok := Pair(out.Reply); ok && s.UnlockTTL {
			// A partial read unlock: the hash lives ttl more.
			t.ReleasedTTL(h, c, sent, out.Recv, time.Duration(ttl)*time.Millisecond)
			if out.Reply.Unsynced() {
				return c, e.resync(ctx, s.Name, out.Reply), false
			}
			return c, nil, false
		}
		r, err := out.Reply.Int()
		if err != nil {
			return 0, fmt.Errorf("rlock: %q: unlock: unexpected reply: %w", s.Name, err), false
		}
		switch {
		case r >= 0:
			t.Released(h, int(r), sent, out.Recv)
			if out.Reply.Unsynced() {
				return int(r), e.resync(ctx, s.Name, out.Reply), false
			}
			return int(r), nil, false
		case r == -1:
			return 0, e.notHeld(s, field), false
		default: // -2: fenced on a key that should have been fresh
			h.BurnFence()
			return 0, fmt.Errorf("rlock: %q: unlock: unexpected reply %d", s.Name, r), false
		}
	}
}

// staleAgain is the pause before a call resent after a refusal that found
// another count than the caller's: none after the first (the hold changed
// once, behind its back: expired, force-unlocked), a growing back-off
// after each next one, which only a count that keeps changing (or a
// server that answers so) brings, so that it cannot spin on Redis.
func (e *Engine) staleAgain(ctx context.Context, n *int, bo *Backoff) error {
	if *n++; *n == 1 {
		return nil
	}
	return e.pause(ctx, bo.Next())
}

// released records a settled unlock that ran and left count n.
func (e *Engine) released(s *Spec, h *hold.Hold, n int, sent time.Time, o Outcome) {
	if s.UnlockTTL && n > 0 {
		// The hash TTL at the fence bounds the hold left.
		e.Table.ReleasedTTL(h, n, o.Sent, o.Recv, o.TTL)
		return
	}
	e.Table.Released(h, n, sent, o.Recv)
}

// settledUnlock decides a settled unlock call that expected the count
// before: it ran exactly when the count is one less. gone: the owner holds
// nothing now (and the call, if it did not run, has nothing to release).
func settledUnlock(t *hold.Table, h *hold.Hold, before int, o Outcome) (count int, ran, gone bool) {
	switch {
	case o.Refused:
		t.Observe(h, o.Count)
		return 0, false, false // resend with the observed count
	case before > 0 && o.Count == before-1:
		return o.Count, true, false
	case o.Count == before && before > 0:
		return 0, false, false
	}
	t.Observe(h, o.Count)
	return 0, false, o.Count == 0
}

func (e *Engine) notHeld(s *Spec, field string) error {
	id := field
	if len(e.ClientID) < len(field) {
		id = field[len(e.ClientID)+1:]
	}
	return fmt.Errorf("%w: attempt to unlock %q, not locked by the calling owner (node id %s, owner id %s)",
		ErrNotHeld, s.Name, e.ClientID, id)
}

// syncSettled is the replica sync of a write that a fence settled as run:
// the fence call is unsynced, so nothing yet says a replica has the write.
// It waits once for the replicas (a write after the settled one, so its
// acknowledgement covers it); the zero Reply when sync is off.
func (e *Engine) syncSettled(ctx context.Context, name string) Reply {
	if !e.X.Sync.Enabled {
		return Reply{}
	}
	acked, replicas, err := e.X.Resync(ctx, name, NewFence(name))
	return Reply{Class: Done, Acked: acked, Replicas: replicas, SyncErr: err}
}

// resync is the replica sync of a write that ran but that no replica
// acknowledged: it waits again for the replicas (never resending the
// script) up to the sync attempts, and returns ErrNoSyncedReplicas if none
// ever acknowledged.
func (e *Engine) resync(ctx context.Context, name string, r Reply) error {
	rs := &e.X.Sync
	acked, replicas, err := r.Acked, r.Replicas, r.SyncErr
	for attempt := 1; attempt < rs.Attempts && (err != nil || acked == 0) && !SyncRefused(err); attempt++ {
		if serr := rs.Sleep(ctx); serr != nil {
			break
		}
		acked, replicas, err = e.X.Resync(ctx, name, NewFence(name))
		if replicas == 0 && err == nil {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNoSyncedReplicas, name, err)
	}
	if acked == 0 {
		return fmt.Errorf("%w: %q: %d replica(s), %d attempt(s)", ErrNoSyncedReplicas, name, replicas, rs.Attempts)
	}
	return nil
}

// Expire sets the TTL of field's hold to lease while field holds it (the
// PEXPIRE of a MultiLock member, scripts/expire.lua) and records the new
// lease. It reports whether field held it. The call is fenced: after a
// lost reply it is fenced (a late copy can then never shorten a hold taken
// again since) and sent again, within the budget; the record counts the
// lease from the first send, which ends no later than any run.
func (e *Engine) Expire(ctx context.Context, s *Spec, field string, lease time.Duration) (bool, error) {
	t := e.Table
	h, err := t.Use(ctx, hold.Key{Kind: s.Kind, Name: s.Name, Field: field})
	if err != nil {
		return false, err
	}
	defer t.Done(h)
	if t.Count(h) == 0 {
		return false, nil
	}
	first := time.Now()
	deadline := first.Add(e.Budget)
	var bo Backoff
	for {
		call := &Call{Script: scripts.Expire, Name: s.Name, Field: field, Stop: ctx.Done(), Forms: FormInt}
		call.Keys = append(call.keys[:0], s.Name, h.Fence(NewFence))
		call.Args = append(call.args[:0], field, ms(lease))
		out, err := e.Exactly(ctx, deadline, call)
		if err != nil || out.Fenced {
			h.BurnFence()
		}
		if err != nil {
			// Refused until the budget, or unknown: the hold keeps the
			// longer lease it was taken with (the caller releases it).
			return false, fmt.Errorf("rlock: %q: expire: %w", s.Name, err)
		}
		if out.Fenced {
			if out.Unexpected != nil {
				// Idempotent: sent again, after a back-off, as whatever
				// answered so may well answer so again.
				d := bo.Next()
				if time.Now().Add(d).After(deadline) {
					return false, fmt.Errorf("rlock: %q: expire: %w", s.Name, out.Unexpected)
				}
				if err := sleep(ctx, d); err != nil {
					return false, err
				}
				continue
			}
			if time.Now().After(deadline) {
				return false, fmt.Errorf("rlock: %q: expire: %w: the reply was lost", s.Name, ErrTimeout)
			}
			continue // it ran or never will: idempotent, send it again
		}
		n, err := out.Reply.Int()
		switch {
		case err != nil || n < 0:
			return false, fmt.Errorf("rlock: %q: expire: unexpected reply %v", s.Name, out.Reply.Res)
		case n == 0:
			t.Observe(h, 0)
			return false, nil
		}
		t.Leased(h, lease, first, out.Recv)
		return true, nil
	}
}
