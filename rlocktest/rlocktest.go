// Package rlocktest gives a unit test a ready *rlock.Client on an
// in-process Redis (github.com/alicebob/miniredis/v2), so that code that
// takes locks can be tested without a Redis server.
//
//	func TestExport(t *testing.T) {
//		locks := rlocktest.New(t)
//		l := locks.Lock("export")
//		...
//	}
//
// miniredis runs the library's real Lua scripts and its pub/sub, so locks,
// their reentrancy, leases (with FastForward), wake-ups and the
// synchronizers behave as on Redis. It is a module of its own, so that the
// library's users who do not test with it do not get miniredis.
//
// What miniredis does not do, and so what a test with this package cannot
// show. This list comes from running the library's own standalone suite
// against miniredis v2.40.0 (37 of its tests pass unchanged; the others
// need what follows) and from this package's tests:
//
//   - Time. Keys expire only when the test moves miniredis' clock
//     (FastForward): a lease never runs out by itself, and a waiter whose
//     holder never unlocks waits until the clock is moved (or its own wait
//     ends). The Client's own clock still runs, so after a fixed lease's
//     end its HoldContext ends with rlock.ErrLeaseExpired while miniredis
//     still holds the key until FastForward. Watchdog renewals are sent
//     and succeed, but a test cannot see the TTL fall and rise.
//   - Replication: no WAIT and no INFO replication. Replica sync is off
//     (rlock.WithoutReplicaSync), so rlock.ErrNoSyncedReplicas never
//     happens.
//   - Client-side caching (CLIENT TRACKING): the rueidis client is made
//     with DisableCache; the library does not use it anyway.
//   - Sharded pub/sub (SSUBSCRIBE, SPUBLISH, PUBSUB SHARDCHANNELS),
//     Redis Cluster and Sentinel: the Client uses plain PUBLISH and
//     SUBSCRIBE on one node.
//   - Faults: no restarts, failovers, lost replies or BUSY scripts; the
//     library's behaviour under them is tested against real servers.
//
// Everything else the library sends works on it: the lock scripts (plain,
// spin, fenced, non-reentrant, fair with its queue, read-write), their
// pub/sub wake-ups, force unlock, the semaphores and the latch, and Java
// Redisson's data layout (a Java service is not there, of course).
package rlocktest

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/goredisson/locks/rlock"
)

// New starts a miniredis for t and returns an rlock Client on it; both are
// closed when t ends. opts are passed to rlock.New.
func New(t testing.TB, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	c, _ := NewWithServer(t, opts...)
	return c
}

// NewWithServer is New that also returns the miniredis, to inspect keys or
// move its clock (FastForward) in the test.
func NewWithServer(t testing.TB, opts ...rlock.Option) (*rlock.Client, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{mr.Addr()},
		DisableCache: true, // miniredis has no CLIENT TRACKING
	})
	if err != nil {
		t.Fatalf("rlocktest: connecting to miniredis: %v", err)
	}
	// miniredis has no replicas (nor INFO replication): no replica sync.
	c, err := rlock.New(rc, append([]rlock.Option{rlock.WithoutReplicaSync()}, opts...)...)
	if err != nil {
		rc.Close()
		t.Fatalf("rlocktest: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		rc.Close()
	})
	return c, mr
}
