package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// TestRedLockFaultMatrix injects each fault of the matrix into one member
// of a RedLock over three masters, in its acquire (a single attempt, an
// attempt with a wait, a waiter's attempt in the wait loop) and in its
// unlock, and checks the invariants on every master: a member's count is
// what the group was told (1 while held, never 2: no grant is repeated), a
// quorum holds while the RedLock is held and another service's RedLock
// cannot get in, and after the unlock nothing is left on any master and
// nothing in any client's hold table.
func TestRedLockFaultMatrix(t *testing.T) {
	srvs := redistest.Masters(t, 3)
	probe := redistest.NewFaulty(must(srvs[0].Client()))
	defer probe.Client.Close()
	rules := matrixFaults(t, probe, srvs[0])
	ctx := context.Background()
	me := rlock.WithOwner(ctx, 1)

	type env struct {
		*matrixEnv // master 0, through the fault injector
		mine       []*rlock.Client
		others     []*rlock.Client
	}
	setup := func(t *testing.T) *env {
		e := &env{matrixEnv: newMatrixEnv(t, srvs[0])}
		e.mine = []*rlock.Client{e.c, direct(t, srvs[1]), direct(t, srvs[2])}
		e.others = []*rlock.Client{e.other, direct(t, srvs[1]), direct(t, srvs[2])}
		return e
	}
	red := func(cs []*rlock.Client, name string) *rlock.RedLock {
		return rlock.NewRedLock(cs[0].Lock(name), cs[1].Lock(name), cs[2].Lock(name))
	}
	// faultySecond is the RedLock with the faulty master as its second
	// member: when every member is taken, a pass spends its failure budget
	// on the first and then waits on the second (Redisson's loop), so the
	// wait loop's attempts go to the faulty master.
	faultySecond := func(cs []*rlock.Client, name string) *rlock.RedLock {
		return rlock.NewRedLock(cs[1].Lock(name), cs[0].Lock(name), cs[2].Lock(name))
	}
	counts := func(t *testing.T, e *env, name string) []int64 {
		var out []int64
		for i, s := range srvs {
			msg, err := s.Do(ctx, "HGET", name, field(e.mine[i], 1))
			n, _ := msg.AsInt64()
			if err != nil {
				n = 0
			}
			out = append(out, n)
		}
		return out
	}
	// held checks a held RedLock: every member's count is 0 or 1, a
	// quorum holds, and another service's RedLock is kept out.
	held := func(t *testing.T, e *env, name string) {
		t.Helper()
		n := 0
		for i, c := range counts(t, e, name) {
			assert.LessOrEqual(t, c, int64(1), "master %d: a grant ran twice", i)
			n += int(c)
		}
		assert.GreaterOrEqual(t, n, 2, "no quorum held")
		ok, err := red(e.others, name).TryLock(ctx, 0, 0)
		require.NoError(t, err)
		assert.False(t, ok, "another RedLock got in")
	}
	released := func(t *testing.T, e *env, name string) {
		t.Helper()
		e.faulty.WaitLate()
		assert.Zero(t, e.faulty.Pending(), "the fault was never hit")
		for i, s := range srvs {
			eventually(t, 5*time.Second, fmt.Sprintf("master %d released", i), func() bool { return doInt(t, s, "EXISTS", name) == 0 })
		}
		for i, c := range e.mine {
			eventually(t, 5*time.Second, fmt.Sprintf("no record left in client %d", i), func() bool { return c.Stats().Holds == 0 })
			assert.Zero(t, c.Stats().Renewing)
		}
		ok, err := red(e.others, name).TryLock(ctx, 0, 0)
		require.NoError(t, err)
		require.True(t, ok, "another RedLock is kept out")
		require.NoError(t, red(e.others, name).Unlock(ctx))
	}

	for _, rule := range rules {
		t.Run("acquire/"+ruleName(rule), func(t *testing.T) {
			e := setup(t)
			name := "rm-acquire-" + ruleName(rule)
			r := rule
			r.Match = isScript(scripts.Acquire)
			e.faulty.Inject(r)
			rl := red(e.mine, name)
			require.NoError(t, rl.Lock(me), "the fault must be absorbed")
			e.faulty.WaitLate()
			held(t, e, name)
			require.NoError(t, rl.Unlock(me))
			released(t, e, name)
		})

		t.Run("acquire with a wait/"+ruleName(rule), func(t *testing.T) {
			e := setup(t)
			name := "rm-trylock-" + ruleName(rule)
			r := rule
			r.Match = isScript(scripts.Acquire)
			e.faulty.Inject(r)
			rl := red(e.mine, name)
			ok, err := rl.TryLock(me, 3*time.Second, 0)
			require.NoError(t, err, "the fault must be absorbed")
			require.True(t, ok, "two healthy masters make a quorum")
			e.faulty.WaitLate()
			held(t, e, name)
			require.NoError(t, rl.Unlock(me))
			released(t, e, name)
		})

		t.Run("acquire in the wait loop/"+ruleName(rule), func(t *testing.T) {
			e := setup(t)
			name := "rm-wait-" + ruleName(rule)
			holder := red(e.others, name)
			require.NoError(t, holder.Lock(ctx))
			attempts := e.faulty.Count(isScript(scripts.Acquire))
			rl := faultySecond(e.mine, name)
			got := lockAsync(me, rl)
			// Its first attempt, and the first of its wait on the faulty
			// master; then it waits for the holder's unlock message.
			eventually(t, 10*time.Second, "the waiter's attempts", func() bool { return attempts() >= 2 && e.c.Stats().Parked == 1 })
			r := rule
			r.Match = isScript(scripts.Acquire)
			e.faulty.Inject(r)
			require.NoError(t, holder.Unlock(ctx))
			res := waitResult(t, got, 30*time.Second, "the waiter")
			require.NoError(t, res.err)
			e.faulty.WaitLate()
			held(t, e, name)
			require.NoError(t, rl.Unlock(me))
			released(t, e, name)
		})

		t.Run("unlock/"+ruleName(rule), func(t *testing.T) {
			e := setup(t)
			name := "rm-unlock-" + ruleName(rule)
			rl := red(e.mine, name)
			require.NoError(t, rl.Lock(me))
			r := rule
			r.Match = isScript(scripts.Unlock)
			e.faulty.Inject(r)
			require.NoError(t, rl.Unlock(me), "the other members unlocked")
			released(t, e, name)
			for i, c := range counts(t, e, name) {
				assert.Zero(t, c, "master %d", i)
			}
		})
	}
}
