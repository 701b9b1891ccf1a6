package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// EnvAddr names the environment variable that makes Standalone use an
// existing server (host:port) instead of starting one.
const EnvAddr = "REDIS_ADDR"

// setupTimeout bounds each testing.TB wrapper's setup.
const setupTimeout = 2 * time.Minute

// Standalone returns a standalone Redis server for t, closed by t.Cleanup:
//   - if REDIS_ADDR is set, a Server for that existing server (Close leaves
//     it running, Restart and Kill return an error; its data is shared and
//     not flushed);
//   - else a local redis-server process (StartServer);
//   - else, if redis-server is not on PATH but a Docker engine answers, a
//     testcontainers-go Redis container (run by tools/redisdocker, a module
//     of its own).
//
// Otherwise t.Fatalf explains how to install Redis. It never skips.
func Standalone(t testing.TB) *Server {
	t.Helper()
	return StandaloneWith(t, Config{})
}

// StandaloneWith is Standalone with a Config. With REDIS_ADDR only
// Username and Password are used; Args etc. are not applied.
func StandaloneWith(t testing.TB, cfg Config) *Server {
	t.Helper()
	if addr := os.Getenv(EnvAddr); addr != "" {
		if len(cfg.Args) > 0 {
			t.Logf("redistest: %s=%s is set; Args %q are not applied to it", EnvAddr, addr, cfg.Args)
		}
		s := &Server{Addr: addr, Name: EnvAddr, cfg: cfg, kind: kindExternal}
		cleanup(t, []*Server{s}, s.Close)
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s, err := startAny(ctx, cfg)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cleanup(t, []*Server{s}, s.Close)
	return s
}

// Masters returns n independent standalone masters for t, closed by
// t.Cleanup. It ignores REDIS_ADDR and falls back to Docker like Standalone.
func Masters(t testing.TB, n int) []*Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	servers, err := startAll(ctx, masterConfigs(n), startAny)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cleanup(t, servers, func() error { return closeAll(servers) })
	return servers
}

// Cluster returns a Redis Cluster of 3 masters and 3 replicas for t
// (DefaultClusterConfig), closed by t.Cleanup. It needs redis-server and
// redis-cli on PATH.
func Cluster(t testing.TB) *RedisCluster {
	t.Helper()
	return ClusterWith(t, DefaultClusterConfig())
}

// ClusterWith is Cluster with a ClusterConfig.
func ClusterWith(t testing.TB, cfg ClusterConfig) *RedisCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	c, err := StartCluster(ctx, cfg)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cleanup(t, c.nodes, c.Close)
	return c
}

// Sentinel returns a Sentinel group for t (master "mymaster", 1 replica, 3
// Sentinels, quorum 2), closed by t.Cleanup. It needs redis-server on PATH.
func Sentinel(t testing.TB) *SentinelGroup {
	t.Helper()
	return SentinelWith(t, SentinelConfig{})
}

// SentinelWith is Sentinel with a SentinelConfig.
func SentinelWith(t testing.TB, cfg SentinelConfig) *SentinelGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	g, err := StartSentinel(ctx, cfg)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cleanup(t, append(g.DataNodes(), g.sentinels...), g.Close)
	return g
}

// cleanup registers closeFn, logging the servers' log tails first if the
// test failed.
func cleanup(t testing.TB, servers []*Server, closeFn func() error) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range servers {
				if s.Dir != "" {
					t.Logf("%s log tail:\n%s", s, s.LogTail())
				}
			}
		}
		if err := closeFn(); err != nil {
			t.Errorf("%v", err)
		}
	})
}

// startAny starts a local redis-server, or a Docker container when
// redis-server is missing and Docker answers.
func startAny(ctx context.Context, cfg Config) (*Server, error) {
	if _, err := exec.LookPath(cfg.binary()); err == nil {
		return StartServer(ctx, cfg)
	}
	if !dockerAvailable() {
		return nil, fmt.Errorf("redistest: %s is not on PATH and no Docker engine answered; %s, or set %s=host:port to use a running server",
			cfg.binary(), installHint, EnvAddr)
	}
	return startDocker(ctx, cfg)
}

// boundedRueidisGoroutines are goroutines that rueidis' cluster client
// starts and Close does not cancel, but that end on their own: _refresh
// closes connections dropped from the topology after time.Sleep(5s)
// (rueidis v1.0.79 cluster.go:400), and lazyRefresh's singleflight DelayDo
// sleeps up to 1s before refreshing. After a failover or resharding they can
// outlive a package's last test by a few seconds.
var boundedRueidisGoroutines = []string{
	"github.com/redis/rueidis.(*clusterClient)._refresh.func2",
	"github.com/redis/rueidis.(*call).DelayDo.func1",
}

// VerifyTestMain is goleak.VerifyTestMain for packages that use rueidis
// clients: after the tests, if the only goroutines left are the bounded
// rueidis ones above, it waits up to 10s for them to finish, and then
// goleak checks with no rueidis goroutine ignored. Use it as
//
//	func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }
//
// opts must not include goleak.Cleanup (goleak.Find rejects it); use
// VerifyTestMainThen for work to do after the tests.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(waitForRueidis{m, nil, opts}, opts...)
}

// VerifyTestMainThen is VerifyTestMain with after run once the tests have
// finished, before the leak check (to remove files the tests built, say).
func VerifyTestMainThen(m *testing.M, after func(), opts ...goleak.Option) {
	goleak.VerifyTestMain(waitForRueidis{m, after, opts}, opts...)
}

type waitForRueidis struct {
	m     *testing.M
	after func()
	opts  []goleak.Option
}

func (w waitForRueidis) Run() int {
	code := w.m.Run()
	if w.after != nil {
		w.after()
	}
	ignoring := slices.Clone(w.opts)
	for _, f := range boundedRueidisGoroutines {
		ignoring = append(ignoring, goleak.IgnoreAnyFunction(f))
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if goleak.Find(w.opts...) == nil || goleak.Find(ignoring...) != nil {
			break // clean, or leaking something else: let goleak report it
		}
		time.Sleep(100 * time.Millisecond)
	}
	return code
}
