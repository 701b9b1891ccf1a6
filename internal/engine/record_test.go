package engine

import (
	"testing"
	"time"
)

// A slot is held by one call in flight at a time: given again once its
// call is resolved, and, when the call's outcome stays unknown, only once
// the call can no longer reach Redis.
func TestRecordSlots(t *testing.T) {
	var o ops
	const known, unknown = false, true
	s1, a := o.begin("r")
	s2, b := o.begin("r")
	_, other := o.begin("q")
	if a != 0 || b != 1 || other != 0 {
		t.Fatalf("slots %d, %d (other key %d), want 0, 1 (0)", a, b, other)
	}
	if s2 <= s1 {
		t.Fatalf("seqs %d then %d", s1, s2)
	}
	o.end("r", s1, a, known)
	s3, c := o.begin("r")
	if c != 0 {
		t.Fatalf("slot %d after slot 0 was freed, want 0", c)
	}
	o.end("r", s1, a, known) // a stale end: slot 0 is s3's now
	s4, d := o.begin("r")
	if d != 2 {
		t.Fatalf("slot %d: a stale end freed a slot in use", d)
	}
	o.end("r", s3, c, unknown) // slot 0 retired
	o.end("r", s2, b, known)
	s5, e := o.begin("r")
	if e != 1 {
		t.Fatalf("slot %d, want 1 (0 retired, 2 in use)", e)
	}
	o.end("r", s4, d, known)
	o.end("r", s5, e, known)
	if ob := o.objs["r"]; ob == nil || ob.n != 1 || o.retired != 1 {
		t.Fatal("a key with a retired slot was forgotten")
	}
	// Once the retired call can no longer run, its slot is free again.
	o.objs["r"].slots[0].until = time.Now().Add(-time.Second)
	o.sweep = time.Now().Add(-time.Second)
	if _, f := o.begin("r"); f != 0 || o.retired != 0 {
		t.Fatalf("slot %d (retired %d), want 0: the retired slot's call can no longer run", f, o.retired)
	}
	// A key whose calls are all resolved is forgotten.
	sq, sl := o.begin("p")
	o.end("p", sq, sl, known)
	if _, ok := o.objs["p"]; ok {
		t.Fatal("a key with no call in flight is still tracked")
	}
	// The sweep forgets a key that only held retired slots.
	sq, sl = o.begin("s")
	o.end("s", sq, sl, unknown)
	o.objs["s"].slots[0].until = time.Now().Add(-time.Second) // FenceTTL has passed
	o.sweep = time.Now().Add(-time.Second)
	o.begin("x")
	if _, ok := o.objs["s"]; ok || o.retired != 0 {
		t.Fatal("the sweep kept a key whose retired call can no longer run")
	}
	if _, sl = o.begin("p"); sl != 0 {
		t.Fatalf("slot %d, want 0", sl)
	}
}

// A lost call is settled only while the settling call reaches Redis
// before the record's 45 minutes end, however long the command timeout.
func TestSettleWindow(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{3 * time.Second, 30 * time.Minute},
		{5 * time.Minute, 30 * time.Minute},
		{10 * time.Minute, 24 * time.Minute},
	} {
		e := &Engine{X: &Executor{Timeout: c.timeout}}
		if got := e.settleWindow(); got != c.want {
			t.Errorf("command timeout %v: window %v, want %v", c.timeout, got, c.want)
		}
	}
}
