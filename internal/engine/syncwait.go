package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/pubsub"
)

// SyncRecheck bounds each wait of a synchronizer between two attempts.
// Redisson's semaphore and latch wait for messages with no time limit; a
// lost message (a reconnect, a failover) then costs this much latency, not
// a hang.
const SyncRecheck = time.Second

// WaitSync is the wait loop of the synchronizers: try; subscribe to
// channel (a live one is joined before the first attempt instead, and the
// next attempt skipped); try again; wait for a message at most min(hint,
// SyncRecheck, time left); repeat, until try succeeds or fails, end passes (zero: no
// limit; end not after now: one attempt, no subscription) or ctx ends
// (ctx's error). try gets the deadline of its call's retries and reports
// ok, or a hint (> 0) of when to look again.
func (e *Engine) WaitSync(ctx context.Context, name, channel string, end time.Time,
	try func(ctx context.Context, deadline time.Time) (ok bool, hint time.Duration, err error)) (bool, error) {
	return e.waitSync(ctx, name, channel, end, func(ctx context.Context, deadline time.Time, _ *pubsub.Sub, _ bool) (bool, time.Duration, error) {
		return try(ctx, deadline)
	})
}

// WaitLatch is WaitSync for a count-down latch: try also gets the
// subscription (nil for the first attempt).
func (e *Engine) WaitLatch(ctx context.Context, name, channel string, end time.Time,
	try func(ctx context.Context, sub *pubsub.Sub) (ok bool, err error)) (bool, error) {
	return e.waitSync(ctx, name, channel, end, func(ctx context.Context, _ time.Time, sub *pubsub.Sub, _ bool) (bool, time.Duration, error) {
		ok, err := try(ctx, sub)
		return ok, 0, err
	})
}

func (e *Engine) waitSync(ctx context.Context, name, channel string, end time.Time,
	try func(ctx context.Context, deadline time.Time, sub *pubsub.Sub, woken bool) (ok bool, hint time.Duration, err error)) (bool, error) {
	if e.Closed() {
		return false, hold.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	start := time.Now()
	first := start.Add(e.Budget)
	if end.After(first) {
		first = end
	}
	var sub *pubsub.Sub
	if end.IsZero() || end.After(start) {
		// A waiter on a channel already subscribed shares it before its
		// first attempt, which then needs no second one (see Join).
		sub = e.Hub.Join(channel)
	}
	defer func() { sub.Release() }()
	ok, hint, err := try(ctx, first, nil, false)
	if ok || err != nil {
		return ok, err
	}
	left := func() time.Duration { return time.Until(end) }
	if !end.IsZero() && left() <= 0 {
		return false, nil
	}
	tried := sub != nil // the last attempt came after the subscription
	if !tried {
		if sub, err = e.subscribe(ctx, name, channel, end); sub == nil {
			return false, err
		}
	}
	woken := false
	for {
		if !tried {
			deadline := end
			if deadline.IsZero() || time.Until(deadline) < e.Budget {
				deadline = time.Now().Add(e.Budget)
			}
			ok, hint, err = try(ctx, deadline, sub, woken)
			if ok || err != nil {
				return ok, err
			}
		}
		tried = false
		d := SyncRecheck
		if hint > 0 && hint < d {
			d = hint
		}
		if !end.IsZero() {
			r := left()
			if r <= 0 {
				return false, nil
			}
			d = min(d, r)
		}
		var err error
		if woken, err = sub.Wait(ctx, d); err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if errors.Is(err, pubsub.ErrClosed) {
				return false, hold.ErrClosed
			}
			return false, fmt.Errorf("rlock: %q: waiting: %w", name, err)
		}
	}
}

// subscribe returns a share of channel's subscription, for a waiter on name
// whose wait ends at end (zero: no limit), bounded by the subscription
// timeout. A nil Sub with a nil error: the wait ended first.
func (e *Engine) subscribe(ctx context.Context, name, channel string, end time.Time) (*pubsub.Sub, error) {
	left := func() time.Duration { return time.Until(end) }
	subTimeout := e.SubscriptionTimeout
	if !end.IsZero() && left() < subTimeout {
		subTimeout = left()
	}
	sctx, cancel := context.WithTimeout(ctx, subTimeout)
	sub, err := e.Hub.Subscribe(sctx, channel)
	cancel()
	if err == nil {
		return sub, nil
	}
	switch {
	case errors.Is(err, pubsub.ErrClosed):
		return nil, hold.ErrClosed
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case !end.IsZero() && left() <= 0:
		return nil, nil
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%w: %q: no subscription to %q within %v", ErrTimeout, name, channel, e.SubscriptionTimeout)
	}
	return nil, fmt.Errorf("rlock: %q: subscribing to %q: %w", name, channel, err)
}
