package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/engine"
	"github.com/goredisson/locks/scripts"
)

// TTL values returned by RemainTTL, as Redis' PTTL reports them.
const (
	TTLNotLocked = -2 * time.Millisecond // the lock key does not exist
	TTLNoExpiry  = -1 * time.Millisecond // the key exists without an expiry
)

// Lock is a reentrant lock in Redisson's RLock format: a Redis hash named
// after the lock whose one field, "<clientId>:<ownerId>", counts the
// owner's nested acquisitions. A Java service that calls
// redisson.getLock(name) on the same Redis sees and respects it, and the
// other way round.
//
// A Lock is safe for use by many goroutines at once. The owner of each call
// is the calling goroutine, or the id set with WithOwner on its context.
type Lock struct {
	c    *Client
	name string
	err  error // the name's problem, reported by every method
	spec *engine.Spec
}

// Name returns the lock's name, which is its Redis key.
func (l *Lock) Name() string { return l.name }

// Lock takes the lock, waiting as long as it takes or until ctx ends, with a
// watchdog lease: the key expires after the watchdog timeout unless the
// client keeps renewing it, which it does until the owner's last Unlock.
// Calling Lock again from the same owner re-enters it.
func (l *Lock) Lock(ctx context.Context) error {
	_, err := l.acquire(ctx, -1, 0)
	return err
}

// LockLease takes the lock like Lock, but with a fixed lease and no
// watchdog: the lock frees itself after lease unless unlocked earlier.
// lease must be at least a millisecond.
func (l *Lock) LockLease(ctx context.Context, lease time.Duration) error {
	if lease < time.Millisecond {
		return fmt.Errorf("%w: LockLease(%q): lease %v is below 1ms (use Lock for a watchdog lease)", ErrInvalidArgument, l.name, lease)
	}
	_, err := l.acquire(ctx, -1, lease)
	return err
}

// TryLock tries to take the lock within wait. With wait <= 0 it makes
// exactly one attempt and does not subscribe. With lease <= 0 the lock gets
// a watchdog lease, otherwise the fixed lease (at least a millisecond). It
// returns false, nil when the wait ran out, and ctx's error when ctx ended
// first.
func (l *Lock) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if lease > 0 && lease < time.Millisecond {
		return false, fmt.Errorf("%w: TryLock(%q): lease %v is below 1ms", ErrInvalidArgument, l.name, lease)
	}
	if wait < 0 {
		wait = 0
	}
	return l.acquire(ctx, wait, lease)
}

// acquire runs the acquire loop of the engine (contract 1.8) for the
// calling owner.
func (l *Lock) acquire(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	if l.c.closed.Load() {
		return false, ErrClosed
	}
	return l.c.eng.Acquire(ctx, l.spec, l.c.field(ownerOf(ctx)), wait, lease)
}

// Unlock releases one level of the calling owner's hold. After the last
// level the lock is deleted and one waiter (in any process, in any language)
// is woken. It returns an error wrapping ErrNotHeld when the owner holds
// nothing (and then ends the owner's HoldContexts with ErrLockLost if this
// client believed it held), and no renewal of the hold follows a full
// Unlock.
//
// An Unlock is never run twice: a call Redis refused (BUSY, TRYAGAIN, ...)
// is sent again, and a lost reply is settled with a fence key that stops
// the lost call from running later and tells whether it ran. If Redis does
// not answer within the retry budget, Unlock returns an error wrapping
// ErrUnresolved, renewal of the hold stops (as Redisson's) and the outcome
// is settled in the background.
func (l *Lock) Unlock(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	_, err := l.c.eng.Unlock(ctx, l.spec, l.c.field(ownerOf(ctx)))
	return err
}

// lockSpec describes the plain lock's scripts to the engine.
func (c *Client) lockSpec(name string) *engine.Spec {
	channel := ChannelName(name)
	publish := c.eng.Publish
	return &engine.Spec{
		Kind:        kindLock,
		Name:        name,
		Channel:     channel,
		Acquire:     scripts.Acquire,
		AcquireKeys: func(dst []string, fence string) []string { return append(dst, name, fence) },
		AcquireArgs: func(dst []string, field, leaseMs, expected string) []string {
			return append(dst, leaseMs, field, expected, engine.FenceTTLArg())
		},
		Unlock:     scripts.Unlock,
		UnlockKeys: func(dst []string, fence string) []string { return append(dst, name, channel, fence) },
		UnlockArgs: func(dst []string, field, leaseMs, expected string) []string {
			return append(dst, "0", leaseMs, field, publish, expected, engine.FenceTTLArg())
		},
	}
}

// ForceUnlock deletes the lock whoever holds it, in any process, and wakes
// one waiter. It reports whether the lock existed. First, as Redisson does,
// every hold of this client on the lock stops being renewed and its
// HoldContexts end with ErrLockLost; a hold taken by this client after
// ForceUnlock returned is not affected. A lost reply is resent with the same
// latch key, which makes the resend return the first call's result.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	held := l.c.table.AbandonName(l.name, fmt.Errorf("%w: %q was force-unlocked", ErrLockLost, l.name))
	existed, err := l.c.eng.ForceDelete(ctx, scripts.ForceUnlock, l.name,
		func(latch string) []string { return []string{l.name, l.spec.Channel, latch} },
		[]string{"0", l.c.eng.Publish})
	if err == nil || errors.Is(err, ErrNoSyncedReplicas) {
		// Deleted: the holds abandoned above are gone; one taken by this
		// client since (after the delete) is not touched.
		l.c.table.Zero(held)
	}
	return existed, err
}

// IsLocked reports whether anyone holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	n, err := l.c.rc.Do(ctx, l.c.rc.B().Exists().Key(l.name).Build()).AsInt64()
	if err != nil {
		return false, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	return n == 1, nil
}

// IsHeld reports whether the calling owner holds the lock.
func (l *Lock) IsHeld(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	ok, err := l.c.rc.Do(ctx, l.c.rc.B().Hexists().Key(l.name).Field(l.c.field(ownerOf(ctx))).Build()).AsBool()
	if err != nil {
		return false, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	return ok, nil
}

// HoldCount returns how many times the calling owner holds the lock (0 if it
// does not hold it).
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.c.rc.Do(ctx, l.c.rc.B().Hget().Key(l.name).Field(l.c.field(ownerOf(ctx))).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	return int(n), nil
}

// RemainTTL returns the time left before the lock expires, TTLNotLocked if
// nobody holds it, or TTLNoExpiry if its key has no expiry.
func (l *Lock) RemainTTL(ctx context.Context) (time.Duration, error) {
	if l.err != nil {
		return 0, l.err
	}
	ms, err := l.c.rc.Do(ctx, l.c.rc.B().Pttl().Key(l.name).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
