package faults_test

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strconv"
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

// isUnlockScript matches the unlock script call: EVALSHA/EVAL with the
// lock channel and a fence key among its keys.
func isUnlockScript(args []string) bool {
	if len(args) == 0 || (!strings.EqualFold(args[0], "EVALSHA") && !strings.EqualFold(args[0], "EVAL")) {
		return false
	}
	return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "goredisson_fence:") }) &&
		slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "redisson_lock__channel:") })
}

var evalshaCalls = regexp.MustCompile(`cmdstat_evalsha:calls=(\d+)`)

func evalshaCount(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	msg := do(t, srv, "INFO", "commandstats")
	s, err := msg.ToString()
	require.NoError(t, err)
	m := evalshaCalls.FindStringSubmatch(s)
	require.NotNil(t, m, "no evalsha in INFO commandstats")
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// The connection dies after Redis ran the unlock script but before its
// reply reached the client. Unlock does not send it again: the fence script
// settles it (it ran: the count went down by one), so a count of 2 becomes
// 1, not 0, and a full release publishes exactly one unlock message.
func TestUnlockRetriedAfterLostReply(t *testing.T) {
	srv := standaloneLocal(t)
	ctx := context.Background()
	proxy := redistest.NewProxy(t, srv.Addr)
	opt := srv.ClientOption()
	opt.InitAddress = []string{proxy.Addr}
	rc := newRueidis(t, opt)
	c := newLocks(t, rc)
	owner := rlock.WithOwner(ctx, 1)

	// Load the unlock script into the server's cache, so that the unlock
	// under test runs with its first EVALSHA (no NOSCRIPT round).
	warm := c.Lock("warm-up")
	require.NoError(t, warm.LockLease(owner, time.Minute))
	require.NoError(t, warm.Unlock(owner))

	// A raw subscriber counts unlock messages.
	const name = "retried"
	sub, err := srv.Client()
	require.NoError(t, err)
	defer sub.Close()
	msgs := make(chan rueidis.PubSubMessage, 8)
	subscribed := make(chan struct{})
	rctx, stop := context.WithCancel(rueidis.WithOnSubscriptionHook(ctx, func(rueidis.PubSubSubscription) { close(subscribed) }))
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		_ = sub.Receive(rctx, sub.B().Subscribe().Channel("redisson_lock__channel:{"+name+"}").Build(), func(m rueidis.PubSubMessage) { msgs <- m })
	}()
	defer func() { stop(); <-recvDone }()
	<-subscribed

	l := c.Lock(name)
	require.NoError(t, l.LockLease(owner, time.Minute))
	require.NoError(t, l.LockLease(owner, time.Minute))
	hold, err := l.HoldContext(owner)
	require.NoError(t, err)

	cutUnlock := func(wantReply string) {
		t.Helper()
		calls := evalshaCount(t, srv)
		fired := proxy.DropReply(isUnlockScript)
		start := time.Now()
		require.NoError(t, l.Unlock(owner), "a retried unlock must return the first attempt's result")
		took := time.Since(start)
		var ev redistest.DropEvent
		select {
		case ev = <-fired:
		default:
			t.Fatal("the unlock's reply was not dropped")
		}
		require.NoError(t, ev.Err)
		assert.True(t, bytes.HasSuffix(ev.Discarded, []byte(wantReply)),
			"the server's dropped reply %q does not end with %q", ev.Discarded, wantReply)
		assert.GreaterOrEqual(t, evalshaCount(t, srv)-calls, 2, "the outcome was not settled with the fence script")
		t.Logf("unlock with a lost reply (server replied %q) returned nil after %v", bytes.TrimSpace(ev.Discarded), took)
	}

	// Partial release: the first run took 2 to 1 and replied 1.
	cutUnlock(":1\r\n")
	n, err := l.HoldCount(owner)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the retried unlock released twice")
	require.NoError(t, hold.Err(), "the hold ended after a partial unlock")

	// Full release: the first run deleted the lock, published and replied
	// 0; settling it publishes nothing.
	cutUnlock(":0\r\n")
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
	<-hold.Done()
	assert.ErrorIs(t, context.Cause(hold), rlock.ErrUnlocked)
	select {
	case m := <-msgs:
		assert.Equal(t, "0", m.Message)
	case <-time.After(5 * time.Second):
		t.Fatal("no unlock message")
	}
	// A second message would come within a round trip; give it plenty.
	select {
	case m := <-msgs:
		t.Fatalf("the retry published again: %+v", m)
	case <-time.After(200 * time.Millisecond):
	}
	assert.ErrorIs(t, l.Unlock(owner), rlock.ErrNotHeld)
}

// An Unlock that releases the lock must end the hold as unlocked, not as
// lost: its HoldContext's cause is ErrUnlocked and the lost handler is not
// called (LostEvent is "a hold that ended without its owner's Unlock").
//
// Here the unlock's run releases the lock in Redis but its reply is lost
// (the connection is cut), so the Unlock reconnects and settles it with the
// fence script before it learns the outcome. Meanwhile
// the watchdog (period 50ms) still renews the hold, finds the field gone
// and must not report the hold lost, since its owner released it.
// The same race happens without any fault when a renewal round reaches
// Redis just after an ordinary unlock and its result is processed before
// Unlock reaches watchdog.Remove (the stress checker sees it a few times
// per 10,000 acquisitions).
func TestUnlockRetryIsNotReportedLost(t *testing.T) {
	srv := standaloneLocal(t)
	ctx := context.Background()
	proxy := redistest.NewProxy(t, srv.Addr)
	opt := srv.ClientOption()
	opt.InitAddress = []string{proxy.Addr}
	var lost collector
	c := newLocks(t, newRueidis(t, opt), rlock.WithWatchdogTimeout(150*time.Millisecond), rlock.WithLostHandler(lost.onLost))
	owner := rlock.WithOwner(ctx, 1)

	warm := c.Lock("warm-up")
	require.NoError(t, warm.LockLease(owner, time.Minute))
	require.NoError(t, warm.Unlock(owner))

	do(t, srv, "SCRIPT", "LOAD", scripts.Fence.Text()) // so that the fence's first EVALSHA runs

	l := c.Lock("unlock-vs-watchdog")
	require.NoError(t, l.Lock(owner))
	hold, err := l.HoldContext(owner)
	require.NoError(t, err)

	const drops = 1
	dropped := make(chan []byte, drops)
	armed := proxy.DropReply(isUnlockScript) // before the Unlock, not in the goroutine: it could arm after
	go func() {
		ev := <-armed
		dropped <- ev.Discarded
	}()
	require.NoError(t, l.Unlock(owner))
	for i := range drops {
		select {
		case reply := <-dropped:
			require.True(t, bytes.HasSuffix(reply, []byte(":0\r\n")), "drop %d: %q", i, reply)
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d unlock replies were dropped", i)
		}
	}
	<-hold.Done()
	assert.ErrorIs(t, context.Cause(hold), rlock.ErrUnlocked, "the owner's Unlock released the hold")
	assert.Empty(t, lost.events(), "a hold its owner unlocked was reported lost")
}
