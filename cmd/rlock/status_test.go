//go:build unix

package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// TestStatus: status shows a hold made by the library (reentered twice), a
// hold written by hand in Java Redisson's format with a waiting client, and
// a free lock, as text and as JSON.
func TestStatus(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	env := redisEnv(srv)
	svc := libClient(t, srv)
	ctx := rlock.WithOwner(context.Background(), 77)

	goName, javaName, freeName := lockName(t, "go"), lockName(t, "java"), lockName(t, "free")
	require.NoError(t, svc.Lock(goName).Lock(ctx))
	require.NoError(t, svc.Lock(goName).Lock(ctx))
	const javaClient = "0b6c7d2e-9f3a-4e1b-8c5d-1a2b3c4d5e6f"
	do(t, srv, "HSET", javaName, javaClient+":57", "1")
	do(t, srv, "PEXPIRE", javaName, "20000")
	// A waiting Java service: one connection subscribed to the channel.
	sub, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	subCtx, cancelSub := context.WithCancel(context.Background())
	subDone := make(chan error, 1)
	go func() {
		subDone <- sub.Receive(subCtx, sub.B().Subscribe().Channel(rlock.ChannelName(javaName)).Build(), func(rueidis.PubSubMessage) {})
	}()
	t.Cleanup(func() { cancelSub(); <-subDone })
	waitNumsub(t, srv, javaName, 1)

	t.Run("text", func(t *testing.T) {
		code, out, stderr := runRlock(t, env, "status", goName, javaName, freeName)
		require.Equal(t, 0, code, "stderr: %s", stderr)
		assert.Regexp(t, regexp.QuoteMeta(goName)+`: held, ttl (2\d|30)(\.\d+)?s, waiting clients 0\n`+
			`  holder: client `+svc.ID()+` owner 77 count 2\n`, out)
		assert.Regexp(t, regexp.QuoteMeta(javaName)+`: held, ttl (1\d|20)(\.\d+)?s, waiting clients 1\n`+
			`  holder: client `+javaClient+` owner 57 count 1\n`, out)
		assert.Contains(t, out, freeName+": free, waiting clients 0\n")
	})

	t.Run("json", func(t *testing.T) {
		code, out, stderr := runRlock(t, env, "status", "--json", goName, javaName, freeName)
		require.Equal(t, 0, code, "stderr: %s", stderr)
		var got []jsonStatus
		require.NoError(t, json.Unmarshal([]byte(out), &got), out)
		require.Len(t, got, 3)

		assert.Equal(t, goName, got[0].Name)
		assert.True(t, got[0].Locked)
		assert.Equal(t, []jsonHolder{{ClientID: svc.ID(), OwnerID: 77, Count: 2, Field: svc.ID() + ":77"}}, got[0].Holders)
		require.NotNil(t, got[0].TTLms)
		assert.InDelta(t, 30000, *got[0].TTLms, 10001)
		assert.Zero(t, got[0].Subscribers)

		assert.Equal(t, javaName, got[1].Name)
		assert.True(t, got[1].Locked)
		assert.Equal(t, []jsonHolder{{ClientID: javaClient, OwnerID: 57, Count: 1, Field: javaClient + ":57"}}, got[1].Holders)
		require.NotNil(t, got[1].TTLms)
		assert.InDelta(t, 15000, *got[1].TTLms, 5001)
		assert.Equal(t, int64(1), got[1].Subscribers)

		assert.Equal(t, jsonStatus{Name: freeName, Kind: kindFree, Holders: []jsonHolder{}}, got[2])
		assert.Equal(t, kindLock, got[0].Kind)
		assert.Equal(t, kindLock, got[1].Kind)
		assert.Contains(t, out, `"holders": []`, "a free lock has an empty holder list, not null")
	})

	t.Run("not a lock", func(t *testing.T) {
		str, list := lockName(t, "string"), lockName(t, "list")
		do(t, srv, "SET", str, "x")
		do(t, srv, "RPUSH", list, "a")
		code, out, stderr := runRlock(t, env, "status", str, list, freeName)
		assert.Equal(t, 0, code, stderr)
		assert.Contains(t, out, str+": not a Redisson lock or synchronizer (a Redis string)\n")
		assert.Contains(t, out, list+": not a Redisson lock or synchronizer (a Redis list)\n")
		assert.Contains(t, out, freeName+": free", "the other names are still shown")
		code, _, stderr = runRlock(t, env, "unlock", "--force", list)
		assert.Equal(t, exitSoftware, code)
		assert.Contains(t, stderr, list+": not force-unlocked: not a Redisson lock or synchronizer (a Redis list)")
		assert.Equal(t, "1", do(t, srv, "EXISTS", list), "the list is left alone")
	})

	t.Run("an application's hash", func(t *testing.T) {
		// No field in Redisson's owner format (or a mode no read-write
		// lock has): someone else's data, which unlock --force must not
		// delete; a hash with one owner field is a lock.
		app, moded, lock := lockName(t, "app"), lockName(t, "moded"), lockName(t, "lock")
		do(t, srv, "HSET", app, "name", "bob", "age", "3")
		do(t, srv, "HSET", moded, "mode", "foo", "other", "bar")
		do(t, srv, "HSET", lock, "name", "bob", svc.ID()+":5", "1")
		code, out, stderr := runRlock(t, env, "status", app, moded, lock)
		assert.Equal(t, 0, code, stderr)
		assert.Contains(t, out, app+": not a Redisson lock or synchronizer (a Redis hash with no Redisson owner field)\n")
		assert.Contains(t, out, moded+": not a Redisson lock or synchronizer (a Redis hash whose mode \"foo\" is no read-write lock's)\n")
		assert.Contains(t, out, lock+": held, ttl none")
		code, _, stderr = runRlock(t, env, "unlock", "--force", app, moded)
		assert.Equal(t, exitSoftware, code)
		assert.Contains(t, stderr, app+": not force-unlocked: not a Redisson lock or synchronizer (a Redis hash with no Redisson owner field)")
		assert.Contains(t, stderr, moded+": not force-unlocked: ")
		assert.Equal(t, "2", do(t, srv, "EXISTS", app, moded), "the hashes are left alone")
		code, out, stderr = runRlock(t, env, "unlock", "--force", lock)
		assert.Equal(t, 0, code, stderr)
		assert.Contains(t, out, lock+": was held by ")
		assert.Equal(t, "0", do(t, srv, "EXISTS", lock))
	})
}

// TestUnlockForce: unlock --force on a lock held with a long lease wakes a
// waiting `rlock run` at once, and reports who held it; on a free lock it
// says so.
func TestUnlockForce(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	env := redisEnv(srv)
	svc := libClient(t, srv)
	name := lockName(t, "x")
	require.NoError(t, svc.Lock(name).LockLease(rlock.WithOwner(context.Background(), 5), time.Minute))

	ran := filepath.Join(t.TempDir(), "ran")
	waiter := startRlock(t, env, "run", name, "--", "sh", "-c", `echo ran > "$1"`, "sh", ran)
	waitNumsub(t, srv, name, 1)

	forced := time.Now()
	code, out, stderr := runRlock(t, env, "unlock", "--force", name)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, name+": was held by client "+svc.ID()+" owner 5 (count 1); force-unlocked\n", out)
	assert.Equal(t, 0, waiter.wait(10*time.Second), "stderr: %s", waiter.stderr)
	assert.Less(t, time.Since(forced), 5*time.Second, "the waiter ran long before the minute-long lease ended")
	assert.Equal(t, "ran\n", waitFile(t, ran, time.Second))

	code, out, _ = runRlock(t, env, "unlock", "--force", name, lockName(t, "never"))
	require.Equal(t, 0, code)
	assert.Equal(t, name+": was not locked\n"+lockName(t, "never")+": was not locked\n", out)
}

// TestSentinelURL: a URL that names a Sentinel without ?master_set is a
// usage error that says so (EVALSHA used to fail with "unknown command"
// and exit 70, and watch printed it for ever); with the master set named,
// the CLI works through the Sentinel.
func TestSentinelURL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := redistest.StartSentinel(ctx, redistest.SentinelConfig{Sentinels: 1, Quorum: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	sentinel := g.SentinelAddrs()[0]
	for _, cmd := range [][]string{{"status", "x"}, {"watch", "x"}, {"unlock", "--force", "x"}} {
		code, _, stderr := runRlock(t, []string{"REDIS_URL=redis://" + sentinel}, cmd...)
		assert.Equal(t, exitUsage, code, "%v: %s", cmd, stderr)
		assert.Contains(t, stderr, "is a Redis Sentinel, not a Redis server: name the master it watches with ?master_set=NAME", "%v", cmd)
	}
	code, out, stderr := runRlock(t, []string{"REDIS_URL=redis://" + sentinel + "?master_set=" + g.MasterName}, "status", "x")
	assert.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "x: free")
}
