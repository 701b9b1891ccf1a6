package rlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/scripts"
)

// ErrNoSyncedReplicas: with replica sync on, no replica acknowledged a lock
// write within the timeout, every attempt. Redisson throws
// NoSyncedSlavesException ("None of slaves were synced") in this case.
var ErrNoSyncedReplicas = errors.New("rlock: none of the replicas acknowledged the lock write")

// Defaults of replica sync, as Redisson 4.x's slavesSyncTimeout and
// retryAttempts.
const (
	DefaultReplicaSyncTimeout  = time.Second
	DefaultReplicaSyncAttempts = 4
	DefaultReplicaSyncDelay    = time.Second
)

// replicaSync is Redisson's checkLockSyncedSlaves (contract 6.1): after a
// lock write, WAIT for the master's replicas on the same connection; when
// none acknowledged, an acquisition is undone and retried.
type replicaSync struct {
	enabled  bool
	timeout  time.Duration
	attempts int
	delay    time.Duration // attempts are spaced by a random delay in [delay, 2*delay]

	// replicas caches each slot's replica count (index 0 outside a
	// cluster), as connected_slaves + 1; 0 means unknown.
	replicas [16384]atomic.Int32
}

// WithReplicaSync makes every acquire and unlock wait, on the same
// connection, until the master's replicas acknowledge the write (WAIT
// <connected replicas> <timeout>), like Redisson's checkLockSyncedSlaves. When
// none acknowledges, an acquisition is released again and retried up to
// attempts times, spaced by a random delay in [delay, 2*delay]; then it
// fails with ErrNoSyncedReplicas. An unlock is retried with the same
// request id. This narrows the window in which a failover to a replica
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
		c.sync = &replicaSync{enabled: true, timeout: timeout, attempts: attempts, delay: delay}
		return nil
	}
}

// WithoutReplicaSync turns replica sync off (Redisson's
// checkLockSyncedSlaves=false).
func WithoutReplicaSync() Option {
	return func(c *config) error {
		c.sync = &replicaSync{}
		return nil
	}
}

func defaultReplicaSync(enabled bool) *replicaSync {
	return &replicaSync{enabled: enabled, timeout: DefaultReplicaSyncTimeout,
		attempts: DefaultReplicaSyncAttempts, delay: DefaultReplicaSyncDelay}
}

// sleep waits the retry delay or until ctx ends.
func (s *replicaSync) sleep(ctx context.Context) error {
	d := s.delay
	if d > 0 {
		d += rand.N(d + 1)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// syncedResult is a script's reply and, with replica sync, how many
// replicas acknowledged it of how many there were.
type syncedResult struct {
	res      rueidis.RedisResult
	acked    int64
	replicas int64
}

// unsynced reports whether the write reached none of the replicas.
func (r syncedResult) unsynced() bool { return r.replicas > 0 && r.acked == 0 }

// exec runs a lock-writing script on the master of keys[0]; with replica
// sync on, it pipelines WAIT after it on the same connection.
func (c *Client) exec(ctx context.Context, s *scripts.Script, keys, args []string) syncedResult {
	rs := c.cfg.sync
	if !rs.enabled {
		return syncedResult{res: s.Exec(ctx, c.rc, keys, args)}
	}
	replicas, err := c.replicaCount(ctx, keys[0])
	if err != nil {
		return syncedResult{res: rueidis.NewErrorResult(err)}
	}
	if replicas == 0 {
		return syncedResult{res: s.Exec(ctx, c.rc, keys, args)}
	}
	wait := func() rueidis.Completed {
		return c.rc.B().Wait().Numreplicas(replicas).Timeout(rs.timeout.Milliseconds()).Build()
	}
	out := c.rc.DoMulti(ctx, s.EvalSHA(c.rc, keys, args), wait())
	if isNoScript(out[0].Error()) {
		out = c.rc.DoMulti(ctx, s.Eval(c.rc, keys, args), wait())
	}
	r := syncedResult{res: out[0], replicas: replicas}
	if out[0].Error() == nil || rueidis.IsRedisNil(out[0].Error()) {
		acked, err := out[1].AsInt64()
		if err != nil {
			return syncedResult{res: rueidis.NewErrorResult(fmt.Errorf("WAIT after %s: %w", s, err))}
		}
		r.acked = acked
		if acked != replicas {
			c.cfg.sync.replicas[c.syncSlot(keys[0])].Store(0) // re-read next time
		}
	}
	return r
}

func (c *Client) syncSlot(key string) uint16 {
	if c.cluster {
		return Slot(key)
	}
	return 0
}

// replicaCount returns the number of replicas connected to the master of
// key, from INFO replication on that master (cached until a WAIT disagrees).
func (c *Client) replicaCount(ctx context.Context, key string) (int64, error) {
	cache := &c.cfg.sync.replicas[c.syncSlot(key)]
	if n := cache.Load(); n > 0 {
		return int64(n - 1), nil
	}
	// A keyed command routes the keyless INFO to the key's master.
	out := c.rc.DoMulti(ctx, c.rc.B().Exists().Key(key).Build(), c.rc.B().Info().Section("replication").Build())
	info, err := out[1].ToString()
	if err != nil {
		return 0, fmt.Errorf("INFO replication: %w", err)
	}
	n := int64(0)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			n, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	cache.Store(int32(n + 1))
	return n, nil
}

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}
