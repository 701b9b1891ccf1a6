package faults_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// lockerACL is the least-privilege ACL rule set for a lock user (standalone,
// sentinel or master/replica; classic pub/sub), to be used with rueidis'
// DisableCache (or with +client|tracking added). Every entry is needed:
//
//   - +evalsha +eval: the scripts (EVALSHA, EVAL when the server answers
//     NOSCRIPT);
//   - +exists +hexists +hincrby +pexpire +pttl +get +set +del +publish: the
//     commands the scripts call (Redis checks them against the caller's
//     ACL; GET and SET serve the force unlock's latch and the fence key
//     that settles a lost reply); EXISTS, HEXISTS and PTTL also
//     serve IsLocked, IsHeld/HoldContext and RemainTTL;
//   - +hget (HoldCount), +hgetall +pubsub|numsub (Inspect);
//   - +subscribe: waiting for unlock messages (a subscription ends by
//     closing its connection, never by UNSUBSCRIBE);
//   - +ping: rueidis' health check of idle connections, and the pub/sub
//     hub's check that its rueidis client is still open;
//   - ~*: lock names are arbitrary keys, next to the derived
//     goredisson_fence:{…}:… keys;
//   - resetchannels &redisson_lock__channel:*: only the lock channels.
const lockerACL = "resetchannels &redisson_lock__channel:* ~* -@all " +
	"+evalsha +eval +exists +hexists +hincrby +pexpire +pttl +get +set +del +publish " +
	"+hget +hgetall +pubsub|numsub +subscribe +ping"

// The two passwords are distinctive so that any error or log line that
// carries one is caught.
const (
	adminPassword  = "adm1n-Pw-7d3e91"
	lockerPassword = "l0cker-Pw-c45b0a"
)

// aclServer starts a server whose "default" user is the harness' admin and
// whose "locker" user has exactly lockerACL.
func aclServer(t *testing.T) *redistest.Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.acl")
	acl := "user default on >" + adminPassword + " ~* &* +@all\n" +
		"user locker on >" + lockerPassword + " " + lockerACL + "\n"
	require.NoError(t, os.WriteFile(path, []byte(acl), 0o600))
	srv, err := redistest.StartServer(context.Background(), redistest.Config{
		Name: "acl", ACLFile: path, Username: "default", Password: adminPassword,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	return srv
}

func lockerOption(srv *redistest.Server) rueidis.ClientOption {
	o := srv.ClientOption()
	o.Username, o.Password = "locker", lockerPassword
	o.DisableCache = true
	return o
}

// aclLog returns the server's ACL LOG entries as "reason object" strings.
func aclLog(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	msg := do(t, srv, "ACL", "LOG")
	entries, err := msg.ToArray()
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		m, err := e.AsStrMap()
		require.NoError(t, err)
		out = append(out, m["reason"]+" "+m["object"]+" ("+m["username"]+")")
	}
	return out
}

// The whole lock API works for a user that has only lockerACL, the server
// denies none of its commands, and each entry of lockerACL is needed: with
// any one of them removed, the workload fails or the server logs a denied
// command.
func TestLeastPrivilegeACL(t *testing.T) {
	srv := aclServer(t)
	ctx := context.Background()
	clients := func(t *testing.T) (*rlock.Client, *rlock.Client) {
		a := newLocks(t, newRueidis(t, lockerOption(srv)), rlock.WithWatchdogTimeout(workloadWatchdog))
		b := newLocks(t, newRueidis(t, lockerOption(srv)), rlock.WithWatchdogTimeout(workloadWatchdog))
		return a, b
	}

	t.Run("works", func(t *testing.T) {
		do(t, srv, "ACL", "LOG", "RESET")
		do(t, srv, "SCRIPT", "FLUSH") // the first EVALSHA gets NOSCRIPT: EVAL is used too
		a, b := clients(t)
		require.NoError(t, workload(ctx, a, b, "acl-ok", true))
		require.NoError(t, workload(ctx, a, b, "{acl}:tagged", true))
		// An idle connection gets rueidis' health-check PING after a second.
		time.Sleep(1500 * time.Millisecond)
		assert.Empty(t, aclLog(t, srv), "the server denied commands of the lock user")
	})

	t.Run("client-side caching needs client|tracking", func(t *testing.T) {
		o := lockerOption(srv)
		o.DisableCache = false
		rc, err := rueidis.NewClient(o)
		if err == nil {
			rc.Close()
		}
		require.Error(t, err)
		assert.Contains(t, err.Error(), "TRACKING")
		do(t, srv, "ACL", "SETUSER", "locker", "+client|tracking")
		defer do(t, srv, "ACL", "SETUSER", "locker", "-client|tracking")
		rc, err = rueidis.NewClient(o)
		require.NoError(t, err)
		rc.Close()
	})

	// Each entry is needed: removing it breaks the workload or makes the
	// server deny a command the library sends.
	entries := strings.Fields(lockerACL)
	for _, e := range entries {
		if !strings.HasPrefix(e, "+") {
			continue
		}
		t.Run("without "+e, func(t *testing.T) {
			do(t, srv, "ACL", "LOG", "RESET")
			do(t, srv, "SCRIPT", "FLUSH")
			do(t, srv, "ACL", "SETUSER", "locker", "-"+e[1:])
			defer do(t, srv, "ACL", "SETUSER", "locker", e)
			a, b := clients(t)
			err := workload(ctx, a, b, "acl-without-"+e[1:], false)
			denied := aclLog(t, srv)
			// Some commands go out in the background: UNSUBSCRIBE after
			// the last waiter left, PING on a connection idle for a
			// second.
			for deadline := time.Now().Add(3 * time.Second); err == nil && len(denied) == 0 && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
				denied = aclLog(t, srv)
			}
			t.Logf("without %s: workload error: %v; denied: %v", e, err, denied)
			assert.True(t, err != nil || len(denied) > 0, "%s is not needed", e)
		})
	}

	t.Run("channel pattern", func(t *testing.T) {
		do(t, srv, "ACL", "LOG", "RESET")
		do(t, srv, "ACL", "SETUSER", "locker", "resetchannels", "&other:*")
		defer do(t, srv, "ACL", "SETUSER", "locker", "resetchannels", "&redisson_lock__channel:*")
		a, b := clients(t)
		err := workload(ctx, a, b, "acl-channel", false)
		// The waiter fails (or, caught earlier, Inspect sees no
		// subscriber), and the server logs the denied channel.
		require.Error(t, err)
		const want = "channel redisson_lock__channel:{acl-channel} (locker)"
		eventually(t, 3*time.Second, "the denied channel in ACL LOG", func() bool { return slices.Contains(aclLog(t, srv), want) })
		t.Logf("without the channel: workload error: %v; denied: %v", err, aclLog(t, srv))
	})
}

// No error or log line of the library or of rueidis shows a password: not
// a failed login (wrong password, disabled user), not a lost lock, not a
// denied command.
func TestPasswordNeverInErrors(t *testing.T) {
	srv := aclServer(t)
	ctx := context.Background()
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var errs []error
	check := func(what string, err error) {
		t.Helper()
		require.Error(t, err, what)
		errs = append(errs, err)
		t.Logf("%s: %v", what, err)
	}

	// Failed logins.
	o := lockerOption(srv)
	o.Password = "wr0ng-Pw-9e8f7a"
	_, err := rueidis.NewClient(o)
	check("wrong password", err)
	url, err := rueidis.ParseURL("redis://locker:wr0ng-Pw-9e8f7a@" + srv.Addr + "/0?client_cache=0")
	require.NoError(t, err)
	url.ForceSingleClient = true
	_, err = rueidis.NewClient(url)
	check("wrong password in a URL", err)
	do(t, srv, "ACL", "SETUSER", "locker", "off")
	_, err = rueidis.NewClient(lockerOption(srv))
	check("disabled user", err)
	do(t, srv, "ACL", "SETUSER", "locker", "on")

	// A watchdog hold whose renewal the server starts refusing is lost.
	var lost collector
	c := newLocks(t, newRueidis(t, lockerOption(srv)),
		rlock.WithWatchdogTimeout(workloadWatchdog), rlock.WithLogger(logger), rlock.WithLostHandler(lost.onLost))
	owner := rlock.WithOwner(ctx, 1)
	l := c.Lock("pw-lost")
	require.NoError(t, l.Lock(owner))
	hold, err := l.HoldContext(owner)
	require.NoError(t, err)
	do(t, srv, "ACL", "SETUSER", "locker", "-pexpire")
	select {
	case <-hold.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the hold was not lost")
	}
	require.ErrorIs(t, context.Cause(hold), rlock.ErrLockLost)
	check("lost lock", context.Cause(hold))
	lost.wait(t)
	require.Len(t, lost.events(), 1)
	check("lost event", lost.events()[0].Err)

	// Denied commands.
	check("denied acquire", c.Lock("pw-denied").Lock(owner))
	do(t, srv, "ACL", "SETUSER", "locker", "+pexpire", "-evalsha")
	check("denied unlock", l.Unlock(owner))
	do(t, srv, "ACL", "SETUSER", "locker", "+evalsha", "-hget")
	_, err = l.HoldCount(owner)
	check("denied query", err)
	do(t, srv, "ACL", "SETUSER", "locker", "+hget", "-subscribe")
	require.NoError(t, c.Lock("pw-held").LockLease(rlock.WithOwner(ctx, 2), time.Minute))
	ok, err := c.Lock("pw-held").TryLock(owner, time.Second, 0)
	assert.False(t, ok)
	check("denied subscribe", err)
	do(t, srv, "ACL", "SETUSER", "locker", "+subscribe")

	// The server going away.
	require.NoError(t, srv.Kill())
	check("server gone", c.Lock("pw-gone").Lock(owner))

	for _, err := range append(errs, errors.New(logs.String())) {
		for _, pw := range []string{adminPassword, lockerPassword, "wr0ng-Pw-9e8f7a"} {
			assert.NotContains(t, err.Error(), pw)
		}
	}
	assert.NotEmpty(t, logs.String(), "the logger got nothing")
}
