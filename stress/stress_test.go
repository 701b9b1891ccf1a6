package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the worker process.
	if spec := os.Getenv(workerEnv); spec != "" {
		os.Exit(workerMain(spec))
	}
	redistest.VerifyTestMain(m)
}

// contention is the stress tests' set-up: three worker processes of four
// goroutines on four names, 1.5s leases, sections up to 8ms.
func contention(addr string, stderr io.Writer) Config {
	return Config{Redis: addr, Procs: 3, Goroutines: 4, Names: 4, Watchdog: 1500 * time.Millisecond,
		Lease: 1500 * time.Millisecond, MaxHold: 8 * time.Millisecond, Stderr: stderr}
}

// runContention runs the contention set-up, changed by set, on a fresh
// Redis, logs the report and the workers' stderr, and returns the report.
func runContention(t *testing.T, set func(*Config)) *Report {
	t.Helper()
	srv := redistest.Standalone(t)
	var stderr syncBuffer
	cfg := contention(srv.Addr, &stderr)
	set(&cfg)
	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("\n%s", out.String())
	if s := stderr.String(); s != "" {
		if len(s) > 16<<10 {
			// Redisson logs a stack trace for every command a CLIENT
			// KILL cut: keep the tail.
			s = "...\n" + s[len(s)-16<<10:]
		}
		t.Logf("workers' stderr:\n%s", s)
	}
	return rep
}

// Three worker processes of four goroutines contend for four locks for
// about 20s while a random worker is SIGKILLed (and replaced) every ~2.5s:
// no two critical sections on a name overlap, except after a killed
// holder's lease ran out.
func TestStress(t *testing.T) {
	rep := runContention(t, func(cfg *Config) {
		cfg.Duration, cfg.KillEvery = 20*time.Second, 2500*time.Millisecond
	})
	assert.Zero(t, rep.Violations, "mutual exclusion violated")
	assert.True(t, rep.OK(), "the run failed")
	assert.GreaterOrEqual(t, rep.Kills, 5)
	assert.Greater(t, rep.Acquisitions, 1000)
	for n, k := range rep.PerName {
		assert.Positive(t, k, "name %d was never locked", n)
	}
	// Every overlap with a killed holder came after its lease could run
	// out, and not much later than the lease.
	if rep.ExpiryGapMax > 0 {
		assert.LessOrEqual(t, rep.ExpiryGapMax, 1500*time.Millisecond+time.Second)
	}
}

// The same contention with faults injected into 5% of every worker's
// script calls (dropped requests, lost replies, late requests, BUSY,
// TRYAGAIN, LOADING) on top of the kills: still no violation, no error.
func TestStressWithFaults(t *testing.T) {
	rep := runContention(t, func(cfg *Config) {
		cfg.Duration, cfg.KillEvery, cfg.Faults = 15*time.Second, 3*time.Second, 0.05
	})
	assert.Zero(t, rep.Violations, "mutual exclusion violated")
	assert.True(t, rep.OK(), "the run failed")
	assert.Greater(t, rep.Acquisitions, 500)
	total := 0
	for _, n := range rep.Faults {
		total += n
	}
	assert.Greater(t, total, 100, "too few faults were injected: %v", rep.Faults)
}

// Read-write locks, three reads to one write, under kills and faults on
// 3% of script calls: readers overlap (they share), a writer never
// overlaps anyone.
func TestStressReadWrite(t *testing.T) {
	rep := runContention(t, func(cfg *Config) {
		cfg.Duration, cfg.KillEvery, cfg.Faults, cfg.RW = 15*time.Second, 3*time.Second, 0.03, true
	})
	assert.Zero(t, rep.Violations, "a writer overlapped another section")
	assert.True(t, rep.OK(), "the run failed")
	assert.Greater(t, rep.Acquisitions, 500)
	assert.Greater(t, rep.ReadOverlaps, 50, "readers never shared: the run proves nothing")
	assert.Greater(t, rep.Acquisitions-rep.Reads, 100, "too few write sections")
}

// --rw --unsafe: writers do not exclude, and the check sees it.
func TestUnsafeReadWriteReportsViolations(t *testing.T) {
	srv := redistest.Standalone(t)
	var stdout, stderr syncBuffer
	code := cliMain([]string{"--redis", srv.Addr, "--unsafe", "--rw", "--duration", "1500ms", "--kill-every", "0",
		"--procs", "2", "--goroutines", "3", "--names", "2"}, &stdout, &stderr)
	t.Logf("\n%s%s", stdout.String(), stderr.String())
	assert.Equal(t, 1, code)
	m := violationsLine.FindStringSubmatch(stdout.String())
	require.NotNil(t, m, "no violations line")
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	assert.Positive(t, n)
}

var violationsLine = regexp.MustCompile(`(?m)^violations: (\d+)$`)

// With --unsafe the workers do not lock: the check must see overlaps, and
// the program must exit 1.
func TestUnsafeModeReportsViolations(t *testing.T) {
	srv := redistest.Standalone(t)
	var stdout, stderr syncBuffer
	code := cliMain([]string{"--redis", srv.Addr, "--unsafe", "--duration", "1500ms", "--kill-every", "0",
		"--procs", "2", "--goroutines", "3", "--names", "2"}, &stdout, &stderr)
	t.Logf("\n%s%s", stdout.String(), stderr.String())
	assert.Equal(t, 1, code)
	m := violationsLine.FindStringSubmatch(stdout.String())
	require.NotNil(t, m, "no violations line")
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	assert.Positive(t, n)
}

func TestFlags(t *testing.T) {
	var stdout, stderr syncBuffer
	assert.Equal(t, 2, cliMain([]string{"--procs", "0"}, &stdout, &stderr))
	assert.Equal(t, 2, cliMain([]string{"--bogus"}, &stdout, &stderr))
	assert.Equal(t, 2, cliMain([]string{"extra"}, &stdout, &stderr))
}

// The check on hand-made records: what counts as a violation, what as a
// lease-expiry overlap.
func TestCheck(t *testing.T) {
	p0, p1 := proc{0, 0}, proc{1, 0}
	sec := func(p proc, g int, s1, s2, tb int64) *section {
		return &section{proc: p, G: g, S1: s1, S2: s2, T0: tb - ms, TB: tb, TE: tb + 5*ms, Lease: 1000, WD: true}
	}
	run := func(sections []*section, seqMax int64, kills int) Verdict {
		var v Verdict
		check(sections, []int64{seqMax}, kills, 4, []int{0}, &v)
		return v
	}

	t.Run("exclusive", func(t *testing.T) {
		v := run([]*section{sec(p0, 0, 1, 2, 100), sec(p1, 0, 3, 4, 200), sec(p0, 1, 5, 6, 300)}, 6, 0)
		assert.True(t, v.OK(), "%+v", v)
		assert.Equal(t, 3, v.Completed)
	})
	t.Run("readers share, a writer does not", func(t *testing.T) {
		r1, r2, w := sec(p0, 0, 1, 3, 100), sec(p1, 0, 2, 4, 200), sec(p1, 1, 5, 7, 300)
		r1.Read, r2.Read = true, true
		r3 := sec(p0, 1, 6, 8, 400)
		r3.Read = true
		v := run([]*section{r1, r2, w, r3}, 8, 0)
		assert.Equal(t, 1, v.ReadOverlaps)
		assert.Equal(t, 1, v.Violations, "the reader entered while the writer was inside")
	})
	t.Run("overlap", func(t *testing.T) {
		v := run([]*section{sec(p0, 0, 1, 3, 100), sec(p1, 0, 2, 4, 200)}, 4, 0)
		assert.Equal(t, 1, v.Violations)
		assert.False(t, v.OK())
	})
	t.Run("nested", func(t *testing.T) {
		v := run([]*section{sec(p0, 0, 1, 6, 100), sec(p1, 0, 2, 3, 200), sec(p1, 1, 4, 5, 300)}, 6, 0)
		assert.Equal(t, 2, v.Violations)
	})
	t.Run("killed holder, next entered after the kill", func(t *testing.T) {
		e := sec(p0, 0, 1, 0, 100)
		e.killedAt = 150 * ms
		v := run([]*section{e, sec(p1, 0, 2, 3, 1500*ms), sec(p1, 1, 4, 5, 1600*ms)}, 5, 1)
		assert.Zero(t, v.Violations)
		assert.Equal(t, 1, v.LeaseExpiryOverlaps, "one overlap per cut section")
		assert.Equal(t, 1, v.CutByKill)
		assert.True(t, v.OK(), "%+v", v)
	})
	t.Run("killed holder, next entered before the kill", func(t *testing.T) {
		e := sec(p0, 0, 1, 0, 100*ms)
		e.killedAt = 150 * ms
		v := run([]*section{e, sec(p1, 0, 2, 3, 120*ms)}, 3, 1)
		assert.Equal(t, 1, v.Violations)
	})
	t.Run("killed holder, next entered after the kill but within the lease", func(t *testing.T) {
		e := sec(p0, 0, 1, 0, 100*ms) // acquire began at 99ms, lease 1s
		e.killedAt = 150 * ms
		v := run([]*section{e, sec(p1, 0, 2, 3, 400*ms)}, 3, 1)
		assert.Equal(t, 1, v.Violations, "the lease set at the acquisition could not have run out")
	})
	t.Run("killed holder whose lease ran out before the kill", func(t *testing.T) {
		// The process hung past its lease, the next holder entered, then
		// the process was killed: fine for a fixed lease; a watchdog hold
		// of a live process must not be taken.
		e := sec(p0, 2, 1, 0, 100*ms)
		e.Lease, e.WD, e.killedAt = 1000, false, 5000*ms
		v := run([]*section{e, sec(p1, 0, 2, 3, 1200*ms)}, 3, 1)
		assert.Zero(t, v.Violations)
		assert.Equal(t, 1, v.LeaseExpiryOverlaps)
		e.WD = true
		v = run([]*section{e, sec(p1, 0, 2, 3, 1200*ms)}, 3, 1)
		assert.Equal(t, 1, v.Violations)
	})
	t.Run("killed holder with a fixed lease that elapsed", func(t *testing.T) {
		e := sec(p0, 0, 1, 0, 100*ms)
		e.Lease, e.WD, e.killedAt = 500, false, 5000*ms
		v := run([]*section{e, sec(p1, 0, 2, 3, 700*ms)}, 3, 1)
		assert.Zero(t, v.Violations)
		v = run([]*section{e, sec(p1, 0, 2, 3, 300*ms)}, 3, 1)
		assert.Equal(t, 1, v.Violations, "the lease had not elapsed yet")
	})
	t.Run("lost hold", func(t *testing.T) {
		e := sec(p0, 0, 1, 3, 100)
		e.Lost = true
		v := run([]*section{e, sec(p1, 0, 2, 4, 200)}, 4, 0)
		assert.Zero(t, v.Violations)
		assert.Equal(t, 1, v.LeaseExpiryOverlaps)
	})
	t.Run("open section of a live process", func(t *testing.T) {
		v := run([]*section{sec(p0, 0, 1, 0, 100)}, 1, 0)
		assert.Equal(t, 1, v.WorkerErrors)
		assert.False(t, v.OK())
	})
	t.Run("sequence number claimed twice", func(t *testing.T) {
		v := run([]*section{sec(p0, 0, 1, 2, 100), sec(p1, 0, 2, 3, 200)}, 3, 0)
		assert.Positive(t, v.Violations)
	})
	t.Run("unrecorded increments need kills", func(t *testing.T) {
		v := run([]*section{sec(p0, 0, 1, 2, 100), sec(p1, 0, 4, 5, 200)}, 5, 0)
		assert.Equal(t, 1, v.Unrecorded)
		assert.Equal(t, 1, v.WorkerErrors)
		v = run([]*section{sec(p0, 0, 1, 2, 100), sec(p1, 0, 4, 5, 200)}, 5, 1)
		assert.True(t, v.OK(), "%+v", v)
	})
}

// syncBuffer is a bytes.Buffer safe for concurrent writers (os/exec copies
// the workers' output in goroutines).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// --fair: fair locks. Without kills, and with a wait timeout longer than
// the run (no reservation can run out), every waiter is served in the
// order of its call; under kills (a killed waiter holds up its line for at
// most its reservation) mutual exclusion holds and the line moves on.
func TestStressFair(t *testing.T) {
	t.Run("FIFO", func(t *testing.T) {
		rep := runContention(t, func(cfg *Config) {
			cfg.Duration, cfg.KillEvery, cfg.Fair, cfg.FairWait = 10*time.Second, 0, true, time.Minute
			cfg.Names, cfg.Goroutines, cfg.MaxHold = 1, 6, 30*time.Millisecond // one line of 18
		})
		assert.Zero(t, rep.Violations, "two holders overlapped")
		assert.Zero(t, rep.FIFOViolations, "waiters served out of order")
		assert.Zero(t, rep.FIFOExplained, "no reservation can run out in this run")
		assert.True(t, rep.OK(), "the run failed")
		assert.Greater(t, rep.FIFOHonoured, 100, "FIFO decided too few hand-offs: the check proves little")
	})
	t.Run("kills", func(t *testing.T) {
		rep := runContention(t, func(cfg *Config) {
			cfg.Duration, cfg.KillEvery, cfg.Fair, cfg.FairWait = 15*time.Second, 4*time.Second, true, 2*time.Second
			cfg.Goroutines = 6
		})
		assert.Zero(t, rep.Violations, "two holders overlapped")
		assert.Zero(t, rep.FIFOViolations, "waiters served out of order within a busy period shorter than the wait")
		assert.True(t, rep.OK(), "the run failed")
		assert.Greater(t, rep.Kills, 1)
		assert.Greater(t, rep.Acquisitions, 300)
	})
}

// checkFIFO counts a grant that came before an earlier call, unless the
// busy period had outlasted the wait timeout or a failover or migration of
// the name's slot may have cost the waiter its place.
func TestCheckFIFO(t *testing.T) {
	msec := int64(time.Millisecond)
	sec := func(s1, t0, tb int64) *section {
		return &section{N: 0, S1: s1, S2: s1 + 1, T0: t0 * msec, TB: tb * msec, TE: tb*msec + msec}
	}
	var v Verdict
	// The second caller was waiting when the first was granted: FIFO
	// decided, and was honoured.
	checkFIFO([]*section{sec(1, 0, 300), sec(3, 150, 302)}, []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, Verdict{FIFOHonoured: 1}, v)
	v = Verdict{}
	// Uncontended: nothing decided.
	checkFIFO([]*section{sec(1, 0, 10), sec(3, 500, 510)}, []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, Verdict{}, v)
	v = Verdict{}
	checkFIFO([]*section{sec(1, 500, 510), sec(3, 0, 600)}, []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, 1, v.FIFOViolations, "served before an earlier call")
	assert.False(t, v.OK())
	v = Verdict{}
	// A busy period of 3 s (each call made while the previous holder was
	// inside) with a 2 s wait timeout: explained.
	checkFIFO([]*section{sec(1, 0, 1000), sec(3, 900, 2000), sec(5, 2900, 3000), sec(7, 1900, 3100)}, []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, 0, v.FIFOViolations)
	assert.Equal(t, 1, v.FIFOExplained)
	v = Verdict{}
	checkFIFO([]*section{sec(1, 50, 60), sec(3, 0, 100)}, []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, Verdict{}, v, "calls closer than the slack are not ordered")

	// A failover or migration of the name's slot while the passed-over
	// waiter waited may have cost it its place; for a Redisson waiter, also
	// one that ended up to javaConnWindow before its call (its queueing
	// call may reach the moved slot late); a Go waiter's call after the
	// change keeps its place, and so does any waiter when the change moved
	// another name's slot.
	passed := func(lang string) []*section {
		w := sec(3, 40_000, 40_900)
		w.Lang = lang
		return []*section{sec(1, 40_800, 40_810), w}
	}
	window := javaConnWindow.Nanoseconds()
	justBefore := []restart{{down: 39_000*msec - window, up: 40_000*msec - window + msec}}
	v = Verdict{topoChanges: justBefore}
	checkFIFO(passed("java-4.7.0"), []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, 1, v.FIFOExplained)
	assert.Equal(t, 1, v.FIFOAfterTopology)
	assert.Zero(t, v.FIFOViolations)
	v = Verdict{topoChanges: []restart{{down: 39_000*msec - window, up: 40_000*msec - window - msec}}}
	checkFIFO(passed("java-4.7.0"), []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, 1, v.FIFOViolations, "the change ended just over javaConnWindow before the Redisson call")
	v = Verdict{topoChanges: []restart{{down: 39_000 * msec, up: 39_999 * msec}}}
	checkFIFO(passed("go"), []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, 1, v.FIFOViolations, "a Go waiter that called after the change ended")
	during := restart{down: 40_500 * msec, up: 41_000 * msec}
	v = Verdict{topoChanges: []restart{during}}
	checkFIFO(passed("go"), []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, 1, v.FIFOAfterTopology, "a change during the Go waiter's wait")
	assert.Zero(t, v.FIFOViolations)
	during.only = 1 // a migration of name 0's slot (the waiters' own)
	v = Verdict{topoChanges: []restart{during}}
	checkFIFO(passed("go"), []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, 1, v.FIFOAfterTopology, "a migration of the name's own slot")
	during.only = 2 // a migration of name 1's slot
	v = Verdict{topoChanges: []restart{during}}
	checkFIFO(passed("java-4.7.0"), []bool{true}, 2*time.Second, false, &v)
	assert.Equal(t, 1, v.FIFOViolations, "a migration of another name's slot")
}

// TestStressSemaphore: semaphores of 3 permits shared by 3 processes of 4
// goroutines while processes are killed: never more than 3 inside, the
// permits were really shared, and a killed holder's permits come back (by
// their lease for the permit-expirable semaphore: every permit is
// available at the end). Unsafe (no semaphore at all), the check fails.
func TestStressSemaphore(t *testing.T) {
	for _, expirable := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "expirable"}[expirable], func(t *testing.T) {
			rep := runContention(t, func(cfg *Config) {
				cfg.Duration, cfg.KillEvery, cfg.Semaphore, cfg.Expirable = 10*time.Second, 2*time.Second, 3, expirable
				cfg.Names, cfg.Lease = 2, time.Second
			})
			assert.Zero(t, rep.Violations, "more holders than permits")
			assert.True(t, rep.OK(), "the run failed")
			assert.Equal(t, 3, rep.MostInside, "the permits were never all used: the check proves little")
			assert.Greater(t, rep.Shared, 500)
			assert.Greater(t, rep.Kills, 2)
			assert.LessOrEqual(t, rep.PermitsAtEnd, rep.PermitsTotal)
			if expirable {
				assert.Equal(t, rep.PermitsTotal, rep.PermitsAtEnd, "every permit back after the leases")
				assert.Positive(t, rep.PermitsExpired, "no killed holder's permit came back by its lease")
			} else {
				assert.Positive(t, rep.PermitsReturned, "no killed holder held a permit")
			}
		})
	}
	t.Run("unsafe", func(t *testing.T) {
		rep := runContention(t, func(cfg *Config) {
			cfg.Duration, cfg.KillEvery, cfg.Semaphore, cfg.Unsafe = 3*time.Second, 0, 2, true
			cfg.Names = 1
		})
		assert.Positive(t, rep.Violations, "without the semaphore, more than 2 must have been inside")
	})
}

// The permit of a killed holder counts as taken until its lease, from the
// acquire's return (TB), has run out, however long the acquire waited
// (T0 + lease would excuse an entry 200 ms after the permit was taken).
func TestCheckPermitExpiry(t *testing.T) {
	killed := func() *section {
		return &section{proc: proc{0, 0}, S1: 1, T0: 0, TB: 5000 * ms, Lease: 1000, killedAt: 5100 * ms}
	}
	early := &section{proc: proc{1, 0}, S1: 3, S2: 4, T0: 5150 * ms, TB: 5200 * ms, TE: 5210 * ms, Lease: 1000}
	var v Verdict
	check([]*section{killed(), early}, []int64{4}, 1, 4, []int{1}, &v)
	assert.Equal(t, 1, v.Violations, "an entry while the only permit was held")
	late := &section{proc: proc{1, 0}, S1: 3, S2: 4, T0: 5150 * ms, TB: 6050 * ms, TE: 6060 * ms, Lease: 1000}
	v = Verdict{}
	check([]*section{killed(), late}, []int64{4}, 1, 4, []int{1}, &v)
	assert.Zero(t, v.Violations, "an entry after the killed holder's lease ended")
	assert.Equal(t, 1, v.PermitsExpired)
}

// TestStressRedLock: RedLocks over 3 independent masters while worker
// processes are killed and masters are killed and restarted empty (each
// kept down for the longest lease first, Redlock's delayed restart): no
// two holders overlap, except after a killed holder's lease ran out.
func TestStressRedLock(t *testing.T) {
	rep := runContention(t, func(cfg *Config) {
		cfg.Duration, cfg.KillEvery, cfg.RedLock, cfg.RestartEvery = 12*time.Second, 3*time.Second, 3, 3*time.Second
		cfg.Names, cfg.Lease, cfg.Watchdog = 2, time.Second, time.Second
	})
	assert.Zero(t, rep.Violations, "two RedLock holders overlapped")
	assert.True(t, rep.OK(), "the run failed")
	assert.GreaterOrEqual(t, rep.MasterRestarts, 2, "too few master restarts: the check proves little")
	assert.Greater(t, rep.Acquisitions, 500)
}

// A SIGKILL can cut the record being written: one incomplete line of a
// killed process is not an error; of a live one, or a second one, it is.
func TestReadRecordsCutLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	good := `{"k":"B","g":0,"n":0,"s1":1,"t0":1,"tb":2,"lease":1000}` + "\n"
	cut := `{"k":"E","g":0,"n":0,"s1":1,"s2"`
	var v Verdict
	_, err := readRecords([]procResult{{proc: proc{0, 0}, Out: write("a", good+cut), KilledAt: 5}}, &v)
	require.NoError(t, err)
	assert.Zero(t, v.WorkerErrors, "the cut last line of a killed process")
	v = Verdict{}
	_, err = readRecords([]procResult{{proc: proc{0, 0}, Out: write("b", good+cut)}}, &v)
	require.NoError(t, err)
	assert.Equal(t, 1, v.WorkerErrors, "a cut line of a process that was not killed")
	v = Verdict{}
	_, err = readRecords([]procResult{{proc: proc{0, 0}, Out: write("c", cut+"\n"+cut), KilledAt: 5}}, &v)
	require.NoError(t, err)
	assert.Equal(t, 1, v.WorkerErrors, "a second cut line")
}
