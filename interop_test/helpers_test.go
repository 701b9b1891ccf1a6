package interop_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/interop_test/driver"
	"github.com/goredisson/locks/rlock"
)

const (
	// javaDefaultWatchdog is Redisson's default lockWatchdogTimeout, used by
	// the JVMs that do not set one.
	javaDefaultWatchdog = 30 * time.Second
	// shortWatchdog is the watchdog timeout of the watchdog scenario, on
	// both sides.
	shortWatchdog = 3 * time.Second
	// promptly bounds a wake-up by an unlock message: far below the 30s
	// lease that bounds a wait without the message.
	promptly = 10 * time.Second
	// wokenBy bounds a synchronizer's wake-up by a message (measured at
	// 3-12 ms): half of the 1 s after which a Go waiter looks again
	// without one (engine.SyncRecheck), so that a lost wake-up fails.
	wokenBy = 500 * time.Millisecond
	// scenarioTimeout bounds each scenario.
	scenarioTimeout = 90 * time.Second
)

// mustHaveDeps fails (never skips) when java or a driver build is missing.
func mustHaveDeps(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("java not on PATH (run `make deps`): %v", err)
	}
	for _, bin := range []string{redistest.Flavor() + "-server", redistest.Flavor() + "-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not on PATH (run `make deps`): %v", bin, err)
		}
	}
	versions, err := driver.Versions()
	require.NoError(t, err)
	if only := os.Getenv("INTEROP_VERSIONS"); only != "" {
		// A subset, e.g. INTEROP_VERSIONS=4.7.0 for the Valkey run.
		var keep []string
		for _, v := range versions {
			if slices.Contains(strings.Split(only, ","), v) {
				keep = append(keep, v)
			}
		}
		require.NotEmpty(t, keep, "INTEROP_VERSIONS=%s names none of %v", only, versions)
		versions = keep
	}
	for _, v := range versions {
		if err := driver.CheckBuilt(v); err != nil {
			t.Fatalf("%v (run `make deps`)", err)
		}
	}
	return versions
}

// atLeast reports whether Redisson version v is min or newer.
func atLeast(v, min string) bool {
	a, b := parseVersion(v), parseVersion(min)
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

func parseVersion(v string) [3]int {
	var out [3]int
	for i, p := range strings.SplitN(v, ".", 3) {
		out[i], _ = strconv.Atoi(p)
	}
	return out
}

// ---- the per-version fixture ----

// fixture is what the scenarios of one Redisson version share: a Redis
// server and JVMs started on first use and stopped when the version's test
// ends. Each scenario uses its own lock names (lockName).
type fixture struct {
	version string
	srv     *redistest.Server // the standalone server (nil on a cluster)
	raw     rueidis.Client    // raw commands; never used by a lock client
	owner   *testing.T        // the version's test: owns the shared JVMs

	// The topology the scenarios run on: the addresses given to Redisson,
	// whether it is a cluster (Redisson in cluster mode, sharded pub/sub
	// from 3.22 on), and how a Go service gets its own rueidis client.
	addrs   []string
	cluster bool
	sharded bool
	client  func() (rueidis.Client, error)

	mu   sync.Mutex
	jvms map[string]*driver.JVM
}

func newFixture(t *testing.T, version string) *fixture {
	t.Helper()
	srv := redistest.Standalone(t)
	raw, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	return &fixture{version: version, srv: srv, raw: raw, owner: t, jvms: map[string]*driver.JVM{},
		addrs: []string{srv.Addr}, client: func() (rueidis.Client, error) { return srv.Client() }}
}

// newClusterFixture is newFixture on the cluster cl: Redisson in cluster
// mode and the Go clients in their default pub/sub mode, both sharded on
// Redis 7 (Redisson 3.22+).
func newClusterFixture(t *testing.T, version string, cl *redistest.RedisCluster, raw rueidis.Client) *fixture {
	t.Helper()
	return &fixture{version: version, raw: raw, owner: t, jvms: map[string]*driver.JVM{},
		addrs: cl.Addrs(), cluster: true, sharded: atLeast(version, "3.22.0"),
		client: func() (rueidis.Client, error) { return cl.Client() }}
}

// jvm returns the shared JVM called key (started on first use, with the
// given watchdog timeout; 0 is Redisson's default of 30s).
func (f *fixture) jvm(t *testing.T, key string, watchdog time.Duration) *driver.JVM {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if j := f.jvms[key]; j != nil {
		return j
	}
	j := startJVM(t, driver.Config{Version: f.version, RedisAddrs: f.addrs, Cluster: f.cluster, WatchdogTimeout: watchdog})
	f.jvms[key] = j
	owner := f.owner
	owner.Cleanup(func() {
		if err := j.Close(); err != nil {
			owner.Errorf("closing JVM %s: %v", key, err)
		}
		if owner.Failed() {
			owner.Logf("JVM %s (Redisson %s) stderr:\n%s", key, f.version, j.Stderr())
		}
	})
	return j
}

// javaA is the JVM most scenarios use (Redisson's default watchdog, 30s).
func (f *fixture) javaA(t *testing.T) *driver.JVM { return f.jvm(t, "A", 0) }

// javaB is a second Redisson instance (another client id), same settings.
func (f *fixture) javaB(t *testing.T) *driver.JVM { return f.jvm(t, "B", 0) }

// javaWatchdog is a JVM with lockWatchdogTimeout = shortWatchdog.
func (f *fixture) javaWatchdog(t *testing.T) *driver.JVM {
	return f.jvm(t, "watchdog", shortWatchdog)
}

// startJVM starts a JVM owned by t: closed (or already killed) when t ends.
func startJVM(t *testing.T, cfg driver.Config) *driver.JVM {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	j, err := driver.Start(ctx, cfg)
	if errors.Is(err, driver.ErrNotBuilt) || errors.Is(err, driver.ErrNoJava) {
		t.Fatalf("%v (run `make deps`)", err)
	}
	require.NoError(t, err)
	t.Logf("started Redisson %s JVM (watchdog %v, cluster %v) in %v", cfg.Version, cfg.WatchdogTimeout, cfg.Cluster, time.Since(start).Round(time.Millisecond))
	return j
}

// dedicatedJVM starts a JVM used by t alone (for instance one to kill).
func (f *fixture) dedicatedJVM(t *testing.T, watchdog time.Duration) *driver.JVM {
	t.Helper()
	j := startJVM(t, driver.Config{Version: f.version, RedisAddrs: f.addrs, Cluster: f.cluster, WatchdogTimeout: watchdog})
	t.Cleanup(func() {
		require.NoError(t, j.Close())
		if t.Failed() {
			t.Logf("dedicated JVM stderr:\n%s", j.Stderr())
		}
	})
	return j
}

// goClient returns a new Go lock client (a "Go service") with its own
// rueidis client, closed when t ends.
func (f *fixture) goClient(t *testing.T, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	rc, err := f.client()
	require.NoError(t, err)
	return newGoClient(t, rc, opts...)
}

func newGoClient(t *testing.T, rc rueidis.Client, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	c, err := rlock.New(rc, opts...)
	if err != nil {
		rc.Close()
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Close())
		rc.Close()
	})
	return c
}

// watch observes the channel ch (sharded when the fixture's Redisson uses
// sharded pub/sub).
func (f *fixture) watch(t *testing.T, ch string) *watcher {
	t.Helper()
	rc, err := f.client()
	require.NoError(t, err)
	return watchChannel(t, rc, ch, f.sharded)
}

// lockName returns a lock name unique to t (scenario and version) and tag.
// It has no hash tag, so derived names wrap it in braces.
func lockName(t *testing.T, tag string) string {
	return "it:" + t.Name() + ":" + tag
}

func scenarioCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	t.Cleanup(cancel)
	return ctx
}

// owner returns ctx with an explicit Go owner id.
func owner(ctx context.Context, id int64) context.Context { return rlock.WithOwner(ctx, id) }

// ---- raw Redis views ----

func doRaw(t *testing.T, rc rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := rc.B().Arbitrary(args...).Build()
	if len(args) > 1 && !keyless[strings.ToUpper(args[0])] {
		// The second word is the key: a cluster client routes by it.
		cmd = rc.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build()
	}
	return rc.Do(ctx, cmd)
}

// keyless are the commands doRaw sends without a key.
var keyless = map[string]bool{"PUBSUB": true, "INFO": true, "CLUSTER": true, "CONFIG": true, "DBSIZE": true, "PING": true, "KEYS": true}

func hgetall(t *testing.T, rc rueidis.Client, key string) map[string]string {
	t.Helper()
	m, err := doRaw(t, rc, "HGETALL", key).AsStrMap()
	require.NoError(t, err)
	return m
}

func pttl(t *testing.T, rc rueidis.Client, key string) time.Duration {
	t.Helper()
	ms, err := doRaw(t, rc, "PTTL", key).AsInt64()
	require.NoError(t, err)
	return time.Duration(ms) * time.Millisecond
}

// numsub returns PUBSUB NUMSUB (classic) or SHARDNUMSUB (sharded) for ch.
// On a cluster client SHARDNUMSUB goes to the channel's slot.
func numsub(t *testing.T, rc rueidis.Client, ch string, sharded bool) int64 {
	t.Helper()
	cmd := rc.B().PubsubNumsub().Channel(ch).Build()
	if sharded {
		cmd = rc.B().PubsubShardnumsub().Channel(ch).Build()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	arr, err := rc.Do(ctx, cmd).ToArray()
	require.NoError(t, err)
	require.Len(t, arr, 2)
	n, err := arr[1].AsInt64()
	require.NoError(t, err)
	return n
}

// waitSubscribers waits until at least n connections are subscribed to ch:
// how the tests know a Java waiter (which subscribes after its first failed
// attempt) is waiting.
func waitSubscribers(t *testing.T, rc rueidis.Client, ch string, sharded bool, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return numsub(t, rc, ch, sharded) >= n },
		10*time.Second, 5*time.Millisecond, "expected %d subscribers on %s (sharded %v)", n, ch, sharded)
}

// waitGoWaiters waits until c has at least n waiters parked in their wait
// (after an attempt that found the lock taken).
func waitGoWaiters(t *testing.T, c *rlock.Client, n int) {
	t.Helper()
	// Parked, not merely subscribed: a waiter between its subscription and
	// its next attempt would take a lock freed now without any message
	// (the ModeMismatch test failed so on Valkey).
	require.Eventually(t, func() bool { return c.Stats().Parked >= n },
		10*time.Second, time.Millisecond, "expected %d Go waiters", n)
}

// ---- asynchronous calls with completion times ----

// call is a lock operation running in its own goroutine.
type call struct {
	done chan struct{}
	ok   bool
	val  string
	err  error
	at   time.Time // when it returned
}

// goAsync runs fn in a new goroutine (its own Go owner unless ctx names one).
func goAsync(fn func() (bool, error)) *call {
	c := &call{done: make(chan struct{})}
	go func() {
		c.ok, c.err = fn()
		c.at = time.Now()
		close(c.done)
	}()
	return c
}

// javaAsync tracks a driver command sent with Send.
func javaAsync(p *driver.Pending) *call {
	c := &call{done: make(chan struct{})}
	go func() {
		<-p.Done()
		c.at = time.Now()
		c.val, c.err = p.Wait(context.Background())
		c.ok = c.val == "true"
		close(c.done)
	}()
	return c
}

// finished reports whether the call has returned.
func (c *call) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait waits for the call, failing t after timeout.
func (c *call) wait(t *testing.T, timeout time.Duration) *call {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		t.Fatalf("call did not return within %v", timeout)
	}
	return c
}

// ---- channel observer ----

type message struct {
	channel, payload string
	at               time.Time
}

// watcher is a raw subscriber on one lock channel, classic or sharded, that
// records what is published there.
type watcher struct {
	mu   sync.Mutex
	msgs []message
	got  chan struct{} // receives a token per message
}

// watchChannel subscribes rc to ch and returns once the subscription is
// confirmed. It takes rc over (a client used for nothing else) and closes it
// when t ends.
func watchChannel(t *testing.T, rc rueidis.Client, ch string, sharded bool) *watcher {
	t.Helper()
	w := &watcher{got: make(chan struct{}, 64)}
	subscribed := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	ctx = rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Channel == ch {
			once.Do(func() { close(subscribed) })
		}
	})
	cmd := rc.B().Subscribe().Channel(ch).Build()
	if sharded {
		cmd = rc.B().Ssubscribe().Channel(ch).Build()
	}
	done := make(chan error, 1)
	go func() {
		done <- rc.Receive(ctx, cmd, func(m rueidis.PubSubMessage) {
			w.mu.Lock()
			w.msgs = append(w.msgs, message{m.Channel, m.Message, time.Now()})
			w.mu.Unlock()
			select {
			case w.got <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		rc.Close()
	})
	select {
	case <-subscribed:
	case err := <-done:
		t.Fatalf("subscribing to %s: %v", ch, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("subscribing to %s: no confirmation within 10s", ch)
	}
	return w
}

func (w *watcher) messages() []message {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]message(nil), w.msgs...)
}

// waitMessage waits for the watcher's first message.
func (w *watcher) waitMessage(t *testing.T, timeout time.Duration) message {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if m := w.messages(); len(m) > 0 {
			return m[0]
		}
		select {
		case <-w.got:
		case <-deadline:
			t.Fatalf("no message within %v", timeout)
		}
	}
}

// ---- measurements ----

type measurement struct {
	suite, version, what string
	d                    time.Duration
}

var (
	measureMu    sync.Mutex
	measurements []measurement
)

// measure logs a timing and keeps it for the suite's summary.
func measure(t *testing.T, suite, version, what string, d time.Duration) {
	t.Helper()
	t.Logf("MEASURED Redisson %s: %s = %v", version, what, d.Round(100*time.Microsecond))
	measureMu.Lock()
	measurements = append(measurements, measurement{suite, version, what, d})
	measureMu.Unlock()
}

// logSummary logs every timing of suite, grouped by what was measured.
func logSummary(t *testing.T, suite string) {
	measureMu.Lock()
	defer measureMu.Unlock()
	byWhat := map[string][]string{}
	var whats []string
	for _, m := range measurements {
		if m.suite != suite {
			continue
		}
		if _, ok := byWhat[m.what]; !ok {
			whats = append(whats, m.what)
		}
		byWhat[m.what] = append(byWhat[m.what], fmt.Sprintf("%s=%v", m.version, m.d.Round(100*time.Microsecond)))
	}
	sort.Strings(whats)
	var b strings.Builder
	for _, w := range whats {
		fmt.Fprintf(&b, "  %-55s %s\n", w, strings.Join(byWhat[w], "  "))
	}
	t.Logf("%s timings:\n%s", suite, b.String())
}

// ---- command spy ----

// spyClient is a rueidis.Client that reports every command sent through Do
// and DoMulti (after its reply) to after. It lets a test count the unlock
// script runs of one Unlock call.
type spyClient struct {
	rueidis.Client
	after func(cmd []string, res rueidis.RedisResult)
}

func (s *spyClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := append([]string(nil), cmd.Commands()...) // cmd is recycled by Do
	res := s.Client.Do(ctx, cmd)
	s.after(args, res)
	return res
}

func (s *spyClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	args := make([][]string, len(cmds))
	for i, c := range cmds {
		args[i] = append([]string(nil), c.Commands()...)
	}
	res := s.Client.DoMulti(ctx, cmds...)
	for i := range res {
		s.after(args[i], res[i])
	}
	return res
}

// ranUnlockScript reports whether cmd ran the unlock script: an EVAL or
// EVALSHA whose second key is the lock channel and third a fence key, not
// answered NOSCRIPT (an EVALSHA the server did not know, which the client
// follows with EVAL).
func ranUnlockScript(cmd []string, res rueidis.RedisResult) bool {
	if len(cmd) < 6 || (!strings.EqualFold(cmd[0], "EVALSHA") && !strings.EqualFold(cmd[0], "EVAL")) {
		return false
	}
	if e, ok := rueidis.IsRedisErr(res.Error()); ok && strings.HasPrefix(e.Error(), "NOSCRIPT") {
		return false
	}
	return cmd[2] == "3" && strings.HasPrefix(cmd[4], "redisson_lock__channel:") && strings.HasPrefix(cmd[5], "goredisson_fence:")
}
