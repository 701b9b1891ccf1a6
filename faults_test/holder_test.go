package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
)

// holderEnv carries a holderSpec (JSON) to the re-executed test binary,
// which then takes one lock with a watchdog lease and keeps it until it is
// killed or its stdin reaches EOF.
const holderEnv = "GOREDISSON_FAULTS_HOLDER"

type holderSpec struct {
	Addr       string `json:"addr"`
	Lock       string `json:"lock"`
	Owner      int64  `json:"owner"`
	WatchdogMs int64  `json:"watchdog_ms"`
}

// runHolder is the holder process: it prints "locked <field>" once it holds
// the lock, then waits for EOF on stdin (the parent closing it or dying).
func runHolder(specJSON string) int {
	var spec holderSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 2
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{spec.Addr}, ForceSingleClient: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	defer rc.Close()
	c, err := rlock.New(rc, rlock.WithWatchdogTimeout(time.Duration(spec.WatchdogMs)*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(rlock.WithOwner(context.Background(), spec.Owner), 30*time.Second)
	defer cancel()
	if err := c.Lock(spec.Lock).Lock(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	fmt.Printf("locked %s\n", field(c, spec.Owner))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// A process holding a watchdog lock dies by SIGKILL. Nothing renews the
// lease any more: the key's TTL only goes down, the key expires when the
// lease that was left runs out (never earlier: a waiter in another client
// gets the lock only then), and the dead holder's field never comes back.
func TestHolderKilled(t *testing.T) {
	const watchdog = 1500 * time.Millisecond
	srv := standaloneLocal(t)
	ctx := context.Background()
	const name = "killed-holder"

	spec, err := json.Marshal(holderSpec{Addr: srv.Addr, Lock: name, Owner: 7, WatchdogMs: watchdog.Milliseconds()})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+string(spec))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	dieWithParent(cmd)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var killOnce sync.Once
	kill := func() {
		killOnce.Do(func() {
			_ = cmd.Process.Kill()
			_ = stdin.Close()
			<-exited
		})
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			t.Logf("holder stderr:\n%s", stderr.String())
		}
	})

	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
	}()
	var holderField string
	select {
	case line := <-lines:
		f, ok := strings.CutPrefix(strings.TrimSpace(line), "locked ")
		require.True(t, ok, "holder said %q; stderr:\n%s", line, stderr.String())
		holderField = f
	case <-time.After(60 * time.Second):
		t.Fatalf("the holder process did not lock within 60s; stderr:\n%s", stderr.String())
	}
	assert.Equal(t, int64(1), doInt(t, srv, "HEXISTS", name, holderField))

	// The holder's watchdog is working: the TTL goes back up.
	prev := doInt(t, srv, "PTTL", name)
	eventually(t, 2*watchdog, "a renewal by the holder process", func() bool {
		cur := doInt(t, srv, "PTTL", name)
		renewed := cur > prev+50
		prev = cur
		return renewed
	})

	wc := direct(t, srv, rlock.WithWatchdogTimeout(watchdog))
	waiter := rlock.WithOwner(ctx, 1)
	wctx, cancel := context.WithTimeout(waiter, 30*time.Second)
	defer cancel()
	got := lockAsync(wctx, wc.Lock(name))
	waitSubscribers(t, srv, "redisson_lock__channel:{"+name+"}", 1)

	mon, err := srv.Client()
	require.NoError(t, err)
	defer mon.Close()
	sample := func() (held bool, pttl int64) {
		res := mon.DoMulti(ctx,
			mon.B().Hexists().Key(name).Field(holderField).Build(),
			mon.B().Pttl().Key(name).Build())
		held, err := res[0].AsBool()
		require.NoError(t, err)
		pttl, err = res[1].AsInt64()
		require.NoError(t, err)
		return held, pttl
	}

	killAt := time.Now()
	kill()
	held, pttl := sample()
	require.True(t, held, "the lock vanished with the process")
	leaseEnd := time.Now().Add(time.Duration(pttl) * time.Millisecond)

	// Until the field disappears, its TTL only decreases: no renewal.
	var goneAt time.Time
	last := pttl
	for goneAt.IsZero() {
		held, pttl := sample()
		if !held {
			goneAt = time.Now()
			break
		}
		require.LessOrEqual(t, pttl, last+5, "the lease of the killed holder was renewed (TTL %dms -> %dms)", last, pttl)
		last = pttl
		require.Less(t, time.Since(killAt), watchdog+5*time.Second, "the killed holder's lock never expired")
		time.Sleep(5 * time.Millisecond)
	}

	r := waitResult(t, got, 10*time.Second, "the waiter")
	require.NoError(t, r.err)
	assert.False(t, r.at.Before(leaseEnd.Add(-50*time.Millisecond)),
		"the waiter got the lock %v before the killed holder's lease ran out", leaseEnd.Sub(r.at))
	assert.False(t, goneAt.Before(leaseEnd.Add(-50*time.Millisecond)), "the key went %v early", leaseEnd.Sub(goneAt))
	assert.LessOrEqual(t, r.at.Sub(killAt), watchdog+time.Second, "the lock freed too late after the kill")

	// The dead holder's field stays gone for another full lease and more.
	for deadline := time.Now().Add(watchdog + watchdog/3); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		held, _ := sample()
		require.False(t, held, "the killed holder's field came back")
	}
	require.NoError(t, wc.Lock(name).Unlock(waiter))
	time.Sleep(watchdog / 3) // a renewal period: nothing may bring the key back
	assert.Zero(t, doInt(t, srv, "EXISTS", name))
	t.Logf("killed with %v of lease left; key gone %v after the kill, waiter in %v after it (%+v vs the lease end)",
		leaseEnd.Sub(killAt).Round(time.Millisecond), goneAt.Sub(killAt).Round(time.Millisecond),
		r.at.Sub(killAt).Round(time.Millisecond), r.at.Sub(leaseEnd).Round(time.Millisecond))
}
