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
