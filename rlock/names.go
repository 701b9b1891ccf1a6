package rlock

import (
	"fmt"

	"github.com/goredisson/locks/internal/names"
)

// ChannelName returns the pub/sub channel of the RLock called name,
// "redisson_lock__channel:{<name>}" (Redisson's prefixName rule).
func ChannelName(name string) string { return names.LockChannel(name) }

// RWLockChannelName returns the pub/sub channel of the read-write lock
// called name, "redisson_rwlock:{<name>}".
func RWLockChannelName(name string) string { return names.RWLockChannel(name) }

// TokenName returns the key of the fenced lock called name's token counter,
// "redisson_lock_token:{<name>}".
func TokenName(name string) string { return names.Token(name) }

// FairQueueName returns the wait queue of the fair lock called name, a list
// of waiting owner fields in arrival order, "redisson_lock_queue:{<name>}".
func FairQueueName(name string) string { return names.Queue(name) }

// FairTimeoutName returns the sorted set of the fair lock called name's
// waiters, scored by the ms-epoch deadline of each one's reservation,
// "redisson_lock_timeout:{<name>}".
func FairTimeoutName(name string) string { return names.Timeouts(name) }

// checkName reports why name cannot be used as a lock name. In cluster mode
// the lock key, its channel and its fence keys must share one hash slot (the
// scripts touch them together, and rueidis panics on a cross-slot command).
// That fails only for a name with a "{" but no usable hash tag, such as
// "a{b" or "{}x": Redisson adds no braces to such names.
func checkName(name string, cluster bool) error {
	if name == "" {
		return fmt.Errorf("%w: the name is empty", ErrInvalidName)
	}
	if cluster {
		ks, cs := names.Slot(name), names.Slot(ChannelName(name))
		fs := names.Slot(names.Prefix(names.FencePrefix, name) + ":0")
		if ks != cs || ks != fs {
			return fmt.Errorf("%w: %q: the lock key (slot %d) and its channel %q (slot %d) would fall in different cluster slots; "+
				"a name containing '{' must carry a complete, non-empty hash tag such as \"{user42}:cart\"",
				ErrInvalidName, name, ks, ChannelName(name), cs)
		}
	}
	return nil
}

// SemaphoreChannelName returns the channel of the Semaphore or
// PermitExpirableSemaphore called name, "redisson_sc:{<name>}".
func SemaphoreChannelName(name string) string { return names.SemaphoreChannel(name) }

// PermitTimeoutName returns the sorted set of the PermitExpirableSemaphore
// called name's held permits, "{<name>}:timeout".
func PermitTimeoutName(name string) string { return names.PermitTimeouts(name) }

// LatchChannelName returns the channel of the CountDownLatch called name,
// "redisson_countdownlatch__channel__{<name>}".
func LatchChannelName(name string) string { return names.LatchChannel(name) }
