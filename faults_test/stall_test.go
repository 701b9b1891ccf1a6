package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/watchdog"
)

// The network between a watchdog holder and Redis stalls: nothing is
// delivered either way, nothing is closed. The holder cannot renew; its
// HoldContext ends with ErrLockLost before the lease it last set runs out
// (at the latest 5/6 of the watchdog timeout after that renewal), so it
// learns of the loss before anyone else can take the lock. A waiter
// connected directly gets the lock only once that lease has run out.
func TestStalledNetwork(t *testing.T) {
	const watchdogTimeout = 2400 * time.Millisecond
	srv := standaloneLocal(t)
	ctx := context.Background()
	const name = "stalled"
	proxy := redistest.NewProxy(t, srv.Addr)
	opt := srv.ClientOption()
	opt.InitAddress = []string{proxy.Addr}
	hc := newLocks(t, newRueidis(t, opt), rlock.WithWatchdogTimeout(watchdogTimeout))
	wc := direct(t, srv, rlock.WithWatchdogTimeout(watchdogTimeout))

	holder := rlock.WithOwner(ctx, 1)
	hl := hc.Lock(name)
	require.NoError(t, hl.Lock(holder))
	hold, err := hl.HoldContext(holder)
	require.NoError(t, err)
	holderField := field(hc, 1)

	// Let the watchdog renew a couple of times through the proxy; the stall
	// then starts half-way through a renewal period.
	time.Sleep(watchdogTimeout*2/3 + watchdogTimeout/6)
	require.NoError(t, hold.Err())

	wctx, cancel := context.WithTimeout(rlock.WithOwner(ctx, 2), 30*time.Second)
	defer cancel()
	got := lockAsync(wctx, wc.Lock(name))
	waitSubscribers(t, srv, "redisson_lock__channel:{"+name+"}", 1)

	lostC := make(chan time.Time, 1)
	context.AfterFunc(hold, func() { lostC <- time.Now() })

	stallAt := time.Now()
	proxy.Stall()
	defer proxy.Resume()
	// No renewal can reach Redis any more: the lease in Redis now is the
	// one the last successful renewal set.
	pttl := doInt(t, srv, "PTTL", name)
	require.Positive(t, pttl)
	leaseEnd := time.Now().Add(time.Duration(pttl) * time.Millisecond)
	lastRenewal := leaseEnd.Add(-watchdogTimeout) // when the server applied it

	// The holder's field stays until the lease runs out.
	var goneAt time.Time
	for goneAt.IsZero() {
		if doInt(t, srv, "HEXISTS", name, holderField) == 0 {
			goneAt = time.Now()
		}
		require.Less(t, time.Since(stallAt), 10*time.Second, "the stalled holder's lock never expired")
		time.Sleep(5 * time.Millisecond)
	}
	r := waitResult(t, got, 10*time.Second, "the waiter")
	require.NoError(t, r.err)

	var lostAt time.Time
	select {
	case lostAt = <-lostC:
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled holder's HoldContext did not end")
	}
	cause := context.Cause(hold)
	require.ErrorIs(t, cause, rlock.ErrLockLost)
	assert.ErrorIs(t, cause, watchdog.ErrRenewFailed)

	assert.True(t, lostAt.Before(leaseEnd), "the holder learned of the loss %v after its lease ended", lostAt.Sub(leaseEnd))
	assert.True(t, lostAt.Before(r.at), "the holder learned of the loss after the waiter got the lock")
	// Watchdog promise: at the latest 5/6 of the timeout after the last
	// successful renewal (plus scheduling slack under -race and load).
	assert.LessOrEqual(t, lostAt.Sub(lastRenewal), watchdogTimeout*5/6+200*time.Millisecond)
	assert.False(t, goneAt.Before(leaseEnd.Add(-50*time.Millisecond)), "the lock expired %v before the lease end", leaseEnd.Sub(goneAt))
	assert.False(t, r.at.Before(leaseEnd.Add(-50*time.Millisecond)), "the waiter got the lock %v before the lease end", leaseEnd.Sub(r.at))

	// After the network comes back, the old holder's late renewals change
	// nothing: its Unlock fails and the waiter still holds the lock.
	proxy.Resume()
	assert.ErrorIs(t, hl.Unlock(holder), rlock.ErrNotHeld)
	held, err := wc.Lock(name).IsHeld(rlock.WithOwner(ctx, 2))
	require.NoError(t, err)
	assert.True(t, held)
	require.NoError(t, wc.Lock(name).Unlock(rlock.WithOwner(ctx, 2)))
	t.Logf("stalled %v after the last renewal; holder told %v after the stall (%v before its lease ended); key gone %v after the stall; waiter got the lock %v after the stall (%v after the lease end)",
		stallAt.Sub(lastRenewal).Round(time.Millisecond), lostAt.Sub(stallAt).Round(time.Millisecond),
		leaseEnd.Sub(lostAt).Round(time.Millisecond), goneAt.Sub(stallAt).Round(time.Millisecond),
		r.at.Sub(stallAt).Round(time.Millisecond), r.at.Sub(leaseEnd).Round(time.Millisecond))
}
