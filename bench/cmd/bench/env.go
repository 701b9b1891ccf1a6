package main

import (
	"context"
	"os"
	"os/exec"
	"runtime"
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
