package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// queue returns the fair lock's wait queue and the waiters' reservations.
func fairQueue(t *testing.T, e *env, name string) (queue []string, timeouts map[string]float64) {
	t.Helper()
	q, err := e.do("LRANGE", rlock.FairQueueName(name), "0", "-1").AsStrSlice()
	require.NoError(t, err)
	z, err := e.do("ZRANGE", rlock.FairTimeoutName(name), "0", "-1", "WITHSCORES").AsZScores()
	require.NoError(t, err)
	timeouts = map[string]float64{}
	for _, s := range z {
		timeouts[s.Member] = s.Score
	}
	return q, timeouts
}

// waitQueued waits until the fair lock's queue has n entries.
func waitQueued(t *testing.T, e *env, name string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		m, err := e.do("LLEN", rlock.FairQueueName(name)).AsInt64()
		return err == nil && m == int64(n)
	}, 10*time.Second, time.Millisecond)
}

// TestFairLockFIFO: waiters queued one after the other while the lock is
// held get it in that order (Redisson's testFairness), each woken on its
// own channel, none on the shared one; the queue ends empty.
func TestFairLockFIFO(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c1, c2 := e.client(), e.client()
	name := "fair-fifo"
	holder := rlock.WithOwner(ctx, 1)
	require.NoError(t, c1.FairLock(name).Lock(holder))

	const n = 8
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	var fields []string
	for i := range n {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		owner := int64(100 + i)
		fields = append(fields, field(c, owner))
		wg.Add(1)
		go func() {
			defer wg.Done()
			octx := rlock.WithOwner(ctx, owner)
			l := c.FairLock(name)
			if !assert.NoError(t, l.Lock(octx)) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			assert.NoError(t, l.Unlock(octx))
		}()
		waitQueued(t, e, name, i+1)
	}
	q, timeouts := fairQueue(t, e, name)
	require.Equal(t, fields, q, "queued in arrival order")
	for i := 1; i < n; i++ {
		// Each reservation is the previous one's plus the wait (5 min).
		assert.InDelta(t, 5*60*1000, timeouts[fields[i]]-timeouts[fields[i-1]], 1)
	}
	for _, f := range fields {
		waitForSubscribers(t, e, rlock.ChannelName(name)+":"+f, 1)
	}
	waitForSubscribers(t, e, rlock.ChannelName(name), 0)
	start := time.Now()
	require.NoError(t, c1.FairLock(name).Unlock(holder))
	wg.Wait()
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, order)
	// Every hand-off was woken by its message, not by a TTL (30 s).
	assert.Less(t, time.Since(start), 5*time.Second)
	q, timeouts = fairQueue(t, e, name)
	assert.Empty(t, q)
	assert.Empty(t, timeouts)
	assert.Zero(t, c1.Stats().Holds+c2.Stats().Holds)
}

// TestFairLockWaiterLeaves: a waiter whose wait ends (TryLock's wait, or
// its ctx) leaves the queue before it returns, and pulls the reservations
// behind it forward; the next waiter is not stalled.
func TestFairLockWaiterLeaves(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()
	name := "fair-leave"
	holder := rlock.WithOwner(ctx, 1)
	l := c.FairLock(name)
	require.NoError(t, l.Lock(holder))

	timedOut := make(chan bool)
	go func() {
		ok, err := l.TryLock(rlock.WithOwner(ctx, 2), 300*time.Millisecond, 0)
		assert.NoError(t, err)
		timedOut <- ok
	}()
	waitQueued(t, e, name, 1)
	cctx, cancel := context.WithCancel(rlock.WithOwner(ctx, 3))
	cancelled := make(chan error)
	go func() { cancelled <- l.Lock(cctx) }()
	waitQueued(t, e, name, 2)
	got := make(chan error)
	go func() {
		octx := rlock.WithOwner(ctx, 4)
		err := l.Lock(octx)
		if err == nil {
			err = l.Unlock(octx)
		}
		got <- err
	}()
	waitQueued(t, e, name, 3)
	_, before := fairQueue(t, e, name)

	assert.False(t, <-timedOut)
	q, after := fairQueue(t, e, name)
	assert.Equal(t, []string{field(c, 3), field(c, 4)}, q, "the timed-out waiter left")
	// Those behind it moved up by its wait (300 ms).
	assert.InDelta(t, 300, before[field(c, 3)]-after[field(c, 3)], 1)
	assert.InDelta(t, 300, before[field(c, 4)]-after[field(c, 4)], 1)

	cancel()
	assert.ErrorIs(t, <-cancelled, context.Canceled)
	q, _ = fairQueue(t, e, name)
	assert.Equal(t, []string{field(c, 4)}, q, "the cancelled waiter left")

	start := time.Now()
	require.NoError(t, l.Unlock(holder))
	require.NoError(t, <-got)
	assert.Less(t, time.Since(start), 2*time.Second, "the last waiter was woken at once")
	q, after = fairQueue(t, e, name)
	assert.Empty(t, q)
	assert.Empty(t, after)
}

// heldWithWaiter takes name's fair lock for owner 1 of holder and queues
// owner 2 of c behind it; the waiter's Lock result comes on waiting.
func heldWithWaiter(t *testing.T, e *env, holder, c *rlock.Client, name string) (h context.Context, waiting <-chan error) {
	t.Helper()
	h = rlock.WithOwner(context.Background(), 1)
	require.NoError(t, holder.FairLock(name).Lock(h))
	w := make(chan error, 1)
	go func() { w <- c.FairLock(name).Lock(rlock.WithOwner(context.Background(), 2)) }()
	waitQueued(t, e, name, 1)
	return h, w
}

// TestFairLockCloseLeavesQueue: a waiter whose wait a Client's Close ends
// leaves the queue before Close returns (a graceful shutdown is not a
// crash), so the next waiter of another process gets the lock as soon as
// the holder unlocks, not after the closed waiter's reservation.
func TestFairLockCloseLeavesQueue(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	holderC, nextC := e.client(), e.client()
	closed := e.client(rlock.WithFairLockWaitTimeout(20 * time.Second))
	name := "fair-close"
	holder, waiting := heldWithWaiter(t, e, holderC, closed, name)
	require.NoError(t, closed.Close())
	q, _ := fairQueue(t, e, name)
	assert.Empty(t, q, "the closed Client's waiter is still queued after Close returned")
	select {
	case err := <-waiting:
		assert.ErrorIs(t, err, rlock.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not return after Close")
	}

	require.NoError(t, holderC.FairLock(name).Unlock(holder))
	start := time.Now()
	next := rlock.WithOwner(ctx, 3)
	ok, err := nextC.FairLock(name).TryLock(next, 5*time.Second, 0)
	require.NoError(t, err)
	require.True(t, ok, "the lock is free, but the next waiter did not get it within 5s")
	assert.Less(t, time.Since(start), time.Second)
	require.NoError(t, nextC.FairLock(name).Unlock(next))

	_, err = closed.FairLock(name).TryLock(rlock.WithOwner(ctx, 2), time.Second, 0)
	assert.ErrorIs(t, err, rlock.ErrClosed, "a fair wait on a closed Client")
}

// TestFairLockDeadWaiter: a waiter whose process died stays in the queue
// until its reservation ends; then the others' cleanup drops it and the
// next waiter gets the lock, without waiting for the holder's TTL.
func TestFairLockDeadWaiter(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()
	// The dying process reaches Redis through a proxy, whose end is its
	// death: nothing it sends afterwards gets through.
	proxy := redistest.NewProxy(t, e.srv.Addr)
	drc, err := e.srv.Client(func(o *rueidis.ClientOption) { o.InitAddress = []string{proxy.Addr} })
	require.NoError(t, err)
	dead, err := rlock.New(drc, rlock.WithFairLockWaitTimeout(time.Hour))
	require.NoError(t, err)
	name := "fair-dead"
	holder := rlock.WithOwner(ctx, 1)
	l := c.FairLock(name)
	// The first waiter's reservation runs from the lock's TTL.
	require.NoError(t, l.LockLease(holder, 2*time.Second))

	// The dying waiter asks for a reservation of 300 ms more.
	died := make(chan error)
	go func() {
		_, err := dead.FairLock(name).TryLock(rlock.WithOwner(ctx, 2), 300*time.Millisecond, 0)
		died <- err
	}()
	waitQueued(t, e, name, 1)
	// Its process dies: nothing it sends reaches Redis any more (a Close
	// alone would leave the queue, and a rueidis client's Close does not
	// stop every connection at once), so the entry stays.
	require.NoError(t, proxy.Close())
	closing := time.Now()
	require.NoError(t, dead.Close())
	// Its cancel finds no connection twice and gives up: Close does not
	// wait out the command timeout (3 s) for a Redis it cannot reach.
	assert.Less(t, time.Since(closing), time.Second, "Close with Redis unreachable")
	drc.Close()
	assert.Error(t, <-died)
	q, _ := fairQueue(t, e, name)
	require.Equal(t, []string{field(dead, 2)}, q)

	got := make(chan time.Time)
	unlocked := make(chan error, 1)
	go func() {
		octx := rlock.WithOwner(ctx, 3)
		assert.NoError(t, l.Lock(octx))
		got <- time.Now()
		unlocked <- l.Unlock(octx)
	}()
	waitQueued(t, e, name, 2)
	_, timeouts := fairQueue(t, e, name)
	deadline := time.UnixMilli(int64(timeouts[field(dead, 2)]))
	require.NoError(t, l.Unlock(holder)) // wakes the dead head, nobody else
	at := <-got
	assert.False(t, at.Before(deadline.Add(-10*time.Millisecond)), "taken %v before the dead waiter's reservation ended", deadline.Sub(at))
	assert.Less(t, at.Sub(deadline), 2*time.Second, "taken %v after the dead waiter's reservation ended", at.Sub(deadline))
	require.NoError(t, <-unlocked)
	q, _ = fairQueue(t, e, name)
	assert.Empty(t, q)
}

// TestFairLockBasics: re-entry, the single attempt that never queues,
// Unlock of a lock not held, non-reentrant re-acquire, ForceUnlock waking
// the head.
func TestFairLockBasics(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client()
	name := "fair-basics"
	l := c.FairLock(name)
	require.NoError(t, l.Lock(ctx))
	ok, err := l.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	n, err := l.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	other := rlock.WithOwner(ctx, 9)
	ok, err = l.TryLock(other, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, int64(0), mustInt(t, e, "EXISTS", rlock.FairQueueName(name)), "a single attempt never queues")
	assert.ErrorIs(t, l.Unlock(other), rlock.ErrNotHeld)
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, l.Unlock(ctx))
	assert.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)

	nr := c.NonReentrantFairLock(name + "-nr")
	require.NoError(t, nr.Lock(ctx))
	assert.ErrorIs(t, nr.Lock(ctx), rlock.ErrAlreadyHeld)
	_, err = nr.TryLock(ctx, time.Second, 0)
	assert.ErrorIs(t, err, rlock.ErrAlreadyHeld)
	n, err = nr.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, nr.Unlock(ctx))

	// ForceUnlock wakes the first waiter at once.
	require.NoError(t, l.Lock(ctx))
	got := make(chan error)
	go func() { got <- l.LockLease(other, time.Second) }()
	waitQueued(t, e, name, 1)
	waitForSubscribers(t, e, rlock.ChannelName(name)+":"+field(c, 9), 1)
	start := time.Now()
	existed, err := c.FairLock(name).ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, existed)
	require.NoError(t, <-got)
	assert.Less(t, time.Since(start), 2*time.Second)
	require.NoError(t, l.Unlock(other))
	existed, err = l.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.False(t, existed)
	assert.Zero(t, c.Stats().Holds)
}

func mustInt(t *testing.T, e *env, args ...string) int64 {
	t.Helper()
	n, err := e.do(args...).AsInt64()
	require.NoError(t, err)
	return n
}

// TestFairLockContention: many owners in two clients, each taking the fair
// lock many times; mutual exclusion holds, every waiter gets its turn, and
// nothing is left in Redis.
func TestFairLockContention(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cs := []*rlock.Client{e.client(), e.client()}
	name := "fair-contention"
	var inside, total int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cs[g%2]
			l := c.FairLock(name)
			octx := rlock.WithOwner(ctx, int64(g+1))
			for i := range 25 {
				var err error
				if i%3 == 0 {
					var ok bool
					ok, err = l.TryLock(octx, 10*time.Second, 5*time.Second)
					if err == nil && !ok {
						err = errors.New("TryLock timed out in turn " + strconv.Itoa(i))
					}
				} else {
					err = l.Lock(octx)
				}
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				inside++
				total++
				assert.Equal(t, 1, inside)
				mu.Unlock()
				mu.Lock()
				inside--
				mu.Unlock()
				assert.NoError(t, l.Unlock(octx))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 12*25, total)
	q, timeouts := fairQueue(t, e, name)
	assert.Empty(t, q)
	assert.Empty(t, timeouts)
	assert.Equal(t, int64(0), mustInt(t, e, "EXISTS", name))
}

// TestFairLockHeadTakesAndExpires: while the lock is free and another
// waiter is first in line, a waiter looks again soon: when the first one
// takes the lock with a short lease and lets it expire (no message), the
// next gets it right after, not at the end of the first one's
// reservation.
func TestFairLockHeadTakesAndExpires(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(rlock.WithFairLockWaitTimeout(20 * time.Second))
	name := "fair-head-expires"
	l := c.FairLock(name)
	holder := rlock.WithOwner(ctx, 1)
	require.NoError(t, l.LockLease(holder, 300*time.Millisecond))
	first := make(chan error)
	go func() { first <- l.LockLease(rlock.WithOwner(ctx, 2), 300*time.Millisecond) }()
	waitQueued(t, e, name, 1)
	got := make(chan time.Time)
	unlocked := make(chan error, 1)
	go func() {
		octx := rlock.WithOwner(ctx, 3)
		assert.NoError(t, l.Lock(octx))
		got <- time.Now()
		unlocked <- l.Unlock(octx)
	}()
	waitQueued(t, e, name, 2)
	require.NoError(t, <-first) // at the holder's expiry; it never unlocks
	granted := time.Now()
	at := <-got
	// Its hold runs out 300 ms after the grant, unannounced; the next
	// waiter polls, and does not sleep until the first one's reservation
	// (20 s) ends.
	assert.Less(t, at.Sub(granted), 1500*time.Millisecond, "the next waiter stalled")
	assert.Greater(t, at.Sub(granted), 200*time.Millisecond, "the next waiter got in within the first one's lease")
	q, _ := fairQueue(t, e, name)
	assert.Empty(t, q)
}

// TestFairLockCloseLeaveFaults: the cancel call a closing Client sends for
// its queued fair waiter, under each fault, with another process's waiter
// queued behind it: Close and the waiter return within the command
// timeout, the waiter gets ErrClosed and nothing crashes. A call that met
// one fault (dropped, its reply lost, refused with BUSY or LOADING, its
// connection closed by rueidis) is sent again and the entry is gone; under
// a fault that lasts the call is sent again, with a back-off, until the
// timeout. The entry is gone exactly when a call ran, and then the waiter
// behind is pulled forward by the leaver's wait exactly once, however many
// copies ran; otherwise it stays, to be dropped when its reservation ends,
// and the waiter behind is untouched.
func TestFairLockCloseLeaveFaults(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	holder, behind := e.client(), e.client()
	loading := redistest.RedisError(ctx, e.raw, "LOADING Redis is loading the dataset in memory")
	loadScripts(t, e, scripts.FairCancel)
	const (
		lasting = 1 << 20
		timeout = time.Second
		wait    = 5 * time.Minute // the closing Client's fair wait
	)
	for _, tc := range []struct {
		fault redistest.Fault
		err   error
		times int
		gone  bool
	}{
		{redistest.Drop, nil, 1, true},
		{redistest.LoseReply, nil, 1, true},
		{redistest.Refuse, busy(e), 1, true},
		{redistest.Refuse, loading, 1, true},
		{redistest.Refuse, rueidis.ErrClosing, 1, true},
		{redistest.Drop, nil, lasting, false},
		{redistest.LoseReply, nil, lasting, true},
		{redistest.Refuse, busy(e), lasting, false},
	} {
		label := strings.ReplaceAll(tc.fault.String(), " ", "-")
		if tc.err != nil {
			label += "-" + strings.Fields(tc.err.Error())[0]
		}
		if tc.times > 1 {
			label += "-lasting"
		}
		t.Run(label, func(t *testing.T) {
			name := "fair-close-" + label
			rc, err := e.srv.Client()
			require.NoError(t, err)
			t.Cleanup(rc.Close)
			faulty := redistest.NewFaulty(rc)
			c, err := rlock.New(faulty, rlock.WithCommandTimeout(timeout), rlock.WithFairLockWaitTimeout(wait))
			require.NoError(t, err)
			h, waiting := heldWithWaiter(t, e, holder, c, name)
			bctx, stopBehind := context.WithCancel(rlock.WithOwner(ctx, 3))
			behindDone := make(chan error, 1)
			go func() { behindDone <- behind.FairLock(name).Lock(bctx) }()
			waitQueued(t, e, name, 2)
			_, before := fairQueue(t, e, name)

			isCancel := func(w []string) bool {
				return len(w) > 1 && w[0] == "EVALSHA" && w[1] == scripts.FairCancel.SHA1()
			}
			cancels := faulty.Count(isCancel)
			faulty.Inject(redistest.Rule{Fault: tc.fault, Err: tc.err, Match: isCancel, Times: tc.times})
			start := time.Now()
			require.NoError(t, c.Close())
			assert.Less(t, time.Since(start), timeout+500*time.Millisecond, "Close")
			assert.ErrorIs(t, <-waiting, rlock.ErrClosed)
			assert.Less(t, time.Since(start), timeout+500*time.Millisecond, "the waiter's return")
			if tc.times == 1 {
				assert.Equal(t, 2, cancels(), "the call that met the fault, then one that ran")
			} else {
				n := cancels()
				assert.Greater(t, n, 2, "the call is sent again while the fault lasts")
				assert.LessOrEqual(t, n, 20, "the calls are spaced by a back-off")
			}
			q, after := fairQueue(t, e, name)
			bf := field(behind, 3)
			if tc.gone {
				assert.Equal(t, []string{bf}, q, "a cancel call ran")
				assert.Equal(t, before[bf]-float64(wait.Milliseconds()), after[bf], "the waiter behind, pulled forward once")
			} else {
				assert.Equal(t, []string{field(c, 2), bf}, q, "no cancel call ran: the entry waits for its reservation to end")
				assert.Equal(t, before[bf], after[bf], "the waiter behind, untouched")
			}
			stopBehind()
			assert.ErrorIs(t, <-behindDone, context.Canceled)
			require.NoError(t, e.do("DEL", rlock.FairQueueName(name), rlock.FairTimeoutName(name)).Error())
			require.NoError(t, holder.FairLock(name).Unlock(h))
		})
	}
}

// stallAfter passes every command through, except the fair cancel calls:
// those fail at once with a connection error until `after` from the first
// one, and then hang until their context ends (a master that stops
// answering while the closing Client is still sending again).
type stallAfter struct {
	rueidis.Client
	after time.Duration
	mu    sync.Mutex
	first time.Time
}

func (s *stallAfter) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return s.DoMulti(ctx, cmd)[0]
}

func (s *stallAfter) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if w := cmds[0].Commands(); len(w) < 2 || w[0] != "EVALSHA" || w[1] != scripts.FairCancel.SHA1() {
		return s.Client.DoMulti(ctx, cmds...)
	}
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = time.Now()
	}
	stall := time.Since(s.first) >= s.after
	s.mu.Unlock()
	out := make([]rueidis.RedisResult, len(cmds))
	err := redistest.ErrInjected
	if stall {
		<-ctx.Done()
		err = ctx.Err()
	}
	for i := range out {
		out[i] = rueidis.NewErrorResult(err)
	}
	return out
}

// TestFairLockCloseLeaveStalls: the closing Client's cancel calls fail
// until shortly before the command timeout, and the one sent then hangs:
// it is cut at the timeout, so the closed waiter's Lock returns within
// about one command timeout too, not one more.
func TestFairLockCloseLeaveStalls(t *testing.T) {
	e := newEnv(t)
	holder := e.client()
	const timeout = time.Second
	rc, err := e.srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	c, err := rlock.New(&stallAfter{Client: rc, after: 900 * time.Millisecond}, rlock.WithCommandTimeout(timeout))
	require.NoError(t, err)
	name := "fair-close-stalls"
	h, waiting := heldWithWaiter(t, e, holder, c, name)
	start := time.Now()
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-waiting, rlock.ErrClosed)
	assert.Less(t, time.Since(start), timeout+300*time.Millisecond, "the waiter's return after Close")
	require.NoError(t, e.do("DEL", rlock.FairQueueName(name), rlock.FairTimeoutName(name)).Error())
	require.NoError(t, holder.FairLock(name).Unlock(h))
}

// TestFairLockReservationFromTheSendThatRan: a fair waiter's acquire
// refused (BUSY) for over a second, then run, dates its reservation from
// the send that ran: the lock's expiry plus the fair wait, as the script
// computes it (the lock's TTL + wait + now). Sent again with its first
// attempt's now, it was dated that much earlier, and other clients'
// cleanup could drop the waiter from the line before its reservation was
// really over.
func TestFairLockReservationFromTheSendThatRan(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	holder := e.client()
	const wait = 20 * time.Second
	faulty, c := faultyClient(t, e, rlock.WithFairLockWaitTimeout(wait))
	name := "fair-resent"
	h := rlock.WithOwner(ctx, 1)
	require.NoError(t, holder.FairLock(name).LockLease(h, time.Minute))
	loadScripts(t, e, scripts.FairAcquire)
	// Ten refusals with back-off (10 ms doubling to 500 ms, jittered) take
	// at least 1.3 s.
	faulty.Inject(redistest.Rule{Match: isScript(scripts.FairAcquire), Fault: redistest.Refuse, Err: busy(e), Times: 10})
	start := time.Now()
	w := make(chan error, 1)
	go func() { w <- c.FairLock(name).Lock(rlock.WithOwner(ctx, 2)) }()
	waitQueued(t, e, name, 1)
	require.Greater(t, time.Since(start), time.Second, "the refusals did not last a second")
	expiry, err := e.do("PEXPIRETIME", name).AsInt64()
	require.NoError(t, err)
	_, timeouts := fairQueue(t, e, name)
	assert.InDelta(t, float64(expiry+wait.Milliseconds()), timeouts[field(c, 2)], 250,
		"the reservation is not the lock's expiry plus the wait (dated from the first attempt?)")
	require.NoError(t, holder.FairLock(name).Unlock(h))
	require.NoError(t, <-w)
	require.NoError(t, c.FairLock(name).Unlock(rlock.WithOwner(ctx, 2)))
}

// TestFairLockLeaseTimeoutChain is Redisson's testLeaseTimeout: a holder
// and eight queued waiters, each taking the lock with a short lease and
// never unlocking; every hold ends by its lease alone, and the waiters get
// the lock one after another in the order they queued.
func TestFairLockLeaseTimeoutChain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(rlock.WithFairLockWaitTimeout(20 * time.Second))
	name := "fair-lease-chain"
	l := c.FairLock(name)
	const lease = 200 * time.Millisecond
	// The first hold's lease is longer, so that it cannot end while the
	// waiters queue (the queue would never reach n); the waiters' leases
	// then make the chain. A queued waiter sleeps for the time its acquire
	// reply gives (from the current hold's TTL): no unlock message comes,
	// as in Redisson's testLeaseTimeout.
	require.NoError(t, l.LockLease(rlock.WithOwner(ctx, 1), time.Second))
	const n = 8
	order := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			ok, err := l.TryLock(rlock.WithOwner(ctx, int64(10+i)), 30*time.Second, lease)
			if err == nil && !ok {
				err = fmt.Errorf("waiter %d: not acquired", i)
			}
			if err != nil {
				errs <- err
				return
			}
			order <- i
		}()
		waitQueued(t, e, name, i+1) // queued in this order
	}
	start := time.Now()
	for want := range n {
		select {
		case got := <-order:
			assert.Equal(t, want, got, "served out of queue order")
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d never got the lock", want)
		}
	}
	// Each hold lasted its lease: the chain took about n leases.
	assert.Greater(t, time.Since(start), (n-1)*lease-lease/2)
	q, _ := fairQueue(t, e, name)
	assert.Empty(t, q)
}
