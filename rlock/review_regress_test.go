package rlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// Regression tests for the review of the family: a read hold's record
// must never outlive its hold in Redis, a fenced grant leaves no key, a
// spin waiter returns at Close.

// The older read level's timeout key runs out first; the partial unlock
// that removes the newer level then finds nothing left to live and deletes
// the hash: the hold is over, and its HoldContext must say so before a
// writer gets in.
func TestReadPartialUnlockThatDeletes(t *testing.T) {
	e := newEnv(t)
	c, other := e.client(), e.client()
	ctx := rlock.WithOwner(context.Background(), 1)
	r := c.ReadWriteLock("rr-del").ReadLock()
	require.NoError(t, r.LockLease(ctx, time.Second))
	time.Sleep(500 * time.Millisecond) // the lease runs on Redis' clock
	require.NoError(t, r.LockLease(ctx, 3*time.Second))
	time.Sleep(700 * time.Millisecond) // level 1's key has expired, level 2's lives
	hctx, err := r.HoldContext(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Unlock(ctx))
	assert.Empty(t, e.hgetall("rr-del"), "Redisson's read unlock deletes a hash with no time left")
	assert.ErrorIs(t, context.Cause(hctx), rlock.ErrUnlocked, "the hold ended with that unlock")
	ok, err := other.ReadWriteLock("rr-del").WriteLock().TryLock(context.Background(), 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.ErrorIs(t, r.Unlock(ctx), rlock.ErrNotHeld)
}

// After a partial read unlock the hash lives as long as the levels left,
// shorter than the removed level's lease: the record follows Redis.
func TestReadPartialUnlockShortensTheRecord(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := rlock.WithOwner(context.Background(), 1)
	r := c.ReadWriteLock("rr-short").ReadLock()
	require.NoError(t, r.LockLease(ctx, 800*time.Millisecond))
	require.NoError(t, r.LockLease(ctx, 10*time.Second))
	hctx, err := r.HoldContext(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Unlock(ctx))
	assert.InDelta(t, 800*time.Millisecond, e.pttl("rr-short"), float64(200*time.Millisecond))
	select {
	case <-hctx.Done():
		assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLeaseExpired)
	case <-time.After(2 * time.Second):
		t.Fatal("the HoldContext outlived the hash")
	}
}

// A watchdog level renewed never cuts the same owner's longer fixed-lease
// level.
func TestReadRenewalKeepsLongerLease(t *testing.T) {
	e := newEnv(t)
	c, other := e.client(rlock.WithWatchdogTimeout(time.Second)), e.client()
	ctx := rlock.WithOwner(context.Background(), 1)
	r := c.ReadWriteLock("rr-renew").ReadLock()
	require.NoError(t, r.LockLease(ctx, 5*time.Second))
	require.NoError(t, r.Lock(ctx))
	time.Sleep(700 * time.Millisecond) // past two renewal periods
	f := field(c, 1)
	assert.Greater(t, e.pttl("{rr-renew}:"+f+":rwlock_timeout:1"), 3*time.Second, "the renewal cut the fixed lease")
	hctx, err := r.HoldContext(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Unlock(ctx))
	assert.Greater(t, e.pttl("rr-renew"), 3*time.Second)
	ok, err := other.ReadWriteLock("rr-renew").WriteLock().TryLock(context.Background(), 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "a writer got in while the fixed-lease reader holds")
	require.NoError(t, hctx.Err())
	require.NoError(t, r.Unlock(ctx))
}

// A write holder's partial unlock does not cut its own read hold's longer
// lease (which only it can have while it writes).
func TestWritePartialUnlockKeepsOwnRead(t *testing.T) {
	e := newEnv(t)
	c, other := e.client(), e.client()
	ctx := rlock.WithOwner(context.Background(), 1)
	rw := c.ReadWriteLock("rr-wr")
	r, w := rw.ReadLock(), rw.WriteLock()
	require.NoError(t, w.LockLease(ctx, time.Second))
	require.NoError(t, w.LockLease(ctx, time.Second))
	require.NoError(t, r.LockLease(ctx, 5*time.Second))
	hctx, err := r.HoldContext(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Unlock(ctx))
	require.NoError(t, w.Unlock(ctx))
	assert.Greater(t, e.pttl("rr-wr"), 3*time.Second, "the read hold's lease was cut")
	ok, err := other.ReadWriteLock("rr-wr").WriteLock().TryLock(context.Background(), 0, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, hctx.Err())
	require.NoError(t, r.Unlock(ctx))
}

// A fenced grant writes no key of its own.
func TestFencedGrantsLeaveNoKeys(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := rlock.WithOwner(context.Background(), 1)
	l := c.FencedLock("rr-f")
	for range 50 {
		_, err := l.LockAndGetToken(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))
	}
	keys, err := e.do("KEYS", "*").AsStrSlice()
	require.NoError(t, err)
	assert.Equal(t, []string{rlock.TokenName("rr-f")}, keys)
}

// A spin waiter sleeping a long back-off returns at Close.
func TestSpinWaiterReturnsAtClose(t *testing.T) {
	e := newEnv(t)
	a := e.client()
	rc, err := e.srv.Client()
	require.NoError(t, err)
	defer rc.Close()
	b, err := rlock.New(rc)
	require.NoError(t, err)
	require.NoError(t, a.SpinLock("rr-spin").Lock(context.Background()))
	before := evalCalls(t, e)
	done := make(chan error, 1)
	go func() {
		done <- b.SpinLock("rr-spin", rlock.WithConstantBackOff(time.Minute)).Lock(context.Background())
	}()
	require.Eventually(t, func() bool { return evalCalls(t, e) > before }, 10*time.Second, time.Millisecond)
	start := time.Now()
	require.NoError(t, b.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, rlock.ErrClosed)
		assert.Less(t, time.Since(start), time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("the spin waiter did not return at Close")
	}
}

// A partial read unlock bounds the owner's record by its own read holds'
// keys, not by another reader's longer one: when the other reader leaves,
// the hash shrinks to the owner's keys, and the HoldContext ends with them.
func TestReadPartialUnlockBoundByOwnKeys(t *testing.T) {
	e := newEnv(t)
	c, other := e.client(), e.client()
	ctx := rlock.WithOwner(context.Background(), 1)
	r := c.ReadWriteLock("rr-own").ReadLock()
	require.NoError(t, r.LockLease(ctx, 1500*time.Millisecond))
	require.NoError(t, r.LockLease(ctx, 1500*time.Millisecond))
	ro := other.ReadWriteLock("rr-own").ReadLock()
	require.NoError(t, ro.Lock(ctx)) // watchdog: 30s
	hctx, err := r.HoldContext(ctx)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, r.Unlock(ctx))
	require.NoError(t, ro.Unlock(ctx))
	assert.Less(t, e.pttl("rr-own"), 1600*time.Millisecond, "the hash follows the reader left")
	select {
	case <-hctx.Done():
		assert.Less(t, time.Since(start), 2500*time.Millisecond)
	case <-time.After(5 * time.Second):
		t.Fatal("the HoldContext outlived the owner's read holds")
	}
}

// A writer's own read unlock never cuts its write hold's TTL.
func TestReadUnlockKeepsOwnWriteHold(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := rlock.WithOwner(context.Background(), 1)
	rw := c.ReadWriteLock("rr-rw")
	require.NoError(t, rw.WriteLock().LockLease(ctx, time.Minute))
	require.NoError(t, rw.ReadLock().LockLease(ctx, 2*time.Second))
	require.NoError(t, rw.ReadLock().LockLease(ctx, 2*time.Second))
	require.NoError(t, rw.ReadLock().Unlock(ctx))
	assert.Greater(t, e.pttl("rr-rw"), 50*time.Second, "a read unlock cut the write hold's lease")
	require.NoError(t, rw.ReadLock().Unlock(ctx))
	assert.Greater(t, e.pttl("rr-rw"), 50*time.Second)
	require.NoError(t, rw.WriteLock().Unlock(ctx))
}

// staleServer answers every plain lock acquire script with a refusal that
// found another count ({5}), as a hostile or broken server (or a count
// that keeps changing) would, and counts those calls.
type staleServer struct {
	rueidis.Client
	sha   string      // the script answered so (default: the acquire)
	off   atomic.Bool // pass every call through
	calls atomic.Int64
}

func (s *staleServer) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return s.DoMulti(ctx, cmd)[0]
}

func (s *staleServer) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	sha := s.sha
	if sha == "" {
		sha = scripts.Acquire.SHA1()
	}
	for i, cmd := range cmds {
		if w := cmd.Commands(); !s.off.Load() && len(w) > 1 && strings.EqualFold(w[0], "EVALSHA") && w[1] == sha {
			s.calls.Add(1)
			cmds[i] = s.Client.B().Eval().Script("return {5}").Numkeys(0).Build()
		}
	}
	return s.Client.DoMulti(ctx, cmds...)
}

// A refusal that keeps finding another count is resent with a growing
// back-off, not in a tight loop: a Lock given 1 s against such a server
// sent 354,715 scripts before it failed (a helper's review).
func TestStaleRefusalsBackOff(t *testing.T) {
	e := newEnv(t)
	rc, err := e.srv.Client()
	require.NoError(t, err)
	srv := &staleServer{Client: rc}
	c, err := rlock.New(srv)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(); rc.Close() })
	ctx, cancel := context.WithTimeout(rlock.WithOwner(context.Background(), 1), time.Second)
	defer cancel()
	err = c.Lock("stale-loop").Lock(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, srv.calls.Load(), int64(40), "acquire scripts sent in 1 s")
	assert.Greater(t, srv.calls.Load(), int64(2))
}

// An Unlock that gives up on such refusals (its ctx ended first) stops
// renewal and ends the HoldContext, as every Unlock that fails without
// running does: the lock then runs out with its lease (a helper's review:
// it was renewed on, the HoldContext alive).
func TestStaleUnlockStopsRenewal(t *testing.T) {
	e := newEnv(t)
	rc, err := e.srv.Client()
	require.NoError(t, err)
	srv := &staleServer{Client: rc, sha: scripts.Unlock.SHA1()}
	c, err := rlock.New(srv, rlock.WithWatchdogTimeout(1500*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(); rc.Close() })
	owner := rlock.WithOwner(context.Background(), 1)
	l := c.Lock("stale-unlock")
	require.NoError(t, l.Lock(owner))
	hctx, err := l.HoldContext(owner)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(owner, 100*time.Millisecond)
	err = l.Unlock(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	srv.off.Store(true)
	select {
	case <-hctx.Done():
		assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)
	case <-time.After(time.Second):
		t.Fatal("the HoldContext is still alive after an Unlock that failed without running")
	}
	require.Eventually(t, func() bool { n, _ := e.do("EXISTS", "stale-unlock").AsInt64(); return n == 0 },
		3*time.Second, 10*time.Millisecond, "the lock is still renewed")
}

// slowAcquire holds up the plain lock's acquire script and the fair
// lock's cancel (a slow Redis), telling when an acquire has been sent.
type slowAcquire struct {
	rueidis.Client
	armed atomic.Bool
	sent  chan struct{} // receives one token per held-up call
}

func (s *slowAcquire) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return s.DoMulti(ctx, cmd)[0]
}

func (s *slowAcquire) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range cmds {
		w := cmd.Commands()
		if !s.armed.Load() || len(w) < 2 || !strings.EqualFold(w[0], "EVALSHA") {
			continue
		}
		switch w[1] {
		case scripts.Acquire.SHA1():
			select {
			case s.sent <- struct{}{}:
			default:
			}
			time.Sleep(300 * time.Millisecond)
		case scripts.FairCancel.SHA1():
			time.Sleep(1500 * time.Millisecond) // Close waits for it
		}
	}
	return s.Client.DoMulti(ctx, cmds...)
}

// An acquire in flight when Close begins never succeeds after it, even
// while Close waits for a fair waiter to leave its queue: it is undone and
// returns ErrClosed, leaving no hold that nobody renews or can unlock (a
// helper's review of the fair waiters' leaving at Close).
func TestAcquireInFlightAtClose(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	other := e.client()
	rc, err := e.srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	srv := &slowAcquire{Client: rc, sent: make(chan struct{}, 1)}
	c, err := rlock.New(srv, rlock.WithCommandTimeout(time.Second))
	require.NoError(t, err)

	require.NoError(t, other.FairLock("fq").Lock(rlock.WithOwner(ctx, 1)))
	fair := make(chan error, 1)
	go func() { fair <- c.FairLock("fq").Lock(rlock.WithOwner(ctx, 2)) }()
	waitQueued(t, e, "fq", 1)

	srv.armed.Store(true)
	owner := rlock.WithOwner(ctx, 3)
	l := c.Lock("plain")
	got := make(chan error, 1)
	go func() {
		ok, err := l.TryLock(owner, time.Second, 0)
		if ok {
			err = errors.New("TryLock succeeded")
		}
		got <- err
	}()
	<-srv.sent
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-got, rlock.ErrClosed, "an acquire in flight at Close")
	assert.ErrorIs(t, <-fair, rlock.ErrClosed)
	require.Eventually(t, func() bool { n, _ := e.do("EXISTS", "plain").AsInt64(); return n == 0 },
		5*time.Second, 10*time.Millisecond, "the acquire that ran after Close began was not undone")
}
