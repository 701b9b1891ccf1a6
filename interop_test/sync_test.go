package interop_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/interop_test/driver"
	"github.com/goredisson/locks/rlock"
)

const suiteSync = "TestRedissonSync"

// TestRedissonSync runs the semaphore, permit-expirable semaphore and
// count-down latch scenarios against every Redisson version, each as
// Go/Java, Java/Go and Java/Java.
func TestRedissonSync(t *testing.T) {
	versions := mustHaveDeps(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			f := newFixture(t, v)
			t.Run("SemPermits", f.testSemPermits)
			t.Run("SemWake", f.testSemWake)
			t.Run("SemTryAcquireTimeout", f.testSemTryAcquireTimeout)
			t.Run("SemHolders", f.testSemHolders)
			t.Run("PsemCrossRelease", f.testPsemCrossRelease)
			t.Run("PsemExpiry", f.testPsemExpiry)
			t.Run("PsemUpdateLease", f.testPsemUpdateLease)
			t.Run("PsemMultiPermit", f.testPsemMultiPermit)
			t.Run("LatchRelease", f.testLatchRelease)
		})
	}
	logSummary(t, suiteSync)
}

// syncer is one side's synchronizer calls; thread n of a Java side is
// "S<n>", of the Go side a goroutine.
type syncer interface {
	String() string
	semTrySet(ctx context.Context, name string, n int) (bool, error)
	semAdd(ctx context.Context, name string, n int) error
	semRelease(ctx context.Context, name string, n int) error
	semAvail(ctx context.Context, name string) (int, error)
	semDrain(ctx context.Context, name string) (int, error)
	// semTryAcquire: wait < 0 is one attempt.
	semTryAcquire(ctx context.Context, thread int, name string, n int, wait time.Duration) (bool, error)
	semAcquireAsync(ctx context.Context, thread int, name string, n int) *call
	// semHolders: thread acquires 1 permit rounds times, each time INCRs
	// counter, sleeps, DECRs it and releases; it returns the highest count
	// it saw.
	semHoldersAsync(ctx context.Context, thread int, name, counter string, rounds int) *call

	psemTrySet(ctx context.Context, name string, n int) (bool, error)
	psemAvail(ctx context.Context, name string) (int, error)
	// psemAcquireAsync: lease < 0: never expires; the id in call.val.
	psemAcquireAsync(ctx context.Context, thread int, name string, lease time.Duration) *call
	psemRelease(ctx context.Context, name, id string) error
	// Multi-permit (Redisson 3.23.4+): lease < 0 never expires.
	psemAcquireN(ctx context.Context, thread int, name string, n int, lease time.Duration) ([]string, error)
	psemReleaseN(ctx context.Context, name string, ids []string) error
	psemTryReleaseN(ctx context.Context, name string, ids []string) (int, error)
	psemTryRelease(ctx context.Context, name, id string) (bool, error)
	psemUpdate(ctx context.Context, name, id string, lease time.Duration) (bool, error)

	latchTrySet(ctx context.Context, name string, n int64) (bool, error)
	latchCountDown(ctx context.Context, name string) error
	latchCount(ctx context.Context, name string) (int64, error)
	latchAwaitAsync(ctx context.Context, thread int, name string) *call
	// parked waits until thread waits for a message (Java); the Go side
	// counts its hub's waiters instead.
	waitParked(t *testing.T, thread int, channel string, before int64)
	waiters(t *testing.T, channel string) int64
}

// syncPairs is pairs with the sides as syncers.
func (f *fixture) syncPairs(t *testing.T, fn func(t *testing.T, a, b syncer, name string)) {
	for _, p := range f.pairs(t, 0) {
		a, b := toSyncer(f, p.a), toSyncer(f, p.b)
		t.Run(p.name, func(t *testing.T) { fn(t, a, b, lockName(t, "s")) })
	}
}

func toSyncer(f *fixture, s side) syncer {
	switch s := s.(type) {
	case *goSide:
		return &goSyncer{c: s.c, f: f}
	case *javaSide:
		return &javaSyncer{j: s.j, id: s.id, f: f}
	}
	panic(fmt.Sprintf("unknown side %T", s))
}

// isNoPermit reports whether err is a release of a permit not held
// (ErrNoPermit; Java's RedisException caused by IllegalArgumentException,
// or the IllegalArgumentException itself).
func isNoPermit(err error) bool {
	var je *driver.JavaError
	return errors.Is(err, rlock.ErrNoPermit) ||
		(errors.As(err, &je) && (je.Class == "RedisException" || je.Class == "IllegalArgumentException"))
}

// testSemPermits: permits set, added, reduced below 0 and drained on one
// side are what the other side sees; only the first TrySetPermits applies.
func (f *fixture) testSemPermits(t *testing.T) {
	f.syncPairs(t, func(t *testing.T, a, b syncer, name string) {
		ctx := scenarioCtx(t)
		require.True(t, want(t).B(a.semTrySet(ctx, name, 3)))
		require.False(t, want(t).B(b.semTrySet(ctx, name, 5)), "only the first trySetPermits applies")
		assert.Equal(t, 3, want(t).I(b.semAvail(ctx, name)))
		require.NoError(t, a.semAdd(ctx, name, -5))
		assert.Equal(t, -2, want(t).I(b.semAvail(ctx, name)), "a negative addPermits goes below 0")
		assert.False(t, want(t).B(b.semTryAcquire(ctx, 1, name, 1, -1)))
		require.NoError(t, b.semAdd(ctx, name, 4))
		assert.Equal(t, 2, want(t).I(a.semAvail(ctx, name)))
		require.True(t, want(t).B(a.semTryAcquire(ctx, 1, name, 2, -1)))
		require.NoError(t, b.semRelease(ctx, name, 3))
		assert.Equal(t, 3, want(t).I(b.semDrain(ctx, name)))
		assert.Equal(t, 0, want(t).I(a.semAvail(ctx, name)))
		assert.Equal(t, "0", get(t, f, name), "the string key")
	})
}

// testSemWake: a waiter blocked in acquire(2) on one side is woken
// promptly by the other side's release; the channel is redisson_sc:{name}.
func (f *fixture) testSemWake(t *testing.T) {
	f.syncPairs(t, func(t *testing.T, a, b syncer, name string) {
		ctx := scenarioCtx(t)
		ch := rlock.SemaphoreChannelName(name)
		require.True(t, want(t).B(a.semTrySet(ctx, name, 1)))
		before := b.waiters(t, ch)
		w := b.semAcquireAsync(ctx, 1, name, 2)
		b.waitParked(t, 1, ch, before)
		require.False(t, w.finished(), "%s took 2 permits of 1", b)
		start := time.Now()
		require.NoError(t, a.semRelease(ctx, name, 1))
		w.wait(t, promptly)
		require.NoError(t, w.err)
		measure(t, suiteSync, f.version, "semaphore release ("+a.String()+") -> acquire(2) ("+b.String()+")", w.at.Sub(start))
		// Woken by the message: a Go waiter's re-check without one comes
		// about a second after it parked, which was just before the release.
		assert.Less(t, w.at.Sub(start), wokenBy, "not woken by the release's message")
		assert.Equal(t, 0, want(t).I(a.semAvail(ctx, name)))
	})
}

// testSemTryAcquireTimeout: tryAcquire(n, wait) on an empty semaphore is
// false after about wait.
func (f *fixture) testSemTryAcquireTimeout(t *testing.T) {
	f.syncPairs(t, func(t *testing.T, a, b syncer, name string) {
		ctx := scenarioCtx(t)
		require.True(t, want(t).B(a.semTrySet(ctx, name, 1)))
		require.True(t, want(t).B(a.semTryAcquire(ctx, 1, name, 1, -1)))
		start := time.Now()
		ok := want(t).B(b.semTryAcquire(ctx, 1, name, 1, 500*time.Millisecond))
		took := time.Since(start)
		assert.False(t, ok)
		assert.GreaterOrEqual(t, took, 450*time.Millisecond)
		assert.Less(t, took, 3*time.Second)
	})
}

// testSemHolders: three threads of each side share two permits; at no
// moment are more than two inside, and every round gets through.
func (f *fixture) testSemHolders(t *testing.T) {
	f.syncPairs(t, func(t *testing.T, a, b syncer, name string) {
		ctx := scenarioCtx(t)
		const permits, rounds = 2, 8
		require.True(t, want(t).B(a.semTrySet(ctx, name, permits)))
		counter := name + ":holders"
		var calls []*call
		for i := 1; i <= 3; i++ {
			calls = append(calls, a.semHoldersAsync(ctx, i, name, counter, rounds), b.semHoldersAsync(ctx, 10+i, name, counter, rounds))
		}
		most := 0
		for _, c := range calls {
			c.wait(t, 60*time.Second)
			require.NoError(t, c.err)
			n, err := strconv.Atoi(c.val)
			require.NoError(t, err)
			most = max(most, n)
		}
		assert.LessOrEqual(t, most, permits, "more holders than permits")
		assert.Equal(t, permits, want(t).I(b.semAvail(ctx, name)), "every permit back")
	})
}

// testPsemCrossRelease: an id acquired on one side is released by the
// other; a second release fails on both sides' terms.
func (f *fixture) testPsemCrossRelease(t *testing.T) {
	f.syncPairs(t, func(t *testing.T, a, b syncer, name string) {
		ctx := scenarioCtx(t)
		require.True(t, want(t).B(a.psemTrySet(ctx, name, 2)))
		c := a.psemAcquireAsync(ctx, 1, name, -1)
		c.wait(t, promptly)
		require.NoError(t, c.err)
		id := c.val
		require.Regexp(t, `^[0-9a-f]{32}$`, id)
		assert.Equal(t, 1, want(t).I(b.psemAvail(ctx, name)))
		require.NoError(t, b.psemRelease(ctx, name, id))
		assert.Equal(t, 2, want(t).I(a.psemAvail(ctx, name)))
		err := a.psemRelease(ctx, name, id)
		assert.True(t, isNoPermit(err), "%s released a released id: %v", a, err)
		assert.False(t, want(t).B(b.psemTryRelease(ctx, name, id)))
	})
}

// testPsemMultiPermit (Redisson 3.23.4+'s acquire(n) and release(ids)):
// three permits taken at once on one side are three ids the other side
// sees held; a release of two of them by the other side wakes a waiter of
// the first promptly (the message carries the number released), and a
// tryRelease of ids one of which is gone frees none of them (Redisson
// 3.41+; before, the ones still held).
func (f *fixture) testPsemMultiPermit(t *testing.T) {
	f.syncPairs(t, func(t *testing.T, a, b syncer, name string) {
		ctx := scenarioCtx(t)
		ch := rlock.SemaphoreChannelName(name)
		require.True(t, want(t).B(a.psemTrySet(ctx, name, 3)))
		ids, err := a.psemAcquireN(ctx, 1, name, 3, -1)
		require.NoError(t, err)
		require.Len(t, ids, 3)
		seen := map[string]bool{}
		for _, id := range ids {
			require.Regexp(t, `^[0-9a-f]{32}$`, id)
			seen[id] = true
		}
		require.Len(t, seen, 3, "three distinct ids")
		assert.Equal(t, 0, want(t).I(b.psemAvail(ctx, name)))
		before := a.waiters(t, ch)
		w := a.psemAcquireAsync(ctx, 2, name, -1)
		a.waitParked(t, 2, ch, before)
		start := time.Now()
		require.NoError(t, b.psemReleaseN(ctx, name, ids[:2]))
		w.wait(t, promptly)
		require.NoError(t, w.err)
		measure(t, suiteSync, f.version, "releaseN of 2 ("+b.String()+") -> waiter ("+a.String()+")", w.at.Sub(start))
		assert.Less(t, w.at.Sub(start), wokenBy, "not woken by the multi-id release's message")
		assert.Equal(t, 1, want(t).I(b.psemAvail(ctx, name)), "two released, one taken by the waiter")
		// ids[0] is released already. Redisson 3.41+ (and this library)
		// then release none of the list; before 3.41 Redisson releases
		// the ones still held.
		n, err := b.psemTryReleaseN(ctx, name, []string{ids[0], ids[2], w.val})
		require.NoError(t, err)
		if _, java := b.(*javaSyncer); java && !atLeast(f.version, "3.41.0") {
			assert.Equal(t, 2, n, "Redisson %s releases the ids still held", f.version)
		} else {
			assert.Equal(t, 0, n, "a list with an id no longer held releases none")
			assert.Equal(t, 1, want(t).I(a.psemAvail(ctx, name)))
			require.NoError(t, b.psemReleaseN(ctx, name, []string{ids[2], w.val}))
		}
		assert.Equal(t, 3, want(t).I(a.psemAvail(ctx, name)))
	})
}

// testPsemExpiry: a permit with a 600 ms lease goes back to the pool at its
// end and the other side's waiter gets it then, woken by the expiry hint
// (the ":<score>" reply) with no message; the expired id's tryRelease is
// false. A Go waiter's bound (900 ms) is below its 1 s re-check, so only
// the hint can meet it; a Java waiter has no re-check.
func (f *fixture) testPsemExpiry(t *testing.T) {
	f.syncPairs(t, func(t *testing.T, a, b syncer, name string) {
		ctx := scenarioCtx(t)
		require.True(t, want(t).B(a.psemTrySet(ctx, name, 1)))
		c := a.psemAcquireAsync(ctx, 1, name, 600*time.Millisecond)
		c.wait(t, promptly)
		require.NoError(t, c.err)
		taken := c.at
		w := b.psemAcquireAsync(ctx, 1, name, -1)
		w.wait(t, promptly)
		require.NoError(t, w.err)
		took := w.at.Sub(taken)
		measure(t, suiteSync, f.version, "permit lease 600ms ("+a.String()+") -> waiter ("+b.String()+")", took)
		assert.Greater(t, took, 450*time.Millisecond, "the waiter got the permit before its lease ended")
		bound := 900 * time.Millisecond // below the Go waiter's 1 s re-check
		if _, isGo := b.(*goSyncer); !isGo {
			bound = 2 * time.Second // Redisson has no re-check: without the hint it would not wake at all
		}
		assert.Less(t, took, bound, "the waiter was not woken at the lease's end")
		assert.False(t, want(t).B(a.psemTryRelease(ctx, name, c.val)), "an expired id")
		require.NoError(t, b.psemRelease(ctx, name, w.val))
	})
}

// testPsemUpdateLease: the other side extends a short lease; the permit
// stays held past the old lease and is released by the id.
func (f *fixture) testPsemUpdateLease(t *testing.T) {
	f.syncPairs(t, func(t *testing.T, a, b syncer, name string) {
		ctx := scenarioCtx(t)
		require.True(t, want(t).B(a.psemTrySet(ctx, name, 1)))
		c := a.psemAcquireAsync(ctx, 1, name, 700*time.Millisecond)
		c.wait(t, promptly)
		require.NoError(t, c.err)
		require.True(t, want(t).B(b.psemUpdate(ctx, name, c.val, 20*time.Second)))
		assert.False(t, want(t).B(b.psemUpdate(ctx, name, "00112233445566778899aabbccddeeff", time.Second)), "an unknown id")
		for time.Since(c.at) < 1500*time.Millisecond {
			require.Equal(t, 0, want(t).I(a.psemAvail(ctx, name)), "the extended permit came back")
			time.Sleep(100 * time.Millisecond)
		}
		require.True(t, want(t).B(a.psemTryRelease(ctx, name, c.val)))
		assert.Equal(t, 1, want(t).I(b.psemAvail(ctx, name)))
	})
}

// testLatchRelease: awaiters of both sides stay blocked at count 1 and
// are all released promptly by the last countDown; await on a missing
// latch returns at once.
func (f *fixture) testLatchRelease(t *testing.T) {
	f.syncPairs(t, func(t *testing.T, a, b syncer, name string) {
		ctx := scenarioCtx(t)
		ch := rlock.LatchChannelName(name)
		asked := time.Now()
		w := b.latchAwaitAsync(ctx, 9, name+":missing")
		w.wait(t, promptly)
		require.NoError(t, w.err, "await on a missing latch")
		assert.Less(t, w.at.Sub(asked), wokenBy, "await on a missing latch must return at once, not wait for a message")

		require.True(t, want(t).B(a.latchTrySet(ctx, name, 2)))
		require.False(t, want(t).B(b.latchTrySet(ctx, name, 5)))
		var ws []*call
		for i := 1; i <= 3; i++ {
			before := b.waiters(t, ch)
			ws = append(ws, b.latchAwaitAsync(ctx, i, name))
			b.waitParked(t, i, ch, before)
		}
		// And one awaiter of the counting side: both languages wait.
		before := a.waiters(t, ch)
		ws = append(ws, a.latchAwaitAsync(ctx, 20, name))
		a.waitParked(t, 20, ch, before)
		require.NoError(t, a.latchCountDown(ctx, name))
		assert.Equal(t, int64(1), want(t).I64(b.latchCount(ctx, name)))
		for _, c := range ws {
			require.False(t, c.finished(), "released at count 1")
		}
		start := time.Now()
		require.NoError(t, a.latchCountDown(ctx, name))
		for _, c := range ws {
			c.wait(t, promptly)
			require.NoError(t, c.err)
			assert.Less(t, c.at.Sub(start), wokenBy, "not woken by the last countDown's message")
		}
		last := ws[0].at
		for _, c := range ws {
			if c.at.After(last) {
				last = c.at
			}
		}
		measure(t, suiteSync, f.version, "last countDown ("+a.String()+") -> 3 awaiters ("+b.String()+") and 1 ("+a.String()+")", last.Sub(start))
		assert.Equal(t, int64(0), want(t).I64(a.latchCount(ctx, name)))
		assert.Zero(t, exists(t, f, name), "the latch key is deleted at zero")
		require.NoError(t, b.latchCountDown(ctx, name), "countDown on a missing latch")
		assert.Equal(t, int64(0), want(t).I64(b.latchCount(ctx, name)), "never below 0")
	})
}

func get(t *testing.T, f *fixture, key string) string {
	t.Helper()
	v, err := doRaw(t, f.raw, "GET", key).ToString()
	require.NoError(t, err)
	return v
}

func exists(t *testing.T, f *fixture, key string) int64 {
	t.Helper()
	n, err := doRaw(t, f.raw, "EXISTS", key).AsInt64()
	require.NoError(t, err)
	return n
}

// ---- Go side ----

type goSyncer struct {
	c *rlock.Client
	f *fixture
}

func (g *goSyncer) String() string { return "Go" }

func (g *goSyncer) semTrySet(ctx context.Context, name string, n int) (bool, error) {
	return g.c.Semaphore(name).TrySetPermits(ctx, n)
}
func (g *goSyncer) semAdd(ctx context.Context, name string, n int) error {
	return g.c.Semaphore(name).AddPermits(ctx, n)
}
func (g *goSyncer) semRelease(ctx context.Context, name string, n int) error {
	return g.c.Semaphore(name).Release(ctx, n)
}
func (g *goSyncer) semAvail(ctx context.Context, name string) (int, error) {
	return g.c.Semaphore(name).AvailablePermits(ctx)
}
func (g *goSyncer) semDrain(ctx context.Context, name string) (int, error) {
	return g.c.Semaphore(name).DrainPermits(ctx)
}
func (g *goSyncer) semTryAcquire(ctx context.Context, _ int, name string, n int, wait time.Duration) (bool, error) {
	return g.c.Semaphore(name).TryAcquire(ctx, n, wait)
}
func (g *goSyncer) semAcquireAsync(ctx context.Context, _ int, name string, n int) *call {
	return goAsync(func() (bool, error) { return true, g.c.Semaphore(name).Acquire(ctx, n) })
}
func (g *goSyncer) semHoldersAsync(ctx context.Context, _ int, name, counter string, rounds int) *call {
	c := &call{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		s := g.c.Semaphore(name)
		most := int64(0)
		for range rounds {
			if c.err = s.Acquire(ctx, 1); c.err != nil {
				return
			}
			n, err := g.f.raw.Do(ctx, g.f.raw.B().Incr().Key(counter).Build()).AsInt64()
			if err != nil {
				c.err = err
				return
			}
			most = max(most, n)
			time.Sleep(5 * time.Millisecond)
			if c.err = g.f.raw.Do(ctx, g.f.raw.B().Decr().Key(counter).Build()).Error(); c.err != nil {
				return
			}
			if c.err = s.Release(ctx, 1); c.err != nil {
				return
			}
		}
		c.val, c.at = strconv.FormatInt(most, 10), time.Now()
	}()
	return c
}
func (g *goSyncer) psemTrySet(ctx context.Context, name string, n int) (bool, error) {
	return g.c.PermitExpirableSemaphore(name).TrySetPermits(ctx, n)
}
func (g *goSyncer) psemAvail(ctx context.Context, name string) (int, error) {
	return g.c.PermitExpirableSemaphore(name).AvailablePermits(ctx)
}
func (g *goSyncer) psemAcquireAsync(ctx context.Context, _ int, name string, lease time.Duration) *call {
	c := &call{done: make(chan struct{})}
	go func() {
		c.val, c.err = g.c.PermitExpirableSemaphore(name).Acquire(ctx, lease)
		c.ok, c.at = c.err == nil, time.Now()
		close(c.done)
	}()
	return c
}
func (g *goSyncer) psemAcquireN(ctx context.Context, _ int, name string, n int, lease time.Duration) ([]string, error) {
	return g.c.PermitExpirableSemaphore(name).AcquireN(ctx, n, lease)
}
func (g *goSyncer) psemReleaseN(ctx context.Context, name string, ids []string) error {
	return g.c.PermitExpirableSemaphore(name).ReleaseN(ctx, ids)
}
func (g *goSyncer) psemTryReleaseN(ctx context.Context, name string, ids []string) (int, error) {
	return g.c.PermitExpirableSemaphore(name).TryReleaseN(ctx, ids)
}
func (g *goSyncer) psemRelease(ctx context.Context, name, id string) error {
	return g.c.PermitExpirableSemaphore(name).Release(ctx, id)
}
func (g *goSyncer) psemTryRelease(ctx context.Context, name, id string) (bool, error) {
	return g.c.PermitExpirableSemaphore(name).TryRelease(ctx, id)
}
func (g *goSyncer) psemUpdate(ctx context.Context, name, id string, lease time.Duration) (bool, error) {
	return g.c.PermitExpirableSemaphore(name).UpdateLeaseTime(ctx, id, lease)
}
func (g *goSyncer) latchTrySet(ctx context.Context, name string, n int64) (bool, error) {
	return g.c.CountDownLatch(name).TrySetCount(ctx, n)
}
func (g *goSyncer) latchCountDown(ctx context.Context, name string) error {
	return g.c.CountDownLatch(name).CountDown(ctx)
}
func (g *goSyncer) latchCount(ctx context.Context, name string) (int64, error) {
	return g.c.CountDownLatch(name).Count(ctx)
}
func (g *goSyncer) latchAwaitAsync(ctx context.Context, _ int, name string) *call {
	return goAsync(func() (bool, error) { return true, g.c.CountDownLatch(name).Await(ctx) })
}
func (g *goSyncer) waitParked(t *testing.T, _ int, _ string, before int64) {
	t.Helper()
	require.Eventually(t, func() bool { return int64(g.c.Stats().Parked) > before }, 30*time.Second, time.Millisecond, "no new parked Go waiter")
}

// waiters counts parked Go waiters (after a failed attempt), not merely
// subscribed ones.
func (g *goSyncer) waiters(*testing.T, string) int64 { return int64(g.c.Stats().Parked) }

// ---- Java side ----

type javaSyncer struct {
	j  *driver.JVM
	id string
	f  *fixture
}

func (s *javaSyncer) String() string { return "Java " + s.id }

func sthread(n int) string { return "S" + strconv.Itoa(n) }

func (s *javaSyncer) b(ctx context.Context, cmd string, args ...any) (bool, error) {
	v, err := s.j.Do(ctx, cmd, args...)
	if err != nil {
		return false, err
	}
	return strconv.ParseBool(v)
}
func (s *javaSyncer) i(ctx context.Context, cmd string, args ...any) (int, error) {
	v, err := s.j.Do(ctx, cmd, args...)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}
func (s *javaSyncer) none(ctx context.Context, cmd string, args ...any) error {
	_, err := s.j.Do(ctx, cmd, args...)
	return err
}

func (s *javaSyncer) semTrySet(ctx context.Context, name string, n int) (bool, error) {
	return s.b(ctx, "semtryset", name, n)
}
func (s *javaSyncer) semAdd(ctx context.Context, name string, n int) error {
	return s.none(ctx, "semadd", name, n)
}
func (s *javaSyncer) semRelease(ctx context.Context, name string, n int) error {
	return s.none(ctx, "semrelease", name, n)
}
func (s *javaSyncer) semAvail(ctx context.Context, name string) (int, error) {
	return s.i(ctx, "semavail", name)
}
func (s *javaSyncer) semDrain(ctx context.Context, name string) (int, error) {
	return s.i(ctx, "semdrain", name)
}
func (s *javaSyncer) semTryAcquire(ctx context.Context, th int, name string, n int, wait time.Duration) (bool, error) {
	w := wait.Milliseconds()
	if wait < 0 {
		w = -1
	}
	return s.b(ctx, "semtryacquire", sthread(th), name, n, w)
}
func (s *javaSyncer) semAcquireAsync(_ context.Context, th int, name string, n int) *call {
	return javaAsync(s.j.Send("semacquire", sthread(th), name, n))
}
func (s *javaSyncer) semHoldersAsync(ctx context.Context, th int, name, counter string, rounds int) *call {
	c := &call{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		most := int64(0)
		for range rounds {
			if _, c.err = s.j.Do(ctx, "semacquire", sthread(th), name, 1); c.err != nil {
				return
			}
			n, err := s.f.raw.Do(ctx, s.f.raw.B().Incr().Key(counter).Build()).AsInt64()
			if err != nil {
				c.err = err
				return
			}
			most = max(most, n)
			time.Sleep(5 * time.Millisecond)
			if c.err = s.f.raw.Do(ctx, s.f.raw.B().Decr().Key(counter).Build()).Error(); c.err != nil {
				return
			}
			if c.err = s.none(ctx, "semrelease", name, 1); c.err != nil {
				return
			}
		}
		c.val, c.at = strconv.FormatInt(most, 10), time.Now()
	}()
	return c
}
func (s *javaSyncer) psemTrySet(ctx context.Context, name string, n int) (bool, error) {
	return s.b(ctx, "psemtryset", name, n)
}
func (s *javaSyncer) psemAvail(ctx context.Context, name string) (int, error) {
	return s.i(ctx, "psemavail", name)
}
func (s *javaSyncer) psemAcquireAsync(_ context.Context, th int, name string, lease time.Duration) *call {
	l := lease.Milliseconds()
	if lease < 0 {
		l = -1
	}
	return javaAsync(s.j.Send("psemacquire", sthread(th), name, l))
}
func (s *javaSyncer) psemAcquireN(ctx context.Context, th int, name string, n int, lease time.Duration) ([]string, error) {
	l := lease.Milliseconds()
	if lease < 0 {
		l = -1
	}
	v, err := s.j.Do(ctx, "psemacquiren", sthread(th), name, n, l)
	if err != nil {
		return nil, err
	}
	return strings.Split(v, ","), nil
}
func (s *javaSyncer) psemReleaseN(ctx context.Context, name string, ids []string) error {
	return s.none(ctx, "psemreleasen", name, strings.Join(ids, ","))
}
func (s *javaSyncer) psemTryReleaseN(ctx context.Context, name string, ids []string) (int, error) {
	return s.i(ctx, "psemtryreleasen", name, strings.Join(ids, ","))
}
func (s *javaSyncer) psemRelease(ctx context.Context, name, id string) error {
	return s.none(ctx, "psemrelease", name, id)
}
func (s *javaSyncer) psemTryRelease(ctx context.Context, name, id string) (bool, error) {
	return s.b(ctx, "psemtryrelease", name, id)
}
func (s *javaSyncer) psemUpdate(ctx context.Context, name, id string, lease time.Duration) (bool, error) {
	return s.b(ctx, "psemupdate", name, id, lease.Milliseconds())
}
func (s *javaSyncer) latchTrySet(ctx context.Context, name string, n int64) (bool, error) {
	return s.b(ctx, "latchtryset", name, n)
}
func (s *javaSyncer) latchCountDown(ctx context.Context, name string) error {
	return s.none(ctx, "latchcountdown", name)
}
func (s *javaSyncer) latchCount(ctx context.Context, name string) (int64, error) {
	n, err := s.i(ctx, "latchcount", name)
	return int64(n), err
}
func (s *javaSyncer) latchAwaitAsync(_ context.Context, th int, name string) *call {
	return javaAsync(s.j.Send("latchawait", sthread(th), name, -1))
}
func (s *javaSyncer) waitParked(t *testing.T, th int, _ string, _ int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		p, err := s.j.Parked(context.Background(), sthread(th))
		return err == nil && p
	}, 30*time.Second, time.Millisecond, "Java thread %s never parked", sthread(th))
}
func (s *javaSyncer) waiters(t *testing.T, ch string) int64 {
	return numsub(t, s.f.raw, ch, s.f.sharded)
}
