package main

import (
	"os"
	"path/filepath"
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
// nothing, so a Go section inside at the time is not a violation; the
// same overlap without gone is one.
func TestCheckJavaHoldGoneAtEntry(t *testing.T) {
	dir := t.TempDir()
	goOut, javaOut := filepath.Join(dir, "worker-0-0.jsonl"), filepath.Join(dir, "worker-1-0.jsonl")
	require.NoError(t, os.WriteFile(goOut, []byte(`{"k":"B","g":0,"n":0,"s1":1,"t0":16000000000,"tb":16749000000,"lease":2000,"wd":true,"st":"trylock-wait-wd"}
{"k":"E","g":0,"n":0,"s1":1,"s2":4,"te":16760000000}
`), 0o600))
	for _, gone := range []bool{true, false} {
		mark := ""
		if gone {
			mark = `"gone":true,`
		}
		require.NoError(t, os.WriteFile(javaOut, []byte(`{"k":"B","g":3,"n":0,"s1":2,"t0":12674000000,"tb":16749300000,"lease":2000,`+mark+`"st":"locklease"}
{"k":"E","g":3,"n":0,"s1":2,"s2":3,"te":16750000000,"lost":true}
`), 0o600))
		var v Verdict
		procs := []procResult{{proc: proc{0, 0}, Out: goOut}, {proc: proc{1, 0}, Out: javaOut, Lang: "java-4.7.0"}}
		sections, err := readRecords(procs, &v)
		require.NoError(t, err)
		check(sections, []int64{4}, 0, 4, []int{0}, &v)
		if gone {
			require.Equal(t, 1, v.RedissonGoneAtEntry)
			require.Equal(t, 1, v.RedissonGoneOverlaps)
			require.Zero(t, v.Violations)
			require.True(t, v.OK(), "%v", v.Problems)
			require.Len(t, v.Problems, 1)
			require.Contains(t, v.Problems[0], "hold was gone at its entry")
		} else {
			require.Zero(t, v.RedissonGoneAtEntry)
			require.Equal(t, 1, v.Violations, "without gone the overlap is a violation")
			require.False(t, v.OK())
		}
	}
}
