package interop_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/interop_test/driver"
	"github.com/goredisson/locks/rlock"
)

// The MultiLock and RedLock scenarios run over three independent masters:
// a Go service (one Client per master) and JVMs in masters mode (one
// RedissonClient per master), as Go/Java, Java/Go and Java/Java.

// mlSide is one service over the masters.
type mlSide interface {
	String() string
	java() bool
	// tryLock: red selects a RedLock, else a MultiLock, over every
	// master's lock called name; wait < 0 is one attempt (Java's
	// tryLock()).
	tryLock(ctx context.Context, owner int, red bool, name string, wait, lease time.Duration) (bool, error)
	lock(ctx context.Context, owner int, red bool, name string) error
	unlock(ctx context.Context, owner int, red bool, name string) error
	// member locks and unlocks the lock called name on master i alone.
	member(ctx context.Context, owner, i int, name string, lock bool) error
	// tryMember tries it within wait.
	tryMember(ctx context.Context, owner, i int, name string, wait time.Duration) (bool, error)
	// incr: n times { lock the RedLock; key on master 0 += 1; unlock }.
	incr(ctx context.Context, owner int, name, key string, n int) error
}

type goML struct {
	cs  []*rlock.Client
	raw *masterSet
}

func (g *goML) String() string { return "Go" }
func (g *goML) java() bool     { return false }
func (g *goML) group(red bool, name string) rlock.Locker {
	var ls []rlock.Locker
	for _, c := range g.cs {
		ls = append(ls, c.Lock(name))
	}
	if red {
		return rlock.NewRedLock(ls...)
	}
	return rlock.NewMultiLock(ls...)
}
func octx(ctx context.Context, owner int) context.Context {
	return rlock.WithOwner(ctx, int64(1000+owner))
}
func (g *goML) tryLock(ctx context.Context, owner int, red bool, name string, wait, lease time.Duration) (bool, error) {
	return g.group(red, name).TryLock(octx(ctx, owner), max(wait, 0), lease)
}
func (g *goML) lock(ctx context.Context, owner int, red bool, name string) error {
	return g.group(red, name).Lock(octx(ctx, owner))
}
func (g *goML) unlock(ctx context.Context, owner int, red bool, name string) error {
	return g.group(red, name).Unlock(octx(ctx, owner))
}
func (g *goML) member(ctx context.Context, owner, i int, name string, lock bool) error {
	l := g.cs[i].Lock(name)
	if lock {
		return l.Lock(octx(ctx, owner))
	}
	return l.Unlock(octx(ctx, owner))
}
func (g *goML) tryMember(ctx context.Context, owner, i int, name string, wait time.Duration) (bool, error) {
	return g.cs[i].Lock(name).TryLock(octx(ctx, owner), wait, 0)
}
func (g *goML) incr(ctx context.Context, owner int, name, key string, n int) error {
	l := g.group(true, name)
	c := octx(ctx, owner)
	for range n {
		if err := l.Lock(c); err != nil {
			return err
		}
		v, err := g.raw.raw[0].Do(ctx, g.raw.raw[0].B().Get().Key(key).Build()).AsInt64()
		if err != nil && !isNil(err) {
			return err
		}
		time.Sleep(2 * time.Millisecond)
		if err := g.raw.raw[0].Do(ctx, g.raw.raw[0].B().Set().Key(key).Value(strconv.FormatInt(v+1, 10)).Build()).Error(); err != nil {
			return err
		}
		if err := l.Unlock(c); err != nil {
			return err
		}
	}
	return nil
}

type javaML struct {
	j  *driver.JVM
	id string
}

func (s *javaML) String() string { return "Java " + s.id }
func (s *javaML) java() bool     { return true }
func mlSpec(red bool, name string) string {
	if red {
		return "red@" + name
	}
	return "multi@" + name
}
func thread(owner int) string { return "T" + strconv.Itoa(owner) }
func (s *javaML) tryLock(ctx context.Context, owner int, red bool, name string, wait, lease time.Duration) (bool, error) {
	if wait < 0 {
		return s.j.TryLock(ctx, thread(owner), mlSpec(red, name))
	}
	if lease <= 0 {
		lease = -1
	}
	return s.j.TryLockWait(ctx, thread(owner), mlSpec(red, name), wait, lease)
}
func (s *javaML) lock(ctx context.Context, owner int, red bool, name string) error {
	return s.j.Lock(ctx, thread(owner), mlSpec(red, name))
}
func (s *javaML) unlock(ctx context.Context, owner int, red bool, name string) error {
	return s.j.Unlock(ctx, thread(owner), mlSpec(red, name))
}
func (s *javaML) member(ctx context.Context, owner, i int, name string, lock bool) error {
	spec := fmt.Sprintf("m%d@%s", i, name)
	if lock {
		return s.j.Lock(ctx, thread(owner), spec)
	}
	return s.j.Unlock(ctx, thread(owner), spec)
}
func (s *javaML) tryMember(ctx context.Context, owner, i int, name string, wait time.Duration) (bool, error) {
	return s.j.TryLockWait(ctx, thread(owner), fmt.Sprintf("m%d@%s", i, name), wait, -1)
}
func (s *javaML) incr(ctx context.Context, owner int, name, key string, n int) error {
	_, err := s.j.Incr(ctx, thread(owner), "red@"+name, key, n, 2*time.Millisecond)
	return err
}

// masterSet is the three masters of one version's run.
type masterSet struct {
	srv []*redistest.Server
	raw []rueidis.Client
}

func isNil(err error) bool { return rueidis.IsRedisNil(err) }

const suiteMulti = "TestRedissonMultiLock"

// TestRedissonMultiLock: MultiLock and RedLock over three independent
// masters against every Redisson version.
func TestRedissonMultiLock(t *testing.T) {
	versions := mustHaveDeps(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			ms := &masterSet{srv: redistest.Masters(t, 3)}
			var addrs []string
			for _, s := range ms.srv {
				rc, err := s.Client()
				require.NoError(t, err)
				t.Cleanup(rc.Close)
				ms.raw = append(ms.raw, rc)
				addrs = append(addrs, s.Addr)
			}
			g := &goML{raw: ms}
			for _, s := range ms.srv {
				rc, err := s.Client()
				require.NoError(t, err)
				c, err := rlock.New(rc, rlock.WithCommandTimeout(time.Second))
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.Close(); rc.Close() })
				g.cs = append(g.cs, c)
			}
			jvm := func() *driver.JVM {
				j := startJVM(t, driver.Config{Version: v, RedisAddrs: addrs, Masters: true})
				t.Cleanup(func() {
					assert.NoError(t, j.Close())
					if t.Failed() {
						t.Logf("JVM stderr:\n%s", j.Stderr())
					}
				})
				return j
			}
			ja, jb := &javaML{j: jvm(), id: "A"}, &javaML{j: jvm(), id: "B"}
			pairs := []struct {
				name string
				a, b mlSide
			}{{"GoJava", g, ja}, {"JavaGo", ja, g}, {"JavaJava", ja, jb}}
			run := func(scenario string, fn func(t *testing.T, a, b mlSide, name string)) {
				t.Run(scenario, func(t *testing.T) {
					for _, p := range pairs {
						t.Run(p.name, func(t *testing.T) { fn(t, p.a, p.b, lockName(t, "m")) })
					}
				})
			}
			run("MultiExcludes", testMultiExcludes)
			run("RedQuorum", testRedQuorum)
			run("RedCounter", func(t *testing.T, a, b mlSide, name string) { testRedCounter(t, ms, a, b, name) })
			run("RedMasterDown", func(t *testing.T, a, b mlSide, name string) { testRedMasterDown(t, ms, a, b, name) })
		})
	}
	logSummary(t, suiteMulti)
}

// testMultiExcludes: a MultiLock held by one side keeps the other side's
// MultiLock and its single-member lock out; once unlocked, the other
// side's MultiLock gets in; none of the failed attempts leaves a member
// held.
func testMultiExcludes(t *testing.T, a, b mlSide, name string) {
	ctx := scenarioCtx(t)
	require.NoError(t, a.lock(ctx, 1, false, name))
	ok, err := b.tryLock(ctx, 2, false, name, -1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "%s's MultiLock got in while %s's was held", b, a)
	ok, err = b.tryLock(ctx, 2, false, name, 300*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	for i := range 3 {
		ok, err := b.tryMember(ctx, 3, i, name, 200*time.Millisecond)
		require.NoError(t, err)
		assert.False(t, ok, "%s's lock on master %d alone got in", b, i)
	}
	require.NoError(t, a.unlock(ctx, 1, false, name))
	ok, err = b.tryLock(ctx, 2, false, name, -1, 0)
	require.NoError(t, err)
	assert.True(t, ok, "%s's MultiLock kept out after the unlock", b)
	require.NoError(t, b.unlock(ctx, 2, false, name))
	// The other way: a single member held keeps a MultiLock out.
	require.NoError(t, b.member(ctx, 3, 1, name, true))
	ok, err = a.tryLock(ctx, 1, false, name, -1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "%s's MultiLock got in over %s's member", a, b)
	require.NoError(t, b.member(ctx, 3, 1, name, false))
}

// testRedQuorum: with one member held elsewhere a RedLock still acquires
// (2 of 3); with two it fails; the two sides' RedLocks exclude each other.
func testRedQuorum(t *testing.T, a, b mlSide, name string) {
	ctx := scenarioCtx(t)
	require.NoError(t, b.member(ctx, 3, 0, name, true))
	ok, err := a.tryLock(ctx, 1, true, name, 500*time.Millisecond, 5*time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "%s's RedLock: 2 of 3 is a quorum", a)
	ok, err = b.tryLock(ctx, 2, true, name, -1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "%s's RedLock got in while %s's held a quorum", b, a)
	require.NoError(t, a.unlock(ctx, 1, true, name))
	require.NoError(t, b.member(ctx, 3, 1, name, true))
	ok, err = a.tryLock(ctx, 1, true, name, -1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "%s's RedLock: 1 of 3 is not a quorum", a)
	require.NoError(t, b.member(ctx, 3, 0, name, false))
	require.NoError(t, b.member(ctx, 3, 1, name, false))
	ok, err = a.tryLock(ctx, 1, true, name, -1, 0)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, a.unlock(ctx, 1, true, name))
}

// testRedCounter: both sides' RedLocks on the same names guard one
// counter; no increment is lost.
func testRedCounter(t *testing.T, ms *masterSet, a, b mlSide, name string) {
	ctx := scenarioCtx(t)
	key := name + ":counter"
	const n = 15
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i, s := range []mlSide{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.incr(ctx, 10+i, name, key, n)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	v, err := ms.raw[0].Do(ctx, ms.raw[0].B().Get().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(4*n), v, "increments lost: two RedLock holders at once")
}

// testRedMasterDown: with one master down, a RedLock locks and unlocks (2
// of 3) and still excludes the other side's.
func testRedMasterDown(t *testing.T, ms *masterSet, a, b mlSide, name string) {
	ctx := scenarioCtx(t)
	require.NoError(t, ms.srv[2].Kill())
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, ms.srv[2].Restart(rctx))
	}()
	require.NoError(t, a.lock(ctx, 1, true, name))
	ok, err := b.tryLock(ctx, 2, true, name, -1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "%s's RedLock got in while %s's held a quorum", b, a)
	require.NoError(t, a.unlock(ctx, 1, true, name))
	ok, err = b.tryLock(ctx, 2, true, name, -1, 0)
	require.NoError(t, err)
	assert.True(t, ok, "%s's RedLock with one master down", b)
	require.NoError(t, b.unlock(ctx, 2, true, name))
}
