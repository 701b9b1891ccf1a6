package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Fenced tokens must strictly increase in the order the sections entered;
// an inversion is allowed only for a section that entered after its lease
// could have run out (Lost) or a Redisson section that did not hold the
// lock; a fenced section without a token is a worker error.
func TestCheckTokens(t *testing.T) {
	sec := func(s1, tok int64) *section {
		return &section{proc: proc{0, 0}, S1: s1, S2: s1 + 1, Tok: tok}
	}
	var v Verdict
	checkTokens([]*section{sec(5, 3), sec(1, 1), sec(3, 2)}, []bool{true}, &v)
	assert.Zero(t, v.TokenViolations)
	assert.Equal(t, 2, v.TokensChecked)
	assert.Zero(t, v.WorkerErrors)

	v = Verdict{}
	checkTokens([]*section{sec(1, 1), sec(3, 3), sec(5, 2)}, []bool{true}, &v)
	assert.Equal(t, 1, v.TokenViolations, "token 2 entered after token 3")
	assert.False(t, v.OK())

	v = Verdict{}
	late := sec(5, 2)
	late.Lost = true
	checkTokens([]*section{sec(1, 1), sec(3, 3), late}, []bool{true}, &v)
	assert.Zero(t, v.TokenViolations)
	assert.Equal(t, 1, v.TokenExplained)

	// A restart of the lock server between two sections loses the
	// counter: the tokens start again, and must rise from there.
	v = Verdict{restarts: []restart{{down: 150, up: 160}}}
	at := func(s *section, tb int64) *section { s.TB = tb; return s }
	checkTokens([]*section{at(sec(1, 7), 100), at(sec(3, 8), 120), at(sec(5, 1), 200), at(sec(7, 2), 210), at(sec(9, 2), 220)}, []bool{true}, &v)
	assert.Equal(t, 1, v.TokenExplained, "the restart")
	assert.Equal(t, 1, v.TokenViolations, "token 2 twice after the restart")

	v = Verdict{}
	checkTokens([]*section{sec(1, 1), sec(3, 1)}, []bool{true}, &v)
	assert.Equal(t, 1, v.TokenViolations, "a token given twice")

	v = Verdict{}
	checkTokens([]*section{sec(1, 1), sec(3, 0)}, []bool{true}, &v)
	assert.Equal(t, 1, v.WorkerErrors, "a fenced section without a token")

	v = Verdict{}
	checkTokens([]*section{sec(1, 2), sec(3, 1)}, []bool{false}, &v)
	assert.Zero(t, v.TokensChecked, "not a fenced name")
}

// A TryLock with a wait on a fair name that ran out (W) is explained
// within fairWaitsOutWindow waits after a kill (a dead waiter holds up the
// line for its wait), and an acquire error otherwise.
func TestReadRecordsFairWaitsOut(t *testing.T) {
	dir := t.TempDir()
	wait := 2 * time.Second
	killedAt := int64(100 * time.Second)
	out := filepath.Join(dir, "worker-0-1.jsonl")
	require.NoError(t, os.WriteFile(out, []byte(`{"k":"W","t":`+itoa(killedAt+int64(3*time.Second))+`,"g":0,"n":2}
{"k":"W","t":`+itoa(killedAt+int64(fairWaitsOutWindow)*int64(wait)+int64(time.Second))+`,"g":1,"n":2}
{"k":"W","t":`+itoa(killedAt-int64(time.Second))+`,"g":2,"n":2}
`), 0o600))
	killed := filepath.Join(dir, "worker-1-0.jsonl")
	require.NoError(t, os.WriteFile(killed, nil, 0o600))
	v := Verdict{fairTryWait: wait}
	_, err := readRecords([]procResult{
		{proc: proc{0, 1}, Out: out},
		{proc: proc{1, 0}, Out: killed, KilledAt: killedAt, Lang: "java-4.7.0"},
	}, &v)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"go": 1}, v.FairWaitsOut)
	assert.Equal(t, 2, v.AcquireErrors, "a wait that ran out long after the kill, and one before it")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A restart of the lock server (empty) explains an overlap of a hold
// taken before it with one that entered after it went down, and the
// errors while it was down and shortly after; nothing else.
func TestCheckRestarts(t *testing.T) {
	before := func() *section {
		return &section{proc: proc{0, 0}, S1: 1, S2: 4, TB: 100 * ms, TE: 900 * ms, Lease: 30000}
	}
	after := &section{proc: proc{1, 0}, S1: 2, S2: 3, TB: 600 * ms, TE: 610 * ms, Lease: 30000}
	v := Verdict{restarts: []restart{{down: 500 * ms, up: 550 * ms}}}
	check([]*section{before(), after}, []int64{4}, 0, 4, []int{0}, &v)
	assert.Zero(t, v.Violations)
	assert.Equal(t, 1, v.RestartOverlaps)

	v = Verdict{restarts: []restart{{down: 700 * ms, up: 750 * ms}}}
	check([]*section{before(), after}, []int64{4}, 0, 4, []int{0}, &v)
	assert.Equal(t, 1, v.Violations, "the restart came after the second entered")

	v = Verdict{restarts: []restart{{down: 500 * ms, up: 550 * ms}}}
	p := procResult{proc: proc{0, 0}}
	assert.True(t, v.restartError(p, record{K: "X", T: 520 * ms, Err: "acquire: dial tcp: connection refused"}))
	assert.True(t, v.restartError(p, record{K: "U", T: 550*ms + restartWindow.Nanoseconds(), Err: "not held"}))
	assert.False(t, v.restartError(p, record{K: "X", T: 551*ms + restartWindow.Nanoseconds(), Err: "acquire: x"}))
	assert.False(t, v.restartError(p, record{K: "X", T: 499 * ms, Err: "acquire: x"}))
	assert.False(t, v.restartError(p, record{K: "X", T: 520 * ms, Err: "INCR: x"}), "the sequencer never restarts")
	assert.Equal(t, map[string]int{"go X": 1, "go U": 1}, v.RestartErrors)
}

// A Sentinel failover explains the same overlaps and errors as a restart,
// counted apart.
func TestCheckFailovers(t *testing.T) {
	before := &section{proc: proc{0, 0}, S1: 1, S2: 4, TB: 100 * ms, TE: 900 * ms, Lease: 30000}
	after := &section{proc: proc{1, 0}, S1: 2, S2: 3, TB: 600 * ms, TE: 610 * ms, Lease: 30000}
	v := Verdict{restarts: []restart{{down: 500 * ms, up: 550 * ms, failover: true}}}
	check([]*section{before, after}, []int64{4}, 0, 4, []int{0}, &v)
	assert.Zero(t, v.Violations)
	assert.Equal(t, 1, v.FailoverOverlaps)
	assert.Zero(t, v.RestartOverlaps)
	assert.True(t, v.restartError(procResult{proc: proc{1, 0}, Lang: "java-4.7.0"}, record{K: "X", T: 520 * ms, Err: "acquire: x"}))
	assert.Equal(t, map[string]int{"java-4.7.0 X": 1}, v.FailoverErrors)
	assert.Nil(t, v.RestartErrors)
}

// On a semaphore, a failover explains a holder only when one too many are
// inside: holders within the permits across a failover are no overlap.
func TestCheckFailoverSemaphore(t *testing.T) {
	sec := func(g int, s1, s2 int64, tb int64) *section {
		return &section{proc: proc{0, g}, S1: s1, S2: s2, TB: tb * ms, TE: tb*ms + 300*ms, Lease: 30000}
	}
	failover := []restart{{down: 500 * ms, up: 550 * ms, failover: true}}
	v := Verdict{restarts: failover}
	check([]*section{sec(0, 1, 4, 100), sec(1, 2, 3, 600)}, []int64{4}, 0, 4, []int{2}, &v)
	assert.Zero(t, v.Violations)
	assert.Zero(t, v.FailoverOverlaps, "two holders of two permits")
	assert.Empty(t, v.Problems)

	v = Verdict{restarts: failover}
	check([]*section{sec(0, 1, 6, 100), sec(1, 2, 5, 200), sec(2, 3, 4, 600)}, []int64{6}, 0, 4, []int{2}, &v)
	assert.Zero(t, v.Violations)
	assert.Equal(t, 1, v.FailoverOverlaps, "a third holder of two permits: the failover lost one")
	assert.Len(t, v.Problems, 1)

	v = Verdict{}
	check([]*section{sec(0, 1, 6, 100), sec(1, 2, 5, 200), sec(2, 3, 4, 600)}, []int64{6}, 0, 4, []int{2}, &v)
	assert.Equal(t, 1, v.Violations, "no failover: a third holder of two permits")
}

// Redisson's errors after a failover or a slot migration are its own
// re-subscription (Java-only runs show them too): excused for a window,
// a 60 s tryLock when its wait overlapped it; Go's never.
func TestCheckJavaTopologyErrors(t *testing.T) {
	v := Verdict{topoChanges: []restart{{down: 100 * ms, up: 200 * ms}}}
	java := procResult{proc: proc{1, 0}, Lang: "java-4.7.0"}
	sub := "acquire (plain lock): org.redisson.client.RedisTimeoutException: Subscription response timeout after 3000ms."
	assert.True(t, v.javaTopologyError(java, record{K: "X", T: 5000 * ms, Err: sub}))
	assert.False(t, v.javaTopologyError(java, record{K: "X", T: 50 * ms, Err: sub}), "before the change")
	assert.False(t, v.javaTopologyError(java, record{K: "X", T: 201*ms + javaTopologyWindow.Nanoseconds(), Err: sub}), "past the window")
	assert.True(t, v.javaTopologyError(java, record{K: "X", T: 200*ms + javaTopologyWindow.Nanoseconds() + javaWait.Nanoseconds(), Err: "tryLock(60s) timed out"}), "its wait overlapped the window")
	assert.False(t, v.javaTopologyError(procResult{proc: proc{0, 0}}, record{K: "X", T: 5000 * ms, Err: "acquire: x"}), "a Go error")
	assert.False(t, v.javaTopologyError(java, record{K: "U", T: 5000 * ms, Err: "java.lang.IllegalMonitorStateException: attempt to unlock lock, not locked by current thread"}), "an unlock of a lock not held")
	assert.Equal(t, map[string]int{"X RedisTimeoutException": 1, "X tryLock returned false": 1}, v.JavaTopologyErrors)
	assert.Equal(t, 4800*time.Millisecond, v.JavaTopologyLag)
}

// A grant's reply held up by a stall can reach its caller after the
// server restarted: the fenced section enters after the restart with the
// old counter's token, and the next one's token starts again. The
// restart explains it when the first call began before it ended.
func TestCheckTokensAcrossRestartWithLateReply(t *testing.T) {
	sections := func(t0 int64) []*section {
		return []*section{
			{proc: proc{0, 0}, N: 0, S1: 1, S2: 2, T0: t0 * ms, TB: 600 * ms, TE: 610 * ms, Tok: 973, Lease: 1500},
			{proc: proc{1, 0}, N: 0, S1: 3, S2: 4, T0: 650 * ms, TB: 700 * ms, TE: 710 * ms, Tok: 1, Lease: 1500},
		}
	}
	v := Verdict{restarts: []restart{{down: 500 * ms, up: 550 * ms}}}
	checkTokens(sections(400), []bool{true}, &v)
	assert.Zero(t, v.TokenViolations)
	assert.Equal(t, 1, v.TokenExplained)

	v = Verdict{restarts: []restart{{down: 500 * ms, up: 550 * ms}}}
	checkTokens(sections(560), []bool{true}, &v)
	assert.Equal(t, 1, v.TokenViolations, "the first call began after the restart: its token came from the new counter")
}

// A fenced LockLease, then its Token read: a restart between them leaves
// the section with no token (the counter went with the hold), which is
// the restart's doing; without a restart it is a worker error.
func TestCheckTokenLostToRestart(t *testing.T) {
	sections := func() []*section {
		return []*section{{proc: proc{0, 0}, N: 0, S1: 1, S2: 2, T0: 400 * ms, TB: 600 * ms, TE: 610 * ms, Lease: 1500}}
	}
	v := Verdict{restarts: []restart{{down: 500 * ms, up: 550 * ms}}}
	checkTokens(sections(), []bool{true}, &v)
	assert.Zero(t, v.WorkerErrors)
	assert.Equal(t, 1, v.TokensLost)

	v = Verdict{restarts: []restart{{down: 700 * ms, up: 750 * ms}}}
	checkTokens(sections(), []bool{true}, &v)
	assert.Equal(t, 1, v.WorkerErrors, "no restart between the call and the entry")
}
