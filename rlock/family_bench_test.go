package rlock_test

import (
	"context"
	"testing"

	"github.com/goredisson/locks/rlock"
)

func BenchmarkFamilyPairs(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	for _, k := range []struct {
		name string
		l    rlock.Locker
	}{{"read", c.ReadWriteLock("ba-r").ReadLock()}, {"write", c.ReadWriteLock("ba-w").WriteLock()}, {"fenced", c.FencedLock("ba-f")}, {"spin", c.SpinLock("ba-s")}, {"plain", c.Lock("ba-p")}} {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if err := k.l.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := k.l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
