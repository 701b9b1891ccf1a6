package rlock_test

// Scenarios of Redisson's RedissonLockTest (PROTOCOL.md 17.1) not covered
// elsewhere.

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// testRedisFailed: with the server gone, TryLock fails with an error; it
// neither hangs nor reports a lock.
func TestRedisFailed(t *testing.T) {
	srv := redistest.StandaloneWith(t, redistest.Config{})
	rc, err := srv.Client()
	require.NoError(t, err)
	defer rc.Close()
	c, err := rlock.New(rc, rlock.WithCommandTimeout(time.Second))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, srv.Kill())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ok, err := c.Lock("failed").TryLock(ctx, 5*time.Second, 10*time.Second)
	assert.False(t, ok)
	assert.Error(t, err)
	assert.NoError(t, ctx.Err(), "TryLock must fail by itself, not by the test's deadline")
}

// testAutoExpire: a client that goes away without unlocking stops renewing;
// its lock expires within the watchdog timeout.
func TestAutoExpireAfterClose(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	gone := e.client(rlock.WithWatchdogTimeout(time.Second))
	require.NoError(t, gone.Lock("auto-expire").Lock(ctx))
	time.Sleep(1500 * time.Millisecond) // renewed past its first lease
	locked, err := gone.Lock("auto-expire").IsLocked(ctx)
	require.NoError(t, err)
	require.True(t, locked)
	require.NoError(t, gone.Close())
	closed := time.Now()
	waiter := e.client()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, waiter.Lock("auto-expire").Lock(wctx))
	t.Logf("the lock freed %v after Close (watchdog timeout 1s)", time.Since(closed))
	require.NoError(t, waiter.Lock("auto-expire").Unlock(ctx))
}

// testConcurrencyTryLockUnLock: many goroutines TryLock/Unlock one Lock
// value; the watchdog's bookkeeping stays exact.
func TestConcurrentTryLockUnlockBookkeeping(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()
	l := c.Lock("try-unlock")
	var inside, acquired atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 300 {
				ok, err := l.TryLock(ctx, 0, 0)
				if !assert.NoError(t, err) {
					return
				}
				if !ok {
					continue
				}
				acquired.Add(1)
				assert.Equal(t, int64(1), inside.Add(1), "two owners inside")
				assert.GreaterOrEqual(t, c.Stats().Renewing, 1, "the hold must be registered while held")
				inside.Add(-1)
				assert.NoError(t, l.Unlock(ctx))
			}
		}()
	}
	wg.Wait()
	assert.Positive(t, acquired.Load())
	assert.Zero(t, c.Stats().Renewing)
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
}

// testSinglePubSub: pairs of goroutines TryLock(100ms) on shared names; a
// holder that releases quickly lets the other in within the wait.
func TestShortTryLockPairs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()
	var wg sync.WaitGroup
	for i := range 4 {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := c.Lock("pair-" + strconv.Itoa(i))
				for range 20 {
					ok, err := l.TryLock(ctx, time.Second, 0)
					assert.NoError(t, err)
					assert.True(t, ok, "a quick holder must let the other in within the wait")
					if ok {
						assert.NoError(t, l.Unlock(ctx))
					}
				}
			}()
		}
	}
	wg.Wait()
}

// flipCtx reports no error on its first Err call and Canceled afterwards:
// it ends exactly while the first acquire's reply is on its way.
type flipCtx struct {
	context.Context
	calls atomic.Int32
	done  chan struct{}
}

func (c *flipCtx) Done() <-chan struct{} { return c.done }
func (c *flipCtx) Err() error {
	if c.calls.Add(1) > 1 {
		return context.Canceled
	}
	return nil
}

// An acquisition that succeeds after the caller's context ended is undone
// before the call returns: no hold, no renewal.
func TestAcquiredAfterContextEndedIsReleased(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	l := c.Lock("flip")
	ctx := &flipCtx{Context: rlock.WithOwner(context.Background(), 8), done: make(chan struct{})}
	err := l.Lock(ctx)
	require.ErrorIs(t, err, context.Canceled)
	locked, err := l.IsLocked(context.Background())
	require.NoError(t, err)
	assert.False(t, locked, "the acquisition made after the context ended was not released")
	assert.Zero(t, c.Stats().Renewing, "a renewal outlived the abandoned acquisition")
}
