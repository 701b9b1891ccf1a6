// Package interop_test runs the Go RLock (package rlock) against real Java
// Redisson, one JVM per Redisson version pinned in java/versions.txt, on
// real Redis servers (standalone and a Redis 7 cluster). Each scenario shows
// that a Go service and a Java service sharing a lock see and respect each
// other's holds, reentrancy, leases, watchdog renewals and wake-ups.
//
// Build the Java side first: `make deps` (or bash interop_test/java/build.sh).
// A missing java, redis-server or driver build fails the tests; nothing is
// skipped.
//
// Test layout: TestRedisson/<version>/<Scenario> (standalone Redis) and
// TestRedissonCluster/<version>/<Scenario> (Redis Cluster, sharded pub/sub).
// Run one scenario for all versions with e.g.
//
//	go test -race -run 'TestRedisson/.*/Watchdog' ./interop_test/
package interop_test

import (
	"testing"

	"github.com/goredisson/locks/internal/holder"
	"github.com/goredisson/locks/internal/redistest"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the "Go service that dies holding a lock"
	// of the watchdog scenario (internal/holder).
	holder.MaybeRun()
	redistest.VerifyTestMain(m)
}
