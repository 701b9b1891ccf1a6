package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/interop_test/driver"
)

// TestSoakSlice is the make test slice of make soak: three Go worker
// processes and two JVMs (Redisson 4.7.0 and 3.52.0), four goroutines or
// threads each, on sixteen names of every kind both languages have (plain,
// read-write, fair, fenced, permit-expirable semaphore, taking turns) for
// 60s, every acquisition style of both languages (Lock, LockLease,
// TryLock with a wait and a lease or the watchdog, one-attempt TryLock;
// Java lock, lock(lease), tryLock(wait, lease), tryLock(wait), tryLock(),
// lockAsync, lockAsync(lease); their token forms on fenced names, the
// acquire forms on semaphores), while workers of both languages are
// SIGKILLed in turn (and replaced), every pub/sub or command connection
// on the lock server is CLIENT KILLed now and then, all worker traffic to
// it stalls for up to a second now and then (the harness' TCP proxy) and
// it restarts empty once or twice (every hold, token counter, queue and
// permit count lost: the overlaps that explains are counted apart). No two sections on an
// exclusive name overlap unless a killed holder's lease ran out, readers
// never overlap a writer, no more holders than permits, fenced tokens
// strictly increase in grant order, fair waiters are served in order; at
// least 10,000 acquisitions; no error.
func TestSoakSlice(t *testing.T) {
	versions := []string{"4.7.0", "3.52.0"}
	for _, v := range versions {
		require.NoError(t, driver.CheckBuilt(v), "the interop driver jars (make deps builds them)")
	}
	rep := runContention(t, func(cfg *Config) {
		cfg.Procs, cfg.Java, cfg.JavaVersions, cfg.Goroutines, cfg.Names = 3, 2, versions, 4, 16
		cfg.Kinds, cfg.FairWait = mixedKinds, time.Second
		cfg.MaxHold, cfg.Duration = time.Millisecond, 60*time.Second
		cfg.KillEvery, cfg.ClientKills = 7*time.Second, 15*time.Second
		cfg.RestartLockEvery, cfg.StallEvery = 30*time.Second, 10*time.Second
		cfg.Redis = "" // the run's own server, which it restarts
	})
	assert.Zero(t, rep.Violations, "mutual exclusion violated")
	assert.True(t, rep.OK(), "the run failed")
	// A floor that catches a stall, not a speed: on 2 cores under -race,
	// with kills, stalls and a restart, a minute made 13,163 to 19,939
	// acquisitions on a slow hour (and over 20,000 on others). Speed is
	// the bench's to measure.
	assert.GreaterOrEqual(t, rep.Acquisitions, 10000)
	assert.GreaterOrEqual(t, rep.KillsByLang["go"], 1, "no Go worker was killed")
	java := 0
	for lang, n := range rep.KillsByLang {
		if strings.HasPrefix(lang, "java-") {
			java += n
		}
	}
	assert.GreaterOrEqual(t, java, 1, "no JVM was killed")
	// Sections are milliseconds long and leases 1.5s, yet a holder can
	// outlive its lease: an acquire whose reply a CLIENT KILL held up
	// (Redisson's retries, or the Go fence settling) returns with little
	// of its fixed lease left. The holder knows (Go: HoldContext; Java:
	// the TTL), so the overlap is explained, as the issue asks, and
	// counted apart; it never makes a violation.
	assert.LessOrEqual(t, rep.LostOverlaps, rep.LeaseExpiryOverlaps)
	t.Logf("overlaps with a live holder that knew its hold had ended: %d", rep.LostOverlaps)
	assert.GreaterOrEqual(t, rep.LockRestarts, 1, "the lock server never restarted")
	assert.GreaterOrEqual(t, rep.Stalls, 1, "the proxy never stalled")
	assert.GreaterOrEqual(t, rep.ClientKills["pubsub"], 1)
	assert.GreaterOrEqual(t, rep.ClientKills["normal"], 1)
	for _, lang := range []string{"go", "java-4.7.0", "java-3.52.0"} {
		assert.Positive(t, rep.ByLang[lang], "no acquisitions by %s", lang)
	}
	for _, st := range goStyles {
		assert.Positive(t, rep.ByStyle["go/"+st], "no Go acquisitions in style %s", st)
	}
	for _, st := range []string{"lock", "locklease", "trylock-wait", "trylock-wait-wd", "trylock", "lockasync", "lockasync-lease"} {
		n := rep.ByStyle["java-4.7.0/"+st] + rep.ByStyle["java-3.52.0/"+st]
		assert.Positive(t, n, "no Java acquisitions in style %s", st)
	}
	for _, kind := range mixedKinds {
		for _, lang := range []string{"go", "java-4.7.0", "java-3.52.0"} {
			assert.Positive(t, rep.ByKindLang[kind+"/"+lang], "no acquisitions of %s names by %s", kind, lang)
		}
	}
	for _, st := range goSemStyles {
		assert.Positive(t, rep.ByStyle["go/"+st], "no Go acquisitions in style %s", st)
	}
	for _, st := range []string{"acquire", "tryacquire-wait", "tryacquire", "acquireasync"} {
		assert.Positive(t, rep.ByStyle["java-4.7.0/"+st]+rep.ByStyle["java-3.52.0/"+st], "no Java acquisitions in style %s", st)
	}
	assert.Positive(t, rep.TokensChecked, "no fenced tokens compared")
	assert.Positive(t, rep.ReadOverlaps, "readers never shared a read-write lock")
	assert.Positive(t, rep.Shared, "no semaphore holders shared the permits")
	assert.Positive(t, rep.FIFOHonoured, "FIFO never decided an order")
	for n, k := range rep.PerName {
		assert.Positive(t, k, "name %d was never locked", n)
	}
}

// TestLongHoldsSlice is a short long-holds run (make soak holds 100,000
// locks for 10 minutes): 5,000 locks held with a 600ms watchdog for 6s,
// about 27 renewal rounds, then a Redis restart.
func TestLongHoldsSlice(t *testing.T) {
	rep, err := RunLongHolds(t.Context(), LongHoldConfig{Locks: 5000, Duration: 6 * time.Second, Watchdog: 600 * time.Millisecond})
	require.NoError(t, err)
	var out strings.Builder
	rep.Print(&out)
	t.Logf("\n%s", out.String())
	assert.True(t, rep.OK(), "the run failed")
	assert.GreaterOrEqual(t, rep.Rounds, 15)
	assert.Equal(t, int64(rep.Rounds*50), rep.ScriptCalls)
	assert.Equal(t, 5000, rep.HeldAtEnd)
	assert.Equal(t, 5000, rep.LostAfterRestart)
	assert.Zero(t, rep.CallsAfterLossRounds)
}

// With --unsafe neither the Go nor the Java workers lock: the checker must
// see the overlaps, between the languages too.
func TestUnsafeMixedReportsViolations(t *testing.T) {
	require.NoError(t, driver.CheckBuilt("4.7.0"), "the interop driver jars (make deps builds them)")
	rep := runContention(t, func(cfg *Config) {
		cfg.Procs, cfg.Java, cfg.JavaVersions, cfg.Names = 1, 1, []string{"4.7.0"}, 1
		cfg.Duration, cfg.KillEvery, cfg.Unsafe = 8*time.Second, 0, true
	})
	assert.Positive(t, rep.Violations)
	assert.False(t, rep.OK())
	assert.Positive(t, rep.ViolationsByPair["go then java-4.7.0"], "no Java section entered while a Go one was inside: %v", rep.ViolationsByPair)
	assert.Positive(t, rep.ViolationsByPair["java-4.7.0 then go"], "no Go section entered while a Java one was inside: %v", rep.ViolationsByPair)
}

// TestSoakTopologies is the make test slice of make soak's Sentinel leg,
// and a cluster run: a Go worker and a JVM (Redisson 4.7.0) on one name of
// each kind, through forced failovers (SENTINEL FAILOVER; CLUSTER
// FAILOVER of a name's master) and, on the cluster, migrations of a
// name's slot to another master, with SIGKILLs and CLIENT KILLs. Writes
// the old master took that no replica had are the only overlaps a
// failover may explain (counted apart); a manual cluster failover and a
// migration lose none.
func TestSoakTopologies(t *testing.T) {
	require.NoError(t, driver.CheckBuilt("4.7.0"), "the interop driver jars (make deps builds them)")
	for _, tc := range []struct {
		name string
		set  func(*Config)
	}{
		{"Sentinel", func(cfg *Config) { cfg.Sentinel = true }},
		{"Cluster", func(cfg *Config) { cfg.Cluster, cfg.MigrateEvery = true, 6*time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := runContention(t, func(cfg *Config) {
				cfg.Procs, cfg.Java, cfg.JavaVersions, cfg.Goroutines, cfg.Names = 1, 1, []string{"4.7.0"}, 3, 5
				cfg.Kinds, cfg.FairWait = mixedKinds, time.Second
				cfg.MaxHold, cfg.Duration = time.Millisecond, 20*time.Second
				cfg.KillEvery, cfg.ClientKills, cfg.FailoverEvery = 8*time.Second, 8*time.Second, 6*time.Second
				cfg.Redis = ""
				tc.set(cfg)
			})
			assert.Zero(t, rep.Violations, "mutual exclusion violated")
			assert.True(t, rep.OK(), "the run failed")
			assert.GreaterOrEqual(t, rep.Failovers, 1, "no failover")
			if tc.name == "Cluster" {
				assert.GreaterOrEqual(t, rep.Migrations, 1, "no slot migration")
				assert.Zero(t, rep.FailoverOverlaps, "a manual failover lost a write")
			}
			for _, lang := range []string{"go", "java-4.7.0"} {
				assert.Positive(t, rep.ByLang[lang], "no acquisitions by %s", lang)
			}
			for n, k := range rep.PerName {
				assert.Positive(t, k, "name %d was never locked", n)
			}
		})
	}
}
