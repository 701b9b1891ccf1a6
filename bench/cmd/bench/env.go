package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/goredisson/locks/bench"
)

type envInfo struct {
	CPU, Kernel, Mem, Redis, Go, Java, Redisson, RedissonConfig string
	Library                                                     string // git commit of the library under test
	Cores                                                       int
	Date                                                        time.Time
	LoadStart, LoadEnd                                          string
	Duration                                                    time.Duration
	// Wake is the wake-up probe (wakeProbe): sequential PINGs from a
	// client on Redis's own CPU and on another one.
	Wake wakeInfo
	// LinkOneWay is the delay the links add in each direction (0: no
	// links).
	LinkOneWay time.Duration
}

// wakeInfo is the mean round trip of one client's sequential PINGs
// (redis-benchmark -c 1), in µs, with the client pinned to the CPU
// redis-server is pinned to (Same) and to another CPU (Other); Err says
// why it was not measured.
type wakeInfo struct {
	Same, Other float64
	Err         string
}

func collectEnv(a *bench.Admin) envInfo {
	e := envInfo{Cores: runtime.NumCPU(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, Date: time.Now().UTC()}
	e.Redis = a.RedisVersion(context.Background())
	e.Library = libraryVersion()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				e.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				e.Mem = strings.TrimSpace(v)
			}
		}
	}
	return e
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// libraryVersion describes the checkout of the library under test (the
// replace directive points at ..): its commit, and whether its packages
// have uncommitted changes.
func libraryVersion() string {
	out, err := exec.Command("git", "-C", "..", "log", "-1", "--format=%h %cd %s", "--date=format:%Y-%m-%d %H:%M").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	v := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--", "rlock", "watchdog", "pubsub", "scripts").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		v += " (with uncommitted changes in the library packages)"
	}
	return v
}

// wakeProbe measures what a round trip costs when the client and Redis
// run on one CPU and when each has its own: redis-server is pinned to
// CPU 0 for the probe (and given every CPU back after it), and
// redis-benchmark sends 20,000 sequential PINGs from CPU 0, then from
// CPU 1. On a machine where a sleeping CPU takes long to wake (a virtual
// machine's idle vCPU), the second costs the first plus two such
// wake-ups, and every client's one-goroutine figures are bound by it.
func wakeProbe(addr string, pid, cores int) wakeInfo {
	if cores < 2 {
		return wakeInfo{Err: "one CPU"}
	}
	for _, b := range []string{"taskset", "redis-benchmark"} {
		if _, err := exec.LookPath(b); err != nil {
			return wakeInfo{Err: b + " not found"}
		}
	}
	host, port, _ := strings.Cut(addr, ":")
	p := strconv.Itoa(pid)
	if out, err := exec.Command("taskset", "-p", "-c", "0", p).CombinedOutput(); err != nil {
		return wakeInfo{Err: "pinning redis-server: " + strings.TrimSpace(string(out))}
	}
	defer exec.Command("taskset", "-p", "-c", "0-"+strconv.Itoa(cores-1), p).Run()
	mean := func(cpu string) (float64, error) {
		out, err := exec.Command("taskset", "-c", cpu, "redis-benchmark", "-h", host, "-p", port,
			"-c", "1", "-n", "20000", "-t", "ping", "--csv").Output()
		if err != nil {
			return 0, err
		}
		// "PING_MBULK","rps","avg_latency_ms",...
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Split(l, ",")
			if len(f) > 2 && strings.Trim(f[0], `"`) == "PING_MBULK" {
				ms, err := strconv.ParseFloat(strings.Trim(f[2], `"`), 64)
				return ms * 1000, err
			}
		}
		return 0, fmt.Errorf("no PING_MBULK line in %q", out)
	}
	var w wakeInfo
	var err error
	if w.Same, err = mean("0"); err == nil {
		w.Other, err = mean("1")
	}
	if err != nil {
		return wakeInfo{Err: "redis-benchmark: " + err.Error()}
	}
	return w
}
