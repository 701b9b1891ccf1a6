package interop_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/interop_test/driver"
	"github.com/goredisson/locks/rlock"
)

const suiteCluster = "TestRedissonCluster"

// TestRedissonCluster (the cluster half of scenario 10) runs Redisson in
// cluster mode (useClusterServers, shardedSubscriptionMode left at its
// default AUTO) against a Redis 7 cluster of 3 masters and 3 replicas, with
// the Go client in its default PubSubAuto mode: both pick sharded pub/sub
// (SPUBLISH/SSUBSCRIBE) and wake each other in both directions.
//
// Which Go option matches which Redisson setting (PROTOCOL.md 3.4):
//
//	Redisson shardedSubscriptionMode AUTO (default, 3.22.0+) -> rlock.PubSubAuto (default)
//	Redisson shardedSubscriptionMode ON                      -> rlock.PubSubSharded
//	Redisson shardedSubscriptionMode OFF, or Redisson < 3.22 -> rlock.PubSubClassic
//	any non-cluster Redisson config (single, sentinel, ...)  -> rlock.PubSubAuto or PubSubClassic
//
// ModeMismatch shows what a wrong choice costs: no wake-ups, every wait
// runs to the holder's TTL, but mutual exclusion holds.
func TestRedissonCluster(t *testing.T) {
	versions := mustHaveDeps(t)
	cl := redistest.Cluster(t)
	raw, err := cl.Client()
	require.NoError(t, err)
	t.Cleanup(raw.Close)

	for i, v := range versions {
		t.Run(v, func(t *testing.T) {
			java := startJVM(t, driver.Config{Version: v, RedisAddrs: cl.Addrs(), Cluster: true})
			t.Cleanup(func() {
				require.NoError(t, java.Close())
				if t.Failed() {
					t.Logf("cluster JVM (Redisson %s) stderr:\n%s", v, java.Stderr())
				}
			})
			// Redisson's AUTO picks sharded pub/sub on Redis 7 from 3.22.0 on.
			javaSharded := atLeast(v, "3.22.0")
			mode := rlock.PubSubAuto
			if !javaSharded {
				mode = rlock.PubSubClassic
			}
			cc := &clusterCase{t: t, version: v, cl: cl, raw: raw, java: java, sharded: javaSharded}
			c := cc.goClient(t, rlock.WithPubSubMode(mode))
			require.Equal(t, javaSharded, c.PubSubSharded(), "PubSubAuto on a Redis 7 cluster must pick sharded pub/sub, as Redisson %s does", v)

			t.Run("WakeUp", func(t *testing.T) {
				t.Run("JavaUnlockWakesGo", func(t *testing.T) { cc.javaUnlockWakesGo(t, c) })
				t.Run("GoUnlockWakesJava", func(t *testing.T) { cc.goUnlockWakesJava(t, c) })
			})
			if i == 0 && javaSharded {
				t.Run("ModeMismatch", cc.modeMismatch)
			}
			{
				// The family and the synchronizers on the cluster, each as
				// Go/Java, Java/Go and Java/Java: their hash-tagged keys
				// in one slot, and the wake-ups over sharded pub/sub.
				f := newClusterFixture(t, v, cl, raw)
				t.Run("Family", func(t *testing.T) {
					t.Run("WriterExcludes", f.testWriterExcludes)
					t.Run("LastReadUnlockWakesWriter", f.testLastReadUnlockWakesWriter)
					t.Run("WriteUnlockWakesReaders", f.testWriteUnlockWakesReaders)
					t.Run("ReadWriteForceUnlock", f.testReadWriteForceUnlock)
					t.Run("FencedTokens", f.testFencedTokens)
					if atLeast(v, "4.4.0") {
						t.Run("NonReentrant", f.testNonReentrant)
					}
					t.Run("FairFIFO", f.testFairFIFO)
					t.Run("FairWaiterTimeout", f.testFairWaiterTimeout)
				})
				t.Run("Sync", func(t *testing.T) {
					t.Run("SemWake", f.testSemWake)
					t.Run("SemHolders", f.testSemHolders)
					t.Run("PsemCrossRelease", f.testPsemCrossRelease)
					t.Run("PsemExpiry", f.testPsemExpiry)
					t.Run("LatchRelease", f.testLatchRelease)
				})
			}
		})
	}
	logSummary(t, suiteCluster)
}

type clusterCase struct {
	t       *testing.T
	version string
	cl      *redistest.RedisCluster
	raw     rueidis.Client
	java    *driver.JVM
	sharded bool // the pub/sub kind Redisson uses
}

func (cc *clusterCase) goClient(t *testing.T, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	rc, err := cc.cl.Client()
	require.NoError(t, err)
	return newGoClient(t, rc, opts...)
}

func (cc *clusterCase) watch(t *testing.T, ch string, sharded bool) *watcher {
	t.Helper()
	rc, err := cc.cl.Client()
	require.NoError(t, err)
	return watchChannel(t, rc, ch, sharded)
}

// waitSubscribers waits for n subscribers of ch in Redisson's pub/sub kind:
// SHARDNUMSUB on the slot's master, or the sum of NUMSUB over all nodes
// (classic subscribers may sit on any node).
func (cc *clusterCase) waitSubscribers(t *testing.T, ch string, n int64) {
	t.Helper()
	if cc.sharded {
		waitSubscribers(t, cc.raw, ch, true, n)
		return
	}
	require.Eventually(t, func() bool {
		var sum int64
		for _, node := range cc.cl.Nodes() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			msg, err := node.Do(ctx, "PUBSUB", "NUMSUB", ch)
			cancel()
			require.NoError(t, err)
			arr, err := msg.ToArray()
			require.NoError(t, err)
			k, err := arr[1].AsInt64()
			require.NoError(t, err)
			sum += k
		}
		return sum >= n
	}, 10*time.Second, 10*time.Millisecond, "expected %d classic subscribers on %s", n, ch)
}

func (cc *clusterCase) javaUnlockWakesGo(t *testing.T, c *rlock.Client) {
	ctx := scenarioCtx(t)
	name := lockName(t, "l")
	ch := rlock.ChannelName(name)
	w := cc.watch(t, ch, cc.sharded)
	l := c.Lock(name)

	require.NoError(t, cc.java.Lock(ctx, "T1", name))
	ok, err := l.TryLock(owner(ctx, 1), 0, 0)
	require.NoError(t, err)
	require.False(t, ok)

	wctx, cancel := context.WithTimeout(owner(ctx, 1), promptly)
	defer cancel()
	waiter := goAsync(func() (bool, error) { return true, l.Lock(wctx) })
	waitGoWaiters(t, c, 1)
	cc.waitSubscribers(t, ch, 2) // Go and the watcher
	require.False(t, waiter.finished(), "Go got the lock while Java held it: %v", waiter.err)

	start := time.Now()
	require.NoError(t, cc.java.Unlock(ctx, "T1", name))
	waiter.wait(t, promptly+time.Second)
	require.NoError(t, waiter.err, "the Go waiter must be woken by Java's unlock message well before the 30s lease")
	measure(t, suiteCluster, cc.version, "cluster wake-up Java unlock -> Go waiter", waiter.at.Sub(start))
	msg := w.waitMessage(t, time.Second)
	assert.Equal(t, "0", msg.payload)

	n, err := l.HoldCount(owner(ctx, 1))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, l.Unlock(owner(ctx, 1)))
}

func (cc *clusterCase) goUnlockWakesJava(t *testing.T, c *rlock.Client) {
	ctx := scenarioCtx(t)
	name := lockName(t, "l")
	ch := rlock.ChannelName(name)
	w := cc.watch(t, ch, cc.sharded)
	l := c.Lock(name)

	require.NoError(t, l.Lock(owner(ctx, 1)))
	ok, err := cc.java.TryLock(ctx, "T1", name)
	require.NoError(t, err)
	require.False(t, ok)

	waiter := javaAsync(cc.java.Send("lock", "T1", name))
	cc.waitSubscribers(t, ch, 2) // Java and the watcher
	require.False(t, waiter.finished(), "Java got the lock while Go held it: %v", waiter.err)

	start := time.Now()
	require.NoError(t, l.Unlock(owner(ctx, 1)))
	waiter.wait(t, promptly)
	require.NoError(t, waiter.err)
	measure(t, suiteCluster, cc.version, "cluster wake-up Go unlock -> Java waiter", waiter.at.Sub(start))
	msg := w.waitMessage(t, time.Second)
	assert.Equal(t, "0", msg.payload)

	hc, err := cc.java.HoldCount(ctx, "T1", name)
	require.NoError(t, err)
	require.Equal(t, 1, hc)
	require.NoError(t, cc.java.Unlock(ctx, "T1", name))
}

// modeMismatch: a Go client forced to PubSubClassic against Redisson in
// AUTO (sharded) mode. The two never see each other's unlock messages
// (classic and sharded pub/sub are separate namespaces, PROTOCOL.md 3.4), so a
// waiter on either side gets the lock only when its TTL-bounded wait runs
// out. Exclusion still holds. A 4s lease keeps that wait short.
func (cc *clusterCase) modeMismatch(t *testing.T) {
	const lease = 4 * time.Second
	c := cc.goClient(t, rlock.WithPubSubMode(rlock.PubSubClassic))
	require.False(t, c.PubSubSharded())

	t.Run("JavaUnlockMissedByGo", func(t *testing.T) {
		t.Parallel()
		ctx := scenarioCtx(t)
		name := lockName(t, "l")
		ch := rlock.ChannelName(name)
		sharded, classic := cc.watch(t, ch, true), cc.watch(t, ch, false)
		l := c.Lock(name)

		require.NoError(t, cc.java.LockLease(ctx, "M1", name, lease))
		wctx, cancel := context.WithTimeout(owner(ctx, 1), lease+5*time.Second)
		defer cancel()
		waiter := goAsync(func() (bool, error) { return true, l.Lock(wctx) })
		waitGoWaiters(t, c, 1)
		start := time.Now()
		require.NoError(t, cc.java.Unlock(ctx, "M1", name))
		assert.Equal(t, "0", sharded.waitMessage(t, time.Second).payload, "Redisson publishes with SPUBLISH")

		waiter.wait(t, lease+6*time.Second)
		require.NoError(t, waiter.err, "the classic Go waiter must still get the lock when its TTL-bounded wait ends")
		d := waiter.at.Sub(start)
		measure(t, suiteCluster, cc.version, "mode mismatch: Java unlock -> classic Go waiter (TTL-bounded)", d)
		assert.Greater(t, d, time.Second, "a classic Go waiter cannot have seen Redisson's SPUBLISH")
		assert.Empty(t, classic.messages(), "nothing on the classic channel")
		require.NoError(t, l.Unlock(owner(ctx, 1)))
	})

	t.Run("GoUnlockMissedByJava", func(t *testing.T) {
		t.Parallel()
		ctx := scenarioCtx(t)
		name := lockName(t, "l")
		ch := rlock.ChannelName(name)
		sharded, classic := cc.watch(t, ch, true), cc.watch(t, ch, false)
		l := c.Lock(name)

		require.NoError(t, l.LockLease(owner(ctx, 1), lease))
		waiter := javaAsync(cc.java.Send("lock", "M2", name))
		waitSubscribers(t, cc.raw, ch, true, 2) // Java's SSUBSCRIBE and the sharded watcher
		// After subscribing, Redisson tries once more before it waits
		// (PROTOCOL.md 2.8); an unlock racing that try lets it in at once.
		// Nothing outside the JVM shows that the try is over, so give it
		// time: a small part of the 4s lease.
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		require.NoError(t, l.Unlock(owner(ctx, 1)))
		assert.Equal(t, "0", classic.waitMessage(t, time.Second).payload, "the classic Go client publishes with PUBLISH")

		waiter.wait(t, lease+6*time.Second)
		require.NoError(t, waiter.err)
		d := waiter.at.Sub(start)
		measure(t, suiteCluster, cc.version, "mode mismatch: classic Go unlock -> Java waiter (TTL-bounded)", d)
		assert.Greater(t, d, time.Second, "Redisson's sharded waiter cannot have seen a classic PUBLISH")
		assert.Empty(t, sharded.messages(), "nothing on the sharded channel")
		require.NoError(t, cc.java.Unlock(ctx, "M2", name))
	})
}
