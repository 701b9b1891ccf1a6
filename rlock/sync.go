package rlock

import (
	"fmt"
	"time"

	"github.com/goredisson/locks/internal/engine"
)

// Defaults of replica sync, as Redisson 4.x's slavesSyncTimeout and
// retryAttempts.
const (
	DefaultReplicaSyncTimeout  = time.Second
	DefaultReplicaSyncAttempts = 4
	DefaultReplicaSyncDelay    = time.Second
)

// WithReplicaSync makes every lock write (acquire, unlock, force unlock)
// wait, on the same connection, until the master's replicas acknowledge it
// (WAIT <connected replicas> <timeout>), like Redisson's
// checkLockSyncedSlaves and syncedEval; renewals are pipelined without
// WAIT and followed by one WAIT per slot, whose outcome is only logged (a
// renewal is idempotent and sent again next period). When none acknowledges, an
// acquisition is released again and retried up to attempts times, spaced
// by a random delay in [delay, 2*delay]; then it fails with
// ErrNoSyncedReplicas (at once, without retries, when the ACL denies WAIT).
// An unlock or force unlock is never run again: the
// client waits again for the replicas (a harmless write in the lock's slot
// followed by WAIT, which covers every earlier write), and reports
// ErrNoSyncedReplicas, with the unlock done on the master, if none ever
// acknowledges. This narrows the window in which a failover to a replica
// loses a fresh lock.
//
// Replica sync is on by default for cluster and sentinel clients (timeout
// 1s, 4 attempts, delay 1s, as Redisson); this option also turns it on for a
// standalone client talking to a master with replicas.
func WithReplicaSync(timeout time.Duration, attempts int, delay time.Duration) Option {
	return func(c *config) error {
		if timeout <= 0 || attempts <= 0 || delay < 0 {
			return fmt.Errorf("%w: replica sync timeout %v, attempts %d, delay %v", ErrInvalidArgument, timeout, attempts, delay)
		}
		c.sync = &engine.ReplicaSync{Enabled: true, Timeout: timeout, Attempts: attempts, Delay: delay}
		return nil
	}
}

// WithoutReplicaSync turns replica sync off (Redisson's
// checkLockSyncedSlaves=false).
func WithoutReplicaSync() Option {
	return func(c *config) error {
		c.sync = &engine.ReplicaSync{Attempts: 1}
		return nil
	}
}

func defaultReplicaSync(enabled bool) *engine.ReplicaSync {
	return &engine.ReplicaSync{Enabled: enabled, Timeout: DefaultReplicaSyncTimeout,
		Attempts: DefaultReplicaSyncAttempts, Delay: DefaultReplicaSyncDelay}
}
