package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/holder"
	"github.com/goredisson/locks/rlock"
)

// A process holding a watchdog lock dies by SIGKILL. Nothing renews the
// lease any more: the key's TTL only goes down, the key expires when the
// lease that was left runs out (never earlier: a waiter in another client
// gets the lock only then), and the dead holder's field never comes back.
func TestHolderKilled(t *testing.T) {
	const watchdog = 1500 * time.Millisecond
	srv := standaloneLocal(t)
	ctx := context.Background()
	const name = "killed-holder"

	h := holder.Start(t, holder.Spec{Addr: srv.Addr, Lock: name, Owner: 7, Watchdog: watchdog})
	holderField := h.Field
	kill := func() { require.NoError(t, h.Kill()) }
	assert.Equal(t, int64(1), doInt(t, srv, "HEXISTS", name, holderField))

	// The holder's watchdog is working: the TTL goes back up.
	prev := doInt(t, srv, "PTTL", name)
	eventually(t, 2*watchdog, "a renewal by the holder process", func() bool {
		cur := doInt(t, srv, "PTTL", name)
		renewed := cur > prev+50
		prev = cur
		return renewed
	})

	wc := direct(t, srv, rlock.WithWatchdogTimeout(watchdog))
	waiter := rlock.WithOwner(ctx, 1)
	wctx, cancel := context.WithTimeout(waiter, 30*time.Second)
	defer cancel()
	got := lockAsync(wctx, wc.Lock(name))
	waitSubscribers(t, srv, "redisson_lock__channel:{"+name+"}", 1)

	mon, err := srv.Client()
	require.NoError(t, err)
	defer mon.Close()
	sample := func() (held bool, pttl int64) {
		res := mon.DoMulti(ctx,
			mon.B().Hexists().Key(name).Field(holderField).Build(),
			mon.B().Pttl().Key(name).Build())
		held, err := res[0].AsBool()
		require.NoError(t, err)
		pttl, err = res[1].AsInt64()
		require.NoError(t, err)
		return held, pttl
	}

	killAt := time.Now()
	kill()
	held, pttl := sample()
	require.True(t, held, "the lock vanished with the process")
	leaseEnd := time.Now().Add(time.Duration(pttl) * time.Millisecond)

	// Until the field disappears, its TTL only decreases: no renewal.
	var goneAt time.Time
	last := pttl
	for goneAt.IsZero() {
		held, pttl := sample()
		if !held {
			goneAt = time.Now()
			break
		}
		require.LessOrEqual(t, pttl, last+5, "the lease of the killed holder was renewed (TTL %dms -> %dms)", last, pttl)
		last = pttl
		require.Less(t, time.Since(killAt), watchdog+5*time.Second, "the killed holder's lock never expired")
		time.Sleep(5 * time.Millisecond)
	}

	r := waitResult(t, got, 10*time.Second, "the waiter")
	require.NoError(t, r.err)
	assert.False(t, r.at.Before(leaseEnd.Add(-50*time.Millisecond)),
		"the waiter got the lock %v before the killed holder's lease ran out", leaseEnd.Sub(r.at))
	assert.False(t, goneAt.Before(leaseEnd.Add(-50*time.Millisecond)), "the key went %v early", leaseEnd.Sub(goneAt))
	assert.LessOrEqual(t, r.at.Sub(killAt), watchdog+time.Second, "the lock freed too late after the kill")

	// The dead holder's field stays gone for another full lease and more.
	for deadline := time.Now().Add(watchdog + watchdog/3); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		held, _ := sample()
		require.False(t, held, "the killed holder's field came back")
	}
	require.NoError(t, wc.Lock(name).Unlock(waiter))
	time.Sleep(watchdog / 3) // a renewal period: nothing may bring the key back
	assert.Zero(t, doInt(t, srv, "EXISTS", name))
	t.Logf("killed with %v of lease left; key gone %v after the kill, waiter in %v after it (%+v vs the lease end)",
		leaseEnd.Sub(killAt).Round(time.Millisecond), goneAt.Sub(killAt).Round(time.Millisecond),
		r.at.Sub(killAt).Round(time.Millisecond), r.at.Sub(leaseEnd).Round(time.Millisecond))
}
