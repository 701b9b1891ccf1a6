package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Java workers' H records (a second unlock after one whose outcome was
// unknown) are counted by outcome; a stuck hold is named among the problems
// without failing the run by itself.
func TestReadRecordsCountsUnlockRetries(t *testing.T) {
	out := filepath.Join(t.TempDir(), "worker-3-0.jsonl")
	require.NoError(t, os.WriteFile(out, []byte(`{"k":"H","t":1,"g":0,"n":2,"s1":5,"state":"gone"}
{"k":"H","t":2,"g":1,"n":2,"s1":7,"state":"released"}
{"k":"H","t":3,"g":1,"n":3,"s1":9,"state":"released"}
{"k":"H","t":4,"g":2,"n":4,"s1":11,"state":"stuck"}
`), 0o600))
	var v Verdict
	_, err := readRecords([]procResult{{proc: proc{3, 0}, Out: out, Lang: "java-4.7.0"}}, &v)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"gone": 1, "released": 2, "stuck": 1}, v.RedissonUnlockRetries)
	require.Zero(t, v.WorkerErrors)
	require.Len(t, v.Problems, 1)
	require.Contains(t, v.Problems[0], "still holds name 4")
}

// A Java unlock that found the lock not held is excused when the worker
// saw the hold's fixed lease could have run out by the unlock's return
// (lost); without that, and away from any fault, it is an unlock error
// whose problem line gives the section's times.
func TestReadRecordsJavaUnheldAfterLease(t *testing.T) {
	const imse = "java.lang.IllegalMonitorStateException: attempt to unlock lock, not locked by current thread"
	out := filepath.Join(t.TempDir(), "worker-3-0.jsonl")
	require.NoError(t, os.WriteFile(out, []byte(`{"k":"B","g":0,"n":2,"s1":5,"t0":1000000000,"tb":1100000000,"lease":2000,"st":"locklease"}
{"k":"E","g":0,"n":2,"s1":5,"s2":6,"te":1200000000}
{"k":"U","t":3300000000,"g":0,"n":2,"s1":5,"lost":true,"err":"`+imse+`"}
{"k":"B","g":1,"n":3,"s1":7,"t0":4000000000,"tb":4100000000,"lease":2000,"wd":true,"st":"lock"}
{"k":"E","g":1,"n":3,"s1":7,"s2":8,"te":4200000000}
{"k":"U","t":4300000000,"g":1,"n":3,"s1":7,"err":"`+imse+`"}
`), 0o600))
	var v Verdict
	_, err := readRecords([]procResult{{proc: proc{3, 0}, Out: out, Lang: "java-4.7.0"}}, &v)
	require.NoError(t, err)
	require.Equal(t, 1, v.RedissonUnheldExpired)
	require.Equal(t, 1, v.UnlockErrors)
	require.Len(t, v.Problems, 1)
	require.Contains(t, v.Problems[0], "unlock of section 7 (lock, watchdog 2000ms: acquire began 200ms before the unlock, the section entered 100ms before it; the unlock took 100ms)")
}

// A Redisson lock() can return after the hold it took ran out (its
// script's reply came after the response timeout and a retry): the worker
// finds its own field gone at entry (B's gone), and the section held
// nothing once its lease, from the call's start, could have run out. A Go
// section inside then is not a violation, whichever entered first; one
// that entered earlier is (the hold may have been live), and so is the
// same overlap without gone. A gone mark on a Go section is a worker error.
func TestCheckJavaHoldGoneAtEntry(t *testing.T) {
	type run struct {
		name           string
		goB, goE       string // the Go section
		javaMark       string // ,"gone":true or nothing
		javaT0, javaTB string
		javaS1, javaS2 int
		goneOverlaps   int
		violations     int
		workerErrors   int
	}
	goLate := `{"k":"B","g":0,"n":0,"s1":1,"t0":16000000000,"tb":16749000000,"lease":2000,"wd":true,"st":"trylock-wait-wd"}`
	goLateE := `{"k":"E","g":0,"n":0,"s1":1,"s2":4,"te":16760000000}`
	goEarly := `{"k":"B","g":0,"n":0,"s1":1,"t0":13000000000,"tb":13500000000,"lease":2000,"wd":true,"st":"trylock-wait-wd"}`
	for _, r := range []run{
		{name: "gone, Go in once the lease could have run out", goB: goLate, goE: goLateE, javaMark: `"gone":true,`, javaT0: "12674000000", javaTB: "16749300000", javaS1: 2, javaS2: 3, goneOverlaps: 1},
		{name: "not gone", goB: goLate, goE: goLateE, javaT0: "12674000000", javaTB: "16749300000", javaS1: 2, javaS2: 3, violations: 1},
		{name: "gone, Go in before the lease could have run out", goB: goEarly, goE: goLateE, javaMark: `"gone":true,`, javaT0: "12674000000", javaTB: "13600000000", javaS1: 2, javaS2: 3, violations: 1},
		// The Java section enters first (and its E is lost: gone makes it
		// lost from the start); Go enters inside it.
		{name: "gone first, Go in once the lease could have run out", goB: goLate, goE: goLateE, javaMark: `"gone":true,`, javaT0: "12674000000", javaTB: "16700000000", javaS1: 0, javaS2: 2, goneOverlaps: 1},
		{name: "gone first, Go in before the lease could have run out", goB: goEarly, goE: goLateE, javaMark: `"gone":true,`, javaT0: "12674000000", javaTB: "13400000000", javaS1: 0, javaS2: 2, violations: 1},
	} {
		t.Run(r.name, func(t *testing.T) {
			dir := t.TempDir()
			goOut, javaOut := filepath.Join(dir, "worker-0-0.jsonl"), filepath.Join(dir, "worker-1-0.jsonl")
			require.NoError(t, os.WriteFile(goOut, []byte(r.goB+"\n"+r.goE+"\n"), 0o600))
			s1, s2 := r.javaS1, r.javaS2
			if s1 == 0 { // the Java section first: renumber so that it holds 1 and 3, Go 2 and 4
				s1, s2 = 1, 3
				gb := strings.Replace(r.goB, `"s1":1`, `"s1":2`, 1)
				ge := strings.Replace(r.goE, `"s1":1`, `"s1":2`, 1)
				require.NoError(t, os.WriteFile(goOut, []byte(gb+"\n"+ge+"\n"), 0o600))
			}
			require.NoError(t, os.WriteFile(javaOut, []byte(fmt.Sprintf(`{"k":"B","g":3,"n":0,"s1":%d,"t0":%s,"tb":%s,"lease":2000,%s"st":"locklease"}
{"k":"E","g":3,"n":0,"s1":%d,"s2":%d,"te":16750000000,"lost":true}
`, s1, r.javaT0, r.javaTB, r.javaMark, s1, s2)), 0o600))
			var v Verdict
			procs := []procResult{{proc: proc{0, 0}, Out: goOut}, {proc: proc{1, 0}, Out: javaOut, Lang: "java-4.7.0"}}
			sections, err := readRecords(procs, &v)
			require.NoError(t, err)
			check(sections, []int64{4}, 0, 4, []int{0}, &v)
			require.Equal(t, r.goneOverlaps, v.RedissonGoneOverlaps, "%v", v.Problems)
			require.Equal(t, r.violations, v.Violations, "%v", v.Problems)
			require.Zero(t, v.LostOverlaps, "a gone section's lost end excuses nothing by itself")
			if r.javaMark != "" {
				require.Equal(t, 1, v.RedissonGoneAtEntry)
			}
			require.Equal(t, r.violations == 0, v.OK(), "%v", v.Problems)
		})
	}
	t.Run("a gone mark on a Go section", func(t *testing.T) {
		goOut := filepath.Join(t.TempDir(), "worker-0-0.jsonl")
		require.NoError(t, os.WriteFile(goOut, []byte(`{"k":"B","g":0,"n":0,"s1":1,"t0":1,"tb":2,"lease":2000,"gone":true,"st":"locklease"}
{"k":"E","g":0,"n":0,"s1":1,"s2":2,"te":3}
`), 0o600))
		var v Verdict
		sections, err := readRecords([]procResult{{proc: proc{0, 0}, Out: goOut}}, &v)
		require.NoError(t, err)
		require.Equal(t, 1, v.WorkerErrors)
		require.Zero(t, v.RedissonGoneAtEntry)
		require.False(t, sections[0].gone)
	})
}
