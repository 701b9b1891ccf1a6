package scripts_test

import (
	"context"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/scripts"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

func setup(t *testing.T) (*redistest.Server, rueidis.Client) {
	t.Helper()
	srv := redistest.Standalone(t)
	rc, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return srv, rc
}

func do(t *testing.T, srv *redistest.Server, args ...string) *rueidis.RedisMessage {
	t.Helper()
	m, err := srv.Do(context.Background(), args...)
	if !rueidis.IsRedisNil(err) {
		require.NoError(t, err)
	}
	return &m
}

const (
	key   = "res"
	ch    = "redisson_lock__channel:{res}"
	owner = "11111111-2222-4333-8444-555555555555:7"
	other = "11111111-2222-4333-8444-555555555555:8"
)

func unlockArgs(field string) []string { return []string{"0", "30000", field, "PUBLISH", "16000"} }

func TestAcquireUnlockLatch(t *testing.T) {
	srv, rc := setup(t)
	ctx := context.Background()
	acquire := func(field string) rueidis.RedisResult {
		return scripts.Acquire.Exec(ctx, rc, []string{key}, []string{"30000", field})
	}
	require.True(t, rueidis.IsRedisNil(acquire(owner).Error()), "free lock: nil reply")
	require.True(t, rueidis.IsRedisNil(acquire(owner).Error()), "re-entry: nil reply")
	m, _ := do(t, srv, "HGETALL", key).AsStrMap()
	assert.Equal(t, map[string]string{owner: "2"}, m)
	ttl, err := acquire(other).AsInt64()
	require.NoError(t, err)
	assert.True(t, ttl > 29000 && ttl <= 30000, "held: the PTTL, got %d", ttl)

	latch1 := "redisson_unlock_latch:{res}:00000000000000000000000000000001"
	n, err := scripts.Unlock.Exec(ctx, rc, []string{key, ch, latch1}, unlockArgs(owner)).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "partial unlock")
	// A retry with the same latch returns the first result without a
	// second decrement.
	n, err = scripts.Unlock.Exec(ctx, rc, []string{key, ch, latch1}, unlockArgs(owner)).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
	c, _ := do(t, srv, "HGET", key, owner).AsInt64()
	assert.Equal(t, int64(1), c)
	v, err := do(t, srv, "GET", latch1).ToString()
	require.NoError(t, err)
	assert.Equal(t, "0", v, "latch written")

	latch2 := "redisson_unlock_latch:{res}:00000000000000000000000000000002"
	n, err = scripts.Unlock.Exec(ctx, rc, []string{key, ch, latch2}, unlockArgs(owner)).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "full unlock")
	n, err = scripts.Unlock.Exec(ctx, rc, []string{key, ch, latch2}, unlockArgs(owner)).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "a retried full unlock reports 1, not not-held")
	ttlLatch, _ := do(t, srv, "PTTL", latch2).AsInt64()
	assert.True(t, ttlLatch > 15000 && ttlLatch <= 16000, "latch TTL %d", ttlLatch)

	latch3 := "redisson_unlock_latch:{res}:00000000000000000000000000000003"
	err = scripts.Unlock.Exec(ctx, rc, []string{key, ch, latch3}, unlockArgs(owner)).Error()
	assert.True(t, rueidis.IsRedisNil(err), "not held: nil reply, got %v", err)
}

func TestRenewAndForceUnlock(t *testing.T) {
	srv, rc := setup(t)
	ctx := context.Background()
	do(t, srv, "HSET", "a", owner, "1")
	do(t, srv, "PEXPIRE", "a", "1000")
	do(t, srv, "HSET", "b", other, "1")
	res, err := scripts.Renew.Exec(ctx, rc, []string{"a", "b", "c"}, []string{"30000", owner, owner, owner}).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 0, 0}, res)
	ttl, _ := do(t, srv, "PTTL", "a").AsInt64()
	assert.Greater(t, ttl, int64(29000))
	ttlB, _ := do(t, srv, "PTTL", "b").AsInt64()
	assert.Equal(t, int64(-1), ttlB, "another owner's lock is not renewed")

	n, err := scripts.ForceUnlock.Exec(ctx, rc, []string{"a", "redisson_lock__channel:{a}"}, []string{"0", "PUBLISH"}).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	n, err = scripts.ForceUnlock.Exec(ctx, rc, []string{"a", "redisson_lock__channel:{a}"}, []string{"0", "PUBLISH"}).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
}

// After SCRIPT FLUSH, EVALSHA gets NOSCRIPT and the runner falls back to
// EVAL, once, for single and pipelined calls.
func TestNoScriptFallback(t *testing.T) {
	srv, rc := setup(t)
	ctx := context.Background()
	do(t, srv, "SCRIPT", "FLUSH")
	require.True(t, rueidis.IsRedisNil(scripts.Acquire.Exec(ctx, rc, []string{"x"}, []string{"1000", owner}).Error()))
	do(t, srv, "SCRIPT", "FLUSH")
	res := scripts.Renew.ExecMulti(ctx, rc, []scripts.Call{
		{Keys: []string{"x"}, Args: []string{"30000", owner}},
		{Keys: []string{"y"}, Args: []string{"30000", owner}},
	})
	require.Len(t, res, 2)
	a, err := res[0].AsIntSlice()
	require.NoError(t, err)
	b, err := res[1].AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, a)
	assert.Equal(t, []int64{0}, b)
	assert.Nil(t, scripts.Renew.ExecMulti(ctx, rc, nil))
	assert.Len(t, scripts.Acquire.SHA1(), 40)
}
