package faults_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// isScript matches a call of s, as EVALSHA or EVAL.
func isScript(s *scripts.Script) func([]string) bool {
	return func(args []string) bool {
		if len(args) < 2 {
			return false
		}
		switch strings.ToUpper(args[0]) {
		case "EVALSHA":
			return args[1] == s.SHA1()
		case "EVAL":
			return args[1] == s.Text()
		}
		return false
	}
}

// faultyName is the client name of the matrix' faulty client's
// connections, by which the Kill fault finds them.
const faultyName = "matrix-faulty"

// killNamed kills every connection of srv named name.
func killNamed(t *testing.T, srv *redistest.Server, name string) {
	for _, ci := range clientList(t, srv) {
		if ci["name"] == name {
			_, _ = srv.Do(context.Background(), "CLIENT", "KILL", "ID", ci["id"])
		}
	}
}

// matrixFaults are the faults of the matrix, with the Redis errors that
// refuse a call before it runs; srv is where Kill kills the faulty
// client's connections.
func matrixFaults(t *testing.T, f *redistest.Faulty, srv *redistest.Server) []redistest.Rule {
	ctx := context.Background()
	var rules []redistest.Rule
	rules = append(rules,
		redistest.Rule{Fault: redistest.Drop},
		redistest.Rule{Fault: redistest.LoseReply},
		redistest.Rule{Fault: redistest.Late, Delay: 300 * time.Millisecond},
		redistest.Rule{Fault: redistest.Kill, Kill: func() { killNamed(t, srv, faultyName) }},
	)
	for _, msg := range []string{
		"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
		"TRYAGAIN Multiple keys request during rehashing of slot",
		"LOADING Redis is loading the dataset in memory",
		"CLUSTERDOWN The cluster is down",
		"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
	} {
		err := redistest.RedisError(ctx, f.Client, msg)
		require.Error(t, err)
		rules = append(rules, redistest.Rule{Fault: redistest.Refuse, Err: err, Times: 2})
	}
	return rules
}

func ruleName(r redistest.Rule) string {
	if r.Fault == redistest.Refuse {
		return strings.Fields(r.Err.Error())[0]
	}
	return strings.ReplaceAll(r.Fault.String(), " ", "_")
}

// matrixEnv is one case of the matrix: a client whose calls go through a
// Faulty rueidis client, a clean client of another process, and the
// server.
type matrixEnv struct {
	srv    *redistest.Server
	faulty *redistest.Faulty
	c      *rlock.Client // through faulty
	other  *rlock.Client // another service, no faults
}

func newMatrixEnv(t *testing.T, srv *redistest.Server, opts ...rlock.Option) *matrixEnv {
	rc, err := srv.Client(func(o *rueidis.ClientOption) { o.ClientName = faultyName })
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	f := redistest.NewFaulty(rc)
	opts = append([]rlock.Option{rlock.WithCommandTimeout(500 * time.Millisecond)}, opts...)
	return &matrixEnv{srv: srv, faulty: f, c: newLocks(t, f, opts...), other: direct(t, srv)}
}

// count is the owner's count in Redis.
func (e *matrixEnv) count(t *testing.T, name string, owner int64) int64 {
	msg, err := e.srv.Do(context.Background(), "HGET", name, field(e.c, owner))
	if err != nil {
		return 0
	}
	n, _ := msg.AsInt64()
	return n
}

// settled waits for late calls and checks what every case must leave: no
// rule hit pending, no late call that ran twice, the key gone once the
// owner unlocked, no record in the hold table.
func (e *matrixEnv) settled(t *testing.T, name string) {
	t.Helper()
	e.faulty.WaitLate()
	assert.Zero(t, e.faulty.Pending(), "the fault was never hit")
	assert.Equal(t, int64(0), doInt(t, e.srv, "EXISTS", name), "a hold was left behind")
	eventually(t, 5*time.Second, "no record left in the hold table", func() bool { return e.c.Stats().Holds == 0 })
	assert.Zero(t, e.c.Stats().Renewing)
	// Another service can take and release the lock.
	ok, err := e.other.Lock(name).TryLock(context.Background(), 0, 0)
	require.NoError(t, err)
	require.True(t, ok, "another owner is kept out")
	require.NoError(t, e.other.Lock(name).Unlock(context.Background()))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var _ = errors.Is
