package rlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/goredisson/locks/rlock"
)

// BenchmarkLockUnlock measures an uncontended Lock+Unlock pair (watchdog
// lease), each goroutine on its own lock name.
func BenchmarkLockUnlock(b *testing.B) {
	srv := redistestStandalone(b)
	rc, err := srv.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	c, err := rlock.New(rc)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
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
	srv := redistestStandalone(b)
	rc, err := srv.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	c, err := rlock.New(rc)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
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
