package rlock

import (
	"errors"

	"github.com/goredisson/locks/internal/engine"
	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/watchdog"
)

// Errors returned by this package. Test for them with errors.Is: the
// returned errors wrap these with the lock name and the details.
var (
	// ErrNotHeld: the calling owner does not hold the lock (Unlock by a
	// non-owner, or after the lease ran out). Redisson throws
	// IllegalMonitorStateException in the same situations.
	ErrNotHeld = engine.ErrNotHeld

	// ErrAlreadyHeld: the owner of a non-reentrant lock tried to take it
	// again. Redisson throws IllegalMonitorStateException (its script's
	// NON_REENTRANT_REACQUIRE error) in the same situation.
	ErrAlreadyHeld = engine.ErrAlreadyHeld

	// ErrLockLost: a hold ended without the owner's Unlock: the watchdog
	// found it gone (expired, force-unlocked, Redis restarted), could not
	// renew it in time, an Unlock found it gone, or an Unlock's outcome
	// stayed unknown (renewal then stops). It is the cause of a
	// HoldContext's cancellation.
	ErrLockLost = hold.ErrLockLost

	// ErrLeaseExpired: a hold taken with a fixed lease reached the end of
	// the lease. It is the cause of a HoldContext's cancellation.
	ErrLeaseExpired = hold.ErrLeaseExpired

	// ErrUnlocked: the owner released the hold completely. It is the cause
	// of a HoldContext's cancellation after the last Unlock.
	ErrUnlocked = hold.ErrUnlocked

	// ErrClosed: the Client was closed.
	ErrClosed = hold.ErrClosed

	// ErrInvalidName: the lock name cannot be used (empty, or its derived
	// keys would fall in different cluster slots).
	ErrInvalidName = errors.New("rlock: invalid lock name")

	// ErrMaxHold: the watchdog stopped renewing a hold that reached the
	// WithWatchdogMaxHold bound. A HoldContext's cause wraps it along with
	// ErrLockLost.
	ErrMaxHold = watchdog.ErrMaxHold

	// ErrHoldGone: a watchdog renewal found the hold gone from Redis (it
	// expired, or was deleted or force-unlocked elsewhere). A HoldContext's
	// cause and a LostEvent's Err wrap it along with ErrLockLost.
	ErrHoldGone = watchdog.ErrNotHeld

	// ErrRenewFailed: renewals of a hold failed (Redis unreachable or
	// refusing) until its lease could have run out. A HoldContext's cause
	// and a LostEvent's Err wrap it along with ErrLockLost.
	ErrRenewFailed = watchdog.ErrRenewFailed

	// ErrInvalidArgument: a duration or option has a value with no meaning.
	ErrInvalidArgument = errors.New("rlock: invalid argument")

	// ErrTimeout: a command took longer than the command timeout, or a
	// subscription longer than the subscription timeout, while the
	// caller's context was still alive. A context's own end is reported
	// as the context's error instead.
	ErrTimeout = engine.ErrTimeout

	// ErrUnresolved: Redis did not answer within the call's retry budget
	// and the outcome of a script call is not known yet. The Client keeps
	// settling it in the background: an acquisition found to have run is
	// released, an unlock's renewal has stopped. The hold's count stays
	// exact either way. For the semaphores and the latch: permits an
	// acquisition took are given back; a Release or CountDown found not to
	// have run is sent again. Do not send such a call again yourself.
	ErrUnresolved = engine.ErrUnresolved

	// ErrUnexpectedReply: a script call was answered with a reply the
	// script never gives (something other than Redis answered, or
	// something between them changed the reply). The Client settles such
	// a call as a lost one, from Redis: one found to have run returns its
	// real outcome; one found not to have run fails with this error
	// (nothing changed) rather than be sent again, except the idempotent
	// ones and the semaphores' and latch's, which are sent again after a
	// back-off within the retry budget. Never a panic.
	ErrUnexpectedReply = engine.ErrUnexpectedReply

	// ErrNoPermit: a permit-expirable semaphore's permit id is not held
	// (unknown, released already, or expired). Redisson throws a
	// RedisException caused by IllegalArgumentException ("Permit with id
	// ... has already been released or doesn't exist") in the same
	// situations.
	ErrNoPermit = errors.New("rlock: no such permit")

	// ErrNoSyncedReplicas: with replica sync on, no replica acknowledged a
	// lock write within the timeout, every attempt. Redisson throws
	// NoSyncedSlavesException ("None of slaves were synced") in this case.
	ErrNoSyncedReplicas = engine.ErrNoSyncedReplicas
)
