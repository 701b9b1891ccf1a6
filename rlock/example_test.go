package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/rlock"
)

// The examples need a Redis at 127.0.0.1:6379; they are compiled by go
// test, not run (no Output comments).

func exampleClient() *rlock.Client {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	c, err := rlock.New(rc)
	if err != nil {
		log.Fatal(err)
	}
	return c
}

func Example() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	l := locks.Lock("orders:42") // redisson.getLock("orders:42")
	if err := l.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
	// ... work while holding the lock; a Java service locking
	// "orders:42" with Redisson waits.
}

func ExampleLock_TryLock() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	l := locks.Lock("report:daily")
	// Wait up to 2s; hold for at most 30s (no watchdog).
	ok, err := l.TryLock(ctx, 2*time.Second, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if !ok {
		fmt.Println("someone else is running the report")
		return
	}
	defer l.Unlock(ctx)
}

func ExampleLock_HoldContext() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	l := locks.Lock("ledger")
	if err := l.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
	// Work under hctx stops when the lock stops protecting it.
	hctx, err := l.HoldContext(ctx)
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-hctx.Done():
		if errors.Is(context.Cause(hctx), rlock.ErrLockLost) {
			log.Print("lock lost: stop writing")
		}
	case <-time.After(time.Second): // the work
	}
}

func ExampleWithOwner() {
	locks := exampleClient()
	defer locks.Close()
	// A job locked in one goroutine and unlocked in another names its
	// owner explicitly, like Redisson's lockAsync(threadId).
	job := rlock.WithOwner(context.Background(), 7)
	l := locks.Lock("job:7")
	if err := l.Lock(job); err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := l.Unlock(job); err != nil {
			log.Print(err)
		}
	}()
	<-done
}

func ExampleReadWriteLock() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	rw := locks.ReadWriteLock("config") // redisson.getReadWriteLock("config")
	// Many readers at once, Go or Java.
	if err := rw.ReadLock().Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// ... read ...
	if err := rw.ReadLock().Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// One writer, alone.
	if err := rw.WriteLock().Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer rw.WriteLock().Unlock(ctx)
}

func ExampleFencedLock() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	l := locks.FencedLock("inventory")
	token, err := l.LockAndGetToken(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
	// Send the token with every write; the store refuses a token lower
	// than the highest it has seen, so a holder that paused past its lease
	// cannot overwrite the next holder's work.
	fmt.Printf("UPDATE stock SET n = n - 1 WHERE id = 1 AND fence < %d\n", token)
}

func ExampleSpinLock() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	// No pub/sub: waiters poll with a back-off (here a constant 20ms).
	l := locks.SpinLock("batch", rlock.WithConstantBackOff(20*time.Millisecond))
	if err := l.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
}

func ExampleNonReentrantLock() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	l := locks.NonReentrantLock("once")
	if err := l.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
	if err := l.Lock(ctx); errors.Is(err, rlock.ErrAlreadyHeld) {
		fmt.Println("already held by this owner")
	}
}

func ExampleFairLock() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	// redisson.getFairLock("printer"): waiters, in Go or Java, get it in
	// the order they asked.
	l := locks.FairLock("printer")
	ok, err := l.TryLock(ctx, 10*time.Second, 0) // leaves the queue if the wait ends
	if err != nil {
		log.Fatal(err)
	}
	if ok {
		defer l.Unlock(ctx) // wakes the next in line, only it
	}
}

func ExampleNewMultiLock() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	// Both accounts or neither (new RedissonMultiLock(a, b) in Java).
	both := rlock.NewMultiLock(locks.Lock("account:1"), locks.Lock("account:2"))
	if err := both.LockLease(ctx, 10*time.Second); err != nil {
		log.Fatal(err)
	}
	defer both.Unlock(ctx)
}

func ExampleNewRedLock() {
	ctx := context.Background()
	// One Client per independent master.
	var members []rlock.Locker
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"} {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			log.Fatal(err)
		}
		c, err := rlock.New(rc)
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		members = append(members, c.Lock("job:reindex"))
	}
	rl := rlock.NewRedLock(members...)
	ok, err := rl.TryLock(ctx, time.Second, 30*time.Second) // a majority within 1s
	if err != nil {
		log.Fatal(err)
	}
	if !ok {
		return
	}
	defer rl.Unlock(ctx)
	hold, _ := rl.HoldContext(ctx) // ends when fewer than a majority remain held
	_ = hold
}

func ExampleSemaphore() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	// redisson.getSemaphore("exports"): at most 3 exports at once across
	// every Go and Java service.
	s := locks.Semaphore("exports")
	if _, err := s.TrySetPermits(ctx, 3); err != nil { // only the first call sets it
		log.Fatal(err)
	}
	if err := s.Acquire(ctx, 1); err != nil {
		log.Fatal(err)
	}
	defer s.Release(ctx, 1)
	// ... run one export. A process that dies here does not give its
	// permit back: use a PermitExpirableSemaphore when holders may die.
}

func ExamplePermitExpirableSemaphore() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	// redisson.getPermitExpirableSemaphore("partner-api"): the permit of a
	// holder that dies comes back after its lease.
	s := locks.PermitExpirableSemaphore("partner-api")
	id, ok, err := s.TryAcquire(ctx, 5*time.Second, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	if !ok {
		fmt.Println("the partner API is busy")
		return
	}
	defer s.Release(ctx, id) // any Client or JVM may release the id
	// ... call the partner API; UpdateLeaseTime(ctx, id, d) extends the lease.
}

func ExampleCountDownLatch() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	// redisson.getCountDownLatch("shards-loaded"): start when 4 shards,
	// in Go or Java, have loaded.
	l := locks.CountDownLatch("shards-loaded")
	if _, err := l.TrySetCount(ctx, 4); err != nil {
		log.Fatal(err)
	}
	// Each shard, when loaded: l.CountDown(ctx).
	if err := l.Await(ctx); err != nil {
		log.Fatal(err)
	}
}

func ExampleNonReentrantFairLock() {
	locks := exampleClient()
	defer locks.Close()
	ctx := context.Background()

	// redisson.getNonReentrantFairLock("queue:jobs") (Redisson 4.4+):
	// first come, first served, and a second Lock by the holder fails.
	l := locks.NonReentrantFairLock("queue:jobs")
	if err := l.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
	if err := l.Lock(ctx); errors.Is(err, rlock.ErrAlreadyHeld) {
		fmt.Println("already held by this owner")
	}
}

func ExampleSyncLocker() {
	locks := exampleClient()
	defer locks.Close()

	// For code that takes a sync.Locker: Lock and Unlock panic on an
	// error, as sync.Locker has no way to return one.
	mu := rlock.SyncLocker(context.Background(), locks.Lock("cache:refresh"))
	mu.Lock()
	defer mu.Unlock()
}

func ExampleWithHooks() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	// Count lost holds (rlockotel.New(meterProvider).Hooks() gives
	// OpenTelemetry instruments for every event).
	locks, err := rlock.New(rc, rlock.WithHooks(rlock.Hooks{
		Lost: func(e rlock.LostEvent) {
			log.Printf("lost %s lock %q: %v", e.Kind, e.Name, e.Err)
		},
		Acquire: func(e rlock.AcquireEvent) {
			if e.Outcome == rlock.NotAcquired && e.Wait > time.Second {
				log.Printf("waited %v for %q in vain", e.Wait, e.Name)
			}
		},
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
}
