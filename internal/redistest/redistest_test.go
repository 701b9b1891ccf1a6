package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// TestMain checks for leaked goroutines with goleak.VerifyTestMain, via
// VerifyTestMain, which first lets rueidis' bounded cluster-client
// goroutines finish (see boundedRueidisGoroutines) instead of ignoring them.
func TestMain(m *testing.M) {
	VerifyTestMain(m)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestStandalonePingAndRestartLosesData(t *testing.T) {
	ctx := testCtx(t)
	s, err := StartServer(ctx, Config{Name: "restart"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	pong, err := s.DoString(ctx, "PING")
	require.NoError(t, err)
	require.Equal(t, "PONG", pong)

	c, err := s.Client()
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error())
	got, err := s.DoString(ctx, "GET", "k")
	require.NoError(t, err)
	require.Equal(t, "v", got)

	addr, pid := s.Addr, s.Pid()
	require.NotZero(t, pid)
	require.NoError(t, s.Restart(ctx))
	require.Equal(t, addr, s.Addr, "Restart must keep the port")
	require.NotEqual(t, pid, s.Pid())

	_, err = s.Do(ctx, "GET", "k")
	require.True(t, rueidis.IsRedisNil(err), "data must be lost on Restart, got %v", err)
	// The caller's own client reconnects to the restarted server.
	require.Eventually(t, func() bool {
		return rueidis.IsRedisNil(c.Do(ctx, c.B().Get().Key("k").Build()).Error())
	}, 5*time.Second, 20*time.Millisecond)
}

func TestStandaloneWrapper(t *testing.T) {
	t.Setenv(EnvAddr, "")
	s := StandaloneWith(t, Config{Password: "s3cret", Args: []string{"--notify-keyspace-events", "KEA"}})
	ctx := testCtx(t)
	v, err := s.Do(ctx, "CONFIG", "GET", "notify-keyspace-events")
	require.NoError(t, err)
	kv, err := v.AsStrMap()
	require.NoError(t, err)
	require.ElementsMatch(t, []rune("AKE"), []rune(kv["notify-keyspace-events"]))

	_, err = rawCommand(ctx, s.Addr, "", "", "PING")
	require.ErrorContains(t, err, "NOAUTH", "requirepass must be in effect")
}

func TestExternalServerViaEnv(t *testing.T) {
	ctx := testCtx(t)
	real, err := StartServer(ctx, Config{Name: "external-target"})
	require.NoError(t, err)
	defer func() { require.NoError(t, real.Close()) }()

	t.Setenv(EnvAddr, real.Addr)
	var ext *Server
	t.Run("wrapper", func(t *testing.T) {
		ext = Standalone(t)
		require.Equal(t, real.Addr, ext.Addr)
		require.Zero(t, ext.Pid())
		require.ErrorContains(t, ext.Restart(ctx), "unavailable with REDIS_ADDR")
		require.ErrorContains(t, ext.Kill(), "unavailable with REDIS_ADDR")
		_, err := ext.Do(ctx, "SET", "shared", "1")
		require.NoError(t, err)
	})
	// The subtest's cleanup closed ext, which must leave the server running.
	require.True(t, real.Running())
	got, err := real.DoString(ctx, "GET", "shared")
	require.NoError(t, err)
	require.Equal(t, "1", got)
}

func TestCloseStopsProcess(t *testing.T) {
	ctx := testCtx(t)
	s, err := StartServer(ctx, Config{Name: "close"})
	require.NoError(t, err)
	pid, dir := s.Pid(), s.Dir
	_, err = s.Do(ctx, "PING")
	require.NoError(t, err)

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")

	_, err = net.DialTimeout("tcp", s.Addr, time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "process %d must be gone", pid)
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = s.Do(ctx, "PING")
	require.ErrorContains(t, err, "closed")
}

func TestKillAndRestart(t *testing.T) {
	ctx := testCtx(t)
	s := Standalone(t)
	if s.kind != kindLocal {
		t.Fatalf("this test needs a local redis-server, got %s", s)
	}
	require.NoError(t, s.Kill())
	require.False(t, s.Running())
	require.Zero(t, s.Pid())
	_, err := s.Do(ctx, "PING")
	require.Error(t, err)
	require.ErrorContains(t, err, s.Addr, "errors name the address")

	require.NoError(t, s.Restart(ctx))
	require.True(t, s.Running())
	_, err = s.Do(ctx, "PING")
	require.NoError(t, err)
}

func TestStartServerReportsLogOnFailure(t *testing.T) {
	_, err := StartServer(testCtx(t), Config{Name: "bad", Args: []string{"--no-such-option", "1"}})
	require.Error(t, err)
	require.ErrorContains(t, err, "bad (127.0.0.1:")
	require.ErrorContains(t, err, "no-such-option", "the error must include the log tail")
}

func TestStartServerFixedPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = StartServer(testCtx(t), Config{Name: t.Name(), Port: port})
	require.ErrorIs(t, err, errAddrInUse)
	require.ErrorContains(t, err, fmt.Sprintf("127.0.0.1:%d", port))
}

// TestNoRedisNoDocker checks the message a developer without redis-server
// and Docker gets. (The probe itself is tested in tools/redisdocker.)
func TestNoRedisNoDocker(t *testing.T) {
	real := dockerAvailable
	dockerAvailable = func() bool { return false }
	t.Cleanup(func() { dockerAvailable = real })

	_, err := startAny(testCtx(t), Config{Binary: "redis-server-not-installed"})
	require.ErrorContains(t, err, "apt-get install redis-server")
	require.ErrorContains(t, err, "make deps")
	require.ErrorContains(t, err, "no Docker engine answered")
}

func TestMasters(t *testing.T) {
	ctx := testCtx(t)
	ms := Masters(t, 2)
	require.Len(t, ms, 2)
	require.NotEqual(t, ms[0].Addr, ms[1].Addr)
	_, err := ms[0].Do(ctx, "SET", "k", "0")
	require.NoError(t, err)
	_, err = ms[1].Do(ctx, "GET", "k")
	require.True(t, rueidis.IsRedisNil(err), "masters must be independent, got %v", err)
	for _, m := range ms {
		role, err := m.Do(ctx, "ROLE")
		require.NoError(t, err)
		r, err := role.ToArray()
		require.NoError(t, err)
		require.Equal(t, "master", must(r[0].ToString()))
	}
}

func TestCluster(t *testing.T) {
	ctx := testCtx(t)
	start := time.Now()
	c := Cluster(t)
	t.Logf("cluster ready in %v", time.Since(start))
	require.Len(t, c.Nodes(), 6)
	masters, err := c.Masters(ctx)
	require.NoError(t, err)
	require.Len(t, masters, 3)
	replicas, err := c.Replicas(ctx)
	require.NoError(t, err)
	require.Len(t, replicas, 3)

	cl, err := c.Client()
	require.NoError(t, err)
	defer cl.Close()

	owners := map[string]bool{}
	for i := range 50 {
		key := fmt.Sprintf("key-%d", i)
		require.NoError(t, cl.Do(ctx, cl.B().Set().Key(key).Value(key).Build()).Error())
		got, err := cl.Do(ctx, cl.B().Get().Key(key).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, key, got)

		slot, err := masters[0].Do(ctx, "CLUSTER", "KEYSLOT", key)
		require.NoError(t, err)
		require.EqualValues(t, must(slot.AsInt64()), Slot(key))

		m, err := c.MasterForKey(ctx, key)
		require.NoError(t, err)
		owners[m.Addr] = true
		direct, err := m.DoString(ctx, "GET", key)
		require.NoError(t, err, "the key must live on MasterForKey")
		require.Equal(t, key, direct)
	}
	require.Len(t, owners, 3, "keys must be spread over all masters")

	t.Run("MoveSlot", func(t *testing.T) {
		key := "key-0"
		from, err := c.MasterForKey(ctx, key)
		require.NoError(t, err)
		to := masters[0]
		if to == from {
			to = masters[1]
		}
		require.NoError(t, c.MoveSlot(ctx, Slot(key), to))
		now, err := c.MasterForKey(ctx, key)
		require.NoError(t, err)
		require.Equal(t, to, now)
		got, err := cl.Do(ctx, cl.B().Get().Key(key).Build()).ToString()
		require.NoError(t, err, "the client must follow MOVED")
		require.Equal(t, key, got)
	})

	t.Run("NodeIDs", func(t *testing.T) {
		// Every node's own id (its myself line) is the id the others
		// know it by: DoString drops RESP3's verbatim "txt:" prefix,
		// which would otherwise stick to the first line's id.
		ids := map[string]bool{}
		for _, n := range c.Nodes() {
			me, _, err := clusterNodes(ctx, n)
			require.NoError(t, err)
			ids[me.id] = true
		}
		for _, n := range c.Nodes() {
			_, all, err := clusterNodes(ctx, n)
			require.NoError(t, err)
			for _, l := range all {
				require.True(t, ids[l.id], "%s lists node %q, which no node calls itself", n, l.id)
			}
		}
	})

	t.Run("FailoverSlot", func(t *testing.T) {
		key := "key-2"
		m, err := c.MasterForKey(ctx, key)
		require.NoError(t, err)
		start := time.Now()
		promoted, err := c.FailoverSlot(ctx, Slot(key))
		require.NoError(t, err)
		t.Logf("manual failover done in %v", time.Since(start))
		require.NotEqual(t, m, promoted)
		now, err := c.MasterForKey(ctx, key)
		require.NoError(t, err)
		require.Equal(t, promoted, now)
		rs, err := c.Replicas(ctx)
		require.NoError(t, err)
		require.Contains(t, rs, m, "the old master must now replicate the new one")
		require.Eventually(t, func() bool {
			got, err := cl.Do(ctx, cl.B().Get().Key(key).Build()).ToString()
			return err == nil && got == key
		}, 10*time.Second, 50*time.Millisecond, "no write is lost, and the client follows the new master")
	})

	t.Run("Failover", func(t *testing.T) {
		key := "key-1"
		m, err := c.MasterForKey(ctx, key)
		require.NoError(t, err)
		require.NoError(t, m.WaitReplicated(ctx))
		start := time.Now()
		require.NoError(t, c.KillNode(m.Addr))
		require.NoError(t, c.WaitHealthy(ctx))
		t.Logf("failover done in %v", time.Since(start))
		promoted, err := c.MasterForKey(ctx, key)
		require.NoError(t, err)
		require.NotEqual(t, m, promoted)
		start = time.Now()
		require.Eventually(t, func() bool {
			got, err := cl.Do(ctx, cl.B().Get().Key(key).Build()).ToString()
			return err == nil && got == key
		}, 10*time.Second, 50*time.Millisecond, "the client must reach the promoted replica")
		t.Logf("client reached the promoted replica after %v", time.Since(start))

		require.NoError(t, m.Restart(ctx))
		require.NoError(t, c.WaitHealthy(ctx), "the restarted node must rejoin as a replica")
		rs, err := c.Replicas(ctx)
		require.NoError(t, err)
		require.Contains(t, rs, m)
	})
}

func TestSentinel(t *testing.T) {
	ctx := testCtx(t)
	start := time.Now()
	g := Sentinel(t)
	t.Logf("sentinel group ready in %v", time.Since(start))
	require.Len(t, g.SentinelAddrs(), 3)
	master, err := g.Master(ctx)
	require.NoError(t, err)
	require.Equal(t, g.DataNodes()[0], master)

	cl, err := g.Client()
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.Do(ctx, cl.B().Set().Key("k").Value("v").Build()).Error())
	got, err := cl.Do(ctx, cl.B().Get().Key("k").Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "v", got)

	t.Run("Failover", func(t *testing.T) {
		start := time.Now()
		newMaster, err := g.Failover(ctx)
		require.NoError(t, err)
		t.Logf("failover done in %v", time.Since(start))
		require.NotEqual(t, master.Addr, newMaster)
		require.Equal(t, g.DataNodes()[1].Addr, newMaster)
		start = time.Now()
		require.Eventually(t, func() bool {
			return cl.Do(ctx, cl.B().Set().Key("k").Value("after").Build()).Error() == nil
		}, 10*time.Second, 50*time.Millisecond, "the client must follow +switch-master")
		t.Logf("client wrote to the new master after %v", time.Since(start))
		got, err := g.Node(newMaster).DoString(ctx, "GET", "k")
		require.NoError(t, err)
		require.Equal(t, "after", got)
	})

	t.Run("KillMaster", func(t *testing.T) {
		m, err := g.Master(ctx)
		require.NoError(t, err)
		// Every write must be on the replicas before the kill, or the
		// promoted node answers the old value for good.
		require.NoError(t, m.WaitReplicated(ctx))
		start := time.Now()
		require.NoError(t, m.Kill())
		newMaster, err := g.WaitForNewMaster(ctx, m.Addr)
		require.NoError(t, err)
		t.Logf("sentinels promoted %s after %v", newMaster, time.Since(start))
		require.Eventually(t, func() bool {
			got, err := cl.Do(ctx, cl.B().Get().Key("k").Build()).ToString()
			return err == nil && got == "after"
		}, 10*time.Second, 50*time.Millisecond, "the client must follow the failover")
		t.Logf("client read from the new master %v after the kill", time.Since(start))

		require.NoError(t, m.Restart(ctx))
		require.NoError(t, g.WaitHealthy(ctx), "the restarted old master must rejoin as a replica")
		t.Logf("group healthy again %v after the kill", time.Since(start))
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
