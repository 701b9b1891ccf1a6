package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/engine"
	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/scripts"
)

// Locker is what every lock of this package does: the plain, spin, fenced
// and non-reentrant locks, and the read and write locks of a read-write
// lock. The owner of each call is the calling goroutine, or the id set
// with WithOwner on its context.
type Locker interface {
	// Name returns the lock's name, its Redis key.
	Name() string
	// Lock takes the lock with a watchdog lease, waiting until it is free
	// or ctx ends.
	Lock(ctx context.Context) error
	// LockLease takes the lock with a fixed lease, waiting until it is
	// free or ctx ends.
	LockLease(ctx context.Context, lease time.Duration) error
	// TryLock takes the lock if it becomes free within wait (wait <= 0:
	// one attempt), with a fixed lease (lease <= 0: the watchdog's).
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	// Unlock releases one level of the owner's hold.
	Unlock(ctx context.Context) error
	// IsHeld reports whether the owner holds the lock.
	IsHeld(ctx context.Context) (bool, error)
	// HoldContext returns a context that ends when the owner's hold ends.
	HoldContext(ctx context.Context) (context.Context, error)
}

var (
	_ Locker = (*Lock)(nil)
	_ Locker = (*SpinLock)(nil)
	_ Locker = (*FencedLock)(nil)
	_ Locker = (*NonReentrantLock)(nil)
	_ Locker = (*FairLock)(nil)
	_ Locker = (*NonReentrantFairLock)(nil)
	_ Locker = (*ReadLock)(nil)
	_ Locker = (*WriteLock)(nil)
)

// Kinds of holds in the hold table. The plain, spin, fenced and
// non-reentrant locks share one (the same hash field is the same hold);
// the read and write holds of a read-write lock have their own, because
// their renewal differs (read) and their field does (write).
const (
	kindLock  hold.Kind = hold.KindSetsTTL
	kindRead  hold.Kind = 1
	kindWrite hold.Kind = 2
)

// base is what every lock kind shares: its name, its spec for the engine
// and how it is force-unlocked and queried.
type base struct {
	c    *Client
	name string
	kind string // in events: KindLock, KindFairLock, ...
	err  error  // the name's problem, reported by every method
	spec *engine.Spec

	write bool // the owner field ends with ":write"
	// Force unlock: the message published, the mode the hash must have
	// ("" any), and whether anything is published (not for a spin lock).
	forceMsg, forceMode string
	forcePub            bool
	fair                bool // the fair lock's force unlock (PROTOCOL.md 4.7)
	// locked reports IsLocked from Redis; nil: EXISTS.
	locked func(ctx context.Context) (bool, error)
}

func (c *Client) newBase(name, kind string) base {
	return base{c: c, name: name, kind: kind, err: checkName(name, c.cluster), forceMsg: "0", forcePub: true}
}

// Name returns the lock's name, which is its Redis key.
func (l *base) Name() string { return l.name }

// Lock takes the lock, waiting as long as it takes or until ctx ends, with a
// watchdog lease: the key expires after the watchdog timeout unless the
// client keeps renewing it, which it does until the owner's last Unlock.
// Calling Lock again from the same owner re-enters it (a non-reentrant lock
// fails with ErrAlreadyHeld instead).
func (l *base) Lock(ctx context.Context) error {
	_, _, err := l.acquire(ctx, -1, 0)
	return err
}

// LockLease takes the lock like Lock, but with a fixed lease and no
// watchdog: the lock frees itself after lease unless unlocked earlier.
// lease must be at least a millisecond.
func (l *base) LockLease(ctx context.Context, lease time.Duration) error {
	if lease < time.Millisecond {
		return fmt.Errorf("%w: LockLease(%q): lease %v is below 1ms (use Lock for a watchdog lease)", ErrInvalidArgument, l.name, lease)
	}
	_, _, err := l.acquire(ctx, -1, lease)
	return err
}

// TryLock tries to take the lock within wait. With wait <= 0 it makes
// exactly one attempt and does not subscribe. With lease <= 0 the lock gets
// a watchdog lease, otherwise the fixed lease (at least a millisecond). It
// returns false, nil when the wait ran out, and ctx's error when ctx ended
// first.
func (l *base) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	_, ok, err := l.tryLock(ctx, "TryLock", wait, lease)
	return ok, err
}

func (l *base) tryLock(ctx context.Context, op string, wait, lease time.Duration) (int64, bool, error) {
	if lease > 0 && lease < time.Millisecond {
		return 0, false, fmt.Errorf("%w: %s(%q): lease %v is below 1ms", ErrInvalidArgument, op, l.name, lease)
	}
	if wait < 0 {
		wait = 0
	}
	return l.acquire(ctx, wait, lease)
}

// acquire runs the acquire loop of the engine (PROTOCOL.md 2.8) for the
// calling owner.
func (l *base) acquire(ctx context.Context, wait, lease time.Duration) (int64, bool, error) {
	if l.err != nil {
		return 0, false, l.err
	}
	if l.c.closed.Load() {
		return 0, false, ErrClosed
	}
	if l.c.cfg.hooks.Acquire == nil {
		return l.c.eng.AcquireToken(ctx, l.spec, l.field(ctx), wait, lease)
	}
	start := time.Now()
	token, ok, err := l.c.eng.AcquireToken(ctx, l.spec, l.field(ctx), wait, lease)
	l.c.reportAcquire(l.kind, l.name, start, ok, err)
	return token, ok, err
}

// field returns the calling owner's hash field.
func (l *base) field(ctx context.Context) string {
	if l.write {
		return l.c.writeField(ownerOf(ctx))
	}
	return l.c.field(ownerOf(ctx))
}

// Unlock releases one level of the calling owner's hold. After the last
// level the lock is deleted and one waiter (in any process, in any language)
// is woken (a read-write lock's write unlock wakes all; a spin lock
// publishes nothing). It returns an error wrapping ErrNotHeld when the owner
// holds nothing (and then ends the owner's HoldContexts with ErrLockLost if
// this client believed it held), and no renewal of the hold follows a full
// Unlock.
//
// An Unlock is never run twice: a call Redis refused (BUSY, TRYAGAIN, ...)
// is sent again, and a lost reply is settled with a fence key that stops
// the lost call from running later and tells whether it ran. If Redis does
// not answer within the retry budget (or before ctx ends), Unlock returns an
// error wrapping ErrUnresolved, renewal of the hold stops (as Redisson's)
// and the outcome is settled in the background. An Unlock that fails
// without running (Redis refused it until the budget or ctx ran out) also
// stops renewal, as Redisson's does whatever the result: the hold then runs
// out with its lease, and its HoldContexts end with ErrLockLost.
func (l *base) Unlock(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	field := l.field(ctx)
	hook := l.c.cfg.hooks.Release
	if hook == nil {
		_, err := l.c.eng.Unlock(ctx, l.spec, field)
		return err
	}
	since := l.c.table.Since(hold.Key{Kind: l.spec.Kind, Name: l.name, Field: field})
	n, err := l.c.eng.Unlock(ctx, l.spec, field)
	// A release no replica acknowledged still ran: its hold ended.
	ev := ReleaseEvent{Kind: l.kind, Name: l.name, Last: n == 0 && (err == nil || errors.Is(err, ErrNoSyncedReplicas)), Err: err}
	if ev.Last && !since.IsZero() {
		ev.Held = time.Since(since)
	}
	hook(ev)
	return err
}

// ForceUnlock deletes the lock whoever holds it, in any process, and wakes
// waiters. It reports whether the lock existed. First, as Redisson does,
// every hold of this client of the lock's kind stops being renewed and its
// HoldContexts end with ErrLockLost; a hold taken by this client after
// ForceUnlock returned is not affected. A lost reply is resent with the same
// latch key, which makes the resend return the first call's result. A read
// lock's ForceUnlock deletes only a read-locked hash, a write lock's only a
// write-locked one.
func (l *base) ForceUnlock(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	held := l.c.table.AbandonName(l.name, l.spec.Kind, fmt.Errorf("%w: %q was force-unlocked", ErrLockLost, l.name))
	pub := l.c.eng.Publish
	if !l.forcePub {
		pub = ""
	}
	var existed bool
	var err error
	if l.fair {
		existed, err = l.c.eng.ForceDelete(ctx, scripts.FairForceUnlock, l.name,
			func(latch string) []string {
				return []string{l.name, FairQueueName(l.name), FairTimeoutName(l.name), l.spec.Channel, latch}
			},
			[]string{"0", pub}, nowMs())
	} else {
		var mode []string
		if l.forceMode != "" {
			mode = []string{l.forceMode}
		}
		existed, err = l.c.eng.ForceDelete(ctx, scripts.ForceUnlock, l.name,
			func(latch string) []string { return []string{l.name, l.spec.Channel, latch} },
			[]string{l.forceMsg, pub}, mode...)
	}
	if (existed || l.forceMode == "") && (err == nil || errors.Is(err, ErrNoSyncedReplicas)) {
		// Deleted, or there was nothing (of any mode) to delete: every
		// hold this client had on the hash before is gone; one taken by
		// this client since (after the delete) is not touched. A read or
		// write force unlock that found the other mode leaves the hash,
		// and the abandoned holds run out with their leases.
		l.c.table.Zero(held)
	}
	return existed, err
}

// IsLocked reports whether anyone holds the lock (for a read lock: whether
// any reader holds it; for a write lock: whether a writer does).
func (l *base) IsLocked(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	if l.locked != nil {
		return l.locked(ctx)
	}
	var n int64
	err := l.c.read(ctx, func(ctx context.Context) (err error) {
		n, err = l.c.rc.Do(ctx, l.c.rc.B().Exists().Key(l.name).Build()).AsInt64()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	return n == 1, nil
}

// IsHeld reports whether the calling owner holds the lock.
func (l *base) IsHeld(ctx context.Context) (bool, error) {
	n, err := l.HoldCount(ctx)
	return n > 0, err
}

// HoldCount returns how many times the calling owner holds the lock (0 if it
// does not hold it).
func (l *base) HoldCount(ctx context.Context) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	var n int64
	field := l.field(ctx)
	err := l.c.read(ctx, func(ctx context.Context) (err error) {
		n, err = l.c.rc.Do(ctx, l.c.rc.B().Hget().Key(l.name).Field(field).Build()).AsInt64()
		return err
	})
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	return int(n), nil
}

// RemainTTL returns the time left before the lock's key expires,
// TTLNotLocked if nobody holds it, or TTLNoExpiry if its key has no expiry.
func (l *base) RemainTTL(ctx context.Context) (time.Duration, error) {
	if l.err != nil {
		return 0, l.err
	}
	var ms int64
	err := l.c.read(ctx, func(ctx context.Context) (err error) {
		ms, err = l.c.rc.Do(ctx, l.c.rc.B().Pttl().Key(l.name).Build()).AsInt64()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
