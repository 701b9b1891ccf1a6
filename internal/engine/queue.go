package engine

import (
	"context"
	"errors"
	"time"

	"github.com/goredisson/locks/internal/hold"
)

// cancelWait leaves a fair lock's wait queue (s.Cancel, contract 3.5) for
// a wait of field that ended without the lock, whatever ended it: it is
// not bounded by ctx (which may have ended) but by the budget and Close.
// The call is idempotent while the owner does not queue again, and the
// owner's operation slot, held throughout, keeps it from queueing again:
// a lost reply is fenced (so the lost call can no longer run) and the call
// sent again. If Redis cannot be reached within the budget, the settling
// goes on in the background, still holding the slot; the entry, if it was
// never removed, is dropped by the others' stale cleanup once its
// reservation ends, as a dead Redisson waiter's is.
func (e *Engine) cancelWait(ctx context.Context, s *Spec, field string, wait time.Duration) {
	uctx, cancel := context.WithTimeout(e.bgCtx, e.Budget)
	defer cancel()
	h, err := e.Table.Use(uctx, hold.Key{Kind: s.Kind, Name: s.Name, Field: field})
	if err != nil {
		return
	}
	if c := e.sendCancel(context.WithoutCancel(ctx), s, h, field, wait, time.Now().Add(e.Budget)); c != nil {
		e.Later(h, c, func(Outcome) bool {
			// Fenced: the lost call ran or never will. Send it again.
			e.sendCancel(e.bgCtx, s, h, field, wait, time.Now().Add(e.Budget))
			return false
		})
		return
	}
	e.Table.Done(h)
}

// sendCancel sends the cancel call until it has run, fencing and resending
// after a lost reply. It returns the last call when its outcome is still
// unknown at deadline (nil otherwise: done, or failed for good).
func (e *Engine) sendCancel(ctx context.Context, s *Spec, h *hold.Hold, field string, wait time.Duration, deadline time.Time) *Call {
	for {
		call := &Call{Script: s.Cancel, Name: s.Name, Field: field}
		call.Keys = s.CancelKeys(call.keys[:0], h.Fence(NewFence))
		call.Args = s.CancelArgs(call.args[:0], field, wait)
		out, err := e.Exactly(ctx, deadline, call)
		if err != nil || out.Fenced {
			h.BurnFence()
		}
		switch {
		case err == nil && out.Fenced:
			if time.Now().After(deadline) {
				return nil
			}
			continue // the lost call ran or never will: send it again
		case err == nil:
			return nil
		case errors.Is(err, ErrUnresolved):
			return call
		default:
			if !e.Closed() {
				e.X.Log.Warn("rlock: leaving a fair lock's queue failed; the entry is dropped when its reservation ends", "lock", s.Name, "err", err)
			}
			return nil
		}
	}
}
