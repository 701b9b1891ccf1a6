package rlock_test

import (
	"context"
	"testing"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// BenchmarkRedLock: acquire+release of a RedLock over 3 and 5 independent
// masters, against one member alone (the target: 3 masters within
// 1.5x one member), and a fair lock's uncontended pair.
func BenchmarkRedLock(b *testing.B) {
	srv := redistest.Masters(b, 5)
	var cs []*rlock.Client
	for _, s := range srv {
		rc, err := s.Client()
		if err != nil {
			b.Fatal(err)
		}
		c, err := rlock.New(rc)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(); rc.Close() })
		cs = append(cs, c)
	}
	ctx := context.Background()
	members := func(n int, name string) []rlock.Locker {
		var ls []rlock.Locker
		for _, c := range cs[:n] {
			ls = append(ls, c.Lock(name))
		}
		return ls
	}
	cases := []struct {
		name string
		l    rlock.Locker
	}{
		{"one-member", cs[0].Lock("bench-one")},
		{"redlock-3", rlock.NewRedLock(members(3, "bench-red3")...)},
		{"redlock-5", rlock.NewRedLock(members(5, "bench-red5")...)},
		{"multilock-3", rlock.NewMultiLock(members(3, "bench-multi3")...)},
		{"fair", cs[0].FairLock("bench-fair")},
	}
	for _, k := range cases {
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
