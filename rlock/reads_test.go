package rlock_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
)

// The reads (IsLocked, HoldCount, RemainTTL, Inspect, Token) are bounded
// by the command timeout per attempt and retried within the budget, like
// the scripts: with a caller's context that never ends they neither hang
// on a server that does not answer nor give up on one that answers late.
func TestReadsAreBounded(t *testing.T) {
	e := newEnv(t)
	const timeout = 300 * time.Millisecond // budget: 4 attempts, 1.2 s
	c := e.client(rlock.WithCommandTimeout(timeout))
	ctx := context.Background()
	l := c.Lock("bounded-reads")
	require.NoError(t, l.LockLease(ctx, time.Minute))
	pid := e.srv.Pid()
	stall := func(d time.Duration) {
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		time.AfterFunc(d, func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	}
	reads := map[string]func() error{
		"IsLocked":    func() error { _, err := l.IsLocked(ctx); return err },
		"HoldCount":   func() error { _, err := l.HoldCount(ctx); return err },
		"RemainTTL":   func() error { _, err := l.RemainTTL(ctx); return err },
		"Inspect":     func() error { _, err := l.Inspect(ctx); return err },
		"Token":       func() error { _, err := c.FencedLock("bounded-reads").Token(ctx); return err },
		"RW IsLocked": func() error { _, err := c.ReadWriteLock("bounded-rw").WriteLock().IsLocked(ctx); return err },
	}
	for name, read := range reads {
		t.Run(name+" outlasts a short stall", func(t *testing.T) {
			stall(2 * timeout) // longer than one attempt, shorter than the budget
			start := time.Now()
			require.NoError(t, read())
			assert.GreaterOrEqual(t, time.Since(start), timeout, "the read did not wait for the stalled server")
		})
		t.Run(name+" ends after the budget", func(t *testing.T) {
			stall(2 * time.Second)
			start := time.Now()
			err := read()
			took := time.Since(start)
			require.ErrorIs(t, err, rlock.ErrTimeout)
			assert.Less(t, took, 1900*time.Millisecond, "the read outlived its budget")
			// Let the server answer again before the next read.
			require.Eventually(t, func() bool { _, err := l.IsLocked(ctx); return err == nil }, 10*time.Second, 50*time.Millisecond)
		})
	}
}
