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

// Spec describes one lock kind for the acquire loop and the unlock: its
// scripts and how to call them. Every lock script follows one reply
// encoding (see scripts/acquire.lua and scripts/unlock.lua) and checks its
// fence key, the last of its keys.
type Spec struct {
	Kind    hold.Kind
	Name    string // the lock hash
	Channel string // where unlocks publish; waiters subscribe to it

	Acquire *scripts.Script
	// AcquireKeys and AcquireArgs build an acquire call for one fence key,
	// owner field and lease in ms.
	AcquireKeys func(fence string) []string
	AcquireArgs func(field, leaseMs string) []string

	Unlock *scripts.Script
	// UnlockKeys and UnlockArgs build an unlock call; leaseMs is the lease
	// a partial unlock restores.
	UnlockKeys func(fence string) []string
	UnlockArgs func(field, leaseMs string) []string
}

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
	before := t.Count(h)
	t.BeginRelease(h)
	defer t.EndRelease(h)
	deadline := time.Now().Add(e.Budget)
	for {
		fence := NewFence(s.Name)
		call := &Call{Script: s.Unlock, Keys: s.UnlockKeys(fence), Args: s.UnlockArgs(field, ms(t.Lease(h))), Name: s.Name, Field: field}
		sent := time.Now()
		out, err := e.Exactly(ctx, deadline, call)
		if errors.Is(err, ErrUnresolved) {
			cause := fmt.Errorf("%w: %q: the outcome of an unlock is unknown, renewal stopped: %w", hold.ErrLockLost, s.Name, err)
			t.Abandon(h, cause)
			e.Later(h, call, func(n int) bool {
				if n < before || before == 0 {
					t.Released(h, n, sent)
				}
				return false
			})
			return 0, fmt.Errorf("rlock: %q: unlock: %w", s.Name, err), true
		}
		if err != nil {
			return 0, fmt.Errorf("rlock: %q: unlock: %w", s.Name, err), false
		}
		if out.Fenced {
			if out.Count == before && before > 0 {
				continue // it did not run and now never will: send it again
			}
			t.Released(h, out.Count, sent)
			return out.Count, nil, false
		}
		r, err := out.Reply.Int()
		if err != nil {
			return 0, fmt.Errorf("rlock: %q: unlock: unexpected reply: %w", s.Name, err), false
		}
		switch {
		case r >= 0:
			t.Released(h, int(r), sent)
			if out.Reply.Unsynced() {
				return int(r), e.resync(ctx, s.Name, out.Reply), false
			}
			return int(r), nil, false
		case r == -1:
			if before > 0 {
				// This client's record says it held: something else
				// ended the hold (a force unlock, its expiry).
				t.End(h, fmt.Errorf("%w: %q: no longer held when its owner unlocked it (force-unlocked or expired)", hold.ErrLockLost, s.Name))
			}
			id := field
			if len(e.ClientID) < len(field) {
				id = field[len(e.ClientID)+1:]
			}
			return 0, fmt.Errorf("%w: attempt to unlock %q, not locked by the calling owner (node id %s, owner id %s)",
				ErrNotHeld, s.Name, e.ClientID, id), false
		default:
			return 0, fmt.Errorf("rlock: %q: unlock: unexpected reply %d", s.Name, r), false
		}
	}
}

// resync is the replica sync of a write that ran but that no replica
// acknowledged: it waits again for the replicas (never resending the
// script) up to the sync attempts, and returns ErrNoSyncedReplicas if none
// ever acknowledged.
func (e *Engine) resync(ctx context.Context, name string, r Reply) error {
	rs := &e.X.Sync
	acked, replicas, err := r.Acked, r.Replicas, r.SyncErr
	for attempt := 1; attempt < rs.Attempts && (err != nil || acked == 0); attempt++ {
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
