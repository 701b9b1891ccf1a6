//go:build unix

package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
)

// TestUnlockForceWhenInspectFails: when the name cannot be read (here an
// ACL refuses the subscriber count), unlock --force leaves it alone: a
// blind DEL would wipe a semaphore (it did).
func TestUnlockForceWhenInspectFails(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	ctx := context.Background()
	_, err := srv.Do(ctx, "ACL", "SETUSER", "u", "on", ">p", "~*", "&*", "+@all", "-pubsub|numsub")
	require.NoError(t, err)
	_, err = srv.Do(ctx, "SET", "sem", "5")
	require.NoError(t, err)
	code, out, stderr := runRlock(t, nil, "--redis", "redis://u:p@"+srv.Addr, "unlock", "--force", "sem")
	assert.Equal(t, exitSoftware, code, "stdout: %s", out)
	assert.Contains(t, stderr, "sem: not force-unlocked: cannot tell what it is: ")
	assert.Equal(t, "1", do(t, srv, "EXISTS", "sem"), "the semaphore is left alone")
}

// TestClusterNames: on a Redis Cluster, a name whose keys would straddle
// slots is refused with a usage error (rueidis panicked on the cross-slot
// script), by watch too, and a hash-tagged name is read.
func TestClusterNames(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := redistest.StartCluster(ctx, redistest.ClusterConfig{Masters: 3})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	env := []string{"REDIS_URL=redis://" + cl.Addrs()[0]}
	code, out, stderr := runRlock(t, env, "status", "a{b", "{user42}:cart")
	assert.Equal(t, exitUsage, code, "stderr: %s", stderr)
	assert.Contains(t, out, "a{b: error: rlock: invalid lock name: \"a{b\": its keys would fall in different cluster slots")
	assert.Contains(t, out, "{user42}:cart: free, waiting clients 0\n")
	code, _, stderr = runRlock(t, env, "unlock", "--force", "a{b")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "a{b: not force-unlocked: cannot tell what it is: ")
	// watch would poll such a name for ever: it refuses it at the start.
	code, _, stderr = runRlock(t, env, "watch", "--poll", "{user42}:cart", "a{b")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "\"a{b\": its keys would fall in different cluster slots")
}
