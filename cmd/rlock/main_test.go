//go:build unix

package main

// End-to-end tests: TestMain builds the rlock binary once (with -race when
// the tests run with -race), and the tests run it as real processes against
// real redis-server processes started by redistest.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

const testVersion = "v0.0.0-rlocktest"

// rlockBin is the binary under test.
var rlockBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlock-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rlockBin = filepath.Join(dir, "rlock")
	args := []string{"build", "-o", rlockBin, "-ldflags", "-X main.version=" + testVersion}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building rlock: %v\n", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	redistest.VerifyTestMainThen(m, func() { _ = os.RemoveAll(dir) })
}

// outBuf collects a process's output and lets a test wait for text in it.
type outBuf struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newOutBuf() *outBuf { return &outBuf{changed: make(chan struct{})} }

func (o *outBuf) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

func (o *outBuf) snapshot() (string, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String(), o.changed
}

func (o *outBuf) String() string {
	s, _ := o.snapshot()
	return s
}

// proc is one running rlock process.
type proc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr *outBuf
	done           chan struct{}
	started        time.Time
}

// startRlock starts the binary with args and extra environment entries. The
// process is killed at the end of the test if it is still running.
func startRlock(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, stdout: newOutBuf(), stderr: newOutBuf(), done: make(chan struct{})}
	p.cmd = exec.Command(rlockBin, args...)
	// A race-enabled binary sleeps 1s when it exits with 0 unless told not
	// to; races still fail the test (wait looks for the report).
	p.cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.WaitDelay = 5 * time.Second // a leftover grandchild must not keep Wait on the pipes
	p.started = time.Now()
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// runRlock runs the binary to completion (at most 20s) and returns its exit
// code, stdout and stderr.
func runRlock(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	p := startRlock(t, env, args...)
	code := p.wait(20 * time.Second)
	return code, p.stdout.String(), p.stderr.String()
}

// wait waits for the process to exit and returns its exit code (-1 if a
// signal killed it). It fails the test on timeout, and if the (race-enabled)
// binary reported a data race or panicked.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("rlock %q still running after %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], timeout, p.stdout, p.stderr)
	}
	stderr := p.stderr.String()
	assert.NotContains(p.t, stderr, "DATA RACE", "rlock %q", p.cmd.Args[1:])
	assert.NotContains(p.t, stderr, "panic:", "rlock %q", p.cmd.Args[1:])
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitOutput waits until cond holds for the process's stdout or stderr.
func (p *proc) waitOutput(o *outBuf, what string, timeout time.Duration, cond func(string) bool) {
	p.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s, changed := o.snapshot()
		if cond(s) {
			return
		}
		select {
		case <-changed:
		case <-p.done:
			if s := o.String(); cond(s) {
				return
			}
			p.t.Fatalf("rlock %q exited (code %d) before %s\nstdout:\n%s\nstderr:\n%s",
				p.cmd.Args[1:], p.cmd.ProcessState.ExitCode(), what, p.stdout, p.stderr)
		case <-deadline.C:
			p.t.Fatalf("rlock %q: no %s within %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], what, timeout, p.stdout, p.stderr)
		}
	}
}

func (p *proc) waitStdout(substr string, timeout time.Duration) {
	p.t.Helper()
	p.waitOutput(p.stdout, fmt.Sprintf("%q on stdout", substr), timeout, func(s string) bool { return strings.Contains(s, substr) })
}

func (p *proc) waitStderr(substr string, timeout time.Duration) {
	p.t.Helper()
	p.waitOutput(p.stderr, fmt.Sprintf("%q on stderr", substr), timeout, func(s string) bool { return strings.Contains(s, substr) })
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig))
}

// redisEnv is the environment that points rlock at srv.
func redisEnv(srv *redistest.Server) []string {
	return []string{"REDIS_URL=redis://" + srv.Addr}
}

// lockName is a lock name unique to the test.
func lockName(t *testing.T, suffix string) string {
	return "rlock-test:" + strings.ReplaceAll(t.Name(), "/", ":") + ":" + suffix
}

// libClient returns a lock client (a "service" in this test process) on srv.
func libClient(t *testing.T, srv *redistest.Server, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	rc, err := srv.Client()
	require.NoError(t, err)
	c, err := rlock.New(rc, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, c.Close())
		rc.Close()
	})
	return c
}

func do(t *testing.T, srv *redistest.Server, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := srv.Do(ctx, args...)
	require.NoError(t, err, "%q", args)
	if n, err := msg.AsInt64(); err == nil {
		return strconv.FormatInt(n, 10)
	}
	s, _ := msg.ToString()
	return s
}

// numsub returns the number of subscribers of channel.
func numsub(t *testing.T, srv *redistest.Server, channel string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := srv.Do(ctx, "PUBSUB", "NUMSUB", channel)
	require.NoError(t, err)
	arr, err := msg.ToArray()
	require.NoError(t, err)
	require.Len(t, arr, 2)
	n, err := arr[1].AsInt64()
	require.NoError(t, err)
	return n
}

// waitNumsub waits until n connections are subscribed to the lock's
// channel: that many client processes are waiting for it.
func waitNumsub(t *testing.T, srv *redistest.Server, name string, n int64) {
	t.Helper()
	ch := rlock.ChannelName(name)
	require.Eventually(t, func() bool { return numsub(t, srv, ch) == n },
		10*time.Second, 10*time.Millisecond, "waiting for %d subscriber(s) on %s", n, ch)
}

// waitFile waits until path exists and returns its content.
func waitFile(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	var data []byte
	require.Eventually(t, func() bool {
		var err error
		data, err = os.ReadFile(path)
		return err == nil && len(data) > 0
	}, timeout, 10*time.Millisecond, "waiting for %s", path)
	return string(data)
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}
