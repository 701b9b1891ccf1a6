package rlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/goredisson/locks/rlock"
)

// benchClient returns a lock client on a fresh standalone server.
func benchClient(b *testing.B) *rlock.Client {
	b.Helper()
	srv := redistestStandalone(b)
	rc, err := srv.Client()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rc.Close)
	c, err := rlock.New(rc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// BenchmarkLockUnlock measures an uncontended Lock+Unlock pair (watchdog
// lease), each goroutine on its own lock name.
func BenchmarkLockUnlock(b *testing.B) {
	c := benchClient(b)
	var n atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		l := c.Lock("bench-" + strconv.FormatInt(n.Add(1), 10))
		for pb.Next() {
			if err := l.Lock(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkLockUnlockSerial is BenchmarkLockUnlock on one goroutine.
func BenchmarkLockUnlockSerial(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	l := c.Lock("bench-serial")
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
