package rlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// familyLockers returns one of each member of the family on name.
func familyLockers(c *rlock.Client, name string) map[string]interface {
	rlock.Locker
	HoldCount(context.Context) (int, error)
} {
	rw := c.ReadWriteLock(name)
	return map[string]interface {
		rlock.Locker
		HoldCount(context.Context) (int, error)
	}{
		"read": rw.ReadLock(), "write": rw.WriteLock(), "fenced": c.FencedLock(name),
		"spin": c.SpinLock(name), "nonreentrant": c.NonReentrantLock(name),
		"fair": c.FairLock(name), "nonreentrantfair": c.NonReentrantFairLock(name),
	}
}

// TestClusterFamily: every member of the family on a 3+3 cluster, over
// names in every part of the slot space and hash-tagged ones, with sharded
// wake-ups and read renewals batched by slot.
func TestClusterFamily(t *testing.T) {
	cl := redistest.Cluster(t)
	ctx := context.Background()

	t.Run("every kind across the slots", func(t *testing.T) {
		c := topoClient(t, clusterRC(t, cl))
		require.True(t, c.PubSubSharded())
		slots := map[uint16]bool{}
		var picked []string
		for i := 0; len(slots) < 64; i++ {
			n := "fam-" + strconv.Itoa(i)
			if !slots[names.Slot(n)/256] {
				slots[names.Slot(n)/256] = true
				picked = append(picked, n)
			}
		}
		picked = append(picked, "{user42}:cart", "x}{y}z")
		for _, n := range picked {
			for kind, l := range familyLockers(c, n) {
				ok, err := l.TryLock(ctx, 0, 0)
				require.NoError(t, err, "%s %s", kind, n)
				require.True(t, ok, "%s %s", kind, n)
				cnt, err := l.HoldCount(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, cnt, "%s %s", kind, n)
				require.NoError(t, l.Unlock(ctx), "%s %s", kind, n)
			}
		}
		for _, bad := range []string{"a{b", "{}x"} {
			for kind, l := range familyLockers(c, bad) {
				assert.ErrorIs(t, l.Lock(ctx), rlock.ErrInvalidName, "%s %s", kind, bad)
			}
		}
	})

	// Contention for every kind, between two clients, on names in several
	// slots: the second is kept out while the first holds and gets in
	// once it unlocks (woken by a sharded message, or by its spin); a
	// fenced lock's token grows with each grant; a non-reentrant lock
	// refuses its holder's second acquire.
	t.Run("every kind contended across two clients", func(t *testing.T) {
		a := topoClient(t, clusterRC(t, cl))
		b := topoClient(t, clusterRC(t, cl))
		raw := clusterRC(t, cl)
		// evals is the number of script calls the cluster's nodes ran.
		evals := func() int64 {
			n, err := redistest.CommandCalls(ctx, raw, "evalsha", "eval")
			require.NoError(t, err)
			return n
		}
		for _, n := range []string{"contend-1", "contend-22", "{user42}:contend"} {
			la, lb := familyLockers(a, n), familyLockers(b, n)
			for kind := range la {
				if kind == "read" {
					continue // readers share: the write lock covers exclusion
				}
				require.NoError(t, la[kind].Lock(ctx), "%s %s", kind, n)
				ok, err := lb[kind].TryLock(ctx, 0, 0)
				require.NoError(t, err, "%s %s", kind, n)
				require.False(t, ok, "%s %s: a second holder", kind, n)
				got := make(chan error, 1)
				bctx := rlock.WithOwner(ctx, 7) // the waiter's goroutine and this one
				before := evals()
				go func() {
					ok, err := lb[kind].TryLock(bctx, 10*time.Second, 0)
					if err == nil && !ok {
						err = errors.New("not acquired within 10s")
					}
					got <- err
				}()
				switch kind {
				case "nonreentrant", "nonreentrantfair":
					_, err := la[kind].TryLock(ctx, 0, 0)
					assert.ErrorIs(t, err, rlock.ErrAlreadyHeld, "%s %s", kind, n)
				}
				if kind != "spin" {
					// Parked after a failed attempt: only the unlock's
					// sharded message gets it in within 10 s (the hold's
					// TTL is the watchdog's 30 s).
					require.Eventually(t, func() bool { return b.Stats().Parked == 1 }, 10*time.Second, time.Millisecond, "%s %s", kind, n)
				} else {
					// Spinning: its first attempt and a retry failed.
					require.Eventually(t, func() bool { return evals()-before >= 2 }, 10*time.Second, time.Millisecond, "%s %s", kind, n)
				}
				require.NoError(t, la[kind].Unlock(ctx), "%s %s", kind, n)
				require.NoError(t, <-got, "%s %s", kind, n)
				require.NoError(t, lb[kind].Unlock(bctx), "%s %s", kind, n)
			}
			ta, err := a.FencedLock(n).LockAndGetToken(ctx)
			require.NoError(t, err)
			require.NoError(t, a.FencedLock(n).Unlock(ctx))
			tb, err := b.FencedLock(n).LockAndGetToken(ctx)
			require.NoError(t, err)
			require.NoError(t, b.FencedLock(n).Unlock(ctx))
			assert.Greater(t, tb, ta, "%s: tokens grow across clients", n)
		}
	})

	// Redisson's testInCluster: write, read, read unlock, write unlock.
	t.Run("read-write lock in a cluster", func(t *testing.T) {
		c := topoClient(t, clusterRC(t, cl))
		for _, n := range []string{"rw-cluster", "{tag}rw"} {
			rw := c.ReadWriteLock(n)
			require.NoError(t, rw.WriteLock().Lock(ctx))
			require.NoError(t, rw.ReadLock().Lock(ctx))
			require.NoError(t, rw.ReadLock().Unlock(ctx))
			require.NoError(t, rw.WriteLock().Unlock(ctx))
			locked, err := rw.ReadLock().IsLocked(ctx)
			require.NoError(t, err)
			assert.False(t, locked)
		}
	})

	t.Run("sharded wake-ups of readers and writers", func(t *testing.T) {
		a := topoClient(t, clusterRC(t, cl))
		b := topoClient(t, clusterRC(t, cl))
		raw := clusterRC(t, cl)
		const name = "{orders}:rw"
		ch := rlock.RWLockChannelName(name)
		require.NoError(t, a.ReadWriteLock(name).WriteLock().Lock(ctx))
		var wg sync.WaitGroup
		r := b.ReadWriteLock(name).ReadLock()
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				octx := rlock.WithOwner(ctx, int64(10+i))
				assert.NoError(t, r.Lock(octx))
			}()
		}
		// Parked: subscribed (confirmed) and tried since.
		require.Eventually(t, func() bool { return b.Stats().Parked == 3 }, 10*time.Second, time.Millisecond)
		v, err := raw.Do(ctx, raw.B().PubsubShardnumsub().Channel(ch).Build()).ToArray()
		require.NoError(t, err)
		n, _ := v[1].AsInt64()
		assert.Equal(t, int64(1), n, "one sharded subscription for the three waiters")
		start := time.Now()
		require.NoError(t, a.ReadWriteLock(name).WriteLock().Unlock(ctx))
		wg.Wait()
		assert.Less(t, time.Since(start), 5*time.Second)
		// The readers' last unlock wakes a writer of the other client.
		got := make(chan error, 1)
		go func() { got <- a.ReadWriteLock(name).WriteLock().Lock(rlock.WithOwner(ctx, 1)) }()
		require.Eventually(t, func() bool { return a.Stats().Waiters == 1 }, 10*time.Second, time.Millisecond)
		for i := range 3 {
			require.NoError(t, r.Unlock(rlock.WithOwner(ctx, int64(10+i))))
		}
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("the writer was not woken")
		}
		require.NoError(t, a.ReadWriteLock(name).WriteLock().Unlock(rlock.WithOwner(ctx, 1)))
	})

	t.Run("fair hand-off with sharded per-waiter wake-ups", func(t *testing.T) {
		a := topoClient(t, clusterRC(t, cl))
		b := topoClient(t, clusterRC(t, cl))
		raw := clusterRC(t, cl)
		for _, name := range []string{"fair-cluster", "{acct7}:fair"} {
			holder := rlock.WithOwner(ctx, 1)
			require.NoError(t, a.FairLock(name).Lock(holder))
			var order []int
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range 4 {
				c := []*rlock.Client{a, b}[i%2]
				wg.Add(1)
				go func() {
					defer wg.Done()
					octx := rlock.WithOwner(ctx, int64(10+i))
					if !assert.NoError(t, c.FairLock(name).Lock(octx)) {
						return
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					assert.NoError(t, c.FairLock(name).Unlock(octx))
				}()
				require.Eventually(t, func() bool {
					n, err := raw.Do(ctx, raw.B().Llen().Key(rlock.FairQueueName(name)).Build()).AsInt64()
					return err == nil && n == int64(i+1)
				}, 10*time.Second, time.Millisecond)
				field := c.ID() + ":" + strconv.Itoa(10+i)
				require.Eventually(t, func() bool {
					v, err := raw.Do(ctx, raw.B().PubsubShardnumsub().Channel(rlock.ChannelName(name)+":"+field).Build()).ToArray()
					if err != nil || len(v) != 2 {
						return false
					}
					n, _ := v[1].AsInt64()
					return n == 1
				}, 10*time.Second, time.Millisecond, "a sharded subscription to the waiter's own channel")
			}
			start := time.Now()
			require.NoError(t, a.FairLock(name).Unlock(holder))
			wg.Wait()
			assert.Equal(t, []int{0, 1, 2, 3}, order, "%s: FIFO", name)
			assert.Less(t, time.Since(start), 5*time.Second, "woken by messages, not TTLs")
		}
	})

	t.Run("MultiLock over names in different slots", func(t *testing.T) {
		a := topoClient(t, clusterRC(t, cl))
		b := topoClient(t, clusterRC(t, cl))
		picked := []string{"ml-a", "ml-b", "{ml}:c"}
		group := func(c *rlock.Client) *rlock.MultiLock {
			var ls []rlock.Locker
			for _, n := range picked {
				ls = append(ls, c.Lock(n))
			}
			return rlock.NewMultiLock(ls...)
		}
		require.NoError(t, group(a).LockLease(ctx, 5*time.Second))
		ok, err := group(b).TryLock(ctx, 200*time.Millisecond, 0)
		require.NoError(t, err)
		assert.False(t, ok)
		for _, n := range picked {
			ok, err := b.Lock(n).TryLock(ctx, 0, 0)
			require.NoError(t, err)
			assert.False(t, ok, "%s", n)
		}
		require.NoError(t, group(a).Unlock(ctx))
		ok, err = group(b).TryLock(ctx, 0, 0)
		require.NoError(t, err)
		assert.True(t, ok)
		require.NoError(t, group(b).Unlock(ctx))
	})

	t.Run("read and write renewals across slots", func(t *testing.T) {
		c := topoClient(t, clusterRC(t, cl), rlock.WithWatchdogTimeout(time.Second))
		const n = 200
		for i := range n {
			rw := c.ReadWriteLock("rwd-" + strconv.Itoa(i))
			me := rlock.WithOwner(ctx, int64(i))
			if i%2 == 0 {
				require.NoError(t, rw.ReadLock().Lock(me))
				require.NoError(t, rw.ReadLock().Lock(me))
			} else {
				require.NoError(t, rw.WriteLock().Lock(me))
			}
		}
		require.Equal(t, n, c.Stats().Renewing)
		time.Sleep(3500 * time.Millisecond) // three leases: only renewal keeps them
		for i := range n {
			rw := c.ReadWriteLock("rwd-" + strconv.Itoa(i))
			me := rlock.WithOwner(ctx, int64(i))
			var l interface {
				rlock.Locker
				HoldCount(context.Context) (int, error)
			} = rw.WriteLock()
			want := 1
			if i%2 == 0 {
				l, want = rw.ReadLock(), 2
			}
			cnt, err := l.HoldCount(me)
			require.NoError(t, err)
			require.Equal(t, want, cnt, "lock %d expired: not renewed", i)
			for range want {
				require.NoError(t, l.Unlock(me))
			}
		}
		assert.Zero(t, c.Stats().Renewing)
	})
}

// TestSentinelFamily: read, write, fenced, spin and non-reentrant holds
// survive a Sentinel failover (renewed on the new master), and tokens keep
// rising; then, with a replica that does not acknowledge, a read, write,
// fenced or fair acquisition (a fair hand-off to a queued waiter included)
// is released and reported, and an unlock is never run twice. (The failover comes first: Sentinel will not promote a replica
// that was just stopped.)
func TestSentinelFamily(t *testing.T) {
	g := redistest.Sentinel(t)
	ctx := context.Background()
	rc, err := g.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)

	t.Run("failover", func(t *testing.T) {
		c := topoClient(t, rc, rlock.WithWatchdogTimeout(2*time.Second))
		me := rlock.WithOwner(ctx, 1)
		rw := c.ReadWriteLock("s-rw")
		require.NoError(t, rw.ReadLock().Lock(me))
		require.NoError(t, c.ReadWriteLock("s-w").WriteLock().Lock(me))
		require.NoError(t, c.SpinLock("s-spin").Lock(me))
		require.NoError(t, c.NonReentrantLock("s-nr").Lock(me))
		f := c.FencedLock("s-fenced")
		tok, err := f.LockAndGetToken(me)
		require.NoError(t, err)
		require.Equal(t, int64(1), tok)

		old, err := g.MasterAddr(ctx)
		require.NoError(t, err)
		newAddr, err := g.Failover(ctx)
		require.NoError(t, err)
		require.NotEqual(t, old, newAddr)
		time.Sleep(6 * time.Second) // three leases: only renewal on the new master keeps them
		for _, l := range []interface {
			rlock.Locker
		}{rw.ReadLock(), c.ReadWriteLock("s-w").WriteLock(), f, c.SpinLock("s-spin"), c.NonReentrantLock("s-nr")} {
			held, err := l.IsHeld(me)
			require.NoError(t, err)
			require.True(t, held, "%s: renewal did not continue on the new master", l.Name())
			require.NoError(t, l.Unlock(me))
		}
		tok, err = f.LockAndGetToken(me)
		require.NoError(t, err)
		assert.Equal(t, int64(2), tok, "the token survived the failover (replica sync)")
		require.NoError(t, f.Unlock(me))
	})
	t.Run("unacknowledged writes", func(t *testing.T) {
		c := topoClient(t, rc, rlock.WithReplicaSync(200*time.Millisecond, 2, 10*time.Millisecond))
		me := rlock.WithOwner(ctx, 9)
		lockers := []interface {
			rlock.Locker
			HoldCount(context.Context) (int, error)
		}{c.ReadWriteLock("s-u-r").ReadLock(), c.ReadWriteLock("s-u-w").WriteLock(), c.FencedLock("s-u-f"), c.FairLock("s-u-fair")}
		// wd renews every 333ms; its read hold is taken while the replica runs.
		wd := topoClient(t, rc, rlock.WithWatchdogTimeout(time.Second), rlock.WithReplicaSync(200*time.Millisecond, 2, 10*time.Millisecond))
		require.NoError(t, wd.ReadWriteLock("s-renewed").ReadLock().Lock(me))
		// Each holds twice, with the replica running.
		for _, l := range lockers {
			require.NoError(t, l.Lock(me))
			require.NoError(t, l.Lock(me))
		}
		// A fair lock held (by wd) with the replica running, to be handed
		// to a queued waiter with it stopped.
		fairQ := "s-unsynced-fairq"
		require.NoError(t, wd.FairLock(fairQ).Lock(me))
		master, replica := masterAndReplica(t, g)
		resume := stopReplica(t, replica)
		// An acquisition no replica acknowledged is released.
		r2 := c.ReadWriteLock("s-unsynced-r").ReadLock()
		for _, l := range []rlock.Locker{r2, c.ReadWriteLock("s-unsynced-w").WriteLock(), c.FencedLock("s-unsynced-f"), c.FairLock("s-unsynced-fair")} {
			ok, err := l.TryLock(me, 0, 0)
			assert.False(t, ok, "%T", l)
			require.ErrorIs(t, err, rlock.ErrNoSyncedReplicas, "%T", l)
		}
		// A fair grant to a queued waiter that no replica acknowledged:
		// the holder's unlock ran once, the waiter's grant is released
		// (again and again: every attempt is unsynced) and its Lock says
		// so, and the queue is left empty.
		waiter := rlock.WithOwner(ctx, 10)
		wctx, wcancel := context.WithTimeout(waiter, 20*time.Second)
		defer wcancel()
		queued := make(chan error, 1)
		go func() { queued <- c.FairLock(fairQ).Lock(wctx) }()
		require.Eventually(t, func() bool {
			n, err := master.Do(ctx, "LLEN", "redisson_lock_queue:{"+fairQ+"}")
			v, _ := n.AsInt64()
			return err == nil && v == 1
		}, 10*time.Second, 5*time.Millisecond, "the waiter did not queue")
		require.ErrorIs(t, wd.FairLock(fairQ).Unlock(me), rlock.ErrNoSyncedReplicas, "the holder's unlock ran on the master only")
		select {
		case err := <-queued:
			require.ErrorIs(t, err, rlock.ErrNoSyncedReplicas, "the waiter's unsynced grant")
		case <-time.After(15 * time.Second):
			t.Fatal("the queued waiter's Lock did not return")
		}
		for _, fl := range []*rlock.FairLock{wd.FairLock(fairQ), c.FairLock(fairQ)} {
			for _, o := range []context.Context{me, waiter} {
				n, err := fl.HoldCount(o)
				require.NoError(t, err)
				assert.Zero(t, n, "a fair hold left after the unsynced hand-off")
			}
		}
		keys, err := master.Do(ctx, "KEYS", "*s-unsynced-*")
		require.NoError(t, err)
		left, _ := keys.AsStrSlice()
		for _, k := range left {
			// The token stays (never deleted), and the Go-only markers of
			// the replica sync expire by themselves.
			if k != rlock.TokenName("s-unsynced-f") && !strings.HasPrefix(k, "goredisson_fence:") {
				t.Errorf("an unsynced acquisition left %q behind", k)
			}
		}
		// An unlock no replica acknowledged ran once.
		for _, l := range lockers {
			require.ErrorIs(t, l.Unlock(me), rlock.ErrNoSyncedReplicas, "%T", l)
			n, err := l.HoldCount(me)
			require.NoError(t, err)
			assert.Equal(t, 1, n, "%T: one Unlock of a count-2 hold released more than one level", l)
		}
		// Renewals go on while no replica acknowledges them (they are
		// renewed again every period; the hold is not reported lost).
		renewed := wd.ReadWriteLock("s-renewed").ReadLock()
		hctx, err := renewed.HoldContext(me)
		require.NoError(t, err)
		time.Sleep(3 * time.Second) // three watchdog leases with the replica stopped
		require.NoError(t, hctx.Err(), "a renewal no replica acknowledged ended the hold: %v", context.Cause(hctx))
		n, err := renewed.HoldCount(me)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		// A force unlock no replica acknowledged deleted the lock (once)
		// and says so; the hold it deleted ends.
		existed, err := c.ReadWriteLock("s-renewed").ReadLock().ForceUnlock(me)
		assert.True(t, existed)
		require.ErrorIs(t, err, rlock.ErrNoSyncedReplicas, "the force unlock ran on the master only")
		<-hctx.Done()
		assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)

		resume()
		for _, l := range lockers {
			require.NoError(t, l.Unlock(me))
		}
	})

}
