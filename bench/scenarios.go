package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Result is one run of one scenario by one contender. The Java benchmark
// (interop_test/java/src/main/java/Bench.java) prints the same JSON.
type Result struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	Note  string `json:"note,omitempty"`

	// S1: pairs; S2: handoffs.
	Ops     int64   `json:"ops,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Rate    float64 `json:"rate,omitempty"` // ops per second
	P50us   float64 `json:"p50_us,omitempty"`
	P99us   float64 `json:"p99_us,omitempty"`
	// S1 (Go): runtime.MemStats over the measured window, per pair.
	AllocsPerOp float64 `json:"allocs_per_op,omitempty"`
	BytesPerOp  float64 `json:"bytes_per_op,omitempty"`
	// S2
	Violations int64 `json:"violations,omitempty"` // two holders at once
	Acquires   int64 `json:"acquires,omitempty"`

	// S3
	Locks         int     `json:"locks,omitempty"`
	AcquireS      float64 `json:"acquire_s,omitempty"`
	HoldS         float64 `json:"hold_s,omitempty"`
	PeriodS       float64 `json:"period_s,omitempty"` // renewal period of the contender
	ScriptCalls   int64   `json:"script_calls,omitempty"`
	ScriptPerSec  float64 `json:"script_per_s,omitempty"`
	ScriptUsPerS  float64 `json:"script_us_per_s,omitempty"` // Redis time in scripts, µs per second
	CPUs          float64 `json:"cpu_s,omitempty"`
	CPUPct        float64 `json:"cpu_pct,omitempty"` // % of one core
	MemBytes      int64   `json:"mem_bytes,omitempty"`
	MemTotalBytes int64   `json:"mem_total_bytes,omitempty"`
	StillHeld     int64   `json:"still_held,omitempty"`

	// S4
	Waiters       int     `json:"waiters,omitempty"`
	Channels      int64   `json:"channels,omitempty"` // PUBSUB CHANNELS count
	NumSub        int64   `json:"numsub,omitempty"`   // summed PUBSUB NUMSUB of the lock channels
	LocalSubs     int     `json:"local_subs,omitempty"`
	Through       int64   `json:"through,omitempty"`
	ThroughS      float64 `json:"through_s,omitempty"`
	SettledWaiter int     `json:"settled_waiters,omitempty"`

	Ext map[string]float64 `json:"ext,omitempty"`
}

func fail(err error) Result { return Result{OK: false, Error: err.Error()} }

// ---- S1: uncontended ----

// S1 runs conc goroutines, each locking and unlocking its own name in a
// loop: warm first, then dur measured.
// a, if not nil, measures the Redis server's CPU time per pair.
func S1(c Contender, a *Admin, prefix string, conc int, warm, dur time.Duration) Result {
	ctx := context.Background()
	var phase atomic.Int32 // 0 warm, 1 measure, 2 stop
	hists := make([]Hist, conc)
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for i := range conc {
		m := c.NewMutex(prefix+strconv.Itoa(i), 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := &hists[i]
			for {
				p := phase.Load()
				if p == 2 {
					break
				}
				t := time.Now()
				if err := m.Lock(ctx); err != nil {
					errs <- fmt.Errorf("lock: %w", err)
					return
				}
				if err := m.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("unlock: %w", err)
					return
				}
				if p == 1 && phase.Load() == 1 {
					h.Add(time.Since(t))
				}
			}
		}()
	}
	time.Sleep(warm)
	var ms0, ms1 runtime.MemStats
	var rcpu0, rcpu1 float64
	if a != nil {
		rcpu0 = a.ServerCPU(context.Background())
	}
	runtime.ReadMemStats(&ms0)
	ccpu0 := processCPU()
	start := time.Now()
	phase.Store(1)
	time.Sleep(dur)
	phase.Store(2)
	elapsed := time.Since(start)
	ccpu1 := processCPU()
	runtime.ReadMemStats(&ms1)
	if a != nil {
		rcpu1 = a.ServerCPU(context.Background())
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	note := ""
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		note = "some goroutines did not return from Lock/Unlock within 10s after the end; their pairs are not counted"
	}
	select {
	case err := <-errs:
		return fail(err)
	default:
	}
	var all Hist
	for i := range hists {
		all.Merge(&hists[i])
	}
	n := int64(all.Count())
	r := Result{OK: true, Note: note, Ops: n, Seconds: elapsed.Seconds(), Rate: float64(n) / elapsed.Seconds(),
		P50us: us(all.Quantile(0.5)), P99us: us(all.Quantile(0.99))}
	if n > 0 {
		r.AllocsPerOp = float64(ms1.Mallocs-ms0.Mallocs) / float64(n)
		r.BytesPerOp = float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(n)
		r.Ext = map[string]float64{}
		if a != nil && rcpu0 > 0 {
			r.Ext["redis_cpu_us_per_op"] = (rcpu1 - rcpu0) * 1e6 / float64(n)
			r.Ext["redis_cpu_pct"] = 100 * (rcpu1 - rcpu0) / elapsed.Seconds()
		}
		if ccpu0 > 0 {
			r.Ext["client_cpu_us_per_op"] = float64(ccpu1-ccpu0) / 1e3 / float64(n)
		}
	}
	return r
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// processCPU is the user+system CPU time this process has used (every
// thread: the contender's goroutines, its client's pipeline and the
// runtime), or 0 where getrusage fails.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ---- S2: contended ----

// S2 runs conc goroutines, half on each of two contenders (two clients), on
// one lock name, each taking the lock, spinning cs, and unlocking. They go
// in laps: a goroutine takes the lock once per lap and waits for the lap to
// end (every goroutine has had the lock) before asking again. So within a
// lap every handoff goes to a goroutine already parked in Lock, and the
// latency measured is the library's wake-up path; the first acquisition of
// a lap (all goroutines arriving at once) counts in the rate but not in the
// latency. Handoff latency is the next holder's Lock return minus the
// previous holder's Unlock return (P50us/P99us), and minus the moment the
// previous holder called Unlock (Ext: from_call_*).
func S2(c1, c2 Contender, name string, conc int, warm, dur, cs time.Duration) Result {
	return S2Min(c1, c2, nil, name, conc, warm, dur, 3*dur, 300, cs)
}

// S2Min is S2 measuring at least dur and then until minAcq acquisitions
// were measured or maxDur ran out, so that slow contenders still give a p99.
// a, if not nil, counts the Redis commands per acquisition over the
// measured window (Ext "scripts_per_acq": script calls; "cmds_per_acq":
// every command the server ran, those inside scripts included).
func S2Min(c1, c2 Contender, a *Admin, name string, conc int, warm, dur, maxDur time.Duration, minAcq int64, cs time.Duration) Result {
	ctx := context.Background()
	base := time.Now()
	now := func() int64 { return int64(time.Since(base)) }

	type rec struct {
		who                   int32
		measured              bool
		start, acq, call, unl int64
	}
	var (
		recMu    sync.Mutex
		recs     []rec
		seq      atomic.Int64
		inCS     atomic.Int32
		viol     atomic.Int64
		phase    atomic.Int32
		lapMu    sync.Mutex
		lapCond  = sync.NewCond(&lapMu)
		lap      int64
		lapCount int
		active   atomic.Int64
	)
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for i := range conc {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		m := c.NewMutex(name, 0)
		wg.Add(1)
		active.Add(1)
		go func() {
			defer wg.Done()
			defer active.Add(-1)
			myLap := int64(0)
			for {
				lapMu.Lock()
				for lap < myLap && phase.Load() != 2 {
					lapCond.Wait()
				}
				lapMu.Unlock()
				if phase.Load() == 2 {
					return
				}
				st := now()
				if err := m.Lock(ctx); err != nil {
					errs <- fmt.Errorf("lock: %w", err)
					return
				}
				t := now()
				if !inCS.CompareAndSwap(0, 1) {
					viol.Add(1)
				}
				k := seq.Add(1) - 1
				recMu.Lock()
				for int64(len(recs)) <= k {
					recs = append(recs, rec{})
				}
				recs[k] = rec{who: int32(i), measured: phase.Load() == 1, start: st, acq: t}
				recMu.Unlock()
				for end := time.Now().Add(cs); time.Now().Before(end); {
				}
				inCS.Store(0)
				call := now()
				if err := m.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("unlock: %w", err)
					return
				}
				u := now()
				recMu.Lock()
				recs[k].call, recs[k].unl = call, u
				recMu.Unlock()
				myLap++
				lapMu.Lock()
				if lapCount++; lapCount == conc {
					lapCount = 0
					lap++
					lapCond.Broadcast()
				}
				lapMu.Unlock()
			}
		}()
	}
	time.Sleep(warm)
	var st0, st1 map[string]CmdStat
	if a != nil {
		st0, _ = a.CommandStats(ctx)
	}
	// The subscriptions on Redis while the waiters wait: sampled every
	// 100 ms over the measured window, the most seen (Ext "subs_max").
	subsMax := int64(-1)
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		if a == nil {
			return
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			if n, err := a.Subscriptions(ctx); err == nil && n > subsMax {
				subsMax = n
			}
		}
	}()
	k0 := seq.Load()
	start := time.Now()
	phase.Store(1)
	time.Sleep(dur)
	for seq.Load()-k0 < minAcq && time.Since(start) < maxDur {
		time.Sleep(50 * time.Millisecond)
	}
	k1 := seq.Load()
	elapsed := time.Since(start)
	close(stopSampling)
	<-sampled
	if a != nil {
		st1, _ = a.CommandStats(ctx)
	}
	phase.Store(2)
	lapMu.Lock()
	lapCond.Broadcast()
	lapMu.Unlock()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	note := ""
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		note = fmt.Sprintf("%d goroutine(s) still waiting in Lock 10s after the end, with the lock free", active.Load())
	}
	select {
	case err := <-errs:
		return fail(err)
	default:
	}
	recMu.Lock()
	defer recMu.Unlock()
	var hRet, hCall Hist
	var n, negative int64
	for k := 0; k+1 < len(recs); k++ {
		p, q := recs[k], recs[k+1]
		if !p.measured || !q.measured || p.unl == 0 || q.start > p.acq {
			continue // not a handoff to a goroutine that was parked in Lock
		}
		if q.acq < p.unl {
			negative++
		}
		hRet.Add(time.Duration(q.acq - p.unl))
		hCall.Add(time.Duration(q.acq - p.call))
		n++
	}
	acquires := k1 - k0
	r := Result{OK: true, Note: note, Ops: n, Acquires: acquires, Seconds: elapsed.Seconds(), Rate: float64(acquires) / elapsed.Seconds(),
		P50us: us(hRet.Quantile(0.5)), P99us: us(hRet.Quantile(0.99)), Violations: viol.Load(),
		Ext: map[string]float64{"from_call_p50_us": us(hCall.Quantile(0.5)), "from_call_p99_us": us(hCall.Quantile(0.99)),
			"negative_share": float64(negative) / float64(max(n, 1))}}
	if st0 != nil && st1 != nil && acquires > 0 {
		var all0, all1 int64
		// The harness' own commands are not the contender's.
		mine := func(k string) bool { return k == "info" || strings.HasPrefix(k, "pubsub") }
		for k, v := range st0 {
			if !mine(k) {
				all0 += v.Calls
			}
		}
		for k, v := range st1 {
			if !mine(k) {
				all1 += v.Calls
			}
		}
		r.Ext["scripts_per_acq"] = float64(ScriptStats(st1).Calls-ScriptStats(st0).Calls) / float64(acquires)
		r.Ext["cmds_per_acq"] = float64(all1-all0) / float64(acquires)
	}
	if subsMax >= 0 {
		r.Ext["subs_max"] = float64(subsMax)
	}
	if os.Getenv("BENCH_DEBUG") != "" {
		q := func(h *Hist) string {
			return fmt.Sprintf("n=%d q10 %v q25 %v q50 %v q75 %v q90 %v q99 %v", h.Count(), h.Quantile(.1), h.Quantile(.25), h.Quantile(.5), h.Quantile(.75), h.Quantile(.9), h.Quantile(.99))
		}
		fmt.Fprintf(os.Stderr, "acq %d/s neg %d\n ret:  %s\n call: %s\n", int(r.Rate), negative, q(&hRet), q(&hCall))
	}
	return r
}

// ---- memory and CPU of this process ----

// LiveMem returns the bytes of live heap objects and of goroutine stacks,
// after a full GC.
func LiveMem() (heap, stacks int64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc), int64(ms.StackInuse)
}

// CPUTime returns the user+system CPU time of this process.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// parallelWithin is parallel bounded by d: when d runs out it returns an
// error saying how many calls returned, leaving the others running.
func parallelWithin(d time.Duration, n, workers int, fn func(i int) error) error {
	var returned atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- parallel(n, workers, func(i int) error {
			defer returned.Add(1)
			return fn(i)
		})
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("only %d of %d calls returned within %v", returned.Load(), n, d)
	}
}

// parallel runs fn(i) for i in [0, n) on workers goroutines and returns the
// first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// ---- S3: watchdog scale ----

// AcquireTimeout bounds the set-up phases of S3 and S4 (taking and
// releasing the held locks).
var AcquireTimeout = 30 * time.Second

// S3 takes n locks with the watchdog (the contender must be built with a
// short watchdog timeout), holds them for hold, and measures the Redis
// calls, CPU and memory the hold costs. period is the contender's renewal
// period, for the report.
func S3(c Contender, a *Admin, prefix string, n int, hold, period time.Duration) Result {
	ctx := context.Background()
	heap0, stack0 := LiveMem()
	ms := make([]Mutex, n)
	t0 := time.Now()
	err := parallelWithin(AcquireTimeout, n, 64, func(i int) error {
		m := c.NewMutex(prefix+strconv.Itoa(i), int64(i+1))
		if err := m.Lock(ctx); err != nil {
			return fmt.Errorf("lock %d: %w", i, err)
		}
		ms[i] = m
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("taking the locks: %w", err))
	}
	acquireS := time.Since(t0).Seconds()
	LiveMem() // settle
	quiet := a.WaitQuiet(ctx, 2*period+time.Second)
	st0, err := a.CommandStats(ctx)
	if err != nil {
		return fail(err)
	}
	cpu0, w0 := CPUTime(), time.Now()
	time.Sleep(hold)
	cpu1, w1 := CPUTime(), time.Now()
	st1, err := a.CommandStats(ctx)
	if err != nil {
		return fail(err)
	}
	heap1, stack1 := LiveMem()
	held, _ := a.DBSize(ctx)
	lost := 0
	for _, m := range ms {
		if l, ok := m.(interface{ Lost() bool }); ok && l.Lost() {
			lost++
		}
	}
	if st, ok := c.(Statser); ok {
		lost += st.Stats()["lost"]
	}
	wall := w1.Sub(w0).Seconds()
	r := Result{OK: true, Locks: n, AcquireS: acquireS, HoldS: wall, PeriodS: period.Seconds(),
		ScriptCalls: ScriptStats(st1).Calls - ScriptStats(st0).Calls,
		CPUs:        (cpu1 - cpu0).Seconds(), MemBytes: heap1 - heap0 + stack1 - stack0, MemTotalBytes: heap1 + stack1, StillHeld: held,
		Ext: map[string]float64{"heap_bytes": float64(heap1 - heap0), "stack_bytes": float64(stack1 - stack0)}}
	r.ScriptPerSec = float64(r.ScriptCalls) / wall
	r.ScriptUsPerS = float64(ScriptStats(st1).Usec-ScriptStats(st0).Usec) / wall
	r.CPUPct = 100 * r.CPUs / wall
	if lost > 0 {
		r.Note = fmt.Sprintf("%d holds reported lost by the library", lost)
	}
	if !quiet {
		r.Note = strings.TrimPrefix(r.Note+"; renewals never paused for 100ms: the window is not aligned to a round", "; ")
	}
	_ = parallelWithin(AcquireTimeout, n, 64, func(i int) error {
		_ = ms[i].Unlock(ctx)
		return nil
	})
	return r
}

// ---- S4: waiting scale ----

// S4 holds locks names, starts per waiters on each, measures subscriptions
// and memory once they all wait, then releases the holds and times until
// every waiter has acquired and released.
func S4(c Contender, a *Admin, prefix string, locks, per int, settle, timeout time.Duration, channel func(string) string) Result {
	bg := context.Background()
	names := make([]string, locks)
	channels := make([]string, locks)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
		channels[i] = channel(names[i])
	}
	holders := make([]Mutex, locks)
	if err := parallelWithin(AcquireTimeout, locks, 64, func(i int) error {
		m := c.NewMutex(names[i], int64(1_000_000_000+i))
		if err := m.Lock(bg); err != nil {
			return fmt.Errorf("holder %d: %w", i, err)
		}
		holders[i] = m
		return nil
	}); err != nil {
		return fail(err)
	}
	heap0, stack0 := LiveMem()
	ctx, cancel := context.WithTimeout(bg, timeout+settle+10*time.Second)
	defer cancel()
	total := locks * per
	var started, through, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	var lastDone atomic.Int64
	base := time.Now()
	var wg sync.WaitGroup
	for j := range locks {
		for k := range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := c.NewMutex(names[j], int64(j*per+k+1))
				started.Add(1)
				err := m.Lock(ctx)
				if err == nil {
					err = m.Unlock(bg)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				through.Add(1)
				lastDone.Store(int64(time.Since(base)))
			}()
		}
	}
	for started.Load() < int64(total) {
		time.Sleep(10 * time.Millisecond)
	}
	st, _ := c.(Statser)
	deadline := time.Now().Add(settle)
	if st != nil {
		// rlock reports its waiters: wait until every one waits.
		for time.Now().Before(deadline.Add(10*time.Second)) && st.Stats()["waiters"] < total {
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(time.Until(deadline))
	r := Result{OK: true, Waiters: total}
	var err error
	r.Channels, r.NumSub, err = a.PubSub(bg, channels)
	if err != nil {
		return fail(err)
	}
	if st != nil {
		s := st.Stats()
		r.LocalSubs, r.SettledWaiter = s["subscriptions"], s["waiters"]
	}
	heap1, stack1 := LiveMem()
	r.MemBytes, r.MemTotalBytes = heap1-heap0+stack1-stack0, heap1+stack1
	r.Ext = map[string]float64{"heap_bytes": float64(heap1 - heap0), "stack_bytes": float64(stack1 - stack0)}
	t0 := time.Now()
	t0ns := int64(t0.Sub(base))
	_ = parallelWithin(AcquireTimeout, locks, 64, func(i int) error {
		_ = holders[i].Unlock(bg)
		return nil
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		cancel()
		<-done
	}
	r.Through = through.Load()
	r.ThroughS = float64(lastDone.Load()-t0ns) / 1e9
	if r.Through < int64(total) {
		r.Note = fmt.Sprintf("%d of %d waiters through within %v", r.Through, total, timeout)
		if p := firstErr.Load(); p != nil && failed.Load() > int64(total)-r.Through-1 && ctx.Err() == nil {
			r.Note += "; first error: " + (*p).Error()
		}
		r.ThroughS = timeout.Seconds()
	}
	return r
}

// Median returns the median of xs (0 when empty).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ---- S5: writer hand-off under readers ----

// RWContender makes the read and write sides of a read-write lock.
type RWContender interface {
	NewRW(name string, owner int64) (read, write Mutex)
}

// S5 timings: each reader takes and releases the read lock, then pauses
// ReaderPause; the writer takes and releases the write lock, then pauses
// WriterPause. The same loops run in Java (interop_test/java Bench s5).
const (
	ReaderPause = 2 * time.Millisecond
	WriterPause = 5 * time.Millisecond
)

// S5 runs readers goroutines cycling the read lock of name and one writer
// cycling its write lock, and measures how long the writer waits for each
// grant (P50us, P99us; Rate: write grants per second; Ext: reader pairs
// per second, and the hand-off: from the last read unlock's return to the
// writer's grant). No lock of the family is fair: a writer gets in when the
// readers leave a gap.
func S5(c Contender, name string, readers int, warm, dur time.Duration) Result {
	rwc, ok := c.(RWContender)
	if !ok {
		return fail(errors.New("S5 needs a read-write lock"))
	}
	ctx := context.Background()
	var phase atomic.Int32 // 0 warm, 1 measure, 2 stop
	var readPairs atomic.Int64
	var wh Hist
	// The hand-off: the writer's grant minus the return of the last read
	// unlock before it, over grants for which the writer waited through
	// at least one read unlock (negative, when that unlock's goroutine
	// ran late: counted as 0).
	// Times are monotonic: nanoseconds since base.
	base := time.Now()
	var lastReadUnlock atomic.Int64
	var hh Hist
	var late atomic.Int64 // hand-offs measured negative
	errs := make(chan error, readers+1)
	var wg sync.WaitGroup
	for range readers {
		r, _ := rwc.NewRW(name, 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for phase.Load() != 2 {
				if err := r.Lock(ctx); err != nil {
					errs <- fmt.Errorf("read lock: %w", err)
					return
				}
				if err := r.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("read unlock: %w", err)
					return
				}
				lastReadUnlock.Store(int64(time.Since(base)))
				if phase.Load() == 1 {
					readPairs.Add(1)
				}
				time.Sleep(ReaderPause)
			}
		}()
	}
	_, w := rwc.NewRW(name, 0)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for phase.Load() != 2 {
			t := time.Now()
			if err := w.Lock(ctx); err != nil {
				errs <- fmt.Errorf("write lock: %w", err)
				return
			}
			granted := time.Now()
			waited := granted.Sub(t)
			lu := lastReadUnlock.Load()
			if err := w.Unlock(ctx); err != nil {
				errs <- fmt.Errorf("write unlock: %w", err)
				return
			}
			if phase.Load() == 1 {
				wh.Add(waited)
				if lu > int64(t.Sub(base)) {
					d := granted.Sub(base) - time.Duration(lu)
					if d < 0 {
						late.Add(1)
					}
					hh.Add(max(d, 0))
				}
			}
			time.Sleep(WriterPause)
		}
	}()
	time.Sleep(warm)
	start := time.Now()
	phase.Store(1)
	time.Sleep(dur)
	phase.Store(2)
	elapsed := time.Since(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return fail(errors.New("S5: a goroutine did not return within 30s after the end"))
	}
	select {
	case err := <-errs:
		return fail(err)
	default:
	}
	n := int64(wh.Count())
	return Result{OK: true, Ops: n, Seconds: elapsed.Seconds(), Rate: float64(n) / elapsed.Seconds(),
		P50us: us(wh.Quantile(0.5)), P99us: us(wh.Quantile(0.99)),
		Ext: map[string]float64{"read_pairs_per_s": float64(readPairs.Load()) / elapsed.Seconds(),
			"handoff_p50_us": us(hh.Quantile(0.5)), "handoff_p99_us": us(hh.Quantile(0.99)), "handoffs": float64(hh.Count()), "handoffs_late": float64(late.Load())}}
}
