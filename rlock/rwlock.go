package rlock

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/engine"
	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/scripts"
)

// ReadWriteLock is Redisson's RReadWriteLock (getReadWriteLock, PROTOCOL.md
// 5): one Redis hash whose "mode" field is "read" or "write". Many owners
// may hold its ReadLock at once; its WriteLock excludes every other owner's
// read and write holds. Both are reentrant. An owner that holds the write
// lock may also take the read lock (and release the two in either order:
// releasing the write lock first leaves a read hold, a downgrade); an owner
// that holds only the read lock cannot take the write lock (no upgrade: it
// would wait for itself).
//
// Each read hold has its own timeout key, "{<name>}:<clientId>:<ownerId>:
// rwlock_timeout:<n>", whose TTL is that hold's lease; the hash lives as
// long as the longest of them, so one reader's expiring lease does not free
// the lock while another reader holds. A read unlock publishes "0" on
// "redisson_rwlock:{<name>}" (it wakes one waiter) when the lock is freed;
// a write unlock publishes "1" (it wakes every waiter, so that all waiting
// readers get in). No order is kept among waiters: a stream of readers can
// keep a writer waiting.
type ReadWriteLock struct {
	name  string
	read  *ReadLock
	write *WriteLock
}

// ReadLock is the shared side of a ReadWriteLock.
type ReadLock struct{ base }

// WriteLock is the exclusive side of a ReadWriteLock.
type WriteLock struct{ base }

// ReadWriteLock returns the read-write lock called name (Redisson's
// getReadWriteLock(name)). It is cheap and does no I/O.
func (c *Client) ReadWriteLock(name string) *ReadWriteLock {
	channel := RWLockChannelName(name)
	r := &ReadLock{c.newBase(name, KindReadLock)}
	w := &WriteLock{c.newBase(name, KindWriteLock)}
	w.write = true
	r.forceMode, w.forceMode = "read", "write"
	w.forceMsg = "1"
	if r.err == nil {
		publish := c.eng.Publish
		keyPrefix := names.KeyPrefix(name)
		// The read scripts name the owner's timeout keys and its write
		// field: kept for the owner that used them last, so that one
		// goroutine's lock and unlock build them once.
		var last atomic.Pointer[readKeys]
		keysOf := func(field string) *readKeys {
			if k := last.Load(); k != nil && k.field == field {
				return k
			}
			k := &readKeys{field: field, prefix: names.ReadTimeoutPrefix(name, field), write: field + ":write"}
			last.Store(k)
			return k
		}
		r.spec = &engine.Spec{
			Kind:      kindRead,
			Name:      name,
			Channel:   channel,
			UnlockTTL: true,
			Prefix:    func(field string) string { return keysOf(field).prefix },
			Acquire:   scripts.ReadAcquire,
			AcquireKeys: func(dst []string, field, fence string) []string {
				return append(dst, name, keysOf(field).prefix, fence)
			},
			AcquireArgs: func(dst []string, a engine.Attempt) []string {
				return append(dst, a.LeaseMs, a.Field, keysOf(a.Field).write, a.Expected, engine.FenceTTLArg())
			},
			Unlock: scripts.ReadUnlock,
			UnlockKeys: func(dst []string, field, fence string) []string {
				return append(dst, name, channel, keysOf(field).prefix, keyPrefix, fence)
			},
			UnlockArgs: func(dst []string, field, _, expected string) []string {
				return append(dst, field, publish, expected, engine.FenceTTLArg())
			},
		}
		w.spec = &engine.Spec{
			Kind:        kindWrite,
			Name:        name,
			Channel:     channel,
			Acquire:     scripts.WriteAcquire,
			AcquireKeys: func(dst []string, _, fence string) []string { return append(dst, name, fence) },
			AcquireArgs: func(dst []string, a engine.Attempt) []string {
				return append(dst, a.LeaseMs, a.Field, a.Expected, engine.FenceTTLArg())
			},
			Unlock:     scripts.WriteUnlock,
			UnlockKeys: func(dst []string, _, fence string) []string { return append(dst, name, channel, fence) },
			UnlockArgs: func(dst []string, field, leaseMs, expected string) []string {
				return append(dst, "1", leaseMs, field, publish, expected, engine.FenceTTLArg())
			},
		}
		r.locked = func(ctx context.Context) (bool, error) {
			var n int64
			err := c.read(ctx, func(ctx context.Context) (err error) {
				n, err = scripts.ReadLocked.Exec(ctx, c.rc, []string{name}, nil).AsInt64()
				return err
			})
			if err != nil {
				return false, fmt.Errorf("rlock: %q: %w", name, err)
			}
			return n == 1, nil
		}
		w.locked = func(ctx context.Context) (bool, error) {
			var mode string
			err := c.read(ctx, func(ctx context.Context) (err error) {
				mode, err = c.rc.Do(ctx, c.rc.B().Hget().Key(name).Field("mode").Build()).ToString()
				return err
			})
			if rueidis.IsRedisNil(err) {
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("rlock: %q: %w", name, err)
			}
			return mode == "write", nil
		}
	}
	return &ReadWriteLock{name: name, read: r, write: w}
}

// readKeys are the names a read hold's scripts use for one owner field.
type readKeys struct{ field, prefix, write string }

// Name returns the lock's name, its Redis key.
func (rw *ReadWriteLock) Name() string { return rw.name }

// ReadLock returns the shared side (Redisson's readLock()).
func (rw *ReadWriteLock) ReadLock() *ReadLock { return rw.read }

// WriteLock returns the exclusive side (Redisson's writeLock()).
func (rw *ReadWriteLock) WriteLock() *WriteLock { return rw.write }
