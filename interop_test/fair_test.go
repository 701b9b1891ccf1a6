package interop_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/holder"
	"github.com/goredisson/locks/interop_test/driver"
	"github.com/goredisson/locks/rlock"
)

// fairQueue returns the fair lock's queue and its waiters' reservations.
func (f *fixture) fairQueue(t *testing.T, name string) ([]string, map[string]float64) {
	t.Helper()
	q, err := doRaw(t, f.raw, "LRANGE", rlock.FairQueueName(name), "0", "-1").AsStrSlice()
	require.NoError(t, err)
	z, err := doRaw(t, f.raw, "ZRANGE", rlock.FairTimeoutName(name), "0", "-1", "WITHSCORES").AsZScores()
	require.NoError(t, err)
	m := map[string]float64{}
	for _, s := range z {
		m[s.Member] = s.Score
	}
	return q, m
}

// waitQueued waits until the fair lock's queue has n entries.
func (f *fixture) waitQueued(t *testing.T, name string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		m, err := doRaw(t, f.raw, "LLEN", rlock.FairQueueName(name)).AsInt64()
		return err == nil && m == int64(n)
	}, 30*time.Second, time.Millisecond, "the queue of %s never had %d entries", name, n)
}

// done waits for c (at most d) and reports whether it returned.
func done(c *call, d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

// testFairFIFO: a holder, then waiters queued alternately from the two
// sides: they get the lock in queue order, each woken at once on its own
// channel (the lock's TTL is 30 s), each grant pulls every reservation
// behind it forward by exactly the wait (5 min on both sides; the scores
// must be the same doubles on both sides), and the queue ends empty.
func (f *fixture) testFairFIFO(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		h := a.actor(1)
		require.NoError(t, h.lock(ctx, kindFair, name))
		ws := []actor{b.actor(2), a.actor(3), b.actor(4), a.actor(5), b.actor(6)}
		calls := make([]*call, len(ws))
		for i, w := range ws {
			calls[i] = w.lockAsync(ctx, kindFair, name)
			f.waitQueued(t, name, i+1)
		}
		q, _ := f.fairQueue(t, name)
		for _, fld := range q {
			ch := rlock.ChannelName(name) + ":" + fld
			require.Eventually(t, func() bool { return numsub(t, f.raw, ch, f.sharded) == 1 }, 30*time.Second, time.Millisecond,
				"no waiter subscribed to its own channel %s", ch)
		}
		assert.Zero(t, numsub(t, f.raw, rlock.ChannelName(name), f.sharded), "fair waiters never use the shared channel")
		_, reserved := f.fairQueue(t, name)
		const wait = float64(rlock.DefaultFairLockWaitTimeout / time.Millisecond)
		released := time.Now()
		require.NoError(t, h.unlock(ctx, kindFair, name))
		for i, w := range ws {
			require.True(t, done(calls[i], 10*time.Second), "waiter %d (%s) not woken", i, w)
			require.NoError(t, calls[i].err, "waiter %d (%s)", i, w)
			assert.Less(t, calls[i].at.Sub(released), 2*time.Second, "hand-off to waiter %d (%s) was slow", i, w)
			for j := i + 1; j < len(ws); j++ {
				assert.False(t, done(calls[j], 0), "waiter %d (%s) got the lock before waiter %d (%s)", j, ws[j], i, w)
			}
			q, now := f.fairQueue(t, name)
			require.Len(t, q, len(ws)-i-1, "the queue after grant %d", i)
			for _, fld := range q {
				assert.Equal(t, reserved[fld]-wait, now[fld], "%s's grant moved %s's reservation by %v, not by the wait", w, fld, reserved[fld]-now[fld])
			}
			reserved = now
			released = time.Now()
			require.NoError(t, w.unlock(ctx, kindFair, name))
		}
		q, timeouts := f.fairQueue(t, name)
		assert.Empty(t, q)
		assert.Empty(t, timeouts)
	})
}

// testFairWaiterTimeout: a waiter whose wait ends leaves the queue (the
// one behind it moves up by that wait) and does not stall the next, who
// gets the lock at the holder's unlock.
func (f *fixture) testFairWaiterTimeout(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		h := a.actor(1)
		require.NoError(t, h.lock(ctx, kindFair, name))
		const wait = 1500 * time.Millisecond
		short := b.actor(2).tryLockAsync(ctx, kindFair, name, wait, 0)
		f.waitQueued(t, name, 1)
		next := a.actor(3).lockAsync(ctx, kindFair, name)
		f.waitQueued(t, name, 2)
		q, before := f.fairQueue(t, name)
		require.True(t, done(short, 10*time.Second))
		require.NoError(t, short.err)
		assert.False(t, short.ok)
		q2, after := f.fairQueue(t, name)
		require.Equal(t, q[1:], q2, "the timed-out waiter left the queue")
		assert.InDelta(t, float64(wait.Milliseconds()), before[q[1]]-after[q[1]], 1, "the next waiter moved up by the wait")
		released := time.Now()
		require.NoError(t, h.unlock(ctx, kindFair, name))
		require.True(t, done(next, 10*time.Second))
		require.NoError(t, next.err)
		assert.Less(t, next.at.Sub(released), 2*time.Second)
		require.NoError(t, a.actor(3).unlock(ctx, kindFair, name))
		q, _ = f.fairQueue(t, name)
		assert.Empty(t, q)
	})
}

// testFairKilledWaiter: a waiter whose process is killed (a JVM, a Go
// process) stays first in line until its reservation ends; then the
// others' cleanup drops it and the next waiter gets the lock.
func (f *fixture) testFairKilledWaiter(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		h := a.actor(1)
		var victim *driver.JVM
		if a.java() {
			// Started before the lock is taken: a JVM's start must not eat
			// the holder's lease (the victim would get the lock, not queue).
			victim = startJVM(t, driver.Config{Version: f.version, RedisAddrs: []string{f.srv.Addr}})
			t.Cleanup(func() { _ = victim.Kill() })
		}
		// The first waiter's reservation runs from the lock's TTL.
		require.NoError(t, h.lockLease(ctx, kindFair, name, 3*time.Second))
		const wait = 2 * time.Second
		if a.java() {
			victim.Send("trylock", "T9", spec(kindFair, name), wait.Milliseconds(), -1)
			f.waitQueued(t, name, 1)
			require.NoError(t, victim.Kill())
		} else {
			p := holder.Start(t, holder.Spec{Addr: f.srv.Addr, Lock: name, Owner: 9, FairWait: wait, Watchdog: 30 * time.Second})
			require.NoError(t, p.Kill())
		}
		next := b.actor(2).lockAsync(ctx, kindFair, name)
		f.waitQueued(t, name, 2)
		q, timeouts := f.fairQueue(t, name)
		deadline := time.UnixMilli(int64(timeouts[q[0]]))
		require.NoError(t, h.unlock(ctx, kindFair, name)) // wakes the dead waiter only
		require.True(t, done(next, 20*time.Second), "the queue stalled behind a dead waiter")
		require.NoError(t, next.err)
		assert.False(t, next.at.Before(deadline.Add(-20*time.Millisecond)), "taken %v before the dead waiter's reservation ended", deadline.Sub(next.at))
		assert.Less(t, next.at.Sub(deadline), 3*time.Second, "taken long after the dead waiter's reservation ended")
		require.NoError(t, b.actor(2).unlock(ctx, kindFair, name))
		q, _ = f.fairQueue(t, name)
		assert.Empty(t, q)
	})
}

// testFairNonReentrant (4.4+): the holder's re-acquire of a non-reentrant
// fair lock fails on both sides, the count stays 1, and the other side's
// waiter gets it after one unlock.
func (f *fixture) testFairNonReentrant(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		xa, xb := a.actor(1), b.actor(1)
		require.NoError(t, xa.lock(ctx, kindNRFair, name))
		assert.True(t, alreadyHeld(xa.lock(ctx, kindNRFair, name)), "%s re-acquired", a)
		_, err := xa.tryLock(ctx, kindNRFair, name, -1, 0)
		assert.True(t, alreadyHeld(err))
		assert.Equal(t, "1", firstValue(hgetall(t, f.raw, name)))
		assert.False(t, want(t).B(xb.tryLock(ctx, kindNRFair, name, -1, 0)))
		w := xb.lockAsync(ctx, kindNRFair, name)
		f.waitQueued(t, name, 1)
		require.NoError(t, xa.unlock(ctx, kindNRFair, name))
		require.True(t, done(w, 10*time.Second))
		require.NoError(t, w.err)
		require.NoError(t, xb.unlock(ctx, kindNRFair, name))
		assert.Empty(t, hgetall(t, f.raw, name))
	})
}

// testFairNameMapper (Redisson's testNameMapper): Java with a NameMapper
// that prefixes every name ("test::"), Go given the mapped name. From
// 3.52.0 Redisson builds the queue and reservation names from the mapped
// name too, so the two languages share one queue, in arrival order; before
// it (3.23.5) Java's queue is built from the unmapped name: they still
// exclude each other (one lock hash), but each language queues apart
// (docs/PROTOCOL.md 4.8).
func (f *fixture) testFairNameMapper(t *testing.T) {
	const prefix = "test::"
	mapped := func(id string) *javaSide {
		jv := startJVM(t, driver.Config{Version: f.version, RedisAddrs: f.addrs, NamePrefix: prefix})
		t.Cleanup(func() { require.NoError(t, jv.Close()) })
		return &javaSide{f: f, j: jv, id: id + " (NameMapper)"}
	}
	ja, jb := mapped("A"), mapped("B")
	g := &goSide{c: f.goClient(t), base: 100}
	follows := atLeast(f.version, "3.52.0")
	for _, p := range []pair{{"GoJava", g, ja}, {"JavaGo", ja, g}, {"JavaJava", ja, jb}} {
		t.Run(p.name, func(t *testing.T) {
			ctx := scenarioCtx(t)
			name := lockName(t, "m")
			key := prefix + name // what Go is given, and the lock hash of both
			as := func(s side) string {
				if s.java() {
					return name
				}
				return key
			}
			h := p.a.actor(1)
			require.NoError(t, h.lock(ctx, kindFair, as(p.a)))
			assert.Len(t, hgetall(t, f.raw, key), 1, "the Java mapper's key is the name Go was given")
			require.False(t, want(t).B(p.b.actor(9).tryLock(ctx, kindFair, as(p.b), -1, 0)), "the other side got in")
			if follows || p.a.java() == p.b.java() {
				// One queue, in arrival order: under the mapped name
				// (3.52+), or Java/Java before 3.52 under the unmapped one.
				queue := key
				if !follows {
					queue = name
				}
				w1 := p.b.actor(2).lockAsync(ctx, kindFair, as(p.b))
				f.waitQueued(t, queue, 1)
				w2 := p.a.actor(3).lockAsync(ctx, kindFair, as(p.a))
				f.waitQueued(t, queue, 2)
				require.NoError(t, h.unlock(ctx, kindFair, as(p.a)))
				require.True(t, done(w1, 10*time.Second), "the first waiter (%s) not woken", p.b)
				require.NoError(t, w1.err)
				assert.False(t, done(w2, 0), "the second waiter (%s) got the lock before the first", p.a)
				require.NoError(t, p.b.actor(2).unlock(ctx, kindFair, as(p.b)))
				require.True(t, done(w2, 10*time.Second), "the second waiter (%s) not woken", p.a)
				require.NoError(t, w2.err)
				require.NoError(t, p.a.actor(3).unlock(ctx, kindFair, as(p.a)))
			} else {
				// Redisson before 3.52 queues its waiter under the
				// unmapped name: two queues, each language's waiter in
				// its own, and both kept out by the one lock hash.
				w1 := p.b.actor(2).tryLockAsync(ctx, kindFair, as(p.b), 2*time.Second, 0)
				w2 := p.a.actor(3).tryLockAsync(ctx, kindFair, as(p.a), 2*time.Second, 0)
				require.Eventually(t, func() bool {
					n, err := doRaw(t, f.raw, "LLEN", rlock.FairQueueName(name)).AsInt64()
					m, err2 := doRaw(t, f.raw, "LLEN", rlock.FairQueueName(key)).AsInt64()
					return err == nil && err2 == nil && n == 1 && m == 1
				}, 30*time.Second, time.Millisecond, "one waiter in each queue")
				for _, c := range []*call{w1, w2} {
					require.True(t, done(c, 10*time.Second), "a waiter did not return")
					require.NoError(t, c.err)
					assert.False(t, c.ok, "a waiter got in while the holder held")
				}
				require.NoError(t, h.unlock(ctx, kindFair, as(p.a)))
			}
			assert.Empty(t, hgetall(t, f.raw, key))
		})
	}
}
