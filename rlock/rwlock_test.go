package rlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
)

// timeoutKey is a read hold's timeout key (PROTOCOL.md 5.1).
func timeoutKey(name, field string, k int) string {
	return "{" + name + "}:" + field + ":rwlock_timeout:" + string(rune('0'+k))
}

func TestReadWriteWireLayout(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := rlock.WithOwner(context.Background(), 7)
	rw := c.ReadWriteLock("rw-wire")
	r, w := rw.ReadLock(), rw.WriteLock()

	require.NoError(t, r.LockLease(ctx, 10*time.Second))
	require.NoError(t, r.Lock(ctx))
	f := field(c, 7)
	assert.Equal(t, map[string]string{"mode": "read", f: "2"}, e.hgetall("rw-wire"))
	assert.InDelta(t, 10*time.Second, e.pttl(timeoutKey("rw-wire", f, 1)), float64(time.Second))
	assert.InDelta(t, rlock.DefaultWatchdogTimeout, e.pttl(timeoutKey("rw-wire", f, 2)), float64(time.Second))
	// The hash lives as long as the longest read hold.
	assert.InDelta(t, 30*time.Second, e.pttl("rw-wire"), float64(time.Second))
	n, err := r.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	// The newest timeout key goes first.
	require.NoError(t, r.Unlock(ctx))
	assert.Equal(t, time.Duration(-2)*time.Millisecond, e.pttl(timeoutKey("rw-wire", f, 2)))
	assert.Greater(t, e.pttl(timeoutKey("rw-wire", f, 1)), time.Duration(0))
	// The hash TTL now follows the one read hold left.
	assert.InDelta(t, 10*time.Second, e.pttl("rw-wire"), float64(time.Second))
	require.NoError(t, r.Unlock(ctx))
	assert.Empty(t, e.hgetall("rw-wire"))

	require.NoError(t, w.Lock(ctx))
	assert.Equal(t, map[string]string{"mode": "write", f + ":write": "1"}, e.hgetall("rw-wire"))
	n, err = w.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	n, err = r.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	require.NoError(t, w.Unlock(ctx))
	assert.Empty(t, e.hgetall("rw-wire"))
}

func TestReadersShareWritersExclude(t *testing.T) {
	e := newEnv(t)
	a, b := e.client(), e.client()
	ctx := context.Background()
	ra, rb := a.ReadWriteLock("rw-share").ReadLock(), b.ReadWriteLock("rw-share").ReadLock()
	wb := b.ReadWriteLock("rw-share").WriteLock()

	require.NoError(t, ra.Lock(ctx))
	ok, err := rb.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.True(t, ok, "readers share")
	ok, err = wb.TryLock(rlock.WithOwner(ctx, 99), 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "a writer is kept out by readers")
	ok, err = wb.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "no upgrade: a reader cannot take the write lock")
	for _, l := range []*rlock.ReadLock{ra, rb} {
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)
	}

	// The writer waits; the first read unlock keeps it out, the last lets
	// it in promptly.
	wctx := rlock.WithOwner(ctx, 99)
	got := make(chan error, 1)
	go func() { got <- wb.Lock(wctx) }()
	waitForSubscribers(t, e, rlock.RWLockChannelName("rw-share"), 1)
	require.NoError(t, ra.Unlock(ctx))
	select {
	case err := <-got:
		t.Fatalf("the writer got in while a reader held: %v", err)
	default:
	}
	released := time.Now()
	require.NoError(t, rb.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
		assert.Less(t, time.Since(released), time.Second, "the last read unlock wakes the writer")
	case <-time.After(10 * time.Second):
		t.Fatal("the writer was not woken")
	}
	ok, err = ra.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "a writer keeps readers out")
	locked, err := wb.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)
	require.NoError(t, wb.Unlock(wctx))
}

// TestWriterThenReader is Redisson's testWR, testWriteReadReentrancy and
// testReadLockIsLocked: a writer may read (a downgrade), unlocking in
// either order.
func TestWriterThenReader(t *testing.T) {
	e := newEnv(t)
	c, other := e.client(), e.client()
	ctx := context.Background()
	rw := c.ReadWriteLock("rw-wr")
	r, w := rw.ReadLock(), rw.WriteLock()
	or := other.ReadWriteLock("rw-wr").ReadLock()

	for _, writeFirst := range []bool{true, false} {
		require.NoError(t, w.Lock(ctx))
		locked, err := r.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked, "a write hold is not a read hold")
		ok, err := r.TryLock(ctx, 0, 0)
		require.NoError(t, err)
		require.True(t, ok, "the writer may read")
		locked, err = r.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)
		ok, err = or.TryLock(ctx, 0, 0)
		require.NoError(t, err)
		assert.False(t, ok, "another owner may not read while a writer holds")

		if writeFirst {
			require.NoError(t, w.Unlock(ctx))
			assert.Equal(t, "read", e.hgetall("rw-wr")["mode"], "a downgrade")
			ok, err = w.TryLock(ctx, 0, 0)
			require.NoError(t, err)
			assert.False(t, ok, "its own read hold keeps the writer out")
			ok, err = or.TryLock(ctx, 0, 0)
			require.NoError(t, err)
			assert.True(t, ok, "after the downgrade others may read")
			require.NoError(t, or.Unlock(ctx))
			require.NoError(t, r.Unlock(ctx))
		} else {
			require.NoError(t, r.Unlock(ctx))
			wl, err := w.IsLocked(ctx)
			require.NoError(t, err)
			assert.True(t, wl)
			require.NoError(t, w.Unlock(ctx))
		}
		assert.Empty(t, e.hgetall("rw-wr"))
	}
	ok, err := w.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, w.Unlock(ctx))
}

// TestReadLeasesKeepTheLongest is Redisson's testReadLockExpiration and
// testReadLockLeaseTimeout, scaled down: the hash follows the longest
// reader; a writer gets in when the last lease ends.
func TestReadLeasesKeepTheLongest(t *testing.T) {
	e := newEnv(t)
	a, b := e.client(), e.client()
	ctx := context.Background()
	long, short := a.ReadWriteLock("rw-exp").ReadLock(), b.ReadWriteLock("rw-exp").ReadLock()
	w := b.ReadWriteLock("rw-exp").WriteLock()

	start := time.Now()
	require.NoError(t, long.LockLease(ctx, 1500*time.Millisecond))
	require.NoError(t, short.LockLease(ctx, 300*time.Millisecond))
	ok, err := w.TryLock(rlock.WithOwner(ctx, 5), 5*time.Second, 0)
	require.NoError(t, err)
	require.True(t, ok)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 1400*time.Millisecond, "the short lease must not free the lock while the long one holds")
	assert.Less(t, took, 3*time.Second)
	require.NoError(t, w.Unlock(rlock.WithOwner(ctx, 5)))

	// A reader's unlock shrinks the hash TTL to the longest hold left.
	require.NoError(t, long.LockLease(ctx, 2*time.Second))
	require.NoError(t, short.LockLease(ctx, 10*time.Second))
	assert.Greater(t, e.pttl("rw-exp"), 9*time.Second)
	require.NoError(t, short.Unlock(ctx))
	assert.InDelta(t, 2*time.Second, e.pttl("rw-exp"), float64(300*time.Millisecond))
	require.NoError(t, long.Unlock(ctx))
}

// TestWriteReentryAddsLease is Redisson's testWriteLockExpiration: a
// write re-entry adds its lease to the TTL left.
func TestWriteReentryAddsLease(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := context.Background()
	w := c.ReadWriteLock("rw-wexp").WriteLock()
	ok, err := w.TryLock(ctx, time.Second, 3*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = w.TryLock(ctx, time.Second, 2*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	assert.InDelta(t, 5*time.Second, e.pttl("rw-wexp"), float64(300*time.Millisecond))
	require.NoError(t, w.Unlock(ctx))
	require.NoError(t, w.Unlock(ctx))
}

// TestWriteUnlockWakesAllReaders is Redisson's testWriteRead.
func TestWriteUnlockWakesAllReaders(t *testing.T) {
	e := newEnv(t)
	c, readers := e.client(), e.client()
	ctx := context.Background()
	w := c.ReadWriteLock("rw-wake").WriteLock()
	require.NoError(t, w.Lock(ctx))
	const n = 10
	var wg sync.WaitGroup
	got := make(chan time.Time, n)
	r := readers.ReadWriteLock("rw-wake").ReadLock()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			octx := rlock.WithOwner(ctx, int64(100+i))
			if err := r.Lock(octx); err != nil {
				t.Error(err)
				return
			}
			got <- time.Now()
			_ = r.Unlock(octx)
		}()
	}
	require.Eventually(t, func() bool { return readers.Stats().Waiters == n }, 10*time.Second, 5*time.Millisecond)
	released := time.Now()
	require.NoError(t, w.Unlock(ctx))
	wg.Wait()
	close(got)
	for at := range got {
		assert.Less(t, at.Sub(released), time.Second, "every reader is woken by the write unlock")
	}
}

func TestReadWriteForceUnlock(t *testing.T) {
	e := newEnv(t)
	c, other := e.client(), e.client()
	ctx := context.Background()
	rw := c.ReadWriteLock("rw-force")
	orw := other.ReadWriteLock("rw-force")

	existed, err := orw.ReadLock().ForceUnlock(ctx)
	require.NoError(t, err)
	assert.False(t, existed)

	require.NoError(t, rw.ReadLock().Lock(ctx))
	hctx, err := rw.ReadLock().HoldContext(ctx)
	require.NoError(t, err)
	existed, err = orw.WriteLock().ForceUnlock(ctx)
	require.NoError(t, err)
	assert.False(t, existed, "a write force unlock leaves a read hold")
	existed, err = orw.ReadLock().ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, existed)
	assert.Empty(t, e.hgetall("rw-force"))

	require.NoError(t, rw.WriteLock().Lock(ctx))
	existed, err = orw.ReadLock().ForceUnlock(ctx)
	require.NoError(t, err)
	assert.False(t, existed, "a read force unlock leaves a write hold")
	// A waiter is woken by the force unlock.
	got := make(chan error, 1)
	octx := rlock.WithOwner(ctx, 3)
	go func() { got <- orw.ReadLock().Lock(octx) }()
	waitForSubscribers(t, e, rlock.RWLockChannelName("rw-force"), 1)
	existed, err = rw.WriteLock().ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, existed)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by the force unlock")
	}
	require.NoError(t, orw.ReadLock().Unlock(octx))
	assert.ErrorIs(t, rw.WriteLock().Unlock(ctx), rlock.ErrNotHeld)
	// The read hold of the other client was deleted by the read force
	// unlock, and the watchdog of c learns it: its HoldContext ends.
	select {
	case <-hctx.Done():
	case <-time.After(45 * time.Second):
		t.Fatal("the HoldContext of a deleted read hold never ended")
	}
	assert.True(t, errors.Is(context.Cause(hctx), rlock.ErrLockLost))
	assert.Zero(t, c.Stats().Holds)
}

// TestReadWatchdog: a reader holding past several watchdog timeouts keeps
// its timeout key and the hash alive and the writer out; a client that
// went away without unlocking leaves a zombie reader that another client's
// renewal does not keep alive (Redisson's
// testMultiInstanceReadLockZombieCleanup).
func TestReadWatchdog(t *testing.T) {
	e := newEnv(t)
	const wd = 600 * time.Millisecond
	live := e.client(rlock.WithWatchdogTimeout(wd))
	rc, err := e.srv.Client()
	require.NoError(t, err)
	defer rc.Close()
	zombie, err := rlock.New(rc, rlock.WithWatchdogTimeout(wd))
	require.NoError(t, err)
	ctx := rlock.WithOwner(context.Background(), 1)
	name := "rw-wd"
	require.NoError(t, zombie.ReadWriteLock(name).ReadLock().Lock(ctx))
	require.NoError(t, zombie.Close()) // no unlock: its renewal stops
	r := live.ReadWriteLock(name).ReadLock()
	require.NoError(t, r.Lock(ctx))
	require.NoError(t, r.Lock(ctx))
	w := e.client().ReadWriteLock(name).WriteLock()
	deadline := time.Now().Add(3 * wd)
	for time.Now().Before(deadline) {
		ok, err := w.TryLock(ctx, 0, 0)
		require.NoError(t, err)
		require.False(t, ok, "the writer got in while a renewed reader held")
		time.Sleep(wd / 6)
	}
	f := field(live, 1)
	assert.Greater(t, e.pttl(timeoutKey(name, f, 1)), time.Duration(0), "the reader's timeout keys are renewed")
	assert.Greater(t, e.pttl(timeoutKey(name, f, 2)), time.Duration(0))
	zf := field(zombie, 1)
	assert.Equal(t, -2*time.Millisecond, e.pttl(timeoutKey(name, zf, 1)), "the zombie reader's timeout key is not renewed")
	require.NoError(t, r.Unlock(ctx))
	require.NoError(t, r.Unlock(ctx))
	ok, err := w.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.True(t, ok, "the zombie reader does not keep the lock")
	require.NoError(t, w.Unlock(ctx))
}

func TestReadWriteHoldCounts(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := context.Background()
	rw := c.ReadWriteLock("rw-count")
	for _, l := range []interface {
		rlock.Locker
		HoldCount(context.Context) (int, error)
	}{rw.ReadLock(), rw.WriteLock()} {
		seq := []int{}
		count := func() {
			n, err := l.HoldCount(ctx)
			require.NoError(t, err)
			seq = append(seq, n)
		}
		count()
		require.NoError(t, l.Lock(ctx))
		count()
		require.NoError(t, l.Unlock(ctx))
		count()
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Lock(ctx))
		count()
		require.NoError(t, l.Unlock(ctx))
		count()
		require.NoError(t, l.Unlock(ctx))
		count()
		assert.Equal(t, []int{0, 1, 0, 2, 1, 0}, seq)
		assert.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)
	}
}
