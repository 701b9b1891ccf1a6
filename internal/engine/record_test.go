package engine

import "testing"

// A slot is held by one call in flight at a time: given again only once
// its call is resolved, never once its call is retired (unknown).
func TestRecordSlots(t *testing.T) {
	var o ops
	s1, a := o.begin("r")
	s2, b := o.begin("r")
	_, other := o.begin("q")
	if a != 0 || b != 1 || other != 0 {
		t.Fatalf("slots %d, %d (other key %d), want 0, 1 (0)", a, b, other)
	}
	if s2 <= s1 {
		t.Fatalf("seqs %d then %d", s1, s2)
	}
	o.end("r", s1, a, false)
	s3, c := o.begin("r")
	if c != 0 {
		t.Fatalf("slot %d after slot 0 was freed, want 0", c)
	}
	o.end("r", s1, a, false) // a stale end: slot 0 is s3's now
	if _, d := o.begin("r"); d != 2 {
		t.Fatalf("slot %d: a stale end freed a slot in use", d)
	}
	o.end("r", s3, c, true) // unknown: slot 0 retired
	o.end("r", s2, b, false)
	if _, e := o.begin("r"); e != 1 {
		t.Fatalf("slot %d, want 1 (0 retired, 2 in use)", e)
	}
	if len(o.objs) != 2 {
		t.Fatalf("%d record keys tracked, want 2", len(o.objs))
	}
	// A key whose calls are all resolved is forgotten; its next call
	// starts again at slot 0.
	sq, sl := o.begin("p")
	o.end("p", sq, sl, false)
	if _, ok := o.objs["p"]; ok {
		t.Fatal("a key with no call in flight is still tracked")
	}
	if _, sl = o.begin("p"); sl != 0 {
		t.Fatalf("slot %d, want 0", sl)
	}
}
