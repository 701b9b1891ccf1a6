//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/interop_test/driver"
	"github.com/goredisson/locks/rlock"
)

// javaVersion is the Redisson the family tests hold objects with.
const javaVersion = "4.7.0"

func startJava(t *testing.T, srv *redistest.Server) *driver.JVM {
	t.Helper()
	require.NoError(t, driver.CheckBuilt(javaVersion), "run make interop-build (make test does)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	j, err := driver.Start(ctx, driver.Config{Version: javaVersion, RedisAddrs: []string{srv.Addr}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	return j
}

func statusJSON(t *testing.T, env []string, name string) jsonStatus {
	t.Helper()
	code, out, stderr := runRlock(t, env, "status", "--json", name)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var got []jsonStatus
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Len(t, got, 1)
	return got[0]
}

func statusOut(t *testing.T, env []string, name string) string {
	t.Helper()
	code, out, stderr := runRlock(t, env, "status", name)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	return out
}

// gated is a shell command that prints "held $RLOCK_PERMIT" and runs until
// the gate file exists.
func gated(gate string) []string {
	return []string{"sh", "-c", `echo "held $RLOCK_PERMIT"; while [ ! -e "$1" ]; do sleep 0.01; done`, "sh", gate}
}

// TestFamilyWithJava: status, run, unlock and watch with every kind of the
// family, against objects held by a real Redisson JVM and by rlock
// processes: each side sees and respects the other's holds.
func TestFamilyWithJava(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	env := redisEnv(srv)
	j := startJava(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	javaID, err := j.ClientID(ctx)
	require.NoError(t, err)
	tid := func(thread string) int64 {
		id, err := j.ThreadID(ctx, thread)
		require.NoError(t, err)
		return id
	}

	t.Run("read-write", func(t *testing.T) {
		name := lockName(t, "rw")
		require.NoError(t, j.Lock(ctx, "R1", driver.Read(name)))
		s := statusJSON(t, env, name)
		assert.Equal(t, kindRW, s.Kind)
		assert.Equal(t, "read", s.Mode)
		assert.Equal(t, []jsonHolder{{ClientID: javaID, OwnerID: tid("R1"), Count: 1, Field: javaID + ":" + strconv.FormatInt(tid("R1"), 10)}}, s.Holders)
		out := statusOut(t, env, name)
		assert.Contains(t, out, name+": held (read-write lock, mode read), ttl ")
		assert.Contains(t, out, "(read lock)")

		// A reader shares Java's read lock; a writer is refused.
		code, _, stderr := runRlock(t, env, "run", "--read", "--wait", "0", name, "--", "true")
		assert.Equal(t, 0, code, stderr)
		code, _, stderr = runRlock(t, env, "run", "--write", "--wait", "0", name, "--", "true")
		assert.Equal(t, exitNotObtained, code)
		assert.Contains(t, stderr, "write lock "+name+" not obtained within 0s: held by client "+javaID)

		// A waiting rlock writer gets the lock when Java's reader leaves,
		// and then Java's reader is refused.
		gate := filepath.Join(t.TempDir(), "gate")
		w := startRlock(t, env, append([]string{"run", "--write", name, "--"}, gated(gate)...)...)
		require.Eventually(t, func() bool { return numsub(t, srv, rlock.RWLockChannelName(name)) == 1 }, 10*time.Second, 10*time.Millisecond)
		require.NoError(t, j.Unlock(ctx, "R1", driver.Read(name)))
		w.waitStdout("held", 10*time.Second)
		ok, err := j.TryLockWait(ctx, "R2", driver.Read(name), 0, -1)
		require.NoError(t, err)
		assert.False(t, ok, "Java read the lock rlock writes")
		s = statusJSON(t, env, name)
		assert.Equal(t, "write", s.Mode)
		require.Len(t, s.Holders, 1)
		assert.True(t, strings.HasSuffix(s.Holders[0].Field, ":write"), s.Holders[0].Field)
		require.NoError(t, os.WriteFile(gate, nil, 0o644))
		assert.Equal(t, 0, w.wait(10*time.Second), "stderr: %s", w.stderr)
		ok, err = j.TryLockWait(ctx, "R2", driver.Read(name), 0, -1)
		require.NoError(t, err)
		assert.True(t, ok)
		// unlock --force uses the read-write lock's channel.
		code, out, stderr = runRlock(t, env, "unlock", "--force", name)
		assert.Equal(t, 0, code, stderr)
		assert.Contains(t, out, name+": was held by client "+javaID)
		assert.Equal(t, "0", do(t, srv, "EXISTS", name))
	})

	t.Run("fair", func(t *testing.T) {
		name := lockName(t, "fair")
		fair := "fair@" + name
		require.NoError(t, j.Lock(ctx, "F1", fair))
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		p := startRlock(t, env, "run", "--fair", name, "--", "sh", "-c", `echo rlock >> "$1"`, "sh", log)
		require.Eventually(t, func() bool { return len(statusJSON(t, env, name).Queue) == 1 }, 10*time.Second, 20*time.Millisecond)
		f2 := tid("F2") // before F2 blocks in lock: its commands queue behind
		javaWaiter := j.Send("lock", "F2", fair)
		require.Eventually(t, func() bool { return len(statusJSON(t, env, name).Queue) == 2 }, 10*time.Second, 20*time.Millisecond)
		s := statusJSON(t, env, name)
		assert.Equal(t, kindFair, s.Kind)
		assert.NotEqual(t, javaID, s.Queue[0].ClientID, "rlock queued first")
		assert.Equal(t, javaID, s.Queue[1].ClientID)
		assert.Equal(t, f2, s.Queue[1].OwnerID)
		require.NotNil(t, s.Queue[0].DeadlineMs)
		assert.Greater(t, *s.Queue[0].DeadlineMs, time.Now().UnixMilli())
		out := statusOut(t, env, name)
		assert.Contains(t, out, name+": held (fair lock), ttl ")
		assert.Contains(t, out, "  queued 1: client "+s.Queue[0].ClientID)
		assert.Contains(t, out, "  queued 2: client "+javaID+" owner "+strconv.FormatInt(f2, 10)+", place reserved until in ")

		// First come, first served: rlock, then Java's second thread.
		require.NoError(t, j.Unlock(ctx, "F1", fair))
		assert.Equal(t, 0, p.wait(10*time.Second), "stderr: %s", p.stderr)
		_, err := javaWaiter.Wait(ctx)
		require.NoError(t, err)
		assert.Equal(t, "rlock\n", waitFile(t, log, time.Second))
		require.NoError(t, j.Unlock(ctx, "F2", fair))
		assert.Equal(t, kindFree, statusJSON(t, env, name).Kind)
	})

	t.Run("fenced", func(t *testing.T) {
		name := lockName(t, "fenced")
		tok, err := j.LockAndGetToken(ctx, "T1", driver.Fenced(name))
		require.NoError(t, err)
		s := statusJSON(t, env, name)
		assert.Equal(t, kindFenced, s.Kind)
		require.NotNil(t, s.Token)
		assert.Equal(t, tok, *s.Token)
		assert.True(t, s.Locked)
		require.NoError(t, j.Unlock(ctx, "T1", driver.Fenced(name)))
		assert.Contains(t, statusOut(t, env, name), name+": free (fenced lock, last token "+strconv.FormatInt(tok, 10)+"), waiting clients 0\n")
	})

	t.Run("semaphore", func(t *testing.T) {
		name := lockName(t, "sem")
		gate := filepath.Join(t.TempDir(), "gate")
		p := startRlock(t, env, append([]string{"run", "--semaphore", "2", name, "--"}, gated(gate)...)...)
		p.waitStdout("held ", 10*time.Second)
		goID := strings.TrimSpace(strings.TrimPrefix(p.stdout.String(), "held "))
		require.Len(t, goID, 32)
		avail, err := j.Do(ctx, "psemavail", name)
		require.NoError(t, err)
		assert.Equal(t, "1", avail, "rlock set 2 permits and holds one")
		javaPermit, err := j.Do(ctx, "psemtryacquire", "S1", name, 0, 60000)
		require.NoError(t, err)
		require.Len(t, javaPermit, 32)

		code, _, stderr := runRlock(t, env, "run", "--semaphore", "2", "--wait", "0", name, "--", "true")
		assert.Equal(t, exitNotObtained, code)
		assert.Contains(t, stderr, "a permit of semaphore "+name+" not obtained within 0s: 0 permits available, 2 acquired")
		s := statusJSON(t, env, name)
		assert.Equal(t, kindPermits, s.Kind)
		require.NotNil(t, s.Available)
		assert.Zero(t, *s.Available)
		ids := []string{}
		for _, a := range s.Acquired {
			ids = append(ids, a.ID)
			require.NotNil(t, a.ExpiresMs)
		}
		assert.ElementsMatch(t, []string{goID, javaPermit}, ids)
		assert.Contains(t, statusOut(t, env, name), "  permit "+goID+" expires in ")
		code, _, stderr = runRlock(t, env, "unlock", "--force", name)
		assert.Equal(t, exitSoftware, code)
		assert.Contains(t, stderr, "it is a permit-expirable semaphore, not a lock")

		require.NoError(t, os.WriteFile(gate, nil, 0o644))
		assert.Equal(t, 0, p.wait(10*time.Second), "stderr: %s", p.stderr)
		avail, err = j.Do(ctx, "psemavail", name)
		require.NoError(t, err)
		assert.Equal(t, "1", avail, "rlock gave its permit back")
		_, err = j.Do(ctx, "psemrelease", name, javaPermit)
		require.NoError(t, err)

		// The watchdog renews the permit past its 1s lease; a killed
		// rlock's permit comes back within it.
		code, _, stderr = runRlock(t, env, "--watchdog", "1s", "run", "--semaphore", "2", name, "--", "sleep", "2.5")
		assert.Equal(t, 0, code, "the permit was renewed; stderr: %s", stderr)
		k := startRlock(t, env, append([]string{"--watchdog", "1s", "run", "--semaphore", "2", name, "--"}, gated(gate+"2")...)...)
		k.waitStdout("held ", 10*time.Second)
		avail, err = j.Do(ctx, "psemavail", name)
		require.NoError(t, err)
		assert.Equal(t, "1", avail)
		k.signal(syscall.SIGKILL)
		k.wait(10 * time.Second)
		require.Eventually(t, func() bool {
			avail, err := j.Do(ctx, "psemavail", name)
			return err == nil && avail == "2"
		}, 5*time.Second, 50*time.Millisecond, "the killed rlock's permit came back")
	})

	t.Run("latch", func(t *testing.T) {
		name := lockName(t, "latch")
		_, err := j.Do(ctx, "latchtryset", name, 2)
		require.NoError(t, err)
		assert.Contains(t, statusOut(t, env, name), name+": counter 2: a semaphore with 2 permits available or a count-down latch at 2")
		awaiter := j.Send("latchawait", "L1", name, -1)
		require.Eventually(t, func() bool { return numsub(t, srv, rlock.LatchChannelName(name)) == 1 }, 10*time.Second, 10*time.Millisecond)
		assert.Contains(t, statusOut(t, env, name), name+": count-down latch, count 2, waiting clients 1\n")
		s := statusJSON(t, env, name)
		require.NotNil(t, s.Count)
		assert.Equal(t, int64(2), *s.Count)
		for range 2 {
			_, err := j.Do(ctx, "latchcountdown", name)
			require.NoError(t, err)
		}
		_, err = awaiter.Wait(ctx)
		require.NoError(t, err)
		assert.Equal(t, kindFree, statusJSON(t, env, name).Kind)
	})

	t.Run("watch", func(t *testing.T) {
		rw, sem := lockName(t, "rw"), lockName(t, "sem")
		w := startRlock(t, env, "watch", "--poll", "--interval", "50ms", rw, sem)
		w.waitStdout(rw+" free", 10*time.Second)
		require.NoError(t, j.Lock(ctx, "W1", driver.Read(rw)))
		w.waitStdout(rw+" held by "+javaID+":"+strconv.FormatInt(tid("W1"), 10)+" count 1 ttl ", 10*time.Second)
		require.NoError(t, j.Unlock(ctx, "W1", driver.Read(rw)))
		_, err := j.Do(ctx, "psemtryset", sem, 1)
		require.NoError(t, err)
		w.waitStdout(sem+" semaphore or count-down latch: 1 permit available", 10*time.Second)
		id, err := j.Do(ctx, "psemtryacquire", "W1", sem, 0, 60000)
		require.NoError(t, err)
		w.waitStdout(sem+" permit-expirable semaphore: 0 permits available, 1 acquired, the next expires in ", 10*time.Second)
		_, err = j.Do(ctx, "psemrelease", sem, id)
		require.NoError(t, err)
		counter := sem + " semaphore or count-down latch: 1 permit available\n"
		w.waitOutput(w.stdout, "the permit back", 10*time.Second, func(s string) bool { return strings.Count(s, counter) == 2 })
		w.signal(syscall.SIGTERM)
		assert.Equal(t, 0, w.wait(10*time.Second))
		assert.Equal(t, 3, strings.Count(w.stdout.String(), rw+" "), "free, held, free:\n%s", w.stdout)
		assert.Equal(t, 4, strings.Count(w.stdout.String(), sem+" "), "free, counter, permit held, counter:\n%s", w.stdout)

		// Keyspace notifications of the companion keys drive watch too:
		// the permit zset's change shows well before the 10s safety read.
		n := startRlock(t, env, "watch", "--enable-notifications", sem)
		n.waitStderr("watching via keyspace notifications", 10*time.Second)
		n.waitStdout(counter, 10*time.Second)
		id, err = j.Do(ctx, "psemtryacquire", "W1", sem, 0, 60000)
		require.NoError(t, err)
		n.waitStdout(sem+" permit-expirable semaphore: 0 permits available, 1 acquired", safetyPoll/2)
		_, err = j.Do(ctx, "psemrelease", sem, id)
		require.NoError(t, err)
		n.signal(syscall.SIGTERM)
		assert.Equal(t, 0, n.wait(10*time.Second))
	})
}
