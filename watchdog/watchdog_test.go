package watchdog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/watchdog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// renewer records the batches it is given and answers with a function of
// the hold. The watchdog talks to Redis only through Config.Renew; these
// tests check its scheduling, batching and loss reporting over a real hold
// table (the rlock tests check renewal against a real Redis).
type renewer struct {
	mu      sync.Mutex
	rounds  [][][]hold.Key
	answer  func(hold.Key) (bool, error)
	roundCh chan struct{}
}

func (r *renewer) renew(ctx context.Context, _ hold.Kind, batches [][]hold.Key) []watchdog.Result {
	r.mu.Lock()
	r.rounds = append(r.rounds, batches)
	answer := r.answer
	r.mu.Unlock()
	out := make([]watchdog.Result, len(batches))
	for i, b := range batches {
		for _, h := range b {
			ok, err := answer(h)
			if err != nil {
				out[i].Err = err
				break
			}
			out[i].Renewed = append(out[i].Renewed, ok)
		}
	}
	if r.roundCh != nil {
		r.roundCh <- struct{}{}
	}
	return out
}

// fixture is a hold table, its end reports, and a watchdog on it.
type fixture struct {
	tab  *hold.Table
	w    *watchdog.Watchdog
	lost chan error
}

func newWatchdog(t *testing.T, r *renewer, cfg watchdog.Config) *fixture {
	t.Helper()
	f := &fixture{lost: make(chan error, 100)}
	f.tab = hold.New(cfg.Timeout, func(_ hold.Key, err error) { f.lost <- err })
	cfg.Table = f.tab
	cfg.Renew = r.renew
	w, err := watchdog.New(cfg)
	require.NoError(t, err)
	f.w = w
	t.Cleanup(func() { w.Close(); f.tab.Close() })
	return f
}

func key(name string) hold.Key { return hold.Key{Name: name, Field: "c:1"} }

// add records one watchdog acquisition of k.
func (f *fixture) add(t *testing.T, k hold.Key) {
	h, err := f.tab.Use(context.Background(), k)
	require.NoError(t, err)
	require.True(t, f.tab.Acquired(h, f.tab.Held(k)+1, 0, time.Now(), time.Now()))
	f.tab.Done(h)
}

// release records an unlock of k that left count.
func (f *fixture) release(t *testing.T, k hold.Key, count int) {
	h, err := f.tab.Use(context.Background(), k)
	require.NoError(t, err)
	f.tab.Released(h, count, time.Now(), time.Now())
	f.tab.Done(h)
}

func (f *fixture) renewing() int {
	_, n := f.tab.Stats()
	return n
}

func TestBatchesBySlotAndSize(t *testing.T) {
	r := &renewer{answer: func(hold.Key) (bool, error) { return true, nil }, roundCh: make(chan struct{}, 10)}
	f := newWatchdog(t, r, watchdog.Config{
		Timeout:   300 * time.Millisecond,
		BatchSize: 10,
		Slot:      func(key string) uint16 { return uint16(key[0]) },
	})
	for i := range 25 {
		f.add(t, key("a"+fmt.Sprint(i)))
	}
	for i := range 7 {
		f.add(t, key("b"+fmt.Sprint(i)))
	}
	<-r.roundCh
	r.mu.Lock()
	batches := r.rounds[0]
	r.mu.Unlock()
	sizes := map[byte][]int{}
	total := 0
	for _, b := range batches {
		require.NotEmpty(t, b)
		assert.LessOrEqual(t, len(b), 10)
		for _, h := range b {
			assert.Equal(t, b[0].Name[0], h.Name[0], "a batch spans slots")
		}
		sizes[b[0].Name[0]] = append(sizes[b[0].Name[0]], len(b))
		total += len(b)
	}
	assert.Equal(t, 32, total)
	assert.Len(t, batches, 4, "25 keys of one slot in batches of 10 (3), 7 of another (1)")
}

func TestLostWhenFieldGone(t *testing.T) {
	gone := key("gone")
	r := &renewer{answer: func(h hold.Key) (bool, error) { return h != gone, nil }}
	f := newWatchdog(t, r, watchdog.Config{Timeout: 150 * time.Millisecond})
	f.add(t, gone)
	f.add(t, key("kept"))
	err := <-f.lost
	assert.ErrorIs(t, err, watchdog.ErrNotHeld)
	assert.ErrorIs(t, err, hold.ErrLockLost)
	assert.Equal(t, 0, f.tab.Held(gone))
	assert.Equal(t, 1, f.renewing())
}

// Renewal failures are retried; the loss is reported once the next attempt
// could come too late, before the lease runs out.
func TestLostBeforeLeaseEndsWhenRenewalsFail(t *testing.T) {
	var failing sync.Mutex
	fail := false
	r := &renewer{answer: func(hold.Key) (bool, error) {
		failing.Lock()
		defer failing.Unlock()
		if fail {
			return false, errors.New("connection refused")
		}
		return true, nil
	}, roundCh: make(chan struct{}, 100)}
	const timeout = 600 * time.Millisecond
	f := newWatchdog(t, r, watchdog.Config{Timeout: timeout})
	f.add(t, key("k"))
	<-r.roundCh // one successful renewal
	lastOK := time.Now()
	failing.Lock()
	fail = true
	failing.Unlock()
	<-r.roundCh // the first failure is retried
	select {
	case err := <-f.lost:
		t.Fatalf("lost after a single failure: %v", err)
	default:
	}
	err := <-f.lost
	at := time.Now()
	assert.ErrorIs(t, err, watchdog.ErrRenewFailed)
	assert.ErrorContains(t, err, "connection refused")
	assert.Less(t, at.Sub(lastOK), timeout, "the loss must be reported before the lease can run out")
	assert.Equal(t, 0, f.renewing())
}

// Ending a hold returns only after a renewal round that includes it ends.
func TestEndWaitsForInflightRound(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	r := &renewer{answer: func(hold.Key) (bool, error) {
		once.Do(func() { close(entered); <-release })
		return true, nil
	}}
	f := newWatchdog(t, r, watchdog.Config{Timeout: 60 * time.Millisecond})
	k := key("k")
	f.add(t, k)
	<-entered
	removed := make(chan struct{})
	go func() { f.tab.Zero(f.tab.AbandonName("k", 0, hold.ErrLockLost)); close(removed) }()
	select {
	case <-removed:
		t.Fatal("AbandonName returned while a renewal of the hold was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-removed
	assert.Equal(t, 0, f.renewing())
}

// Close returns at once, even with a round stuck in Renew.
func TestCloseDoesNotWaitForARound(t *testing.T) {
	entered := make(chan struct{})
	var once sync.Once
	r := &renewer{}
	tab := hold.New(3*time.Second, nil)
	defer tab.Close()
	w, err := watchdog.New(watchdog.Config{Table: tab, Timeout: 30 * time.Millisecond,
		Renew: func(ctx context.Context, kind hold.Kind, b [][]hold.Key) []watchdog.Result {
			once.Do(func() { close(entered) })
			<-ctx.Done() // a renewer honours ctx
			return r.renew(ctx, kind, nil)
		}})
	require.NoError(t, err)
	h, err := tab.Use(context.Background(), key("k"))
	require.NoError(t, err)
	tab.Acquired(h, 1, 0, time.Now(), time.Now())
	tab.Done(h)
	<-entered
	start := time.Now()
	w.Close()
	assert.Less(t, time.Since(start), 5*time.Millisecond)
}

func TestCountsNestedHolds(t *testing.T) {
	r := &renewer{answer: func(hold.Key) (bool, error) { return true, nil }}
	f := newWatchdog(t, r, watchdog.Config{Timeout: time.Hour})
	k := key("k")
	f.add(t, k)
	f.add(t, k)
	assert.Equal(t, 2, f.tab.Held(k))
	f.release(t, k, 1)
	assert.Equal(t, 1, f.tab.Held(k))
	assert.Equal(t, 1, f.renewing())
	f.release(t, k, 0)
	assert.Equal(t, 0, f.tab.Held(k))
	assert.Equal(t, 0, f.renewing())
	records, _ := f.tab.Stats()
	assert.Zero(t, records, "a released hold leaves no record")
}

func TestConfigErrors(t *testing.T) {
	tab := hold.New(time.Second, nil)
	defer tab.Close()
	_, err := watchdog.New(watchdog.Config{Table: tab, Timeout: time.Millisecond, Renew: (&renewer{}).renew})
	assert.Error(t, err)
	_, err = watchdog.New(watchdog.Config{Table: tab, Timeout: time.Second})
	assert.Error(t, err)
}

func TestMaxHold(t *testing.T) {
	r := &renewer{answer: func(hold.Key) (bool, error) { return true, nil }}
	f := newWatchdog(t, r, watchdog.Config{Timeout: 90 * time.Millisecond, MaxHold: 200 * time.Millisecond})
	start := time.Now()
	f.add(t, key("k"))
	assert.ErrorIs(t, <-f.lost, watchdog.ErrMaxHold)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	assert.Zero(t, f.renewing())
}

// A hold whose owner is unlocking it is not reported lost when a renewal
// finds it gone: the unlock deleted it.
func TestReleasingHoldIsNotLost(t *testing.T) {
	var mu sync.Mutex
	gone := false
	r := &renewer{answer: func(hold.Key) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return !gone, nil
	}, roundCh: make(chan struct{}, 100)}
	f := newWatchdog(t, r, watchdog.Config{Timeout: 60 * time.Millisecond})
	k := key("k")
	f.add(t, k)
	h, err := f.tab.Use(context.Background(), k)
	require.NoError(t, err)
	f.tab.BeginRelease(h)
	mu.Lock()
	gone = true // the unlock script ran; its reply is slow
	mu.Unlock()
	<-r.roundCh
	<-r.roundCh
	assert.Equal(t, 1, f.tab.Held(k), "the unlock decides, not the renewal")
	f.tab.Released(h, 0, time.Now(), time.Now())
	f.tab.EndRelease(h)
	f.tab.Done(h)
	select {
	case err := <-f.lost:
		t.Fatalf("reported lost during its own unlock: %v", err)
	default:
	}
	// Without a release in flight the same answer is a loss.
	f.add(t, k)
	assert.ErrorIs(t, <-f.lost, watchdog.ErrNotHeld)
}

// More holds than a round can renew in a period (each call costs the
// server time): rounds end at their deadline with holds left, and none of
// them is reported lost as long as the server renews every hold within a
// lease. Rounds take the earliest leases first, so the holds a cut round
// left come first in the next one.
func TestOverloadedRoundsLoseNothing(t *testing.T) {
	const (
		timeout = 600 * time.Millisecond // rounds every 200ms
		holds   = 30                     // 240ms of calls a round: every round is cut
		cost    = 8 * time.Millisecond   // per call: about 25 calls per period, 75 per lease
	)
	var mu sync.Mutex
	var rounds [][]string // per round: the holds renewed, in order
	var failed []map[string]bool
	f := &fixture{lost: make(chan error, holds)}
	f.tab = hold.New(timeout, func(_ hold.Key, err error) { f.lost <- err })
	w, err := watchdog.New(watchdog.Config{Table: f.tab, Timeout: timeout, BatchSize: 1,
		Renew: func(ctx context.Context, _ hold.Kind, b [][]hold.Key) []watchdog.Result {
			out := make([]watchdog.Result, len(b))
			var renewed []string
			miss := map[string]bool{}
			for i, batch := range b {
				select {
				case <-ctx.Done():
					out[i].Err = ctx.Err()
					miss[batch[0].Name] = true
					continue
				case <-time.After(cost):
				}
				out[i].Renewed = []bool{true}
				renewed = append(renewed, batch[0].Name)
			}
			mu.Lock()
			rounds = append(rounds, renewed)
			failed = append(failed, miss)
			mu.Unlock()
			return out
		}})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close(); f.tab.Close() })
	for i := range holds {
		f.add(t, key(fmt.Sprint("h", i)))
	}
	time.Sleep(5 * timeout)
	select {
	case err := <-f.lost:
		t.Fatalf("a hold was reported lost: %v", err)
	default:
	}
	assert.Equal(t, holds, f.renewing())

	mu.Lock()
	defer mu.Unlock()
	cut, first := 0, 0
	for i := 1; i < len(rounds); i++ {
		if len(failed[i-1]) == 0 {
			continue
		}
		cut++
		if len(rounds[i]) > 0 && failed[i-1][rounds[i][0]] {
			first++
		}
	}
	t.Logf("%d rounds, %d cut short; the next round began with a hold the cut one left in %d", len(rounds), cut, first)
	require.Positive(t, cut, "no round was cut short: the test did not overload the watchdog")
	assert.Equal(t, cut, first, "a round after a cut one must begin with a hold the cut one left")
}

// One hold's renewals keep failing while Redis renews the others (a
// cluster node down, say): it is retried in the rounds that follow, and
// reported lost before its lease can run out; the others keep renewing.
func TestLostBeforeLeaseEndsWhileOthersRenew(t *testing.T) {
	const timeout = 600 * time.Millisecond
	var mu sync.Mutex
	failing := false
	var lastOK time.Time
	r := &renewer{answer: func(h hold.Key) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if h.Name == "down" {
			if failing {
				return false, errors.New("connection refused")
			}
			lastOK = time.Now()
		}
		return true, nil
	}, roundCh: make(chan struct{}, 100)}
	f := newWatchdog(t, r, watchdog.Config{Timeout: timeout, BatchSize: 1})
	f.add(t, key("down"))
	f.add(t, key("up"))
	<-r.roundCh // one successful renewal of both
	mu.Lock()
	failing = true
	ok := lastOK
	mu.Unlock()
	err := <-f.lost
	at := time.Now()
	assert.ErrorIs(t, err, watchdog.ErrRenewFailed)
	assert.ErrorContains(t, err, `"down"`)
	// The last renewal was sent before lastOK; its lease ends at the
	// latest timeout after it.
	assert.Less(t, at.Sub(ok), timeout, "the loss must be reported before the lease can run out")
	assert.Greater(t, at.Sub(ok), timeout/3, "reported lost without a retry")
	assert.Equal(t, 1, f.renewing(), "the hold Redis renews is kept")
	assert.Equal(t, 1, f.tab.Held(key("up")))
}

// Many holds, a short timeout: Redis renews the first half of a round and
// then stops answering. The rest are retried in the next round (Redis was
// serving), which stalls too, so they are all reported lost at once; the
// watchdog must leave time for that. Every HoldContext must end before
// the lease its hold last set could run out (in Redis, counted from when
// the renewal reached the renewer, which is after the watchdog sent it).
func TestMassLossEndsHoldContextsInTime(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	n := 40000 // reported at once in a margin (50ms), as the watchdog once did, some are late
	if raceEnabled {
		n = 6000 // the race detector makes a report about 10 times slower
	}
	tab := hold.New(timeout, func(hold.Key, error) {})
	leaseEnd := make([]atomic.Int64, n)  // unix ns
	cancelled := make([]atomic.Int64, n) // unix ns: the last of its HoldContexts
	index := make(map[string]int, n)
	const perHold = 2 // HoldContexts, made as rlock's are
	for i := range n {
		k := key(fmt.Sprint("m", i))
		index[k.Name] = i
		now := acquire(t, tab, k)
		leaseEnd[i].Store(now.Add(timeout).UnixNano())
		for range perHold {
			hctx, cancel := context.WithCancelCause(context.Background())
			id, ok, err := tab.Watch(k, func(err error) {
				cancel(err)
				cancelled[i].Store(time.Now().UnixNano())
			})
			require.NoError(t, err)
			require.True(t, ok)
			context.AfterFunc(hctx, func() { tab.Unwatch(k, id) })
		}
	}
	var rounds atomic.Int32
	w, err := watchdog.New(watchdog.Config{Table: tab, Timeout: timeout,
		Renew: func(ctx context.Context, _ hold.Kind, b [][]hold.Key) []watchdog.Result {
			out := make([]watchdog.Result, len(b))
			first := rounds.Add(1) == 1
			at := time.Now()
			for i, batch := range b {
				if first && i < len(b)/2 {
					out[i].Renewed = make([]bool, len(batch))
					for j, k := range batch {
						out[i].Renewed[j] = true
						leaseEnd[index[k.Name]].Store(at.Add(timeout).UnixNano())
					}
					continue
				}
				<-ctx.Done() // no answer
				out[i].Err = ctx.Err()
			}
			return out
		}})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close(); tab.Close() })

	deadline := time.Now().Add(4 * timeout)
	for {
		all := true
		for i := range n {
			if cancelled[i].Load() == 0 {
				all = false
				break
			}
		}
		if all {
			break
		}
		require.True(t, time.Now().Before(deadline), "not every HoldContext ended")
		time.Sleep(10 * time.Millisecond)
	}
	late, worst := 0, time.Duration(0)
	for i := range n {
		if d := time.Duration(cancelled[i].Load() - leaseEnd[i].Load()); d >= 0 {
			late++
			worst = max(worst, d)
		}
	}
	t.Logf("%d holds, %d rounds; HoldContexts ended after the lease end: %d (worst %v)", n, rounds.Load(), late, worst)
	assert.Zero(t, late, "HoldContexts that ended after their lease could run out")
}

// One hold of one kind is on a cluster node that is down, and Renew
// retries it (as the rlock renewer does) until the round's deadline. The
// kinds are renewed side by side: the other kind's holds, on healthy
// nodes, keep being renewed (they were once renewed only after the first
// kind's Renew returned, with the round's time gone, and reported lost).
func TestKindRetryingDoesNotStarveOtherKinds(t *testing.T) {
	const timeout = 600 * time.Millisecond
	var mu sync.Mutex
	var lost []hold.Key
	tab := hold.New(timeout, func(k hold.Key, _ error) {
		mu.Lock()
		lost = append(lost, k)
		mu.Unlock()
	})
	w, err := watchdog.New(watchdog.Config{Table: tab, Timeout: timeout, BatchSize: 1,
		Renew: func(ctx context.Context, _ hold.Kind, b [][]hold.Key) []watchdog.Result {
			// As the rlock renewer: every batch once (unless the round's
			// time is over), then the failed ones again until it is.
			out := make([]watchdog.Result, len(b))
			failed := false
			for i, batch := range b {
				switch {
				case ctx.Err() != nil:
					out[i].Err = ctx.Err()
				case batch[0].Name == "down":
					out[i].Err = errors.New("dial tcp: connection refused")
					failed = true
				default:
					out[i].Renewed = []bool{true}
				}
			}
			if failed {
				<-ctx.Done()
			}
			return out
		}})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close(); tab.Close() })
	add := func(kind hold.Kind, name string) { acquire(t, tab, hold.Key{Kind: kind, Name: name, Field: "c:1"}) }
	add(0, "down") // the earliest lease: its kind would go first
	add(0, "a1")
	add(1, "b1")
	add(1, "b2")
	time.Sleep(2 * timeout)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, lost, 1, "only the hold on the node that is down is lost: %v", lost)
	assert.Equal(t, "down", lost[0].Name)
	for _, name := range []string{"a1", "b1", "b2"} {
		assert.Equal(t, 1, tab.Held(hold.Key{Kind: map[bool]hold.Kind{true: 0, false: 1}[name == "a1"], Name: name, Field: "c:1"}), name)
	}
}

// A watchdog hold re-entered with a lease shorter than the margin makes
// the next round's deadline (a margin before the earliest lease end) lie
// in the past. The round still gets a margin of time: the other holds are
// renewed, not reported lost (such a round once renewed nothing).
func TestShortReentryLeaseDoesNotEmptyRounds(t *testing.T) {
	const timeout = 600 * time.Millisecond
	var mu sync.Mutex
	var lost []string
	tab := hold.New(timeout, func(k hold.Key, err error) {
		mu.Lock()
		lost = append(lost, k.Name+": "+err.Error())
		mu.Unlock()
	})
	var rounds atomic.Int32
	reenter := func(name string) {
		k := key(name)
		h, err := tab.Use(context.Background(), k)
		require.NoError(t, err)
		now := time.Now()
		tab.Acquired(h, tab.Held(k)+1, 15*time.Millisecond, now, now)
		tab.Done(h)
	}
	w, err := watchdog.New(watchdog.Config{Table: tab, Timeout: timeout, BatchSize: 1,
		Renew: func(ctx context.Context, _ hold.Kind, b [][]hold.Key) []watchdog.Result {
			n := rounds.Add(1)
			out := make([]watchdog.Result, len(b))
			for i := range b {
				if err := ctx.Err(); err != nil { // as the rlock renewer
					out[i].Err = err
					continue
				}
				out[i].Renewed = []bool{true}
			}
			switch n { // re-entries with a 15ms lease in two rounds in a row
			case 2:
				reenter("s1")
			case 3:
				reenter("s2")
			}
			return out
		}})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close(); tab.Close() })
	for i := range 10 {
		acquire(t, tab, key(fmt.Sprint("h", i)))
	}
	acquire(t, tab, key("s1"))
	acquire(t, tab, key("s2"))
	time.Sleep(2 * timeout)
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, rounds.Load(), int32(4))
	for _, l := range lost {
		assert.Regexp(t, "^s[12]: ", l, "a hold with a watchdog lease was reported lost")
	}
}

// A lost handler that is slow (an alerting call, say) must not delay the
// end of another hold's HoldContext: hold b's renewals fail while a's
// handler runs for a second, and b's HoldContext must still end before
// b's lease could run out.
func TestSlowHandlerDoesNotDelayHoldContexts(t *testing.T) {
	const timeout = 600 * time.Millisecond
	var mu sync.Mutex
	bFails := false
	var bLeaseEnd, bEnded atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	tab := hold.New(timeout, func(k hold.Key, err error) {
		if k.Name == "a" {
			once.Do(func() {
				select {
				case <-release:
				case <-time.After(time.Second):
				}
			})
		}
	})
	w, err := watchdog.New(watchdog.Config{Table: tab, Timeout: timeout, BatchSize: 1,
		Renew: func(ctx context.Context, _ hold.Kind, b [][]hold.Key) []watchdog.Result {
			at := time.Now()
			out := make([]watchdog.Result, len(b))
			mu.Lock()
			defer mu.Unlock()
			for i, batch := range b {
				switch {
				case batch[0].Name == "a":
					out[i].Renewed = []bool{false} // gone: reported lost at once
					bFails = true
				case bFails:
					out[i].Err = errors.New("connection refused")
				default:
					out[i].Renewed = []bool{true}
					bLeaseEnd.Store(at.Add(timeout).UnixNano())
				}
			}
			return out
		}})
	require.NoError(t, err)
	t.Cleanup(func() { close(release); w.Close(); tab.Close() })
	for _, name := range []string{"a", "b"} {
		k := key(name)
		now := acquire(t, tab, k)
		if name == "b" {
			bLeaseEnd.Store(now.Add(timeout).UnixNano())
			_, ok, err := tab.Watch(k, func(error) { bEnded.Store(time.Now().UnixNano()) })
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	require.Eventually(t, func() bool { return bEnded.Load() != 0 }, 3*time.Second, time.Millisecond)
	late := time.Duration(bEnded.Load() - bLeaseEnd.Load())
	t.Logf("b's HoldContext ended %v before its lease end", -late)
	assert.Negative(t, late, "b's HoldContext ended after its lease could run out")
}

// acquire records one watchdog acquisition of k in tab, sent and answered
// now, and returns now.
func acquire(t *testing.T, tab *hold.Table, k hold.Key) time.Time {
	t.Helper()
	h, err := tab.Use(context.Background(), k)
	require.NoError(t, err)
	now := time.Now()
	require.True(t, tab.Acquired(h, 1, 0, now, now))
	tab.Done(h)
	return now
}

// A HoldContext's cancellation that closes the watchdog (a user's
// context.AfterFunc on a parent context calling Client.Close, say) while
// the round that reported the loss times the reports: Close returns.
func TestCloseFromACancellationDuringARound(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tab := hold.New(timeout, nil)
	var w *watchdog.Watchdog
	var mu sync.Mutex
	closed := make(chan struct{})
	for i := range 200 { // enough for the round to time its reports
		k := key(fmt.Sprint("c", i))
		acquire(t, tab, k)
		_, ok, err := tab.Watch(k, func(error) {
			if i == 0 {
				mu.Lock()
				wd := w
				mu.Unlock()
				wd.Close()
				close(closed)
			}
		})
		require.NoError(t, err)
		require.True(t, ok)
	}
	mu.Lock()
	var err error
	w, err = watchdog.New(watchdog.Config{Table: tab, Timeout: timeout,
		Renew: func(ctx context.Context, _ hold.Kind, b [][]hold.Key) []watchdog.Result {
			out := make([]watchdog.Result, len(b))
			for i := range b {
				out[i].Err = errors.New("connection refused") // until they are lost
			}
			return out
		}})
	mu.Unlock()
	require.NoError(t, err)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close from a HoldContext's cancellation did not return")
	}
	tab.Close()
}
