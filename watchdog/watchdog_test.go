package watchdog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/goredisson/locks/watchdog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// renewer records the batches it is given and answers with a function of
// the hold. The watchdog talks to Redis only through Config.Renew; these
// tests check its scheduling, batching and loss reporting (the rlock tests
// check renewal against a real Redis).
type renewer struct {
	mu      sync.Mutex
	rounds  [][][]watchdog.Hold
	answer  func(watchdog.Hold) (bool, error)
	roundCh chan struct{}
}

func (r *renewer) renew(ctx context.Context, batches [][]watchdog.Hold) []watchdog.Result {
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

func newWatchdog(t *testing.T, r *renewer, cfg watchdog.Config) *watchdog.Watchdog {
	t.Helper()
	cfg.Renew = r.renew
	w, err := watchdog.New(cfg)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

func TestBatchesBySlotAndSize(t *testing.T) {
	r := &renewer{answer: func(watchdog.Hold) (bool, error) { return true, nil }, roundCh: make(chan struct{}, 10)}
	w := newWatchdog(t, r, watchdog.Config{
		Timeout:   300 * time.Millisecond,
		BatchSize: 10,
		Slot:      func(key string) uint16 { return uint16(key[0]) },
	})
	for i := range 25 {
		w.Add(watchdog.Hold{Key: "a" + fmt.Sprint(i), Field: "c:1"})
	}
	for i := range 7 {
		w.Add(watchdog.Hold{Key: "b" + fmt.Sprint(i), Field: "c:1"})
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
			assert.Equal(t, b[0].Key[0], h.Key[0], "a batch spans slots")
		}
		sizes[b[0].Key[0]] = append(sizes[b[0].Key[0]], len(b))
		total += len(b)
	}
	assert.Equal(t, 32, total)
	assert.Len(t, batches, 4, "25 keys of one slot in batches of 10 (3), 7 of another (1)")
}

func TestLostWhenFieldGone(t *testing.T) {
	gone := watchdog.Hold{Key: "gone", Field: "c:1"}
	r := &renewer{answer: func(h watchdog.Hold) (bool, error) { return h != gone, nil }}
	lost := make(chan error, 1)
	w := newWatchdog(t, r, watchdog.Config{Timeout: 150 * time.Millisecond, OnLost: func(h watchdog.Hold, err error, _ time.Time) {
		if h == gone {
			lost <- err
		}
	}})
	w.Add(gone)
	w.Add(watchdog.Hold{Key: "kept", Field: "c:1"})
	assert.ErrorIs(t, <-lost, watchdog.ErrNotHeld)
	assert.Equal(t, 0, w.Count(gone))
	assert.Equal(t, 1, w.Len())
}

// Renewal failures are retried; the loss is reported once the next attempt
// could come too late, before the lease runs out.
func TestLostBeforeLeaseEndsWhenRenewalsFail(t *testing.T) {
	var failing sync.Mutex
	fail := false
	r := &renewer{answer: func(watchdog.Hold) (bool, error) {
		failing.Lock()
		defer failing.Unlock()
		if fail {
			return false, errors.New("connection refused")
		}
		return true, nil
	}, roundCh: make(chan struct{}, 100)}
	const timeout = 600 * time.Millisecond
	type loss struct {
		at  time.Time
		err error
	}
	lost := make(chan loss, 1)
	w := newWatchdog(t, r, watchdog.Config{Timeout: timeout, OnLost: func(_ watchdog.Hold, err error, _ time.Time) {
		lost <- loss{time.Now(), err}
	}})
	h := watchdog.Hold{Key: "k", Field: "c:1"}
	w.Add(h)
	<-r.roundCh // one successful renewal
	lastOK := time.Now()
	failing.Lock()
	fail = true
	failing.Unlock()
	<-r.roundCh // the first failure is retried
	select {
	case l := <-lost:
		t.Fatalf("lost after a single failure: %v", l.err)
	default:
	}
	l := <-lost
	assert.ErrorIs(t, l.err, watchdog.ErrRenewFailed)
	assert.ErrorContains(t, l.err, "connection refused")
	assert.Less(t, l.at.Sub(lastOK), timeout, "the loss must be reported before the lease can run out")
	assert.Equal(t, 0, w.Len())
}

// Remove returns only after a renewal round that includes the hold ends.
func TestRemoveWaitsForInflightRound(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	r := &renewer{answer: func(watchdog.Hold) (bool, error) {
		once.Do(func() { close(entered); <-release })
		return true, nil
	}}
	w := newWatchdog(t, r, watchdog.Config{Timeout: 60 * time.Millisecond})
	h := watchdog.Hold{Key: "k", Field: "c:1"}
	w.Add(h)
	<-entered
	removed := make(chan struct{})
	go func() { w.Remove(h); close(removed) }()
	select {
	case <-removed:
		t.Fatal("Remove returned while a renewal of the hold was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-removed
	assert.Equal(t, 0, w.Len())
}

func TestCountsNestedHolds(t *testing.T) {
	r := &renewer{answer: func(watchdog.Hold) (bool, error) { return true, nil }}
	w := newWatchdog(t, r, watchdog.Config{Timeout: time.Hour})
	h := watchdog.Hold{Key: "k", Field: "c:1"}
	w.Add(h)
	w.Add(h)
	assert.Equal(t, 2, w.Count(h))
	w.Remove(h)
	assert.Equal(t, 1, w.Count(h))
	w.Remove(h)
	assert.Equal(t, 0, w.Count(h))
	w.Remove(h) // extra removes are harmless
	assert.True(t, w.Add(h))
	assert.Equal(t, []watchdog.Hold{h}, w.DropKey("k"))
	w.Close()
	assert.False(t, w.Add(h), "Add after Close")
}

func TestConfigErrors(t *testing.T) {
	_, err := watchdog.New(watchdog.Config{Timeout: time.Millisecond, Renew: (&renewer{}).renew})
	assert.Error(t, err)
	_, err = watchdog.New(watchdog.Config{Timeout: time.Second})
	assert.Error(t, err)
}

func TestMaxHold(t *testing.T) {
	r := &renewer{answer: func(watchdog.Hold) (bool, error) { return true, nil }}
	lost := make(chan error, 1)
	w := newWatchdog(t, r, watchdog.Config{Timeout: 90 * time.Millisecond, MaxHold: 200 * time.Millisecond,
		OnLost: func(_ watchdog.Hold, err error, _ time.Time) { lost <- err }})
	start := time.Now()
	w.Add(watchdog.Hold{Key: "k", Field: "c:1"})
	assert.ErrorIs(t, <-lost, watchdog.ErrMaxHold)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	assert.Zero(t, w.Len())
}

// A hold whose owner is unlocking it is not reported lost when a renewal
// finds it gone: the unlock deleted it.
func TestReleasingHoldIsNotLost(t *testing.T) {
	var mu sync.Mutex
	gone := false
	r := &renewer{answer: func(watchdog.Hold) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return !gone, nil
	}, roundCh: make(chan struct{}, 100)}
	lost := make(chan error, 1)
	w := newWatchdog(t, r, watchdog.Config{Timeout: 60 * time.Millisecond,
		OnLost: func(_ watchdog.Hold, err error, _ time.Time) { lost <- err }})
	h := watchdog.Hold{Key: "k", Field: "c:1"}
	w.Add(h)
	w.BeginRelease(h)
	mu.Lock()
	gone = true // the unlock script ran; its reply is slow
	mu.Unlock()
	<-r.roundCh
	<-r.roundCh
	assert.Equal(t, 1, w.Count(h), "the unlock decides, not the renewal")
	w.Remove(h)
	w.EndRelease(h)
	select {
	case err := <-lost:
		t.Fatalf("reported lost during its own unlock: %v", err)
	default:
	}
	// Without a release in flight the same answer is a loss.
	w.Add(h)
	assert.ErrorIs(t, <-lost, watchdog.ErrNotHeld)
}
