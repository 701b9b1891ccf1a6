package faults_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// The server kills the connection that carries a waiting client's
// subscription. The client subscribes again on a new connection, and an
// unlock published afterwards still wakes the waiter at once: with the
// holder on a one-minute lease, a waiter that lost its subscription would
// only retry when the lease ends.
func TestPubSubConnectionKilled(t *testing.T) {
	for _, how := range []string{"by id", "type pubsub"} {
		t.Run(how, func(t *testing.T) {
			srv := standaloneLocal(t)
			ctx := context.Background()
			const name = "pubsub-kill"
			const channel = "redisson_lock__channel:{" + name + "}"
			hc, wc := direct(t, srv), direct(t, srv)
			hl, wl := hc.Lock(name), wc.Lock(name)

			for round := range 3 {
				holder := rlock.WithOwner(ctx, 1)
				require.NoError(t, hl.LockLease(holder, time.Minute))
				wctx, cancel := context.WithTimeout(rlock.WithOwner(ctx, 2), 30*time.Second)
				got := lockAsync(wctx, wl)
				waitSubscribers(t, srv, channel, 1)
				eventually(t, 5*time.Second, "the waiter", func() bool { return wc.Stats().Waiters == 1 })

				before := subscribedClients(t, srv)
				require.Len(t, before, 1, "one connection carries the subscription")
				if how == "by id" {
					require.Equal(t, int64(1), doInt(t, srv, "CLIENT", "KILL", "ID", before[0]))
				} else {
					require.Equal(t, int64(1), doInt(t, srv, "CLIENT", "KILL", "TYPE", "pubsub"))
				}
				killed := time.Now()
				// The hub subscribes again on a new connection.
				eventually(t, 10*time.Second, "a new subscribed connection", func() bool {
					ids := subscribedClients(t, srv)
					return len(ids) == 1 && !slices.Contains(before, ids[0])
				})
				resubscribed := time.Since(killed)
				st := wc.Stats() // (Holds may count the waiter's attempt after the wake-up)
				assert.Equal(t, 1, st.Subscriptions)
				assert.Equal(t, 1, st.Waiters)

				unlockAt := time.Now()
				require.NoError(t, hl.Unlock(holder))
				r := waitResult(t, got, 40*time.Second, "the waiter")
				cancel()
				require.NoError(t, r.err)
				woke := r.at.Sub(unlockAt)
				t.Logf("round %d: resubscribed %v after the kill; waiter got the lock %v after the unlock", round, resubscribed, woke)
				assert.Less(t, woke, 2*time.Second, "the unlock did not wake the waiter (the holder's lease was 1 minute)")
				require.NoError(t, wl.Unlock(rlock.WithOwner(ctx, 2)))
				waitSubscribers(t, srv, channel, 0)
			}
		})
	}
}

// The unlock message is published while the waiter's subscription is down
// (its connection was killed and the reconnection is held up by a stalled
// network), so it reaches nobody. When the client subscribes again it must
// wake its waiters, which then find the lock free at once, instead of
// sleeping out the TTL they were told (the holder had a one-minute lease).
func TestUnlockMessageLostWhileResubscribing(t *testing.T) {
	srv := standaloneLocal(t)
	ctx := context.Background()
	const name = "pubsub-gap"
	const channel = "redisson_lock__channel:{" + name + "}"
	proxy := redistest.NewProxy(t, srv.Addr)
	opt := srv.ClientOption()
	opt.InitAddress = []string{proxy.Addr}
	hc := direct(t, srv)
	wc := newLocks(t, newRueidis(t, opt))
	hl, wl := hc.Lock(name), wc.Lock(name)

	holder := rlock.WithOwner(ctx, 1)
	require.NoError(t, hl.LockLease(holder, time.Minute))
	wctx, cancel := context.WithTimeout(rlock.WithOwner(ctx, 2), 10*time.Second)
	defer cancel()
	got := lockAsync(wctx, wl)
	waitSubscribers(t, srv, channel, 1)
	eventually(t, 5*time.Second, "the waiter", func() bool { return wc.Stats().Waiters == 1 })

	proxy.Stall()
	ids := subscribedClients(t, srv)
	require.Len(t, ids, 1)
	require.Equal(t, int64(1), doInt(t, srv, "CLIENT", "KILL", "ID", ids[0]))
	waitSubscribers(t, srv, channel, 0)
	unlockAt := time.Now()
	require.NoError(t, hl.Unlock(holder)) // the message reaches no subscriber
	time.Sleep(100 * time.Millisecond)    // the reconnection stays held up a little longer
	proxy.Resume()

	r := waitResult(t, got, 20*time.Second, "the waiter")
	require.NoError(t, r.err, "the waiter was not woken after resubscribing (the holder's lease was 1 minute)")
	woke := r.at.Sub(unlockAt)
	t.Logf("the waiter got the lock %v after the lost unlock message", woke)
	assert.Less(t, woke, 3*time.Second, "the waiter was not woken after resubscribing (the holder's lease was 1 minute)")
	require.NoError(t, wl.Unlock(rlock.WithOwner(ctx, 2)))
}
