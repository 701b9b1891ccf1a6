package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// famLocker is what the family matrix needs of a lock.
type famLocker interface {
	rlock.Locker
	HoldCount(context.Context) (int, error)
	ForceUnlock(context.Context) (bool, error)
}

// famKind is a member of the family in the matrix: its lock, its scripts
// and its owner field.
type famKind struct {
	name            string
	lock            func(c *rlock.Client, name string) famLocker
	acquire         *scripts.Script
	unlock          *scripts.Script
	renew           *scripts.Script
	force           *scripts.Script // nil: scripts.ForceUnlock
	field           func(c *rlock.Client, owner int64) string
	shared          bool // a second owner of the same kind may hold too (read)
	onlyAcquire     bool // the kind adds nothing to the plain lock's unlock, force and renewal (but see spins)
	spins           bool // and its unlock and force unlock publish nothing: faulted too
	checkTokenExact bool
	fair            bool // a fair lock: its queue must end empty
}

var famKinds = []famKind{
	{
		name:    "plain",
		lock:    func(c *rlock.Client, n string) famLocker { return c.Lock(n) },
		acquire: scripts.Acquire, unlock: scripts.Unlock, renew: scripts.Renew,
		field: field,
	},
	{
		name:    "read",
		lock:    func(c *rlock.Client, n string) famLocker { return c.ReadWriteLock(n).ReadLock() },
		acquire: scripts.ReadAcquire, unlock: scripts.ReadUnlock, renew: scripts.RenewRead,
		field:  field,
		shared: true,
	},
	{
		name:    "write",
		lock:    func(c *rlock.Client, n string) famLocker { return c.ReadWriteLock(n).WriteLock() },
		acquire: scripts.WriteAcquire, unlock: scripts.WriteUnlock, renew: scripts.Renew,
		field: func(c *rlock.Client, o int64) string { return field(c, o) + ":write" },
	},
	{
		name:    "fenced",
		lock:    func(c *rlock.Client, n string) famLocker { return c.FencedLock(n) },
		acquire: scripts.Acquire, unlock: scripts.Unlock, renew: scripts.Renew,
		field: field, onlyAcquire: true, checkTokenExact: true,
	},
	{
		name:    "nonreentrant",
		lock:    func(c *rlock.Client, n string) famLocker { return c.NonReentrantLock(n) },
		acquire: scripts.Acquire, unlock: scripts.Unlock, renew: scripts.Renew,
		field: field, onlyAcquire: true,
	},
	{
		name:    "fair",
		lock:    func(c *rlock.Client, n string) famLocker { return c.FairLock(n) },
		acquire: scripts.FairAcquire, unlock: scripts.FairUnlock, renew: scripts.Renew, force: scripts.FairForceUnlock,
		field: field, fair: true,
	},
	{
		name: "spin",
		// A slow constant back-off: the fault is injected and the holder
		// unlocks between two attempts (one in flight at the unlock
		// would take the lock past the fault).
		lock: func(c *rlock.Client, n string) famLocker {
			return c.SpinLock(n, rlock.WithConstantBackOff(300*time.Millisecond))
		},
		acquire: scripts.Acquire, unlock: scripts.Unlock, renew: scripts.Renew,
		field: field, onlyAcquire: true, spins: true,
	},
}

// TestFaultMatrix injects each fault (request dropped, reply lost, request
// late, connection killed mid-call, and the refusals) into each kind of
// script call of
// every lock kind (plain, read, write, fair: every script; fenced: first,
// waiting and re-entrant grants; non-reentrant: acquires and the refused
// re-acquire; spin: acquires, unlock and force unlock, which publish
// nothing) and checks the invariants: the count in Redis is what the
// caller was told, no second owner gets in while the first holds, no hold
// is orphaned, no renewal follows an unlock, and nothing is left behind;
// for the fenced lock, the token a Lock returns is the one its grant
// issued, even when the reply was lost.
func TestFaultMatrix(t *testing.T) {
	srv := standaloneLocal(t)
	probe := redistest.NewFaulty(must(srv.Client()))
	defer probe.Client.Close()
	rules := matrixFaults(t, probe, srv)
	ctx := context.Background()
	me := rlock.WithOwner(ctx, 1)

	for _, k := range famKinds {
		count := func(e *matrixEnv, name string) int64 {
			msg, err := e.srv.Do(ctx, "HGET", name, k.field(e.c, 1))
			if err != nil {
				return 0
			}
			n, _ := msg.AsInt64()
			return n
		}
		// excluded checks that another service's owner cannot take what
		// the first holds (a write lock: readers excluded by writers and
		// the other way round).
		excluded := func(t *testing.T, e *matrixEnv, name string) {
			t.Helper()
			var l famLocker = k.lock(e.other, name)
			if k.shared {
				l = e.other.ReadWriteLock(name).WriteLock()
			}
			ok, err := l.TryLock(ctx, 0, 0)
			require.NoError(t, err)
			assert.False(t, ok, "a second owner got in")
		}
		settled := func(t *testing.T, e *matrixEnv, name string) {
			t.Helper()
			e.settled(t, name)
			if k.fair {
				assert.Equal(t, int64(0), doInt(t, e.srv, "EXISTS", rlock.FairQueueName(name), rlock.FairTimeoutName(name)), "a waiter was left in the queue")
			}
			keys, err := e.srv.Do(ctx, "KEYS", "{"+name+"}:*")
			require.NoError(t, err)
			left, _ := keys.AsStrSlice()
			assert.Empty(t, left, "read timeout keys left behind")
		}

		for _, rule := range rules {
			t.Run(k.name+"/first acquire/"+ruleName(rule), func(t *testing.T) {
				e := newMatrixEnv(t, srv)
				name := fmt.Sprintf("fm-%s-first-%s", k.name, ruleName(rule))
				r := rule
				r.Match = isScript(k.acquire)
				e.faulty.Inject(r)
				l := k.lock(e.c, name)
				if k.checkTokenExact {
					tok, err := e.c.FencedLock(name).LockAndGetToken(me)
					require.NoError(t, err, "the fault must be absorbed")
					e.faulty.WaitLate()
					assert.Equal(t, int64(1), tok, "the token of the one grant")
					assert.Equal(t, int64(1), doInt(t, e.srv, "GET", rlock.TokenName(name)), "one grant, one INCR")
				} else {
					require.NoError(t, l.Lock(me), "the fault must be absorbed")
					e.faulty.WaitLate()
				}
				assert.Equal(t, int64(1), count(e, name), "one Lock, count 1")
				excluded(t, e, name)
				require.NoError(t, l.Unlock(me))
				settled(t, e, name)
			})

			t.Run(k.name+"/acquire in the wait loop/"+ruleName(rule), func(t *testing.T) {
				e := newMatrixEnv(t, srv)
				name := fmt.Sprintf("fm-%s-wait-%s", k.name, ruleName(rule))
				holder := k.lock(e.other, name)
				if k.shared {
					holder = e.other.ReadWriteLock(name).WriteLock()
				}
				require.NoError(t, holder.Lock(ctx))
				attempts := e.faulty.Count(isScript(k.acquire))
				l := k.lock(e.c, name)
				got := lockAsync(me, l)
				if k.spins {
					eventually(t, 5*time.Second, "the spinning waiter", func() bool { return attempts() >= 2 })
				} else {
					eventually(t, 5*time.Second, "the waiter", func() bool { return e.c.Stats().Waiters == 1 && attempts() >= 2 })
				}
				r := rule
				r.Match = isScript(k.acquire)
				e.faulty.Inject(r)
				require.NoError(t, holder.Unlock(ctx))
				res := waitResult(t, got, 20*time.Second, "the waiter")
				require.NoError(t, res.err)
				e.faulty.WaitLate()
				assert.Equal(t, int64(1), count(e, name), "one Lock, count 1")
				if k.checkTokenExact {
					assert.Equal(t, int64(2), doInt(t, e.srv, "GET", rlock.TokenName(name)), "two grants, two INCRs")
				}
				require.NoError(t, l.Unlock(me))
				settled(t, e, name)
			})

			if k.fair {
				// The waiter's first attempt queues it, and its wait ends:
				// it leaves the queue, whatever became of the attempt.
				t.Run(k.name+"/queueing attempt/"+ruleName(rule), func(t *testing.T) {
					e := newMatrixEnv(t, srv)
					name := fmt.Sprintf("fm-%s-queue-%s", k.name, ruleName(rule))
					holder := k.lock(e.other, name)
					require.NoError(t, holder.Lock(ctx))
					r := rule
					r.Match = isScript(k.acquire)
					e.faulty.Inject(r)
					ok, err := k.lock(e.c, name).TryLock(me, 1500*time.Millisecond, 0)
					require.NoError(t, err, "the fault must be absorbed")
					assert.False(t, ok)
					e.faulty.WaitLate()
					assert.Equal(t, int64(0), doInt(t, e.srv, "EXISTS", rlock.FairQueueName(name), rlock.FairTimeoutName(name)), "the waiter left the queue")
					require.NoError(t, holder.Unlock(ctx))
					settled(t, e, name)
				})
				// Leaving the queue is faulted: it still leaves, exactly
				// once, and the waiter behind it keeps its place.
				t.Run(k.name+"/leaving the queue/"+ruleName(rule), func(t *testing.T) {
					e := newMatrixEnv(t, srv)
					name := fmt.Sprintf("fm-%s-leave-%s", k.name, ruleName(rule))
					holder := k.lock(e.other, name)
					require.NoError(t, holder.Lock(ctx))
					r := rule
					r.Match = isScript(scripts.FairCancel)
					e.faulty.Inject(r)
					leaving := make(chan result, 1)
					go func() {
						ok, err := k.lock(e.c, name).TryLock(me, 700*time.Millisecond, 0)
						if err == nil && ok {
							err = fmt.Errorf("got the lock")
						}
						leaving <- result{err, time.Now()}
					}()
					eventually(t, 5*time.Second, "the leaving waiter queued", func() bool {
						return doInt(t, e.srv, "LLEN", rlock.FairQueueName(name)) == 1
					})
					next := lockAsync(rlock.WithOwner(ctx, 2), k.lock(e.other, name))
					eventually(t, 5*time.Second, "the next waiter queued", func() bool {
						return doInt(t, e.srv, "LLEN", rlock.FairQueueName(name)) == 2
					})
					before := doInt(t, e.srv, "ZSCORE", rlock.FairTimeoutName(name), field(e.other, 2))
					require.NoError(t, waitResult(t, leaving, 20*time.Second, "the leaving waiter").err)
					e.faulty.WaitLate()
					qm := do(t, e.srv, "LRANGE", rlock.FairQueueName(name), "0", "-1")
					q, err := qm.AsStrSlice()
					require.NoError(t, err)
					assert.Equal(t, []string{field(e.other, 2)}, q, "the leaving waiter left, the next stays")
					after := doInt(t, e.srv, "ZSCORE", rlock.FairTimeoutName(name), field(e.other, 2))
					assert.Equal(t, int64(700), before-after, "the next waiter moved up by one wait, once")
					require.NoError(t, holder.Unlock(ctx))
					res := waitResult(t, next, 20*time.Second, "the next waiter")
					require.NoError(t, res.err)
					require.NoError(t, k.lock(e.other, name).Unlock(rlock.WithOwner(ctx, 2)))
					settled(t, e, name)
				})
				// The grant pulls the reservations of the four waiters
				// behind the head forward in bulk (one ZUNIONSTORE, more
				// than three waiters): a grant whose reply was lost moves
				// them by exactly one wait, once, like any other grant.
				t.Run(k.name+"/grant before four waiters/"+ruleName(rule), func(t *testing.T) {
					e := newMatrixEnv(t, srv)
					name := fmt.Sprintf("fm-%s-bulk-%s", k.name, ruleName(rule))
					holder := k.lock(e.other, name)
					require.NoError(t, holder.Lock(ctx))
					attempts := e.faulty.Count(isScript(k.acquire))
					l := k.lock(e.c, name)
					got := lockAsync(me, l)
					eventually(t, 5*time.Second, "the waiter", func() bool { return e.c.Stats().Waiters == 1 && attempts() >= 2 })
					var behind []<-chan result
					for o := int64(3); o < 7; o++ {
						behind = append(behind, lockAsync(rlock.WithOwner(ctx, o), k.lock(e.other, name)))
						eventually(t, 5*time.Second, "a waiter behind queued", func() bool {
							return doInt(t, e.srv, "LLEN", rlock.FairQueueName(name)) == o-1
						})
					}
					before := map[string]int64{}
					for o := int64(3); o < 7; o++ {
						before[field(e.other, o)] = doInt(t, e.srv, "ZSCORE", rlock.FairTimeoutName(name), field(e.other, o))
					}
					bulk0, err := redistest.CommandCalls(ctx, probe.Client, "zunionstore")
					require.NoError(t, err)
					r := rule
					r.Match = isScript(k.acquire)
					e.faulty.Inject(r)
					require.NoError(t, holder.Unlock(ctx))
					require.NoError(t, waitResult(t, got, 20*time.Second, "the head").err)
					assert.Zero(t, e.faulty.Pending(), "the fault hit the grant")
					e.faulty.WaitLate()
					bulk1, err := redistest.CommandCalls(ctx, probe.Client, "zunionstore")
					require.NoError(t, err)
					assert.EqualValues(t, 1, bulk1-bulk0, "one grant, in bulk")
					assert.Equal(t, int64(1), count(e, name), "one Lock, count 1")
					wait := int64(rlock.DefaultFairLockWaitTimeout / time.Millisecond)
					for m, b := range before {
						assert.Equal(t, wait, b-doInt(t, e.srv, "ZSCORE", rlock.FairTimeoutName(name), m), "%s moved up by one wait, once", m)
					}
					require.NoError(t, l.Unlock(me))
					for i, ch := range behind {
						require.NoError(t, waitResult(t, ch, 20*time.Second, "a waiter behind").err)
						require.NoError(t, k.lock(e.other, name).Unlock(rlock.WithOwner(ctx, int64(i+3))))
					}
					settled(t, e, name)
				})
			}

			if k.checkTokenExact {
				// A re-entry is a grant too: it issues the next token,
				// and a lost reply must not lose or repeat it.
				t.Run(k.name+"/re-entrant grant/"+ruleName(rule), func(t *testing.T) {
					e := newMatrixEnv(t, srv)
					name := fmt.Sprintf("fm-%s-reenter-%s", k.name, ruleName(rule))
					l := e.c.FencedLock(name)
					tok, err := l.LockAndGetToken(me)
					require.NoError(t, err)
					require.Equal(t, int64(1), tok)
					r := rule
					r.Match = isScript(k.acquire)
					e.faulty.Inject(r)
					tok, err = l.LockAndGetToken(me)
					require.NoError(t, err, "the fault must be absorbed")
					assert.Zero(t, e.faulty.Pending(), "the fault hit the re-entry")
					e.faulty.WaitLate()
					assert.Equal(t, int64(2), tok, "the token of the re-entry's grant")
					assert.Equal(t, int64(2), doInt(t, e.srv, "GET", rlock.TokenName(name)), "two grants, two INCRs")
					assert.Equal(t, int64(2), count(e, name))
					require.NoError(t, l.Unlock(me))
					require.NoError(t, l.Unlock(me))
					settled(t, e, name)
				})
			}
			if k.name == "nonreentrant" {
				// A second acquire by the holder is refused (HELD) and
				// changes nothing, whatever became of its round trip.
				t.Run(k.name+"/refused re-acquire/"+ruleName(rule), func(t *testing.T) {
					e := newMatrixEnv(t, srv)
					name := fmt.Sprintf("fm-%s-held-%s", k.name, ruleName(rule))
					l := k.lock(e.c, name)
					require.NoError(t, l.Lock(me))
					r := rule
					r.Match = isScript(k.acquire)
					e.faulty.Inject(r)
					ok, err := l.TryLock(me, 0, 0)
					assert.ErrorIs(t, err, rlock.ErrAlreadyHeld, "the fault must be absorbed")
					assert.False(t, ok)
					assert.Zero(t, e.faulty.Pending(), "the fault hit the re-acquire")
					e.faulty.WaitLate()
					assert.Equal(t, int64(1), count(e, name), "the refused acquire changed nothing")
					require.NoError(t, l.Unlock(me))
					assert.ErrorIs(t, l.Unlock(me), rlock.ErrNotHeld)
					settled(t, e, name)
				})
			}
			if k.onlyAcquire && !k.spins {
				continue
			}
			// The spin lock's unlock and force unlock publish nothing:
			// their own paths of unlock.lua and force_unlock.lua.
			for _, full := range []bool{false, true} {
				what := "partial unlock"
				if full {
					what = "full unlock"
				}
				t.Run(k.name+"/"+what+"/"+ruleName(rule), func(t *testing.T) {
					e := newMatrixEnv(t, srv)
					name := fmt.Sprintf("fm-%s-unlock-%v-%s", k.name, full, ruleName(rule))
					l := k.lock(e.c, name)
					require.NoError(t, l.Lock(me))
					if !full {
						require.NoError(t, l.Lock(me))
					}
					r := rule
					r.Match = isScript(k.unlock)
					e.faulty.Inject(r)
					require.NoError(t, l.Unlock(me), "the fault must be absorbed")
					e.faulty.WaitLate()
					if full {
						assert.Equal(t, int64(0), count(e, name))
					} else {
						assert.Equal(t, int64(1), count(e, name), "one Unlock of two levels leaves one")
						excluded(t, e, name)
						require.NoError(t, l.Unlock(me))
					}
					assert.ErrorIs(t, l.Unlock(me), rlock.ErrNotHeld, "nothing more to unlock")
					settled(t, e, name)
				})
			}

			t.Run(k.name+"/force unlock/"+ruleName(rule), func(t *testing.T) {
				e := newMatrixEnv(t, srv)
				name := fmt.Sprintf("fm-%s-force-%s", k.name, ruleName(rule))
				require.NoError(t, k.lock(e.other, name).Lock(ctx))
				r := rule
				r.Match = isScript(scripts.ForceUnlock)
				if k.force != nil {
					r.Match = isScript(k.force)
				}
				e.faulty.Inject(r)
				existed, err := k.lock(e.c, name).ForceUnlock(ctx)
				require.NoError(t, err)
				if rule.Fault != redistest.Late {
					assert.True(t, existed)
				}
				// A hold taken after the force unlock returned survives the
				// late call.
				l := k.lock(e.c, name)
				require.NoError(t, l.Lock(me))
				e.faulty.WaitLate()
				assert.Equal(t, int64(1), count(e, name), "the new hold survives")
				require.NoError(t, l.Unlock(me))
				if k.shared {
					// The other service's reader was deleted by the force
					// unlock; its timeout key is left to expire with its
					// lease, as Redisson leaves it.
					key := "{" + name + "}:" + field(e.other, 0)
					keys, err := e.srv.Do(ctx, "KEYS", "{"+name+"}:*")
					require.NoError(t, err)
					left, _ := keys.AsStrSlice()
					for _, k := range left {
						require.Contains(t, k, e.other.ID(), "only the force-unlocked reader's timeout key is left (%s...)", key[:20])
						do(t, e.srv, "DEL", k)
					}
				}
				settled(t, e, name)
			})

			if k.spins {
				continue // its renewal and member lease are the plain lock's
			}
			if !k.shared { // a read lock member is taken with the lease itself
				t.Run(k.name+"/member lease/"+ruleName(rule), func(t *testing.T) {
					// A MultiLock with a wait and a lease takes its members
					// with twice the wait and then sets the lease on each
					// (expire.lua, Redisson's PEXPIRE of the members).
					e := newMatrixEnv(t, srv)
					name := fmt.Sprintf("fm-%s-expire-%s", k.name, ruleName(rule))
					ml := rlock.NewMultiLock(k.lock(e.c, name))
					r := rule
					r.Match = isScript(scripts.Expire)
					e.faulty.Inject(r)
					ok, err := ml.TryLock(me, time.Second, 20*time.Second)
					require.NoError(t, err, "the fault must be absorbed")
					require.True(t, ok)
					e.faulty.WaitLate()
					assert.Equal(t, int64(1), count(e, name))
					ttl := doInt(t, e.srv, "PTTL", name)
					assert.Greater(t, ttl, int64(2*time.Second/time.Millisecond), "the member got the lease, not twice the wait")
					assert.LessOrEqual(t, ttl, int64(20*time.Second/time.Millisecond))
					excluded(t, e, name)
					require.NoError(t, ml.Unlock(me))
					settled(t, e, name)
				})
			}

			t.Run(k.name+"/renewal/"+ruleName(rule), func(t *testing.T) {
				e := newMatrixEnv(t, srv, rlock.WithWatchdogTimeout(900*time.Millisecond))
				name := fmt.Sprintf("fm-%s-renew-%s", k.name, ruleName(rule))
				l := k.lock(e.c, name)
				require.NoError(t, l.Lock(me))
				hctx, err := l.HoldContext(me)
				require.NoError(t, err)
				r := rule
				r.Match = isScript(k.renew)
				e.faulty.Inject(r)
				eventually(t, 5*time.Second, "the faulty renewal", func() bool { return e.faulty.Pending() == 0 })
				// Two more leases: renewal went on.
				time.Sleep(1800 * time.Millisecond)
				require.NoError(t, hctx.Err(), "the hold was reported lost: %v", context.Cause(hctx))
				assert.Equal(t, int64(1), count(e, name))
				if k.shared {
					assert.Greater(t, doInt(t, e.srv, "PTTL", "{"+name+"}:"+k.field(e.c, 1)+":rwlock_timeout:1"), int64(0), "the timeout key is renewed")
				}
				require.NoError(t, l.Unlock(me))
				<-hctx.Done()
				assert.ErrorIs(t, context.Cause(hctx), rlock.ErrUnlocked)
				settled(t, e, name)
			})
		}
	}
}
