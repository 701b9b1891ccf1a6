package rlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// FencedLock is Redisson's fenced lock (getFencedLock, PROTOCOL.md 7): a
// reentrant lock on the RLock's data plus a token counter,
// "redisson_lock_token:{<name>}", that every grant increments, re-entry and
// plain Lock/TryLock included, in Go and in Java alike. The token of a
// grant is larger than that of every grant before it, across processes and
// languages.
//
// What a token protects: a holder can pause (GC, a stalled VM) until its
// lease ends and another owner takes the lock; both then believe they hold
// it. Send the token with every write to the resource the lock guards, and
// have the resource refuse a token lower than the highest it has seen: the
// paused holder's late writes are then rejected. The lock alone cannot do
// that; the resource's check is what makes it safe.
//
// The token key never expires; ForceUnlock and Unlock leave it.
//
// Not fair, as Lock: an unlock wakes one waiter, which may lose to an
// owner that arrives meanwhile (TestRedissonFamily/*/FencedTokens,
// TestFaultMatrix/fenced).
type FencedLock struct{ base }

// FencedLock returns the fenced lock called name (Redisson's
// getFencedLock(name)). It is cheap and does no I/O.
func (c *Client) FencedLock(name string) *FencedLock {
	l := &FencedLock{c.newBase(name, KindFencedLock)}
	if l.err == nil {
		l.spec = c.lockSpec(name, lockVariant{fenced: true})
	}
	return l
}

// LockAndGetToken takes the lock like Lock (watchdog lease) and returns
// the token of this grant.
func (l *FencedLock) LockAndGetToken(ctx context.Context) (int64, error) {
	token, _, err := l.acquire(ctx, -1, 0)
	return token, err
}

// TryLockAndGetToken takes the lock like TryLock and returns the token of
// this grant; ok is false (and the token 0) when the wait ran out. Unlike
// Redisson's tryLockAndGetToken, a wait <= 0 makes one attempt (Java waits
// forever for a negative wait).
func (l *FencedLock) TryLockAndGetToken(ctx context.Context, wait, lease time.Duration) (token int64, ok bool, err error) {
	return l.tryLock(ctx, "TryLockAndGetToken", wait, lease)
}

// Token returns the last token issued on the lock (by any client, Go or
// Java), 0 when none has been.
func (l *FencedLock) Token(ctx context.Context) (int64, error) {
	if l.err != nil {
		return 0, l.err
	}
	var n int64
	err := l.c.read(ctx, func(ctx context.Context) (err error) {
		n, err = l.c.rc.Do(ctx, l.c.rc.B().Get().Key(TokenName(l.name)).Build()).AsInt64()
		return err
	})
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("rlock: %q: token: %w", l.name, err)
	}
	return n, nil
}
