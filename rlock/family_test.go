package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// TestFencedTokens is Redisson's testTokenIncrease: every grant, re-entry
// and plain Lock included, increments the token.
func TestFencedTokens(t *testing.T) {
	e := newEnv(t)
	c, other := e.client(), e.client()
	ctx := context.Background()
	l := c.FencedLock("fenced")
	tok, err := l.Token(ctx)
	require.NoError(t, err)
	assert.Zero(t, tok, "no token issued yet")

	tok, err = l.LockAndGetToken(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), tok)
	require.NoError(t, l.Unlock(ctx))
	tok, err = l.LockAndGetToken(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), tok)
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, l.Lock(ctx))
	tok, err = l.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(3), tok, "a plain Lock increments the token")
	require.NoError(t, l.LockLease(ctx, 10*time.Second))
	tok, err = l.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), tok, "a re-entry increments the token")
	tok, ok, err := l.TryLockAndGetToken(ctx, 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(5), tok)
	n, err := l.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n)

	// Another owner: not granted, no token issued.
	tok, ok, err = other.FencedLock("fenced").TryLockAndGetToken(ctx, 100*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Zero(t, tok)
	tok, err = l.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(5), tok)
	for range 3 {
		require.NoError(t, l.Unlock(ctx))
	}
	tok, ok, err = other.FencedLock("fenced").TryLockAndGetToken(ctx, 0, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(6), tok)
	require.NoError(t, other.FencedLock("fenced").Unlock(ctx))
	assert.Equal(t, "6", mustStr(t, e, rlock.TokenName("fenced")))
	assert.Equal(t, rlock.TTLNoExpiry, e.pttl(rlock.TokenName("fenced")), "the token key never expires")
	// A plain Lock on the same name shares the hold and issues no token.
	require.NoError(t, c.Lock("fenced").Lock(ctx))
	require.NoError(t, l.Lock(ctx))
	n, err = l.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, c.Lock("fenced").Unlock(ctx))
	assert.Zero(t, c.Stats().Holds)
}

func mustStr(t *testing.T, e *env, key string) string {
	s, err := e.do("GET", key).ToString()
	require.NoError(t, err)
	return s
}

// TestNonReentrant is Redisson's RedissonNonReentrantLockTest.
func TestNonReentrant(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := context.Background()
	l := c.NonReentrantLock("nr")
	require.NoError(t, l.Lock(ctx))
	assert.ErrorIs(t, l.Lock(ctx), rlock.ErrAlreadyHeld)
	_, err := l.TryLock(ctx, 0, 0)
	assert.ErrorIs(t, err, rlock.ErrAlreadyHeld)
	_, err = l.TryLock(ctx, 100*time.Millisecond, time.Second)
	assert.ErrorIs(t, err, rlock.ErrAlreadyHeld)
	// A second lock object of the same name: the same hold.
	l2 := c.NonReentrantLock("nr")
	assert.ErrorIs(t, l2.LockLease(ctx, time.Second), rlock.ErrAlreadyHeld)
	held, err := l2.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	n, err := l.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the count never goes above 1")

	// Another owner blocks and gets it after the one unlock.
	got := make(chan error, 1)
	octx := rlock.WithOwner(ctx, 42)
	go func() { got <- l.Lock(octx) }()
	waitForSubscribers(t, e, rlock.ChannelName("nr"), 1)
	require.NoError(t, l.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not get the lock")
	}
	held, err = l.IsHeld(ctx)
	require.NoError(t, err)
	assert.False(t, held)
	require.NoError(t, l.Unlock(octx))
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
}

// TestSpinLock is Redisson's RedissonSpinLockTest essentials: a waiter
// gets in within the back-off bound, never subscribes, and unlocks publish
// nothing; tryLock(wait) on a lock never released ends at its wait.
func TestSpinLock(t *testing.T) {
	e := newEnv(t)
	c, other := e.client(), e.client()
	ctx := context.Background()
	l := c.SpinLock("spin")
	require.NoError(t, l.Lock(ctx))

	// A raw subscriber sees what is published on the lock's channel.
	sub, err := e.srv.Client()
	require.NoError(t, err)
	defer sub.Close()
	msgs := make(chan string, 16)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = sub.Receive(sctx, sub.B().Subscribe().Channel(rlock.ChannelName("spin")).Build(), func(m rueidis.PubSubMessage) { msgs <- m.Message })
	}()
	waitForSubscribers(t, e, rlock.ChannelName("spin"), 1)

	before := evalCalls(t, e)
	got := make(chan time.Time, 1)
	octx := rlock.WithOwner(ctx, 9)
	w := other.SpinLock("spin")
	go func() {
		if err := w.Lock(octx); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	// The waiter reaches the long back-off steps (1+2+...+64ms: 8 attempts).
	require.Eventually(t, func() bool { return evalCalls(t, e)-before >= 8 }, 10*time.Second, 5*time.Millisecond)
	assert.Zero(t, other.Stats().Subscriptions, "a spin lock never subscribes")
	released := time.Now()
	require.NoError(t, l.Unlock(ctx))
	select {
	case at := <-got:
		assert.Less(t, at.Sub(released), 128*time.Millisecond+100*time.Millisecond, "within one back-off step")
	case <-time.After(5 * time.Second):
		t.Fatal("the spin waiter did not get in")
	}
	// Nothing was published: the first message is the marker sent now.
	require.NoError(t, e.do("PUBLISH", rlock.ChannelName("spin"), "marker").Error())
	select {
	case m := <-msgs:
		assert.Equal(t, "marker", m, "a spin unlock published")
	case <-time.After(5 * time.Second):
		t.Fatal("no marker")
	}

	start := time.Now()
	ok, err := l.TryLock(ctx, 500*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 500*time.Millisecond)
	assert.Less(t, took, 800*time.Millisecond)

	existed, err := l.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, existed)
	require.NoError(t, e.do("PUBLISH", rlock.ChannelName("spin"), "marker2").Error())
	select {
	case m := <-msgs:
		assert.Equal(t, "marker2", m, "a spin force unlock published")
	case <-time.After(5 * time.Second):
		t.Fatal("no marker")
	}
	assert.ErrorIs(t, w.Unlock(octx), rlock.ErrNotHeld)

	// Options.
	_, err = c.SpinLock("spin", rlock.WithConstantBackOff(0)).TryLock(ctx, 0, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = c.SpinLock("spin", rlock.WithExponentialBackOff(10*time.Millisecond, time.Millisecond, 2)).TryLock(ctx, 0, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
	cl := c.SpinLock("spin", rlock.WithConstantBackOff(20*time.Millisecond))
	require.NoError(t, cl.Lock(ctx))
	require.NoError(t, cl.Unlock(ctx))
}

// evalCalls is the server's count of EVALSHA calls.
func evalCalls(t *testing.T, e *env) int64 { return commandCalls(t, e, "evalsha") }

// commandCalls is the server's count of calls of command (lower case).
func commandCalls(t *testing.T, e *env, command string) int64 {
	n, err := redistest.CommandCalls(context.Background(), e.raw, command)
	require.NoError(t, err)
	return n
}
