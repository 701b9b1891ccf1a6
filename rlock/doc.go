// Package rlock gives Go services Redisson's locks (RLock, and its read-write,
// fenced, spin and non-reentrant relatives) in their exact Redis wire
// format, so that a Go service and a Java service using
// Redisson can lock the same resource in the same Redis and each sees and
// respects the other's holds, reentrancy counts, leases and wake-ups.
//
//	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	locks, _ := rlock.New(rc)
//	defer locks.Close()
//
//	l := locks.Lock("orders:42")         // redisson.getLock("orders:42")
//	if err := l.Lock(ctx); err != nil {  // waits; watchdog lease
//		return err
//	}
//	defer l.Unlock(ctx)
//
// # The family
//
// [Client.Lock] is Redisson's getLock; [Client.ReadWriteLock] its
// getReadWriteLock (many readers or one writer; a writer may also read);
// [Client.FencedLock] its getFencedLock (every grant gets a larger token,
// for resources that check it); [Client.SpinLock] its getSpinLock (no
// pub/sub: waiters poll with a back-off); [Client.NonReentrantLock] its
// getNonReentrantLock (a re-acquire fails with [ErrAlreadyHeld]);
// [Client.FairLock] and [Client.NonReentrantFairLock] its getFairLock and
// getNonReentrantFairLock (first come, first served, with per-waiter
// wake-ups). All of them implement [Locker] and run on one engine: the same
// exact outcomes, hold table, watchdog and pub/sub hub. [NewMultiLock] and
// [NewRedLock] combine Lockers of any kind and Client (RedLock: the Redlock
// algorithm over independent masters, with its caveats; prefer a Lock with
// replica sync, or a FencedLock).
//
// Beside the locks, [Client.Semaphore], [Client.PermitExpirableSemaphore]
// and [Client.CountDownLatch] are Redisson's getSemaphore,
// getPermitExpirableSemaphore and getCountDownLatch on the same keys. A
// plain semaphore's permits are anonymous: a holder that dies keeps them
// until someone releases them; a permit-expirable semaphore's permits come
// back after their lease. Their writes are exact under faults like the
// locks': a call whose reply was lost is settled from a record its script
// kept, never sent twice.
//
// No lock here is fair except [FairLock]: a waiter that came later may get
// the lock first (a stream of readers can keep a writer waiting). A waiter
// is woken by the unlock message and, if that is lost, by the holder's TTL.
//
// # Wire format
//
// The lock is a Redis hash named after the lock, with one field
// "<clientId>:<ownerId>" counting the owner's nested acquisitions, and a TTL
// (the lease). Unlocks publish "0" on "redisson_lock__channel:{<name>}"
// (PUBLISH, or SPUBLISH on a Redis 7 cluster, as Redisson chooses). Every
// script call has an exact outcome: a call Redis refused is retried, and a
// lost reply is settled with a Go-only fence key instead of being resent,
// so one Lock is one level and one Unlock one release, whatever the
// network does. Waiters share one
// subscription per lock name per Client, and every wait is bounded by the
// holder's TTL, so a lost message costs latency, never a deadlock.
//
// # Owners
//
// By default the owner of an operation is the calling goroutine: nested
// Lock calls in one goroutine re-enter the lock, and another goroutine is
// another owner that waits, exactly like Java threads with Redisson. Go
// does not expose goroutine ids, on purpose: the library reads the runtime's
// id of the goroutine from its g struct (a few nanoseconds, no allocation;
// the field's offset is measured at start-up against the id runtime.Stack
// prints, and if it cannot be found the library parses runtime.Stack
// instead, about 3µs). The trade-off: a goroutine-owned lock must be
// unlocked by the goroutine that locked it (goroutine ids are never
// reused within a process). Code that locks in one goroutine and unlocks in another, or
// hands work to helper goroutines, names the owner explicitly with
// WithOwner(ctx, id): any int64, like the threadId of Redisson's async
// methods. Owners are scoped by Client: two Clients never share an owner.
//
// A goroutine that returns while it holds a lock leaves the lock held, as a
// Java thread that ends without unlock does: no other goroutine is its owner,
// so only [Lock.ForceUnlock] (or rlock unlock --force) frees it early. A
// watchdog lease is renewed as long as the Client lives (bound it with
// [WithWatchdogMaxHold]); a fixed lease runs out; after [Client.Close] or the
// process's death, the lock expires one lease later. Unlock in a defer.
//
// # Leases and the watchdog
//
// Lock, and TryLock with lease <= 0, take a watchdog lease: the key expires
// after the watchdog timeout (30s by default, Redisson's
// lockWatchdogTimeout) unless the Client renews it, which one scheduler per
// Client does every timeout/3 for all held locks in batched script calls,
// until the owner's last Unlock. LockLease and TryLock with lease > 0 take a
// fixed lease and are never renewed. A partial Unlock (one level of a
// nested hold) resets the TTL to the holder's lease, as Redisson does.
//
// A holder learns that its hold ended without its Unlock through
// HoldContext, a context cancelled with ErrLockLost (or ErrLeaseExpired)
// as its cause, and through WithLostHandler.
//
// # Guarantees and limits
//
// Mutual exclusion holds while the holder's lease is alive on the Redis
// master: a Redis that loses data (restart without persistence, failover to
// a replica that missed the write) can let two owners in. The lock is then
// reported lost to the old holder by the watchdog. An acquisition abandoned
// because its context ended never leaves a hold or a renewal behind: a reply
// that arrives after the context ended is undone before the call returns.
package rlock
