package rlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/pubsub"
	"github.com/goredisson/locks/scripts"
	"github.com/goredisson/locks/watchdog"
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
	c         *Client
	name      string
	err       error    // the name's problem, reported by every method
	keys      []string // {name}
	forceKeys []string // {name, channel}
	channel   string
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

// acquire runs Redisson's acquire loop (contract 1.8): try; subscribe; try
// again; wait for a wake-up at most min(ttl, remaining wait); repeat. wait <
// 0 waits forever; wait == 0 makes one attempt.
func (l *Lock) acquire(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	if l.c.closed.Load() {
		return false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	start := time.Now()
	field := l.c.field(ownerOf(ctx))
	ttl, ok, err := l.try(ctx, field, lease, false)
	if ok || err != nil {
		return ok, err
	}
	if wait == 0 {
		return false, nil
	}
	// remaining returns the wait left; only meaningful when wait > 0.
	remaining := func() time.Duration { return wait - time.Since(start) }
	if wait > 0 && remaining() <= 0 {
		return false, nil
	}

	subTimeout := l.c.cfg.subscriptionTimeout
	if wait > 0 && remaining() < subTimeout {
		subTimeout = remaining()
	}
	sctx, cancel := context.WithTimeout(ctx, subTimeout)
	sub, err := l.c.hub.Subscribe(sctx, l.channel)
	cancel()
	if errors.Is(err, pubsub.ErrClosed) {
		return false, ErrClosed
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return false, ctxErr
		}
		if wait > 0 && remaining() <= 0 {
			return false, nil
		}
		return false, fmt.Errorf("rlock: %q: subscribing to %q: %w", l.name, l.channel, err)
	}
	defer sub.Release()

	backoff := 50 * time.Millisecond
	for {
		ttl, ok, err = l.try(ctx, field, lease, true)
		d := time.Duration(-1)
		switch {
		case err != nil && isTransient(err):
			// Redis is unreachable for now (failover, restart): keep
			// waiting, retrying with backoff, while the wait lasts.
			l.c.cfg.logger.Debug("rlock: acquire attempt failed, retrying", "lock", l.name, "err", err)
			d, backoff = backoff, min(2*backoff, time.Second)
		case ok || err != nil:
			return ok, err
		case ttl >= 0:
			d = time.Duration(ttl) * time.Millisecond
			backoff = 50 * time.Millisecond
		}
		if wait > 0 {
			r := remaining()
			if r <= 0 {
				return false, nil
			}
			if d < 0 || r < d {
				d = r
			}
		}
		if _, err := sub.Wait(ctx, d); err != nil {
			if err == ctx.Err() {
				return false, err
			}
			if errors.Is(err, pubsub.ErrClosed) {
				return false, ErrClosed
			}
			return false, fmt.Errorf("rlock: %q: waiting: %w", l.name, err)
		}
	}
}

// try runs the acquire script once (with replica sync, until a replica
// acknowledged it or the attempts ran out). It returns the holder's TTL in
// ms when someone else holds the lock (-1: no expiry). When the lock was
// taken but ctx ended meanwhile, it releases the lock again and returns
// ctx's error.
//
// With resolve, a failed round trip (connection lost, timeout: the script
// may or may not have run) is resolved by asking Redis whether field holds
// the lock now; the caller must know that it did not hold it before (a
// waiter that was told a TTL). An unresolved failure comes back as a
// *transientError, which the caller may retry.
func (l *Lock) try(ctx context.Context, field string, lease time.Duration, resolve bool) (ttl int64, ok bool, err error) {
	leaseMs := l.c.watchdogMs
	if lease > 0 {
		leaseMs = strconv.FormatInt(lease.Milliseconds(), 10)
	}
	args := []string{leaseMs, field}
	for attempt := 1; ; attempt++ {
		cctx, cancel := l.c.cmdCtx(ctx)
		r := l.c.exec(cctx, scripts.Acquire, l.keys, args)
		cancel()
		ttl, err = r.res.AsInt64()
		if err == nil {
			return ttl, false, nil
		}
		if !rueidis.IsRedisNil(err) {
			err = fmt.Errorf("rlock: %q: acquire: %w", l.name, err)
			if !resolve || !isRetryable(r.res.Error()) {
				return 0, false, err
			}
			cctx, cancel := l.c.cmdCtx(ctx)
			held, herr := l.c.rc.Do(cctx, l.c.rc.B().Hexists().Key(l.name).Field(field).Build()).AsBool()
			cancel()
			if herr != nil || !held {
				return 0, false, &transientError{err}
			}
			break // the lost reply was a success
		}
		if !r.unsynced() {
			break
		}
		// Acquired on the master only: a failover now would lose it.
		// Release it and try again, as Redisson does.
		if _, err := l.unlockScript(ctx, field, false); err != nil && !errors.Is(err, ErrNoSyncedReplicas) {
			l.c.cfg.logger.Warn("rlock: releasing an unsynced acquisition failed", "lock", l.name, "err", err)
		}
		if attempt == l.c.cfg.sync.attempts {
			return 0, false, fmt.Errorf("%w: %q: acquire: %d replica(s), %d attempt(s)", ErrNoSyncedReplicas, l.name, r.replicas, attempt)
		}
		if err := l.c.cfg.sync.sleep(ctx); err != nil {
			return 0, false, err
		}
	}
	// Acquired (or re-entered).
	h := watchdog.Hold{Key: l.name, Field: field}
	if lease > 0 {
		l.c.leases.set(h, lease.Milliseconds())
		l.c.leased(h, lease)
	} else if !l.c.wd.Add(h) {
		l.release(ctx, field)
		return 0, false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		// The caller gave up while the reply was on its way: undo.
		l.release(ctx, field)
		return 0, false, err
	}
	return 0, true, nil
}

// transientError is an acquire attempt that failed in transit and did not
// take the lock.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }

func isTransient(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}
func (e *transientError) Unwrap() error { return e.err }

// release undoes one acquisition for a caller that has gone.
func (l *Lock) release(ctx context.Context, field string) {
	if _, err := l.unlock(ctx, field); err != nil {
		l.c.cfg.logger.Warn("rlock: releasing an abandoned acquisition failed; it expires with its lease",
			"lock", l.name, "err", err)
	}
}

// Unlock releases one level of the calling owner's hold. After the last
// level the lock is deleted and one waiter (in any process, in any language)
// is woken. It returns an error wrapping ErrNotHeld when the owner holds
// nothing, and cancels renewal before it returns: no renewal of the hold
// follows an Unlock.
//
// A failed round trip is retried with the same request id; the unlock latch
// then makes the retry return the first attempt's result, so a retried
// Unlock never releases twice nor reports ErrNotHeld for its own release.
func (l *Lock) Unlock(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	_, err := l.unlock(ctx, l.c.field(ownerOf(ctx)))
	return err
}

// unlockScript runs the unlock script, retrying a failed round trip (and,
// if syncRetry, a release no replica acknowledged) with the same request
// id. It returns the script's reply: 1 deleted, 0 still held, or a Redis nil
// error when field does not hold the lock.
func (l *Lock) unlockScript(ctx context.Context, field string, syncRetry bool) (int64, error) {
	latch := newLatchName(l.name)
	keys := []string{l.name, l.channel, latch}
	lease := l.c.watchdogMs
	if ms, ok := l.c.leases.get(watchdog.Hold{Key: l.name, Field: field}); ok {
		lease = strconv.FormatInt(ms, 10)
	}
	args := []string{"0", lease, field, l.c.publish, l.c.latchTTL()}
	attempts := max(unlockAttempts, l.c.cfg.sync.attempts)
	for attempt := 1; ; attempt++ {
		cctx, cancel := l.c.cmdCtx(ctx)
		r := l.c.exec(cctx, scripts.Unlock, keys, args)
		cancel()
		res, err := r.res.AsInt64()
		if err == nil || rueidis.IsRedisNil(err) {
			l.c.dropLatch(latch)
		}
		switch {
		case r.unsynced() && err == nil:
			if !syncRetry || attempt >= l.c.cfg.sync.attempts {
				return res, fmt.Errorf("%w: %q: unlock: %d replica(s), %d attempt(s)", ErrNoSyncedReplicas, l.name, r.replicas, attempt)
			}
			if l.c.cfg.sync.sleep(ctx) != nil {
				return res, nil
			}
			continue
		case !isRetryable(err) || attempt >= attempts || ctx.Err() != nil:
			return res, err
		}
		l.c.cfg.logger.Debug("rlock: unlock failed, retrying with the same request id", "lock", l.name, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// unlock releases one level and keeps the client's bookkeeping (watchdog,
// lease, HoldContexts) in step. It returns true when the lock was deleted.
func (l *Lock) unlock(ctx context.Context, field string) (bool, error) {
	h := watchdog.Hold{Key: l.name, Field: field}
	// While the script and its retries run, a renewal that finds the field
	// gone sees this unlock's work, not a lost lock.
	l.c.wd.BeginRelease(h)
	defer l.c.wd.EndRelease(h)
	res, err := l.unlockScript(ctx, field, true)
	if errors.Is(err, ErrNoSyncedReplicas) {
		l.bookUnlock(field, res)
		return res == 1, err
	}
	switch {
	case err == nil:
		l.bookUnlock(field, res)
		return res == 1, nil
	case rueidis.IsRedisNil(err):
		l.c.wd.Drop(h)
		l.c.leases.clear(h)
		return false, fmt.Errorf("%w: attempt to unlock %q, not locked by the calling owner (node id %s, owner id %s)",
			ErrNotHeld, l.name, l.c.id, field[len(l.c.id)+1:])
	default:
		// Unknown outcome: stop renewing, as Redisson does; the lock then
		// frees itself within its lease if this unlock did not run.
		l.c.wd.Remove(h)
		l.c.leases.clear(h)
		return false, fmt.Errorf("rlock: %q: unlock: %w", l.name, err)
	}
}

// bookUnlock records a successful unlock script result.
func (l *Lock) bookUnlock(field string, res int64) {
	h := watchdog.Hold{Key: l.name, Field: field}
	l.c.wd.Remove(h)
	if res == 1 {
		l.c.leases.clear(h)
		if l.c.holds.watching() {
			l.c.holds.fire(h, fmt.Errorf("%w: %q", ErrUnlocked, l.name))
		}
	} else {
		ms, ok := l.c.leases.get(h)
		if !ok {
			ms = l.c.cfg.watchdogTimeout.Milliseconds()
		}
		l.c.leased(h, time.Duration(ms)*time.Millisecond)
	}
}

// ForceUnlock deletes the lock whoever holds it, in any process, and wakes
// one waiter. It reports whether the lock existed. Every hold of this client
// on the lock stops being renewed, and their HoldContexts end with
// ErrLockLost.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	cctx, cancel := l.c.cmdCtx(ctx)
	res, err := l.c.exec(cctx, scripts.ForceUnlock, l.forceKeys, []string{"0", l.c.publish}).res.AsInt64()
	cancel()
	for _, h := range l.c.wd.DropKey(l.name) {
		l.c.holds.fire(h, fmt.Errorf("%w: %q was force-unlocked", ErrLockLost, l.name))
	}
	l.c.holds.fireKey(l.name, fmt.Errorf("%w: %q was force-unlocked", ErrLockLost, l.name))
	l.c.leases.clearKey(l.name)
	if err != nil {
		return false, fmt.Errorf("rlock: %q: force unlock: %w", l.name, err)
	}
	return res == 1, nil
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
