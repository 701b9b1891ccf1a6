package rlock_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
)

// testConcurrencyLoop_MultiInstance: goroutines in several clients increment
// a counter with GET then SET (not INCR) under one lock; any overlap of two
// critical sections loses an increment.
func TestMutualExclusionAcrossClients(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const clients, perClient, rounds = 4, 4, 50
	var wg sync.WaitGroup
	for range clients {
		c := e.client()
		for range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := c.Lock("counter-lock")
				for range rounds {
					if !assert.NoError(t, l.Lock(ctx)) {
						return
					}
					// Nested re-entry inside the critical section.
					assert.NoError(t, l.Lock(ctx))
					v, err := e.do("GET", "counter").AsInt64()
					if err != nil && !rueidis.IsRedisNil(err) {
						assert.NoError(t, err)
					}
					assert.NoError(t, e.do("SET", "counter", strconv.FormatInt(v+1, 10)).Error())
					assert.NoError(t, l.Unlock(ctx))
					assert.NoError(t, l.Unlock(ctx))
				}
			}()
		}
	}
	wg.Wait()
	v, err := e.do("GET", "counter").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(clients*perClient*rounds), v)
}

// testSubscriptionsPerConnection: many lock/unlock tasks on a few names,
// with waiting; afterwards every subscription is released, on the server
// and in the client.
func TestSubscriptionsReleasedAfterLoad(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()
	const tasks, workers = 5000, 32
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				l := c.Lock("load-" + strconv.Itoa(rand.IntN(5)))
				if !assert.NoError(t, l.Lock(ctx)) {
					continue
				}
				if rand.IntN(10) == 0 {
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				}
				assert.NoError(t, l.Unlock(ctx))
			}
		}()
	}
	for i := range tasks {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	// Unsubscribing is asynchronous: wait for the server to agree.
	require.Eventually(t, func() bool {
		chans, err := e.do("PUBSUB", "CHANNELS").AsStrSlice()
		return err == nil && len(chans) == 0
	}, 10*time.Second, 10*time.Millisecond, "PUBSUB CHANNELS is not empty")
	shard, err := e.do("PUBSUB", "SHARDCHANNELS").AsStrSlice()
	require.NoError(t, err)
	assert.Empty(t, shard)
	for i := range 5 {
		locked, err := c.Lock("load-" + strconv.Itoa(i)).IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked)
	}
}

// Waiters of one client share one subscription per lock name, and each
// unlock wakes one of them.
func TestWaitersShareOneSubscription(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	holder := rlock.WithOwner(ctx, 1000)
	c := e.client()
	l := c.Lock("shared")
	require.NoError(t, l.Lock(holder))

	const waiters = 20
	order := make(chan int64, waiters)
	var wg sync.WaitGroup
	for i := range int64(waiters) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			octx := rlock.WithOwner(ctx, i)
			if assert.NoError(t, l.Lock(octx)) {
				order <- i
				assert.NoError(t, l.Unlock(octx))
			}
		}()
	}
	require.Eventually(t, func() bool { return c.Stats().Waiters == waiters }, 10*time.Second, time.Millisecond)
	waitForSubscribers(t, e, "redisson_lock__channel:{shared}", 1)
	assert.Equal(t, 1, c.Stats().Subscriptions)
	require.NoError(t, l.Unlock(holder))
	wg.Wait()
	close(order)
	assert.Len(t, order, waiters)
	// With no waiter left the channel lingers (still subscribed, for the
	// next waiter), then goes.
	st := c.Stats()
	assert.Equal(t, [2]int{0, 1}, [2]int{st.Subscriptions, st.Lingering}, "subscriptions, lingering")
	require.Eventually(t, func() bool { return c.Stats().Lingering == 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Zero(t, c.Stats().Subscriptions)
}
