package faults_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// syncCase is one synchronizer call of the matrix: set-up through the clean
// client, the faulted call through the faulty one, and the exact state it
// must leave.
type syncCase struct {
	name   string
	script *scripts.Script
	run    func(t *testing.T, e *matrixEnv, name string) // nil: a waiter's attempt (see TestSyncFaultMatrix)
	psem   bool                                          // that waiter's semaphore is permit-expirable
}

var syncCases = []syncCase{
	{"semaphore/tryAcquire", scripts.SemAcquire, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.other.Semaphore(name).AddPermits(ctx, 1))
		ok, err := e.c.Semaphore(name).TryAcquire(ctx, 1, 0)
		require.NoError(t, err, "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.True(t, ok)
		assert.Equal(t, 0, availSem(t, e, name), "one acquisition, one permit taken")
		require.NoError(t, e.c.Semaphore(name).Release(ctx, 1))
		assert.Equal(t, 1, availSem(t, e, name))
	}, false},
	{"semaphore/acquire in the wait loop", scripts.SemAcquire, nil, false},
	{"permit semaphore/acquire in the wait loop", scripts.PsemAcquire, nil, true},
	{"permit semaphore/trySetPermits", scripts.PsemUpdate, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		ok, err := e.c.PermitExpirableSemaphore(name).TrySetPermits(ctx, 4)
		require.NoError(t, err, "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.True(t, ok, "the one call that set it reports it, even after a lost reply")
		assert.Equal(t, 4, availPsem(t, e, name))
	}, false},
	{"permit semaphore/acquireN", scripts.PsemAcquire, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.other.PermitExpirableSemaphore(name).AddPermits(ctx, 3))
		ids, err := e.c.PermitExpirableSemaphore(name).AcquireN(ctx, 3, time.Minute)
		require.NoError(t, err, "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.Len(t, ids, 3)
		assert.Equal(t, int64(3), doInt(t, e.srv, "ZCARD", rlock.PermitTimeoutName(name)), "one acquisition of 3, three permits held")
		assert.Equal(t, 0, availPsem(t, e, name))
		require.NoError(t, e.other.PermitExpirableSemaphore(name).ReleaseN(ctx, ids), "the ids returned are the ones held")
		assert.Equal(t, 3, availPsem(t, e, name))
	}, false},
	{"semaphore/release", scripts.SemUpdate, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.other.Semaphore(name).AddPermits(ctx, 2))
		require.NoError(t, e.other.Semaphore(name).Acquire(ctx, 2))
		require.NoError(t, e.c.Semaphore(name).Release(ctx, 2), "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.Equal(t, 2, availSem(t, e, name), "one release of 2, two permits back")
	}, false},
	{"semaphore/addPermits", scripts.SemUpdate, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.c.Semaphore(name).AddPermits(ctx, 3), "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.Equal(t, 3, availSem(t, e, name))
	}, false},
	{"semaphore/drain", scripts.SemUpdate, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.other.Semaphore(name).AddPermits(ctx, 4))
		n, err := e.c.Semaphore(name).DrainPermits(ctx)
		require.NoError(t, err, "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.Equal(t, 4, n, "the drained count, even after a lost reply")
		assert.Equal(t, 0, availSem(t, e, name))
	}, false},
	{"permit semaphore/acquire", scripts.PsemAcquire, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.other.PermitExpirableSemaphore(name).AddPermits(ctx, 1))
		id, err := e.c.PermitExpirableSemaphore(name).Acquire(ctx, time.Minute)
		require.NoError(t, err, "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.Equal(t, int64(1), doInt(t, e.srv, "ZCARD", rlock.PermitTimeoutName(name)), "one permit held")
		assert.Equal(t, 0, availPsem(t, e, name))
		require.NoError(t, e.other.PermitExpirableSemaphore(name).Release(ctx, id), "the id returned is the one held")
		assert.Equal(t, 1, availPsem(t, e, name))
	}, false},
	{"permit semaphore/release", scripts.PsemRelease, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.other.PermitExpirableSemaphore(name).AddPermits(ctx, 1))
		id, err := e.other.PermitExpirableSemaphore(name).Acquire(ctx, 0)
		require.NoError(t, err)
		require.NoError(t, e.c.PermitExpirableSemaphore(name).Release(ctx, id), "the fault must be absorbed: a lost reply is not ErrNoPermit")
		e.faulty.WaitLate()
		assert.Equal(t, 1, availPsem(t, e, name), "one release, one permit back")
		assert.Equal(t, int64(0), doInt(t, e.srv, "ZCARD", rlock.PermitTimeoutName(name)))
	}, false},
	{"semaphore/trySetPermits", scripts.SemUpdate, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		ok, err := e.c.Semaphore(name).TrySetPermits(ctx, 5)
		require.NoError(t, err, "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.True(t, ok, "the one call that set it reports it, even after a lost reply")
		assert.Equal(t, 5, availSem(t, e, name))
	}, false},
	{"permit semaphore/setPermits", scripts.PsemUpdate, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.other.PermitExpirableSemaphore(name).AddPermits(ctx, 2))
		require.NoError(t, e.c.PermitExpirableSemaphore(name).SetPermits(ctx, 7), "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.Equal(t, 7, availPsem(t, e, name))
	}, false},
	{"permit semaphore/releaseN", scripts.PsemRelease, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.other.PermitExpirableSemaphore(name).AddPermits(ctx, 3))
		ids, err := e.other.PermitExpirableSemaphore(name).AcquireN(ctx, 3, time.Minute)
		require.NoError(t, err)
		require.NoError(t, e.c.PermitExpirableSemaphore(name).ReleaseN(ctx, ids), "the fault must be absorbed: a lost reply is not ErrNoPermit")
		e.faulty.WaitLate()
		assert.Equal(t, 3, availPsem(t, e, name), "one release of 3, three permits back")
	}, false},
	{"latch/delete", scripts.LatchUpdate, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		ok, err := e.other.CountDownLatch(name).TrySetCount(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = e.c.CountDownLatch(name).Delete(ctx)
		require.NoError(t, err, "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.True(t, ok, "the one call that deleted it reports it, even after a lost reply")
		assert.Equal(t, int64(0), doInt(t, e.srv, "EXISTS", name))
	}, false},
	{"permit semaphore/addPermits", scripts.PsemUpdate, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.c.PermitExpirableSemaphore(name).AddPermits(ctx, 2), "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.Equal(t, 2, availPsem(t, e, name))
	}, false},
	{"permit semaphore/updateLeaseTime", scripts.PsemQuery, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		require.NoError(t, e.other.PermitExpirableSemaphore(name).AddPermits(ctx, 1))
		id, err := e.other.PermitExpirableSemaphore(name).Acquire(ctx, time.Second)
		require.NoError(t, err)
		ok, err := e.c.PermitExpirableSemaphore(name).UpdateLeaseTime(ctx, id, time.Hour)
		require.NoError(t, err, "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.True(t, ok)
		lt, err := e.other.PermitExpirableSemaphore(name).LeaseTime(ctx, id)
		require.NoError(t, err)
		assert.Greater(t, lt, 50*time.Minute)
		require.NoError(t, e.other.PermitExpirableSemaphore(name).Release(ctx, id))
	}, false},
	{"latch/countDown", scripts.LatchUpdate, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		ok, err := e.other.CountDownLatch(name).TrySetCount(ctx, 3)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, e.c.CountDownLatch(name).CountDown(ctx), "the fault must be absorbed")
		e.faulty.WaitLate()
		n, err := e.other.CountDownLatch(name).Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(2), n, "one countDown, one decrement")
	}, false},
	{"latch/trySetCount", scripts.LatchUpdate, func(t *testing.T, e *matrixEnv, name string) {
		ctx := context.Background()
		ok, err := e.c.CountDownLatch(name).TrySetCount(ctx, 5)
		require.NoError(t, err, "the fault must be absorbed")
		e.faulty.WaitLate()
		assert.True(t, ok, "the one call that set it reports it, even after a lost reply")
		n, err := e.other.CountDownLatch(name).Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(5), n)
	}, false},
}

func availSem(t *testing.T, e *matrixEnv, name string) int {
	t.Helper()
	n, err := e.other.Semaphore(name).AvailablePermits(context.Background())
	require.NoError(t, err)
	return n
}

func availPsem(t *testing.T, e *matrixEnv, name string) int {
	t.Helper()
	n, err := e.other.PermitExpirableSemaphore(name).AvailablePermits(context.Background())
	require.NoError(t, err)
	return n
}

// TestSyncFaultMatrix injects each fault of the matrix (request dropped,
// reply lost, request late, connection killed mid-call, and the
// refusals) into each write of the semaphore, the permit-expirable
// semaphore and the count-down latch, and checks that the call's effect
// happened exactly once and that the caller was told exactly that: no
// permit taken or given back twice, none lost, a count decremented once.
func TestSyncFaultMatrix(t *testing.T) {
	srv := standaloneLocal(t)
	probe := redistest.NewFaulty(must(srv.Client()))
	defer probe.Client.Close()
	rules := matrixFaults(t, probe, srv)
	ctx := context.Background()
	for _, sc := range syncCases {
		for _, rule := range rules {
			t.Run(sc.name+"/"+ruleName(rule), func(t *testing.T) {
				e := newMatrixEnv(t, srv)
				name := fmt.Sprintf("sm-%s-%s", sc.name, ruleName(rule))
				r := rule
				r.Match = isScript(sc.script)
				if sc.run == nil {
					// A waiter on an empty semaphore; the release wakes it
					// and its attempt is faulted.
					attempts := e.faulty.Count(isScript(sc.script))
					got := make(chan error, 1)
					go func() {
						if sc.psem {
							_, err := e.c.PermitExpirableSemaphore(name).Acquire(ctx, time.Minute)
							got <- err
							return
						}
						got <- e.c.Semaphore(name).Acquire(ctx, 1)
					}()
					eventually(t, 5*time.Second, "the waiter", func() bool { return e.c.Stats().Waiters == 1 && attempts() >= 2 })
					e.faulty.Inject(r)
					if sc.psem {
						require.NoError(t, e.other.PermitExpirableSemaphore(name).AddPermits(ctx, 1))
					} else {
						require.NoError(t, e.other.Semaphore(name).Release(ctx, 1))
					}
					select {
					case err := <-got:
						require.NoError(t, err)
					case <-time.After(20 * time.Second):
						t.Fatal("the waiter never got the permit")
					}
					e.faulty.WaitLate()
					if sc.psem {
						assert.Equal(t, 0, availPsem(t, e, name), "one acquisition, one permit taken")
						assert.Equal(t, int64(1), doInt(t, e.srv, "ZCARD", rlock.PermitTimeoutName(name)), "one permit held")
					} else {
						assert.Equal(t, 0, availSem(t, e, name), "one acquisition, one permit taken")
					}
				} else {
					e.faulty.Inject(r)
					sc.run(t, e, name)
				}
				assert.Zero(t, e.faulty.Pending(), "the fault was never hit")
				assert.LessOrEqual(t, doInt(t, e.srv, "HLEN", "goredisson_ops:{"+name+"}:"+e.c.ID()), int64(1), "the slot of a resolved call was not given again")
			})
		}
	}
}

// TestSyncAbandonedAcquire: an acquisition whose reply is lost while its
// caller's ctx ends is settled in the background; a permit it took is
// given back, so none is lost.
func TestSyncAbandonedAcquire(t *testing.T) {
	srv := standaloneLocal(t)
	for _, kind := range []string{"semaphore", "permit semaphore"} {
		t.Run(kind, func(t *testing.T) {
			e := newMatrixEnv(t, srv)
			name := "abandoned-" + kind
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			script := scripts.SemAcquire
			if kind != "semaphore" {
				script = scripts.PsemAcquire
			}
			var err error
			avail := func() int {
				if kind == "semaphore" {
					return availSem(t, e, name)
				}
				return availPsem(t, e, name)
			}
			// The reply is lost after the script ran, and the caller
			// leaves at that moment.
			e.faulty.Inject(redistest.Rule{Match: isScript(script), Fault: redistest.LoseReply, After: cancel})
			if kind == "semaphore" {
				require.NoError(t, e.other.Semaphore(name).AddPermits(context.Background(), 1))
				err = e.c.Semaphore(name).Acquire(ctx, 1)
			} else {
				require.NoError(t, e.other.PermitExpirableSemaphore(name).AddPermits(context.Background(), 1))
				_, err = e.c.PermitExpirableSemaphore(name).Acquire(ctx, 0)
			}
			require.ErrorIs(t, err, context.Canceled)
			eventually(t, 10*time.Second, "the abandoned permit given back", func() bool { return avail() == 1 })
			if kind != "semaphore" {
				assert.Equal(t, int64(0), doInt(t, e.srv, "ZCARD", rlock.PermitTimeoutName(name)))
			}
		})
	}
}

// TestSyncRecordsPerObject: a call on one object whose outcome stays
// unknown for a while keeps its own record, and no one else's: calls on
// another object resolved since leave no records behind; once it is
// settled, the abandoned permit comes back.
func TestSyncRecordsPerObject(t *testing.T) {
	srv := standaloneLocal(t)
	e := newMatrixEnv(t, srv)
	ctx := context.Background()
	require.NoError(t, e.other.Semaphore("rec-a").AddPermits(ctx, 1))
	require.NoError(t, e.other.Semaphore("rec-b").AddPermits(ctx, 1))
	// Load the script: a lost reply to a NOSCRIPT would be a call that
	// did not run.
	do(t, srv, "SCRIPT", "LOAD", scripts.SemAcquire.Text())
	e.faulty.Inject(redistest.Rule{Match: isScript(scripts.SemAcquire), Fault: redistest.LoseReply})
	e.faulty.Inject(redistest.Rule{Match: isScript(scripts.SyncFence), Fault: redistest.Drop, Times: 1 << 30})
	_, err := e.c.Semaphore("rec-a").TryAcquire(ctx, 1, 0)
	require.ErrorIs(t, err, rlock.ErrUnresolved, "the settling cannot reach Redis")
	b := e.c.Semaphore("rec-b")
	for range 100 {
		ok, err := b.TryAcquire(ctx, 1, 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, b.Release(ctx, 1))
	}
	assert.LessOrEqual(t, doInt(t, srv, "HLEN", "goredisson_ops:{rec-b}:"+e.c.ID()), int64(1), "rec-a's unknown call took a slot of rec-b")
	assert.Equal(t, int64(1), doInt(t, srv, "HLEN", "goredisson_ops:{rec-a}:"+e.c.ID()), "the unknown call's record is kept")
	e.faulty.Clear()
	assert.Equal(t, 0, availSem(t, e, "rec-a"), "the unknown call took the permit")
	eventually(t, 20*time.Second, "the abandoned permit given back", func() bool { return availSem(t, e, "rec-a") == 1 })
}

// TestSyncUnresolvedReleaseRedone: a Release that never reached Redis and
// whose settling cannot reach Redis within the budget returns
// ErrUnresolved; once Redis answers, the background finds it did not run
// and sends it again: the permit comes back exactly once.
func TestSyncUnresolvedReleaseRedone(t *testing.T) {
	srv := standaloneLocal(t)
	e := newMatrixEnv(t, srv)
	ctx := context.Background()
	name := "redo-release"
	do(t, srv, "SCRIPT", "LOAD", scripts.SemUpdate.Text())
	require.NoError(t, e.other.Semaphore(name).AddPermits(ctx, 1))
	require.NoError(t, e.c.Semaphore(name).Acquire(ctx, 1))
	e.faulty.Inject(redistest.Rule{Match: isScript(scripts.SemUpdate), Fault: redistest.Drop})
	e.faulty.Inject(redistest.Rule{Match: isScript(scripts.SyncFence), Fault: redistest.Drop, Times: 1 << 30})
	require.ErrorIs(t, e.c.Semaphore(name).Release(ctx, 1), rlock.ErrUnresolved)
	assert.Equal(t, 0, availSem(t, e, name))
	e.faulty.Clear()
	eventually(t, 20*time.Second, "the owed release sent again", func() bool { return availSem(t, e, name) == 1 })
	// Exactly once: the release sent again ran in slot 1, since the
	// dropped call kept slot 0 while it was being settled; slot 0 still
	// holds the Acquire's record (the dropped call never ran).
	rec := "goredisson_ops:{" + name + "}:" + e.c.ID()
	eventually(t, 20*time.Second, "the release sent again recorded", func() bool { return doInt(t, srv, "HEXISTS", rec, "1") == 1 })
	v, err := srv.Do(ctx, "HGET", rec, "1")
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(must(v.ToString()), ":1"), "the release sent again recorded 1 permit: %v", v)
	v, err = srv.Do(ctx, "HGET", rec, "0")
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(must(v.ToString()), ":1"), "slot 0 holds the Acquire's record: %v", v)
	assert.Equal(t, int64(2), doInt(t, srv, "HLEN", rec))
	assert.Equal(t, 1, availSem(t, e, name))
}
