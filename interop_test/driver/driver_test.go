package driver_test

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/interop_test/driver"
)

// missing fails the test: a missing java, redis-server or driver build is
// an installation problem that `make deps` fixes, never a reason to skip.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatalf(format+" (run `make deps`)", args...)
}

type redisServer struct {
	addr string
	port int
}

// startRedis runs a throwaway redis-server on a free loopback port.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		missing(t, "redis-cli not on PATH")
	}
	srv := redistest.Standalone(t)
	_, portStr, err := net.SplitHostPort(srv.Addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(portStr)
	require.NoError(t, err)
	return &redisServer{addr: srv.Addr, port: port}
}

// cli runs redis-cli --raw and returns its output lines.
func (r *redisServer) cli(t *testing.T, args ...string) []string {
	t.Helper()
	full := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(r.port), "--raw"}, args...)
	out, err := exec.Command("redis-cli", full...).CombinedOutput()
	require.NoError(t, err, "redis-cli %v: %s", args, out)
	s := strings.TrimRight(string(out), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func (r *redisServer) hgetall(t *testing.T, key string) map[string]string {
	t.Helper()
	lines := r.cli(t, "HGETALL", key)
	require.Zero(t, len(lines)%2, "HGETALL %s: %q", key, lines)
	m := map[string]string{}
	for i := 0; i < len(lines); i += 2 {
		m[lines[i]] = lines[i+1]
	}
	return m
}

func TestVersionsFile(t *testing.T) {
	vs, err := driver.Versions()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(vs), 3)
	seen := map[string]bool{}
	for _, v := range vs {
		require.Regexp(t, `^\d+\.\d+\.\d+$`, v, "versions must be pinned exactly")
		require.False(t, seen[v], "duplicate version %s", v)
		seen[v] = true
	}
}

func TestStartNotBuilt(t *testing.T) {
	if _, err := exec.LookPath("java"); err != nil {
		missing(t, "java not on PATH")
	}
	_, err := driver.Start(context.Background(), driver.Config{Version: "0.0.0-none", RedisAddrs: []string{"127.0.0.1:1"}})
	require.ErrorIs(t, err, driver.ErrNotBuilt)
	require.Contains(t, err.Error(), "build.sh")
}

func TestDriverAgainstEachVersion(t *testing.T) {
	if _, err := exec.LookPath("java"); err != nil {
		missing(t, "java not on PATH")
	}
	versions, err := driver.Versions()
	require.NoError(t, err)
	for _, v := range versions {
		if err := driver.CheckBuilt(v); err != nil {
			missing(t, "%v", err)
		}
	}
	redis := startRedis(t)

	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			testVersion(t, redis, v)
		})
	}
}

func testVersion(t *testing.T, redis *redisServer, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var stderr syncBuffer
	jvm, err := driver.Start(ctx, driver.Config{
		Version:         version,
		RedisAddrs:      []string{redis.addr},
		WatchdogTimeout: 10 * time.Second,
		Stderr:          &stderr,
	})
	require.NoError(t, err)
	defer func() {
		require.NoError(t, jvm.Close())
		if t.Failed() {
			t.Logf("JVM stderr:\n%s", stderr.String())
		}
	}()
	require.Equal(t, version, jvm.Version())

	info, err := jvm.Info(ctx)
	require.NoError(t, err)
	t.Logf("Redisson %s: %s", version, info)

	lock := "it:{" + version + "}:lock"

	// lock T1: the hash field is <clientId>:<threadId> = 1.
	require.NoError(t, jvm.Lock(ctx, "T1", lock))
	field, err := jvm.LockField(ctx, "T1")
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f-]{36}:\d+$`, field)
	require.Equal(t, map[string]string{field: "1"}, redis.hgetall(t, lock))

	held, err := jvm.IsHeld(ctx, "T1", lock)
	require.NoError(t, err)
	require.True(t, held)
	held, err = jvm.IsHeld(ctx, "T2", lock)
	require.NoError(t, err)
	require.False(t, held)

	// Watchdog lease: TTL is at most the 10s watchdog timeout.
	ttl, err := jvm.TTL(ctx, lock)
	require.NoError(t, err)
	require.Greater(t, ttl, int64(0))
	require.LessOrEqual(t, ttl, int64(10_000))

	// Reentrancy.
	require.NoError(t, jvm.Lock(ctx, "T1", lock))
	n, err := jvm.HoldCount(ctx, "T1", lock)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, map[string]string{field: "2"}, redis.hgetall(t, lock))
	require.NoError(t, jvm.Unlock(ctx, "T1", lock))

	// Another thread cannot take it, nor unlock it.
	ok, err := jvm.TryLock(ctx, "T2", lock)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = jvm.TryLockWait(ctx, "T2", lock, 100*time.Millisecond, -1)
	require.NoError(t, err)
	require.False(t, ok)

	err = jvm.Unlock(ctx, "T2", lock)
	var je *driver.JavaError
	require.ErrorAs(t, err, &je)
	require.Equal(t, "IllegalMonitorStateException", je.Class, "message: %s", je.Message)
	require.True(t, driver.IsJavaError(err, "IllegalMonitorStateException"))
	require.Equal(t, map[string]string{field: "1"}, redis.hgetall(t, lock), "failed unlock must not change the lock")

	// A blocking lock on T2 parks on its latch and does not hold back
	// T1's unlock.
	p := jvm.Send("lock", "T2", lock)
	require.Eventually(t, func() bool {
		parked, err := jvm.Parked(ctx, "T2")
		return err == nil && parked
	}, time.Minute, time.Millisecond, "T2 never parked on its latch")
	select {
	case <-p.Done():
		v, err := p.Wait(ctx)
		t.Fatalf("T2 got the lock while T1 held it: %q %v", v, err)
	default:
	}
	for _, th := range []string{"T1", "never-used"} {
		parked, err := jvm.Parked(ctx, th)
		require.NoError(t, err)
		require.False(t, parked, "%s is not waiting for a lock", th)
	}
	require.NoError(t, jvm.Unlock(ctx, "T1", lock))
	_, err = p.Wait(ctx)
	require.NoError(t, err)
	field2, err := jvm.LockField(ctx, "T2")
	require.NoError(t, err)
	require.NotEqual(t, field, field2)
	require.Equal(t, map[string]string{field2: "1"}, redis.hgetall(t, lock))
	require.NoError(t, jvm.Unlock(ctx, "T2", lock))

	locked, err := jvm.IsLocked(ctx, lock)
	require.NoError(t, err)
	require.False(t, locked)
	require.Equal(t, []string{"0"}, redis.cli(t, "EXISTS", lock))

	// Unlocking a free lock is also IllegalMonitorStateException.
	require.True(t, driver.IsJavaError(jvm.Unlock(ctx, "T1", lock), "IllegalMonitorStateException"))

	// Explicit lease, tryLock with wait+lease, forceUnlock.
	require.NoError(t, jvm.LockLease(ctx, "T1", lock, 20*time.Second))
	ttl, err = jvm.TTL(ctx, lock)
	require.NoError(t, err)
	require.Greater(t, ttl, int64(10_000))
	require.LessOrEqual(t, ttl, int64(20_000))
	forced, err := jvm.ForceUnlock(ctx, lock)
	require.NoError(t, err)
	require.True(t, forced)
	ok, err = jvm.TryLockWait(ctx, "T2", lock, time.Second, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	ttl, err = jvm.TTL(ctx, lock)
	require.NoError(t, err)
	require.LessOrEqual(t, ttl, int64(5_000))
	require.NoError(t, jvm.Unlock(ctx, "T2", lock))
	ttl, err = jvm.TTL(ctx, lock)
	require.NoError(t, err)
	require.Equal(t, int64(-2), ttl)

	// Mutual exclusion: GET/SET increments from two threads do not get lost.
	key := "it:{" + version + "}:counter"
	w1 := jvm.Send("incr", "W1", lock, key, 15, time.Millisecond)
	w2 := jvm.Send("incr", "W2", lock, key, 15, time.Millisecond)
	_, err = w1.Wait(ctx)
	require.NoError(t, err)
	_, err = w2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"30"}, redis.cli(t, "GET", key))

	// sleep on a thread delays that thread only; plain sleep holds back intake.
	slow := jvm.Send("sleep", "T1", 300*time.Millisecond)
	_, err = jvm.Do(ctx, "islocked", lock)
	require.NoError(t, err)
	select {
	case <-slow.Done():
		t.Fatal("sleep on T1 finished before an islocked sent after it")
	default:
	}
	_, err = slow.Wait(ctx)
	require.NoError(t, err)
	start := time.Now()
	_, err = jvm.Do(ctx, "sleep", 50*time.Millisecond)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

	// Bad input comes back as a Java error, and the JVM carries on.
	_, err = jvm.Do(ctx, "nosuchcommand")
	require.True(t, driver.IsJavaError(err, "IllegalArgumentException"), "%v", err)
	_, err = jvm.Do(ctx, "lock", "T1")
	require.True(t, driver.IsJavaError(err, "IllegalArgumentException"), "%v", err)
	_, err = jvm.Do(ctx, "lock", "T1", "has space")
	require.Error(t, err)
}

func TestKill(t *testing.T) {
	if _, err := exec.LookPath("java"); err != nil {
		missing(t, "java not on PATH")
	}
	versions, err := driver.Versions()
	require.NoError(t, err)
	v := versions[0]
	if err := driver.CheckBuilt(v); err != nil {
		missing(t, "%v", err)
	}
	redis := startRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	jvm, err := driver.Start(ctx, driver.Config{Version: v, RedisAddrs: []string{redis.addr}, WatchdogTimeout: 2 * time.Second})
	require.NoError(t, err)
	require.NoError(t, jvm.Lock(ctx, "T1", "it:kill"))
	blocked := jvm.Send("lock", "T2", "it:kill")

	require.NoError(t, jvm.Kill())
	_, err = blocked.Wait(ctx)
	require.ErrorIs(t, err, driver.ErrExited)
	_, err = jvm.Do(ctx, "clientid")
	require.ErrorIs(t, err, driver.ErrExited)
	require.NoError(t, jvm.Close())

	// Nobody renews the lease any more: the lock expires within the 2s watchdog timeout.
	require.Eventually(t, func() bool {
		return redis.cli(t, "EXISTS", "it:kill")[0] == "0"
	}, 5*time.Second, 100*time.Millisecond)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
