package scripts_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
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

func exists(t *testing.T, srv *redistest.Server, k string) int64 {
	t.Helper()
	n, err := do(t, srv, "EXISTS", k).AsInt64()
	require.NoError(t, err)
	return n
}

const (
	key   = "res"
	ch    = "redisson_lock__channel:{res}"
	owner = "11111111-2222-4333-8444-555555555555:7"
	other = "11111111-2222-4333-8444-555555555555:8"
)

func unlockArgs(field string, expected int) []string {
	return []string{"0", "30000", field, "PUBLISH", fmt.Sprint(expected), "60000"}
}

const fence1, fence2, fence3 = "goredisson_fence:{res}:1", "goredisson_fence:{res}:2", "goredisson_fence:{res}:3"

func TestAcquireUnlockFence(t *testing.T) {
	srv, rc := setup(t)
	ctx := context.Background()
	counts := map[string]int{}
	acquire := func(field, fence string) (int64, error) {
		n, err := scripts.Acquire.Exec(ctx, rc, []string{key, fence}, []string{"30000", field, fmt.Sprint(counts[field]), "60000"}).AsInt64()
		if err == nil && n > 0 {
			counts[field] = int(n)
		}
		return n, err
	}
	unlock := func(field, fence string) (int64, error) {
		n, err := scripts.Unlock.Exec(ctx, rc, []string{key, ch, fence}, unlockArgs(field, counts[field])).AsInt64()
		if err == nil && n >= 0 {
			counts[field] = int(n)
		}
		return n, err
	}
	fence := func(field, fence string) (int64, error) {
		vals, err := scripts.Fence.Exec(ctx, rc, []string{key, fence}, []string{field, "60000"}).AsIntSlice()
		if err != nil {
			return 0, err
		}
		require.Len(t, vals, 4, "{count, refused, token, pttl}")
		require.Zero(t, vals[1], "not refused")
		return vals[0], nil
	}
	n, err := acquire(owner, fence1)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "free lock: the new count")
	n, err = acquire(owner, fence2)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "re-entry: the new count")
	m, _ := do(t, srv, "HGETALL", key).AsStrMap()
	assert.Equal(t, map[string]string{owner: "2"}, m, "Redisson's data layout")
	r, err := acquire(other, fence3)
	require.NoError(t, err)
	ttl := -2 - r
	assert.True(t, ttl > 29000 && ttl <= 30000, "held: -2-PTTL, got %d", r)
	do(t, srv, "PERSIST", key)
	r, err = acquire(other, fence3)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), r, "held with no expiry: -2-(-1)")
	do(t, srv, "PEXPIRE", key, "30000")

	// A fenced call does nothing, and the fence reports the count.
	c, err := fence(owner, fence3)
	require.NoError(t, err)
	assert.Equal(t, int64(2), c)
	n, err = acquire(owner, fence3)
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "fenced acquire")
	n, err = unlock(owner, fence3)
	require.NoError(t, err)
	assert.Equal(t, int64(-2), n, "fenced unlock")
	c, err = fence(owner, fence3)
	require.NoError(t, err)
	assert.Equal(t, int64(2), c, "fence is idempotent and the fenced calls changed nothing")
	fttl, _ := do(t, srv, "PTTL", fence3).AsInt64()
	assert.True(t, fttl > 59000 && fttl <= 60000, "fence TTL %d", fttl)

	n, err = unlock(owner, fence1+"x")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "partial unlock: the count left")
	n, err = unlock(owner, fence2+"x")
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "full unlock")
	assert.Equal(t, int64(0), exists(t, srv, key))
	n, err = unlock(owner, fence1+"y")
	require.NoError(t, err)
	assert.Equal(t, int64(-1), n, "not held")
	c, err = fence(owner, "goredisson_fence:{res}:4")
	require.NoError(t, err)
	assert.Equal(t, int64(0), c, "fence on a missing hold")
	assert.Equal(t, int64(0), exists(t, srv, "redisson_unlock_latch:{res}:x"))

	// A call that finds another count than the caller expects refuses,
	// marks its fence, and the fence script reports the refusal.
	do(t, srv, "HSET", key, owner, "3")
	vals, err := scripts.Acquire.Exec(ctx, rc, []string{key, fence1 + "z"}, []string{"30000", owner, "1", "60000"}).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{3}, vals, "acquire refused: the count found")
	vals, err = scripts.Unlock.Exec(ctx, rc, []string{key, ch, fence2 + "z"}, unlockArgs(owner, 2)).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{3}, vals, "unlock refused: the count found")
	m, _ = do(t, srv, "HGETALL", key).AsStrMap()
	assert.Equal(t, map[string]string{owner: "3"}, m, "a refusal changes nothing")
	vals, err = scripts.Fence.Exec(ctx, rc, []string{key, fence1 + "z"}, []string{owner, "60000"}).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 1, 0}, vals[:3], "the fence reports the refusal")
	vals, err = scripts.Fence.Exec(ctx, rc, []string{key, fence1 + "z"}, []string{owner, "60000"}).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 1, 0}, vals[:3], "and keeps reporting it when resent")
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

	force := func(latch string) int64 {
		n, err := scripts.ForceUnlock.Exec(ctx, rc, []string{"a", "redisson_lock__channel:{a}", latch}, []string{"0", "PUBLISH", "60000"}).AsInt64()
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, int64(1), force("goredisson_fence:{a}:1"))
	do(t, srv, "HSET", "a", other, "1") // taken again
	assert.Equal(t, int64(1), force("goredisson_fence:{a}:1"), "a resend with the same latch returns the first result...")
	assert.Equal(t, int64(1), exists(t, srv, "a"), "...and does not delete the new hold")
	assert.Equal(t, int64(1), force("goredisson_fence:{a}:2"))
	assert.Equal(t, int64(0), force("goredisson_fence:{a}:3"))
}

// After SCRIPT FLUSH, EVALSHA gets NOSCRIPT and the runner falls back to
// EVAL, once, for single and pipelined calls.
func TestNoScriptFallback(t *testing.T) {
	srv, rc := setup(t)
	ctx := context.Background()
	do(t, srv, "SCRIPT", "FLUSH")
	n, err := scripts.Acquire.Exec(ctx, rc, []string{"x", "goredisson_fence:{x}:1"}, []string{"1000", owner, "0", "60000"}).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
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

// Explain names the command a script calls on the line Redis reports for
// an ACL refusal, and leaves every other error alone.
func TestExplainDeniedCommand(t *testing.T) {
	line := func(s *scripts.Script, prefix string) int {
		for i, l := range strings.Split(s.Text(), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return i + 1
			}
		}
		t.Fatalf("%s: no line starts with %q", s, prefix)
		return 0
	}
	denied := func(s *scripts.Script, n int) error {
		return fmt.Errorf("The user executing the script can't run this command or subcommand script: %s, on @user_script:%d.", s.SHA1(), n)
	}
	// acquire.lua follows acl_prelude.lua in the script Redis runs.
	prelude, err := os.ReadFile("acl_prelude.lua")
	require.NoError(t, err)
	n := line(scripts.Acquire, "local n = redis.call('hincrby'")
	got := scripts.Explain(denied(scripts.Acquire, n)).Error()
	inFile := n - strings.Count(string(prelude), "\n")
	if want := fmt.Sprintf("denies HINCRBY, which acquire.lua calls at line %d, in the acquire script", inFile); !strings.Contains(got, want) {
		t.Errorf("got %q, want it to contain %q", got, want)
	}
	// A line of a script made of a prelude and a file is reported in the
	// file it comes from.
	n = line(scripts.FairAcquire, "if redis.call('exists', KEYS[1]) == 0 then")
	got = scripts.Explain(denied(scripts.FairAcquire, n)).Error()
	if want := "denies EXISTS, which fair_acquire.lua calls at line "; !strings.Contains(got, want) || strings.Contains(got, fmt.Sprintf("at line %d,", n)) {
		t.Errorf("got %q, want %q with the line in fair_acquire.lua, not %d", got, want, n)
	}
	n = line(scripts.ForceUnlock, "redis.call(ARGV[2]")
	if got := scripts.Explain(denied(scripts.ForceUnlock, n)).Error(); !strings.Contains(got, "denies PUBLISH") {
		t.Errorf("a publish passed in ARGV: got %q", got)
	}
	// Redis 7 ends every error a script's call raises with the script
	// and line: only the ACL's refusals are explained.
	other := fmt.Errorf("WRONGTYPE Operation against a key holding the wrong kind of value script: %s, on @user_script:36.", scripts.Acquire.SHA1())
	if scripts.Explain(other) != other {
		t.Error("another error was changed")
	}
	unknown := fmt.Errorf("The user executing the script can't run this command or subcommand script: %040d, on @user_script:3.", 0)
	if scripts.Explain(unknown) != unknown {
		t.Error("an error of an unknown script was changed")
	}
	wrapped := denied(scripts.Acquire, 1)
	if !errors.Is(scripts.Explain(wrapped), wrapped) {
		t.Error("the result does not wrap the error")
	}
}

// The fair grant pulls every other reservation forward by the wait, as
// Redisson's ZINCRBY per waiter does: the scores must come out as the same
// doubles (compared with a copy moved by ZINCRBY), fractions included. A
// long queue takes the bulk path (one ZUNIONSTORE, its SADDs in chunks of
// 4000 members); a queue of three or fewer, a timeouts key with a TTL (which
// it keeps), a user whose ACL lacks a bulk command and a server where one is
// renamed away take the ZINCRBYs. Either way the call's fence key, the bulk
// path's scratch set, is left absent.
func TestFairGrantMovesQueueAsRedisson(t *testing.T) {
	srv, rc := setup(t)
	ctx := context.Background()
	const (
		queue    = "redisson_lock_queue:{res}"
		timeouts = "redisson_lock_timeout:{res}"
		copyKey  = "copy:{res}"
		wait     = "300000"
	)
	do(t, srv, "ACL", "SETUSER", "nobulk", "on", ">pw", "~*", "&*", "+@all", "-zunionstore")
	o := srv.ClientOption()
	o.Username, o.Password, o.DisableCache = "nobulk", "pw", true
	nobulk, err := rueidis.NewClient(o)
	require.NoError(t, err)
	t.Cleanup(nobulk.Close)
	renamed := redistest.StandaloneWith(t, redistest.Config{Name: "renamed", Args: []string{"--rename-command", "zunionstore", ""}})
	renamedRC, err := renamed.Client()
	require.NoError(t, err)
	t.Cleanup(renamedRC.Close)
	for _, tc := range []struct {
		name  string
		n     int
		ttl   bool
		srv   *redistest.Server
		c     rueidis.Client
		zincr bool // the ZINCRBY path, not the bulk one
	}{
		{"bulk", 2501, false, srv, rc, false},
		{"bulk over two SADDs", 4003, false, srv, rc, false},
		{"four waiters", 4, false, srv, rc, false},
		{"three waiters", 3, false, srv, rc, true},
		{"one waiter", 1, false, srv, rc, true},
		{"none", 0, false, srv, rc, true},
		{"timeouts with a TTL", 50, true, srv, rc, true},
		{"ACL without ZUNIONSTORE", 50, false, srv, nobulk, true},
		{"ZUNIONSTORE renamed away", 50, false, renamed, renamedRC, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.srv
			admin, err := srv.Client()
			require.NoError(t, err)
			defer admin.Close()
			do(t, srv, "DEL", key, queue, timeouts, copyKey, fence1)
			do(t, srv, "RPUSH", queue, owner)
			do(t, srv, "ZADD", timeouts, "1e12", owner)
			if tc.n > 0 {
				q, z, zc := []string{"RPUSH", queue}, []string{"ZADD", timeouts}, []string{"ZADD", copyKey}
				for i := range tc.n {
					m, score := fmt.Sprintf("w%d", i), fmt.Sprintf("%.17g", 1e12+float64(i)*1234.567891234+0.1)
					q, z, zc = append(q, m), append(z, score, m), append(zc, score, m)
				}
				do(t, srv, q...)
				do(t, srv, z...)
				do(t, srv, zc...)
			}
			if tc.ttl {
				do(t, srv, "PEXPIRE", timeouts, "3600000")
			}
			zincr0, err := redistest.CommandCalls(ctx, admin, "zincrby")
			require.NoError(t, err)
			bulk0, err := redistest.CommandCalls(ctx, admin, "zunionstore")
			require.NoError(t, err)
			got, err := scripts.FairAcquire.Exec(ctx, tc.c, []string{key, queue, timeouts, fence1},
				[]string{"30000", owner, "0", "60000", wait, "1000", "q"}).AsInt64()
			require.NoError(t, err)
			require.EqualValues(t, 1, got, "the head takes the lock")
			zincr1, err := redistest.CommandCalls(ctx, admin, "zincrby")
			require.NoError(t, err)
			bulk1, err := redistest.CommandCalls(ctx, admin, "zunionstore")
			require.NoError(t, err)
			if tc.zincr {
				assert.EqualValues(t, tc.n, zincr1-zincr0, "ZINCRBYs")
				assert.Zero(t, bulk1-bulk0, "ZUNIONSTOREs")
			} else {
				assert.Zero(t, zincr1-zincr0, "ZINCRBYs")
				assert.EqualValues(t, 1, bulk1-bulk0, "ZUNIONSTOREs")
			}
			for i := range tc.n {
				do(t, srv, "ZINCRBY", copyKey, "-"+wait, fmt.Sprintf("w%d", i))
			}
			want, err := do(t, srv, "ZRANGE", copyKey, "0", "-1", "WITHSCORES").AsZScores()
			require.NoError(t, err)
			have, err := do(t, srv, "ZRANGE", timeouts, "0", "-1", "WITHSCORES").AsZScores()
			require.NoError(t, err)
			require.Len(t, have, tc.n, "the granted owner's reservation is gone, the others stay")
			assert.Equal(t, want, have, "the same members and the same doubles")
			q, err := do(t, srv, "LLEN", queue).AsInt64()
			require.NoError(t, err)
			assert.EqualValues(t, tc.n, q)
			assert.Zero(t, exists(t, srv, fence1), "the fence key (the scratch set) is left")
			pttl, err := do(t, srv, "PTTL", timeouts).AsInt64()
			require.NoError(t, err)
			switch {
			case tc.n == 0:
				assert.EqualValues(t, -2, pttl, "timeouts")
			case tc.ttl:
				assert.InDelta(t, 3600000, pttl, 60000, "the TTL of timeouts")
			default:
				assert.EqualValues(t, -1, pttl, "timeouts")
			}
		})
	}
}
