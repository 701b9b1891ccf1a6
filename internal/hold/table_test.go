package hold

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestObserveGoneAfterLeaseEnd: an unlock that finds a fixed-lease hold
// gone after its lease's end reports the lease's expiry, not a lost lock,
// whether or not the lease timer has run yet (on a busy machine it runs
// late: the fuzzer's CI failure "HoldContext ended with rlock: lock lost"
// for a 20ms lease); and the end is reported once.
func TestObserveGoneAfterLeaseEnd(t *testing.T) {
	for _, timerRan := range []bool{false, true} {
		ends := make(chan error, 4)
		tab := New(time.Second, func(_ Key, err error) { ends <- err })
		k := Key{Kind: KindSetsTTL, Name: "x", Field: "c:1"}
		h, err := tab.Use(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		lease := time.Hour
		if timerRan {
			lease = time.Millisecond
			now = now.Add(-time.Second)
		}
		tab.Acquired(h, 1, lease, now, now)
		ctx, cancel := context.WithCancelCause(context.Background())
		if _, ok, err := tab.Watch(k, cancel); err != nil || (!ok && !timerRan) {
			t.Fatalf("Watch: %v %v", ok, err)
		}
		if timerRan {
			if err := <-ends; !errors.Is(err, ErrLeaseExpired) {
				t.Fatalf("the lease timer reported %v", err)
			}
		} else {
			// The lease ended an hour ago; its timer is late.
			tab.mu.Lock()
			h.set = now.Add(-2 * time.Hour)
			tab.mu.Unlock()
		}
		tab.Observe(h, 0)
		tab.Done(h)
		if !timerRan {
			<-ctx.Done()
			if cause := context.Cause(ctx); !errors.Is(cause, ErrLeaseExpired) {
				t.Fatalf("HoldContext ended with %v", cause)
			}
			if err := <-ends; !errors.Is(err, ErrLeaseExpired) {
				t.Fatalf("end reported as %v", err)
			}
		}
		tab.Close()
		select {
		case err := <-ends:
			t.Fatalf("timer ran %v: a second end reported: %v", timerRan, err)
		default:
		}
		cancel(nil)
	}
}

// TestObserveGoneWithinLease: a hold found gone while its lease still runs
// (or one the watchdog renews) was taken away: ErrLockLost.
func TestObserveGoneWithinLease(t *testing.T) {
	for _, lease := range []time.Duration{time.Hour, 0} {
		ends := make(chan error, 4)
		tab := New(time.Second, func(_ Key, err error) { ends <- err })
		k := Key{Kind: KindSetsTTL, Name: "x", Field: "c:1"}
		h, err := tab.Use(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		tab.Acquired(h, 1, lease, time.Now(), time.Now())
		tab.Observe(h, 0)
		tab.Done(h)
		if err := <-ends; !errors.Is(err, ErrLockLost) {
			t.Fatalf("lease %v: end reported as %v", lease, err)
		}
		tab.Close()
	}
}

// TestObserveGoneAfterReentryLease: a watchdog hold re-entered with a short
// fixed lease (Redis sets the hash's TTL to it, as Redisson does) and found
// gone after that lease's end, before the watchdog renewed it, ran out of
// that lease: ErrLeaseExpired (the fuzzer's CI failure "HoldContext ended
// with rlock: lock lost" for TryLock then LockLease(1ms)). Once a renewal
// has set the watchdog's TTL again, a hold found gone within it is lost.
func TestObserveGoneAfterReentryLease(t *testing.T) {
	for _, renewed := range []bool{false, true} {
		ends := make(chan error, 4)
		tab := New(time.Hour, func(_ Key, err error) { ends <- err })
		k := Key{Kind: KindSetsTTL, Name: "x", Field: "c:1"}
		h, err := tab.Use(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-time.Second)
		tab.Acquired(h, 1, 0, past, past)                // Lock: the watchdog renews it
		tab.Acquired(h, 2, time.Millisecond, past, past) // re-entry with a 1ms lease, a second ago
		if renewed {
			r, items := tab.StartRound()
			if len(items) != 1 {
				t.Fatalf("round of %d holds, want 1", len(items))
			}
			tab.Renewed(r, items[0], time.Now(), time.Now())
			tab.FinishRound(r, items)
		}
		tab.Observe(h, 0)
		tab.Done(h)
		want := ErrLeaseExpired
		if renewed {
			want = ErrLockLost
		}
		if err := <-ends; !errors.Is(err, want) {
			t.Fatalf("renewed %v: end reported as %v, want %v", renewed, err, want)
		}
		tab.Close()
	}
}

// TestReleasedEndsHoldContextsAtOnce: the owner's last unlock ends the
// HoldContexts before Released returns (a caller may test ctx.Err() right
// after Unlock), and reports no end.
func TestReleasedEndsHoldContextsAtOnce(t *testing.T) {
	for range 100 {
		ends := make(chan error, 1)
		tab := New(time.Second, func(_ Key, err error) { ends <- err })
		k := Key{Kind: KindSetsTTL, Name: "x", Field: "c:1"}
		h, err := tab.Use(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		tab.Acquired(h, 1, time.Hour, time.Now(), time.Now())
		ctx, cancel := context.WithCancelCause(context.Background())
		if _, ok, err := tab.Watch(k, cancel); !ok || err != nil {
			t.Fatalf("Watch: %v %v", ok, err)
		}
		tab.Released(h, 0, time.Now(), time.Now())
		if cause := context.Cause(ctx); !errors.Is(cause, ErrUnlocked) {
			t.Fatalf("right after the last unlock the HoldContext's cause is %v", cause)
		}
		tab.Done(h)
		tab.Close()
		select {
		case err := <-ends:
			t.Fatalf("an owner's unlock reported an end: %v", err)
		default:
		}
	}
}

// TestOneEndReportPerHold: a hold abandoned (renewals failed, or an unlock
// failed) and whose lease then runs out ended once: the end handler hears
// of it once (it heard twice, which counted one lost lock as two).
func TestOneEndReportPerHold(t *testing.T) {
	ends := make(chan error, 4)
	tab := New(time.Second, func(_ Key, err error) { ends <- err })
	defer tab.Close()
	k := Key{Kind: KindSetsTTL, Name: "x", Field: "c:1"}
	h, err := tab.Use(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	tab.Acquired(h, 1, 20*time.Millisecond, time.Now(), time.Now())
	tab.Abandon(h, ErrLockLost)
	tab.Done(h)
	if err := <-ends; !errors.Is(err, ErrLockLost) {
		t.Fatalf("first report: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for tab.Held(k) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned hold's record never ended")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-ends:
		t.Fatalf("a second report for one hold: %v", err)
	default:
	}
	// The next hold of the same record is reported again.
	h, err = tab.Use(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	tab.Acquired(h, 1, time.Hour, time.Now(), time.Now())
	tab.Observe(h, 0)
	tab.Done(h)
	if err := <-ends; !errors.Is(err, ErrLockLost) {
		t.Fatalf("the next hold's end: %v", err)
	}
}

// A HoldContext's cancellation that closes the table (a parent context
// whose AfterFunc runs user code calling Client.Close, say) must not
// deadlock: the end handler of the same hold waits for that cancellation.
func TestCloseFromACancellation(t *testing.T) {
	reported := make(chan struct{}, 1)
	tab := New(time.Second, func(Key, error) { reported <- struct{}{} })
	k := Key{Name: "k", Field: "c:1"}
	h, err := tab.Use(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if !tab.Acquired(h, 1, 0, now, now) {
		t.Fatal("not acquired")
	}
	tab.Done(h)
	closed := make(chan struct{})
	if _, ok, err := tab.Watch(k, func(error) { tab.Close(); close(closed) }); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if h, err = tab.Use(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	tab.Observe(h, 0) // Redis no longer has it: ended, reported
	tab.Done(h)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close from a HoldContext's cancellation did not return")
	}
	select {
	case <-reported:
	case <-time.After(5 * time.Second):
		t.Fatal("the end handler did not run after the cancellation closed the table")
	}
	tab.Close() // from outside: waits for both notifiers
}
