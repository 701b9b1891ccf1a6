package rlock_test

import (
	"context"
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

// Regressions from an adversarial review of the synchronizers' settling:
// a lost reply is settled from the client's record key of the object, and
// an acquisition whose caller left is given back in the background.

func getKey(t *testing.T, e *env, k string) string {
	t.Helper()
	s, err := e.do("GET", k).ToString()
	require.NoError(t, err)
	return s
}

func isScript(s *scripts.Script) func([]string) bool {
	return func(w []string) bool { return len(w) > 1 && w[0] == "EVALSHA" && w[1] == s.SHA1() }
}

// loadScripts loads scs, so that a faulted EVALSHA is the call that runs
// (not a NOSCRIPT followed by an EVAL).
func loadScripts(t *testing.T, e *env, scs ...*scripts.Script) {
	t.Helper()
	for _, sc := range scs {
		require.NoError(t, e.do("SCRIPT", "LOAD", sc.Text()).Error())
	}
}

// faultyClient returns a Client over a Faulty wrapper of a fresh
// connection to e's server, with opts.
func faultyClient(t *testing.T, e *env, opts ...rlock.Option) (*redistest.Faulty, *rlock.Client) {
	t.Helper()
	rc, err := e.srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	faulty := redistest.NewFaulty(rc)
	c, err := rlock.New(faulty, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return faulty, c
}

// busy is Redis' BUSY error reply, for a Refuse fault.
func busy(e *env) error {
	return redistest.RedisError(context.Background(), e.raw, "BUSY Redis is busy running a script")
}

// abandonAcquire runs acquire with a context that is cancelled while the
// reply of its call of script is lost: the caller leaves with
// context.Canceled, and the background settles the call (which ran).
func abandonAcquire(t *testing.T, faulty *redistest.Faulty, script *scripts.Script, acquire func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	faulty.Inject(redistest.Rule{Match: isScript(script), Fault: redistest.LoseReply, After: cancel})
	ok, err := acquire(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ok)
}

// TestSyncRecordKeySharedByTwoNames: "x" and "{x}" have the same record
// key (Redisson's prefix rule gives both goredisson_ops:{x}:<id>). A
// recorded call on "{x}" made while a call on "x" waits for its settling
// must not drop that call's record: the settling would read "not run" and
// send the acquisition again, taking a second permit.
func TestSyncRecordKeySharedByTwoNames(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	faulty, c := faultyClient(t, e)

	a, b := c.Semaphore("rk"), c.Semaphore("{rk}")
	for _, s := range []*rlock.Semaphore{a, b} {
		ok, err := s.TrySetPermits(ctx, 5)
		require.NoError(t, err)
		require.True(t, ok)
	}
	loadScripts(t, e, scripts.SemAcquire)
	faulty.Inject(redistest.Rule{
		Match: func(w []string) bool { return isScript(scripts.SemAcquire)(w) && len(w) > 3 && w[3] == "rk" },
		Fault: redistest.LoseReply,
		After: func() { assert.NoError(t, b.Release(ctx, 1)) }, // the other name, in the window
	})
	ok, err := a.TryAcquire(ctx, 1, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, faulty.Pending(), "the fault hit")
	assert.Equal(t, "4", getKey(t, e, "rk"), "one acquisition of one permit")
	assert.Equal(t, "6", getKey(t, e, "{rk}"), "one release of one permit")
}

// TestSyncGiveBackOutlastsRefusals: an acquisition that ran while its
// caller left (lost reply, ctx cancelled) is given back in the background;
// Redis refusing the give-back (BUSY) for longer than a call's budget
// delays it, and does not drop it.
func TestSyncGiveBackOutlastsRefusals(t *testing.T) {
	e := newEnv(t)
	// A budget of 4 x 100 ms; ten refusals with back-off last longer.
	faulty, c := faultyClient(t, e, rlock.WithCommandTimeout(100*time.Millisecond))
	bg := context.Background()
	s := c.Semaphore("give-back-refused")
	ok, err := s.TrySetPermits(bg, 5)
	require.NoError(t, err)
	require.True(t, ok)
	loadScripts(t, e, scripts.SemAcquire, scripts.SemUpdate, scripts.SyncFence)
	refused := faulty.Count(isScript(scripts.SemUpdate))
	faulty.Inject(redistest.Rule{Match: isScript(scripts.SemUpdate), Fault: redistest.Refuse, Err: busy(e), Times: 10})
	abandonAcquire(t, faulty, scripts.SemAcquire, func(ctx context.Context) (bool, error) { return s.TryAcquire(ctx, 1, 0) })
	require.Eventually(t, func() bool { return getKey(t, e, "give-back-refused") == "5" }, 15*time.Second, 10*time.Millisecond,
		"the abandoned permit was not given back (give-back calls: %d)", refused())
	// (The counter moves when a call returns, after Redis ran it.)
	assert.Eventually(t, func() bool { return refused() == 11 }, 5*time.Second, time.Millisecond,
		"ten refused give-backs, then the one that ran: %d calls", refused())
	assert.Equal(t, "5", getKey(t, e, "give-back-refused"))
}

// slowFence holds sync_fence calls up once armed (a slow network),
// signalling the first one sent.
type slowFence struct {
	rueidis.Client
	armed atomic.Bool
	sent  chan struct{}
}

func (s *slowFence) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if s.armed.Load() && isScript(scripts.SyncFence)(cmds[0].Commands()) {
		select {
		case s.sent <- struct{}{}:
		default:
		}
		time.Sleep(300 * time.Millisecond)
	}
	return s.Client.DoMulti(ctx, cmds...)
}

func (s *slowFence) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return s.DoMulti(ctx, cmd)[0]
}

// TestSyncGiveBackAtClose: the background learns that an abandoned
// acquisition ran while Close waits for it: the give-back it owes is still
// sent (one attempt within a command timeout), not dropped.
func TestSyncGiveBackAtClose(t *testing.T) {
	e := newEnv(t)
	rc, err := e.srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	slow := &slowFence{Client: rc, sent: make(chan struct{}, 1)}
	faulty := redistest.NewFaulty(slow)
	c, err := rlock.New(faulty, rlock.WithCommandTimeout(time.Second))
	require.NoError(t, err)
	bg := context.Background()
	s := c.Semaphore("give-back-close")
	ok, err := s.TrySetPermits(bg, 5)
	require.NoError(t, err)
	require.True(t, ok)
	loadScripts(t, e, scripts.SemAcquire, scripts.SemUpdate, scripts.SyncFence)
	slow.armed.Store(true)
	abandonAcquire(t, faulty, scripts.SemAcquire, func(ctx context.Context) (bool, error) { return s.TryAcquire(ctx, 1, 0) })
	<-slow.sent // the background is settling it
	start := time.Now()
	require.NoError(t, c.Close())
	assert.Less(t, time.Since(start), 2*time.Second, "Close")
	assert.Equal(t, "5", getKey(t, e, "give-back-close"), "the permit the caller does not hold was given back")
}

// signalUpdate signals each sem_update call sent.
type signalUpdate struct {
	rueidis.Client
	sent chan struct{}
}

func (s *signalUpdate) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, c := range cmds {
		if isScript(scripts.SemUpdate)(c.Commands()) {
			select {
			case s.sent <- struct{}{}:
			default:
			}
		}
	}
	return s.Client.DoMulti(ctx, cmds...)
}

func (s *signalUpdate) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return s.DoMulti(ctx, cmd)[0]
}

// TestSyncGiveBackResyncEndsAtClose: on Sentinel (replica sync on) with the
// replica stopped, a background give-back in flight at Close does not hold
// Close through its replica resync's retries (about 9 s): the background's
// context ends with Close.
func TestSyncGiveBackResyncEndsAtClose(t *testing.T) {
	g := redistest.Sentinel(t)
	bg := context.Background()
	rc, err := g.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	faulty := redistest.NewFaulty(rc)
	sig := &signalUpdate{Client: faulty, sent: make(chan struct{}, 1)}
	c, err := rlock.New(sig)
	require.NoError(t, err)
	s := c.Semaphore("give-back-resync")
	ok, err := s.TrySetPermits(bg, 5)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.TryAcquire(bg, 1, 0) // loads the scripts
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Release(bg, 1))
	<-sig.sent

	_, replica := masterAndReplica(t, g)
	resume := stopReplica(t, replica)
	defer resume()

	abandonAcquire(t, faulty, scripts.SemAcquire, func(ctx context.Context) (bool, error) { return s.TryAcquire(ctx, 1, 0) })
	<-sig.sent // the background's give-back is on its way
	start := time.Now()
	require.NoError(t, c.Close())
	assert.Less(t, time.Since(start), 2*time.Second, "Close waited for the give-back's replica resync")
}

// hangScripts: once armed, psem_release and sync_fence calls get no reply
// until their context ends (a partition without a reset).
type hangScripts struct {
	rueidis.Client
	armed atomic.Bool
	hung  atomic.Int32
}

func (h *hangScripts) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	w := cmds[0].Commands()
	if h.armed.Load() && (isScript(scripts.PsemRelease)(w) || isScript(scripts.SyncFence)(w)) {
		h.hung.Add(1)
		<-ctx.Done()
		out := make([]rueidis.RedisResult, len(cmds))
		for i := range out {
			out[i] = rueidis.NewErrorResult(ctx.Err())
		}
		return out
	}
	return h.Client.DoMulti(ctx, cmds...)
}

func (h *hangScripts) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return h.DoMulti(ctx, cmd)[0]
}

// TestSyncGiveBacksAtCloseShareOneBound: an abandoned acquisition of four
// expirable permits, learnt to have run while Close waits, owes four
// give-backs (one per id), and Redis stops answering them: they share one
// bound (a command timeout after Close began, plus the calls then in
// flight), not one each.
func TestSyncGiveBacksAtCloseShareOneBound(t *testing.T) {
	const timeout = 500 * time.Millisecond
	e := newEnv(t)
	rc, err := e.srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	slow := &slowFence{Client: rc, sent: make(chan struct{}, 1)}
	faulty := redistest.NewFaulty(slow)
	hang := &hangScripts{Client: faulty}
	c, err := rlock.New(hang, rlock.WithCommandTimeout(timeout))
	require.NoError(t, err)
	bg := context.Background()
	s := c.PermitExpirableSemaphore("psem-close")
	ok, err := s.TrySetPermits(bg, 10)
	require.NoError(t, err)
	require.True(t, ok)
	loadScripts(t, e, scripts.PsemAcquire, scripts.PsemRelease, scripts.SyncFence)
	slow.armed.Store(true)
	abandonAcquire(t, faulty, scripts.PsemAcquire, func(ctx context.Context) (bool, error) {
		_, ok, err := s.TryAcquireN(ctx, 4, 0, 0)
		return ok, err
	})
	<-slow.sent // the background is settling it: that reply comes, later calls hang
	hang.armed.Store(true)
	start := time.Now()
	require.NoError(t, c.Close())
	assert.Less(t, time.Since(start), 4*timeout, "Close (%d calls hung)", hang.hung.Load())
}

// TestPermitLeaseFromTheSendThatRan: an acquisition refused (BUSY) or
// whose request was lost (settled as not run), then sent again, hands out
// a permit whose lease runs from the call that ran. The first version sent
// the first attempt's time again: after refusals as long as the lease, the
// permit it handed out had already expired.
func TestPermitLeaseFromTheSendThatRan(t *testing.T) {
	for _, fault := range []redistest.Fault{redistest.Refuse, redistest.Drop} {
		t.Run(fault.String(), func(t *testing.T) {
			e := newEnv(t)
			faulty, c := faultyClient(t, e, rlock.WithCommandTimeout(100*time.Millisecond))
			bg := context.Background()
			s := c.PermitExpirableSemaphore("lease-resent")
			ok, err := s.TrySetPermits(bg, 1)
			require.NoError(t, err)
			require.True(t, ok)
			loadScripts(t, e, scripts.PsemAcquire, scripts.SyncFence)
			// Ten failed sends with back-off (10 ms doubling to 500 ms,
			// jittered) take over a second, longer than the lease.
			faulty.Inject(redistest.Rule{Match: isScript(scripts.PsemAcquire), Fault: fault, Err: busy(e), Times: 10})
			const lease = time.Second
			start := time.Now()
			id, ok, err := s.TryAcquire(bg, 10*time.Second, lease)
			require.NoError(t, err)
			require.True(t, ok)
			require.Greater(t, time.Since(start), lease, "the failed sends did not last longer than the lease")
			left, err := s.LeaseTime(bg, id)
			require.NoError(t, err, "the permit handed out had expired")
			assert.Greater(t, left, lease-300*time.Millisecond, "the lease ran from the first attempt")
		})
	}
}
