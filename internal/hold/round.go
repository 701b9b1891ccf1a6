package hold

import (
	"fmt"
	"time"
)

// Round is one watchdog renewal round. While it runs, the holds it
// includes are marked as in flight in it, and End waits for it to finish,
// so that no renewal of a hold is sent after its End returns.
type Round struct{ done chan struct{} }

func (r *Round) wait() {
	if r != nil {
		<-r.done
	}
}

// Item is one hold to renew in a round, as it was when the round began.
type Item struct {
	h     *Hold
	gen   uint64
	Key   Key
	Set   time.Time     // when its TTL was last set
	TTL   time.Duration // the TTL set then (a re-entry's lease may be shorter than the watchdog's)
	Since time.Time     // when the hold began
	// Watchers is the number of HoldContexts on the hold when the round
	// began: reporting its loss ends each.
	Watchers int
}

// StartRound begins a renewal round over every hold renewed by the
// watchdog and returns them. Every StartRound must be followed by one
// FinishRound.
func (t *Table) StartRound() (*Round, []Item) {
	r := &Round{done: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	var items []Item
	for k, h := range t.m {
		if h.count > 0 && h.watchdog > 0 {
			h.inflight = r
			items = append(items, Item{h: h, gen: h.gen, Key: k, Set: h.set, TTL: h.ttl, Since: h.since, Watchers: len(h.watchers)})
		}
	}
	return r, items
}

// current reports whether it still describes h's hold, renewed in round r;
// t.mu is held.
func (t *Table) current(r *Round, it Item) bool {
	h := it.h
	return h.gen == it.gen && h.inflight == r && h.count > 0 && h.watchdog > 0
}

// Renewed records a renewal of it sent at sent and answered at recv.
func (t *Table) Renewed(r *Round, it Item, sent, recv time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A TTL set by a call sent after the renewal (a re-entry or partial
	// unlock during the round) may have come after it in Redis: it stays.
	if t.current(r, it) && !it.h.set.After(sent) {
		it.h.set, it.h.recv = sent, recv
		it.h.ttl, it.h.fixed = t.timeout, false
	}
}

// Gone records a renewal that found the owner field gone: the hold is lost
// (cause), unless an unlock of it is in flight, whose work it then is. A
// hold whose last TTL was a re-entry's fixed lease, found gone after that
// lease's end, ran out of it: ErrLeaseExpired.
func (t *Table) Gone(r *Round, it Item, cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current(r, it) && it.h.releasing == 0 {
		if h := it.h; h.fixed && !time.Now().Before(h.set.Add(h.ttl)) {
			cause = fmt.Errorf("%w: %q", ErrLeaseExpired, h.key.Name)
		}
		t.endLocked(it.h, cause, true)
		t.forget(it.h)
	}
}

// Lost abandons it with cause (see Abandon): renewals failed until the
// lease could run out, or the hold reached the watchdog's maximum.
func (t *Table) Lost(r *Round, it Item, cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current(r, it) && it.h.releasing == 0 {
		if h := it.h; h.fixed && !time.Now().Before(h.set.Add(h.ttl)) {
			cause = fmt.Errorf("%w: %q", ErrLeaseExpired, h.key.Name) // it ran out of a re-entry's lease
		}
		t.abandonLocked(it.h, cause)
	}
}

// FinishRound ends round r.
func (t *Table) FinishRound(r *Round, items []Item) {
	t.mu.Lock()
	for _, it := range items {
		if it.h.inflight == r {
			it.h.inflight = nil
		}
	}
	t.mu.Unlock()
	close(r.done)
}
