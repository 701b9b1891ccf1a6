package rlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
)

// vanishAfterGet deletes key, with no message (as its expiry would), right
// after the first GET of it once armed.
type vanishAfterGet struct {
	rueidis.Client
	key   string
	raw   rueidis.Client
	armed atomic.Bool
	gets  atomic.Int32
}

func (w *vanishAfterGet) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands()
	isGet := len(args) == 2 && args[0] == "GET" && args[1] == w.key // before Do: rueidis recycles cmd
	r := w.Client.Do(ctx, cmd)
	if w.armed.Load() && isGet && w.gets.Add(1) == 1 {
		w.raw.Do(context.Background(), w.raw.B().Del().Key(w.key).Build())
	}
	return r
}

// A reused latch whose key goes away without a "0" while an Await
// subscribes (its first read saw the count, its next reads see none) opens
// it, with and without subscription linger: the awaiter's channel must not
// carry the earlier round's "1", which would make the zero read look like
// a deleted latch, and Await wait for its timeout (found by review: a
// lingering latch channel kept its history).
func TestLatchReusedVanishesWhileAwaitSubscribes(t *testing.T) {
	for _, linger := range []time.Duration{0, time.Hour} {
		t.Run(linger.String(), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			rc, err := e.srv.Client()
			require.NoError(t, err)
			w := &vanishAfterGet{Client: rc, key: "L", raw: e.raw}
			c, err := rlock.New(w, rlock.WithSubscriptionLinger(linger))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()); rc.Close() })
			l := c.CountDownLatch("L")

			ok, err := l.TrySetCount(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			done := make(chan error, 1)
			go func() { done <- l.Await(ctx) }()
			require.Eventually(t, func() bool { return c.Stats().Parked == 1 }, 5*time.Second, time.Millisecond)
			require.NoError(t, l.CountDown(ctx))
			require.NoError(t, <-done)
			require.Eventually(t, func() bool { st := c.Stats(); return st.Subscriptions == 0 && st.Lingering == 0 },
				5*time.Second, time.Millisecond, "the latch's channel lingered")

			ok, err = l.TrySetCount(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			w.armed.Store(true)
			opened, err := l.AwaitTimeout(ctx, 3*time.Second)
			require.NoError(t, err)
			assert.True(t, opened, "a latch read at zero after its count was seen opens")
		})
	}
}
