// Package holder runs a Go lock holder as a child process, for tests that
// kill a holder with SIGKILL: the test binary re-executes itself with a
// Spec in the environment, and the child takes one lock with a watchdog
// lease and keeps it (renewing) until it is killed or its stdin closes.
//
// A test package that uses Start calls MaybeRun first thing in TestMain.
package holder

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/rlock"
)

// env carries the JSON Spec to the child.
const env = "GOREDISSON_HOLDER_SPEC"

// Spec says what the child locks.
type Spec struct {
	Addr     string        `json:"addr"`  // standalone Redis host:port
	Lock     string        `json:"lock"`  // lock name
	Owner    int64         `json:"owner"` // WithOwner id
	Watchdog time.Duration `json:"watchdog"`
	// FairWait > 0: instead of locking, the child waits for the fair lock
	// (FairLock.TryLock with this wait) and Start returns once it is
	// queued; Process.TTL is then 0.
	FairWait time.Duration `json:"fairWait"`
}

// MaybeRun runs the holder and exits when this process is a holder child;
// otherwise it returns at once.
func MaybeRun() {
	if spec := os.Getenv(env); spec != "" {
		os.Exit(run(spec))
	}
}

// run is the child: lock, print "locked <field> <pttl ms>", then wait for
// EOF on stdin (the parent closing it or dying). It never unlocks.
func run(specJSON string) int {
	var spec Spec
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
	c, err := rlock.New(rc, rlock.WithWatchdogTimeout(spec.Watchdog))
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder: rlock.New:", err)
		return 1
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(rlock.WithOwner(context.Background(), spec.Owner), 30*time.Second)
	defer cancel()
	if spec.FairWait > 0 {
		return queue(ctx, rc, c, spec)
	}
	l := c.Lock(spec.Lock)
	if err := l.Lock(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "holder: lock:", err)
		return 1
	}
	ttl, err := l.RemainTTL(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder: pttl:", err)
		return 1
	}
	fmt.Printf("locked %s:%d %d\n", c.ID(), spec.Owner, ttl.Milliseconds())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 3
}

// queue is the child of a FairWait spec: it waits for the fair lock,
// prints "queued <field> 0" once its field is in the queue, and then waits
// for EOF on stdin (or the end of its wait).
func queue(ctx context.Context, rc rueidis.Client, c *rlock.Client, spec Spec) int {
	f := fmt.Sprintf("%s:%d", c.ID(), spec.Owner)
	res := make(chan error, 1)
	go func() {
		_, err := c.FairLock(spec.Lock).TryLock(ctx, spec.FairWait, 0)
		res <- err
	}()
	for {
		q, err := rc.Do(ctx, rc.B().Lrange().Key(rlock.FairQueueName(spec.Lock)).Start(0).Stop(-1).Build()).AsStrSlice()
		if err != nil {
			fmt.Fprintln(os.Stderr, "holder: queue:", err)
			return 1
		}
		if slices.Contains(q, f) {
			break
		}
		select {
		case err := <-res:
			fmt.Fprintln(os.Stderr, "holder: the wait ended before it was queued:", err)
			return 1
		case <-time.After(time.Millisecond):
		}
	}
	fmt.Printf("queued %s 0\n", f)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 3
}

// Process is a running holder child.
type Process struct {
	Field string        // the owner field it wrote, "<clientId>:<owner>"
	TTL   time.Duration // the lock's PTTL right after it locked

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr lockedBuffer
	done   chan struct{}
}

// Start runs a holder child and returns once it holds the lock (or, with
// FairWait, once it is queued for it). The child
// dies with the test process (on Linux) and is killed when t ends.
func Start(t testing.TB, spec Spec) *Process {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{done: make(chan struct{})}
	// -test.run=^$: should MaybeRun be missing, the child runs no test.
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), env+"="+string(js))
	p.cmd.Stderr = &p.stderr
	dieWithParent(p.cmd)
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			t.Logf("holder stderr:\n%s", p.stderr.String())
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
		_ = p.cmd.Wait()
		close(p.done)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("the holder exited before locking; stderr:\n%s", p.stderr.String())
		}
		var ttlMs int64
		var verb string
		if _, err := fmt.Sscanf(line, "%s %s %d", &verb, &p.Field, &ttlMs); err != nil || (verb != "locked" && verb != "queued") {
			t.Fatalf("the holder said %q: %v", line, err)
		}
		p.TTL = time.Duration(ttlMs) * time.Millisecond
	case <-time.After(60 * time.Second):
		t.Fatalf("the holder did not lock within 60s; stderr:\n%s", p.stderr.String())
	}
	return p
}

// Kill SIGKILLs the child (it does not unlock; its watchdog stops with it)
// and waits for it to exit. It is idempotent.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	err := p.cmd.Process.Kill()
	_ = p.stdin.Close()
	<-p.done
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	return err
}

// Stderr returns what the child wrote on stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(b)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
