package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/goredisson/locks/bench"
	"github.com/goredisson/locks/rlock"
)

// workerMain runs one scenario for one Go contender in this process and
// prints its Result as one JSON line on stdout. The runner starts one
// worker process per run, so CPU and memory figures cover one contender
// only, and a crash is one failed run.
func workerMain(args []string) {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	var (
		scenario  = fs.String("scenario", "s1", "s1, s2, s3 or s4")
		contender = fs.String("contender", "rlock", "Go contender")
		addr      = fs.String("addr", "", "redis address")
		addrs     = fs.String("addrs", "", "comma-separated independent masters (redlock)")
		admin     = fs.String("admin", "", "the address for the run's own statistics (INFO, PUBSUB; default -addr): the server itself when -addr is a link")
		conc      = fs.Int("conc", 1, "goroutines (s1, s2)")
		warm      = fs.Duration("warm", 300*time.Millisecond, "warm-up before measuring (s1, s2)")
		dur       = fs.Duration("dur", 2*time.Second, "measured time (s1, s2)")
		cs        = fs.Duration("cs", 100*time.Microsecond, "critical section (s2)")
		maxDur    = fs.Duration("maxdur", 0, "longest measured time (s2; default 3×dur)")
		minAcq    = fs.Int64("minacq", 300, "handoffs wanted (s2)")
		n         = fs.Int("n", 10000, "locks (s3, s4)")
		per       = fs.Int("per", 10, "waiters per lock (s4)")
		watchdog  = fs.Duration("watchdog", 3*time.Second, "watchdog timeout (s3)")
		hold      = fs.Duration("hold", 5*time.Second, "hold window (s3)")
		settle    = fs.Duration("settle", 2*time.Second, "time for waiters to settle (s4)")
		timeout   = fs.Duration("timeout", 60*time.Second, "time allowed to get through (s4)")
		cpuprof   = fs.String("cpuprofile", "", "write a CPU profile of the run")
		memprof   = fs.String("memprofile", "", "write an allocation profile of the run")
	)
	_ = fs.Parse(args)
	if *admin == "" {
		*admin = *addr
	}
	out := json.NewEncoder(os.Stdout)
	res := func() (r bench.Result) {
		defer func() {
			if p := recover(); p != nil {
				r = bench.Result{Error: fmt.Sprintf("panic: %v", p)}
			}
		}()
		if *memprof != "" {
			runtime.MemProfileRate = 4096
		}
		if *cpuprof != "" {
			f, err := os.Create(*cpuprof)
			if err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer pprof.StopCPUProfile()
		}
		if *memprof != "" {
			defer func() {
				f, err := os.Create(*memprof)
				if err == nil {
					_ = pprof.Lookup("allocs").WriteTo(f, 0)
					f.Close()
				}
			}()
		}
		cfg := bench.Config{Addr: *addr}
		if *scenario == "s3" {
			cfg.Watchdog = *watchdog
		}
		prefix := *scenario + ":" + *contender + ":"
		switch *scenario {
		case "s1":
			c, err := bench.New(*contender, cfg)
			if err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer c.Close()
			a, err := bench.NewAdmin(*admin)
			if err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer a.Close()
			return bench.S1(c, a, prefix, *conc, *warm, *dur)
		case "s2":
			c1, err := bench.New(*contender, cfg)
			if err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer c1.Close()
			c2, err := bench.New(*contender, cfg)
			if err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer c2.Close()
			if *maxDur < *dur {
				*maxDur = 3 * *dur
			}
			a, err := bench.NewAdmin(*admin)
			if err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer a.Close()
			return bench.S2Min(c1, c2, a, prefix+"lock", *conc, *warm, *dur, *maxDur, *minAcq, *cs)
		case "redlock":
			if *contender == "limit" {
				return bench.RedLockLimitPairs(strings.Split(*addrs, ","), *conc, *warm, *dur)
			}
			return bench.RedLockPairs(strings.Split(*addrs, ","), *conc, *warm, *dur)
		case "latch":
			c, err := bench.New("rlock", cfg)
			if err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer c.Close()
			return c.(interface {
				Latch(name string, n, rounds int) bench.Result
			}).Latch(prefix+"latch", *n, *conc)
		case "s5":
			c, err := bench.New(*contender, cfg)
			if err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer c.Close()
			return bench.S5(c, prefix+"rw", *conc, *warm, *dur)
		case "s3", "s4":
			a, err := bench.NewAdmin(*admin)
			if err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer a.Close()
			c, err := bench.New(*contender, cfg)
			if err != nil {
				return bench.Result{Error: err.Error()}
			}
			defer c.Close()
			if *scenario == "s3" {
				period := *watchdog / 3 // rlock, Redisson: timeout/3
				if *contender == "rueidislock" {
					period = *watchdog / 2 // ExtendInterval default: validity/2
				}
				return bench.S3(c, a, prefix, *n, *hold, period)
			}
			return bench.S4(c, a, prefix, *n, *per, *settle, *timeout, rlock.ChannelName)
		}
		return bench.Result{Error: "unknown scenario " + *scenario}
	}()
	_ = out.Encode(res)
}
