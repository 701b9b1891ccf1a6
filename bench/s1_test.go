package bench_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/goredisson/locks/bench"
)

// addr is the Redis the benchmarks use: $BENCH_REDIS_ADDR (the runner
// passes its own), or a throwaway redis-server started by TestMain.
var addr string

func TestMain(m *testing.M) {
	addr = os.Getenv("BENCH_REDIS_ADDR")
	var srv *bench.Server
	if addr == "" {
		var err error
		srv, err = bench.StartRedis()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		addr = srv.Addr
	}
	code := m.Run()
	srv.Stop()
	os.Exit(code)
}

// benchS1 measures uncontended Lock+Unlock pairs of a contender, each
// goroutine on its own lock name: g1 is one goroutine, g16 is 16 goroutines
// (RunParallel, like rlock's own BenchmarkLockUnlock with GOMAXPROCS 2).
// With -benchmem, allocs/op is the allocations of one pair, including the
// client's background goroutines.
func benchS1(b *testing.B, contender string) {
	b.Run("g1", func(b *testing.B) { benchS1Par(b, contender, 0) })
	b.Run("g16", func(b *testing.B) { benchS1Par(b, contender, 16) })
}

func benchS1Par(b *testing.B, contender string, goroutines int) {
	c, err := bench.New(contender, bench.Config{Addr: addr})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var seq atomic.Int64
	newMutex := func() bench.Mutex {
		m := c.NewMutex(fmt.Sprintf("bench:s1:%s:%d:%d", contender, b.N, seq.Add(1)), 0)
		for range 100 { // warm: connections, script cache
			if err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return m
	}
	pair := func(m bench.Mutex) bool {
		if err := m.Lock(ctx); err != nil {
			b.Error(err)
			return false
		}
		if err := m.Unlock(ctx); err != nil {
			b.Error(err)
			return false
		}
		return true
	}
	b.ReportAllocs()
	if goroutines == 0 {
		m := newMutex()
		b.ResetTimer()
		for b.Loop() {
			if !pair(m) {
				return
			}
		}
		return
	}
	p := (goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	pool := make(chan bench.Mutex, p*runtime.GOMAXPROCS(0))
	for range cap(pool) {
		pool <- newMutex()
	}
	b.SetParallelism(p)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		m := <-pool
		for pb.Next() {
			if !pair(m) {
				return
			}
		}
	})
}

func BenchmarkS1_rlock(b *testing.B)       { benchS1(b, "rlock") }
func BenchmarkS1_limit(b *testing.B)       { benchS1(b, "limit") }
func BenchmarkS1_bsm(b *testing.B)         { benchS1(b, "bsm") }
func BenchmarkS1_redsync(b *testing.B)     { benchS1(b, "redsync") }
func BenchmarkS1_rueidislock(b *testing.B) { benchS1(b, "rueidislock") }
