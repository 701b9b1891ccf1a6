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
	cases := []struct {
		name, deny string
		setup, op  func(c *rlock.Client, name string) error
	}{
		{"fenced acquire", "incr", nil,
			func(c *rlock.Client, n string) error { _, err := c.FencedLock(n).LockAndGetToken(owner); return err }},
		{"acquire", "pexpire", nil,
			func(c *rlock.Client, n string) error { return c.Lock(n).Lock(owner) }},
		{"read re-entry", "set",
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) },
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) }},
		{"reader joining", "set",
			func(c *rlock.Client, n string) error {
				return c.ReadWriteLock(n).ReadLock().Lock(rlock.WithOwner(ctx, 2))
			},
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) }},
		{"write re-entry", "pexpire",
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).WriteLock().Lock(owner) },
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).WriteLock().Lock(owner) }},
		{"unlock", "publish",
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) },
			func(c *rlock.Client, n string) error { return c.Lock(n).Unlock(owner) }},
		{"unlock", "del",
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) },
			func(c *rlock.Client, n string) error { return c.Lock(n).Unlock(owner) }},
		{"read re-entry", "pexpire",
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) },
			func(c *rlock.Client, n string) error { return c.ReadWriteLock(n).ReadLock().Lock(owner) }},
		{"force unlock", "set",
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) },
			func(c *rlock.Client, n string) error { _, err := c.Lock(n).ForceUnlock(ctx); return err }},
		{"force unlock", "publish",
			func(c *rlock.Client, n string) error { return c.Lock(n).LockLease(owner, time.Minute) },
			func(c *rlock.Client, n string) error { _, err := c.Lock(n).ForceUnlock(ctx); return err }},
	}
	for i, tc := range cases {
		t.Run(tc.name+" without "+tc.deny, func(t *testing.T) {
			name := fmt.Sprintf("denied-%d", i)
			user := "u" + fmt.Sprint(i)
			do(t, srv, "ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all")
			o := srv.ClientOption()
			o.Username, o.Password = user, "pw"
			o.DisableCache = true
			c := newLocks(t, newRueidis(t, o))
			if tc.setup != nil {
				require.NoError(t, tc.setup(c, name))
			}
			before := snapshot(t, srv, name)
			do(t, srv, "ACL", "SETUSER", user, "-"+tc.deny)
			err := tc.op(c, name)
			require.Error(t, err)
			assert.Regexp(t, `(?i)\b`+tc.deny+`\b`, err.Error(), "the error does not name %s", tc.deny)
			assert.Equal(t, before, snapshot(t, srv, name), "the denied call wrote")
		})
	}
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
		default:
			v = typ
		}
		out[k] = fmt.Sprintf("%s ttl=%v", v, doInt(t, srv, "PTTL", k) != -1)
	}
	return out
}
