package rlock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// TestClusterSync: the synchronizers on a Redis 7 cluster, with sharded
// pub/sub: names in many slots and with hash tags work, names whose keys
// would straddle slots are refused, and the waiters of one Client share
// one sharded subscription and are woken by another Client's release.
func TestClusterSync(t *testing.T) {
	cl := redistest.Cluster(t)
	ctx := context.Background()
	a := topoClient(t, clusterRC(t, cl))
	b := topoClient(t, clusterRC(t, cl))
	require.True(t, a.PubSubSharded())

	t.Run("across the slots", func(t *testing.T) {
		slots := map[uint16]bool{}
		var picked []string
		for i := 0; len(slots) < 32; i++ {
			n := "sync-" + strconv.Itoa(i)
			if !slots[names.Slot(n)/512] {
				slots[names.Slot(n)/512] = true
				picked = append(picked, n)
			}
		}
		picked = append(picked, "{user42}:jobs")
		for _, n := range picked {
			s := a.Semaphore(n)
			require.NoError(t, s.Release(ctx, 2), n)
			ok, err := s.TryAcquire(ctx, 2, 0)
			require.NoError(t, err, n)
			require.True(t, ok, n)
			p := a.PermitExpirableSemaphore(n + ":p")
			require.NoError(t, p.AddPermits(ctx, 1), n)
			id, err := p.Acquire(ctx, time.Minute)
			require.NoError(t, err, n)
			require.NoError(t, p.Release(ctx, id), n)
			l := a.CountDownLatch(n + ":l")
			if n[0] == '{' {
				// Redisson's latch channel always wraps the name in
				// braces: a tagged name's channel is in another slot.
				_, err := l.TrySetCount(ctx, 1)
				require.ErrorIs(t, err, rlock.ErrInvalidName)
				continue
			}
			ok, err = l.TrySetCount(ctx, 1)
			require.NoError(t, err, n)
			require.True(t, ok, n)
			require.NoError(t, l.CountDown(ctx), n)
			require.NoError(t, l.Await(ctx), n)
		}
		for _, bad := range []string{"a{b", "{}x"} {
			_, err := a.Semaphore(bad).TryAcquire(ctx, 1, 0)
			assert.ErrorIs(t, err, rlock.ErrInvalidName, bad)
			_, _, err = a.PermitExpirableSemaphore(bad).TryAcquire(ctx, 0, 0)
			assert.ErrorIs(t, err, rlock.ErrInvalidName, bad)
			assert.ErrorIs(t, a.CountDownLatch(bad).CountDown(ctx), rlock.ErrInvalidName, bad)
		}
	})

	t.Run("sharded wake-ups, one subscription", func(t *testing.T) {
		const name = "{jobs}:sem"
		raw := clusterRC(t, cl)
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, b.Semaphore(name).Acquire(ctx, 1))
			}()
		}
		// Parked: subscribed (the server confirmed it) and tried since;
		// Waiters counts a waiter before its subscription is confirmed.
		require.Eventually(t, func() bool { return b.Stats().Parked == 3 }, 10*time.Second, time.Millisecond)
		v, err := raw.Do(ctx, raw.B().PubsubShardnumsub().Channel(rlock.SemaphoreChannelName(name)).Build()).ToArray()
		require.NoError(t, err)
		n, _ := v[1].AsInt64()
		assert.Equal(t, int64(1), n, "one sharded subscription for the three waiters")
		start := time.Now()
		require.NoError(t, a.Semaphore(name).Release(ctx, 3))
		wg.Wait()
		// The waiters parked just before the release: a re-check (1 s
		// after parking) would come later than this.
		assert.Less(t, time.Since(start), 500*time.Millisecond, "woken by the message, not the re-check")

		const latch = "jobs-latch"
		ok, err := a.CountDownLatch(latch).TrySetCount(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, b.CountDownLatch(latch).Await(ctx))
			}()
		}
		require.Eventually(t, func() bool { return b.Stats().Parked == 3 }, 10*time.Second, time.Millisecond)
		start = time.Now()
		require.NoError(t, a.CountDownLatch(latch).CountDown(ctx))
		wg.Wait()
		assert.Less(t, time.Since(start), 500*time.Millisecond, "woken by the message, not the re-check")
	})
}

// TestSentinelSyncUnacked: with the replica stopped, an acquisition no
// replica acknowledged is given back and fails with ErrNoSyncedReplicas
// (the permits stay where they were), and a release or a lease update no
// replica acknowledged ran exactly once and says so.
func TestSentinelSyncUnacked(t *testing.T) {
	g := redistest.Sentinel(t)
	ctx := context.Background()
	rc, err := g.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	c := topoClient(t, rc, rlock.WithReplicaSync(200*time.Millisecond, 2, 10*time.Millisecond))
	s := c.Semaphore("s-sem")
	p := c.PermitExpirableSemaphore("s-psem")
	require.NoError(t, s.AddPermits(ctx, 2))
	require.NoError(t, p.AddPermits(ctx, 2))
	held, err := p.Acquire(ctx, 0)
	require.NoError(t, err)

	_, replica := masterAndReplica(t, g)
	resume := stopReplica(t, replica)
	defer resume()

	l := c.CountDownLatch("s-latch")
	ok, err := l.TrySetCount(ctx, 2)
	assert.True(t, ok, "the latch was set on the master")
	require.ErrorIs(t, err, rlock.ErrNoSyncedReplicas)
	require.NoError(t, l.CountDown(ctx), "countDown is not synced, as Redisson's")
	cnt, err := l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), cnt)

	ok, err = s.TryAcquire(ctx, 1, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, rlock.ErrNoSyncedReplicas)
	n, err := s.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the unsynced acquisition was given back")

	_, ok, err = p.TryAcquire(ctx, 0, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, rlock.ErrNoSyncedReplicas)
	n, err = p.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the unsynced acquisition was given back")
	n, err = p.AcquiredPermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	updated, err := p.UpdateLeaseTime(ctx, held, time.Hour)
	require.ErrorIs(t, err, rlock.ErrNoSyncedReplicas, "an update of the lease no replica has")
	assert.True(t, updated, "the lease was updated on the master")
	left, err := p.LeaseTime(ctx, held)
	require.NoError(t, err)
	assert.InDelta(t, time.Hour.Seconds(), left.Seconds(), 60)

	require.ErrorIs(t, s.Release(ctx, 1), rlock.ErrNoSyncedReplicas)
	n, err = s.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n, "the release ran once")
	require.ErrorIs(t, p.Release(ctx, held), rlock.ErrNoSyncedReplicas)
	n, err = p.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the release ran once")

}

// TestSentinelSettledUnsynced: a lock call whose reply was lost is settled
// by the fence script, which runs unsynced; a grant or release it finds
// run counts only once a replica has it. With the replica stopped, a
// settled grant is given back and fails with ErrNoSyncedReplicas, and a
// settled release ran once and says so. (Before, both passed as synced.)
func TestSentinelSettledUnsynced(t *testing.T) {
	g := redistest.Sentinel(t)
	ctx := context.Background()
	rc, err := g.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	faulty := redistest.NewFaulty(rc)
	c := topoClient(t, faulty, rlock.WithReplicaSync(200*time.Millisecond, 2, 10*time.Millisecond))
	held := c.Lock("s-settled-held")
	o := rlock.WithOwner(ctx, 1)
	require.NoError(t, held.Lock(o))

	master, replica := masterAndReplica(t, g)
	resume := stopReplica(t, replica)
	defer resume()
	isScript := func(s *scripts.Script) func([]string) bool {
		return func(args []string) bool {
			return len(args) > 1 && ((args[0] == "EVALSHA" && args[1] == s.SHA1()) || (args[0] == "EVAL" && args[1] == s.Text()))
		}
	}

	l := c.Lock("s-settled")
	faulty.Inject(redistest.Rule{Match: isScript(scripts.Acquire), Fault: redistest.LoseReply})
	ok, err := l.TryLock(o, 0, 0)
	assert.Zero(t, faulty.Pending(), "the reply was lost")
	assert.False(t, ok)
	require.ErrorIs(t, err, rlock.ErrNoSyncedReplicas)
	n, err := master.Do(ctx, "EXISTS", "s-settled")
	require.NoError(t, err)
	v, _ := n.AsInt64()
	assert.Zero(t, v, "the unsynced grant was given back")
	cnt, err := l.HoldCount(o)
	require.NoError(t, err)
	assert.Zero(t, cnt)

	faulty.Inject(redistest.Rule{Match: isScript(scripts.Unlock), Fault: redistest.LoseReply})
	require.ErrorIs(t, held.Unlock(o), rlock.ErrNoSyncedReplicas)
	assert.Zero(t, faulty.Pending(), "the reply was lost")
	n, err = master.Do(ctx, "EXISTS", "s-settled-held")
	require.NoError(t, err)
	v, _ = n.AsInt64()
	assert.Zero(t, v, "the release ran once")
}
