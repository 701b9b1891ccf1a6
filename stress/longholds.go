package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// LongHoldConfig is a long-holds run (--long-holds): Locks locks taken with
// the watchdog by one Client and held for Duration, then a Redis restart.
type LongHoldConfig struct {
	Locks    int
	Duration time.Duration
	Watchdog time.Duration // the watchdog timeout; the renewal period is a third of it
	Redis    string        // host:port; empty: start a redis-server (needed for the restart)
}

// LongHoldReport is what a long-holds run measured. Samples are taken right
// after a renewal round, so that between two samples lie whole rounds.
type LongHoldReport struct {
	Config       LongHoldConfig
	AcquireTime  time.Duration
	Rounds       int   // renewal rounds between the first and the last sample
	ScriptCalls  int64 // script calls Redis ran between those samples (INFO commandstats)
	Batches      int   // the calls one round needs: Locks/100 rounded up
	HeapFirst    uint64
	HeapMax      uint64
	HeapLast     uint64 // heap in use after a GC, right after rounds
	GoroutinesLo int
	GoroutinesHi int
	HeldAtEnd    int // locks whose hash Redis still had, with a TTL, at the end
	// After the restart (empty): holds reported lost, renewal calls Redis
	// ran in the rounds after the one that found them gone, and the
	// holds still renewed.
	LostAfterRestart     int
	CallsAfterLossRounds int64
	RenewingAfter        int
	Problems             []string
}

// OK reports whether the run met every point.
func (r *LongHoldReport) OK() bool { return len(r.Problems) == 0 }

func (r *LongHoldReport) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "long holds: %d locks with the watchdog (timeout %v, renewal every %v) held for %v; acquired in %v\n",
		c.Locks, c.Watchdog, c.Watchdog/3, c.Duration, r.AcquireTime.Round(time.Millisecond))
	fmt.Fprintf(w, "renewal: %d rounds, %d script calls (%.2f per round; %d batches of 100 needed)\n",
		r.Rounds, r.ScriptCalls, float64(r.ScriptCalls)/float64(max(1, r.Rounds)), r.Batches)
	fmt.Fprintf(w, "client heap in use after GC: first %.1f MiB, max %.1f MiB, last %.1f MiB; goroutines %d..%d\n",
		mib(r.HeapFirst), mib(r.HeapMax), mib(r.HeapLast), r.GoroutinesLo, r.GoroutinesHi)
	fmt.Fprintf(w, "held at the end: %d of %d\n", r.HeldAtEnd, c.Locks)
	fmt.Fprintf(w, "after a Redis restart: %d reported lost, %d script calls in the next rounds, %d still renewed\n",
		r.LostAfterRestart, r.CallsAfterLossRounds, r.RenewingAfter)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	if r.OK() {
		fmt.Fprintln(w, "OK")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// RunLongHolds takes cfg.Locks locks with the watchdog, keeps them for
// cfg.Duration and checks: every lock still held; the client's heap (after
// a GC) and goroutines flat from the first round on (heap within 10% plus
// 4 MiB of the first sample); exactly one renewal script call per 100
// locks per round. Then it restarts Redis empty and checks that every hold
// is reported lost and none is renewed afterwards.
func RunLongHolds(ctx context.Context, cfg LongHoldConfig) (*LongHoldReport, error) {
	if cfg.Locks <= 0 || cfg.Duration <= 0 || cfg.Watchdog < 30*time.Millisecond {
		return nil, errors.New("--long-holds and --duration must be positive, --watchdog at least 30ms")
	}
	rep := &LongHoldReport{Config: cfg, Batches: (cfg.Locks + 99) / 100, GoroutinesLo: 1 << 30}
	var srv *redistest.Server
	addr := cfg.Redis
	if addr == "" {
		var err error
		if srv, err = redistest.StartServer(ctx, redistest.Config{Name: "longholds"}); err != nil {
			return nil, err
		}
		defer srv.Close()
		addr = srv.Addr
	}
	rc, err := dial(addr)
	if err != nil {
		return nil, err
	}
	defer rc.Close()

	// rounds gets every renewal round, with the script calls Redis had
	// run when it ended: the hook runs on the watchdog's goroutine once
	// the round's calls are answered and before the next round begins,
	// so the counts between two rounds are exact.
	type round struct {
		ev    rlock.RenewEvent
		calls int64
		err   error
	}
	rounds := make(chan round, 1024)
	var lost atomic.Int64
	c, err := rlock.New(rc, rlock.WithWatchdogTimeout(cfg.Watchdog),
		rlock.WithHooks(rlock.Hooks{Renew: func(ev rlock.RenewEvent) {
			calls, err := scriptCalls(ctx, rc)
			select {
			case rounds <- round{ev, calls, err}:
			case <-ctx.Done():
			}
		}}),
		rlock.WithLostHandler(func(rlock.LostEvent) { lost.Add(1) }))
	if err != nil {
		return nil, err
	}
	defer c.Close()

	names := make([]string, cfg.Locks)
	for i := range names {
		names[i] = "longholds:" + strconv.Itoa(i)
	}
	began := time.Now()
	var wg sync.WaitGroup
	var acqErr atomic.Value
	next := atomic.Int64{}
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				if err := c.Lock(names[i]).Lock(ctx); err != nil {
					acqErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if e := acqErr.Load(); e != nil {
		return nil, fmt.Errorf("acquiring: %w", e.(error))
	}
	rep.AcquireTime = time.Since(began)

	waitRound := func() (round, error) {
		t := time.NewTimer(3 * cfg.Watchdog)
		defer t.Stop()
		select {
		case r := <-rounds:
			return r, r.err
		case <-t.C:
			return round{}, errors.New("no renewal round within three watchdog timeouts")
		case <-ctx.Done():
			return round{}, ctx.Err()
		}
	}
	sample := func() {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if rep.HeapFirst == 0 {
			rep.HeapFirst = ms.HeapInuse
		}
		rep.HeapMax, rep.HeapLast = max(rep.HeapMax, ms.HeapInuse), ms.HeapInuse
		g := runtime.NumGoroutine()
		rep.GoroutinesLo, rep.GoroutinesHi = min(rep.GoroutinesLo, g), max(rep.GoroutinesHi, g)
	}
	// Rounds that ran during the acquisitions renewed only some holds: the
	// first sample is the end of the first round that renewed them all.
	var first round
	for i := 0; ; i++ {
		if first, err = waitRound(); err != nil {
			return nil, err
		}
		if first.ev.Renewed == cfg.Locks {
			break
		}
		if i == 20 {
			return nil, fmt.Errorf("20 renewal rounds after the acquisitions, none renewed all %d holds (the last: %+v)", cfg.Locks, first.ev)
		}
	}
	sample()
	calls0, calls1 := first.calls, first.calls
	end := time.Now().Add(cfg.Duration)
	for time.Now().Before(end) {
		r, err := waitRound()
		if err != nil {
			return nil, err
		}
		ev := r.ev
		calls1 = r.calls
		rep.Rounds++
		if ev.Renewed != cfg.Locks || ev.Gone != 0 || ev.Failed != 0 {
			rep.problem("round %d renewed %d of %d holds (gone %d, failed %d)", rep.Rounds, ev.Renewed, cfg.Locks, ev.Gone, ev.Failed)
		}
		sample()
	}
	rep.ScriptCalls = calls1 - calls0
	if want := int64(rep.Rounds * rep.Batches); rep.ScriptCalls != want {
		rep.problem("%d renewal script calls in %d rounds, want exactly %d (%d per round)", rep.ScriptCalls, rep.Rounds, want, rep.Batches)
	}
	if rep.HeapLast > rep.HeapFirst+rep.HeapFirst/10+4<<20 {
		rep.problem("the heap grew from %.1f MiB to %.1f MiB", mib(rep.HeapFirst), mib(rep.HeapLast))
	}
	if rep.GoroutinesHi-rep.GoroutinesLo > 8 {
		rep.problem("goroutines varied from %d to %d", rep.GoroutinesLo, rep.GoroutinesHi)
	}
	if rep.HeldAtEnd, err = countHeld(ctx, rc, names); err != nil {
		return nil, err
	}
	if rep.HeldAtEnd != cfg.Locks {
		rep.problem("%d of %d locks still held at the end", rep.HeldAtEnd, cfg.Locks)
	}
	if srv == nil {
		rep.problem("no Redis restart: the run was given --redis")
		return rep, nil
	}

	// Restart Redis empty: every hold must be reported lost, and none
	// renewed after the round that found them gone.
	if err := srv.Restart(ctx); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(4 * cfg.Watchdog)
	for lost.Load() < int64(cfg.Locks) && time.Now().Before(deadline) {
		if _, err := waitRound(); err != nil && ctx.Err() != nil {
			return nil, err
		}
	}
	// Keep draining rounds (there should be none) while the loss settles.
	stopDrain := make(chan struct{})
	drained := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-rounds:
				n++
			case <-stopDrain:
				drained <- n
				return
			}
		}
	}()
	rep.LostAfterRestart = int(lost.Load())
	if rep.LostAfterRestart != cfg.Locks {
		rep.problem("%d of %d holds reported lost after the restart", rep.LostAfterRestart, cfg.Locks)
	}
	// Three renewal periods later Redis has seen no renewal call.
	base, err := scriptCalls(ctx, rc)
	if err != nil {
		return nil, err
	}
	if err := sleepCtx(ctx, cfg.Watchdog); err != nil {
		return nil, err
	}
	after, err := scriptCalls(ctx, rc)
	if err != nil {
		return nil, err
	}
	close(stopDrain)
	rep.CallsAfterLossRounds = after - base
	if rep.CallsAfterLossRounds != 0 {
		rep.problem("%d script calls after every hold was reported lost", rep.CallsAfterLossRounds)
	}
	if n := <-drained; n != 0 {
		rep.problem("%d renewal rounds after every hold was reported lost", n)
	}
	rep.RenewingAfter = c.Stats().Renewing
	if rep.RenewingAfter != 0 {
		rep.problem("%d holds still renewed after the restart", rep.RenewingAfter)
	}
	return rep, nil
}

func (r *LongHoldReport) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// scriptCalls returns how many EVAL, EVALSHA and FCALL calls the server has
// run (INFO commandstats).
func scriptCalls(ctx context.Context, rc rueidis.Client) (int64, error) {
	info, err := rc.Do(ctx, rc.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		return 0, fmt.Errorf("INFO commandstats: %w", err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_eval:", "cmdstat_evalsha:", "cmdstat_fcall:", "cmdstat_eval_ro:", "cmdstat_evalsha_ro:"} {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd)
			if !ok {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			v, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO commandstats: %q: %w", line, err)
			}
			n += v
		}
	}
	return n, nil
}

// countHeld counts the names whose hash exists with a TTL.
func countHeld(ctx context.Context, rc rueidis.Client, names []string) (int, error) {
	held := 0
	for i := 0; i < len(names); i += 1000 {
		chunk := names[i:min(i+1000, len(names))]
		cmds := make(rueidis.Commands, len(chunk))
		for j, n := range chunk {
			cmds[j] = rc.B().Pttl().Key(n).Build()
		}
		for _, r := range rc.DoMulti(ctx, cmds...) {
			v, err := r.AsInt64()
			if err != nil {
				return 0, err
			}
			if v > 0 {
				held++
			}
		}
	}
	return held, nil
}
