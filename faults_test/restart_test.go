package faults_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
)

// Redis restarts without persistence while a watchdog hold exists: the
// lock's key is gone. The holder's watchdog finds its field missing and ends
// the HoldContext with ErrLockLost within about a renewal period; waiters in
// another client, subscribed before the restart, get the lock one after the
// other, never two at once; the old holder's Unlock reports ErrNotHeld.
func TestRedisRestartLosesLock(t *testing.T) {
	const watchdog = time.Second
	srv := standaloneLocal(t)
	ctx := context.Background()
	var lost collector
	hc := direct(t, srv, rlock.WithWatchdogTimeout(watchdog), rlock.WithLostHandler(lost.onLost))
	wc := direct(t, srv, rlock.WithWatchdogTimeout(watchdog))

	holder := rlock.WithOwner(ctx, 1)
	hl := hc.Lock("restart")
	require.NoError(t, hl.Lock(holder))
	hold, err := hl.HoldContext(holder)
	require.NoError(t, err)

	const waiters = 3
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var inside atomic.Int32
	var overlap atomic.Bool
	done := make(chan result, waiters)
	for i := range waiters {
		go func() {
			owner := rlock.WithOwner(wctx, int64(10+i))
			l := wc.Lock("restart")
			err := l.Lock(owner)
			at := time.Now()
			if err == nil {
				if inside.Add(1) != 1 {
					overlap.Store(true)
				}
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				err = l.Unlock(owner)
			}
			done <- result{err, at}
		}()
	}
	waitSubscribers(t, srv, "redisson_lock__channel:{restart}", 1)
	eventually(t, 5*time.Second, "3 waiters", func() bool { return wc.Stats().Waiters == waiters })

	restartAt := time.Now()
	require.NoError(t, srv.Restart(ctx))
	restarted := time.Now()

	select {
	case <-hold.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder's HoldContext did not end after the restart")
	}
	lostAt := time.Now()
	require.ErrorIs(t, context.Cause(hold), rlock.ErrLockLost)
	lost.wait(t)
	require.Len(t, lost.events(), 1)
	assert.Equal(t, "restart", lost.events()[0].Name)
	assert.Equal(t, int64(1), lost.events()[0].Owner)
	// A renewal after the restart finds the field gone (or, failing,
	// runs out of time): the report comes before the lease the holder
	// last set could end, at most a watchdog timeout after the restart
	// (plus scheduling slack).
	assert.Less(t, lostAt.Sub(restarted), watchdog+250*time.Millisecond, "loss reported %v after the restart", lostAt.Sub(restarted))

	var last time.Time
	for range waiters {
		r := waitResult(t, done, 20*time.Second, "a waiter")
		require.NoError(t, r.err)
		if r.at.After(last) {
			last = r.at
		}
	}
	assert.False(t, overlap.Load(), "two waiters held the lock at once")
	assert.ErrorIs(t, hl.Unlock(holder), rlock.ErrNotHeld)
	assert.Zero(t, hc.Stats().Renewing, "the lost hold is still renewed")
	assert.Zero(t, doInt(t, srv, "EXISTS", "restart"))
	t.Logf("restart took %v; holder told of the loss %v after the restart; all %d waiters done %v after it",
		restarted.Sub(restartAt), lostAt.Sub(restarted), waiters, last.Sub(restarted))
}
