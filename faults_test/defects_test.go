package faults_test

// Regression tests for the defects of the core-faults review (issue 9),
// one per defect where the fault matrix (matrix_test.go) does not already
// name it: defect 5 is "first acquire/reply_lost", defect 6 "acquire in
// the wait loop/request_late", defect 8 the refused (BUSY, TRYAGAIN,
// LOADING, CLUSTERDOWN, MASTERDOWN) rows.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// Defect 3: the explicit lease a partial unlock restores belongs to one
// hold and is forgotten when that hold ends; records of expired holds do
// not pile up.
func TestDefect3StaleLeaseForgotten(t *testing.T) {
	srv := standaloneLocal(t)
	c := direct(t, srv)
	ctx := context.Background()
	me := rlock.WithOwner(ctx, 1)
	l := c.Lock("d3")
	ok, err := l.TryLock(me, 0, 300*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)
	eventually(t, 5*time.Second, "the fixed lease to run out", func() bool { return doInt(t, srv, "EXISTS", "d3") == 0 })
	require.NoError(t, l.Lock(me))
	require.NoError(t, l.Lock(me))
	require.NoError(t, l.Unlock(me))
	ttl := doInt(t, srv, "PTTL", "d3")
	assert.Greater(t, ttl, int64(29000), "a partial unlock of a watchdog hold restored an old lease: PTTL %d", ttl)
	require.NoError(t, l.Unlock(me))

	var wg sync.WaitGroup
	for i := range 2000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := c.Lock(fmt.Sprint("d3-", i%50)).TryLock(ctx, 0, 20*time.Millisecond)
			assert.NoError(t, err)
			_ = ok
		}()
	}
	wg.Wait()
	eventually(t, 5*time.Second, "every record of an expired hold to go", func() bool { return c.Stats().Holds == 0 })
}

// Defect 7: goroutines sharing one WithOwner id; an attempt whose request
// never reached Redis must not count as a success because the sibling
// holds.
func TestDefect7SharedOwnerExactCount(t *testing.T) {
	srv := standaloneLocal(t)
	e := newMatrixEnv(t, srv)
	ctx := context.Background()
	shared := rlock.WithOwner(ctx, 9)
	l := e.c.Lock("d7")
	for round := range 20 {
		e.faulty.Inject(redistest.Rule{Match: isScript(scripts.Acquire), Fault: redistest.Drop})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); assert.NoError(t, l.Lock(shared)) }()
		}
		wg.Wait()
		require.Equal(t, int64(2), e.count(t, "d7", 9), "round %d: two Locks, count 2", round)
		require.NoError(t, l.Unlock(shared))
		ok, err := e.other.Lock("d7").TryLock(ctx, 0, 0)
		require.NoError(t, err)
		require.False(t, ok, "round %d: the first Unlock freed the lock while the other goroutine was inside", round)
		require.NoError(t, l.Unlock(shared))
	}
	e.settled(t, "d7")
}

// Defect 9: ForceUnlock stops this client's renewals first; a hold taken
// by the client after ForceUnlock returned keeps being renewed.
func TestDefect9ForceUnlockThenRelock(t *testing.T) {
	srv := standaloneLocal(t)
	c := direct(t, srv, rlock.WithWatchdogTimeout(600*time.Millisecond))
	ctx := context.Background()
	const rounds = 50
	holds := make([]context.Context, rounds)
	var wg sync.WaitGroup
	for i := range rounds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := rlock.WithOwner(ctx, int64(i))
			l := c.Lock(fmt.Sprint("d9-", i))
			require.NoError(t, l.Lock(me))
			_, err := l.ForceUnlock(ctx)
			require.NoError(t, err)
			require.NoError(t, l.Lock(me))
			hctx, err := l.HoldContext(me)
			require.NoError(t, err)
			holds[i] = hctx
		}()
	}
	wg.Wait()
	// Three leases later every new hold is still there.
	time.Sleep(1800 * time.Millisecond)
	for i, h := range holds {
		require.NoError(t, h.Err(), "hold %d ended: %v", i, context.Cause(h))
		assert.Equal(t, int64(1), doInt(t, srv, "EXISTS", fmt.Sprint("d9-", i)))
		require.NoError(t, c.Lock(fmt.Sprint("d9-", i)).Unlock(rlock.WithOwner(ctx, int64(i))))
	}
}

// Defect 10: the lost handler runs off the renewal goroutine: it may call
// Close, and a blocked handler does not stop other holds' renewal.
func TestDefect10LostHandlerCloseAndBlocking(t *testing.T) {
	srv := standaloneLocal(t)
	ctx := context.Background()
	block := make(chan struct{})
	entered := make(chan struct{}, 1)
	c := direct(t, srv, rlock.WithWatchdogTimeout(600*time.Millisecond), rlock.WithLostHandler(func(ev rlock.LostEvent) {
		entered <- struct{}{}
		<-block
	}))
	me := rlock.WithOwner(ctx, 1)
	require.NoError(t, c.Lock("d10-lost").Lock(me))
	require.NoError(t, c.Lock("d10-kept").Lock(me))
	do(t, srv, "DEL", "d10-lost")
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the loss was not reported")
	}
	// The handler is blocked; renewal of the other hold goes on.
	time.Sleep(1800 * time.Millisecond)
	assert.Equal(t, int64(1), doInt(t, srv, "EXISTS", "d10-kept"), "a blocked lost handler stopped renewals")
	close(block)
	require.NoError(t, c.Lock("d10-kept").Unlock(me))

	var closed sync.WaitGroup
	closed.Add(1)
	var c2 *rlock.Client
	c2 = direct(t, srv, rlock.WithWatchdogTimeout(300*time.Millisecond), rlock.WithLostHandler(func(rlock.LostEvent) {
		defer closed.Done()
		require.NoError(t, c2.Close())
	}))
	require.NoError(t, c2.Lock("d10-close").Lock(me))
	do(t, srv, "DEL", "d10-close")
	done := make(chan struct{})
	go func() { closed.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close from the lost handler deadlocked")
	}
	assert.ErrorIs(t, c2.Lock("d10-close").Lock(me), rlock.ErrClosed)
}

// Defect 11: a timeout of the client's own is ErrTimeout, not the
// caller's deadline; and an acquisition whose outcome stayed unknown is
// undone in the background once Redis answers.
func TestDefect11OwnTimeoutIsNotTheCallersDeadline(t *testing.T) {
	srv := standaloneLocal(t)
	e := newMatrixEnv(t, srv, rlock.WithCommandTimeout(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(rlock.WithOwner(context.Background(), 1), time.Minute)
	defer cancel()
	e.faulty.Inject(redistest.Rule{Match: isScript(scripts.Acquire), Fault: redistest.Late, Delay: 50 * time.Millisecond})
	e.faulty.Inject(redistest.Rule{Match: isScript(scripts.Fence), Fault: redistest.Late, Delay: 600 * time.Millisecond, Times: 1000})
	err := e.c.Lock("d11").Lock(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, rlock.ErrTimeout)
	assert.ErrorIs(t, err, rlock.ErrUnresolved)
	assert.False(t, errors.Is(err, context.DeadlineExceeded), "the caller's ctx is alive: %v", err)
	require.NoError(t, ctx.Err())
	e.faulty.Clear()
	// The late acquire ran; the background settling finds it and undoes it.
	eventually(t, 10*time.Second, "the abandoned acquisition to be undone", func() bool {
		return doInt(t, srv, "EXISTS", "d11") == 0 && e.c.Stats().Holds == 0
	})
	e.settled(t, "d11")
}

// Defect 12: a foreign force unlock ends the HoldContext, at the latest
// when the owner's Unlock finds the hold gone.
func TestDefect12ForeignForceUnlockEndsHoldContext(t *testing.T) {
	srv := standaloneLocal(t)
	a, b := direct(t, srv), direct(t, srv)
	ctx := context.Background()
	me := rlock.WithOwner(ctx, 1)
	l := a.Lock("d12")
	require.NoError(t, l.Lock(me))
	hctx, err := l.HoldContext(me)
	require.NoError(t, err)
	existed, err := b.Lock("d12").ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, existed)
	assert.ErrorIs(t, l.Unlock(me), rlock.ErrNotHeld)
	select {
	case <-hctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the HoldContext is still open after the hold ended")
	}
	assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)
	assert.Zero(t, a.Stats().Renewing)
}

// Found in review: Close racing a lost handler that calls Close must not
// deadlock (the second Close returns at once).
func TestCloseRacingCloseInLostHandler(t *testing.T) {
	srv := standaloneLocal(t)
	ctx := context.Background()
	entered := make(chan struct{})
	handlerDone := make(chan struct{})
	var c *rlock.Client
	c = direct(t, srv, rlock.WithWatchdogTimeout(300*time.Millisecond), rlock.WithLostHandler(func(rlock.LostEvent) {
		close(entered)
		time.Sleep(100 * time.Millisecond) // let the test's Close start waiting for this handler
		assert.NoError(t, c.Close())
		close(handlerDone)
	}))
	require.NoError(t, c.Lock("close-race").Lock(rlock.WithOwner(ctx, 1)))
	do(t, srv, "DEL", "close-race")
	<-entered
	closed := make(chan struct{})
	go func() { assert.NoError(t, c.Close()); close(closed) }()
	for _, ch := range []chan struct{}{handlerDone, closed} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("Close deadlocked with a Close in the lost handler")
		}
	}
}

// Found in review: the hold is deleted behind the client's back (a force
// unlock from another process), then a re-entering Lock loses its reply.
// The count it expected (1) is not there, so the script refuses and says
// so; the client records the loss (ending the old HoldContext) and takes
// the lock anew: count 1, not 2.
func TestExternalDeleteThenLostReplyOnReentry(t *testing.T) {
	srv := standaloneLocal(t)
	e := newMatrixEnv(t, srv)
	ctx := context.Background()
	me := rlock.WithOwner(ctx, 1)
	l := e.c.Lock("ext-del")
	require.NoError(t, l.Lock(me))
	hctx, err := l.HoldContext(me)
	require.NoError(t, err)
	_, err = e.other.Lock("ext-del").ForceUnlock(ctx)
	require.NoError(t, err)
	e.faulty.Inject(redistest.Rule{Match: isScript(scripts.Acquire), Fault: redistest.LoseReply})
	require.NoError(t, l.Lock(me))
	assert.Equal(t, int64(1), e.count(t, "ext-del", 1), "the lost call ran twice")
	select {
	case <-hctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the HoldContext of the deleted hold is still open")
	}
	assert.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)
	require.NoError(t, l.Unlock(me))
	e.settled(t, "ext-del")
}

// Found in review: a hold this client takes after its own ForceUnlock's
// delete ran (here: while the force unlock's reply is lost and resent)
// keeps its record and its renewal.
func TestForceUnlockSparesALaterHold(t *testing.T) {
	srv := standaloneLocal(t)
	e := newMatrixEnv(t, srv, rlock.WithWatchdogTimeout(600*time.Millisecond))
	ctx := context.Background()
	a, b := rlock.WithOwner(ctx, 1), rlock.WithOwner(ctx, 2)
	l := e.c.Lock("force-later")
	require.NoError(t, l.Lock(a))
	// Cached, so that the lost reply is the script's, not a NOSCRIPT.
	do(t, srv, "SCRIPT", "LOAD", scripts.ForceUnlock.Text())
	var bctx context.Context
	e.faulty.Inject(redistest.Rule{Match: isScript(scripts.ForceUnlock), Fault: redistest.LoseReply, After: func() {
		require.NoError(t, l.Lock(b), "B locks after the delete")
		var err error
		bctx, err = l.HoldContext(b)
		require.NoError(t, err)
	}})
	existed, err := l.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, existed)
	require.NotNil(t, bctx)
	time.Sleep(1800 * time.Millisecond) // three leases: B's hold must still be renewed
	require.NoError(t, bctx.Err(), "B's hold ended: %v", context.Cause(bctx))
	assert.Equal(t, int64(1), e.count(t, "force-later", 2))
	require.NoError(t, l.Unlock(b))
	assert.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld)
	e.settled(t, "force-later")
}
