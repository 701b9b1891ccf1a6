package rlock

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/internal/redistest"
)

// FuzzNames checks the name derivation helpers on any lock name:
//   - ChannelName and the fence keys follow Redisson's prefixName/suffixName
//     rules (PROTOCOL.md 1.3): braces are added unless the name contains "{"
//     anywhere;
//   - Slot agrees with an independent, bitwise CRC16 (refSlot) on every key;
//   - checkName rejects exactly the empty name outside a cluster and, in
//     cluster mode, accepts a name iff the lock key, its channel and its
//     fence keys share one slot; then the fence's slot does not depend on
//     its id;
//   - nothing panics.
//
// Run: go test -run '^$' -fuzz '^FuzzNames$' -fuzztime 10s ./rlock/
func FuzzNames(f *testing.F) {
	for _, name := range []string{"", "a", "orders", "{user42}:cart", "a{b", "{}x", "{", "}", "a}b", "x}{y}", "{{a}}", "{a}{b}", "héllo", "\xff\xfe", "\x00"} {
		f.Add(name, []byte("0123456789abcdef"))
	}
	f.Fuzz(func(t *testing.T, name string, rid []byte) {
		// A request id is 16 random bytes as 32 lowercase hex characters.
		var id [16]byte
		copy(id[:], rid)
		reqID := hex.EncodeToString(id[:])

		braced := strings.Contains(name, "{")
		wrapped := "{" + name + "}"
		if braced {
			wrapped = name
		}
		if got, want := ChannelName(name), "redisson_lock__channel:"+wrapped; got != want {
			t.Fatalf("ChannelName(%q) = %q, want %q", name, got, want)
		}
		fence := names.Fence(name, func(b []byte) []byte { return append(b, reqID...) })
		if got, want := fence, "goredisson_fence:"+wrapped+":"+reqID; got != want {
			t.Fatalf("fence key of %q, %q = %q, want %q", name, reqID, got, want)
		}
		if got, want := names.Prefix("p", name), "p:"+wrapped; got != want {
			t.Fatalf("prefixName(p, %q) = %q, want %q", name, got, want)
		}
		wantSuffix := "{" + name + "}:s"
		if braced {
			wantSuffix = name + ":s"
		}
		if got := names.Suffix(name, "s"); got != wantSuffix {
			t.Fatalf("suffixName(%q, s) = %q, want %q", name, got, wantSuffix)
		}

		keys := []string{name, ChannelName(name), fence, names.Fence(name, func(b []byte) []byte { return append(b, '0') })}
		for _, k := range keys {
			if got, want := names.Slot(k), refSlot(k); got != want {
				t.Fatalf("names.Slot(%q) = %d, want %d", k, got, want)
			}
		}

		err := checkName(name, false)
		if (err == nil) != (name != "") {
			t.Fatalf("checkName(%q, false) = %v", name, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Fatalf("checkName(%q, false) = %v, not ErrInvalidName", name, err)
		}
		sameSlot := true
		for _, k := range keys[1:] {
			sameSlot = sameSlot && refSlot(k) == refSlot(name)
		}
		err = checkName(name, true)
		if want := name != "" && sameSlot; (err == nil) != want {
			t.Fatalf("checkName(%q, true) = %v; key, channel and latch in one slot: %v", name, err, sameSlot)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Fatalf("checkName(%q, true) = %v, not ErrInvalidName", name, err)
		}
		if !braced && name != "" && !strings.Contains(name, "}") && err != nil {
			t.Fatalf("checkName(%q, true) rejects a plain name: %v", name, err)
		}
	})
}

// refSlot is CLUSTER KEYSLOT computed bit by bit, independently of the
// table-driven CRC16 of internal/names.
func refSlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// FuzzLockAPI drives the public API with any name, wait and lease (in
// nanoseconds, any int64) against a real Redis, with or without another
// owner holding the lock for 20ms. Every call returns (never panics, never
// hangs: the context's 10s deadline must not be what ends a call); the only
// errors are ErrInvalidName (empty name), ErrInvalidArgument (a fixed lease
// under 1ms) and ErrNotHeld when a lease under a second ran out; and once
// every owner has unlocked, no key, renewal or waiter is left behind.
//
// Run: go test -run '^$' -fuzz '^FuzzLockAPI$' -fuzztime 10s ./rlock/
func FuzzLockAPI(f *testing.F) {
	srv := redistest.Standalone(f)
	rc, err := srv.Client()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(rc.Close)
	c, err := New(rc, WithWatchdogTimeout(time.Second))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })

	f.Add("fuzz", int64(time.Second), int64(0), uint8(0))
	f.Add("{user42}:cart", int64(-1), int64(time.Hour), uint8(1))
	f.Add("", int64(0), int64(0), uint8(2))
	f.Add("a{b", int64(1), int64(1), uint8(3))
	f.Add("\xff\x00}{", int64(1<<62), int64(1<<63-1), uint8(5))
	f.Add("x", int64(time.Millisecond), int64(999_999), uint8(7))
	f.Fuzz(func(t *testing.T, name string, waitNs, leaseNs int64, op uint8) {
		wait, lease := time.Duration(waitNs), time.Duration(leaseNs)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		o1, o2 := WithOwner(ctx, 1), WithOwner(ctx, 2)
		l := c.Lock(name)
		hung := func(what string, err error) {
			t.Helper()
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s(%q, wait %v, lease %v) hung: %v", what, name, wait, lease, err)
			}
		}

		if name == "" {
			// When the lease is invalid too, either error will do.
			_, tryErr := l.TryLock(o1, wait, lease)
			for what, e := range map[string]struct {
				err          error
				leaseInvalid bool
			}{
				"Lock":      {l.Lock(o1), false},
				"LockLease": {l.LockLease(o1, lease), lease < time.Millisecond},
				"TryLock":   {tryErr, lease > 0 && lease < time.Millisecond},
				"Unlock":    {l.Unlock(o1), false},
			} {
				if !errors.Is(e.err, ErrInvalidName) && !(e.leaseInvalid && errors.Is(e.err, ErrInvalidArgument)) {
					t.Fatalf("%s with an empty name (lease %v): %v", what, lease, e.err)
				}
			}
			return
		}

		contended := op&1 == 1
		if contended {
			if err := l.LockLease(o2, 20*time.Millisecond); err != nil {
				t.Fatalf("LockLease(%q): %v", name, err)
			}
		}
		var acquired bool
		var err error
		what := ""
		switch (op >> 1) % 4 {
		case 0:
			what = "TryLock"
			acquired, err = l.TryLock(o1, wait, lease)
		case 1:
			what = "LockLease"
			err = l.LockLease(o1, lease)
			acquired = err == nil
		case 2:
			what = "Lock"
			err = l.Lock(o1)
			acquired = err == nil
		case 3:
			what = "TryLock+re-entry"
			acquired, err = l.TryLock(o1, wait, 0)
			if acquired && err == nil {
				if err = l.LockLease(o1, lease); err != nil {
					if uerr := l.Unlock(o1); uerr != nil {
						t.Fatalf("Unlock after a failed re-entry: %v", uerr)
					}
					acquired = false
				}
			}
		}
		hung(what, err)
		short := lease > 0 && lease < time.Second // may run out during the test
		// LockLease needs a lease of at least 1ms; TryLock takes <= 0 for
		// the watchdog.
		invalidLease := lease < time.Millisecond
		if what == "TryLock" {
			invalidLease = lease > 0 && lease < time.Millisecond
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrInvalidArgument) && invalidLease:
		default:
			t.Fatalf("%s(%q, wait %v, lease %v): %v", what, name, wait, lease, err)
		}
		if acquired {
			hctx, err := l.HoldContext(o1)
			hung("HoldContext", err)
			switch {
			case err == nil:
				defer func() {
					<-hctx.Done()
					cause := context.Cause(hctx)
					if !errors.Is(cause, ErrUnlocked) && !(short && errors.Is(cause, ErrLeaseExpired)) {
						t.Errorf("HoldContext ended with %v", cause)
					}
				}()
			case short && errors.Is(err, ErrNotHeld):
			default:
				t.Fatalf("HoldContext: %v", err)
			}
			n := 1
			if (op>>1)%4 == 3 {
				n = 2
			}
			for range n {
				err := l.Unlock(o1)
				hung("Unlock", err)
				if err != nil && !(short && errors.Is(err, ErrNotHeld)) {
					t.Fatalf("Unlock(%q) after %s (wait %v, lease %v): %v", name, what, wait, lease, err)
				}
			}
		}
		if contended {
			if err := l.Unlock(o2); err != nil && !errors.Is(err, ErrNotHeld) {
				t.Fatalf("Unlock(%q) of the other owner: %v", name, err)
			}
		}
		if n, err := srv.Do(ctx, "EXISTS", name); err != nil {
			t.Fatal(err)
		} else if v, _ := n.AsInt64(); v != 0 {
			t.Fatalf("%s(%q, wait %v, lease %v) left the lock behind", what, name, wait, lease)
		}
		if st := c.Stats(); st.Renewing != 0 || st.Waiters != 0 {
			t.Fatalf("%s(%q) left %+v", what, name, st)
		}
	})
}
