package rlock

import (
	"errors"

	"github.com/goredisson/locks/watchdog"
)

// Errors returned by this package. Test for them with errors.Is: the
// returned errors wrap these with the lock name and the details.
var (
	// ErrNotHeld: the calling owner does not hold the lock (Unlock by a
	// non-owner, or after the lease ran out). Redisson throws
	// IllegalMonitorStateException in the same situations.
	ErrNotHeld = errors.New("rlock: lock not held by the calling owner")

	// ErrLockLost: a hold ended without the owner's Unlock: the watchdog
	// found it gone (expired, force-unlocked, Redis restarted) or could not
	// renew it in time. It is the cause of a HoldContext's cancellation.
	ErrLockLost = errors.New("rlock: lock lost")

	// ErrLeaseExpired: a hold taken with a fixed lease reached the end of
	// the lease. It is the cause of a HoldContext's cancellation.
	ErrLeaseExpired = errors.New("rlock: lease expired")

	// ErrUnlocked: the owner released the hold completely. It is the cause
	// of a HoldContext's cancellation after the last Unlock.
	ErrUnlocked = errors.New("rlock: lock released by its owner")

	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("rlock: client closed")

	// ErrInvalidName: the lock name cannot be used (empty, or its derived
	// keys would fall in different cluster slots).
	ErrInvalidName = errors.New("rlock: invalid lock name")

	// ErrMaxHold: the watchdog stopped renewing a hold that reached the
	// WithWatchdogMaxHold bound. A HoldContext's cause wraps it along with
	// ErrLockLost.
	ErrMaxHold = watchdog.ErrMaxHold

	// ErrInvalidArgument: a duration or option has a value with no meaning.
	ErrInvalidArgument = errors.New("rlock: invalid argument")
)
