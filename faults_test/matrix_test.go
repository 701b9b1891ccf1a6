package faults_test

import (
	"context"
	"errors"
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

// isScript matches a call of s, as EVALSHA or EVAL.
func isScript(s *scripts.Script) func([]string) bool {
	return func(args []string) bool {
		if len(args) < 2 {
			return false
		}
		switch strings.ToUpper(args[0]) {
		case "EVALSHA":
			return args[1] == s.SHA1()
		case "EVAL":
			return args[1] == s.Text()
		}
		return false
	}
}

// matrixFaults are the faults of the matrix, with the Redis errors that
// refuse a call before it runs.
func matrixFaults(t *testing.T, f *redistest.Faulty) []redistest.Rule {
	ctx := context.Background()
	var rules []redistest.Rule
	rules = append(rules,
		redistest.Rule{Fault: redistest.Drop},
		redistest.Rule{Fault: redistest.LoseReply},
		redistest.Rule{Fault: redistest.Late, Delay: 300 * time.Millisecond},
	)
	for _, msg := range []string{
		"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
		"TRYAGAIN Multiple keys request during rehashing of slot",
		"LOADING Redis is loading the dataset in memory",
		"CLUSTERDOWN The cluster is down",
		"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
	} {
		err := redistest.RedisError(ctx, f.Client, msg)
		require.Error(t, err)
		rules = append(rules, redistest.Rule{Fault: redistest.Refuse, Err: err, Times: 2})
	}
	return rules
}

func ruleName(r redistest.Rule) string {
	if r.Fault == redistest.Refuse {
		return strings.Fields(r.Err.Error())[0]
	}
	return strings.ReplaceAll(r.Fault.String(), " ", "_")
}

// matrixEnv is one case of the matrix: a client whose calls go through a
// Faulty rueidis client, a clean client of another process, and the
// server.
type matrixEnv struct {
	srv    *redistest.Server
	faulty *redistest.Faulty
	c      *rlock.Client // through faulty
	other  *rlock.Client // another service, no faults
}

func newMatrixEnv(t *testing.T, srv *redistest.Server, opts ...rlock.Option) *matrixEnv {
	rc, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	f := redistest.NewFaulty(rc)
	opts = append([]rlock.Option{rlock.WithCommandTimeout(500 * time.Millisecond)}, opts...)
	return &matrixEnv{srv: srv, faulty: f, c: newLocks(t, f, opts...), other: direct(t, srv)}
}

// count is the owner's count in Redis.
func (e *matrixEnv) count(t *testing.T, name string, owner int64) int64 {
	msg, err := e.srv.Do(context.Background(), "HGET", name, field(e.c, owner))
	if err != nil {
		return 0
	}
	n, _ := msg.AsInt64()
	return n
}

// settled waits for late calls and checks what every case must leave: no
// rule hit pending, no late call that ran twice, the key gone once the
// owner unlocked, no record in the hold table.
func (e *matrixEnv) settled(t *testing.T, name string) {
	t.Helper()
	e.faulty.WaitLate()
	assert.Zero(t, e.faulty.Pending(), "the fault was never hit")
	assert.Equal(t, int64(0), doInt(t, e.srv, "EXISTS", name), "a hold was left behind")
	eventually(t, 5*time.Second, "no record left in the hold table", func() bool { return e.c.Stats().Holds == 0 })
	assert.Zero(t, e.c.Stats().Renewing)
	// Another service can take and release the lock.
	ok, err := e.other.Lock(name).TryLock(context.Background(), 0, 0)
	require.NoError(t, err)
	require.True(t, ok, "another owner is kept out")
	require.NoError(t, e.other.Lock(name).Unlock(context.Background()))
}

// TestFaultMatrix injects each fault into each kind of script call and
// checks the invariants: the count in Redis is what the caller was told,
// no second owner gets in while the first holds, no hold is orphaned, no
// renewal follows an unlock, and nothing is left behind.
func TestFaultMatrix(t *testing.T) {
	srv := standaloneLocal(t)
	probe := redistest.NewFaulty(must(srv.Client()))
	defer probe.Client.Close()
	rules := matrixFaults(t, probe)
	ctx := context.Background()
	me := rlock.WithOwner(ctx, 1)

	for _, rule := range rules {
		t.Run("first acquire/"+ruleName(rule), func(t *testing.T) {
			e := newMatrixEnv(t, srv)
			name := "m-first-" + ruleName(rule)
			r := rule
			r.Match = isScript(scripts.Acquire)
			e.faulty.Inject(r)
			require.NoError(t, e.c.Lock(name).Lock(me), "the fault must be absorbed")
			e.faulty.WaitLate()
			assert.Equal(t, int64(1), e.count(t, name, 1), "one Lock, count 1")
			ok, err := e.other.Lock(name).TryLock(ctx, 0, 0)
			require.NoError(t, err)
			assert.False(t, ok, "a second owner got in")
			require.NoError(t, e.c.Lock(name).Unlock(me))
			e.settled(t, name)
		})

		t.Run("acquire in the wait loop/"+ruleName(rule), func(t *testing.T) {
			e := newMatrixEnv(t, srv)
			name := "m-wait-" + ruleName(rule)
			require.NoError(t, e.other.Lock(name).Lock(ctx))
			attempts := e.faulty.Count(isScript(scripts.Acquire))
			got := lockAsync(me, e.c.Lock(name))
			// Its first attempt, the subscription, and its second attempt
			// (after subscribing) are done: it waits for a message.
			eventually(t, 5*time.Second, "the waiter", func() bool { return e.c.Stats().Waiters == 1 && attempts() >= 2 })
			r := rule
			r.Match = isScript(scripts.Acquire)
			e.faulty.Inject(r)
			require.NoError(t, e.other.Lock(name).Unlock(ctx))
			res := waitResult(t, got, 20*time.Second, "the waiter")
			require.NoError(t, res.err)
			e.faulty.WaitLate()
			assert.Equal(t, int64(1), e.count(t, name, 1), "one Lock, count 1")
			require.NoError(t, e.c.Lock(name).Unlock(me))
			e.settled(t, name)
		})

		for _, full := range []bool{false, true} {
			kind := "partial unlock"
			if full {
				kind = "full unlock"
			}
			t.Run(kind+"/"+ruleName(rule), func(t *testing.T) {
				e := newMatrixEnv(t, srv)
				name := fmt.Sprintf("m-unlock-%v-%s", full, ruleName(rule))
				l := e.c.Lock(name)
				require.NoError(t, l.Lock(me))
				if !full {
					require.NoError(t, l.Lock(me))
				}
				r := rule
				r.Match = isScript(scripts.Unlock)
				e.faulty.Inject(r)
				require.NoError(t, l.Unlock(me), "the fault must be absorbed")
				e.faulty.WaitLate()
				if full {
					assert.Equal(t, int64(0), e.count(t, name, 1))
				} else {
					assert.Equal(t, int64(1), e.count(t, name, 1), "one Unlock of two levels leaves one")
					ok, err := e.other.Lock(name).TryLock(ctx, 0, 0)
					require.NoError(t, err)
					assert.False(t, ok, "a second owner got in")
					require.NoError(t, l.Unlock(me))
				}
				assert.ErrorIs(t, l.Unlock(me), rlock.ErrNotHeld, "nothing more to unlock")
				e.settled(t, name)
			})
		}

		t.Run("force unlock/"+ruleName(rule), func(t *testing.T) {
			e := newMatrixEnv(t, srv)
			name := "m-force-" + ruleName(rule)
			require.NoError(t, e.other.Lock(name).Lock(ctx))
			r := rule
			r.Match = isScript(scripts.ForceUnlock)
			e.faulty.Inject(r)
			existed, err := e.c.Lock(name).ForceUnlock(ctx)
			require.NoError(t, err)
			if rule.Fault != redistest.Late {
				assert.True(t, existed)
			}
			// A hold taken after the force unlock returned survives the
			// late call.
			require.NoError(t, e.c.Lock(name).Lock(me))
			e.faulty.WaitLate()
			assert.Equal(t, int64(1), e.count(t, name, 1), "the new hold survives")
			require.NoError(t, e.c.Lock(name).Unlock(me))
			e.settled(t, name)
		})

		t.Run("renewal/"+ruleName(rule), func(t *testing.T) {
			e := newMatrixEnv(t, srv, rlock.WithWatchdogTimeout(900*time.Millisecond))
			name := "m-renew-" + ruleName(rule)
			l := e.c.Lock(name)
			require.NoError(t, l.Lock(me))
			hctx, err := l.HoldContext(me)
			require.NoError(t, err)
			r := rule
			r.Match = isScript(scripts.Renew)
			e.faulty.Inject(r)
			eventually(t, 5*time.Second, "the faulty renewal", func() bool { return e.faulty.Pending() == 0 })
			// Two more leases: renewal went on.
			time.Sleep(1800 * time.Millisecond)
			require.NoError(t, hctx.Err(), "the hold was reported lost: %v", context.Cause(hctx))
			assert.Equal(t, int64(1), e.count(t, name, 1))
			require.NoError(t, l.Unlock(me))
			<-hctx.Done()
			assert.ErrorIs(t, context.Cause(hctx), rlock.ErrUnlocked)
			e.settled(t, name)
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var _ = errors.Is
