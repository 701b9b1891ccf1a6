package rlock

import (
	"context"
	"errors"
	"time"

	"github.com/goredisson/locks/internal/hold"
)

// Hooks receives a Client's lock events, for metrics (the module
// github.com/goredisson/locks/rlockotel turns them into OpenTelemetry
// instruments; the library itself imports no telemetry). Any field may be
// nil. Acquire and Release run on the caller's goroutine when the call
// returns, Renew after each renewal round on the watchdog's goroutines
// (the kinds of lock are renewed side by side, so concurrently), and Lost as
// the handler of WithLostHandler: each must be quick and must not block.
// The events carry the lock's name; an adapter should leave it out of its
// metrics unless asked (names are unbounded).
type Hooks struct {
	Acquire func(AcquireEvent)
	Release func(ReleaseEvent)
	Renew   func(RenewEvent)
	Lost    func(LostEvent)
}

// Outcome says how an acquisition ended.
type Outcome string

// The outcomes of an acquisition.
const (
	Acquired    Outcome = "acquired"     // the lock or permits were taken
	NotAcquired Outcome = "not_acquired" // the wait ran out (or one attempt found it taken)
	Canceled    Outcome = "canceled"     // ctx ended first
	Failed      Outcome = "error"        // any other error
)

// The Kind of each primitive in events.
const (
	KindLock             = "lock"
	KindSpinLock         = "spin"
	KindFencedLock       = "fenced"
	KindNonReentrant     = "nonreentrant"
	KindFairLock         = "fair"
	KindNonReentrantFair = "nonreentrant_fair"
	KindReadLock         = "read"
	KindWriteLock        = "write"
	KindSemaphore        = "semaphore"
	KindPermitSemaphore  = "permit_semaphore"
)

// AcquireEvent is one Lock, LockLease, TryLock or semaphore acquire call
// that reached Redis (calls refused for bad arguments are not reported).
type AcquireEvent struct {
	Kind    string
	Name    string
	Outcome Outcome
	Wait    time.Duration // from the call to its return
	Err     error         // for Canceled and Failed
}

// ReleaseEvent is one Unlock that reached Redis.
type ReleaseEvent struct {
	Kind string
	Name string
	// Last: the owner's last level was released; Held is then the time
	// since the hold began (its first acquisition).
	Last bool
	Held time.Duration
	Err  error
}

// RenewEvent is one watchdog renewal round of the holds of one kind.
type RenewEvent struct {
	Kind    string // KindLock (plain, spin, fenced, non-reentrant, fair), KindReadLock or KindWriteLock
	Renewed int    // holds renewed
	Gone    int    // holds whose field Redis no longer had: lost ones (the Lost hook reports each) or ones whose Unlock raced the renewal
	Failed  int    // holds whose renewal failed (Redis unreachable or refusing)
}

// WithHooks sets the Client's event hooks (see Hooks).
func WithHooks(h Hooks) Option {
	return func(c *config) error {
		c.hooks = h
		return nil
	}
}

// outcomeOf classifies an acquisition's result.
func outcomeOf(ok bool, err error) Outcome {
	switch {
	case err == nil && ok:
		return Acquired
	case err == nil:
		return NotAcquired
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Canceled
	}
	return Failed
}

// reportAcquire calls the Acquire hook, if any.
func (c *Client) reportAcquire(kind, name string, start time.Time, ok bool, err error) {
	if h := c.cfg.hooks.Acquire; h != nil {
		h(AcquireEvent{Kind: kind, Name: name, Outcome: outcomeOf(ok, err), Wait: time.Since(start), Err: err})
	}
}

// renewKind is the event kind of a hold kind.
func renewKind(k hold.Kind) string {
	switch k {
	case kindRead:
		return KindReadLock
	case kindWrite:
		return KindWriteLock
	}
	return KindLock
}
