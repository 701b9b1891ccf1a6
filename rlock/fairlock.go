package rlock

import (
	"strconv"
	"time"

	"github.com/goredisson/locks/internal/engine"
	"github.com/goredisson/locks/scripts"
)

// FairLock is Redisson's fair lock (getFairLock, PROTOCOL.md 4): the RLock's
// hash, plus a wait queue and a sorted set of reservations, so that the
// lock goes to its waiters in the order they started waiting, across
// processes and languages. An unlock wakes only the first waiter in line,
// on its own channel ("redisson_lock__channel:{<name>}:<field>"): no
// thundering herd.
//
// Each waiter reserves its place for a time, its wait: TryLock's wait, or
// for Lock and LockLease the client's fair wait timeout
// (WithFairLockWaitTimeout, default 5 minutes, Redisson's
// fairLockWaitTimeout). A reservation runs from the end of the previous
// waiter's (or of the lock's TTL), and every grant pulls those behind it
// forward by one wait, as in Redisson: while the queue never empties, the
// first waiter's deadline stays about one wait after the queue formed. A
// waiter whose reservation ends while it is first in line (it died, or
// the busy period outlasted the wait) is dropped from the queue by the
// next script that runs, and a live one queues again at the end. So FIFO
// order holds while a busy period lasts less than the wait, and a dead
// waiter stalls the line for at most its reservation. A waiter whose wait
// ends (TryLock's wait, or ctx) leaves the queue before returning.
//
// TryLock with wait <= 0 makes one attempt and never queues (Redisson's
// tryLock()). Unlock of a fair lock nobody holds wakes the first waiter,
// as Redisson's does, and returns ErrNotHeld. ForceUnlock deletes the lock
// and wakes the first waiter; the queue stays.
//
// The plain Lock on the same name shares the hash (an owner holding one
// re-enters with the other), but it ignores the queue: use one kind per
// name.
type FairLock struct{ base }

// NonReentrantFairLock is Redisson 4.4+'s non-reentrant fair lock
// (getNonReentrantFairLock): a FairLock whose holder cannot take it again.
// Lock, LockLease and TryLock by the holder fail with an error wrapping
// ErrAlreadyHeld, and the count stays 1.
type NonReentrantFairLock struct{ base }

// FairLock returns the fair lock called name. It is cheap and does no I/O.
func (c *Client) FairLock(name string) *FairLock {
	return &FairLock{c.fairBase(name, false)}
}

// NonReentrantFairLock returns the non-reentrant fair lock called name. It
// is cheap and does no I/O.
func (c *Client) NonReentrantFairLock(name string) *NonReentrantFairLock {
	return &NonReentrantFairLock{c.fairBase(name, true)}
}

func (c *Client) fairBase(name string, nonReentrant bool) base {
	kind := KindFairLock
	if nonReentrant {
		kind = KindNonReentrantFair
	}
	b := c.newBase(name, kind)
	b.fair = true
	if b.err == nil {
		b.spec = c.fairSpec(name, nonReentrant)
	}
	return b
}

func nowMs() string { return strconv.FormatInt(time.Now().UnixMilli(), 10) }

// fairSpec describes the fair lock's scripts (PROTOCOL.md 4) to the engine.
func (c *Client) fairSpec(name string, nonReentrant bool) *engine.Spec {
	channel := ChannelName(name)
	queue, timeouts := FairQueueName(name), FairTimeoutName(name)
	publish := c.eng.Publish
	flag := ""
	if nonReentrant {
		flag = "n"
	}
	defaultWait := strconv.FormatInt(c.cfg.fairWait.Milliseconds(), 10)
	waitMs := func(wait time.Duration) string {
		// Redisson: the call's wait when positive, else fairLockWaitTimeout.
		if wait > 0 {
			return strconv.FormatInt(max(1, wait.Milliseconds()), 10)
		}
		return defaultWait
	}
	return &engine.Spec{
		Kind:        kindLock, // the same hash field as the plain lock's
		Name:        name,
		Channel:     channel,
		WaitChannel: func(field string) string { return channel + ":" + field },
		Acquire:     scripts.FairAcquire,
		AcquireKeys: func(dst []string, _, fence string) []string {
			return append(dst, name, queue, timeouts, fence)
		},
		AcquireArgs: func(dst []string, a engine.Attempt) []string {
			mode := "q"
			if a.Once {
				mode = ""
			}
			dst = append(dst, a.LeaseMs, a.Field, a.Expected, engine.FenceTTLArg(), waitMs(a.Wait), nowMs(), mode)
			if flag != "" {
				dst = append(dst, flag)
			}
			return dst
		},
		Unlock: scripts.FairUnlock,
		UnlockKeys: func(dst []string, _, fence string) []string {
			return append(dst, name, queue, timeouts, channel, fence)
		},
		UnlockArgs: func(dst []string, field, leaseMs, expected string) []string {
			return append(dst, "0", leaseMs, field, nowMs(), publish, expected, engine.FenceTTLArg())
		},
		Cancel: scripts.FairCancel,
		CancelKeys: func(dst []string, fence string) []string {
			return append(dst, name, queue, timeouts, channel, fence)
		},
		CancelArgs: func(dst []string, field string, wait time.Duration) []string {
			return append(dst, field, waitMs(wait), publish)
		},
	}
}
