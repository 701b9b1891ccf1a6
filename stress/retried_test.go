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
