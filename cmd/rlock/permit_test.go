//go:build unix

package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// TestPermitLossReportedBeforeExpiry: when every renewal of a --semaphore
// permit fails, the hold is reported lost before another process can take
// the permit (it was reported only once time.Since(lastRenewal) >= lease,
// at or after the moment another process could take it: two holders).
func TestPermitLossReportedBeforeExpiry(t *testing.T) {
	srv := redistest.Standalone(t)
	rc, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	f := redistest.NewFaulty(rc)
	c1, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c1.Close() })
	rc2, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc2.Close)
	c2, err := rlock.New(rc2)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	ctx := context.Background()
	const lease = 900 * time.Millisecond
	s1 := c1.PermitExpirableSemaphore("psem")
	ok, err := s1.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	p := &permitHold{s: s1, name: "psem", watchdog: lease}
	ok, err = p.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	hold, err := p.HoldContext(ctx)
	require.NoError(t, err)
	// From now on every renewal is dropped (Redis unreachable for rlock).
	f.Inject(redistest.Rule{Match: func(a []string) bool { return slices.Contains(a, "update") }, Fault: redistest.Drop, Times: 1 << 30})
	start := time.Now()
	lostC := make(chan time.Duration, 1)
	context.AfterFunc(hold, func() { lostC <- time.Since(start) })
	s2 := c2.PermitExpirableSemaphore("psem")
	var second time.Duration
	for second == 0 {
		if _, ok, err := s2.TryAcquire(ctx, 0, time.Minute); err == nil && ok {
			second = time.Since(start)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	lostAt := <-lostC
	t.Logf("second owner acquired the permit at %v; first holder's HoldContext ended at %v: %v",
		second.Round(time.Millisecond), lostAt.Round(time.Millisecond), context.Cause(hold))
	if lostAt > second {
		t.Errorf("two holders for %v", (lostAt - second).Round(time.Millisecond))
	} else if second-lostAt < lease/10 {
		t.Errorf("reported lost only %v before the permit could be taken", (second - lostAt).Round(time.Millisecond))
	}
	_ = p.Unlock(ctx)
}
