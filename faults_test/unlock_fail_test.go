package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// TestUnlockRefusedStopsRenewal: an Unlock that Redis refuses until its
// ctx ends (BUSY) fails, and, as Redisson's, renewal stops whatever the
// result: the hold's HoldContext ends and the key runs out with its lease
// instead of being renewed for as long as the process lives (a RedLock
// member on a busy or dead master was kept that way).
func TestUnlockRefusedStopsRenewal(t *testing.T) {
	srv := standaloneLocal(t)
	probe := redistest.NewFaulty(must(srv.Client()))
	defer probe.Client.Close()
	busy := redistest.RedisError(context.Background(), probe.Client, "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.")
	e := newMatrixEnv(t, srv, rlock.WithWatchdogTimeout(900*time.Millisecond))
	ctx := rlock.WithOwner(context.Background(), 1)
	name := "unlock-refused"
	l := e.c.Lock(name)
	require.NoError(t, l.Lock(ctx))
	hctx, err := l.HoldContext(ctx)
	require.NoError(t, err)
	e.faulty.Inject(redistest.Rule{Fault: redistest.Refuse, Err: busy, Times: 1000, Match: isScript(scripts.Unlock)})
	uctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = l.Unlock(uctx)
	cancel()
	require.Error(t, err)
	select {
	case <-hctx.Done():
	case <-time.After(time.Second):
		t.Fatal("the hold is still believed held after a failed unlock")
	}
	assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)
	// No renewal: the key runs out with its 900 ms lease.
	eventually(t, 3*time.Second, "the key expires", func() bool { return doInt(t, srv, "EXISTS", name) == 0 })
	e.faulty.Clear()
	eventually(t, 5*time.Second, "no record left", func() bool { return e.c.Stats().Holds == 0 })
}
