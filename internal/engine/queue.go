package engine

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/hold"
)

// cancelWait leaves a fair lock's wait queue (s.Cancel, PROTOCOL.md 4.5) for
// a wait of field that ended without the lock, whatever ended it: it is
// not bounded by ctx (which may have ended) but by a command timeout, and
// then goes on in the background, within the budget and until Close.
// The call is idempotent while the owner does not queue again, and the
// owner's operation slot, held throughout, keeps it from queueing again:
// a lost reply is fenced (so the lost call can no longer run) and the call
// sent again. If Redis cannot be reached within the budget, the settling
// goes on in the background, still holding the slot; the entry, if it was
// never removed, is dropped by the others' stale cleanup once its
// reservation ends, as a dead Redisson waiter's is.
func (e *Engine) cancelWait(ctx context.Context, s *Spec, field string, wait time.Duration) error {
	uctx, cancel := context.WithTimeout(e.bgCtx, e.Budget)
	defer cancel()
	h, err := e.Table.Use(uctx, hold.Key{Kind: s.Kind, Name: s.Name, Field: field})
	if err != nil {
		return nil
	}
	// One command timeout in the caller's time (Redis answers at once
	// when it is up); then the budget in the background.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), min(e.Budget, e.X.Timeout))
	defer scancel()
	done, lost, refused := e.sendCancel(sctx, s, h, field, wait)
	if done || refused != nil {
		// A refusal for good (NOPERM) is the caller's to see: the
		// entry stays until its reservation ends.
		e.Table.Done(h)
		return refused
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer e.Table.Done(h)
		if lost != nil {
			if _, err := e.settle(e.bgCtx, time.Now().Add(e.Budget), lost, nil); err != nil {
				e.X.Log.Warn("rlock: leaving a fair lock's queue: outcome unknown; the entry, if any, is dropped when its reservation ends", "lock", s.Name, "err", err)
				return
			}
		}
		e.leaveQueue(s, h, field, wait)
	}()
	return nil
}

// leaveOnClose leaves the queue for a fair waiter whose wait Close ended:
// the Client's table and background are closing, so it sends the cancel
// call with a fresh fence key that nothing writes, within the command
// timeout (Close waits for it that long, and every call is bounded by
// it). The call is idempotent while the owner does not queue again, which
// no caller of a closed Client can: a call that Redis refused (BUSY,
// LOADING, TRYAGAIN, no connection), whose reply was lost, or whose
// connection rueidis closed under it is sent again, after a back-off,
// until one has run or the timeout ends; a copy that runs late finds
// nothing to remove. Two calls in a row that found no connection (refused
// at dial, or the rueidis client closed) end it, so that a Client whose
// Redis is down closes at once. A call that never ran leaves the entry to
// be dropped when its reservation ends, as a crashed process's.
func (e *Engine) leaveOnClose(s *Spec, field string, wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), e.X.Timeout)
	defer cancel()
	call := &Call{Script: s.Cancel, Name: s.Name, Field: field, Forms: FormInt}
	call.Keys = s.CancelKeys(call.keys[:0], NewFence(s.Name))
	call.Args = s.CancelArgs(call.args[:0], field, wait)
	var b Backoff
	mayHaveRun, unreachable := false, 0
	for {
		r := e.X.RunWithin(ctx, call.Script, call.Keys, call.Args)
		if r.Class == Done {
			return
		}
		mayHaveRun = mayHaveRun || r.Class == Unknown
		unreachable++
		if r.Class != Closed && !noConnection(r.Err) {
			unreachable = 0
		}
		if r.Class == Failed || unreachable > 1 || sleep(ctx, b.Next()) != nil {
			msg := "rlock: leaving a fair lock's queue at Close failed; the entry is dropped when its reservation ends"
			if mayHaveRun {
				msg = "rlock: leaving a fair lock's queue at Close: outcome unknown; the entry, if any, is dropped when its reservation ends"
			}
			e.X.Log.Warn(msg, "lock", s.Name, "err", r.Err)
			return
		}
	}
}

// leaveQueue is sendCancel in the background, within the budget, for a
// caller holding h's slot.
func (e *Engine) leaveQueue(s *Spec, h *hold.Hold, field string, wait time.Duration) {
	bctx, cancel := context.WithTimeout(e.bgCtx, e.Budget)
	defer cancel()
	if done, _, refused := e.sendCancel(bctx, s, h, field, wait); !done && !e.Closed() {
		e.X.Log.Warn("rlock: leaving a fair lock's queue failed; the entry, if any, is dropped when its reservation ends", "lock", s.Name, "err", refused)
	}
}

// sendCancel sends the cancel call until it has run (done), fencing and
// resending after a lost reply, while ctx lives. lost is the last call when
// its outcome is unknown (its reply was lost and the fence did not get
// through before ctx ended); refused is Redis' refusal for good (NOPERM,
// ...), which no resend cures.
func (e *Engine) sendCancel(ctx context.Context, s *Spec, h *hold.Hold, field string, wait time.Duration) (done bool, lost *Call, refused error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(e.Budget)
	}
	var bo Backoff
	for {
		call := &Call{Script: s.Cancel, Name: s.Name, Field: field, Stop: ctx.Done(), Forms: FormInt}
		call.Keys = s.CancelKeys(call.keys[:0], h.Fence(NewFence))
		call.Args = s.CancelArgs(call.args[:0], field, wait)
		out, err := e.Exactly(ctx, deadline, call)
		if err != nil || out.Fenced {
			h.BurnFence()
		}
		switch {
		case err == nil && out.Fenced && out.Unexpected != nil:
			// Idempotent: sent again, after a back-off, as whatever
			// answered so may well answer so again.
			d := bo.Next()
			if time.Now().Add(d).After(deadline) {
				return false, nil, out.Unexpected
			}
			if sleep(ctx, d) != nil {
				return false, nil, nil
			}
			continue
		case err == nil && out.Fenced:
			if ctx.Err() != nil {
				return false, nil, nil
			}
			continue // the lost call ran or never will: send it again
		case err == nil:
			return true, nil, nil
		case errors.Is(err, ErrUnresolved):
			return false, call, nil
		case failedForGood(err):
			return false, nil, err // failed for good (a NotRun is resent until ctx ends)
		default:
			return false, nil, nil // refused until ctx ended
		}
	}
}

// failedForGood reports whether err is (or wraps) an error reply of Redis
// that a resend will not cure (NOPERM, WRONGTYPE, ...; not BUSY or
// TRYAGAIN).
func failedForGood(err error) bool {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	class, _ := Classify(context.Background(), re)
	return class == Failed
}
