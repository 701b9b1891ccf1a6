//go:build unix

package main

import (
	"context"
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
	"github.com/goredisson/locks/rlock"
)

// TestRunSerialisesContenders: three `rlock run` on one name run their
// commands one at a time. The first holds the lock until the test opens a
// gate, after the other two are seen waiting (subscribed to the lock's
// channel), so all three really contend.
func TestRunSerialisesContenders(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	env := redisEnv(srv)
	name := lockName(t, "job")
	dir := t.TempDir()
	log, gate := filepath.Join(dir, "log"), filepath.Join(dir, "gate")
	const script = `echo "start $1 $(date +%s%N)" >> "$2"
if [ -n "$3" ]; then while [ ! -e "$3" ]; do sleep 0.01; done; fi
sleep 0.3
echo "end $1 $(date +%s%N)" >> "$2"`

	a := startRlock(t, env, "run", name, "--", "sh", "-c", script, "sh", "A", log, gate)
	require.Contains(t, waitFile(t, log, 10*time.Second), "start A")
	b := startRlock(t, env, "run", name, "--", "sh", "-c", script, "sh", "B", log, "")
	c := startRlock(t, env, "run", name, "--", "sh", "-c", script, "sh", "C", log, "")
	waitNumsub(t, srv, name, 2)
	// A waiter's status line names the holder (stderr is not a terminal:
	// plain lines).
	b.waitStderr("waiting for lock "+name, 10*time.Second)
	assert.Contains(t, b.stderr.String(), "held by client ")
	require.NoError(t, os.WriteFile(gate, []byte("go"), 0o644))

	for _, p := range []*proc{a, b, c} {
		assert.Equal(t, 0, p.wait(20*time.Second), "stderr: %s", p.stderr)
	}
	data, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 6, "log:\n%s", data)
	var prevEnd int64
	seen := map[string]bool{}
	for i := 0; i < len(lines); i += 2 {
		s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		require.Len(t, s, 3, lines[i])
		require.Len(t, e, 3, lines[i+1])
		// Each start is followed by the same command's end: no interleaving.
		require.Equal(t, "start", s[0], "log:\n%s", data)
		require.Equal(t, "end", e[0], "log:\n%s", data)
		require.Equal(t, s[1], e[1], "commands overlap; log:\n%s", data)
		seen[s[1]] = true
		st, err := strconv.ParseInt(s[2], 10, 64)
		require.NoError(t, err)
		en, err := strconv.ParseInt(e[2], 10, 64)
		require.NoError(t, err)
		assert.LessOrEqual(t, prevEnd, st, "a command started before the previous one ended; log:\n%s", data)
		assert.Less(t, st, en)
		prevEnd = en
	}
	assert.Equal(t, map[string]bool{"A": true, "B": true, "C": true}, seen)
	assert.Equal(t, "A", strings.Fields(lines[0])[1])
	assert.Equal(t, "0", do(t, srv, "EXISTS", name), "the lock is released")
}

// TestRunExitStatus: run exits with its command's status, 128+N for a
// signal, 127/126 when the command cannot run, and always releases the lock.
func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	env := redisEnv(srv)
	notExec := filepath.Join(t.TempDir(), "not-executable")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644))
	for _, tc := range []struct {
		name    string
		command []string
		want    int
	}{
		{"success", []string{"true"}, 0},
		{"exit 7", []string{"sh", "-c", "exit 7"}, 7},
		{"exit 255", []string{"sh", "-c", "exit 255"}, 255},
		{"killed by SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"killed by SIGTERM", []string{"sh", "-c", "kill -TERM $$"}, 128 + 15},
		{"not found on PATH", []string{"rlock-test-no-such-command"}, 127},
		{"no such file", []string{"/nonexistent/rlock-test"}, 127},
		{"not executable", []string{notExec}, 126},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := lockName(t, "x")
			code, _, stderr := runRlock(t, env, append([]string{"run", name, "--"}, tc.command...)...)
			assert.Equal(t, tc.want, code, "stderr: %s", stderr)
			assert.Equal(t, "0", do(t, srv, "EXISTS", name), "the lock is released")
		})
	}
}

// TestRunEnvironment: the command sees RLOCK_NAME and RLOCK_HOLDER, and the
// holder is the hash field of the lock while it runs (owner id = rlock's
// pid).
func TestRunEnvironment(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	name := lockName(t, "env")
	dir := t.TempDir()
	out, gate := filepath.Join(dir, "out"), filepath.Join(dir, "gate")
	p := startRlock(t, redisEnv(srv), "run", name, "--", "sh", "-c",
		`echo "$RLOCK_NAME $RLOCK_HOLDER" > "$1"; while [ ! -e "$2" ]; do sleep 0.01; done`, "sh", out, gate)
	fields := strings.Fields(waitFile(t, out, 10*time.Second))
	require.Len(t, fields, 2)
	assert.Equal(t, name, fields[0])
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}:`+strconv.Itoa(p.cmd.Process.Pid)+`$`, fields[1])
	assert.Equal(t, "1", do(t, srv, "HGET", name, fields[1]), "the field holds count 1 while the command runs")
	ttl, err := strconv.Atoi(do(t, srv, "PTTL", name))
	require.NoError(t, err)
	assert.Greater(t, ttl, 20000, "a watchdog lease of 30s")
	require.NoError(t, os.WriteFile(gate, []byte("go"), 0o644))
	require.Equal(t, 0, p.wait(20*time.Second), "stderr: %s", p.stderr)
	assert.Equal(t, "0", do(t, srv, "EXISTS", name))
}

// TestRunWaitRunsOut: --wait 0 against a held lock makes one attempt and
// exits 75, naming the holder; --wait D gives up after D; neither runs the
// command. The holder is a Go service or a Java one (hand-written hash).
func TestRunWaitRunsOut(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	env := redisEnv(srv)
	svc := libClient(t, srv)
	ctx := context.Background()

	goName := lockName(t, "go")
	require.NoError(t, svc.Lock(goName).Lock(rlock.WithOwner(ctx, 4242)))
	javaName := lockName(t, "java")
	const javaClient = "6f1c2a1e-3b0a-4c55-9d7e-2f1f8b7a0c11"
	do(t, srv, "HSET", javaName, javaClient+":57", "1")
	do(t, srv, "PEXPIRE", javaName, "30000")

	for _, tc := range []struct {
		name, lock, wait, client, owner string
	}{
		{"go holder, wait 0", goName, "0", svc.ID(), "4242"},
		{"java holder, wait 0", javaName, "0", javaClient, "57"},
		{"go holder, wait 300ms", goName, "300ms", svc.ID(), "4242"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := filepath.Join(t.TempDir(), "ran")
			start := time.Now()
			code, _, stderr := runRlock(t, env, "run", "--wait", tc.wait, tc.lock, "--", "touch", ran)
			elapsed := time.Since(start)
			assert.Equal(t, exitNotObtained, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, "not obtained within")
			assert.Contains(t, stderr, "client "+tc.client+" owner "+tc.owner+" (count 1)")
			assert.Regexp(t, `ttl [0-9.]+m?s`, stderr)
			assert.NoFileExists(t, ran)
			if tc.wait == "300ms" {
				assert.GreaterOrEqual(t, elapsed, 300*time.Millisecond)
			}
		})
	}
	held, err := svc.Lock(goName).IsHeld(rlock.WithOwner(ctx, 4242))
	require.NoError(t, err)
	assert.True(t, held, "the holder still holds its lock")
}

// lostScript traps SIGTERM (writing $1 and exiting 0), writes $2 once it
// runs, and then waits for a long sleep.
const lostScript = `trap 'echo TERM > "$1"; exit 0' TERM; echo ready > "$2"; sleep 30 & wait`

// TestRunLockLost: when the lock goes while the command runs, the command
// gets SIGTERM (SIGKILL after --grace) and rlock exits 76; with
// --keep-running it only warns and the command finishes.
func TestRunLockLost(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	env := redisEnv(srv)

	t.Run("key deleted", func(t *testing.T) {
		name := lockName(t, "x")
		dir := t.TempDir()
		term, ready := filepath.Join(dir, "term"), filepath.Join(dir, "ready")
		p := startRlock(t, env, "--watchdog", "600ms", "run", name, "--", "sh", "-c", lostScript, "sh", term, ready)
		waitFile(t, ready, 10*time.Second)
		require.Equal(t, "1", do(t, srv, "DEL", name), "the lock is held while the command runs")
		deleted := time.Now()
		assert.Equal(t, exitLost, p.wait(10*time.Second), "stderr: %s", p.stderr)
		assert.Less(t, time.Since(deleted), 5*time.Second, "the loss is noticed at the next renewal (every 200ms)")
		assert.Equal(t, "TERM\n", waitFile(t, term, time.Second), "the command got SIGTERM")
		assert.Contains(t, p.stderr.String(), "lost")
	})

	t.Run("lease ran out", func(t *testing.T) {
		name := lockName(t, "x")
		dir := t.TempDir()
		term, ready := filepath.Join(dir, "term"), filepath.Join(dir, "ready")
		p := startRlock(t, env, "run", "--lease", "500ms", name, "--", "sh", "-c", lostScript, "sh", term, ready)
		waitFile(t, ready, 10*time.Second)
		assert.Equal(t, exitLost, p.wait(10*time.Second), "stderr: %s", p.stderr)
		assert.GreaterOrEqual(t, time.Since(p.started), 500*time.Millisecond)
		assert.Equal(t, "TERM\n", waitFile(t, term, time.Second), "the command got SIGTERM")
		assert.Contains(t, p.stderr.String(), "lease expired")
	})

	t.Run("SIGKILL after grace", func(t *testing.T) {
		name := lockName(t, "x")
		ready := filepath.Join(t.TempDir(), "ready")
		// The command and its children ignore SIGTERM.
		p := startRlock(t, env, "run", "--lease", "300ms", "--grace", "400ms", name, "--",
			"sh", "-c", `trap '' TERM; echo ready > "$1"; while :; do sleep 0.05; done`, "sh", ready)
		waitFile(t, ready, 10*time.Second)
		p.waitStderr("terminating the command", 10*time.Second)
		terminating := time.Now()
		assert.Equal(t, exitLost, p.wait(10*time.Second), "stderr: %s", p.stderr)
		assert.GreaterOrEqual(t, time.Since(terminating), 350*time.Millisecond, "SIGKILL waits for --grace")
		assert.Contains(t, p.stderr.String(), "SIGKILL")
	})

	t.Run("keep running", func(t *testing.T) {
		name := lockName(t, "x")
		dir := t.TempDir()
		ready, gate := filepath.Join(dir, "ready"), filepath.Join(dir, "gate")
		p := startRlock(t, env, "--watchdog", "600ms", "run", "--keep-running", name, "--",
			"sh", "-c", `echo ready > "$1"; while [ ! -e "$2" ]; do sleep 0.02; done; exit 3`, "sh", ready, gate)
		waitFile(t, ready, 10*time.Second)
		require.Equal(t, "1", do(t, srv, "DEL", name))
		p.waitStderr("--keep-running", 10*time.Second)
		assert.False(t, p.exited(), "the command goes on")
		require.NoError(t, os.WriteFile(gate, []byte("go"), 0o644))
		assert.Equal(t, 3, p.wait(10*time.Second), "stderr: %s", p.stderr)
	})
}

// TestRunForwardsSignals: SIGTERM or SIGINT sent to rlock reaches the
// command's whole process group; rlock exits with the command's status and
// releases the lock. Before the command runs, a signal ends the wait.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	env := redisEnv(srv)
	// The background sleep does not hold rlock's stdout/stderr, so that it
	// cannot delay the end of rlock's output when it outlives the shell.
	const script = `trap 'echo "$4" > "$1"; exit 42' TERM INT; sleep 30 >/dev/null 2>&1 & echo $! > "$2"; echo ready > "$3"; wait`

	for _, tc := range []struct {
		sig  syscall.Signal
		name string
	}{{syscall.SIGTERM, "TERM"}, {syscall.SIGINT, "INT"}} {
		t.Run(tc.name, func(t *testing.T) {
			name := lockName(t, "x")
			dir := t.TempDir()
			got, sleepPid, ready := filepath.Join(dir, "got"), filepath.Join(dir, "sleep.pid"), filepath.Join(dir, "ready")
			p := startRlock(t, env, "run", name, "--", "sh", "-c", script, "sh", got, sleepPid, ready, tc.name)
			waitFile(t, ready, 10*time.Second)
			pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, sleepPid, time.Second)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			p.signal(tc.sig)
			assert.Equal(t, 42, p.wait(10*time.Second), "rlock exits with the command's status; stderr: %s", p.stderr)
			assert.Equal(t, tc.name+"\n", waitFile(t, got, time.Second), "the command got the signal")
			assert.Equal(t, "0", do(t, srv, "EXISTS", name), "the lock is released")
			if tc.sig == syscall.SIGTERM {
				// The background sleep, in the command's process group, got
				// it too (a non-interactive shell makes background jobs
				// ignore SIGINT, so only SIGTERM shows this).
				assert.Eventually(t, func() bool { return !processAlive(pid) }, 5*time.Second, 10*time.Millisecond,
					"the command's child %d was not signalled", pid)
			}
		})
	}

	t.Run("while waiting", func(t *testing.T) {
		name := lockName(t, "x")
		svc := libClient(t, srv)
		require.NoError(t, svc.Lock(name).Lock(rlock.WithOwner(context.Background(), 1)))
		ran := filepath.Join(t.TempDir(), "ran")
		p := startRlock(t, env, "run", name, "--", "touch", ran)
		waitNumsub(t, srv, name, 1)
		p.signal(syscall.SIGTERM)
		assert.Equal(t, 128+15, p.wait(10*time.Second), "stderr: %s", p.stderr)
		assert.Contains(t, p.stderr.String(), "interrupted by SIGTERM while waiting")
		assert.NoFileExists(t, ran)
		waitNumsub(t, srv, name, 0)
	})
}

// processAlive reports whether pid runs (a zombie does not count).
func processAlive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestRunQuiet: --quiet hides the waiting status line.
func TestRunQuiet(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	name := lockName(t, "x")
	svc := libClient(t, srv)
	l := svc.Lock(name)
	ctx := rlock.WithOwner(context.Background(), 1)
	require.NoError(t, l.Lock(ctx))
	p := startRlock(t, redisEnv(srv), "run", "--quiet", name, "--", "true")
	waitNumsub(t, srv, name, 1)
	require.NoError(t, l.Unlock(ctx))
	assert.Equal(t, 0, p.wait(10*time.Second))
	assert.Empty(t, p.stderr.String())
}

// TestRunProcessGroup: without a terminal the command runs in a process
// group of its own (so signals and termination reach its children);
// --foreground keeps it in rlock's group.
func TestRunProcessGroup(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	env := redisEnv(srv)
	// Field 5 of /proc/<pid>/stat is the process group (comm, field 2, has
	// no spaces here).
	const script = `echo "$$ $(cut -d' ' -f5 /proc/$$/stat)" > "$1"`
	for _, tc := range []struct {
		name  string
		flags []string
	}{{"own group", nil}, {"foreground", []string{"--foreground"}}} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append(append([]string{"run"}, tc.flags...), lockName(t, "x"), "--", "sh", "-c", script, "sh", out)
			p := startRlock(t, env, args...)
			require.Equal(t, 0, p.wait(10*time.Second), "stderr: %s", p.stderr)
			f := strings.Fields(waitFile(t, out, time.Second))
			require.Len(t, f, 2)
			if tc.flags == nil {
				assert.Equal(t, f[0], f[1], "the command leads its own process group")
			} else {
				assert.Equal(t, strconv.Itoa(syscall.Getpgrp()), f[1], "the command is in rlock's (here: the test's) process group")
			}
		})
	}
}
