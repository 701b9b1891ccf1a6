// Command bench compares github.com/goredisson/locks/rlock with the other
// Redis locks for Go, Redisson (through interop_test/java) and "the limit"
// (the same Lua scripts sent straight through rueidis), and writes
// RESULTS.md and results.svg.
//
//	cd bench && go run ./cmd/bench -out RESULTS.md
//
// It starts a throwaway redis-server on 127.0.0.1, then runs every scenario
// for every contender in turn, round after round (the order rotates each
// round), so machine noise hits all alike; each Go run is a fresh worker
// process (this binary with "worker"), Redisson runs in one warmed-up JVM.
// A contender that fails is reported as failed. See -h for the knobs.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goredisson/locks/bench"
)

type options struct {
	out, svg        string
	rounds          int
	contenders      []string
	scenarios       map[string]bool
	s1Conc          []int
	s1Warm, s1Dur   time.Duration
	s2Dur, s2Max    time.Duration
	s2MinAcq        int
	linkOneWay      time.Duration
	s3Sizes         []int
	s3Rounds        int
	s3BigRounds     int
	s3Hold          time.Duration
	s3Watchdog      time.Duration
	s4Locks, s4Per  int
	s4Rounds        int
	s4Settle        time.Duration
	s4Timeout       time.Duration
	javaDir         string
	javaVersion     string
	javaWarm        time.Duration
	benchtime       string
	profileDir      string
	redissonS4Tuned int
	from            string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		workerMain(os.Args[2:])
		return
	}
	var o options
	var contenders, scenarios, s1conc, s3sizes string
	flag.StringVar(&o.out, "out", "RESULTS.md", "markdown report to write")
	flag.StringVar(&o.svg, "svg", "results.svg", "chart to write (next to -out when relative)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; the report shows the median of the rounds")
	flag.StringVar(&contenders, "contenders", "rlock,limit,bsm,redsync,rueidislock,redisson", "contenders to run")
	flag.StringVar(&scenarios, "scenarios", "s1,s2,s3,s4,fam,fair,sync,redlock,allocs", "scenarios to run (fam: the read and fenced locks' S1 at 1, 16, 256 goroutines and S5, the writer hand-off under 16 readers; fair: S2 of the fair lock at 16 and 256 waiters; sync: a semaphore's S1 at 1, 16, 256 and S2 at 16, and the release of 1000 latch awaiters; redlock: RedLock pairs over 1, 3, 5 masters)")
	flag.StringVar(&s1conc, "s1-conc", "1,4,16,256", "S1 goroutine counts")
	flag.DurationVar(&o.s1Warm, "s1-warm", 300*time.Millisecond, "S1 warm-up per run")
	flag.DurationVar(&o.s1Dur, "s1-dur", 2*time.Second, "S1 measured time per run")
	flag.DurationVar(&o.s2Dur, "s2-dur", 2*time.Second, "S2 measured time per run (at least)")
	flag.DurationVar(&o.s2Max, "s2-max", 6*time.Second, "S2 longest measured time, for contenders that need it to reach -s2-min-acq handoffs")
	flag.IntVar(&o.s2MinAcq, "s2-min-acq", 300, "S2 handoffs wanted per run")
	flag.StringVar(&s3sizes, "s3-locks", "10000,100000", "S3 lock counts")
	flag.IntVar(&o.s3Rounds, "s3-rounds", 3, "rounds for S3")
	flag.IntVar(&o.s3BigRounds, "s3-big-rounds", 1, "rounds for S3 sizes of 100000 and more")
	flag.DurationVar(&o.s3Hold, "s3-hold", 6*time.Second, "S3 hold window (a multiple of every renewal period: 1s and 1.5s)")
	flag.DurationVar(&o.s3Watchdog, "s3-watchdog", 3*time.Second, "S3 watchdog timeout (rueidislock: KeyValidity)")
	flag.IntVar(&o.s4Locks, "s4-locks", 1000, "S4 lock names")
	flag.IntVar(&o.s4Per, "s4-per", 10, "S4 waiters per lock")
	flag.IntVar(&o.s4Rounds, "s4-rounds", 2, "rounds for S4")
	flag.DurationVar(&o.s4Settle, "s4-settle", 2*time.Second, "S4 time for the waiters to settle before measuring")
	flag.DurationVar(&o.s4Timeout, "s4-timeout", 30*time.Second, "S4 time allowed for all waiters to get through")
	flag.StringVar(&o.javaDir, "java-dir", "../interop_test/java", "the Redisson interop Maven project")
	flag.StringVar(&o.javaVersion, "redisson", "4.7.0", "Redisson version (a line of versions.txt)")
	flag.DurationVar(&o.javaWarm, "java-warm", 12*time.Second, "JVM warm-up before the first round")
	flag.StringVar(&o.benchtime, "benchtime", "10000x", "-benchtime of the allocation benchmarks (go test)")
	flag.StringVar(&o.profileDir, "profile", "", "if set, only profile rlock (S1 at 256 goroutines, S2: CPU and allocations) into this directory")
	flag.StringVar(&o.from, "from", "", "only render the report from this raw results file (written by every run to results/tmp/last-run.json)")
	flag.DurationVar(&o.linkOneWay, "link", time.Millisecond, "also run the RedLock pairs and the fair lock's S2 at 16 waiters through links (TCP proxies) that add this delay in each direction, as between hosts (0: no)")
	flag.IntVar(&o.redissonS4Tuned, "redisson-s4-subs", 25, "also run Redisson's S4 with this subscriptionsPerConnection (0: no); its default 5 x 50 connections holds 250 channels")
	flag.Parse()
	o.contenders = splitList(contenders)
	o.scenarios = map[string]bool{}
	for _, s := range splitList(scenarios) {
		o.scenarios[s] = true
	}
	for _, s := range splitList(s1conc) {
		n, _ := strconv.Atoi(s)
		o.s1Conc = append(o.s1Conc, n)
	}
	for _, s := range splitList(s3sizes) {
		n, _ := strconv.Atoi(s)
		o.s3Sizes = append(o.s3Sizes, n)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// runner holds the state of one benchmark run.
type runner struct {
	o       options
	srv     *bench.Server
	masters []string // redlock: the main server's address and four more
	links   []string // the masters (or the main server alone) behind a delaying link each
	admin   *bench.Admin
	self    string
	java    *javaWorker
	javaErr string
	env     envInfo

	mu       sync.Mutex
	results  map[string][]bench.Result // key: scenario/param/contender
	rtts     []float64                 // PING p50 µs, per measurement
	linkRTTs []float64                 // PING p50 µs through links[0], before every run through a link
	rtt99s   []float64
	allocs   map[string]allocResult
	started  time.Time
}

type allocResult struct {
	NsPerOp, BytesPerOp, AllocsPerOp float64
	Err                              string
}

func key(scenario string, param int, contender string) string {
	return scenario + "/" + strconv.Itoa(param) + "/" + contender
}

func run(o options) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r := &runner{o: o, self: self, results: map[string][]bench.Result{}, allocs: map[string]allocResult{}, started: time.Now()}
	if o.from != "" {
		return r.render(o.from)
	}
	r.srv, err = bench.StartRedis()
	if err != nil {
		return err
	}
	defer r.srv.Stop()
	logf("redis-server on %s", r.srv.Addr)
	if o.scenarios["redlock"] {
		// Independent masters for the RedLock: the main server and four more.
		r.masters = []string{r.srv.Addr}
		for range 4 {
			m, err := bench.StartRedis()
			if err != nil {
				return err
			}
			defer m.Stop()
			r.masters = append(r.masters, m.Addr)
		}
	}
	if o.linkOneWay > 0 && (o.scenarios["redlock"] || o.scenarios["fair"]) {
		// Links between hosts: links[0] is the main server's.
		for _, m := range append([]string{r.srv.Addr}, r.masters[min(1, len(r.masters)):]...) {
			l, err := bench.StartLink(m, o.linkOneWay)
			if err != nil {
				return err
			}
			defer l.Close()
			r.links = append(r.links, l.Addr())
		}
		logf("links of %v each way in front of %s", o.linkOneWay, strings.Join(r.links, ", "))
	}
	r.admin, err = bench.NewAdmin(r.srv.Addr)
	if err != nil {
		return err
	}
	defer r.admin.Close()
	r.env = collectEnv(r.admin)
	if len(r.links) > 0 {
		r.env.LinkOneWay = o.linkOneWay
	}
	r.env.LoadStart = loadAvg()
	r.env.Wake = wakeProbe(r.srv.Addr, r.srv.Pid(), r.env.Cores)
	logf("wake-up probe: %+v", r.env.Wake)

	if o.profileDir != "" {
		return r.profile()
	}

	if has(o.contenders, "redisson") {
		r.java, err = startJava(o, r.srv.Addr)
		if err != nil {
			r.javaErr = err.Error()
			logf("redisson: %v", err)
		} else {
			defer r.java.stop()
			r.env.Java, r.env.Redisson, r.env.RedissonConfig = r.java.info.Java, r.java.info.Redisson, r.java.info.Config
			logf("redisson %s on java %s: warming up for %v", r.java.info.Redisson, r.java.info.Java, o.javaWarm)
			if _, err := r.java.call(fmt.Sprintf("warmup %d", o.javaWarm.Milliseconds()), o.javaWarm+2*time.Minute); err != nil {
				r.javaErr = "warm-up: " + err.Error()
			}
		}
	}

	for round := 0; round < o.rounds; round++ {
		order := rotate(o.contenders, round)
		logf("round %d of %d, order %v", round+1, o.rounds, order)
		r.measureRTT()
		if o.scenarios["s1"] {
			for _, conc := range o.s1Conc {
				for _, c := range order {
					r.runOne("s1", conc, c)
				}
			}
		}
		if o.scenarios["s2"] {
			for _, c := range order {
				r.runOne("s2", 16, c)
			}
		}
		if o.scenarios["fam"] {
			for _, conc := range famConc {
				for _, c := range rotate(famContenders(o), round) {
					r.runOne("s1", conc, c)
				}
			}
			for _, c := range rotate(rlockAnd(o, "limit", "redisson"), round) {
				r.runOne("s5", 16, c)
			}
		}
		if o.scenarios["fair"] {
			for _, conc := range fairConc {
				for _, c := range rotate(fairContenders(o), round) {
					r.runOne("s2", conc, c)
				}
			}
			if len(r.links) > 0 { // the same through a link between hosts
				for _, c := range rotate(fairContenders(o), round) {
					r.runOne("s2-link", fairLinkConc, c)
				}
			}
		}
		if o.scenarios["sync"] {
			for _, conc := range syncConc {
				for _, c := range rotate(append(semContenders(o), "limit-sem", "limit-semplain"), round) {
					r.runOne("s1", conc, c)
				}
			}
			for _, c := range rotate(semContenders(o), round) {
				r.runOne("s2", 16, c)
			}
			for _, c := range rotate(rlockAnd(o, "redisson"), round) {
				r.runOne("latch", latchAwaiters, c)
			}
		}
		if o.scenarios["redlock"] && len(r.masters) > 0 {
			for _, n := range redlockSizes {
				for _, c := range rotate(rlockAnd(o, "limit", "redisson"), round) {
					r.runOne("redlock", n, c)
				}
			}
			for _, n := range redlockSizes {
				if len(r.links) == 0 {
					break
				}
				for _, c := range rotate(rlockAnd(o, "limit", "redisson"), round) {
					r.runOne("redlock-link", n, c) // the same through links between hosts
				}
			}
		}
		if o.scenarios["s3"] {
			for _, n := range o.s3Sizes {
				if round >= o.s3Rounds || (n >= 100000 && round >= o.s3BigRounds) {
					continue
				}
				for _, c := range order {
					if bench.Watchdogs[c] || c == "redisson" {
						r.runOne("s3", n, c)
					}
				}
			}
		}
		if o.scenarios["s4"] && round < o.s4Rounds {
			for _, c := range order {
				if c == "limit" {
					continue
				}
				r.runOne("s4", o.s4Locks, c)
				if c == "redisson" && o.redissonS4Tuned > 0 {
					r.runOne("s4", o.s4Locks, redissonTuned(o))
				}
			}
		}
	}
	r.measureRTT()
	if o.scenarios["allocs"] {
		r.runAllocs()
	}
	r.env.LoadEnd = loadAvg()
	r.env.Duration = time.Since(r.started).Round(time.Second)
	r.saveRaw()
	return r.write()
}

// raw is everything a report is made of, saved after every run so that the
// report can be rendered again (-from) without running again.
type raw struct {
	Env      envInfo                   `json:"env"`
	Cmdline  []string                  `json:"cmdline"`
	Results  map[string][]bench.Result `json:"results"`
	RTTs     []float64                 `json:"rtts"`
	RTT99s   []float64                 `json:"rtt99s"`
	LinkRTTs []float64                 `json:"link_rtts"`
	Allocs   map[string]allocResult    `json:"allocs"`
	JavaErr  string                    `json:"java_err"`
}

const rawFile = "results/tmp/last-run.json"

func (r *runner) saveRaw() {
	b, err := json.MarshalIndent(raw{r.env, os.Args[1:], r.results, r.rtts, r.rtt99s, r.linkRTTs, r.allocs, r.javaErr}, "", " ")
	if err == nil {
		_ = os.MkdirAll(filepath.Dir(rawFile), 0o755)
		err = os.WriteFile(rawFile, b, 0o644)
	}
	if err != nil {
		logf("saving %s: %v", rawFile, err)
	}
}

// render writes the report of a saved run. The flags that describe the run
// (rounds, durations…) must be those of the run; the command line shown is
// the saved one.
func (r *runner) render(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var x raw
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	r.env, r.results, r.rtts, r.rtt99s, r.linkRTTs, r.allocs, r.javaErr = x.Env, x.Results, x.RTTs, x.RTT99s, x.LinkRTTs, x.Allocs, x.JavaErr
	os.Args = append(os.Args[:1], x.Cmdline...)
	return r.write()
}

func redissonTuned(o options) string {
	return "redisson-subs" + strconv.Itoa(o.redissonS4Tuned)
}

// The family benchmarks: S1 of the read and fenced locks against the bare
// scripts and Redisson, and S5.
var famConc = []int{1, 16, 256}

func famContenders(o options) []string {
	out := []string{"rlock-read", "limit-read", "rlock-fenced", "limit-fenced"}
	if has(o.contenders, "redisson") {
		out = append(out, "redisson-read", "redisson-fenced")
	}
	return out
}

// The fair lock's hand-off: S2 (laps of parked waiters, so every hand-off
// goes to a queued waiter) at 16 and 256 waiters.
var fairConc = []int{16, 256}

// fairLinkConc is the waiters of the fair lock's S2 through a link.
const fairLinkConc = 16

func fairContenders(o options) []string {
	out := []string{"rlock-fair", "rlock"}
	if has(o.contenders, "redisson") {
		out = append(out, "redisson-fair", "redisson")
	}
	return out
}

// The synchronizers: S1 and S2 of a semaphore of one permit (Acquire(1),
// Release(1)), and the release of 1000 latch awaiters, against Redisson.
var syncConc = []int{1, 16, 256}

// The RedLock: acquire+release on one goroutine over 1 (one member's
// plain lock), 3 and 5 independent masters.
var redlockSizes = []int{1, 3, 5}

const (
	latchAwaiters = 1000
	latchRounds   = 5
)

func semContenders(o options) []string {
	out := []string{"rlock-sem"}
	if has(o.contenders, "redisson") {
		out = append(out, "redisson-sem")
	}
	return out
}

// rlockAnd returns rlock and those of peers that the run's -contenders
// include, in that order: the latch and S5 compare rlock with Redisson,
// the RedLock with the bare scripts (the floor of n concurrent script
// calls on this machine) and Redisson.
func rlockAnd(o options, peers ...string) []string {
	out := []string{"rlock"}
	for _, p := range peers {
		if has(o.contenders, p) {
			out = append(out, p)
		}
	}
	return out
}

func has(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func rotate(xs []string, k int) []string {
	if len(xs) == 0 {
		return nil
	}
	k %= len(xs)
	return append(append([]string(nil), xs[k:]...), xs[:k]...)
}

func (r *runner) measureRTT() {
	p50, p99, err := r.admin.PingRTT(context.Background(), 2000)
	if err == nil {
		r.rtts = append(r.rtts, float64(p50)/1e3)
		r.rtt99s = append(r.rtt99s, float64(p99)/1e3)
	}
}

// runOne runs one scenario for one contender and records the result.
func (r *runner) runOne(scenario string, param int, contender string) {
	ctx := context.Background()
	_ = r.admin.FlushAll(ctx)
	if strings.HasSuffix(scenario, "-link") {
		// The unit of the run's round trips, measured as the loopback's
		// (sequential PINGs, nothing else running) right before it.
		if rt, err := bench.RoundTrip(r.links[0], 100); err == nil {
			r.mu.Lock()
			r.linkRTTs = append(r.linkRTTs, float64(rt.Nanoseconds())/1e3)
			r.mu.Unlock()
		} else {
			logf("PING through the link: %v", err)
		}
	}
	t := time.Now()
	var res bench.Result
	var err error
	if strings.HasPrefix(contender, "redisson") {
		res, err = r.runJava(scenario, param, contender)
	} else {
		res, err = r.runGo(scenario, param, contender)
	}
	if err != nil {
		res = bench.Result{Error: err.Error()}
	}
	summary := fmt.Sprintf("rate=%.0f p50=%.0fµs p99=%.0fµs", res.Rate, res.P50us, res.P99us)
	switch scenario {
	case "s3":
		summary = fmt.Sprintf("scripts/s=%.0f cpu=%.1f%% mem=%.1fMB held=%d", res.ScriptPerSec, res.CPUPct, float64(res.MemBytes)/1e6, res.StillHeld)
	case "s4":
		summary = fmt.Sprintf("channels=%d numsub=%d through=%d in %.2fs mem=%.1fMB", res.Channels, res.NumSub, res.Through, res.ThroughS, float64(res.MemBytes)/1e6)
	}
	if !res.OK {
		summary = "FAILED: " + res.Error
	}
	if res.Note != "" {
		summary += " (" + res.Note + ")"
	}
	logf("%s %d %-14s %5.1fs %s", scenario, param, contender, time.Since(t).Seconds(), summary)
	r.mu.Lock()
	k := key(scenario, param, contender)
	r.results[k] = append(r.results[k], res)
	r.mu.Unlock()
}

func (r *runner) runGo(scenario string, param int, contender string) (bench.Result, error) {
	o := r.o
	ws, addr := scenario, r.srv.Addr
	switch scenario {
	case "redlock-link":
		ws = "redlock" // through the links
	case "s2-link":
		ws, addr = "s2", r.links[0]
	}
	// The worker's own statistics (INFO, PUBSUB) go straight to Redis, as
	// Java's do: through a link they would be traffic Java's runs lack.
	args := []string{"worker", "-scenario", ws, "-contender", contender, "-addr", addr, "-admin", r.srv.Addr}
	var timeout time.Duration
	switch scenario {
	case "s1", "s5":
		args = append(args, "-conc", strconv.Itoa(param), "-warm", o.s1Warm.String(), "-dur", o.s1Dur.String())
		timeout = o.s1Warm + o.s1Dur + 60*time.Second
	case "latch":
		args = append(args, "-n", strconv.Itoa(param), "-conc", strconv.Itoa(latchRounds))
		timeout = 5 * time.Minute
	case "redlock", "redlock-link":
		args = append(args, "-addrs", strings.Join(r.redlockAddrs(scenario), ","), "-conc", strconv.Itoa(param), "-warm", o.s1Warm.String(), "-dur", o.s1Dur.String())
		timeout = o.s1Warm + o.s1Dur + 60*time.Second
	case "s2", "s2-link":
		args = append(args, "-conc", strconv.Itoa(param), "-dur", o.s2Dur.String(), "-maxdur", o.s2Max.String(),
			"-minacq", strconv.Itoa(o.s2MinAcq))
		timeout = o.s2Max + 90*time.Second
	case "s3":
		args = append(args, "-n", strconv.Itoa(param), "-hold", o.s3Hold.String(), "-watchdog", o.s3Watchdog.String())
		timeout = 2*bench.AcquireTimeout + o.s3Hold + 30*time.Second
	case "s4":
		args = append(args, "-n", strconv.Itoa(param), "-per", strconv.Itoa(o.s4Per), "-settle", o.s4Settle.String(),
			"-timeout", o.s4Timeout.String())
		timeout = 2*bench.AcquireTimeout + o.s4Settle + o.s4Timeout + 30*time.Second
	}
	return runWorker(r.self, args, timeout)
}

// redlockAddrs returns the masters a RedLock scenario reaches: directly
// on loopback, or through the delaying links.
func (r *runner) redlockAddrs(scenario string) []string {
	if scenario == "redlock-link" {
		return r.links[:len(r.masters)]
	}
	return r.masters
}

func runWorker(self string, args []string, timeout time.Duration) (bench.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &limitWriter{w: &stderr, n: 4096}
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return bench.Result{}, fmt.Errorf("worker did not finish within %v", timeout)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	var res bench.Result
	if jerr := json.Unmarshal([]byte(last), &res); jerr != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		if err == nil {
			err = jerr
		}
		return bench.Result{}, fmt.Errorf("worker: %v: %s", err, msg)
	}
	return res, nil
}

type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		q := p
		if len(q) > l.n {
			q = q[:l.n]
		}
		l.n -= len(q)
		_, _ = l.w.Write(q)
	}
	return len(p), nil
}

func (r *runner) runJava(scenario string, param int, contender string) (bench.Result, error) {
	if r.java == nil || r.java.dead() {
		msg := r.javaErr
		if msg == "" {
			msg = "the JVM is gone"
		}
		return bench.Result{}, errors.New("redisson: " + msg)
	}
	o := r.o
	var line string
	var timeout time.Duration
	switch scenario {
	case "s1":
		line = fmt.Sprintf("s1 %d %d %d", param, o.s1Warm.Milliseconds(), o.s1Dur.Milliseconds())
		if kind, ok := strings.CutPrefix(contender, "redisson-"); ok {
			line += " " + kind // read, fenced
		}
		timeout = o.s1Warm + o.s1Dur + 30*time.Second
	case "latch":
		line = fmt.Sprintf("latch %d %d", param, latchRounds)
		timeout = 5 * time.Minute
	case "redlock", "redlock-link":
		line = fmt.Sprintf("redlock %d %d %d %s", param, o.s1Warm.Milliseconds(), o.s1Dur.Milliseconds(), strings.Join(r.redlockAddrs(scenario), ","))
		timeout = o.s1Warm + o.s1Dur + 60*time.Second
	case "s5":
		line = fmt.Sprintf("s5 %d %d %d", param, o.s1Warm.Milliseconds(), o.s1Dur.Milliseconds())
		timeout = o.s1Warm + o.s1Dur + 60*time.Second
	case "s2", "s2-link":
		line = fmt.Sprintf("s2 %d %d %d %d %d %d", param, o.s1Warm.Milliseconds(), o.s2Dur.Milliseconds(), o.s2Max.Milliseconds(), o.s2MinAcq, 100)
		kind, ok := strings.CutPrefix(contender, "redisson-")
		if !ok {
			kind = "lock"
		}
		line += " " + kind // lock, fair, sem
		if scenario == "s2-link" {
			line += " " + r.links[0]
		}
		timeout = o.s2Max + 90*time.Second
	case "s3":
		line = fmt.Sprintf("s3 %d %d %d", param, o.s3Watchdog.Milliseconds(), o.s3Hold.Milliseconds())
		timeout = 200*time.Second + o.s3Hold
	case "s4":
		subs := 0
		if contender != "redisson" {
			subs = o.redissonS4Tuned
		}
		line = fmt.Sprintf("s4 %d %d %d %d %d", param, o.s4Per, o.s4Settle.Milliseconds(), o.s4Timeout.Milliseconds(), subs)
		timeout = 200*time.Second + o.s4Timeout
	}
	res, err := r.java.call(line, timeout)
	if err != nil {
		r.javaErr = err.Error()
	}
	return res, err
}

// ---- Java worker ----

type javaInfo struct {
	OK       bool   `json:"ok"`
	Java     string `json:"java"`
	Redisson string `json:"redisson"`
	Config   string `json:"config"`
}

type javaWorker struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	info  javaInfo
	mu    sync.Mutex
	gone  bool
}

func startJava(o options, addr string) (*javaWorker, error) {
	dir, err := filepath.Abs(o.javaDir)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("java not found (make deps-java installs it)")
	}
	logf("building the Java benchmark (%s/build.sh)", dir)
	build := exec.Command("bash", filepath.Join(dir, "build.sh"))
	var berr strings.Builder
	build.Stderr = &limitWriter{w: &berr, n: 4000}
	if out, err := build.Output(); err != nil {
		return nil, fmt.Errorf("build.sh: %v: %s %s", err, strings.TrimSpace(string(out)), strings.TrimSpace(berr.String()))
	}
	cp := filepath.Join(dir, "target", "driver.jar") + ":" + filepath.Join(dir, "target", "lib-"+o.javaVersion, "*")
	cmd := exec.Command("java", "-cp", cp, "Bench", addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = &limitWriter{w: os.Stderr, n: 1 << 16}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	j := &javaWorker{cmd: cmd, in: in, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			j.lines <- sc.Text()
		}
		close(j.lines)
	}()
	if _, err := io.WriteString(in, "info\n"); err != nil {
		j.stop()
		return nil, err
	}
	select {
	case l, ok := <-j.lines:
		if !ok || json.Unmarshal([]byte(l), &j.info) != nil || !j.info.OK {
			j.stop()
			return nil, fmt.Errorf("Bench did not start: %q", l)
		}
	case <-time.After(60 * time.Second):
		j.stop()
		return nil, errors.New("Bench did not answer within 60s")
	}
	return j, nil
}

func (j *javaWorker) dead() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.gone
}

func (j *javaWorker) call(line string, timeout time.Duration) (bench.Result, error) {
	if _, err := io.WriteString(j.in, line+"\n"); err != nil {
		j.stop()
		return bench.Result{}, err
	}
	select {
	case l, ok := <-j.lines:
		if !ok {
			j.stop()
			return bench.Result{}, errors.New("the JVM exited")
		}
		var res bench.Result
		if err := json.Unmarshal([]byte(l), &res); err != nil {
			return bench.Result{}, fmt.Errorf("bad reply %q: %v", l, err)
		}
		return res, nil
	case <-time.After(timeout):
		j.stop()
		return bench.Result{}, fmt.Errorf("no reply within %v (JVM stopped)", timeout)
	}
}

func (j *javaWorker) stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.gone {
		return
	}
	j.gone = true
	_, _ = io.WriteString(j.in, "quit\n")
	_ = j.in.Close()
	done := make(chan struct{})
	go func() { _ = j.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = j.cmd.Process.Kill()
		<-done
	}
}

// ---- allocations: go test -bench ----

func (r *runner) runAllocs() {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	logf("allocation benchmarks: go test -run '^$' -bench '^BenchmarkS1_' -benchmem -benchtime %s .", r.o.benchtime)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "test", "-run", "^$", "-bench", "^BenchmarkS1_", "-benchmem",
		"-benchtime", r.o.benchtime, "-count", "1", ".")
	cmd.Env = append(os.Environ(), "BENCH_REDIS_ADDR="+r.srv.Addr)
	out, err := cmd.CombinedOutput()
	parsed := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.HasPrefix(f[0], "BenchmarkS1_") {
			continue
		}
		name := strings.TrimPrefix(f[0], "BenchmarkS1_") // contender/g1-2
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
		var a allocResult
		for i := 2; i+1 < len(f); i += 2 {
			v, _ := strconv.ParseFloat(f[i], 64)
			switch f[i+1] {
			case "ns/op":
				a.NsPerOp = v
			case "B/op":
				a.BytesPerOp = v
			case "allocs/op":
				a.AllocsPerOp = v
			}
		}
		r.allocs[name] = a
		parsed++
	}
	if err != nil || parsed == 0 {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 400 {
			msg = msg[len(msg)-400:]
		}
		logf("allocation benchmarks: %v: %s", err, msg)
		for _, c := range bench.Names {
			for _, g := range []string{"/g1", "/g16"} {
				if _, ok := r.allocs[c+g]; !ok {
					r.allocs[c+g] = allocResult{Err: fmt.Sprintf("go test: %v", err)}
				}
			}
		}
	}
	for _, c := range bench.Names {
		for _, g := range []string{"/g1", "/g16"} {
			if a, ok := r.allocs[c+g]; ok {
				logf("allocs %-16s %.0f ns/op %.0f B/op %.1f allocs/op %s", c+g, a.NsPerOp, a.BytesPerOp, a.AllocsPerOp, a.Err)
			}
		}
	}
}

// ---- profiling ----

func (r *runner) profile() error {
	dir := r.o.profileDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	runs := []struct {
		name string
		args []string
	}{
		{"s1-256", []string{"-scenario", "s1", "-conc", "256", "-dur", "5s"}},
		{"s1-1", []string{"-scenario", "s1", "-conc", "1", "-dur", "5s"}},
		{"s2", []string{"-scenario", "s2", "-conc", "16", "-dur", "5s"}},
	}
	for _, run := range runs {
		_ = r.admin.FlushAll(context.Background())
		cpu := filepath.Join(dir, "rlock-"+run.name+".cpu.pprof")
		mem := filepath.Join(dir, "rlock-"+run.name+".allocs.pprof")
		args := append([]string{"worker", "-contender", "rlock", "-addr", r.srv.Addr, "-cpuprofile", cpu, "-memprofile", mem}, run.args...)
		res, err := runWorker(r.self, args, 2*time.Minute)
		if err != nil {
			return err
		}
		logf("profile %s: rate %.0f/s p50 %.0fµs (cpu: %s, allocs: %s)", run.name, res.Rate, res.P50us, cpu, mem)
		for _, p := range []struct{ file, flag string }{{cpu, ""}, {mem, "-sample_index=alloc_objects"}} {
			args := []string{"tool", "pprof", "-top", "-nodecount=30"}
			if p.flag != "" {
				args = append(args, p.flag)
			}
			out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append(args, p.file)...).CombinedOutput()
			if err != nil {
				logf("pprof: %v", err)
			}
			_ = os.WriteFile(strings.TrimSuffix(p.file, ".pprof")+".top.txt", out, 0o644)
		}
	}
	return nil
}
