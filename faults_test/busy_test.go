package faults_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// busyScript keeps Redis busy for ARGV[1] milliseconds of its own clock.
const busyScript = `local t = redis.call('TIME'); local stop = t[1] * 1000 + t[2] / 1000 + tonumber(ARGV[1])
while true do t = redis.call('TIME'); if t[1] * 1000 + t[2] / 1000 >= stop then break end end
return 1`

// busyFor runs busyScript for d on its own connection and returns when it
// has started (Redis answers BUSY) and a channel closed when it ended.
func busyFor(t *testing.T, srv *redistest.Server, d time.Duration) <-chan struct{} {
	t.Helper()
	rc, err := srv.Client()
	require.NoError(t, err)
	probe, err := srv.Client()
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer rc.Close()
		err := rc.Do(context.Background(), rc.B().Eval().Script(busyScript).Numkeys(0).Arg(strconv.FormatInt(d.Milliseconds(), 10)).Build()).Error()
		assert.NoError(t, err)
	}()
	eventually(t, 5*time.Second, "Redis to answer BUSY", func() bool {
		err := probe.Do(context.Background(), probe.B().Ping().Build()).Error()
		return err != nil && len(err.Error()) >= 4 && err.Error()[:4] == "BUSY"
	})
	probe.Close()
	return done
}

// Defect 2: the last waiter of a channel leaving while Redis answers BUSY
// crashed the process (rueidis panics when an UNSUBSCRIBE gets -BUSY). The
// hub now ends a subscription by closing its connection. A waiter and an
// unlock during a real busy script are also retried, not failed (defect 8,
// BUSY with a real script rather than an injected reply).
func TestDefect2BusyScriptWhileWaitersLeave(t *testing.T) {
	srv := redistest.StandaloneWith(t, redistest.Config{Name: "busy", Args: []string{"--busy-reply-threshold", "100"}})
	ctx := context.Background()
	holder, waiter := direct(t, srv), direct(t, srv)
	require.NoError(t, holder.Lock("busy").LockLease(rlock.WithOwner(ctx, 1), time.Minute))

	// A waiter that gives up during the busy script: its Release is the
	// channel's last.
	wctx, cancel := context.WithCancel(rlock.WithOwner(ctx, 2))
	got := lockAsync(wctx, waiter.Lock("busy"))
	waitSubscribers(t, srv, "redisson_lock__channel:{busy}", 1)
	done := busyFor(t, srv, 1500*time.Millisecond)
	cancel()
	r := waitResult(t, got, 10*time.Second, "the cancelled waiter")
	assert.ErrorIs(t, r.err, context.Canceled)

	// A second waiter subscribes during the busy script, and the holder
	// unlocks during it: the unlock is retried until Redis answers, and
	// the waiter gets the lock.
	wctx2, cancel2 := context.WithTimeout(rlock.WithOwner(ctx, 3), 20*time.Second)
	defer cancel2()
	got2 := lockAsync(wctx2, waiter.Lock("busy"))
	require.NoError(t, holder.Lock("busy").Unlock(rlock.WithOwner(ctx, 1)), "an unlock during BUSY is retried")
	<-done
	r = waitResult(t, got2, 20*time.Second, "the waiter")
	require.NoError(t, r.err)
	require.NoError(t, waiter.Lock("busy").Unlock(rlock.WithOwner(ctx, 3)))
	waitSubscribers(t, srv, "redisson_lock__channel:{busy}", 0)
	assert.Equal(t, rlock.Stats{}, waiter.Stats())
}
