package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// masters is n independent masters, each with a lock client per service
// (services[s][i] is service s's client of master i) and a raw client.
type masters struct {
	srv      []*redistest.Server
	raw      []rueidis.Client
	services [][]*rlock.Client
}

func newMasters(t *testing.T, n, services int, opts ...rlock.Option) *masters {
	t.Helper()
	m := &masters{srv: redistest.Masters(t, n)}
	for _, s := range m.srv {
		rc, err := s.Client()
		require.NoError(t, err)
		t.Cleanup(rc.Close)
		m.raw = append(m.raw, rc)
	}
	for range services {
		var cs []*rlock.Client
		for _, s := range m.srv {
			rc, err := s.Client()
			require.NoError(t, err)
			c, err := rlock.New(rc, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close(); rc.Close() })
			cs = append(cs, c)
		}
		m.services = append(m.services, cs)
	}
	return m
}

// locks returns service s's member locks called name, one per master.
func (m *masters) locks(s int, name string) []rlock.Locker {
	var ls []rlock.Locker
	for _, c := range m.services[s] {
		ls = append(ls, c.Lock(name))
	}
	return ls
}

func (m *masters) pttl(t *testing.T, i int, key string) time.Duration {
	t.Helper()
	n, err := m.raw[i].Do(context.Background(), m.raw[i].B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return time.Duration(n) * time.Millisecond
}

// TestMultiLock is Redisson's RedissonMultiLockTest: lock and unlock over
// three masters; of ten concurrent single attempts exactly one wins, at
// once; a waiter gets it after the holder; a single member held elsewhere
// keeps a MultiLock out and the attempt leaves nothing behind; a lease
// ends up on every member.
func TestMultiLock(t *testing.T) {
	m := newMasters(t, 3, 2)
	ctx := context.Background()
	name := "multi"
	ml := rlock.NewMultiLock(m.locks(0, name)...)
	assert.Equal(t, "multi,multi,multi", ml.Name())
	require.NoError(t, ml.LockLease(ctx, 10*time.Second))
	held, err := ml.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	for i := range 3 {
		assert.InDelta(t, float64(10*time.Second), float64(m.pttl(t, i, name)), float64(time.Second))
	}
	require.NoError(t, ml.Unlock(ctx))
	held, err = ml.IsHeld(ctx)
	require.NoError(t, err)
	assert.False(t, held)

	// testWaitAndLeaseTimeouts: ten single attempts, exactly one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			octx := rlock.WithOwner(ctx, int64(100+g))
			ok, err := rlock.NewMultiLock(m.locks(g%2, name)...).TryLock(octx, 0, 10*time.Second)
			assert.NoError(t, err)
			if ok {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load())
	assert.Less(t, time.Since(start), time.Second)
	for i := range 3 {
		_, err := m.services[0][i].Lock(name).ForceUnlock(ctx)
		require.NoError(t, err)
	}

	// testMultiThreads: a waiter gets it once the holder unlocks.
	holder := rlock.WithOwner(ctx, 1)
	require.NoError(t, ml.Lock(holder))
	got := make(chan error)
	go func() {
		other := rlock.NewMultiLock(m.locks(1, name)...)
		err := other.Lock(ctx)
		if err == nil {
			err = other.Unlock(ctx)
		}
		got <- err
	}()
	// The waiter has tried and parked (on a member of the other service's
	// clients): it was kept out.
	require.Eventually(t, func() bool {
		n := 0
		for _, c := range m.services[1] {
			n += c.Stats().Parked
		}
		return n == 1
	}, 5*time.Second, time.Millisecond, "the waiter never parked")
	select {
	case err := <-got:
		t.Fatalf("the waiter got in while the MultiLock was held: %v", err)
	default:
	}
	require.NoError(t, ml.Unlock(holder))
	require.NoError(t, <-got)

	// One member held elsewhere keeps a MultiLock out; the members it took
	// are released again.
	require.NoError(t, m.services[1][1].Lock(name).Lock(ctx))
	ok, err := ml.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = ml.TryLock(ctx, 300*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	for _, i := range []int{0, 2} {
		assert.Equal(t, rlock.TTLNotLocked, m.pttl(t, i, name), "member %d left held", i)
	}
	require.NoError(t, m.services[1][1].Lock(name).Unlock(ctx))

	// A wait and a lease: members are taken for twice the wait, then set
	// to the lease.
	ok, err = ml.TryLock(ctx, 5*time.Second, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	for i := range 3 {
		ttl := m.pttl(t, i, name)
		assert.LessOrEqual(t, ttl, time.Second, "member %d", i)
		assert.Greater(t, ttl, 500*time.Millisecond, "member %d", i)
	}
	hctx, err := ml.HoldContext(ctx)
	require.NoError(t, err)
	select {
	case <-hctx.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the MultiLock's hold context outlived the lease set on its members")
	}
	assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLeaseExpired)
	// The hold context ends at the lease as the client reckons it, from
	// before the lease was set: the members' keys may outlive it by the
	// lease call's trip to Redis.
	for i := range 3 {
		require.Eventually(t, func() bool { return m.pttl(t, i, name) == rlock.TTLNotLocked },
			time.Second, time.Millisecond, "member %d outlived its lease", i)
	}
	assert.ErrorIs(t, ml.Unlock(ctx), rlock.ErrNotHeld)

	// Bad input.
	_, err = rlock.NewMultiLock().TryLock(ctx, 0, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = rlock.NewRedLock(nil).TryLock(ctx, 0, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
}

// TestRedLock is Redisson's RedissonRedLockTest: a quorum of members
// suffices, fewer fail; a master down still locks and unlocks; the hold
// context ends below a quorum; an acquisition that outlived its lease is
// not obtained.
func TestRedLock(t *testing.T) {
	// A short watchdog: a member's loss is noticed within a second.
	m := newMasters(t, 3, 2, rlock.WithWatchdogTimeout(3*time.Second))
	ctx := context.Background()
	name := "red"
	rl := rlock.NewRedLock(m.locks(0, name)...)
	other := m.services[1]

	// testLockSuccess2: one member held elsewhere, 2 of 3 is a quorum.
	require.NoError(t, other[1].Lock(name).Lock(ctx))
	ok, err := rl.TryLock(ctx, 500*time.Millisecond, 5*time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
	held, err := rl.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held, "a quorum is held")
	require.NoError(t, rl.Unlock(ctx))
	// testLockFailed: two held elsewhere, 1 of 3 is not.
	require.NoError(t, other[2].Lock(name).Lock(ctx))
	ok, err = rl.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, rlock.TTLNotLocked, m.pttl(t, 0, name), "the member taken is released")
	ok, err = rl.TryLock(ctx, 300*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, other[1].Lock(name).Unlock(ctx))
	require.NoError(t, other[2].Lock(name).Unlock(ctx))

	// The hold context lives while a quorum is held.
	require.NoError(t, rl.Lock(ctx))
	hctx, err := rl.HoldContext(ctx)
	require.NoError(t, err)
	_, err = other[0].Lock(name).ForceUnlock(ctx)
	require.NoError(t, err)
	held, err = rl.IsHeld(ctx)
	require.NoError(t, err)
	require.True(t, held, "2 of 3 held")
	assert.NoError(t, hctx.Err(), "2 of 3 is still a quorum")
	_, err = other[1].Lock(name).ForceUnlock(ctx)
	require.NoError(t, err)
	// The loss is noticed by the member's watchdog at its next renewal.
	select {
	case <-hctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the RedLock's hold context outlived its quorum")
	}
	assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)
	require.NoError(t, rl.Unlock(ctx), "a RedLock unlocks what is left")

	// Validity: a single attempt with a lease that took longer than the
	// lease (a master busy for 800 ms) is not obtained, though a quorum
	// answered.
	_, err = m.srv[2].Do(ctx, "PING")
	require.NoError(t, err)
	busy := make(chan error, 1)
	go func() {
		// A script that keeps the master busy for 800 ms.
		busy <- m.raw[2].Do(ctx, m.raw[2].B().Eval().Script(`local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
while true do
  local n = redis.call('TIME')
  if n[1] * 1000000 + n[2] - start > 800000 then return 1 end
end`).Numkeys(0).Build()).Error()
	}()
	// The script has started: the master stops answering (the probe's
	// connection was made before it). 300 ms unanswered: longer than a
	// loaded machine delays a PING, and detected with at least 500 ms of
	// the script left, past the 150 ms lease below.
	require.Eventually(t, func() bool {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := m.srv[2].Do(pctx, "PING")
		return errors.Is(err, context.DeadlineExceeded)
	}, 5*time.Second, time.Millisecond, "the busy script never started")
	start := time.Now()
	ok, err = rl.TryLock(ctx, 0, 150*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, ok, "taken after %v, past its lease", time.Since(start))
	require.NoError(t, <-busy)
	// The busy master runs the member's attempt after the busy script, and
	// the late grant is given back when its reply arrives, after that
	// script's own reply may have reached this goroutine: wait for it.
	for i := range 3 {
		assert.Eventually(t, func() bool { return m.pttl(t, i, name) == rlock.TTLNotLocked },
			5*time.Second, 5*time.Millisecond, "member %d not released again", i)
	}
	// With a wait, the members' lease (twice the wait) covers the
	// acquisition: waiting for a member held elsewhere is fine.
	require.NoError(t, other[2].Lock(name).LockLease(ctx, 600*time.Millisecond))
	ok, err = rlock.NewRedLock(m.locks(0, name)[2]).TryLock(ctx, 3*time.Second, 200*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.LessOrEqual(t, m.pttl(t, 2, name), 200*time.Millisecond)
	require.NoError(t, rlock.NewRedLock(m.locks(0, name)[2]).Unlock(ctx))
	// A MultiLock has no validity rule: the same wait succeeds.
	require.NoError(t, other[2].Lock(name).LockLease(ctx, 600*time.Millisecond))
	ml := rlock.NewMultiLock(m.locks(0, name)[2])
	ok, err = ml.TryLock(ctx, 3*time.Second, 200*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, ml.Unlock(ctx))

	// testConnectionFailed: a master down, the RedLock still locks and
	// unlocks (2 of 3), without waiting for the dead master.
	require.NoError(t, m.srv[2].Kill())
	start = time.Now()
	require.NoError(t, rl.Lock(ctx))
	// The dead master's member is bounded: the quorum answers at once.
	assert.Less(t, time.Since(start), 3*time.Second)
	ok, err = rlock.NewRedLock(m.locks(1, name)...).TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "another owner got a quorum")
	require.NoError(t, rl.Unlock(ctx))
}

// TestRedLockMasterRestart: counters under a RedLock over three masters,
// from two services, while one master is killed and restarted empty: no
// two holders overlap, and every attempt eventually succeeds.
func TestRedLockMasterRestart(t *testing.T) {
	m := newMasters(t, 3, 2, rlock.WithCommandTimeout(500*time.Millisecond))
	ctx := context.Background()
	name := "red-counter"
	var inside, total atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			octx := rlock.WithOwner(ctx, int64(g+1))
			rl := rlock.NewRedLock(m.locks(g%2, name)...)
			for range 15 {
				// As Redisson's testTryLockLeasetime: try again on false.
				for {
					ok, err := rl.TryLock(octx, 4*time.Second, 2*time.Second)
					if !assert.NoError(t, err) {
						return
					}
					if ok {
						break
					}
				}
				assert.Equal(t, int32(1), inside.Add(1), "two RedLock holders at once")
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				total.Add(1)
				_ = rl.Unlock(octx)
			}
		}()
	}
	finished := make(chan struct{})
	reach := func(n int32) bool {
		for total.Load() < n {
			select {
			case <-finished:
				return false
			case <-time.After(5 * time.Millisecond):
			}
		}
		return true
	}
	go func() {
		defer close(stop)
		if !reach(20) {
			return
		}
		assert.NoError(t, m.srv[1].Kill())
		if !reach(40) {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		assert.NoError(t, m.srv[1].Restart(rctx))
	}()
	wg.Wait()
	close(finished)
	<-stop
	assert.Equal(t, int32(6*15), total.Load())
}

// TestGroupReviewRegressions: a read member of a MultiLock keeps the
// lease asked for (it is taken with it, since its TTL cannot be set
// afterwards); a typed nil member is invalid input, not a panic.
func TestGroupReviewRegressions(t *testing.T) {
	m := newMasters(t, 2, 2)
	ctx := context.Background()
	name := "group-review"
	rw := m.services[0][0].ReadWriteLock(name)
	ml := rlock.NewMultiLock(rw.ReadLock(), m.services[0][1].Lock(name))
	ok, err := ml.TryLock(ctx, 200*time.Millisecond, 3*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, m.pttl(t, 0, name), 2*time.Second, "the read member keeps the lease")
	ok, err = m.services[1][0].ReadWriteLock(name).WriteLock().TryLock(ctx, 1200*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok, "a writer got in within the MultiLock's lease")
	require.NoError(t, ml.Unlock(ctx))

	// Java's -1 lease is the watchdog, with any member kind.
	ok, err = ml.TryLock(ctx, 0, -1)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, ml.Unlock(ctx))

	var nilLock *rlock.FairLock
	_, err = rlock.NewMultiLock(nilLock).TryLock(ctx, 0, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument)
	assert.ErrorIs(t, rlock.NewRedLock(m.services[0][0].Lock(name), nilLock).Unlock(ctx), rlock.ErrInvalidArgument)
}

// proxiedMasters starts 3 masters, the third behind a TCP proxy, and
// returns a lock called name on a Client of each (the third's with the
// options opts gives for the proxy, if opts is not nil) and a raw client
// of each (the third's through the proxy).
func proxiedMasters(t *testing.T, name string, opts func(*redistest.Proxy) []rlock.Option) ([]*redistest.Server, *redistest.Proxy, []rueidis.Client, []rlock.Locker) {
	srv := redistest.Masters(t, 3)
	proxy := redistest.NewProxy(t, srv[2].Addr)
	var locks []rlock.Locker
	var raw []rueidis.Client
	for i, s := range srv {
		rc, err := s.Client(func(o *rueidis.ClientOption) {
			if i == 2 {
				o.InitAddress = []string{proxy.Addr}
			}
		})
		require.NoError(t, err)
		var o []rlock.Option
		if i == 2 && opts != nil {
			o = opts(proxy)
		}
		c, err := rlock.New(rc, o...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); rc.Close() })
		t.Cleanup(proxy.Resume) // before the clients close (cleanups run last first)
		raw = append(raw, rc)
		locks = append(locks, c.Lock(name))
	}
	return srv, proxy, raw, locks
}

// TestRedLockMasterStallsAfterGrant: a master that grants its member and
// then stops answering (before the lease is set on the members) must not
// hold up the RedLock: the members' leases run from the moment they are
// set, so a TryLock that returned true only after a long wait for that
// master handed its caller a lock whose other members had already run out
// (make test's TestStressRedLock, under load: Unlock found every live
// member gone 2 ms after the section began). The lease set, TryLock
// returns within a few member timeouts, the live members keep the whole
// lease, and Unlock releases them however long the stalled master takes.
func TestRedLockMasterStallsAfterGrant(t *testing.T) {
	var stalled atomic.Bool
	srv, proxy, raw, locks := proxiedMasters(t, "red-stall", func(p *redistest.Proxy) []rlock.Option {
		// The stall begins when master 2's member is granted: after its
		// acquire's reply, before the lease is set.
		return []rlock.Option{rlock.WithHooks(rlock.Hooks{Acquire: func(e rlock.AcquireEvent) {
			if e.Outcome == rlock.Acquired && stalled.CompareAndSwap(false, true) {
				p.Stall()
			}
		}})}
	})
	ctx, cancel := context.WithTimeout(rlock.WithOwner(context.Background(), 1), 20*time.Second)
	defer cancel()
	rl := rlock.NewRedLock(locks...)
	const lease = 2 * time.Second
	begin := time.Now()
	// A wait: the members are taken with a longer lease (twice the wait)
	// and then given the lease (PEXPIRE).
	ok, err := rl.TryLock(ctx, 1500*time.Millisecond, lease)
	took := time.Since(begin)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, stalled.Load(), "master 2's member was never granted: the test proves nothing")
	assert.Less(t, took, 800*time.Millisecond, "TryLock waited for the stalled master")
	for i := range 2 {
		n, err := raw[i].Do(context.Background(), raw[i].B().Pttl().Key("red-stall").Build()).AsInt64()
		require.NoError(t, err)
		pttl := time.Duration(n) * time.Millisecond
		assert.LessOrEqual(t, pttl, lease, "master %d's member was not given the lease", i)
		assert.Greater(t, pttl, lease-500*time.Millisecond, "master %d's member does not keep the lease from when it was set", i)
	}
	held, err := rl.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	begin = time.Now()
	require.NoError(t, rl.Unlock(ctx))
	assert.Less(t, time.Since(begin), 800*time.Millisecond, "Unlock waited for the stalled master")
	for i := range 2 {
		n, err := raw[i].Do(context.Background(), raw[i].B().Exists().Key("red-stall").Build()).AsInt64()
		require.NoError(t, err)
		assert.Zero(t, n, "master %d still holds its member after Unlock", i)
	}
	// The stalled master's member, given up when its lease could not be
	// set, is released once the master answers again (its release waited
	// behind the lease-setting, in the background).
	direct, err := srv[2].Client()
	require.NoError(t, err)
	defer direct.Close()
	proxy.Resume()
	assert.Eventually(t, func() bool {
		n, err := direct.Do(context.Background(), direct.B().Exists().Key("red-stall").Build()).AsInt64()
		return err == nil && n == 0
	}, 15*time.Second, 20*time.Millisecond, "master 2 still holds the member the RedLock gave up")
}

// TestRedLockMasterStallsBeforeGrant: a master that stops answering before
// its member is taken fails that member within the member timeout (the
// attempt is not held up by the command timeout, nor by a new connection's
// handshake that rueidis does not bound by ctx), the quorum of the others
// is a grant, and the stalled master's attempt, once it runs, is given
// back: nothing stays held there.
func TestRedLockMasterStallsBeforeGrant(t *testing.T) {
	srv, proxy, raw, locks := proxiedMasters(t, "red-stall-before", nil)
	direct, err := srv[2].Client()
	require.NoError(t, err)
	t.Cleanup(direct.Close)
	ctx, cancel := context.WithTimeout(rlock.WithOwner(context.Background(), 1), 20*time.Second)
	defer cancel()
	rl := rlock.NewRedLock(locks...)
	for _, style := range []string{"one attempt", "a wait"} {
		proxy.Stall()
		wait := time.Duration(0)
		if style == "a wait" {
			wait = 300 * time.Millisecond
		}
		// (A few tries: on a loaded machine a live master may also miss
		// the member bound of a single attempt; none may wait long.)
		var ok bool
		for try := 0; try < 5 && !ok; try++ {
			begin := time.Now()
			var err error
			ok, err = rl.TryLock(ctx, wait, 0)
			took := time.Since(begin)
			require.NoError(t, err, style)
			assert.Less(t, took, wait+time.Second, "%s: TryLock waited for the stalled master", style)
		}
		require.True(t, ok, style)
		for i := range 2 {
			n, err := raw[i].Do(context.Background(), raw[i].B().Exists().Key("red-stall-before").Build()).AsInt64()
			require.NoError(t, err)
			assert.Equal(t, int64(1), n, "%s: master %d's member", style, i)
		}
		begin := time.Now()
		require.NoError(t, rl.Unlock(ctx), style)
		assert.Less(t, time.Since(begin), time.Second, "%s: Unlock waited for the stalled master", style)
		proxy.Resume()
		// The stalled attempt reaches master 2 now; whatever it took is
		// given back (by the engine or the RedLock's late release).
		assert.Eventually(t, func() bool {
			n, err := direct.Do(context.Background(), direct.B().Exists().Key("red-stall-before").Build()).AsInt64()
			return err == nil && n == 0
		}, 15*time.Second, 20*time.Millisecond, "%s: master 2 still holds the member the RedLock gave up", style)
		for i := range 2 {
			n, err := raw[i].Do(context.Background(), raw[i].B().Exists().Key("red-stall-before").Build()).AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "%s: master %d still holds its member after Unlock", style, i)
		}
	}
}

// TestRedLockLateGrantGivenBack: a member attempt that takes its member
// after the RedLock stopped waiting for it (here: its return is held up
// in the Acquire hook, as a starved goroutine would be) is given back in
// the background, and until then the owner's next attempts on that member
// fail, so that the give-back (an Unlock of one level) cannot take away a
// level a newer attempt took. Counts end exact: nothing held anywhere.
func TestRedLockLateGrantGivenBack(t *testing.T) {
	srv := redistest.Masters(t, 3)
	release := make(chan struct{})
	var held atomic.Bool
	var locks []rlock.Locker
	var raw []rueidis.Client
	for i, s := range srv {
		rc, err := s.Client()
		require.NoError(t, err)
		var opts []rlock.Option
		if i == 2 {
			opts = append(opts, rlock.WithHooks(rlock.Hooks{Acquire: func(e rlock.AcquireEvent) {
				if e.Outcome == rlock.Acquired && held.CompareAndSwap(false, true) {
					<-release
				}
			}}))
		}
		c, err := rlock.New(rc, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); rc.Close() })
		raw = append(raw, rc)
		locks = append(locks, c.Lock("red-late"))
	}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	count := func(i int) int64 {
		m, err := raw[i].Do(context.Background(), raw[i].B().Hgetall().Key("red-late").Build()).AsStrMap()
		require.NoError(t, err)
		var n int64
		for _, v := range m {
			var c int64
			_, _ = fmt.Sscan(v, &c)
			n += c
		}
		return n
	}
	ctx := rlock.WithOwner(context.Background(), 1)
	rl := rlock.NewRedLock(locks...)
	// With a wait, so that a live master slowed by a loaded machine is
	// tried again; member 2's first attempt is waited for 2.2 s.
	ok, err := rl.TryLock(ctx, 2*time.Second, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, held.Load(), "member 2's attempt never reached its hook")
	// Re-entered while member 2's late attempt is still out: members 0
	// and 1 go to 2 levels, member 2 is not attempted.
	ok, err = rl.TryLock(ctx, 2*time.Second, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []int64{2, 2, 1}, []int64{count(0), count(1), count(2)}, "member 2 holds the late grant alone")
	close(release)
	assert.Eventually(t, func() bool { return count(2) == 0 }, 10*time.Second, 10*time.Millisecond, "the late grant was not given back")
	require.NoError(t, rl.Unlock(ctx))
	require.NoError(t, rl.Unlock(ctx))
	assert.Equal(t, []int64{0, 0, 0}, []int64{count(0), count(1), count(2)}, "levels left after the owner's last Unlock")
}

// TestGroupUnlockSemantics: a MultiLock unlocks its members in order and
// stops at the first that is not held (Redisson 4.x), so the members after
// it stay held; a RedLock unlocks every member whatever the others do
// (Redisson ignores the errors), and reports ErrNotHeld only when it held
// none of them (a deliberate difference: Redisson reports nothing).
func TestGroupUnlockSemantics(t *testing.T) {
	m := newMasters(t, 3, 1)
	ctx := context.Background()

	name := "unlock-multi"
	ml := rlock.NewMultiLock(m.locks(0, name)...)
	require.NoError(t, ml.Lock(ctx))
	// The middle member's hold is gone (force-unlocked by an operator).
	existed, err := m.services[0][1].Lock(name).ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, existed)
	assert.ErrorIs(t, ml.Unlock(ctx), rlock.ErrNotHeld, "the second member's error")
	assert.Equal(t, rlock.TTLNotLocked, m.pttl(t, 0, name), "the first member, before the error, is unlocked")
	assert.Greater(t, m.pttl(t, 2, name), time.Duration(0), "the third member, after the error, stays held")
	require.NoError(t, m.services[0][2].Lock(name).Unlock(ctx))

	name = "unlock-red"
	rl := rlock.NewRedLock(m.locks(0, name)...)
	require.NoError(t, rl.Lock(ctx))
	existed, err = m.services[0][0].Lock(name).ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, existed)
	require.NoError(t, rl.Unlock(ctx), "a member not held does not stop a RedLock's unlock")
	for i := range 3 {
		assert.Equal(t, rlock.TTLNotLocked, m.pttl(t, i, name), "member %d", i)
	}
	assert.ErrorIs(t, rl.Unlock(ctx), rlock.ErrNotHeld, "none held")
}

// TestRedLockHeldAcrossMasterLoss: a RedLock held while one of its three
// masters is stopped and then restarted empty keeps its quorum: it stays
// held (IsHeld, HoldContext) through renewals, another service's RedLock is
// kept out while the master is down and after it comes back empty (it can
// take that one member only), and the unlock frees it for the other.
func TestRedLockHeldAcrossMasterLoss(t *testing.T) {
	m := newMasters(t, 3, 2, rlock.WithCommandTimeout(500*time.Millisecond), rlock.WithWatchdogTimeout(900*time.Millisecond))
	ctx := context.Background()
	name := "red-loss"
	a := rlock.NewRedLock(m.locks(0, name)...)
	b := rlock.NewRedLock(m.locks(1, name)...)
	require.NoError(t, a.Lock(ctx))
	hctx, err := a.HoldContext(ctx)
	require.NoError(t, err)

	require.NoError(t, m.srv[1].Kill())
	held, err := a.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held, "two of three members still held")
	ok, err := b.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "another RedLock got in with a master down")
	// Two renewals while the master is down: the member's TTL is set back
	// up twice (a 900 ms lease lives through them only if renewed).
	for range 2 {
		last := m.pttl(t, 0, name)
		require.Eventually(t, func() bool {
			ttl := m.pttl(t, 0, name)
			renewed := ttl > last
			last = ttl
			return renewed
		}, 3*time.Second, 10*time.Millisecond, "the watchdog stopped renewing with a master down")
	}

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, m.srv[1].Restart(rctx))
	assert.Equal(t, rlock.TTLNotLocked, m.pttl(t, 1, name), "the master came back empty")
	ok, err = b.TryLock(ctx, 300*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok, "another RedLock got in after the master came back empty")
	for _, i := range []int{0, 2} {
		assert.Greater(t, m.pttl(t, i, name), time.Duration(0), "member %d", i)
	}
	require.NoError(t, hctx.Err(), "the hold was reported lost: %v", context.Cause(hctx))
	held, err = a.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)

	require.NoError(t, a.Unlock(ctx))
	ok, err = b.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.True(t, ok, "the unlock frees it for the other service")
	require.NoError(t, b.Unlock(ctx))
}

// TestGroupMembersReachedConcurrently: a MultiLock's and a RedLock's
// members are reached at once, so that acquiring N members costs about one
// round trip, not N. Every master's link is made slow (each acquire and
// unlock reaches Redis 40 ms late, well within the 100 ms a RedLock gives
// a member's attempt): all three calls must reach their links before the
// first one's delay ends (members in turn would arrive 40 ms apart), which
// no scheduling delay of a loaded machine can fake or break.
func TestGroupMembersReachedConcurrently(t *testing.T) {
	const delay = 40 * time.Millisecond
	ctx := context.Background()
	srvs := redistest.Masters(t, 3)
	acquire, unlock := isScript(scripts.Acquire), isScript(scripts.Unlock)
	slow := func(args []string) bool { return acquire(args) || unlock(args) }
	var faulties []*redistest.Faulty
	var members func(name string) []rlock.Locker
	var clients []*rlock.Client
	for _, s := range srvs {
		rc, err := s.Client()
		require.NoError(t, err)
		f := redistest.NewFaulty(rc)
		c, err := rlock.New(f)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); rc.Close() })
		faulties = append(faulties, f)
		clients = append(clients, c)
	}
	members = func(name string) []rlock.Locker {
		var ls []rlock.Locker
		for _, c := range clients {
			ls = append(ls, c.Lock(name))
		}
		return ls
	}
	// The scripts are loaded first: an EVALSHA answered NOSCRIPT would be
	// followed by a second, slow, EVAL.
	for _, l := range members("warm-up") {
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Unlock(ctx))
	}
	for _, g := range []struct {
		kind  string
		group interface {
			TryLock(context.Context, time.Duration, time.Duration) (bool, error)
			Unlock(context.Context) error
		}
	}{
		{"MultiLock", rlock.NewMultiLock(members("concurrent-multi")...)},
		{"RedLock", rlock.NewRedLock(members("concurrent-red")...)},
	} {
		var mu sync.Mutex
		var arrivals []time.Time
		arrived := func() {
			mu.Lock()
			defer mu.Unlock()
			arrivals = append(arrivals, time.Now())
		}
		// spread is how far apart the calls since the last look reached
		// their links.
		spread := func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			defer func() { arrivals = nil }()
			if len(arrivals) != len(faulties) {
				return time.Hour
			}
			return slices.MaxFunc(arrivals, time.Time.Compare).Sub(slices.MinFunc(arrivals, time.Time.Compare))
		}
		for _, f := range faulties {
			f.Inject(redistest.Rule{Match: slow, Fault: redistest.Slow, Delay: delay, Times: 2, Arrived: arrived}) // the acquire and the unlock
		}
		start := time.Now()
		ok, err := g.group.TryLock(ctx, 0, 0)
		took := time.Since(start)
		require.NoError(t, err, g.kind)
		require.True(t, ok, "%s: not taken after %v", g.kind, took)
		assert.GreaterOrEqual(t, took, delay, "%s: the slow link was not in the way", g.kind)
		d := spread()
		assert.Less(t, d, delay, "%s: its 3 members were taken one after another (arrivals %v apart)", g.kind, d)
		start = time.Now()
		require.NoError(t, g.group.Unlock(ctx), g.kind)
		took = time.Since(start)
		d = spread()
		if g.kind == "MultiLock" {
			// Redisson 4.x unlocks a MultiLock's members in order,
			// stopping at the first error: one after another.
			assert.GreaterOrEqual(t, took, 3*delay, "MultiLock: unlocked in order")
			assert.GreaterOrEqual(t, d, 2*delay, "MultiLock: unlocked in order")
		} else {
			assert.Less(t, d, delay, "RedLock: its members were unlocked one after another (arrivals %v apart)", d)
		}
		for i, f := range faulties {
			assert.Zero(t, f.Pending(), "%s: master %d's link was not slow", g.kind, i)
		}
	}
}
