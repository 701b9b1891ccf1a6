package rlock

import (
	"context"
	"fmt"

	"github.com/goredisson/locks/internal/hold"
)

// HoldContext returns a copy of ctx that is cancelled when the calling
// owner's hold on the lock ends, with a cause (context.Cause) that says
// why:
//   - ErrLockLost: the watchdog found the hold gone (expired,
//     force-unlocked, Redis lost it) or could not renew it before the lease
//     could run out (the report comes before the lease ends); this client
//     force-unlocked it; an Unlock found it gone; or an Unlock's outcome
//     stayed unknown, which stops renewal.
//   - ErrLeaseExpired: a hold with a fixed lease reached its end.
//   - ErrUnlocked: the owner's last Unlock released it; the context is
//     done before that Unlock returns.
//   - ErrClosed: the Client was closed.
//
// Pass it to the work done under the lock, so that the work stops when the
// lock stops protecting it. It fails with ErrNotHeld when the owner does not
// hold the lock; when the hold ends during the call, the error wraps the
// cause too (errors.Is(err, ErrLeaseExpired), say). It costs one round trip (HEXISTS, to confirm the hold
// against Redis); resources are freed when the context ends. Other than
// an Unlock's, the cancellations run on a goroutine of the Client's, never
// the caller's nor the renewal's.
func (l *base) HoldContext(ctx context.Context) (context.Context, error) {
	if l.err != nil {
		return nil, l.err
	}
	k := hold.Key{Kind: l.spec.Kind, Name: l.name, Field: l.field(ctx)}
	hctx, cancel := context.WithCancelCause(ctx)
	id, ok, err := l.c.table.Watch(k, cancel)
	if err != nil {
		cancel(err)
		return nil, err
	}
	if !ok {
		cancel(ErrNotHeld)
		return nil, fmt.Errorf("%w: %q", ErrNotHeld, l.name)
	}
	context.AfterFunc(hctx, func() { l.c.table.Unwatch(k, id) })
	var held bool
	// Under hctx: a hold that ends while the check is retried ends it.
	err = l.c.read(hctx, func(ctx context.Context) (err error) {
		held, err = l.c.rc.Do(ctx, l.c.rc.B().Hexists().Key(l.name).Field(k.Field).Build()).AsBool()
		return err
	})
	if err != nil {
		if hctx.Err() != nil && ctx.Err() == nil {
			// The hold ended during the check: not held, and why.
			cause := context.Cause(hctx)
			return nil, fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, cause)
		}
		cancel(err)
		return nil, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	if !held {
		cancel(ErrNotHeld)
		return nil, fmt.Errorf("%w: %q", ErrNotHeld, l.name)
	}
	return hctx, nil
}
