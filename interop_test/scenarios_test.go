package interop_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/holder"
	"github.com/goredisson/locks/interop_test/driver"
	"github.com/goredisson/locks/rlock"
)

const suiteStandalone = "TestRedisson"

// TestRedisson runs every scenario against every Redisson version of
// java/versions.txt, one version after the other, on a standalone Redis:
// TestRedisson/<version>/<Scenario>[/<direction>].
func TestRedisson(t *testing.T) {
	versions := mustHaveDeps(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			f := newFixture(t, v)
			t.Run("WakeUp", f.testWakeUp)
			t.Run("Reentrancy", f.testReentrancy)
			t.Run("NonOwnerUnlock", f.testNonOwnerUnlock)
			t.Run("StaleUnlock", f.testStaleUnlock)
			t.Run("ForceUnlock", f.testForceUnlock)
			t.Run("PartialUnlockTTL", f.testPartialUnlockTTL)
			t.Run("LeaseExpiry", f.testLeaseExpiry)
			t.Run("Watchdog", f.testWatchdog)
			t.Run("MutualExclusion", f.testMutualExclusion)
		})
	}
	logSummary(t, suiteStandalone)
}

// testWakeUp (scenarios 1, 2 and the standalone half of 10): a waiter on
// one side is woken by the other side's unlock message, promptly (bounded by
// a deadline far below the 30s lease that would bound it without the
// message), and the message travels on the classic channel.
func (f *fixture) testWakeUp(t *testing.T) {
	t.Run("JavaUnlockWakesGo", func(t *testing.T) {
		ctx := scenarioCtx(t)
		java := f.javaA(t)
		c := f.goClient(t) // PubSubAuto
		require.False(t, c.PubSubSharded(), "PubSubAuto on a standalone server must use classic pub/sub, as Redisson does")
		name := lockName(t, "l")
		ch := rlock.ChannelName(name)
		require.Equal(t, "redisson_lock__channel:{"+name+"}", ch)
		w := f.watch(t, ch)

		require.NoError(t, java.Lock(ctx, "T1", name))
		ttl, err := java.TTL(ctx, name)
		require.NoError(t, err)
		require.Greater(t, ttl, int64(20_000), "Java's watchdog lease is 30s")

		l := c.Lock(name)
		ok, err := l.TryLock(owner(ctx, 1), 0, 0)
		require.NoError(t, err)
		require.False(t, ok, "Go TryLock(0, 0) while Java holds the lock")
		require.Zero(t, c.Stats().Subscriptions, "a single attempt must not subscribe")

		wctx, cancel := context.WithTimeout(owner(ctx, 1), promptly)
		defer cancel()
		waiter := goAsync(func() (bool, error) { return true, l.Lock(wctx) })
		waitGoWaiters(t, c, 1)
		waitSubscribers(t, f.raw, ch, false, 2) // the Go client and the watcher
		require.Zero(t, numsub(t, f.raw, ch, true), "nobody may use sharded pub/sub on a standalone server")
		require.False(t, waiter.finished(), "Go got the lock while Java held it: %v", waiter.err)

		start := time.Now()
		require.NoError(t, java.Unlock(ctx, "T1", name))
		waiter.wait(t, promptly+time.Second)
		require.NoError(t, waiter.err, "the Go waiter must be woken by Java's unlock message well before the 30s lease")
		measure(t, suiteStandalone, f.version, "wake-up Java unlock -> Go waiter", waiter.at.Sub(start))

		msg := w.waitMessage(t, time.Second)
		assert.Equal(t, ch, msg.channel)
		assert.Equal(t, "0", msg.payload, "Redisson's UNLOCK_MESSAGE on the classic channel")

		n, err := l.HoldCount(owner(ctx, 1))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		held, err := java.IsHeld(ctx, "T1", name)
		require.NoError(t, err)
		require.False(t, held)
		require.NoError(t, l.Unlock(owner(ctx, 1)))
	})

	t.Run("GoUnlockWakesJava", func(t *testing.T) {
		ctx := scenarioCtx(t)
		java := f.javaA(t)
		c := f.goClient(t)
		require.False(t, c.PubSubSharded())
		name := lockName(t, "l")
		ch := rlock.ChannelName(name)
		w := f.watch(t, ch)
		l := c.Lock(name)

		require.NoError(t, l.Lock(owner(ctx, 1)))
		ok, err := java.TryLock(ctx, "T1", name)
		require.NoError(t, err)
		require.False(t, ok, "Java tryLock() while Go holds the lock")

		waiter := javaAsync(java.Send("lock", "T1", name))
		waitSubscribers(t, f.raw, ch, false, 2) // Java (classic SUBSCRIBE) and the watcher
		require.Zero(t, numsub(t, f.raw, ch, true))
		require.False(t, waiter.finished(), "Java got the lock while Go held it: %v", waiter.err)

		start := time.Now()
		require.NoError(t, l.Unlock(owner(ctx, 1)))
		waiter.wait(t, promptly)
		require.NoError(t, waiter.err)
		measure(t, suiteStandalone, f.version, "wake-up Go unlock -> Java waiter", waiter.at.Sub(start))

		msg := w.waitMessage(t, time.Second)
		assert.Equal(t, "0", msg.payload, "Go must publish Redisson's UNLOCK_MESSAGE on the classic channel")

		held, err := java.IsHeld(ctx, "T1", name)
		require.NoError(t, err)
		require.True(t, held)
		n, err := l.HoldCount(owner(ctx, 1))
		require.NoError(t, err)
		require.Zero(t, n)
		require.NoError(t, java.Unlock(ctx, "T1", name))
	})
}

// testReentrancy (scenario 3): a three-deep hold on one side is one hold for
// the other side until the third unlock, which lets the other side in.
func (f *fixture) testReentrancy(t *testing.T) {
	t.Run("GoHolds", func(t *testing.T) {
		ctx := scenarioCtx(t) // the owner is this goroutine
		java := f.javaA(t)
		c := f.goClient(t)
		name := lockName(t, "l")
		l := c.Lock(name)
		for range 3 {
			require.NoError(t, l.Lock(ctx))
		}
		n, err := l.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		info, err := l.Inspect(ctx)
		require.NoError(t, err)
		require.Len(t, info.Holders, 1)
		require.Equal(t, c.ID(), info.Holders[0].ClientID)
		require.Equal(t, map[string]string{info.Holders[0].Field: "3"}, hgetall(t, f.raw, name))

		javaSees := func(unlocks int) {
			t.Helper()
			locked, err := java.IsLocked(ctx, name)
			require.NoError(t, err)
			require.True(t, locked, "after %d Go unlocks", unlocks)
			hc, err := java.HoldCount(ctx, "T1", name)
			require.NoError(t, err)
			require.Zero(t, hc)
			held, err := java.IsHeld(ctx, "T1", name)
			require.NoError(t, err)
			require.False(t, held)
			ok, err := java.TryLock(ctx, "T1", name)
			require.NoError(t, err)
			require.False(t, ok, "Java got in after %d of 3 Go unlocks", unlocks)
		}
		javaSees(0)
		for i := 1; i <= 2; i++ {
			require.NoError(t, l.Unlock(ctx))
			n, err := l.HoldCount(ctx)
			require.NoError(t, err)
			require.Equal(t, 3-i, n)
			javaSees(i)
		}

		waiter := javaAsync(java.Send("lock", "T1", name))
		waitSubscribers(t, f.raw, rlock.ChannelName(name), false, 1)
		require.False(t, waiter.finished())
		require.NoError(t, l.Unlock(ctx)) // the third
		waiter.wait(t, promptly)
		require.NoError(t, waiter.err)
		hc, err := java.HoldCount(ctx, "T1", name)
		require.NoError(t, err)
		require.Equal(t, 1, hc)
		n, err = l.HoldCount(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
		require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld, "a fourth Go unlock")
		require.NoError(t, java.Unlock(ctx, "T1", name))
	})

	t.Run("JavaHolds", func(t *testing.T) {
		ctx := scenarioCtx(t)
		java := f.javaA(t)
		c := f.goClient(t)
		name := lockName(t, "l")
		l := c.Lock(name)
		for range 3 {
			require.NoError(t, java.Lock(ctx, "T1", name))
		}
		hc, err := java.HoldCount(ctx, "T1", name)
		require.NoError(t, err)
		require.Equal(t, 3, hc)
		jid, err := java.ClientID(ctx)
		require.NoError(t, err)
		tid, err := java.ThreadID(ctx, "T1")
		require.NoError(t, err)
		info, err := l.Inspect(ctx)
		require.NoError(t, err)
		require.True(t, info.Locked)
		require.Equal(t, []rlock.Holder{{ClientID: jid, OwnerID: tid, Count: 3, Field: jid + ":" + strconv.FormatInt(tid, 10)}}, info.Holders)

		goSees := func(unlocks int) {
			t.Helper()
			locked, err := l.IsLocked(ctx)
			require.NoError(t, err)
			require.True(t, locked, "after %d Java unlocks", unlocks)
			// Go owner ids that equal the Java thread id are still other owners.
			for _, o := range []context.Context{ctx, owner(ctx, tid)} {
				n, err := l.HoldCount(o)
				require.NoError(t, err)
				require.Zero(t, n)
				held, err := l.IsHeld(o)
				require.NoError(t, err)
				require.False(t, held)
				ok, err := l.TryLock(o, 0, 0)
				require.NoError(t, err)
				require.False(t, ok, "Go got in after %d of 3 Java unlocks", unlocks)
			}
		}
		goSees(0)
		for i := 1; i <= 2; i++ {
			require.NoError(t, java.Unlock(ctx, "T1", name))
			hc, err := java.HoldCount(ctx, "T1", name)
			require.NoError(t, err)
			require.Equal(t, 3-i, hc)
			goSees(i)
		}

		wctx, cancel := context.WithTimeout(owner(ctx, 1), promptly)
		defer cancel()
		waiter := goAsync(func() (bool, error) { return true, l.Lock(wctx) })
		waitGoWaiters(t, c, 1)
		require.False(t, waiter.finished())
		require.NoError(t, java.Unlock(ctx, "T1", name)) // the third
		waiter.wait(t, promptly+time.Second)
		require.NoError(t, waiter.err)
		n, err := l.HoldCount(owner(ctx, 1))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		hc, err = java.HoldCount(ctx, "T1", name)
		require.NoError(t, err)
		require.Zero(t, hc)
		locked, err := java.IsLocked(ctx, name)
		require.NoError(t, err)
		require.True(t, locked)
		require.True(t, driver.IsJavaError(java.Unlock(ctx, "T1", name), "IllegalMonitorStateException"), "a fourth Java unlock")
		require.NoError(t, l.Unlock(owner(ctx, 1)))
	})
}

// testNonOwnerUnlock (scenario 8): an unlock by the other language fails
// (ErrNotHeld / IllegalMonitorStateException) and changes nothing.
func (f *fixture) testNonOwnerUnlock(t *testing.T) {
	t.Run("JavaUnlocksGoHold", func(t *testing.T) {
		ctx := scenarioCtx(t)
		java := f.javaA(t)
		c := f.goClient(t)
		name := lockName(t, "l")
		l := c.Lock(name)
		require.NoError(t, l.Lock(owner(ctx, 1)))
		require.NoError(t, l.Lock(owner(ctx, 1)))
		before := hgetall(t, f.raw, name)
		require.Equal(t, map[string]string{c.ID() + ":1": "2"}, before)

		err := java.Unlock(ctx, "T1", name)
		require.True(t, driver.IsJavaError(err, "IllegalMonitorStateException"), "Java unlock of a Go hold: %v", err)
		require.Contains(t, err.Error(), "not locked by current thread")

		require.Equal(t, before, hgetall(t, f.raw, name), "a failed unlock must not touch the hash")
		n, err := l.HoldCount(owner(ctx, 1))
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Greater(t, pttl(t, f.raw, name), 20*time.Second)
		for range 2 {
			require.NoError(t, l.Unlock(owner(ctx, 1)))
		}
	})

	t.Run("GoUnlocksJavaHold", func(t *testing.T) {
		ctx := scenarioCtx(t)
		java := f.javaA(t)
		var unlockRuns atomic.Int64
		rc, err := f.srv.Client()
		require.NoError(t, err)
		c := newGoClient(t, &spyClient{Client: rc, after: func(cmd []string, res rueidis.RedisResult) {
			if ranUnlockScript(cmd, res) {
				unlockRuns.Add(1)
			}
		}})
		name := lockName(t, "l")
		l := c.Lock(name)
		require.NoError(t, java.Lock(ctx, "T1", name))
		require.NoError(t, java.Lock(ctx, "T1", name))
		field, err := java.LockField(ctx, "T1")
		require.NoError(t, err)
		before := hgetall(t, f.raw, name)
		require.Equal(t, map[string]string{field: "2"}, before)
		tid, err := java.ThreadID(ctx, "T1")
		require.NoError(t, err)

		// The calling goroutine, and a Go owner with the Java thread's id.
		for _, o := range []context.Context{ctx, owner(ctx, tid)} {
			unlockRuns.Store(0)
			start := time.Now()
			err := l.Unlock(o)
			elapsed := time.Since(start)
			require.ErrorIs(t, err, rlock.ErrNotHeld, "Go unlock of a Java hold")
			require.Equal(t, before, hgetall(t, f.raw, name), "a failed unlock must not touch the hash")
			// Redisson runs the unlock script once and throws
			// IllegalMonitorStateException on its nil reply (PROTOCOL.md 2.3 step
			// 2); only a failed round trip is worth a retry.
			assert.Equal(t, int64(1), unlockRuns.Load(), "unlock script runs for one non-owner Unlock (it took %v)", elapsed)
		}
		hc, err := java.HoldCount(ctx, "T1", name)
		require.NoError(t, err)
		require.Equal(t, 2, hc)
		require.Greater(t, pttl(t, f.raw, name), 20*time.Second)
		for range 2 {
			require.NoError(t, java.Unlock(ctx, "T1", name))
		}
	})
}

// testStaleUnlock (a consequence of retrying a nil unlock reply): goroutine
// A of Go owner 5 unlocks a lock owner 5 does not hold while goroutine B of
// the same owner (WithOwner: "several goroutines share one hold") takes it.
// A must fail with ErrNotHeld and B's hold must stay, so that Java cannot
// get in. Redisson (unlockAsync(threadId) racing lockAsync(threadId)) runs
// the unlock script once and keeps the new hold.
func (f *fixture) testStaleUnlock(t *testing.T) {
	ctx := scenarioCtx(t)
	java := f.javaA(t)
	firstReply := make(chan struct{}, 16)
	rc, err := f.srv.Client()
	require.NoError(t, err)
	c := newGoClient(t, &spyClient{Client: rc, after: func(cmd []string, res rueidis.RedisResult) {
		if ranUnlockScript(cmd, res) {
			select {
			case firstReply <- struct{}{}:
			default:
			}
		}
	}})
	name := lockName(t, "l")
	l := c.Lock(name)
	shared := owner(ctx, 5)

	stale := goAsync(func() (bool, error) { return true, l.Unlock(shared) }) // goroutine A
	select {
	case <-firstReply:
	case <-time.After(5 * time.Second):
		t.Fatal("no unlock script reply within 5s")
	}
	require.NoError(t, l.Lock(shared)) // goroutine B, right after A's script said "not held"
	stale.wait(t, 5*time.Second)
	assert.ErrorIs(t, stale.err, rlock.ErrNotHeld, "A's unlock found no hold of owner 5")

	n, err := l.HoldCount(shared)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "B's hold was released by A's retried unlock")
	ok, err := java.TryLock(ctx, "T1", name)
	require.NoError(t, err)
	assert.False(t, ok, "Java got a lock that Go owner 5 believes it holds")
	if ok {
		require.NoError(t, java.Unlock(ctx, "T1", name))
	} else {
		require.NoError(t, l.Unlock(shared))
	}
}

// testForceUnlock (scenario 6): a force unlock by the other language frees
// the hold and wakes a waiter at once; the old holder's unlock then fails.
func (f *fixture) testForceUnlock(t *testing.T) {
	t.Run("JavaForcesGoHold", func(t *testing.T) {
		ctx := scenarioCtx(t)
		java := f.javaA(t)
		holder, waiterClient := f.goClient(t), f.goClient(t)
		name := lockName(t, "l")
		hl, wl := holder.Lock(name), waiterClient.Lock(name)
		require.NoError(t, hl.Lock(owner(ctx, 1)))

		wctx, cancel := context.WithTimeout(owner(ctx, 2), promptly)
		defer cancel()
		waiter := goAsync(func() (bool, error) { return true, wl.Lock(wctx) })
		waitGoWaiters(t, waiterClient, 1)
		require.False(t, waiter.finished())

		start := time.Now()
		forced, err := java.ForceUnlock(ctx, name)
		require.NoError(t, err)
		require.True(t, forced)
		waiter.wait(t, promptly+time.Second)
		require.NoError(t, waiter.err, "Java's forceUnlock must wake the Go waiter")
		measure(t, suiteStandalone, f.version, "wake-up Java forceUnlock -> Go waiter", waiter.at.Sub(start))

		require.ErrorIs(t, hl.Unlock(owner(ctx, 1)), rlock.ErrNotHeld, "the force-unlocked Go holder's unlock")
		n, err := wl.HoldCount(owner(ctx, 2))
		require.NoError(t, err)
		require.Equal(t, 1, n, "the old holder's failed unlock must not touch the new hold")
		require.NoError(t, wl.Unlock(owner(ctx, 2)))

		forced, err = java.ForceUnlock(ctx, name)
		require.NoError(t, err)
		require.False(t, forced, "forceUnlock of a free lock")
	})

	t.Run("GoForcesJavaHold", func(t *testing.T) {
		ctx := scenarioCtx(t)
		java := f.javaA(t)
		c := f.goClient(t)
		name := lockName(t, "l")
		require.NoError(t, java.Lock(ctx, "T1", name))
		waiter := javaAsync(java.Send("lock", "T2", name))
		waitSubscribers(t, f.raw, rlock.ChannelName(name), false, 1)
		require.False(t, waiter.finished())

		start := time.Now()
		forced, err := c.Lock(name).ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, forced)
		waiter.wait(t, promptly)
		require.NoError(t, waiter.err, "Go's ForceUnlock must wake the Java waiter")
		measure(t, suiteStandalone, f.version, "wake-up Go ForceUnlock -> Java waiter", waiter.at.Sub(start))

		err = java.Unlock(ctx, "T1", name)
		require.True(t, driver.IsJavaError(err, "IllegalMonitorStateException"), "the force-unlocked Java holder's unlock: %v", err)
		hc, err := java.HoldCount(ctx, "T2", name)
		require.NoError(t, err)
		require.Equal(t, 1, hc)
		require.NoError(t, java.Unlock(ctx, "T2", name))

		forced, err = c.Lock(name).ForceUnlock(ctx)
		require.NoError(t, err)
		require.False(t, forced, "ForceUnlock of a free lock")
	})
}

// testPartialUnlockTTL (scenario 7): lock with a 10s lease three times and
// unlock twice: the TTL goes back to the holder's lease (PROTOCOL.md 2.4), as
// both sides read it. The tests wait for the TTL to drop below 8.5s first,
// so that keeping the remaining TTL instead would be caught.
func (f *fixture) testPartialUnlockTTL(t *testing.T) {
	const lease = 10 * time.Second
	inLeaseWindow := func(t *testing.T, what string, ttl time.Duration) {
		t.Helper()
		assert.GreaterOrEqual(t, ttl, lease-time.Second, what)
		assert.LessOrEqual(t, ttl, lease, what)
	}
	waitTTLBelow := func(t *testing.T, name string, d time.Duration) {
		t.Helper()
		require.Eventually(t, func() bool { return pttl(t, f.raw, name) < d }, 5*time.Second, 20*time.Millisecond)
	}

	t.Run("GoHolds", func(t *testing.T) {
		t.Parallel()
		ctx := owner(scenarioCtx(t), 1)
		java := f.javaA(t)
		c := f.goClient(t)
		name := lockName(t, "l")
		l := c.Lock(name)
		for range 3 {
			require.NoError(t, l.LockLease(ctx, lease))
		}
		waitTTLBelow(t, name, lease-1500*time.Millisecond)
		for range 2 {
			require.NoError(t, l.Unlock(ctx))
		}
		goTTL, err := l.RemainTTL(ctx)
		require.NoError(t, err)
		javaTTL, err := java.TTL(ctx, name)
		require.NoError(t, err)
		inLeaseWindow(t, "Go RemainTTL", goTTL)
		inLeaseWindow(t, "Java remainTimeToLive", time.Duration(javaTTL)*time.Millisecond)
		n, err := l.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.NoError(t, l.Unlock(ctx))
	})

	t.Run("JavaHolds", func(t *testing.T) {
		t.Parallel()
		ctx := scenarioCtx(t)
		java := f.javaA(t)
		c := f.goClient(t)
		name := lockName(t, "l")
		for range 3 {
			require.NoError(t, java.LockLease(ctx, "T1", name, lease))
		}
		waitTTLBelow(t, name, lease-1500*time.Millisecond)
		require.NoError(t, java.Unlock(ctx, "T1", name))
		javaTTL1, err := java.TTL(ctx, name)
		require.NoError(t, err)
		require.NoError(t, java.Unlock(ctx, "T1", name))
		goTTL, err := c.Lock(name).RemainTTL(ctx)
		require.NoError(t, err)
		javaTTL, err := java.TTL(ctx, name)
		require.NoError(t, err)
		inLeaseWindow(t, "Java remainTimeToLive after the first partial unlock", time.Duration(javaTTL1)*time.Millisecond)
		if atLeast(f.version, "3.27.2") {
			inLeaseWindow(t, "Go RemainTTL", goTTL)
			inLeaseWindow(t, "Java remainTimeToLive", time.Duration(javaTTL)*time.Millisecond)
		} else {
			// PROTOCOL.md 2.10 (3.27.2): before it, every unlock reset the RLock's
			// internalLockLeaseTime to the watchdog timeout, so the second
			// partial unlock sets the TTL to 30s, not to the 10s lease.
			t.Logf("Redisson %s < 3.27.2: the second partial unlock restores the watchdog timeout (%v), not the lease: Go sees %v", f.version, javaDefaultWatchdog, goTTL)
			assert.Greater(t, goTTL, javaDefaultWatchdog-time.Second)
			assert.LessOrEqual(t, goTTL, javaDefaultWatchdog)
			assert.Greater(t, javaTTL, (javaDefaultWatchdog - time.Second).Milliseconds())
		}
		hc, err := java.HoldCount(ctx, "T1", name)
		require.NoError(t, err)
		require.Equal(t, 1, hc)
		require.NoError(t, java.Unlock(ctx, "T1", name))
	})
}

// testLeaseExpiry (scenario 5): a hold with a 2s lease that is never
// unlocked lets the other side's waiter in at about 2s: the wait is bounded
// by the TTL, no unlock message is involved.
func (f *fixture) testLeaseExpiry(t *testing.T) {
	const lease = 2 * time.Second
	check := func(t *testing.T, d time.Duration, w *watcher) {
		t.Helper()
		assert.GreaterOrEqual(t, d, lease-200*time.Millisecond, "the waiter got the lock before the lease ended")
		assert.Less(t, d, lease+3*time.Second, "the waiter must retry when the holder's TTL runs out")
		assert.Empty(t, w.messages(), "a lease expiry publishes nothing")
	}

	t.Run("JavaLeaseGoWaits", func(t *testing.T) {
		t.Parallel()
		ctx := scenarioCtx(t)
		java := f.javaA(t)
		c := f.goClient(t)
		name := lockName(t, "l")
		w := f.watch(t, rlock.ChannelName(name))
		l := c.Lock(name)

		require.NoError(t, java.LockLease(ctx, "T1", name, lease))
		locked := time.Now()
		ttl, err := java.TTL(ctx, name)
		require.NoError(t, err)
		require.LessOrEqual(t, ttl, lease.Milliseconds())

		wctx, cancel := context.WithTimeout(owner(ctx, 1), lease+5*time.Second)
		defer cancel()
		waiter := goAsync(func() (bool, error) { return true, l.Lock(wctx) })
		waitGoWaiters(t, c, 1)
		waiter.wait(t, lease+6*time.Second)
		require.NoError(t, waiter.err)
		d := waiter.at.Sub(locked)
		measure(t, suiteStandalone, f.version, "lease 2s: Java lease ends -> Go waiter (no message)", d)
		check(t, d, w)

		err = java.Unlock(ctx, "T1", name)
		require.True(t, driver.IsJavaError(err, "IllegalMonitorStateException"), "unlock after the lease ran out: %v", err)
		require.NoError(t, l.Unlock(owner(ctx, 1)))
	})

	t.Run("GoLeaseJavaWaits", func(t *testing.T) {
		t.Parallel()
		ctx := scenarioCtx(t)
		java := f.javaA(t)
		c := f.goClient(t)
		name := lockName(t, "l")
		ch := rlock.ChannelName(name)
		w := f.watch(t, ch)
		l := c.Lock(name)

		require.NoError(t, l.LockLease(owner(ctx, 1), lease))
		locked := time.Now()
		waiter := javaAsync(java.Send("lock", "T2", name))
		waitSubscribers(t, f.raw, ch, false, 2) // Java and the watcher
		waiter.wait(t, lease+6*time.Second)
		require.NoError(t, waiter.err)
		d := waiter.at.Sub(locked)
		measure(t, suiteStandalone, f.version, "lease 2s: Go lease ends -> Java waiter (no message)", d)
		check(t, d, w)

		require.ErrorIs(t, l.Unlock(owner(ctx, 1)), rlock.ErrNotHeld, "unlock after the lease ran out")
		require.NoError(t, java.Unlock(ctx, "T2", name))
	})
}

// testWatchdog (scenario 4): both sides with a 3s watchdog timeout. A
// renewed hold outlasts many timeouts against the other side's tryLock;
// a holder killed without unlocking frees the lock within about a timeout.
func (f *fixture) testWatchdog(t *testing.T) {
	t.Run("Renewal", func(t *testing.T) {
		t.Parallel()
		const (
			hold = 10 * time.Second
			wait = 8 * time.Second
		)
		ctx := scenarioCtx(t)
		java := f.javaWatchdog(t)
		c := f.goClient(t, rlock.WithWatchdogTimeout(shortWatchdog))
		goName, javaName := lockName(t, "go-holds"), lockName(t, "java-holds")
		gl, jl := c.Lock(goName), c.Lock(javaName)

		start := time.Now()
		require.NoError(t, gl.Lock(owner(ctx, 1)))
		require.NoError(t, java.Lock(ctx, "W1", javaName))
		for _, name := range []string{goName, javaName} {
			ttl := pttl(t, f.raw, name)
			require.Greater(t, ttl, time.Duration(0))
			require.LessOrEqual(t, ttl, shortWatchdog, "%s: the watchdog lease is the 3s timeout", name)
		}

		javaTry := javaAsync(java.Send("trylock", "W2", goName, wait, -1))
		goTry := goAsync(func() (bool, error) { return jl.TryLock(owner(ctx, 2), wait, 0) })
		javaTry.wait(t, wait+5*time.Second)
		goTry.wait(t, wait+5*time.Second)
		require.NoError(t, javaTry.err)
		require.NoError(t, goTry.err)
		require.False(t, javaTry.ok, "Java tryLock(%v) got a lock the Go watchdog keeps renewing", wait)
		require.False(t, goTry.ok, "Go TryLock(%v) got a lock the Java watchdog keeps renewing", wait)
		assert.GreaterOrEqual(t, javaTry.at.Sub(start), wait-100*time.Millisecond)
		assert.GreaterOrEqual(t, goTry.at.Sub(start), wait-100*time.Millisecond)

		time.Sleep(time.Until(start.Add(hold))) // hold for 10s in all
		for _, name := range []string{goName, javaName} {
			ttl := pttl(t, f.raw, name)
			require.Greater(t, ttl, time.Duration(0), "%s expired despite its watchdog", name)
			require.LessOrEqual(t, ttl, shortWatchdog)
		}
		n, err := gl.HoldCount(owner(ctx, 1))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		hc, err := java.HoldCount(ctx, "W1", javaName)
		require.NoError(t, err)
		require.Equal(t, 1, hc)
		require.NoError(t, gl.Unlock(owner(ctx, 1)), "the Go hold after %v", hold)
		require.NoError(t, java.Unlock(ctx, "W1", javaName), "the Java hold after %v", hold)
	})

	t.Run("HolderKilled", func(t *testing.T) {
		t.Parallel()
		const limit = 3 * shortWatchdog
		ctx := scenarioCtx(t)
		victim := f.dedicatedJVM(t, shortWatchdog)
		java := f.javaWatchdog(t)
		c := f.goClient(t, rlock.WithWatchdogTimeout(shortWatchdog))
		javaName, goName := lockName(t, "java-dies"), lockName(t, "go-dies")

		require.NoError(t, victim.Lock(ctx, "K", javaName))
		goHolder := holder.Start(t, holder.Spec{Addr: f.srv.Addr, Lock: goName, Owner: 1, Watchdog: shortWatchdog})
		require.Equal(t, map[string]string{goHolder.Field: "1"}, hgetall(t, f.raw, goName))
		require.LessOrEqual(t, goHolder.TTL, shortWatchdog)
		require.LessOrEqual(t, pttl(t, f.raw, javaName), shortWatchdog)

		wctx, cancel := context.WithTimeout(owner(ctx, 1), limit)
		defer cancel()
		goWaiter := goAsync(func() (bool, error) { return true, c.Lock(javaName).Lock(wctx) })
		javaWaiter := javaAsync(java.Send("trylock", "W3", goName, limit, -1))
		waitGoWaiters(t, c, 1)
		waitSubscribers(t, f.raw, rlock.ChannelName(goName), false, 1)
		require.False(t, goWaiter.finished())
		require.False(t, javaWaiter.finished())

		javaKilled := time.Now()
		require.NoError(t, victim.Kill())
		goKilled := time.Now()
		require.NoError(t, goHolder.Kill())

		goWaiter.wait(t, limit+time.Second)
		require.NoError(t, goWaiter.err, "the Go waiter must get the lock of the killed JVM within %v", limit)
		measure(t, suiteStandalone, f.version, "watchdog 3s: JVM killed -> Go waiter gets lock", goWaiter.at.Sub(javaKilled))
		javaWaiter.wait(t, limit+time.Second)
		require.NoError(t, javaWaiter.err)
		require.True(t, javaWaiter.ok, "the Java waiter must get the lock of the killed Go process within %v", limit)
		measure(t, suiteStandalone, f.version, "watchdog 3s: Go process killed -> Java waiter gets lock", javaWaiter.at.Sub(goKilled))

		require.NoError(t, c.Lock(javaName).Unlock(owner(ctx, 1)))
		require.NoError(t, java.Unlock(ctx, "W3", goName))
	})
}

// testMutualExclusion (scenario 9): 8 goroutines in two Go clients and 8
// threads in two JVMs increment one counter with GET then SET under one
// lock, 2000 increments in all: none may be lost.
func (f *fixture) testMutualExclusion(t *testing.T) {
	const (
		perWorker = 125
		workers   = 4 // per client: 2 Go + 2 Java clients
		total     = 4 * workers * perWorker
	)
	ctx := scenarioCtx(t)
	javas := []*driver.JVM{f.javaA(t), f.javaB(t)}
	idA, err := javas[0].ClientID(ctx)
	require.NoError(t, err)
	idB, err := javas[1].ClientID(ctx)
	require.NoError(t, err)
	require.NotEqual(t, idA, idB)
	goClients := []*rlock.Client{f.goClient(t), f.goClient(t)}
	name, counter := lockName(t, "l"), lockName(t, "counter")
	rc := f.raw

	start := time.Now()
	var pending []*driver.Pending
	for j, java := range javas {
		for w := range workers {
			pending = append(pending, java.Send("incr", "X"+strconv.Itoa(j)+"-"+strconv.Itoa(w), name, counter, perWorker, 0))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for _, c := range goClients {
		for range workers {
			wg.Go(func() {
				// The owner is this goroutine.
				l := c.Lock(name)
				for range perWorker {
					if err := l.Lock(ctx); err != nil {
						errs <- err
						return
					}
					v, err := rc.Do(ctx, rc.B().Get().Key(counter).Build()).AsInt64()
					if rueidis.IsRedisNil(err) {
						v, err = 0, nil
					}
					if err == nil {
						err = rc.Do(ctx, rc.B().Set().Key(counter).Value(strconv.FormatInt(v+1, 10)).Build()).Error()
					}
					if uerr := l.Unlock(ctx); err == nil {
						err = uerr
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, p := range pending {
		_, err := p.Wait(ctx)
		require.NoError(t, err)
	}
	elapsed := time.Since(start)
	got, err := doRaw(t, rc, "GET", counter).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(total), got, "increments were lost: mutual exclusion failed")
	exists, err := doRaw(t, rc, "EXISTS", name).AsInt64()
	require.NoError(t, err)
	require.Zero(t, exists, "the lock must be free at the end")
	measure(t, suiteStandalone, f.version, "mutual exclusion: 2000 contended GET/SET increments", elapsed)
}
