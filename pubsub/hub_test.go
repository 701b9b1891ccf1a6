package pubsub_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/pubsub"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

type env struct {
	srv *redistest.Server
	rc  rueidis.Client
	hub *pubsub.Hub
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := redistest.Standalone(t)
	rc, err := srv.Client()
	require.NoError(t, err)
	hub := pubsub.New(rc, false, nil)
	t.Cleanup(func() { hub.Close(); rc.Close() })
	return &env{srv: srv, rc: rc, hub: hub}
}

func (e *env) publish(t *testing.T, channel, msg string) {
	t.Helper()
	_, err := e.srv.Do(context.Background(), "PUBLISH", channel, msg)
	require.NoError(t, err)
}

func (e *env) numsub(t *testing.T, channel string) int64 {
	t.Helper()
	v, err := e.srv.Do(context.Background(), "PUBSUB", "NUMSUB", channel)
	require.NoError(t, err)
	arr, err := v.ToArray()
	require.NoError(t, err)
	n, err := arr[1].AsInt64()
	require.NoError(t, err)
	return n
}

// waiters starts n goroutines waiting on their own share of channel and
// returns a channel that receives one value per woken waiter.
func waiters(t *testing.T, e *env, channel string, n int) (<-chan struct{}, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	woken := make(chan struct{}, n)
	done := make(chan struct{}, n)
	for range n {
		s, err := e.hub.Subscribe(ctx, channel)
		require.NoError(t, err)
		go func() {
			defer func() { s.Release(); done <- struct{}{} }()
			for {
				ok, err := s.Wait(ctx, -1)
				if err != nil {
					return
				}
				if ok {
					select { // extra wakes (after a resubscribe) are allowed
					case woken <- struct{}{}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	return woken, func() {
		cancel()
		for range n {
			<-done
		}
	}
}

func TestOneSubscriptionWakeOneAndAll(t *testing.T) {
	e := newEnv(t)
	woken, stop := waiters(t, e, "ch", 5)
	assert.Equal(t, int64(1), e.numsub(t, "ch"), "five waiters share one subscription")
	ch, _, subs := e.hub.Stats()
	assert.Equal(t, 1, ch)
	assert.Equal(t, 5, subs)

	e.publish(t, "ch", "0")
	<-woken
	select {
	case <-woken:
		t.Fatal(`"0" woke more than one waiter`)
	case <-time.After(100 * time.Millisecond):
	}
	e.publish(t, "ch", "7") // ignored
	e.publish(t, "ch", "1")
	for range 5 {
		<-woken // "1" wakes everyone waiting (the first waiter is waiting again)
	}
	stop()
	require.Eventually(t, func() bool { return e.numsub(t, "ch") == 0 }, 5*time.Second, 5*time.Millisecond,
		"the last Release must unsubscribe")
	// The entry goes once its receive loop has returned, just after the
	// server confirmed the UNSUBSCRIBE.
	require.Eventually(t, func() bool { ch, _, _ := e.hub.Stats(); return ch == 0 }, 5*time.Second, time.Millisecond)
}

func TestPermitKeptForNextWaiter(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s, err := e.hub.Subscribe(ctx, "permit")
	require.NoError(t, err)
	defer s.Release()
	e.publish(t, "permit", "0")
	ok, err := s.Wait(ctx, 10*time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "a wake that came while nobody waited is kept")
	ok, err = s.Wait(ctx, 20*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, ok, "only one permit")
}

func TestWaitContextAndClose(t *testing.T) {
	e := newEnv(t)
	s, err := e.hub.Subscribe(context.Background(), "ctx")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = s.Wait(ctx, -1)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	res := make(chan error, 1)
	go func() { _, err := s.Wait(context.Background(), -1); res <- err }()
	require.Eventually(t, func() bool { return e.numsub(t, "ctx") == 1 }, time.Second, time.Millisecond)
	e.hub.Close()
	assert.ErrorIs(t, <-res, pubsub.ErrClosed)
	s.Release()
	_, err = e.hub.Subscribe(context.Background(), "ctx")
	assert.ErrorIs(t, err, pubsub.ErrClosed)
}

// After the pub/sub connection is killed, the hub subscribes again and wakes
// every waiter (messages may have been lost); later messages arrive again.
func TestResubscribeAfterConnectionKilled(t *testing.T) {
	e := newEnv(t)
	woken, stop := waiters(t, e, "re", 3)
	defer stop()
	_, err := e.srv.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	for range 3 {
		<-woken
	}
	require.Eventually(t, func() bool { return e.numsub(t, "re") == 1 }, 10*time.Second, 5*time.Millisecond)
	e.publish(t, "re", "0")
	<-woken
}

func TestClientClosedUnderneath(t *testing.T) {
	srv := redistest.Standalone(t)
	rc, err := srv.Client()
	require.NoError(t, err)
	hub := pubsub.New(rc, false, nil)
	defer hub.Close()
	s, err := hub.Subscribe(context.Background(), "x")
	require.NoError(t, err)
	res := make(chan error, 1)
	go func() { _, err := s.Wait(context.Background(), -1); res <- err }()
	rc.Close()
	assert.ErrorIs(t, <-res, pubsub.ErrClosed, "a waiter must not hang when the rueidis client is closed")
	s.Release()
	_, err = hub.Subscribe(context.Background(), "y")
	assert.ErrorIs(t, err, rueidis.ErrClosing)
}

// Channels share dedicated connections: 200 waited-on channels ride on
// ceil(200/ChannelsPerConn) connections, each channel wakes its own
// waiter, a released channel's messages reach nobody, and the connections
// close when their last channel is released.
func TestChannelsShareConnections(t *testing.T) {
	e := newEnv(t)
	e.hub.SetLinger(0) // released channels go at once (TestLinger: after a while)
	ctx := context.Background()
	const n = 200
	subs := make([]*pubsub.Sub, n)
	for i := range subs {
		s, err := e.hub.Subscribe(ctx, "share-"+strconv.Itoa(i))
		require.NoError(t, err)
		subs[i] = s
	}
	want := (n + pubsub.ChannelsPerConn - 1) / pubsub.ChannelsPerConn
	assert.Equal(t, want, e.hub.Conns())
	subConns := 0
	for _, ci := range clientList(t, e) {
		if ci["sub"] != "0" {
			subConns++
		}
	}
	assert.Equal(t, want, subConns, "pub/sub connections on the server")
	for _, i := range []int{0, 63, 64, 199} {
		e.publish(t, "share-"+strconv.Itoa(i), "0")
		ok, err := subs[i].Wait(ctx, 5*time.Second)
		require.NoError(t, err)
		require.True(t, ok, "channel %d", i)
	}
	// Release the first connection's channels but one: it stays open;
	// a message to a released channel wakes nobody and keeps no permit.
	for i := 1; i < pubsub.ChannelsPerConn; i++ {
		subs[i].Release()
	}
	assert.Equal(t, want, e.hub.Conns())
	e.publish(t, "share-1", "0")
	s1, err := e.hub.Subscribe(ctx, "share-1")
	require.NoError(t, err)
	ok, err := s1.Wait(ctx, 50*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, ok, "a message of a released channel must not wake a later waiter")
	e.publish(t, "share-1", "0")
	ok, err = s1.Wait(ctx, 5*time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "a channel subscribed again is heard again")
	s1.Release()
	subs[0].Release()
	for i := pubsub.ChannelsPerConn; i < n; i++ {
		subs[i].Release()
	}
	require.Eventually(t, func() bool { return e.hub.Conns() == 0 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		for _, ci := range clientList(t, e) {
			if ci["sub"] != "0" {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "every pub/sub connection closed")
}

func clientList(t *testing.T, e *env) []map[string]string {
	t.Helper()
	v, err := e.srv.Do(context.Background(), "CLIENT", "LIST")
	require.NoError(t, err)
	s, err := v.ToString()
	require.NoError(t, err)
	var out []map[string]string
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		ci := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, val, ok := strings.Cut(kv, "="); ok {
				ci[k] = val
			}
		}
		out = append(out, ci)
	}
	return out
}

// TestWakeAllKeepsWakesForSharesNotWaiting: a "1" wakes the waiting share
// and keeps a wake for the share that was between its attempt and its
// Wait, which then returns at once instead of sleeping out the TTL.
func TestWakeAllKeepsWakesForSharesNotWaiting(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const ch = "redisson_rwlock:{kept}"
	a, err := e.hub.Subscribe(ctx, ch)
	require.NoError(t, err)
	defer a.Release()
	b, err := e.hub.Subscribe(ctx, ch)
	require.NoError(t, err)
	defer b.Release()
	e.publish(t, ch, "1") // neither waits
	for _, s := range []*pubsub.Sub{a, b} {
		woken, err := s.Wait(ctx, 5*time.Second)
		require.NoError(t, err)
		assert.True(t, woken, "the wake kept for a share not waiting")
	}
}

// TestPolicies: a semaphore's message wakes as many waiters as it carries
// permits; a latch's "0" wakes every share and its "1" none.
func TestPolicies(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	t.Run("permits", func(t *testing.T) {
		const ch = "redisson_sc:{pol}"
		woken, stop := waiters(t, e, ch, 3)
		defer stop()
		require.Eventually(t, func() bool { return e.numsub(t, ch) == 1 }, 5*time.Second, time.Millisecond)
		// Whether or not each is in Wait yet: a wake that finds nobody
		// waiting is kept for the next Wait.
		e.publish(t, ch, "0")
		e.publish(t, ch, "2")
		for range 2 {
			select {
			case <-woken:
			case <-time.After(5 * time.Second):
				t.Fatal("a message of 2 permits woke fewer than 2")
			}
		}
		select {
		case <-woken:
			t.Fatal("a message of 2 permits woke a third waiter")
		case <-time.After(300 * time.Millisecond):
		}
	})
	t.Run("latch", func(t *testing.T) {
		const ch = "redisson_countdownlatch__channel__{pol}"
		s, err := e.hub.Subscribe(ctx, ch)
		require.NoError(t, err)
		defer s.Release()
		m := s.LatchMark()
		e.publish(t, ch, "1")
		require.Eventually(t, func() bool { return s.LatchShut(m) }, 5*time.Second, time.Millisecond, "a '1' shuts")
		woken, err := s.Wait(ctx, 100*time.Millisecond)
		require.NoError(t, err)
		assert.False(t, woken, "a '1' wakes nobody")
		e.publish(t, ch, "0")
		woken, err = s.Wait(ctx, 5*time.Second)
		require.NoError(t, err)
		assert.True(t, woken, "a '0' wakes")
		assert.False(t, s.LatchShut(m), "a '0' opens")
	})
}

// TestParked: Parked counts the waiters inside Wait, not the shares that
// merely hold a subscription.
func TestParked(t *testing.T) {
	e := newEnv(t)
	s, err := e.hub.Subscribe(context.Background(), "parked")
	require.NoError(t, err)
	defer s.Release()
	assert.Equal(t, 0, e.hub.Parked(), "subscribed, not waiting")
	_, stop := waiters(t, e, "parked", 3)
	require.Eventually(t, func() bool { return e.hub.Parked() == 3 }, 5*time.Second, time.Millisecond)
	stop()
	assert.Equal(t, 0, e.hub.Parked())
}

func (e *env) subscribeCalls(t *testing.T) int64 {
	t.Helper()
	v, err := e.srv.Do(context.Background(), "INFO", "commandstats")
	require.NoError(t, err)
	info, err := v.ToString()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_subscribe:calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// A channel whose last share left stays subscribed for the linger time: a
// Subscribe then shares it without a SUBSCRIBE and hears its messages; a
// share taken in that time keeps it; it goes no sooner than the linger
// time after the last Release.
func TestLinger(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.hub.SetLinger(time.Hour)
	s, err := e.hub.Subscribe(ctx, "lg")
	require.NoError(t, err)
	s.Release()
	assert.EqualValues(t, 1, e.numsub(t, "lg"), "a released channel lingers")
	ch, lingering, subs := e.hub.Stats()
	assert.Equal(t, [3]int{1, 1, 0}, [3]int{ch, lingering, subs}, "Stats counts the lingering channel, with no share")
	calls := e.subscribeCalls(t)
	s, err = e.hub.Subscribe(ctx, "lg")
	require.NoError(t, err)
	assert.Equal(t, calls, e.subscribeCalls(t), "a lingering channel is shared without a SUBSCRIBE")
	e.publish(t, "lg", "0")
	ok, err := s.Wait(ctx, 5*time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "a lingering channel taken again is heard")
	s.Release()
	s.Release() // idempotent: the linger is not armed twice
	assert.EqualValues(t, 1, e.numsub(t, "lg"))

	// Time is what is tested here: the sleeps let the linger timer fire.
	const linger = 200 * time.Millisecond
	e.hub.SetLinger(linger)
	s, err = e.hub.Subscribe(ctx, "lg2")
	require.NoError(t, err)
	s.Release()
	s, err = e.hub.Subscribe(ctx, "lg2")
	require.NoError(t, err)
	time.Sleep(2 * linger) // the first linger's timer fires while the channel is taken
	ch, lingering, subs = e.hub.Stats()
	assert.Equal(t, [3]int{2, 1, 1}, [3]int{ch, lingering, subs}, "a taken channel does not go (and does not linger)")
	e.publish(t, "lg2", "0")
	ok, err = s.Wait(ctx, 5*time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
	released := time.Now()
	s.Release()
	// It ends (its subscription stays on the connection, which "lg"
	// keeps open, until that closes: see the package doc).
	require.Eventually(t, func() bool { ch, _, _ := e.hub.Stats(); return ch == 1 }, 10*time.Second, time.Millisecond,
		"a lingering channel goes after the linger time")
	assert.GreaterOrEqual(t, time.Since(released), linger, "it went before the linger time")
	assert.EqualValues(t, 1, e.numsub(t, "lg"), "the hour's linger is not cut short by a later SetLinger")

	// A lingering channel whose connection broke ends (nobody needs it
	// subscribed again); the next Subscribe subscribes anew and is heard.
	_, err = e.srv.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	require.Eventually(t, func() bool { ch, _, _ := e.hub.Stats(); return ch == 0 }, 10*time.Second, time.Millisecond)
	assert.Zero(t, e.hub.Conns())
	calls = e.subscribeCalls(t)
	s, err = e.hub.Subscribe(ctx, "lg")
	require.NoError(t, err)
	assert.Equal(t, calls+1, e.subscribeCalls(t), "subscribed anew")
	e.publish(t, "lg", "0")
	ok, err = s.Wait(ctx, 5*time.Second)
	require.NoError(t, err)
	assert.True(t, ok)

	// SetLinger(0): the last Release ends the channel at once, and its
	// connection, the last, closes.
	e.hub.SetLinger(0)
	s.Release()
	require.Eventually(t, func() bool { ch, _, _ := e.hub.Stats(); return ch == 0 && e.hub.Conns() == 0 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return e.numsub(t, "lg") == 0 }, 10*time.Second, time.Millisecond)
}

// A count-down latch's channel does not linger: a share taken after the
// last one left must not inherit the earlier round's "1" (LatchShut(0)
// would then call a latch read at zero deleted, and Await would hang on
// a latch whose key went without a "0"). Found by review.
func TestLatchChannelDoesNotLinger(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.hub.SetLinger(time.Hour)
	const ch = "redisson_countdownlatch__channel__{L}"
	s, err := e.hub.Subscribe(ctx, ch)
	require.NoError(t, err)
	e.publish(t, ch, "1") // a TrySetCount
	require.Eventually(t, func() bool { return s.LatchMark() == 1 }, 5*time.Second, time.Millisecond)
	s.Release()
	s, err = e.hub.Subscribe(ctx, ch)
	require.NoError(t, err)
	defer s.Release()
	assert.False(t, s.LatchShut(0), "a new share saw no '1'")
}

// Join shares a confirmed subscription with no round trip, and only that:
// a channel never subscribed, one still subscribing, one ending, or a
// count-down latch's are not joined. A message published after Join
// returns is heard, both on a lingering channel and on one another waiter
// holds; a lingering channel joined again keeps no wake from the time
// nobody held it.
func TestJoin(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.hub.SetLinger(time.Hour)
	assert.Nil(t, e.hub.Join("j"), "a channel never subscribed is not joined")

	s, err := e.hub.Subscribe(ctx, "j")
	require.NoError(t, err)
	calls := e.subscribeCalls(t)
	j := e.hub.Join("j")
	require.NotNil(t, j, "a channel another waiter holds is joined")
	assert.Equal(t, calls, e.subscribeCalls(t), "Join sent no SUBSCRIBE")
	_, _, subs := e.hub.Stats()
	assert.Equal(t, 2, subs)
	e.publish(t, "j", "1") // wakes every share
	for _, w := range []*pubsub.Sub{s, j} {
		ok, err := w.Wait(ctx, 5*time.Second)
		require.NoError(t, err)
		assert.True(t, ok)
	}
	s.Release()
	j.Release()

	// Lingering: a message while nobody holds the channel leaves no wake.
	// The barrier channel shares j's connection, whose messages arrive in
	// order: once its message is heard, j's was handled.
	b, err := e.hub.Subscribe(ctx, "barrier")
	require.NoError(t, err)
	calls = e.subscribeCalls(t)
	e.publish(t, "j", "0")
	e.publish(t, "barrier", "0")
	ok, err := b.Wait(ctx, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	j = e.hub.Join("j")
	require.NotNil(t, j, "a lingering channel is joined")
	ok, err = j.Wait(ctx, 0) // a kept wake would return true at once
	require.NoError(t, err)
	assert.False(t, ok, "a message from before Join woke the joiner")
	e.publish(t, "j", "0")
	ok, err = j.Wait(ctx, 5*time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "a message after Join is heard")
	j.Release()
	b.Release()
	assert.Equal(t, calls, e.subscribeCalls(t), "Join sent no SUBSCRIBE")

	// A latch's channel is never joined, even while an awaiter holds it.
	const latch = "redisson_countdownlatch__channel__{L}"
	l, err := e.hub.Subscribe(ctx, latch)
	require.NoError(t, err)
	assert.Nil(t, e.hub.Join(latch))
	l.Release()

	// A lingering channel whose connection broke ends, and is not joined
	// once it is going.
	_, err = e.srv.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	require.Eventually(t, func() bool { ch, _, _ := e.hub.Stats(); return ch == 0 }, 10*time.Second, time.Millisecond)
	assert.Nil(t, e.hub.Join("j"))

	// Closed: nothing is joined.
	s, err = e.hub.Subscribe(ctx, "k")
	require.NoError(t, err)
	e.hub.Close()
	assert.Nil(t, e.hub.Join("k"))
	s.Release()
	var none *pubsub.Sub
	none.Release() // a nil Sub's Release does nothing
}

// A waiter that joined a lingering channel whose connection then broke
// keeps the channel: it subscribes again and wakes the joiner, which may
// have missed a message meanwhile.
func TestJoinedChannelResubscribes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.hub.SetLinger(time.Hour)
	s, err := e.hub.Subscribe(ctx, "r")
	require.NoError(t, err)
	s.Release()
	j := e.hub.Join("r")
	require.NotNil(t, j)
	defer j.Release()
	_, err = e.srv.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	ok, err := j.Wait(ctx, 10*time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "the resubscription woke the joiner")
	require.Eventually(t, func() bool { return e.numsub(t, "r") == 1 }, 10*time.Second, time.Millisecond)
	// The new subscription's confirmation may wake it once more (resync):
	// take that wake, then nothing is left.
	for {
		ok, err = j.Wait(ctx, 100*time.Millisecond)
		require.NoError(t, err)
		if !ok {
			break
		}
	}
	ok, err = j.Wait(ctx, 0)
	require.NoError(t, err)
	require.False(t, ok)
	e.publish(t, "r", "0")
	ok, err = j.Wait(ctx, 5*time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "heard on the new subscription")
}

// Join refuses a channel whose SUBSCRIBE the server has not confirmed yet
// (a message published before the confirmation would be lost to a joiner
// that skips its second attempt): here the server is paused while the
// first waiter subscribes.
func TestJoinWaitsForConfirmation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// A pause the test does not lift: every command waits for its end,
	// an UNPAUSE on a new connection (its HELLO) too.
	_, err := e.srv.Do(ctx, "CLIENT", "PAUSE", "1500", "ALL")
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		s, err := e.hub.Subscribe(ctx, "p")
		if err == nil {
			defer s.Release()
		}
		got <- err
	}()
	require.Eventually(t, func() bool { ch, _, _ := e.hub.Stats(); return ch == 1 }, 5*time.Second, time.Millisecond)
	assert.Nil(t, e.hub.Join("p"), "a channel still subscribing was joined")
	require.NoError(t, <-got)
	j := e.hub.Join("p")
	require.NotNil(t, j, "once confirmed, it is joined")
	j.Release()
}

// A share that joined a lingering channel and never waited (an acquisition
// that got in at its first attempt) does not start its linger again: a
// name taken uncontended again and again does not keep its channel.
func TestJoinWithoutWaitKeepsLingerEnd(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const linger = 300 * time.Millisecond
	e.hub.SetLinger(linger)
	s, err := e.hub.Subscribe(ctx, "n")
	require.NoError(t, err)
	s.Release()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if j := e.hub.Join("n"); j != nil {
				j.Release()
			}
		}
	}()
	require.Eventually(t, func() bool { ch, _, _ := e.hub.Stats(); return ch == 0 }, 5*time.Second, time.Millisecond,
		"joins that never waited kept the channel lingering")

	// A joiner that waits starts the linger anew when it leaves.
	s, err = e.hub.Subscribe(ctx, "w")
	require.NoError(t, err)
	s.Release()
	time.Sleep(linger / 2) // half the linger passes before the join
	j := e.hub.Join("w")
	require.NotNil(t, j)
	_, err = j.Wait(ctx, 0)
	require.NoError(t, err)
	j.Release()
	time.Sleep(linger * 3 / 4) // the first linger would have ended by now
	ch, lingering, _ := e.hub.Stats()
	assert.Equal(t, 1, ch, "the waiting joiner's release started the linger again")
	assert.Equal(t, 1, lingering)
}
