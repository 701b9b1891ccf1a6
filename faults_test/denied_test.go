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
)

// A call the ACL denies halfway through a script writes nothing: every
// call that can be denied comes before the script's first write. Each case
// sets up a lock as a user, denies that user one command (ACL changes
// apply to open connections at once), runs one operation, and compares
// the lock's keys before and after.
func TestDeniedCallWritesNothing(t *testing.T) {
	srv := redistest.Standalone(t)
	ctx := context.Background()
	owner := rlock.WithOwner(ctx, 1)
	// The fair lock free, with owner 2 at the head of its queue; owner 2
	// taking it.
	freeWithHead := func(c *rlock.Client, n string) error {
		do(t, srv, "RPUSH", "redisson_lock_queue:{"+n+"}", field(c, 2))
		do(t, srv, "ZADD", "redisson_lock_timeout:{"+n+"}", fmt.Sprint(time.Now().UnixMilli()+3_600_000), field(c, 2))
		return nil
	}
	// The same with five more waiters behind the head, whose reservations
	// the grant pulls forward (in bulk, or by ZINCRBY when the ACL has no
	// bulk command).
	freeWithHeadAndWaiters := func(c *rlock.Client, n string) error {
		_ = freeWithHead(c, n)
		for o := int64(3); o < 8; o++ {
			do(t, srv, "RPUSH", "redisson_lock_queue:{"+n+"}", field(c, o))
			do(t, srv, "ZADD", "redisson_lock_timeout:{"+n+"}", fmt.Sprint(time.Now().UnixMilli()+3_600_000+o*300_000), field(c, o))
		}
		return nil
	}
	takeAsHead := func(c *rlock.Client, n string) error {
		_, err := c.FairLock(n).TryLock(rlock.WithOwner(ctx, 2), 0, time.Minute)
		return err
	}
	// The fair lock held by owner 2; owner 1 queueing behind it.
	heldBy2 := func(c *rlock.Client, n string) error {
		return c.FairLock(n).LockLease(rlock.WithOwner(ctx, 2), time.Minute)
	}
	queueBehind := func(c *rlock.Client, n string) error {
		_, err := c.FairLock(n).TryLock(owner, time.Second, time.Minute)
		return err
	}
	cases := []deniedCase{
		{"fenced acquire", "incr", "", nil,
			func(c *rlock.Client, n string) error { _, err := c.FencedLock(n).LockAndGetToken(owner); return err }},
		{"acquire", "pexpire", "", nil,
			func(c *rlock.Client, n string) error { return c.Lock(n).Lock(owner) }},
		{"read re-entry", "set", "",
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) },
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) }},
		{"reader joining", "set", "",
			func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).ReadLock().Lock(rlock.WithOwner(ctx, 2))
			},
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) }},
		{"write re-entry", "pexpire", "",
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).WriteLock().Lock(owner) },
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).WriteLock().Lock(owner) }},
		{"unlock", "publish", "",
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) },
			func(c *rlock.Client, n string) error { return c.Lock(n).Unlock(owner) }},
		{"unlock", "del", "",
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) },
			func(c *rlock.Client, n string) error { return c.Lock(n).Unlock(owner) }},
		{"read re-entry", "pexpire", "",
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) },
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) }},
		{"force unlock", "set", "",
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) },
			func(c *rlock.Client, n string) error { _, err := c.Lock(n).ForceUnlock(ctx); return err }},
		{"force unlock", "publish", "",
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) },
			func(c *rlock.Client, n string) error { _, err := c.Lock(n).ForceUnlock(ctx); return err }},
		// The unlocks of the read-write and fair locks delete before they
		// publish: their writes are checked first (acl_prelude.lua).
		{"read unlock", "publish", "",
			func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).ReadLock().LockLease(owner, time.Minute)
			},
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Unlock(owner) }},
		{"read unlock, no channel allowed", "publish", "resetchannels",
			func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).ReadLock().LockLease(owner, time.Minute)
			},
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Unlock(owner) }},
		{"write unlock", "publish", "",
			func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).WriteLock().LockLease(owner, time.Minute)
			},
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).WriteLock().Unlock(owner) }},
		{"fair unlock, a waiter queued", "publish", "",
			func(c *rlock.Client, n string) error { return fairHeldWithQueue(t, srv, c, n, owner, false) },
			func(c *rlock.Client, n string) error { return c.FairLock(n).Unlock(owner) }},
		{"fair unlock, a stale waiter before a live one", "publish", "",
			func(c *rlock.Client, n string) error { return fairHeldWithQueue(t, srv, c, n, owner, true) },
			func(c *rlock.Client, n string) error { return c.FairLock(n).Unlock(owner) }},
		{"fair unlock, a stale waiter before a live one", "lpop", "",
			func(c *rlock.Client, n string) error { return fairHeldWithQueue(t, srv, c, n, owner, true) },
			func(c *rlock.Client, n string) error { return c.FairLock(n).Unlock(owner) }},
		{"fair force unlock, a waiter queued", "publish", "",
			func(c *rlock.Client, n string) error { return fairHeldWithQueue(t, srv, c, n, owner, false) },
			func(c *rlock.Client, n string) error { _, err := c.FairLock(n).ForceUnlock(ctx); return err }},
		{"fair acquire, queueing", "rpush", "",
			heldBy2, queueBehind},
		{"fair acquire, the head taking it", "hset", "",
			freeWithHead, takeAsHead},
		{"fair acquire, the head taking it before five waiters", "zincrby", "",
			freeWithHeadAndWaiters, takeAsHead},
		{"fair acquire, the head taking it before five waiters", "hset", "",
			freeWithHeadAndWaiters, takeAsHead},
		// From a review: a read that follows a write, and writes before
		// writes, in scripts that were thought safe by their order.
		{"re-entrant unlock", "pexpire", "",
			twice(func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) }),
			func(c *rlock.Client, n string) error { return c.Lock(n).Unlock(owner) }},
		{"force unlock", "del", "",
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) },
			func(c *rlock.Client, n string) error { _, err := c.Lock(n).ForceUnlock(ctx); return err }},
		{"fenced acquire", "hincrby", "", nil,
			func(c *rlock.Client, n string) error { _, err := c.FencedLock(n).LockAndGetToken(owner); return err }},
		{"re-entry", "hincrby", "",
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) },
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, 10*time.Second) }},
		{"read acquire", "hset", "", nil,
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) }},
		{"read re-entry", "hincrby", "",
			func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).ReadLock().LockLease(owner, time.Minute)
			},
			func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).ReadLock().LockLease(owner, 10*time.Second)
			}},
		{"write re-entry", "hincrby", "",
			func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).WriteLock().LockLease(owner, time.Minute)
			},
			func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).WriteLock().LockLease(owner, 10*time.Second)
			}},
		{"re-entrant read unlock", "pttl", "",
			twice(func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).ReadLock().LockLease(owner, time.Minute)
			}),
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Unlock(owner) }},
		{"read unlock, another reader", "hkeys", "",
			func(c *rlock.Client, n string) error {
				if err := c.ReadWriteLock(n).ReadLock().LockLease(rlock.WithOwner(ctx, 2), time.Minute); err != nil {
					return err
				}
				return c.ReadWriteLock(n).ReadLock().LockLease(owner, time.Minute)
			},
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Unlock(owner) }},
		{"re-entrant write unlock", "hlen", "",
			twice(func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).WriteLock().LockLease(owner, time.Minute)
			}),
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).WriteLock().Unlock(owner) }},
		{"fair acquire, the head taking it", "zrange", "",
			freeWithHead, takeAsHead},
		{"fair acquire, queueing", "pttl", "",
			heldBy2, queueBehind},
	}
	runDenied(t, srv, "denied", cases)
}

// The synchronizers' scripts change a count, publish it and record the
// call's outcome (sync_prelude.lua) in one script: each write is checked
// against the ACL before the first, so a refused call takes no permit,
// releases none, moves no latch and leaves no record (before, a release
// without PUBLISH had already added its permits when it failed, and a
// caller who tried again released them twice).
func TestDeniedSyncCallWritesNothing(t *testing.T) {
	srv := redistest.Standalone(t)
	ctx := context.Background()
	sem := func(n int) func(c *rlock.Client, name string) error {
		return func(c *rlock.Client, name string) error {
			_, err := c.Semaphore(name).TrySetPermits(ctx, n)
			return err
		}
	}
	var id string // the permit of the last psemHeld
	psemHeld := func(expired bool) func(c *rlock.Client, name string) error {
		return func(c *rlock.Client, name string) error {
			s := c.PermitExpirableSemaphore(name)
			if _, err := s.TrySetPermits(ctx, 1); err != nil {
				return err
			}
			var err error
			if id, err = s.Acquire(ctx, time.Hour); err != nil {
				return err
			}
			if expired { // as if the hour had passed: the next script gives it back
				timeouts := "{" + name + "}:timeout"
				m := do(t, srv, "ZRANGE", timeouts, "0", "0")
				ids, err := m.AsStrSlice()
				require.NoError(t, err)
				require.Len(t, ids, 1)
				do(t, srv, "ZADD", timeouts, "XX", "1", ids[0])
			}
			return nil
		}
	}
	sem2psem := func(c *rlock.Client, name string) error {
		_, err := c.PermitExpirableSemaphore(name).TrySetPermits(ctx, 2)
		return err
	}
	latch := func(n int64) func(c *rlock.Client, name string) error {
		return func(c *rlock.Client, name string) error {
			_, err := c.CountDownLatch(name).TrySetCount(ctx, n)
			return err
		}
	}
	// noRecord drops the client's record key after setup: the call then
	// sets its TTL (a fresh one is set again only once a quarter has run).
	noRecord := func(setup func(c *rlock.Client, name string) error) func(c *rlock.Client, name string) error {
		return func(c *rlock.Client, name string) error {
			if err := setup(c, name); err != nil {
				return err
			}
			do(t, srv, "DEL", "goredisson_ops:{"+name+"}:"+c.ID())
			return nil
		}
	}
	cases := []deniedCase{
		{"semaphore try-acquire", "decrby", "", sem(2),
			func(c *rlock.Client, n string) error { _, err := c.Semaphore(n).TryAcquire(ctx, 1, 0); return err }},
		{"semaphore try-acquire", "hset", "", sem(2),
			func(c *rlock.Client, n string) error { _, err := c.Semaphore(n).TryAcquire(ctx, 1, 0); return err }},
		{"semaphore release", "publish", "", sem(0),
			func(c *rlock.Client, n string) error { return c.Semaphore(n).Release(ctx, 1) }},
		{"semaphore release, no channel allowed", "publish", "resetchannels", sem(0),
			func(c *rlock.Client, n string) error { return c.Semaphore(n).Release(ctx, 1) }},
		{"semaphore release, a record key to refresh", "pexpire", "", noRecord(sem(0)),
			func(c *rlock.Client, n string) error { return c.Semaphore(n).Release(ctx, 1) }},
		{"semaphore add", "publish", "", sem(1),
			func(c *rlock.Client, n string) error { return c.Semaphore(n).AddPermits(ctx, 2) }},
		{"semaphore drain", "set", "", sem(3),
			func(c *rlock.Client, n string) error { _, err := c.Semaphore(n).DrainPermits(ctx); return err }},
		{"semaphore try-set", "publish", "", nil,
			func(c *rlock.Client, n string) error { _, err := c.Semaphore(n).TrySetPermits(ctx, 3); return err }},
		{"expirable acquire, an expired permit to give back", "publish", "", psemHeld(true),
			func(c *rlock.Client, n string) error {
				_, _, err := c.PermitExpirableSemaphore(n).TryAcquire(ctx, 0, time.Minute)
				return err
			}},
		{"expirable acquire", "pexpire", "",
			func(c *rlock.Client, n string) error {
				_, err := c.PermitExpirableSemaphore(n).TrySetPermits(ctx, 1)
				return err
			},
			func(c *rlock.Client, n string) error {
				_, _, err := c.PermitExpirableSemaphore(n).TryAcquire(ctx, 0, time.Minute)
				return err
			}},
		{"expirable release", "publish", "", psemHeld(false),
			func(c *rlock.Client, n string) error { return c.PermitExpirableSemaphore(n).Release(ctx, id) }},
		{"expirable release", "incrby", "", psemHeld(false),
			func(c *rlock.Client, n string) error { return c.PermitExpirableSemaphore(n).Release(ctx, id) }},
		{"expirable available, an expired permit to give back", "publish", "", psemHeld(true),
			func(c *rlock.Client, n string) error {
				_, err := c.PermitExpirableSemaphore(n).AvailablePermits(ctx)
				return err
			}},
		{"expirable add", "publish", "", psemHeld(false),
			func(c *rlock.Client, n string) error { return c.PermitExpirableSemaphore(n).AddPermits(ctx, 2) }},
		{"latch count-down to zero", "publish", "", latch(1),
			func(c *rlock.Client, n string) error { return c.CountDownLatch(n).CountDown(ctx) }},
		{"latch count-down to zero", "del", "", latch(1),
			func(c *rlock.Client, n string) error { return c.CountDownLatch(n).CountDown(ctx) }},
		{"expirable acquire", "pttl", "", sem2psem,
			func(c *rlock.Client, n string) error {
				_, _, err := c.PermitExpirableSemaphore(n).TryAcquire(ctx, 0, time.Minute)
				return err
			}},
		{"expirable available, an expired permit to give back", "get", "", psemHeld(true),
			func(c *rlock.Client, n string) error {
				_, err := c.PermitExpirableSemaphore(n).AvailablePermits(ctx)
				return err
			}},
		{"latch try-set", "publish", "", nil,
			func(c *rlock.Client, n string) error { _, err := c.CountDownLatch(n).TrySetCount(ctx, 2); return err }},
		{"latch delete", "publish", "", latch(2),
			func(c *rlock.Client, n string) error { _, err := c.CountDownLatch(n).Delete(ctx); return err }},
	}
	runDenied(t, srv, "denied-sync", cases)
}

// twice runs f twice (a hold of count 2).
func twice(f func(c *rlock.Client, name string) error) func(c *rlock.Client, name string) error {
	return func(c *rlock.Client, name string) error {
		if err := f(c, name); err != nil {
			return err
		}
		return f(c, name)
	}
}

// fairHeldWithQueue has owner take the fair lock n for a minute, then
// queues a waiter of another client behind it (with a reservation an hour
// away); with stale, an expired waiter ahead of that one, which a script's
// cleanup removes.
func fairHeldWithQueue(t *testing.T, srv *redistest.Server, c *rlock.Client, n string, owner context.Context, stale bool) error {
	if err := c.FairLock(n).LockLease(owner, time.Minute); err != nil {
		return err
	}
	queue, timeouts := "redisson_lock_queue:{"+n+"}", "redisson_lock_timeout:{"+n+"}"
	now := time.Now().UnixMilli()
	if stale {
		do(t, srv, "RPUSH", queue, "stale:1")
		do(t, srv, "ZADD", timeouts, fmt.Sprint(now-60_000), "stale:1")
	}
	do(t, srv, "RPUSH", queue, "other:1")
	do(t, srv, "ZADD", timeouts, fmt.Sprint(now+3_600_000), "other:1")
	return nil
}

// deniedCase is one operation run by a user whose ACL denies it one
// command (rule, "-<deny>" when empty) after setup.
type deniedCase struct {
	name, deny, rule string
	setup, op        func(c *rlock.Client, name string) error
}

// runDenied runs each case as its own user on its own name and checks that
// the operation fails naming the denied command and leaves every key of the
// name as it was.
func runDenied(t *testing.T, srv *redistest.Server, prefix string, cases []deniedCase) {
	for i, tc := range cases {
		t.Run(tc.name+" without "+tc.deny, func(t *testing.T) {
			name := fmt.Sprintf("%s-%d", prefix, i)
			user := fmt.Sprintf("%s-u%d", prefix, i)
			do(t, srv, "ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all")
			o := srv.ClientOption()
			o.Username, o.Password = user, "pw"
			o.DisableCache = true
			c := newLocks(t, newRueidis(t, o))
			if tc.setup != nil {
				require.NoError(t, tc.setup(c, name))
			}
			before, beforeTTL := snapshot(t, srv, name), ttls(t, srv, name)
			rule := tc.rule
			if rule == "" {
				rule = "-" + tc.deny
			}
			do(t, srv, "ACL", "SETUSER", user, rule)
			err := tc.op(c, name)
			require.Error(t, err)
			assert.Regexp(t, `(?i)\b`+tc.deny+`\b`, err.Error(), "the error does not name %s", tc.deny)
			assert.Equal(t, before, snapshot(t, srv, name), "the denied call wrote")
			for k, ttl := range ttls(t, srv, name) {
				assert.InDelta(t, beforeTTL[k], ttl, 1000, "the denied call changed the TTL of %s", k)
			}
		})
	}
}

// ttls is the PTTL of every key of a lock's name (-1: none).
func ttls(t *testing.T, srv *redistest.Server, name string) map[string]int64 {
	out := map[string]int64{}
	msg := do(t, srv, "KEYS", "*"+name+"*")
	keys, err := msg.AsStrSlice()
	require.NoError(t, err)
	for _, k := range keys {
		out[k] = doInt(t, srv, "PTTL", k)
	}
	return out
}

// snapshot is every key of a lock's name with its value (hashes as maps)
// and whether it has a TTL.
func snapshot(t *testing.T, srv *redistest.Server, name string) map[string]string {
	out := map[string]string{}
	msg := do(t, srv, "KEYS", "*"+name+"*")
	keys, err := msg.AsStrSlice()
	require.NoError(t, err)
	for _, k := range keys {
		tm := do(t, srv, "TYPE", k)
		typ, _ := tm.ToString()
		var v string
		switch typ {
		case "hash":
			m := do(t, srv, "HGETALL", k)
			h, _ := m.AsStrMap()
			v = fmt.Sprint(h)
		case "string":
			m := do(t, srv, "GET", k)
			v, _ = m.ToString()
		case "zset", "list":
			cmd := []string{"ZRANGE", k, "0", "-1", "WITHSCORES"}
			if typ == "list" {
				cmd = []string{"LRANGE", k, "0", "-1"}
			}
			m := do(t, srv, cmd...)
			a, err := m.ToAny()
			require.NoError(t, err)
			v = fmt.Sprintf("%q", a)
		default:
			v = typ
		}
		out[k] = fmt.Sprintf("%s ttl=%v", v, doInt(t, srv, "PTTL", k) != -1)
	}
	return out
}
