package rlock_test

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
)

// TestSemaphore follows Redisson's RedissonSemaphoreTest (PROTOCOL.md 17.10)
// on the wire layout of 5.5.
func TestSemaphore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()

	t.Run("ZeroAndNegative", func(t *testing.T) {
		s := c.Semaphore("sem-zero")
		ok, err := s.TryAcquire(ctx, 0, 0)
		require.NoError(t, err)
		assert.True(t, ok, "acquiring 0 permits succeeds without permits")
		require.NoError(t, s.Release(ctx, 0))
		assert.Equal(t, int64(0), exists(t, e, "sem-zero"), "0 permits: no call")
		_, err = s.TryAcquire(ctx, -1, 0)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
		assert.ErrorIs(t, s.Release(ctx, -1), rlock.ErrInvalidArgument)
		assert.ErrorIs(t, s.Acquire(ctx, -2), rlock.ErrInvalidArgument)
	})

	t.Run("BeyondJavaInt", func(t *testing.T) {
		// Counts are Java ints in Redisson's API; a larger one would be
		// computed in Lua doubles and stored as "1e+17", which no client
		// can read back. Refused before any call; the edges work.
		s, ps := c.Semaphore("sem-big"), c.PermitExpirableSemaphore("psem-big")
		_, err := s.TrySetPermits(ctx, math.MaxInt32+1)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
		for _, n := range []int{math.MaxInt32 + 1, math.MinInt32 - 1, 1e17} {
			assert.ErrorIs(t, s.AddPermits(ctx, n), rlock.ErrInvalidArgument, "AddPermits(%d)", n)
			assert.ErrorIs(t, ps.AddPermits(ctx, n), rlock.ErrInvalidArgument, "AddPermits(%d)", n)
			assert.ErrorIs(t, ps.SetPermits(ctx, n), rlock.ErrInvalidArgument, "SetPermits(%d)", n)
		}
		assert.ErrorIs(t, s.Release(ctx, math.MaxInt32+1), rlock.ErrInvalidArgument)
		_, err = s.TryAcquire(ctx, math.MaxInt32+1, 0)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
		assert.Equal(t, int64(0), exists(t, e, "sem-big")+exists(t, e, "psem-big"), "no call was made")

		require.NoError(t, s.AddPermits(ctx, math.MaxInt32))
		require.NoError(t, s.AddPermits(ctx, math.MinInt32))
		assert.Equal(t, -1, avail(t, s))
		require.NoError(t, ps.AddPermits(ctx, math.MaxInt32))
		n, err := ps.AvailablePermits(ctx)
		require.NoError(t, err)
		assert.Equal(t, math.MaxInt32, n)
	})

	t.Run("ReleaseWithoutSetPermits", func(t *testing.T) {
		s := c.Semaphore("sem-release")
		require.NoError(t, s.Release(ctx, 1))
		require.NoError(t, s.Release(ctx, 1))
		assert.Equal(t, 2, avail(t, s))
		assert.Equal(t, "2", get(t, e, "sem-release"), "a plain string integer key")
	})

	t.Run("TrySetPermits", func(t *testing.T) {
		s := c.Semaphore("sem-tryset")
		ok, err := s.TrySetPermits(ctx, 10)
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = s.TrySetPermits(ctx, 15)
		require.NoError(t, err)
		assert.False(t, ok, "only the first TrySetPermits applies")
		assert.Equal(t, 10, avail(t, s))
	})

	t.Run("AddAndReduce", func(t *testing.T) {
		s := c.Semaphore("sem-add")
		require.NoError(t, s.AddPermits(ctx, 5))
		require.NoError(t, s.AddPermits(ctx, -10))
		assert.Equal(t, -5, avail(t, s), "a negative AddPermits can make the count negative")
		ok, err := s.TryAcquire(ctx, 1, 0)
		require.NoError(t, err)
		assert.False(t, ok)
		require.NoError(t, s.AddPermits(ctx, 7))
		assert.Equal(t, 2, avail(t, s))
	})

	t.Run("Drain", func(t *testing.T) {
		s := c.Semaphore("sem-drain")
		n, err := s.DrainPermits(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n, "draining a missing semaphore")
		require.NoError(t, s.AddPermits(ctx, 6))
		n, err = s.DrainPermits(ctx)
		require.NoError(t, err)
		assert.Equal(t, 6, n)
		assert.Equal(t, 0, avail(t, s))
	})

	t.Run("BlockingNAcquire", func(t *testing.T) {
		s := c.Semaphore("sem-block")
		require.NoError(t, s.AddPermits(ctx, 2))
		done := make(chan error, 1)
		go func() { done <- s.Acquire(ctx, 4) }()
		waitForSubscribers(t, e, rlock.SemaphoreChannelName("sem-block"), 1)
		select {
		case err := <-done:
			t.Fatalf("Acquire(4) returned with 2 permits: %v", err)
		default:
		}
		other := e.client().Semaphore("sem-block")
		require.NoError(t, other.Release(ctx, 1))
		start := time.Now()
		require.NoError(t, other.Release(ctx, 1))
		select {
		case err := <-done:
			require.NoError(t, err)
			assert.Less(t, time.Since(start), 500*time.Millisecond, "woken by the release's message, not the re-check")
		case <-time.After(5 * time.Second):
			t.Fatal("Acquire(4) not woken by the releases")
		}
		assert.Equal(t, 0, avail(t, s))
	})

	t.Run("LostMessageCostsLatencyNotAHang", func(t *testing.T) {
		// Permits that come back with no message (a message lost in a
		// reconnect or a failover, here an INCRBY of another tool): the
		// waiter looks again within engine.SyncRecheck (1 s) of parking.
		s := c.Semaphore("sem-lost")
		done := make(chan error, 1)
		go func() { done <- s.Acquire(ctx, 1) }()
		require.Eventually(t, func() bool { return c.Stats().Parked == 1 }, 5*time.Second, time.Millisecond)
		parked := time.Now()
		require.NoError(t, e.do("INCRBY", "sem-lost", "1").Error())
		select {
		case err := <-done:
			require.NoError(t, err)
			got := time.Since(parked)
			assert.Less(t, got, 1500*time.Millisecond, "the re-check bounds a wait without a message")
			assert.Greater(t, got, 500*time.Millisecond, "no message was sent: the waiter cannot have been woken before its re-check")
		case <-time.After(5 * time.Second):
			t.Fatal("a waiter whose message was lost hangs")
		}
		assert.Equal(t, 0, avail(t, s))
	})

	t.Run("TryAcquireTimesOut", func(t *testing.T) {
		s := c.Semaphore("sem-timeout")
		start := time.Now()
		ok, err := s.TryAcquire(ctx, 1, 300*time.Millisecond)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.InDelta(t, 300, time.Since(start).Milliseconds(), 200)
	})

	t.Run("CtxEnds", func(t *testing.T) {
		s := c.Semaphore("sem-ctx")
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err := s.Acquire(cctx, 1)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})

	t.Run("Concurrency", func(t *testing.T) {
		const permits, workers, rounds = 3, 16, 20
		name := "sem-conc"
		require.NoError(t, c.Semaphore(name).AddPermits(ctx, permits))
		clients := []*rlock.Client{c, e.client(), e.client()}
		var inside, most atomic.Int32
		var wg sync.WaitGroup
		for w := range workers {
			s := clients[w%len(clients)].Semaphore(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					if !assert.NoError(t, s.Acquire(ctx, 1)) {
						return
					}
					n := inside.Add(1)
					for {
						m := most.Load()
						if n <= m || most.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if !assert.NoError(t, s.Release(ctx, 1)) {
						return
					}
				}
			}()
		}
		wg.Wait()
		assert.LessOrEqual(t, most.Load(), int32(permits), "never more holders than permits")
		assert.Equal(t, int32(permits), most.Load(), "the permits were used")
		assert.Equal(t, permits, avail(t, c.Semaphore(name)), "every permit back")
	})

	t.Run("RecordsStayFew", func(t *testing.T) {
		s := c.Semaphore("sem-records")
		require.NoError(t, s.AddPermits(ctx, 1))
		for range 50 {
			ok, err := s.TryAcquire(ctx, 1, 0)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, s.Release(ctx, 1))
		}
		n, err := e.do("HLEN", "goredisson_ops:{sem-records}:"+c.ID()).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "a resolved call's slot is given again")
	})

	// The record key's TTL is set again only when less than three
	// quarters of the hour are left: every record lives 45 minutes.
	t.Run("RecordTTL", func(t *testing.T) {
		s := c.Semaphore("sem-record-ttl")
		rec := "goredisson_ops:{sem-record-ttl}:" + c.ID()
		pttl := func() time.Duration {
			ms, err := e.do("PTTL", rec).AsInt64()
			require.NoError(t, err)
			return time.Duration(ms) * time.Millisecond
		}
		require.NoError(t, s.AddPermits(ctx, 1))
		assert.InDelta(t, time.Hour.Seconds(), pttl().Seconds(), 60, "a new record key lives an hour")
		require.NoError(t, e.do("PEXPIRE", rec, "3000000").Error()) // 50 minutes left
		require.NoError(t, s.AddPermits(ctx, 1))
		assert.InDelta(t, (50 * time.Minute).Seconds(), pttl().Seconds(), 60, "not set again with more than 45 minutes left")
		require.NoError(t, e.do("PEXPIRE", rec, "2640000").Error()) // 44 minutes left
		require.NoError(t, s.AddPermits(ctx, 1))
		assert.InDelta(t, time.Hour.Seconds(), pttl().Seconds(), 60, "set again with less than 45 minutes left")
		require.NoError(t, e.do("PERSIST", rec).Error())
		require.NoError(t, s.AddPermits(ctx, 1))
		assert.InDelta(t, time.Hour.Seconds(), pttl().Seconds(), 60, "a record key without a TTL gets one")
	})
}

func avail(t *testing.T, s interface {
	AvailablePermits(context.Context) (int, error)
}) int {
	t.Helper()
	n, err := s.AvailablePermits(context.Background())
	require.NoError(t, err)
	return n
}

// TestPermitExpirableSemaphore follows Redisson's
// RedissonPermitExpirableSemaphoreTest (PROTOCOL.md 17.10) on the layout of
// 5.6.
func TestPermitExpirableSemaphore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()

	t.Run("Layout", func(t *testing.T) {
		s := c.PermitExpirableSemaphore("psem-layout")
		ok, err := s.TrySetPermits(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		id, err := s.Acquire(ctx, 0)
		require.NoError(t, err)
		assert.Regexp(t, `^[0-9a-f]{32}$`, id)
		id2, err := s.Acquire(ctx, 5*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "0", get(t, e, "psem-layout"))
		z, err := e.do("ZRANGE", "{psem-layout}:timeout", "0", "-1", "WITHSCORES").AsZScores()
		require.NoError(t, err)
		require.Len(t, z, 2)
		raw1, _ := hex.DecodeString(id)
		raw2, _ := hex.DecodeString(id2)
		assert.Equal(t, string(raw2), z[0].Member, "members are the ids' 16 bytes")
		assert.InDelta(t, float64(time.Now().Add(5*time.Second).UnixMilli()), z[0].Score, 2000)
		assert.Equal(t, string(raw1), z[1].Member)
		assert.Equal(t, 922337203685477.0, z[1].Score, "the non-expiring marker")
		lt, err := s.LeaseTime(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, time.Duration(-1), lt)
		lt, err = s.LeaseTime(ctx, id2)
		require.NoError(t, err)
		assert.InDelta(t, 5000, lt.Milliseconds(), 2000)
		require.NoError(t, s.Release(ctx, id))
		require.NoError(t, s.Release(ctx, id2))
		assert.Equal(t, 2, avail(t, s))
	})

	t.Run("ReleaseUnknown", func(t *testing.T) {
		s := c.PermitExpirableSemaphore("psem-unknown")
		require.NoError(t, s.AddPermits(ctx, 1))
		err := s.Release(ctx, "00112233445566778899aabbccddeeff")
		assert.ErrorIs(t, err, rlock.ErrNoPermit)
		for _, bad := range []string{"", "xyz", "00112233445566778899aabbccddeef", "00112233445566778899aabbccddeefg"} {
			_, err := s.TryRelease(ctx, bad)
			assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "id %q", bad)
		}
		_, err = s.LeaseTime(ctx, "00112233445566778899aabbccddeeff")
		assert.ErrorIs(t, err, rlock.ErrNoPermit)
		id, err := s.Acquire(ctx, 0)
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx, id))
		assert.ErrorIs(t, s.Release(ctx, id), rlock.ErrNoPermit, "released twice")
	})

	t.Run("ExpiredPermitComesBack", func(t *testing.T) {
		s := c.PermitExpirableSemaphore("psem-expire")
		trySet(t, s, 1)
		id, err := s.Acquire(ctx, 500*time.Millisecond)
		require.NoError(t, err)
		start := time.Now()
		id2, err := e.client().PermitExpirableSemaphore("psem-expire").Acquire(ctx, 0)
		require.NoError(t, err, "the waiter gets the permit at its lease's end")
		took := time.Since(start)
		assert.InDelta(t, 500, took.Milliseconds(), 250, "woken at the nearest expiry (%v)", took)
		ok, err := s.TryRelease(ctx, id)
		require.NoError(t, err)
		assert.False(t, ok, "an expired id")
		require.NoError(t, s.Release(ctx, id2))
	})

	t.Run("UpdateLeaseTime", func(t *testing.T) {
		s := c.PermitExpirableSemaphore("psem-update")
		trySet(t, s, 1)
		ok, err := s.UpdateLeaseTime(ctx, "00112233445566778899aabbccddeeff", time.Second)
		require.NoError(t, err)
		assert.False(t, ok, "unknown id")
		id, err := s.Acquire(ctx, 300*time.Millisecond)
		require.NoError(t, err)
		ok, err = s.UpdateLeaseTime(ctx, id, 2*time.Second)
		require.NoError(t, err)
		assert.True(t, ok)
		lt, err := s.LeaseTime(ctx, id)
		require.NoError(t, err)
		assert.Greater(t, lt, time.Second)
		ok, err = s.UpdateLeaseTime(ctx, id, 100*time.Millisecond)
		require.NoError(t, err)
		assert.True(t, ok)
		require.Eventually(t, func() bool { return avail(t, s) == 1 }, 5*time.Second, 10*time.Millisecond)
		ok, err = s.UpdateLeaseTime(ctx, id, time.Second)
		require.NoError(t, err)
		assert.False(t, ok, "after expiry")
	})

	t.Run("SetPermitsAndCounts", func(t *testing.T) {
		s := c.PermitExpirableSemaphore("psem-set")
		require.NoError(t, s.SetPermits(ctx, 3))
		id, err := s.Acquire(ctx, 0)
		require.NoError(t, err)
		require.NoError(t, s.SetPermits(ctx, 9))
		assert.Equal(t, 8, avail(t, s), "the total is 9 with one held")
		n, err := s.Permits(ctx)
		require.NoError(t, err)
		assert.Equal(t, 9, n)
		n, err = s.AcquiredPermits(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		require.NoError(t, s.SetPermits(ctx, 0))
		assert.Equal(t, -1, avail(t, s), "can go negative")
		require.NoError(t, s.AddPermits(ctx, 3))
		assert.Equal(t, 2, avail(t, s))
		require.NoError(t, s.Release(ctx, id))
	})

	t.Run("Many", func(t *testing.T) {
		s := c.PermitExpirableSemaphore("psem-many")
		trySet(t, s, 5)
		ids, err := s.AcquireN(ctx, 3, 0)
		require.NoError(t, err)
		require.Len(t, ids, 3)
		_, ok, err := s.TryAcquireN(ctx, 3, 0, 0)
		require.NoError(t, err)
		assert.False(t, ok, "only 2 left")
		n, err := s.TryReleaseN(ctx, []string{ids[0], "00112233445566778899aabbccddeeff"})
		require.NoError(t, err)
		assert.Equal(t, 0, n, "a list with an unknown id releases nothing")
		assert.Equal(t, 2, avail(t, s))
		require.NoError(t, s.ReleaseN(ctx, ids[:2]))
		assert.ErrorIs(t, s.ReleaseN(ctx, ids), rlock.ErrNoPermit, "two of them released already")
		require.NoError(t, s.Release(ctx, ids[2]))
		assert.Equal(t, 5, avail(t, s))
		_, err = s.AcquireN(ctx, 0, 0)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
		_, _, err = s.TryAcquireN(ctx, 1<<60, 0, 0)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "a huge n is refused, not allocated")
		// A lease below Redis' millisecond would hand out an expired permit.
		_, _, err = s.TryAcquire(ctx, 0, time.Nanosecond)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
		_, err = s.UpdateLeaseTime(ctx, ids[2], 999*time.Microsecond)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
	})

	t.Run("ManyExpiredAtOnce", func(t *testing.T) {
		// More expired permits than Lua can unpack (about 8000) come back
		// in one query.
		s := c.PermitExpirableSemaphore("psem-many-expired")
		require.NoError(t, s.AddPermits(ctx, 9000))
		for _, n := range []int{4096, 4096, 808} {
			_, err := s.AcquireN(ctx, n, 50*time.Millisecond)
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool {
			n, err := s.AvailablePermits(ctx)
			require.NoError(t, err)
			return n == 9000
		}, 5*time.Second, 20*time.Millisecond)
	})

	t.Run("Concurrency", func(t *testing.T) {
		const permits, workers, rounds = 2, 12, 15
		name := "psem-conc"
		trySet(t, c.PermitExpirableSemaphore(name), permits)
		var inside, most atomic.Int32
		var wg sync.WaitGroup
		for w := range workers {
			s := c.PermitExpirableSemaphore(name)
			if w%2 == 1 {
				s = e.client().PermitExpirableSemaphore(name)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					id, err := s.Acquire(ctx, 10*time.Second)
					if !assert.NoError(t, err) {
						return
					}
					n := inside.Add(1)
					for {
						m := most.Load()
						if n <= m || most.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if !assert.NoError(t, s.Release(ctx, id)) {
						return
					}
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, int32(permits), most.Load())
		assert.Equal(t, permits, avail(t, c.PermitExpirableSemaphore(name)))
	})
}

// TestCountDownLatch follows Redisson's RedissonCountDownLatchTest
// (PROTOCOL.md 17.10) on the layout of 5.7.
func TestCountDownLatch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()

	t.Run("AwaitMissing", func(t *testing.T) {
		l := c.CountDownLatch("latch-missing")
		n, err := l.Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(0), n)
		require.NoError(t, l.Await(ctx), "a missing latch is open")
		require.NoError(t, l.CountDown(ctx))
		n, err = l.Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "never below 0")
		assert.Equal(t, int64(0), exists(t, e, "latch-missing"))
	})

	t.Run("TrySetCount", func(t *testing.T) {
		l := c.CountDownLatch("latch-tryset")
		ok, err := l.TrySetCount(ctx, 2)
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = l.TrySetCount(ctx, 5)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, "2", get(t, e, "latch-tryset"))
		_, err = l.TrySetCount(ctx, 0)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
		ok, err = l.Delete(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = l.Delete(ctx)
		require.NoError(t, err)
		assert.False(t, ok)
	})

	t.Run("ManyAwaiters", func(t *testing.T) {
		name := "latch-many"
		l := c.CountDownLatch(name)
		ok, err := l.TrySetCount(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		const n = 20
		done := make(chan time.Time, n)
		clients := []*rlock.Client{c, e.client()}
		for i := range n {
			w := clients[i%2].CountDownLatch(name)
			go func() {
				if assert.NoError(t, w.Await(ctx)) {
					done <- time.Now()
				}
			}()
		}
		waitForSubscribers(t, e, "redisson_countdownlatch__channel__{"+name+"}", 2)
		// Every awaiter parked after reading a count above zero: a release
		// at count 1 would show, and the release at 0 is by message.
		require.Eventually(t, func() bool { return clients[0].Stats().Parked+clients[1].Stats().Parked == n },
			10*time.Second, time.Millisecond, "not every awaiter parked")
		require.NoError(t, l.CountDown(ctx))
		n1, err := l.Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), n1)
		assert.Empty(t, done, "released at count 1")
		start := time.Now()
		require.NoError(t, clients[1].CountDownLatch(name).CountDown(ctx))
		for range n {
			select {
			case at := <-done:
				assert.Less(t, at.Sub(start), 500*time.Millisecond)
			case <-time.After(5 * time.Second):
				t.Fatal("an awaiter was not released")
			}
		}
	})

	t.Run("DeleteKeepsAwaiters", func(t *testing.T) {
		// Redisson: a delete publishes "1", which closes the latch;
		// awaiters wait on until a latch set again reaches zero.
		name := "latch-delete"
		l := c.CountDownLatch(name)
		ok, err := l.TrySetCount(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		res := make(chan bool, 1)
		w := e.client().CountDownLatch(name)
		gets := commandCalls(t, e, "get")
		go func() {
			ok, err := w.AwaitTimeout(ctx, 3*time.Second)
			assert.NoError(t, err)
			res <- ok
		}()
		// The awaiter reads the count, subscribes and reads it again; a
		// delete before that second read finds no latch, which is open
		// (Redisson's too). Delete once it has read 1 while subscribed.
		waitForSubscribers(t, e, rlock.LatchChannelName(name), 1)
		require.Eventually(t, func() bool { return commandCalls(t, e, "get") >= gets+2 }, 10*time.Second, time.Millisecond)
		ok, err = l.Delete(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		select {
		case ok := <-res:
			assert.False(t, ok, "an awaiter was released by a delete")
		case <-time.After(10 * time.Second):
			t.Fatal("AwaitTimeout did not return")
		}
	})

	t.Run("AwaitTimeout", func(t *testing.T) {
		l := c.CountDownLatch("latch-timeout")
		ok, err := l.TrySetCount(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		start := time.Now()
		ok, err = l.AwaitTimeout(ctx, 300*time.Millisecond)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.InDelta(t, 300, time.Since(start).Milliseconds(), 200)
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		assert.True(t, errors.Is(l.Await(cctx), context.DeadlineExceeded))
	})
}

func exists(t *testing.T, e *env, key string) int64 {
	t.Helper()
	n, err := e.do("EXISTS", key).AsInt64()
	require.NoError(t, err)
	return n
}

func get(t *testing.T, e *env, key string) string {
	t.Helper()
	v, err := e.do("GET", key).ToString()
	require.NoError(t, err)
	return v
}

func trySet(t *testing.T, s *rlock.PermitExpirableSemaphore, n int) {
	t.Helper()
	ok, err := s.TrySetPermits(context.Background(), n)
	require.NoError(t, err)
	require.True(t, ok)
}
