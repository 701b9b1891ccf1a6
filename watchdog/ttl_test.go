package watchdog_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/watchdog"
)

// A round that stalls (Renew honours ctx) over a hold whose TTL is a
// re-entry's lease shorter than the timeout ends, reporting the loss, a
// margin before Set+TTL (it once used Set+Timeout, and reported late).
func TestStalledRoundEndsBeforeReentryLease(t *testing.T) {
	var n atomic.Int32
	renewed := make(chan struct{}, 1)
	f := &fixture{lost: make(chan error, 10)}
	const timeout = 600 * time.Millisecond
	f.tab = hold.New(timeout, func(_ hold.Key, err error) { f.lost <- err })
	w, err := watchdog.New(watchdog.Config{Table: f.tab, Timeout: timeout, Renew: func(ctx context.Context, _ hold.Kind, b [][]hold.Key) []watchdog.Result {
		out := make([]watchdog.Result, len(b))
		if n.Add(1) == 1 {
			for i := range b {
				out[i].Renewed = []bool{true}
			}
			renewed <- struct{}{}
			return out
		}
		<-ctx.Done() // stalled
		for i := range b {
			out[i].Err = errors.New("stalled")
		}
		return out
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); f.tab.Close() })
	k := key("k")
	f.add(t, k)
	<-renewed
	time.Sleep(10 * time.Millisecond)
	h, _ := f.tab.Use(context.Background(), k)
	sent := time.Now()
	f.tab.Acquired(h, 2, 250*time.Millisecond, sent, sent) // Redis (plain lock): TTL 250ms from here
	f.tab.Done(h)
	e := <-f.lost
	late := time.Since(sent) - 250*time.Millisecond
	t.Logf("lost %v after the re-entry's lease could end: %v", late, e)
	if late > 0 {
		t.Errorf("loss reported %v after the lease could run out", late)
	}
}

// A read/write lock re-entry never shortens the hash's TTL (max(ttl,lease),
// ttl+lease): the record keeps the later end, so one failed renewal is
// retried, not given up (it once recorded TTL=lease and gave up).
func TestReadWriteReentryDoesNotShortenTheDeadline(t *testing.T) {
	var fail atomic.Bool
	r := &renewer{answer: func(hold.Key) (bool, error) {
		if fail.Load() {
			return false, errors.New("blip")
		}
		return true, nil
	}, roundCh: make(chan struct{}, 100)}
	f := newWatchdog(t, r, watchdog.Config{Timeout: 600 * time.Millisecond})
	k := hold.Key{Kind: 2, Name: "rw", Field: "c:1"}
	f.add(t, k)
	<-r.roundCh
	h, _ := f.tab.Use(context.Background(), k)
	f.tab.Acquired(h, 2, 5*time.Millisecond, time.Now(), time.Now())
	f.tab.Done(h)
	fail.Store(true)
	<-r.roundCh
	select {
	case err := <-f.lost:
		t.Errorf("given up after a single failure: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
}
