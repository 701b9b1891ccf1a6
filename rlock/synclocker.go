package rlock

import (
	"context"
	"fmt"
	"sync"
)

// SyncLocker adapts l to Go's [sync.Locker], for code that expects one
// (etcd's concurrency.NewLocker is the model). Every Lock and Unlock runs
// with ctx, so the owner is ctx's owner: give it one with [WithOwner] when
// Lock and Unlock run on different goroutines (a goroutine owner must
// unlock on the goroutine that locked).
//
// sync.Locker has no way to report an error: a Lock or Unlock that fails
// (ctx ended, Redis unreachable, the hold lost) panics with the error,
// which wraps the package's errors as usual. Code that must handle those
// errors should call l's methods directly.
func SyncLocker(ctx context.Context, l Locker) sync.Locker {
	return &syncLocker{ctx: ctx, l: l}
}

type syncLocker struct {
	ctx context.Context
	l   Locker
}

func (s *syncLocker) Lock() {
	if err := s.l.Lock(s.ctx); err != nil {
		panic(fmt.Errorf("rlock: SyncLocker(%q).Lock: %w", s.l.Name(), err))
	}
}

func (s *syncLocker) Unlock() {
	if err := s.l.Unlock(s.ctx); err != nil {
		panic(fmt.Errorf("rlock: SyncLocker(%q).Unlock: %w", s.l.Name(), err))
	}
}
