package rlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

func TestMain(m *testing.M) {
	redistest.VerifyTestMain(m) // goleak, waiting out rueidis' bounded cluster goroutines
}

// env is one Redis server shared by a test's clients.
type env struct {
	t   *testing.T
	srv *redistest.Server
	raw rueidis.Client // for raw commands, not used by any lock client
}

func redistestStandalone(tb testing.TB) *redistest.Server { return redistest.Standalone(tb) }

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := redistest.Standalone(t)
	raw, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	return &env{t: t, srv: srv, raw: raw}
}

// client returns a new lock client (a "service") with its own rueidis client.
func (e *env) client(opts ...rlock.Option) *rlock.Client {
	e.t.Helper()
	rc, err := e.srv.Client()
	require.NoError(e.t, err)
	c, err := rlock.New(rc, opts...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() {
		require.NoError(e.t, c.Close())
		rc.Close()
	})
	return c
}

func (e *env) do(args ...string) rueidis.RedisResult {
	return e.raw.Do(context.Background(), e.raw.B().Arbitrary(args[0]).Args(args[1:]...).Build())
}

func (e *env) hgetall(key string) map[string]string {
	m, err := e.do("HGETALL", key).AsStrMap()
	require.NoError(e.t, err)
	return m
}

func (e *env) pttl(key string) time.Duration {
	ms, err := e.do("PTTL", key).AsInt64()
	require.NoError(e.t, err)
	return time.Duration(ms) * time.Millisecond
}

// field is the owner field a client writes for owner.
func field(c *rlock.Client, owner int64) string { return c.ID() + ":" + strconv.FormatInt(owner, 10) }

func TestClientID(t *testing.T) {
	e := newEnv(t)
	a, b := e.client(), e.client()
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, a.ID())
	assert.NotEqual(t, a.ID(), b.ID())
}

func TestWireLayout(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := rlock.WithOwner(context.Background(), 57)
	l := c.Lock("wire")

	// A raw subscriber on Redisson's channel sees the unlock message.
	msgs := make(chan rueidis.PubSubMessage, 4)
	sub, err := e.srv.Client()
	require.NoError(t, err)
	defer sub.Close()
	subscribed := make(chan struct{})
	rctx, stop := context.WithCancel(rueidis.WithOnSubscriptionHook(context.Background(), func(rueidis.PubSubSubscription) { close(subscribed) }))
	defer stop()
	go func() {
		_ = sub.Receive(rctx, sub.B().Subscribe().Channel("redisson_lock__channel:{wire}").Build(), func(m rueidis.PubSubMessage) { msgs <- m })
	}()
	<-subscribed

	require.NoError(t, l.Lock(ctx))
	require.NoError(t, l.Lock(ctx))
	assert.Equal(t, map[string]string{field(c, 57): "2"}, e.hgetall("wire"))
	ttl := e.pttl("wire")
	assert.True(t, ttl > 29*time.Second && ttl <= 30*time.Second, "TTL %v is not the 30s watchdog lease", ttl)

	require.NoError(t, l.Unlock(ctx))
	assert.Equal(t, map[string]string{field(c, 57): "1"}, e.hgetall("wire"))
	require.NoError(t, l.Unlock(ctx))
	assert.Empty(t, e.hgetall("wire"))

	m := <-msgs
	assert.Equal(t, "redisson_lock__channel:{wire}", m.Channel)
	assert.Equal(t, "0", m.Message)
	select {
	case m := <-msgs:
		t.Fatalf("a partial unlock must not publish; got %+v", m)
	default:
	}
	// Without a fault no unlock latch and no fence key is ever written.
	for _, pattern := range []string{"redisson_unlock_latch:*", "goredisson_fence:*"} {
		keys, err := e.do("KEYS", pattern).AsStrSlice()
		require.NoError(t, err)
		assert.Empty(t, keys, "keys written by fault-free calls")
	}
}

func TestHoldCount(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := e.client().Lock("holdcount")
	count := func() int {
		n, err := l.HoldCount(ctx)
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, 0, count())
	require.NoError(t, l.Lock(ctx))
	assert.Equal(t, 1, count())
	require.NoError(t, l.Unlock(ctx))
	assert.Equal(t, 0, count())
	require.NoError(t, l.Lock(ctx))
	require.NoError(t, l.Lock(ctx))
	assert.Equal(t, 2, count())
	require.NoError(t, l.Unlock(ctx))
	assert.Equal(t, 1, count())
	require.NoError(t, l.Unlock(ctx))
	assert.Equal(t, 0, count())
}

func TestHeldByOtherGoroutine(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := e.client().Lock("other")
	require.NoError(t, l.Lock(ctx))

	held, err := l.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)

	done := make(chan struct{})
	go func() {
		defer close(done)
		held, err := l.IsHeld(ctx)
		assert.NoError(t, err)
		assert.False(t, held, "another goroutine is another owner")
		locked, err := l.IsLocked(ctx)
		assert.NoError(t, err)
		assert.True(t, locked)
		ok, err := l.TryLock(ctx, 0, 0)
		assert.NoError(t, err)
		assert.False(t, ok)
		err = l.Unlock(ctx)
		assert.ErrorIs(t, err, rlock.ErrNotHeld)
	}()
	<-done
	assert.Equal(t, 1, mustHoldCount(t, l, ctx), "a non-owner's unlock must leave the hold intact")
	require.NoError(t, l.Unlock(ctx))
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
	assert.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)
}

func mustHoldCount(t *testing.T, l *rlock.Lock, ctx context.Context) int {
	t.Helper()
	n, err := l.HoldCount(ctx)
	require.NoError(t, err)
	return n
}

func TestReentrancyAcrossClients(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.client().Lock("reentry"), e.client().Lock("reentry")
	ok, err := a.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = a.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, a.Unlock(ctx))
	ok, err = b.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "still held once by the other client")
	require.NoError(t, a.Unlock(ctx))
	ok, err = b.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, b.Unlock(ctx))
}

// A hold written by hand in Java's format blocks Go, and a raw PUBLISH of
// "0" wakes the Go waiter long before the holder's TTL.
func TestJavaFormatHoldAndRawWakeUp(t *testing.T) {
	e := newEnv(t)
	javaField := "6f1c2a1e-3b0a-4c55-9d7e-2f1f8b7a0c11:1"
	require.NoError(t, e.do("HSET", "javaheld", javaField, "1").Error())
	require.NoError(t, e.do("PEXPIRE", "javaheld", "600000").Error())

	l := e.client().Lock("javaheld")
	ctx := context.Background()
	ok, err := l.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok)

	// The waiter's context ends well before the 10 min TTL: only the
	// message can get it the lock in time.
	wctx, cancel := context.WithTimeout(rlock.WithOwner(ctx, 7), 20*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- l.Lock(wctx) }()
	waitForSubscribers(t, e, "redisson_lock__channel:{javaheld}", 1)

	require.NoError(t, e.do("DEL", "javaheld").Error())
	require.NoError(t, e.do("PUBLISH", "redisson_lock__channel:{javaheld}", "0").Error())
	require.NoError(t, <-got)
	assert.Len(t, e.hgetall("javaheld"), 1)
	require.NoError(t, l.Unlock(rlock.WithOwner(ctx, 7)))
}

// waitForSubscribers waits until channel has n subscribers on the server.
func waitForSubscribers(t *testing.T, e *env, channel string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		v, err := e.do("PUBSUB", "NUMSUB", channel).ToArray()
		if err != nil || len(v) != 2 {
			return false
		}
		got, _ := v[1].AsInt64()
		return got == n
	}, 10*time.Second, 5*time.Millisecond)
}

func TestInspect(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()
	l := c.Lock("inspect")
	info, err := l.Inspect(ctx)
	require.NoError(t, err)
	assert.Equal(t, rlock.Info{Name: "inspect", TTL: rlock.TTLNotLocked}, info)

	owner := rlock.WithOwner(ctx, 77)
	require.NoError(t, l.Lock(owner))
	require.NoError(t, l.Lock(owner))
	got := make(chan error, 1)
	go func() { got <- e.client().Lock("inspect").Lock(ctx) }()
	waitForSubscribers(t, e, "redisson_lock__channel:{inspect}", 1)
	info, err = l.Inspect(ctx)
	require.NoError(t, err)
	assert.True(t, info.Locked)
	assert.Equal(t, []rlock.Holder{{ClientID: c.ID(), OwnerID: 77, Count: 2, Field: field(c, 77)}}, info.Holders)
	assert.Greater(t, info.TTL, 29*time.Second)
	assert.Equal(t, int64(1), info.Subscribers)
	require.NoError(t, l.Unlock(owner))
	require.NoError(t, l.Unlock(owner))
	require.NoError(t, <-got)
}
