package interop_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
)

// holderEnv carries a holderSpec (JSON) to a re-executed test binary, which
// then acts as a Go service that takes one lock and holds it until it is
// killed (see runHolder).
const holderEnv = "GOREDISSON_INTEROP_HOLDER"

type holderSpec struct {
	Addr     string `json:"addr"`
	Lock     string `json:"lock"`
	Owner    int64  `json:"owner"`
	Watchdog int64  `json:"watchdog_ms"`
}

// runHolder is the child process' main: it locks spec.Lock with a watchdog
// lease, prints "locked <field> <pttl ms>" on stdout and then keeps the
// lock (the watchdog renewing it) until stdin reaches EOF, which happens
// when the parent closes it or dies. The test kills it with SIGKILL first,
// so it never unlocks.
func runHolder(specJSON string) int {
	var spec holderSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "holder: bad spec:", err)
		return 2
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{spec.Addr}, ForceSingleClient: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder: connect:", err)
		return 1
	}
	defer rc.Close()
	c, err := rlock.New(rc, rlock.WithWatchdogTimeout(time.Duration(spec.Watchdog)*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder: rlock.New:", err)
		return 1
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	ctx = rlock.WithOwner(ctx, spec.Owner)
	l := c.Lock(spec.Lock)
	err = l.Lock(ctx)
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "holder: lock:", err)
		return 1
	}
	ttl, err := l.RemainTTL(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder: pttl:", err)
		return 1
	}
	fmt.Printf("locked %s:%d %d\n", c.ID(), spec.Owner, ttl.Milliseconds())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent goes away
	return 3
}

// goHolder is a running holder child process.
type goHolder struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	Field  string        // the owner field it wrote
	TTL    time.Duration // the lock's PTTL right after it locked
	stderr *lockedBuffer
	done   chan struct{}
	err    error // cmd.Wait's result, set before done is closed
}

// startGoHolder runs a holder child that locks name on the Redis at addr
// with a watchdog of watchdog, and returns once it holds the lock. The
// child is killed (if still running) when t ends.
func startGoHolder(t *testing.T, addr, name string, watchdog time.Duration) *goHolder {
	t.Helper()
	spec, err := json.Marshal(holderSpec{Addr: addr, Lock: name, Owner: 1, Watchdog: watchdog.Milliseconds()})
	require.NoError(t, err)
	h := &goHolder{stderr: &lockedBuffer{}, done: make(chan struct{})}
	// -test.run=^$ is belt and braces: TestMain runs the holder before any test.
	h.cmd = exec.Command(os.Args[0], "-test.run=^$")
	h.cmd.Env = append(os.Environ(), holderEnv+"="+string(spec))
	h.cmd.Stderr = h.stderr
	h.stdin, err = h.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := h.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, h.cmd.Start())
	t.Cleanup(func() {
		_ = h.Kill()
		if t.Failed() {
			t.Logf("Go holder stderr:\n%s", h.stderr.String())
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
		h.err = h.cmd.Wait()
		close(h.done)
	}()
	select {
	case line, ok := <-lines:
		require.True(t, ok, "Go holder exited before locking: %s", h.stderr.String())
		var ttlMs int64
		_, err := fmt.Sscanf(line, "locked %s %d", &h.Field, &ttlMs)
		require.NoError(t, err, "Go holder said %q", line)
		h.TTL = time.Duration(ttlMs) * time.Millisecond
	case <-time.After(30 * time.Second):
		t.Fatalf("Go holder did not lock within 30s; stderr: %s", h.stderr.String())
	}
	return h
}

// Kill SIGKILLs the child (it does not unlock, its watchdog stops) and
// waits for it to exit.
func (h *goHolder) Kill() error {
	select {
	case <-h.done:
		return nil
	default:
	}
	err := h.cmd.Process.Kill()
	_ = h.stdin.Close()
	<-h.done
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	return err
}

// lockedBuffer is a strings.Builder safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
