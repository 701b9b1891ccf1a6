package faults_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/goredisson/locks/rlock"
)

// familyWorkload runs the basic scenario of every kind of the lock family
// between two clients: the plain lock's workload (renewal included), then
// for each other kind a hold in a, a waiter in b parked on its channel, the
// release that wakes it, and the waiter's release. Names are under prefix
// (a hash tag keeps them on one cluster slot, so a slot move covers them).
// With renewal, the plain lock is held past its lease (1.3 s more).
func familyWorkload(ctx context.Context, a, b *rlock.Client, prefix string, renewal bool) error {
	if err := workload(ctx, a, b, prefix+"lock", renewal); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	o1, o2 := rlock.WithOwner(ctx, 1), rlock.WithOwner(ctx, 2)
	locker := func(kind string, la, lb rlock.Locker) error {
		return handOver(ctx, b, kind, kind != "spin lock",
			func() error { return la.Lock(o1) },
			func() (bool, error) { return lb.TryLock(o2, 10*time.Second, time.Minute) },
			func() error { return la.Unlock(o1) },
			func() error { return lb.Unlock(o2) })
	}
	rwa, rwb := a.ReadWriteLock(prefix+"rw"), b.ReadWriteLock(prefix+"rw")
	if err := locker("read-write (read, then write)", rwa.ReadLock(), rwb.WriteLock()); err != nil {
		return err
	}
	if err := locker("read-write (write, then read)", rwa.WriteLock(), rwb.ReadLock()); err != nil {
		return err
	}
	// Two readers; the first leaves while the other still reads.
	o3 := rlock.WithOwner(ctx, 3)
	for _, step := range []func() error{
		func() error { return rwa.ReadLock().Lock(o1) }, func() error { return rwa.ReadLock().Lock(o3) },
		func() error { return rwa.ReadLock().Unlock(o1) }, func() error { return rwa.ReadLock().Unlock(o3) },
	} {
		if err := step(); err != nil {
			return fmt.Errorf("read-write (two readers): %w", err)
		}
	}
	if err := locker("fair lock", a.FairLock(prefix+"fair"), b.FairLock(prefix+"fair")); err != nil {
		return err
	}
	// A fair waiter whose wait runs out leaves the queue, moving the
	// reservation of the one queued behind it forward; that one gets in.
	if err := a.FairLock(prefix + "fair").Lock(o1); err != nil {
		return fmt.Errorf("fair lock: %w", err)
	}
	short := make(chan error, 1)
	go func() {
		ok, err := b.FairLock(prefix+"fair").TryLock(o2, 300*time.Millisecond, 0)
		if err == nil && ok {
			err = errors.New("got the lock")
		}
		short <- err
	}()
	for b.Stats().Parked < 1 && ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
	}
	o4 := rlock.WithOwner(ctx, 4)
	err := handOver(ctx, b, "fair lock (behind a waiter that leaves)", true,
		func() error { return nil },
		func() (bool, error) { return b.FairLock(prefix+"fair").TryLock(o4, 10*time.Second, time.Minute) },
		func() error {
			if err := <-short; err != nil {
				return fmt.Errorf("the wait that runs out: %w", err)
			}
			return a.FairLock(prefix + "fair").Unlock(o1)
		},
		func() error { return b.FairLock(prefix + "fair").Unlock(o4) })
	if err != nil {
		return err
	}
	if err := locker("spin lock", a.SpinLock(prefix+"spin"), b.SpinLock(prefix+"spin")); err != nil {
		return err
	}
	if err := locker("non-reentrant lock", a.NonReentrantLock(prefix+"nr"), b.NonReentrantLock(prefix+"nr")); err != nil {
		return err
	}
	if err := a.NonReentrantLock(prefix + "nr").Lock(o1); err != nil {
		return fmt.Errorf("non-reentrant lock: %w", err)
	}
	if err := a.NonReentrantLock(prefix + "nr").Lock(o1); !errors.Is(err, rlock.ErrAlreadyHeld) {
		return fmt.Errorf("non-reentrant lock: a re-acquire: %v, want ErrAlreadyHeld", err)
	}
	if err := a.NonReentrantLock(prefix + "nr").Unlock(o1); err != nil {
		return fmt.Errorf("non-reentrant lock: %w", err)
	}
	multi := func(c *rlock.Client) *rlock.MultiLock {
		return rlock.NewMultiLock(c.Lock(prefix+"m1"), c.Lock(prefix+"m2"))
	}
	if err := locker("multilock", multi(a), multi(b)); err != nil {
		return err
	}

	fa, fb := a.FencedLock(prefix+"fenced"), b.FencedLock(prefix+"fenced")
	var t1, t2 int64
	err = handOver(ctx, b, "fenced lock", true,
		func() (err error) { t1, err = fa.LockAndGetToken(o1); return err },
		func() (bool, error) {
			var ok bool
			var err error
			t2, ok, err = fb.TryLockAndGetToken(o2, 10*time.Second, time.Minute)
			return ok, err
		},
		func() error { return fa.Unlock(o1) },
		func() error { return fb.Unlock(o2) })
	if err != nil {
		return err
	}
	if last, err := fa.Token(ctx); err != nil || t1 <= 0 || t2 <= t1 || last != t2 {
		return fmt.Errorf("fenced lock: tokens %d then %d, last %d (%v)", t1, t2, last, err)
	}

	sa, sb := a.Semaphore(prefix+"sem"), b.Semaphore(prefix+"sem")
	if _, err := sa.TrySetPermits(ctx, 1); err != nil {
		return fmt.Errorf("semaphore: TrySetPermits: %w", err)
	}
	err = handOver(ctx, b, "semaphore", true,
		func() error { return sa.Acquire(ctx, 1) },
		func() (bool, error) { return sb.TryAcquire(ctx, 1, 10*time.Second) },
		func() error { return sa.Release(ctx, 1) },
		func() error { return sb.Release(ctx, 1) })
	if err != nil {
		return err
	}

	pa, pb := a.PermitExpirableSemaphore(prefix+"psem"), b.PermitExpirableSemaphore(prefix+"psem")
	if _, err := pa.TrySetPermits(ctx, 1); err != nil {
		return fmt.Errorf("permit-expirable semaphore: TrySetPermits: %w", err)
	}
	if n, err := pa.Permits(ctx); err != nil || n != 1 {
		return fmt.Errorf("permit-expirable semaphore: Permits: %d, %v", n, err)
	}
	var ida, idb string
	err = handOver(ctx, b, "permit-expirable semaphore", true,
		func() (err error) { ida, err = pa.Acquire(ctx, time.Minute); return err },
		func() (bool, error) {
			var ok bool
			var err error
			idb, ok, err = pb.TryAcquire(ctx, 10*time.Second, time.Minute)
			return ok, err
		},
		func() error { return pa.Release(ctx, ida) },
		func() error { return pb.Release(ctx, idb) })
	if err != nil {
		return err
	}
	// A permit whose lease ended comes back with the next call
	// (psem_prelude.lua's ZREMRANGEBYSCORE).
	if _, err := pa.Acquire(ctx, 20*time.Millisecond); err != nil {
		return fmt.Errorf("permit-expirable semaphore: Acquire with a lease: %w", err)
	}
	for {
		n, err := pb.AvailablePermits(ctx)
		if err != nil {
			return fmt.Errorf("permit-expirable semaphore: AvailablePermits after a lease: %w", err)
		}
		if n == 1 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("permit-expirable semaphore: the permit never came back: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}

	// A latch's channel wraps its name in braces: a name with a hash tag
	// cannot be a latch on a cluster.
	latch := strings.NewReplacer("{", "", "}", "").Replace(prefix) + "latch"
	la, lb := a.CountDownLatch(latch), b.CountDownLatch(latch)
	if _, err := la.TrySetCount(ctx, 1); err != nil {
		return fmt.Errorf("count-down latch: TrySetCount: %w", err)
	}
	return handOver(ctx, b, "count-down latch", true,
		func() error { return nil },
		func() (bool, error) { return lb.AwaitTimeout(ctx, 10*time.Second) },
		func() error { return la.CountDown(ctx) },
		func() error { return nil })
}

// handOver runs take in a, then wait in a goroutine of b until b has it
// parked on its channel (unless the kind never parks: a spin lock), then
// release, and expects wait to succeed; then done.
func handOver(ctx context.Context, b *rlock.Client, kind string, parks bool, take func() error, wait func() (bool, error), release, done func() error) error {
	fail := func(step string, err error) error { return fmt.Errorf("%s: %s: %w", kind, step, err) }
	if err := take(); err != nil {
		return fail("take", err)
	}
	parked := b.Stats().Parked // waiters of b already parked
	got := make(chan error, 1)
	go func() {
		ok, err := wait()
		if err == nil && !ok {
			err = errors.New("wait ran out")
		}
		got <- err
	}()
	for parks && b.Stats().Parked <= parked {
		select {
		case err := <-got:
			return fail("wait", fmt.Errorf("returned before the release: %v", err))
		case <-ctx.Done():
			return fail("wait", fmt.Errorf("never waited: %w", ctx.Err()))
		case <-time.After(2 * time.Millisecond):
		}
	}
	if err := release(); err != nil {
		return fail("release", err)
	}
	select {
	case err := <-got:
		if err != nil {
			return fail("wait", err)
		}
	case <-time.After(12 * time.Second):
		return fail("wait", errors.New("the release did not let the waiter in"))
	}
	if err := done(); err != nil {
		return fail("release by the waiter", err)
	}
	return nil
}
