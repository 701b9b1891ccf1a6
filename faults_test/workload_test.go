package faults_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goredisson/locks/rlock"
)

// workloadWatchdog is the watchdog timeout the workload's clients must use
// (not shorter: on a loaded machine a renewal round, bounded by a sixth of
// it, could time out and fake a lost lease).
const workloadWatchdog = time.Second

// workload runs every operation of the lock API with two clients (two
// "services"), a and b, created with WithWatchdogTimeout(workloadWatchdog),
// and returns the first failure. It covers: watchdog acquire and renewal,
// re-entry, the queries (HoldCount, IsHeld, IsLocked, RemainTTL, Inspect,
// HoldContext), a waiter in b woken by a's unlock message (a's lease is a
// minute, so only the message can wake it in time), partial and full
// unlock, TryLock without waiting, and ForceUnlock. With renewal, it also
// holds the lock beyond its lease, so that only the watchdog keeps it.
func workload(ctx context.Context, a, b *rlock.Client, name string, renewal bool) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	o1, o2 := rlock.WithOwner(ctx, 1), rlock.WithOwner(ctx, 2)
	la, lb := a.Lock(name), b.Lock(name)
	fail := func(step string, err error) error { return fmt.Errorf("%s: %w", step, err) }

	// Watchdog hold, re-entered, renewed past its lease.
	if err := la.Lock(o1); err != nil {
		return fail("Lock", err)
	}
	if err := la.LockLease(o1, time.Minute); err != nil {
		return fail("LockLease (re-entry)", err)
	}
	hold, err := la.HoldContext(o1)
	if err != nil {
		return fail("HoldContext", err)
	}
	if n, err := la.HoldCount(o1); err != nil || n != 2 {
		return fail("HoldCount", fmt.Errorf("%d, %v (want 2)", n, err))
	}
	if ok, err := la.IsHeld(o1); err != nil || !ok {
		return fail("IsHeld", fmt.Errorf("%v, %v", ok, err))
	}
	if ok, err := lb.IsLocked(ctx); err != nil || !ok {
		return fail("IsLocked", fmt.Errorf("%v, %v", ok, err))
	}
	if ttl, err := lb.RemainTTL(ctx); err != nil || ttl <= 0 {
		return fail("RemainTTL", fmt.Errorf("%v, %v", ttl, err))
	}
	if ok, err := lb.TryLock(o2, 0, 0); err != nil || ok {
		return fail("TryLock without waiting", fmt.Errorf("%v, %v", ok, err))
	}

	// A waiter in b; a releases; the message wakes b.
	got := make(chan error, 1)
	go func() {
		ok, err := lb.TryLock(o2, 10*time.Second, time.Minute)
		if err == nil && !ok {
			err = errors.New("wait ran out")
		}
		got <- err
	}()
	// The waiter is subscribed once Inspect counts one subscriber on the
	// channel (b's Stats count a waiter before the server confirmed it).
	for {
		info, err := la.Inspect(ctx)
		if err != nil || len(info.Holders) != 1 {
			return fail("Inspect", fmt.Errorf("%+v, %v", info, err))
		}
		if info.Subscribers == 1 && b.Stats().Waiters == 1 {
			break
		}
		select {
		case err := <-got:
			return fail("TryLock (waiting)", fmt.Errorf("returned before the unlock: %w", err))
		case <-ctx.Done():
			return fail("TryLock (waiting)", fmt.Errorf("not subscribed: %w", ctx.Err()))
		case <-time.After(5 * time.Millisecond):
		}
	}
	if renewal {
		time.Sleep(workloadWatchdog * 4 / 3) // beyond the lease: only renewal keeps it
		if err := hold.Err(); err != nil {
			return fail("renewal", context.Cause(hold))
		}
	}
	if err := la.Unlock(o1); err != nil {
		return fail("Unlock (partial)", err)
	}
	if err := la.Unlock(o1); err != nil {
		return fail("Unlock", err)
	}
	select {
	case err := <-got:
		if err != nil {
			return fail("TryLock (waiting)", err)
		}
	case <-time.After(5 * time.Second):
		return fail("TryLock (waiting)", errors.New("the unlock did not wake the waiter"))
	}
	if err := lb.Unlock(o2); err != nil {
		return fail("Unlock (waiter)", err)
	}

	// ForceUnlock of a lock held by the other client.
	if err := lb.LockLease(o2, time.Minute); err != nil {
		return fail("LockLease", err)
	}
	if ok, err := la.ForceUnlock(ctx); err != nil || !ok {
		return fail("ForceUnlock", fmt.Errorf("%v, %v", ok, err))
	}
	if ok, err := la.IsLocked(ctx); err != nil || ok {
		return fail("IsLocked after ForceUnlock", fmt.Errorf("%v, %v", ok, err))
	}
	return nil
}
