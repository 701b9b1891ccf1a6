package hold

import (
	"context"
	"errors"
	"testing"
	"time"
)

func reviewSetup(t *testing.T) (*Table, *Hold, chan error) {
	ends := make(chan error, 4)
	tab := New(time.Hour, func(_ Key, err error) { ends <- err })
	h, err := tab.Use(context.Background(), Key{Kind: KindSetsTTL, Name: "x", Field: "c:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tab.Close)
	return tab, h, ends
}

// A MultiLock member re-entered on a watchdog hold: Expire pexpires the
// hash to 1ms; Leased records that TTL though the watchdog renews the hold
// (it once returned early), so a hold found gone after the 1ms ran out of
// its lease: ErrLeaseExpired.
func TestLeasedOnWatchdogHoldRecordsTheTTL(t *testing.T) {
	tab, h, ends := reviewSetup(t)
	past := time.Now().Add(-time.Second)
	tab.Acquired(h, 1, 0, past, past)              // Lock
	tab.Acquired(h, 2, 10*time.Second, past, past) // member taken with 2*wait
	tab.Leased(h, time.Millisecond, past, past)    // expire.lua: PEXPIRE 1ms
	t.Logf("after Leased: set=%v ago ttl=%v fixed=%v", time.Since(h.set), h.ttl, h.fixed)
	tab.Observe(h, 0)
	tab.Done(h)
	if err := <-ends; !errors.Is(err, ErrLeaseExpired) {
		t.Errorf("end reported as %v, want ErrLeaseExpired (Redis's TTL was 1ms)", err)
	}
}

// A renewal round in flight while a re-entry with a short lease, sent
// after it, may run after it in Redis: Renewed keeps the re-entry's record
// (it once overwrote it with the round's earlier send time and the
// watchdog TTL).
func TestRenewedKeepsALaterReentry(t *testing.T) {
	tab, h, ends := reviewSetup(t)
	t0 := time.Now().Add(-3 * time.Second)
	tab.Acquired(h, 1, 0, t0, t0)
	r, items := tab.StartRound()
	start := t0.Add(time.Second)                                                                     // renewal sent
	tab.Acquired(h, 2, time.Millisecond, start.Add(time.Millisecond), start.Add(2*time.Millisecond)) // re-entry sent later, ran later
	tab.Renewed(r, items[0], start, start.Add(3*time.Millisecond))
	tab.FinishRound(r, items)
	t.Logf("after Renewed: set=%v (re-entry was sent at %v) ttl=%v fixed=%v", h.set.Sub(t0), start.Add(time.Millisecond).Sub(t0), h.ttl, h.fixed)
	tab.Observe(h, 0)
	tab.Done(h)
	if err := <-ends; !errors.Is(err, ErrLeaseExpired) {
		t.Errorf("end reported as %v; the re-entry's 1ms TTL (set after the renewal ran) is forgotten", err)
	}
}

// A watchdog hold re-entered with a fixed lease that ran out, then a
// renewal round that fails (not one that finds it gone): Lost reports
// ErrLeaseExpired, as Gone does.
func TestLostAfterReentryLeaseRanOut(t *testing.T) {
	tab, h, ends := reviewSetup(t)
	past := time.Now().Add(-time.Second)
	tab.Acquired(h, 1, 0, past, past)
	tab.Acquired(h, 2, time.Millisecond, past, past)
	tab.Done(h)
	r, items := tab.StartRound()
	tab.Lost(r, items[0], ErrLockLost) // what the watchdog does: Set+TTL is past
	tab.FinishRound(r, items)
	if err := <-ends; !errors.Is(err, ErrLeaseExpired) {
		t.Errorf("end reported as %v, though the fixed lease ran out a second ago", err)
	}
}
