package rlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/rlock"
)

func TestSyncLocker(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	var mu sync.Locker = rlock.SyncLocker(rlock.WithOwner(context.Background(), 1), c.Lock("sync-locker"))
	var inside, overlaps, sections atomic.Int32
	var wg sync.WaitGroup
	for i := range 4 {
		// Each goroutine its own owner: they exclude each other.
		l := rlock.SyncLocker(rlock.WithOwner(context.Background(), int64(10+i)), c.Lock("sync-locker"))
		wg.Go(func() {
			for range 10 {
				l.Lock()
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				sections.Add(1)
				inside.Add(-1)
				l.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(40), sections.Load())
	assert.Zero(t, overlaps.Load(), "two owners inside at once")
	mu.Lock()
	mu.Unlock()
	// An Unlock that fails panics with the error.
	defer func() {
		r := recover()
		err, ok := r.(error)
		require.True(t, ok, "panic value %v", r)
		assert.True(t, errors.Is(err, rlock.ErrNotHeld), "%v", err)
	}()
	mu.Unlock()
}
