// Package faults_test injects faults into the Redis side of the locks:
// a restarted server, killed pub/sub and command connections, a stalled
// network, a holder process killed with SIGKILL; and checks the locks over
// TLS and with a least-privilege ACL user. Every test runs against real
// redis-server processes started by internal/redistest.
package faults_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/holder"
	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the holder process that TestHolderKilled
	// kills with SIGKILL.
	holder.MaybeRun()
	redistest.VerifyTestMain(m)
}

// newRueidis returns a rueidis client for addr-like options, closed at the
// end of the test.
func newRueidis(t *testing.T, opt rueidis.ClientOption) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}

// newLocks returns a lock client on rc, closed at the end of the test
// (before rc, since cleanups run last-in first-out).
func newLocks(t *testing.T, rc rueidis.Client, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	c, err := rlock.New(rc, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// direct returns a lock client with its own rueidis connection to srv.
func direct(t *testing.T, srv *redistest.Server, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	rc, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return newLocks(t, rc, opts...)
}

// field is the owner field a client writes for owner.
func field(c *rlock.Client, owner int64) string { return c.ID() + ":" + strconv.FormatInt(owner, 10) }

func do(t *testing.T, srv *redistest.Server, args ...string) rueidis.RedisMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := srv.Do(ctx, args...)
	require.NoError(t, err, "%v", args)
	return msg
}

func doInt(t *testing.T, srv *redistest.Server, args ...string) int64 {
	t.Helper()
	msg := do(t, srv, args...)
	n, err := msg.AsInt64()
	require.NoError(t, err, "%v", args)
	return n
}

// eventually polls cond every 10ms until it is true, failing the test after
// timeout. It is for states that have no event to wait on (server-side
// state seen through polling).
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSubscribers waits until channel has n subscribers on the server.
func waitSubscribers(t *testing.T, srv *redistest.Server, channel string, n int64) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d subscribers on %s", n, channel), func() bool {
		msg := do(t, srv, "PUBSUB", "NUMSUB", channel)
		arr, err := msg.ToArray()
		require.NoError(t, err)
		got, _ := arr[1].AsInt64()
		return got == n
	})
}

// clientInfo is one line of CLIENT LIST.
type clientInfo map[string]string

func clientList(t *testing.T, srv *redistest.Server) []clientInfo {
	t.Helper()
	msg := do(t, srv, "CLIENT", "LIST")
	s, err := msg.ToString()
	require.NoError(t, err)
	var out []clientInfo
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		ci := clientInfo{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				ci[k] = v
			}
		}
		out = append(out, ci)
	}
	return out
}

// subscribedClients returns the ids of the connections with a classic or
// sharded subscription.
func subscribedClients(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	var ids []string
	for _, ci := range clientList(t, srv) {
		if ci["sub"] != "0" || ci["ssub"] != "0" {
			ids = append(ids, ci["id"])
		}
	}
	return ids
}

// collector records rlock lost events.
type collector struct {
	mu   sync.Mutex
	lost []rlock.LostEvent
	got  chan struct{} // one token per event
}

func (c *collector) onLost(ev rlock.LostEvent) {
	c.mu.Lock()
	c.lost = append(c.lost, ev)
	if c.got == nil {
		c.got = make(chan struct{}, 1024)
	}
	got := c.got
	c.mu.Unlock()
	got <- struct{}{}
}

// wait waits for the next event (HoldContext ends before the lost handler
// is called, so an event may come just after).
func (c *collector) wait(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	if c.got == nil {
		c.got = make(chan struct{}, 1024)
	}
	got := c.got
	c.mu.Unlock()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no lost event")
	}
}

func (c *collector) events() []rlock.LostEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]rlock.LostEvent(nil), c.lost...)
}

// result is the outcome of a lock call made in a goroutine.
type result struct {
	err error
	at  time.Time
}

// lockAsync runs l.Lock(ctx) in a goroutine and reports when it returned.
func lockAsync(ctx context.Context, l rlock.Locker) <-chan result {
	ch := make(chan result, 1)
	go func() {
		err := l.Lock(ctx)
		ch <- result{err, time.Now()}
	}()
	return ch
}

func waitResult(t *testing.T, ch <-chan result, timeout time.Duration, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(timeout):
		t.Fatalf("%s did not return within %v", what, timeout)
		return result{}
	}
}

// standaloneLocal returns a redis-server child process for t, even when
// REDIS_ADDR is set: fault tests restart, kill and reconfigure it.
func standaloneLocal(t *testing.T) *redistest.Server {
	t.Helper()
	return redistest.Masters(t, 1)[0]
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine (os/exec's copy
// of a child's stderr) and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}
