package rlocktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/rlocktest"
)

// TestFamilyOnMiniredis: each primitive's basic contract holds on
// miniredis, so a user's unit test of code that takes them means something.
func TestFamilyOnMiniredis(t *testing.T) {
	c, mr := rlocktest.NewWithServer(t)
	ctx := context.Background()
	o1, o2 := rlock.WithOwner(ctx, 1), rlock.WithOwner(ctx, 2)

	t.Run("lock", func(t *testing.T) {
		l := c.Lock("lock")
		require.NoError(t, l.Lock(o1))
		require.NoError(t, l.Lock(o1)) // reentrant
		n, err := l.HoldCount(o1)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		ok, err := l.TryLock(o2, 0, 0)
		require.NoError(t, err)
		assert.False(t, ok, "another owner is excluded")
		got := make(chan error, 1)
		go func() {
			ok, err := l.TryLock(o2, 10*time.Second, 0)
			if err == nil && !ok {
				err = assert.AnError
			}
			got <- err
		}()
		require.Eventually(t, func() bool { return c.Stats().Waiters == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, l.Unlock(o1))
		require.NoError(t, l.Unlock(o1))
		select {
		case err := <-got:
			require.NoError(t, err, "the waiter was woken by the unlock message")
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not woken")
		}
		require.NoError(t, l.Unlock(o2))
		assert.False(t, mr.Exists("lock"))
	})

	t.Run("lease with FastForward", func(t *testing.T) {
		l := c.Lock("lease")
		require.NoError(t, l.LockLease(o1, time.Minute))
		ok, err := l.TryLock(o2, 0, 0)
		require.NoError(t, err)
		assert.False(t, ok)
		mr.FastForward(time.Minute) // the lease runs out on miniredis' clock
		ok, err = l.TryLock(o2, 0, 0)
		require.NoError(t, err)
		assert.True(t, ok)
		require.NoError(t, l.Unlock(o2))
	})

	t.Run("read-write", func(t *testing.T) {
		rw := c.ReadWriteLock("rw")
		require.NoError(t, rw.ReadLock().Lock(o1))
		require.NoError(t, rw.ReadLock().Lock(o2)) // readers share
		ok, err := rw.WriteLock().TryLock(rlock.WithOwner(ctx, 3), 0, 0)
		require.NoError(t, err)
		assert.False(t, ok, "a writer is excluded by readers")
		require.NoError(t, rw.ReadLock().Unlock(o1))
		require.NoError(t, rw.ReadLock().Unlock(o2))
		ok, err = rw.WriteLock().TryLock(rlock.WithOwner(ctx, 3), 0, 0)
		require.NoError(t, err)
		assert.True(t, ok)
		require.NoError(t, rw.WriteLock().Unlock(rlock.WithOwner(ctx, 3)))
	})

	t.Run("fair", func(t *testing.T) {
		l := c.FairLock("fair")
		require.NoError(t, l.Lock(o1))
		order := make(chan int64, 2)
		for _, id := range []int64{2, 3} {
			queued := len(mr.Keys())
			go func() {
				o := rlock.WithOwner(ctx, id)
				if assert.NoError(t, l.Lock(o)) {
					order <- id
					assert.NoError(t, l.Unlock(o))
				}
			}()
			// Queue them in order: wait until this one is in the queue.
			require.Eventually(t, func() bool {
				q, _ := mr.List(rlock.FairQueueName("fair"))
				return len(q) == int(id-1)
			}, 5*time.Second, time.Millisecond, "queued (keys before: %d)", queued)
		}
		require.NoError(t, l.Unlock(o1))
		assert.Equal(t, int64(2), <-order)
		assert.Equal(t, int64(3), <-order)
	})

	t.Run("fenced", func(t *testing.T) {
		l := c.FencedLock("fenced")
		t1, err := l.LockAndGetToken(o1)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(o1))
		t2, err := l.LockAndGetToken(o2)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(o2))
		assert.Greater(t, t2, t1)
	})

	t.Run("semaphore and latch", func(t *testing.T) {
		s := c.Semaphore("sem")
		ok, err := s.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, s.Acquire(ctx, 1))
		ok, err = s.TryAcquire(ctx, 1, 0)
		require.NoError(t, err)
		assert.False(t, ok)
		require.NoError(t, s.Release(ctx, 1))

		p := c.PermitExpirableSemaphore("psem")
		_, err = p.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		id, err := p.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, p.Release(ctx, id))

		l := c.CountDownLatch("latch")
		ok, err = l.TrySetCount(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		done := make(chan error, 1)
		go func() { done <- l.Await(ctx) }()
		require.Eventually(t, func() bool { return c.Stats().Subscriptions > 0 }, 5*time.Second, time.Millisecond)
		require.NoError(t, l.CountDown(ctx))
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("Await was not released")
		}
	})
}
