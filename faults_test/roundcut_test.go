package faults_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// The server pauses in the middle of a renewal round that needs several
// pipelined chunks of script calls (more holds than 64 calls of 100): the
// first chunk is answered, then nothing passes for longer than what is
// left of the period, so the round's deadline comes with the later holds
// not renewed. Those holds still have about two periods of lease, and the
// next round begins at once and takes the earliest leases first: none may
// be reported lost. (The watchdog once reported every hold a cut round
// left as lost a period early: a 0.9 s pause of a Redis with 100 000
// watchdog holds and a 3 s timeout lost a fifth of them.)
func TestWatchdogRoundCutByPause(t *testing.T) {
	const (
		timeout = 3 * time.Second // renewals every second
		period  = timeout / 3
		holds   = 13000 // 130 calls: chunks of 64, 64 and 2
	)
	srv := standaloneLocal(t)
	ctx := context.Background()
	proxy := redistest.NewProxy(t, srv.Addr)
	opt := srv.ClientOption()
	opt.InitAddress = []string{proxy.Addr}

	var lost atomic.Int64
	var firstLost atomic.Value
	type round struct{ renewed, failed int }
	rounds := make(chan round, 100)
	c := newLocks(t, newRueidis(t, opt), rlock.WithWatchdogTimeout(timeout),
		rlock.WithLostHandler(func(ev rlock.LostEvent) {
			lost.Add(1)
			firstLost.CompareAndSwap(nil, ev.Err.Error())
		}),
		rlock.WithHooks(rlock.Hooks{Renew: func(ev rlock.RenewEvent) {
			select {
			case rounds <- round{ev.Renewed, ev.Failed}:
			default:
			}
		}}))

	owner := rlock.WithOwner(ctx, 1)
	var wg sync.WaitGroup
	var failures atomic.Int64
	sem := make(chan struct{}, 64)
	for i := range holds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := c.Lock(fmt.Sprintf("cut-%d", i)).Lock(owner); err != nil {
				failures.Add(1)
			}
		})
	}
	wg.Wait()
	require.Zero(t, failures.Load(), "locks not taken")

	// A whole round over every hold, then the pause in the next one,
	// before its 65th call (the first of its second chunk).
	for r := range rounds {
		if r.renewed == holds {
			break
		}
	}
	var mu sync.Mutex
	calls := 0
	renew := isScript(scripts.Renew)
	paused := proxy.StallOn(func(args []string) bool {
		if !renew(args) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		return calls == 65
	})
	select {
	case <-paused:
	case <-time.After(5 * time.Second):
		t.Fatal("the next round did not send a 65th renewal")
	}
	pausedAt := time.Now()
	time.Sleep(period) // the pause itself: the round's deadline passes in it
	proxy.Resume()

	// The cut round reports failures; later rounds renew every hold again.
	cut := false
	var after round
	deadline := time.After(3 * timeout)
	for done := false; !done; {
		select {
		case r := <-rounds:
			done = cut && r.failed == 0
			cut = cut || r.failed > 0
			after = r
		case <-deadline:
			t.Fatalf("no round without failures after the pause (round cut: %v)", cut)
		}
	}
	assert.Equal(t, holds, after.renewed, "holds renewed by the first whole round after the cut one")
	// Past the end of every lease set before the pause.
	time.Sleep(time.Until(pausedAt.Add(timeout)))
	assert.Zero(t, lost.Load(), "holds reported lost after a %v pause (first: %v)", period, firstLost.Load())
	assert.Equal(t, int64(holds), doInt(t, srv, "DBSIZE"), "locks gone from Redis")
}
