package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
)

// A holder that never unlocks its fixed lease lets a waiter in once the
// lease runs out, with no message (the wait is bounded by the TTL); the old
// holder's Unlock then fails with ErrNotHeld.
func TestExpiryWakesWaiterByTTL(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	holder := rlock.WithOwner(ctx, 1)
	a, b := e.client().Lock("expire"), e.client().Lock("expire")
	require.NoError(t, a.LockLease(holder, 300*time.Millisecond))

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, b.Lock(wctx))
	assert.ErrorIs(t, a.Unlock(holder), rlock.ErrNotHeld)
	require.NoError(t, b.Unlock(ctx))
}

// PROTOCOL.md 2.4 (testRemainTimeToLive2): a partial unlock resets the TTL to
// the holder's lease, not to what was left of it.
func TestPartialUnlockResetsTTLToLease(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := e.client().Lock("partial")
	for range 3 {
		require.NoError(t, l.LockLease(ctx, 10*time.Second))
	}
	require.NoError(t, e.do("PEXPIRE", "partial", "1000").Error()) // as if time had passed
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, l.Unlock(ctx))
	ttl, err := l.RemainTTL(ctx)
	require.NoError(t, err)
	assert.True(t, ttl >= 9*time.Second && ttl <= 10*time.Second, "TTL %v not in [9s, 10s]", ttl)
	require.NoError(t, l.Unlock(ctx))

	// The lease belongs to the hold, not to the Lock value: Go code that
	// calls Client.Lock(name) for each use gets the same TTLs.
	c := e.client()
	for range 3 {
		require.NoError(t, c.Lock("partial2").LockLease(ctx, 10*time.Second))
	}
	require.NoError(t, e.do("PEXPIRE", "partial2", "1000").Error())
	require.NoError(t, c.Lock("partial2").Unlock(ctx))
	ttl = e.pttl("partial2")
	assert.True(t, ttl >= 9*time.Second && ttl <= 10*time.Second, "TTL %v not in [9s, 10s]", ttl)
	require.NoError(t, c.Lock("partial2").Unlock(ctx))
	require.NoError(t, c.Lock("partial2").Unlock(ctx))
	// After the full unlock the next hold starts from the watchdog lease.
	require.NoError(t, c.Lock("partial2").Lock(ctx))
	require.NoError(t, c.Lock("partial2").Lock(ctx))
	require.NoError(t, c.Lock("partial2").Unlock(ctx))
	ttl = e.pttl("partial2")
	assert.True(t, ttl > 29*time.Second, "TTL %v is not the watchdog lease", ttl)
	require.NoError(t, c.Lock("partial2").Unlock(ctx))
}

func TestRemainTTL(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := e.client(rlock.WithWatchdogTimeout(20 * time.Second)).Lock("ttl")
	ttl, err := l.RemainTTL(ctx)
	require.NoError(t, err)
	assert.Equal(t, rlock.TTLNotLocked, ttl)

	require.NoError(t, l.LockLease(ctx, time.Hour))
	ttl, err = l.RemainTTL(ctx)
	require.NoError(t, err)
	assert.True(t, ttl > time.Hour-time.Second && ttl <= time.Hour, "TTL %v", ttl)
	require.NoError(t, l.Unlock(ctx))
	ttl, err = l.RemainTTL(ctx)
	require.NoError(t, err)
	assert.Equal(t, rlock.TTLNotLocked, ttl)

	require.NoError(t, l.Lock(ctx))
	ttl, err = l.RemainTTL(ctx)
	require.NoError(t, err)
	assert.True(t, ttl > 19*time.Second && ttl <= 20*time.Second, "TTL %v is not the watchdog lease", ttl)
	require.NoError(t, l.Unlock(ctx))

	require.NoError(t, e.do("HSET", "ttl", "x:1", "1").Error())
	ttl, err = l.RemainTTL(ctx)
	require.NoError(t, err)
	assert.Equal(t, rlock.TTLNoExpiry, ttl)
}

// The watchdog keeps a lock alive across many periods, and after Unlock no
// renewal follows: a hold that reappears with the same owner field is not
// renewed.
func TestWatchdogRenewsUntilUnlock(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(rlock.WithWatchdogTimeout(900 * time.Millisecond))
	owner := rlock.WithOwner(ctx, 3)
	l := c.Lock("renewed")
	require.NoError(t, l.Lock(owner))
	time.Sleep(2700 * time.Millisecond) // three leases: only renewal keeps it
	held, err := l.IsHeld(owner)
	require.NoError(t, err)
	require.True(t, held, "the watchdog did not renew the lease")
	ttl := e.pttl("renewed")
	assert.True(t, ttl > 0 && ttl <= 900*time.Millisecond, "TTL %v", ttl)

	require.NoError(t, l.Unlock(owner))
	require.NoError(t, e.do("HSET", "renewed", field(c, 3), "1").Error())
	require.NoError(t, e.do("PEXPIRE", "renewed", "700").Error())
	time.Sleep(1200 * time.Millisecond) // four renewal periods
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "a renewal followed the unlock")
}

// testLockIsNotRenewedAfterInterruptedTryLock: waits abandoned at random
// moments never leave a hold or a renewal behind, even when the abandoned
// attempt did take the lock.
func TestAbandonedWaitLeavesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(rlock.WithWatchdogTimeout(2 * time.Second))
	holder := rlock.WithOwner(ctx, 1)
	l := c.Lock("abandon")
	for i := range 40 {
		require.NoError(t, l.Lock(holder))
		wctx, cancel := context.WithCancel(rlock.WithOwner(ctx, 2))
		res := make(chan error, 1)
		go func() { res <- l.Lock(wctx) }()
		// Race the waiter's cancellation against the release.
		time.Sleep(time.Duration(i%8) * time.Millisecond)
		go cancel()
		require.NoError(t, l.Unlock(holder))
		err := <-res
		n := mustHoldCount(t, l, rlock.WithOwner(ctx, 2))
		if err != nil {
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, 0, n, "round %d: an abandoned wait left a hold", i)
		} else {
			require.Equal(t, 1, n)
			require.NoError(t, l.Unlock(rlock.WithOwner(ctx, 2)))
		}
		cancel()
	}
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
}

func TestTryLockWaitRunsOut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.client().Lock("waitout"), e.client().Lock("waitout")
	require.NoError(t, a.Lock(ctx))
	start := time.Now()
	ok, err := b.TryLock(ctx, 300*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = b.Lock(dctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, a.Unlock(ctx))
}

func TestForceUnlockWakesWaiters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ca, cb := e.client(), e.client()
	holder := rlock.WithOwner(ctx, 1)
	a := ca.Lock("force")
	require.NoError(t, a.Lock(holder))

	wctx, cancel := context.WithTimeout(rlock.WithOwner(ctx, 2), 20*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- cb.Lock("force").Lock(wctx) }()
	waitForSubscribers(t, e, "redisson_lock__channel:{force}", 1)

	ok, err := cb.Lock("force").ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, <-got, "force unlock must wake the waiter (the hold had a 30s lease)")
	assert.ErrorIs(t, a.Unlock(holder), rlock.ErrNotHeld)

	ok, err = cb.Lock("force").ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = cb.Lock("force").ForceUnlock(ctx)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestHoldContext(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(rlock.WithWatchdogTimeout(time.Second))
	// The handler hears of a loss after the hold's HoldContexts have
	// ended: wait for its event.
	lost := make(chan rlock.LostEvent, 4)
	c2 := e.client(rlock.WithWatchdogTimeout(time.Second), rlock.WithLostHandler(func(ev rlock.LostEvent) { lost <- ev }))
	owner := rlock.WithOwner(ctx, 9)

	t.Run("not held", func(t *testing.T) {
		_, err := c.Lock("hc").HoldContext(owner)
		assert.ErrorIs(t, err, rlock.ErrNotHeld)
	})
	t.Run("unlocked", func(t *testing.T) {
		l := c.Lock("hc")
		require.NoError(t, l.Lock(owner))
		require.NoError(t, l.Lock(owner))
		hctx, err := l.HoldContext(owner)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(owner))
		assert.NoError(t, hctx.Err(), "a partial unlock keeps the hold")
		require.NoError(t, l.Unlock(owner))
		<-hctx.Done()
		assert.ErrorIs(t, context.Cause(hctx), rlock.ErrUnlocked)
	})
	t.Run("lost", func(t *testing.T) {
		l := c2.Lock("hc-lost")
		require.NoError(t, l.Lock(owner))
		hctx, err := l.HoldContext(owner)
		require.NoError(t, err)
		require.NoError(t, e.do("DEL", "hc-lost").Error()) // Redis lost it
		<-hctx.Done()
		assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)
		select {
		case ev := <-lost:
			assert.Equal(t, "hc-lost", ev.Name)
			assert.Equal(t, int64(9), ev.Owner)
			assert.ErrorIs(t, ev.Err, rlock.ErrLockLost)
		case <-time.After(10 * time.Second):
			t.Fatal("no lost event after the HoldContext ended")
		}
		assert.ErrorIs(t, l.Unlock(owner), rlock.ErrNotHeld)
	})
	t.Run("lease expired", func(t *testing.T) {
		l := c.Lock("hc-lease")
		require.NoError(t, l.LockLease(owner, 200*time.Millisecond))
		hctx, err := l.HoldContext(owner)
		require.NoError(t, err)
		<-hctx.Done()
		assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLeaseExpired)
	})
	t.Run("force unlocked by this client", func(t *testing.T) {
		l := c.Lock("hc-force")
		require.NoError(t, l.Lock(owner))
		hctx, err := l.HoldContext(owner)
		require.NoError(t, err)
		_, err = l.ForceUnlock(ctx)
		require.NoError(t, err)
		<-hctx.Done()
		assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)
	})
	t.Run("parent ends", func(t *testing.T) {
		l := c.Lock("hc-parent")
		require.NoError(t, l.Lock(owner))
		pctx, cancel := context.WithCancel(owner)
		hctx, err := l.HoldContext(pctx)
		require.NoError(t, err)
		cancel()
		<-hctx.Done()
		assert.ErrorIs(t, context.Cause(hctx), context.Canceled)
		require.NoError(t, l.Unlock(owner))
	})
}

// A hold renewed past WithWatchdogMaxHold is reported lost and expires.
func TestWatchdogMaxHold(t *testing.T) {
	e := newEnv(t)
	ctx := rlock.WithOwner(context.Background(), 4)
	c := e.client(rlock.WithWatchdogTimeout(900*time.Millisecond), rlock.WithWatchdogMaxHold(1200*time.Millisecond))
	l := c.Lock("maxhold")
	start := time.Now()
	require.NoError(t, l.Lock(ctx))
	hctx, err := l.HoldContext(ctx)
	require.NoError(t, err)
	<-hctx.Done()
	assert.GreaterOrEqual(t, time.Since(start), 1200*time.Millisecond)
	assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)
	assert.ErrorIs(t, context.Cause(hctx), rlock.ErrMaxHold)
	assert.Zero(t, c.Stats().Renewing)
	require.Eventually(t, func() bool {
		locked, err := l.IsLocked(ctx)
		return err == nil && !locked
	}, 5*time.Second, 20*time.Millisecond, "the lock must expire once renewal stops")
	assert.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)
}

// Bad input gets a clear error, never a panic, a hang or a hold.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()
	l := c.Lock("")
	assert.ErrorIs(t, l.Lock(ctx), rlock.ErrInvalidName)
	_, err := l.TryLock(ctx, 0, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalidName)
	assert.ErrorIs(t, l.Unlock(ctx), rlock.ErrInvalidName)
	_, err = l.IsLocked(ctx)
	assert.ErrorIs(t, err, rlock.ErrInvalidName)

	good := c.Lock("bad-args")
	assert.ErrorIs(t, good.LockLease(ctx, 0), rlock.ErrInvalidArgument)
	assert.ErrorIs(t, good.LockLease(ctx, -time.Second), rlock.ErrInvalidArgument)
	_, err = good.TryLock(ctx, time.Second, time.Microsecond)
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
	locked, err := good.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "a rejected call must not lock")

	// A negative wait is a single attempt.
	ok, err := good.TryLock(ctx, -time.Second, 0)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, good.Unlock(ctx))

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, good.Lock(cctx), context.Canceled)

	_, err = rlock.New(nil)
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
	rc, err := e.srv.Client()
	require.NoError(t, err)
	defer rc.Close()
	for _, o := range []rlock.Option{
		rlock.WithWatchdogTimeout(0), rlock.WithWatchdogBatchSize(0), rlock.WithLogger(nil), rlock.WithWatchdogMaxHold(0),
		rlock.WithReplicaSync(0, 1, 0),
		rlock.WithPubSubMode(rlock.PubSubMode(9)), rlock.WithCommandTimeout(-1), rlock.WithSubscriptionTimeout(0),
	} {
		_, err = rlock.New(rc, o)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
	}
}

func TestClosedClient(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()
	holder := rlock.WithOwner(ctx, 1)
	l := c.Lock("closed")
	require.NoError(t, l.Lock(holder))
	hctx, err := l.HoldContext(holder)
	require.NoError(t, err)

	other := e.client().Lock("closed")
	got := make(chan error, 1)
	wctx := rlock.WithOwner(ctx, 2)
	w := c.Lock("closed")
	go func() { got <- w.Lock(wctx) }()
	waitForSubscribers(t, e, "redisson_lock__channel:{closed}", 1)

	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-got, rlock.ErrClosed)
	<-hctx.Done()
	assert.ErrorIs(t, context.Cause(hctx), rlock.ErrClosed)
	assert.ErrorIs(t, l.Lock(ctx), rlock.ErrClosed)
	ok, err := other.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "Close does not unlock")
	require.NoError(t, c.Close(), "Close is idempotent")
}
