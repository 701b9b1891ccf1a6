// Package hold keeps the one record per (lock, owner) of a Client: the
// owner's reentrancy count as Redis last reported it, the lease kind and
// value, when the hold began and was last renewed, the renewal state, and
// the HoldContexts watching it. Nothing else in the library keeps a fact
// about a hold: the watchdog renews from this table, unlock paths read the
// lease to restore from it, and every way a hold ends (unlock, lease
// expiry, loss found by the watchdog, a force unlock, Close) ends here, in
// End, which cancels the HoldContexts with the cause.
//
// A record also serialises the operations on its hold: one script call (and
// the settling of its outcome) at a time per (lock, owner) per Client, so
// that an unknown outcome can be settled by comparing counts even when
// several goroutines share one owner id.
//
// Callbacks (HoldContext cancellations and the end handler) never run with
// the table's mutex held nor on the caller's goroutine: they are queued to
// two notifier goroutines, one that ends HoldContexts and one that runs the
// end handler, after the hold's HoldContexts have ended. A slow handler
// delays other handlers, but never a renewal nor another hold's
// HoldContexts, and a handler may call anything, Close included.
package hold

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors that end a hold; the rlock package exports them.
var (
	// ErrUnlocked: the owner's last unlock released the hold.
	ErrUnlocked = errors.New("rlock: lock released by its owner")
	// ErrLockLost: the hold ended without the owner's unlock.
	ErrLockLost = errors.New("rlock: lock lost")
	// ErrLeaseExpired: a hold with a fixed lease reached its end.
	ErrLeaseExpired = errors.New("rlock: lease expired")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("rlock: client closed")
)

// Kind tells apart the lock kinds whose holds need different renewal
// scripts (the plain lock, and later the read lock).
type Kind uint8

// KindSetsTTL is the kind (the plain lock's, which the fair, spin and
// fenced locks share) whose re-entry sets the TTL to its lease, shorter or
// not; other kinds' (read and write locks') re-entries never shorten it.
const KindSetsTTL Kind = 0

// Key names one owner's hold on one lock.
type Key struct {
	Kind  Kind
	Name  string // the lock key
	Field string // the owner field, "<clientId>:<ownerId>"
}

// Hold is the record of one owner's hold. Its fields are read and written
// only through Table methods, under the table's mutex.
type Hold struct {
	key Key
	op  chan struct{} // a one-slot semaphore: one operation at a time

	users int    // operations between Use and Done
	gen   uint64 // incremented each time a new hold begins (count 0 -> 1)

	count    int           // the reentrancy count as Redis last reported it; 0: not held
	watchdog int           // acquisitions in watchdog mode not yet matched by an unlock
	lease    time.Duration // the last explicit lease; 0: the watchdog timeout
	since    time.Time     // when the current hold began
	set      time.Time     // when the TTL was last set (send time of the script)
	ttl      time.Duration // the TTL set at set: Redis may expire the hold from set+ttl on
	fixed    bool          // that TTL is a lease no renewal follows up (not the watchdog's)
	recv     time.Time     // when the reply that set it was read
	timer    *time.Timer   // the end of a lease that is not renewed
	expired  bool          // the lease ran out by this client's clock; Redis may still hold it
	reported bool          // the end handler was told this hold ended (once per hold)

	releasing int    // unlocks in flight: a renewal that finds the field gone is their doing
	inflight  *Round // the renewal round that includes this hold, if any

	watchers map[uint64]context.CancelCauseFunc

	// fence is the fence key of the hold's next script call, used by the
	// holder of the operation slot only: a call that got its reply never
	// wrote it, so the next call may use it again; a call that was settled
	// or refused burns it.
	fence string
}

// Fence returns the fence key for the next call on h, made by mk when h
// has none; the caller holds the operation slot.
func (h *Hold) Fence(mk func(name string) string) string {
	if h.fence == "" {
		h.fence = mk(h.key.Name)
	}
	return h.fence
}

// BurnFence forgets h's fence key: it may have been written.
func (h *Hold) BurnFence() { h.fence = "" }

// Key returns the hold's key.
func (h *Hold) Key() Key { return h.key }

// Table is the hold table of one Client. It is safe for concurrent use.
type Table struct {
	timeout time.Duration // the watchdog timeout
	onEnd   func(Key, error)

	mu     sync.Mutex
	m      map[Key]*Hold
	free   []*Hold // forgotten records, for reuse
	closed bool
	nextID uint64

	c notifier // ends HoldContexts (cancel functions, which never block)
	n notifier // runs the end handler
}

// New returns a Table for holds whose watchdog lease is timeout. onEnd, if
// not nil, is called (on the notifier goroutine) for every hold that ends
// in a way other than its owner's unlock or Close.
func New(timeout time.Duration, onEnd func(Key, error)) *Table {
	t := &Table{timeout: timeout, onEnd: onEnd, m: make(map[Key]*Hold)}
	t.c.init()
	t.n.init()
	return t
}

// Use returns the record of k, created if needed, and takes its operation
// slot, waiting for another operation on the same hold to finish (or ctx to
// end). Every successful Use must be followed by one Done.
func (t *Table) Use(ctx context.Context, k Key) (*Hold, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	h := t.m[k]
	if h == nil {
		if n := len(t.free); n > 0 {
			h = t.free[n-1]
			t.free[n-1] = nil
			t.free = t.free[:n-1]
			if h.key.Name != k.Name {
				h.fence = "" // a fence key belongs to one lock's slot
			}
			h.key = k
		} else {
			h = &Hold{key: k, op: make(chan struct{}, 1)}
		}
		t.m[k] = h
	}
	h.users++
	t.mu.Unlock()
	select {
	case h.op <- struct{}{}:
		return h, nil
	default:
	}
	select {
	case h.op <- struct{}{}:
		return h, nil
	case <-ctx.Done():
		t.mu.Lock()
		h.users--
		t.forget(h)
		t.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Done gives back the operation slot taken by Use.
func (t *Table) Done(h *Hold) {
	<-h.op
	t.mu.Lock()
	h.users--
	t.forget(h)
	t.mu.Unlock()
}

// forget drops an unused record; t.mu is held.
func (t *Table) forget(h *Hold) {
	if h.users == 0 && h.count == 0 && len(h.watchers) == 0 && t.m[h.key] == h {
		delete(t.m, h.key)
		// Reuse it: a timer or round item that still points at it checks
		// its generation, which keeps counting.
		h.gen++
		h.inflight, h.timer, h.watchers = nil, nil, nil
		if len(t.free) < 1024 {
			t.free = append(t.free, h)
		}
	}
}

// Count returns the hold's count as last reported by Redis (0: not held).
// The caller holds the operation slot.
func (t *Table) Count(h *Hold) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return h.count
}

// Lease returns the lease a partial unlock restores: the hold's last
// explicit lease, or the watchdog timeout.
func (t *Table) Lease(h *Hold) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.leaseLocked(h)
}

// leaseLocked is the TTL an acquisition or unlock on h sets: its last
// explicit lease, else the watchdog's. t.mu is held.
func (t *Table) leaseLocked(h *Hold) time.Duration {
	if h.lease > 0 {
		return h.lease
	}
	return t.timeout
}

// Acquired records an acquisition whose script was sent at sent, answered
// at recv, and that left count in Redis. lease > 0 is a fixed lease; lease
// <= 0 a watchdog lease, renewed from now on. It returns false when the
// table is closed (the caller then undoes the acquisition).
func (t *Table) Acquired(h *Hold, count int, lease time.Duration, sent, recv time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if h.count == 0 || count == 1 {
		// A new hold (a previous one, if any, ended unnoticed: its
		// record is stale and starts again).
		t.endLocked(h, ErrLockLost, true)
		h.gen++
		h.reported = false
		h.since = sent
		h.watchdog = 0
		h.lease = 0
	}
	ttl := lease
	if lease > 0 {
		h.lease = lease
	} else {
		h.watchdog++
		ttl = t.timeout
	}
	h.count = count
	h.expired = false
	if count > 1 && h.key.Kind != KindSetsTTL && h.set.Add(h.ttl).After(sent.Add(ttl)) {
		// A read or write lock's re-entry never shortens the TTL (it
		// keeps the larger, or adds the lease): the end already
		// recorded is the later one, and stays.
	} else {
		h.set, h.recv = sent, recv
		h.ttl, h.fixed = ttl, lease > 0
	}
	t.armLocked(h)
	return true
}

// Released records an unlock sent at sent, answered at recv, that left
// count in Redis (0: the lock was deleted). A partial unlock resets the TTL
// to the hold's lease.
func (t *Table) Released(h *Hold, count int, sent, recv time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.watchdog > 0 {
		h.watchdog-- // every unlock removes one watchdog count, as Redisson
	}
	if count <= 0 {
		// No renewal may follow the last unlock: wait for a round in
		// flight that includes the hold. The HoldContexts end here, on
		// the caller's goroutine, so that they are done when Unlock
		// returns (no end handler runs for an owner's unlock).
		r := h.inflight
		ws := h.watchers
		h.watchers = nil
		t.endLocked(h, ErrUnlocked, false)
		t.mu.Unlock()
		for _, cancel := range ws {
			cancel(ErrUnlocked)
		}
		r.wait()
		t.mu.Lock()
		return
	}
	h.count = count
	h.set, h.recv = sent, recv
	h.expired = false
	h.ttl, h.fixed = t.leaseLocked(h), h.lease > 0 // what the unlock script set
	t.armLocked(h)
}

// ReleasedTTL records a partial unlock that left count in Redis and the
// hash ttl to live (from the script's run, which came after sent): a read
// unlock, which restores no lease. The hold's end is bounded by
// sent + ttl.
func (t *Table) ReleasedTTL(h *Hold, count int, sent, recv time.Time, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.watchdog > 0 {
		h.watchdog--
	}
	if count <= 0 {
		t.mu.Unlock()
		t.Released(h, 0, sent, recv)
		t.mu.Lock()
		return
	}
	h.count = count
	h.set, h.recv = sent, recv
	h.expired = false
	h.ttl, h.fixed = ttl, true
	if ttl <= 0 {
		h.ttl = time.Millisecond // expired already (or no expiry: -1 has no lease to bound)
	}
	t.armLocked(h)
}

// Leased records that h's TTL was set to lease by a call sent at sent and
// answered at recv, while the owner held it (a MultiLock member's lease).
// A fixed-lease hold takes lease as its lease from then on; a hold the
// watchdog renews is left to it.
func (t *Table) Leased(h *Hold, lease time.Duration, sent, recv time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.count == 0 {
		return
	}
	// Redis's TTL is lease now, whoever renews the hold next.
	h.set, h.recv = sent, recv
	h.ttl, h.fixed = lease, true
	if h.watchdog > 0 {
		return // the watchdog's next round sets its timeout again
	}
	h.lease = lease
	h.expired = false
	t.armLocked(h)
}

// Observe records the count Redis reported for h when a script refused to
// act because it was not the expected one: the hold changed behind this
// client's back. A hold that is gone ends with ErrLockLost.
func (t *Table) Observe(h *Hold, count int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if count == h.count {
		return
	}
	if count == 0 {
		if h.fixed && !time.Now().Before(h.set.Add(h.ttl)) {
			// The fixed lease last set ran out: that is why it is
			// gone, even if the lease timer has not run yet (a late
			// timer on a busy machine must not turn an expiry into a
			// loss), and even if the watchdog renews an outer
			// acquisition of the hold but had not yet overridden a
			// re-entry's shorter lease.
			t.endLocked(h, fmt.Errorf("%w: %q", ErrLeaseExpired, h.key.Name), true)
			return
		}
		t.endLocked(h, fmt.Errorf("%w: %q: the hold is gone (expired or force-unlocked)", ErrLockLost, h.key.Name), true)
		return
	}
	// Redis holds more than the record says (a lease this client counted
	// as run out is still alive): count it; a record that had ended is
	// not renewed, and runs out with its lease.
	if h.count == 0 {
		h.watchdog = 0
		h.set, h.recv = time.Now(), time.Now()
		h.since = h.set // when it was found: it began unnoticed
		h.ttl, h.fixed = t.leaseLocked(h), true
	}
	h.count = count
	t.armLocked(h)
}

// Abandon stops renewing h and ends its HoldContexts now with cause (which
// the end handler hears of too), but keeps its count: Redis may still hold
// it until its lease runs out, when the record ends. It serves an unlock
// whose outcome is unknown (Redisson cancels renewal whatever the unlock's
// result), a hold past the watchdog's maximum, and renewals that failed
// until the lease could run out.
func (t *Table) Abandon(h *Hold, cause error) {
	t.mu.Lock()
	r := h.inflight
	t.abandonLocked(h, cause)
	t.mu.Unlock()
	r.wait()
}

func (t *Table) abandonLocked(h *Hold, cause error) {
	if h.count == 0 {
		return
	}
	h.watchdog = 0
	h.inflight = nil
	h.fixed = true // its last TTL runs out, unrenewed
	t.armLocked(h)
	t.fireLocked(h, cause, true)
}

// armLocked (re)starts the lease timer of a hold not renewed by the
// watchdog; t.mu is held. The timer fires twice: at the lease's end by
// the send time of the script that set it (the earliest Redis can expire
// it), when the HoldContexts end with ErrLeaseExpired; and once Redis has
// surely expired it (by the time the reply was read, with a margin for
// clock rates), when the count drops to 0. In between the record keeps the
// count, so that it never counts less than Redis holds.
func (t *Table) armLocked(h *Hold) {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	early, ok := t.leaseEndLocked(h)
	if !ok {
		return
	}
	lease := early.Sub(h.set)
	gen, set := h.gen, h.set
	late := h.recv.Add(lease + lease/100 + 5*time.Millisecond)
	var fire func()
	fire = func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if h.gen != gen || !h.set.Equal(set) || h.count == 0 || h.watchdog > 0 {
			return
		}
		if !h.expired {
			h.expired = true
			t.fireLocked(h, fmt.Errorf("%w: %q", ErrLeaseExpired, h.key.Name), true)
			h.timer = time.AfterFunc(time.Until(late), fire)
			return
		}
		t.endLocked(h, ErrLeaseExpired, false)
		t.forget(h)
	}
	if h.expired {
		h.timer = time.AfterFunc(time.Until(late), fire)
	} else {
		h.timer = time.AfterFunc(time.Until(early), fire)
	}
}

// leaseEndLocked returns the earliest time Redis can expire h, a held
// record not renewed by the watchdog: its lease (or the TTL a read unlock
// left) from the send time of the script that set it. ok is false for a
// hold the watchdog renews or one not held. t.mu is held.
func (t *Table) leaseEndLocked(h *Hold) (end time.Time, ok bool) {
	if h.count == 0 || h.watchdog > 0 {
		return time.Time{}, false
	}
	return h.set.Add(h.ttl), true
}

// Abandoned names holds abandoned by AbandonName, for Zero.
type Abandoned []struct {
	h         *Hold
	gen       uint64
	abandoned bool // else a hold of another kind, not yet told
}

// AbandonName abandons (see Abandon) every hold of this client of kind on
// the lock name, as a force unlock does first, and waits for rounds in
// flight that include them. Zero then records that those holds, and those
// of other kinds on name, and not any taken since, are gone (the force
// unlock deleted the hash).
func (t *Table) AbandonName(name string, kind Kind, cause error) Abandoned {
	var rounds []*Round
	var out Abandoned
	t.mu.Lock()
	for k, h := range t.m {
		if k.Name == name && h.count > 0 {
			if k.Kind == kind {
				rounds = append(rounds, h.inflight)
				t.abandonLocked(h, cause)
			}
			out = append(out, struct {
				h         *Hold
				gen       uint64
				abandoned bool
			}{h, h.gen, k.Kind == kind})
		}
	}
	t.mu.Unlock()
	for _, r := range rounds {
		r.wait()
	}
	return out
}

// Zero records that the abandoned holds are gone (a force unlock deleted
// the lock); a hold begun since (a new generation) is left alone.
func (t *Table) Zero(a Abandoned) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, x := range a {
		if x.h.gen == x.gen && x.h.count > 0 {
			t.endLocked(x.h, fmt.Errorf("%w: %q was force-unlocked", ErrLockLost, x.h.key.Name), !x.abandoned)
			t.forget(x.h)
		}
	}
}

// endLocked ends the current hold of h, if any; t.mu is held. report says
// whether the end handler hears of it (not for unlocks and Close).
func (t *Table) endLocked(h *Hold, cause error, report bool) {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	had := h.count > 0
	h.count, h.watchdog, h.lease, h.releasing, h.ttl, h.fixed = 0, 0, 0, 0, 0, false
	h.inflight = nil
	h.expired = false
	t.fireLocked(h, cause, had && report)
}

// fireLocked cancels h's HoldContexts with cause and, if report, tells the
// end handler once they have ended; each on its notifier goroutine. t.mu
// is held.
func (t *Table) fireLocked(h *Hold, cause error, report bool) {
	ws := h.watchers
	h.watchers = nil
	var place uint64
	if len(ws) > 0 {
		place = t.c.post(func() {
			for _, cancel := range ws {
				cancel(cause)
			}
		})
	}
	// One report per hold: an abandoned hold whose lease then runs out,
	// or an expiry an unlock confirms, has ended once.
	if report && !h.reported && t.onEnd != nil && !errors.Is(cause, ErrUnlocked) && !errors.Is(cause, ErrClosed) {
		h.reported = true
		k := h.key
		t.n.post(func() {
			t.c.waitRan(place) // its HoldContexts end first
			t.onEnd(k, cause)
		})
	}
}

// BeginRelease marks an unlock of h in flight: until EndRelease, a renewal
// that finds the field gone sees the unlock's work, not a lost lock.
func (t *Table) BeginRelease(h *Hold) {
	t.mu.Lock()
	h.releasing++
	t.mu.Unlock()
}

// EndRelease ends a BeginRelease.
func (t *Table) EndRelease(h *Hold) {
	t.mu.Lock()
	if h.releasing > 0 {
		h.releasing--
	}
	t.mu.Unlock()
}

// Watch registers a HoldContext's cancel function on k's hold, if this
// client holds it (count > 0). It returns an id for Unwatch.
func (t *Table) Watch(k Key, cancel context.CancelCauseFunc) (uint64, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, false, ErrClosed
	}
	h := t.m[k]
	if h == nil || h.count == 0 {
		return 0, false, nil
	}
	if h.watchers == nil {
		h.watchers = make(map[uint64]context.CancelCauseFunc)
	}
	t.nextID++
	h.watchers[t.nextID] = cancel
	return t.nextID, true, nil
}

// Unwatch removes a registration made by Watch.
func (t *Table) Unwatch(k Key, id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.m[k]; h != nil {
		delete(h.watchers, id)
		t.forget(h)
	}
}

// Since returns when the hold of k began (its first acquisition), or the
// zero time if this client does not hold it.
func (t *Table) Since(k Key) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.m[k]; h != nil && h.count > 0 {
		return h.since
	}
	return time.Time{}
}

// Held returns the count this client's record shows for k (0 if none).
func (t *Table) Held(k Key) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.m[k]; h != nil {
		return h.count
	}
	return 0
}

// Stats returns the number of records and of holds renewed by the watchdog.
func (t *Table) Stats() (records, renewing int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range t.m {
		if h.count > 0 && h.watchdog > 0 {
			renewing++
		}
	}
	return len(t.m), renewing
}

// Close ends every hold with ErrClosed (without reporting them to the end
// handler), refuses further use, and stops the notifiers once they have
// run what was queued. Called from a notifier's goroutine (an end handler
// or a HoldContext's cancellation), it does not wait for that notifier,
// nor, from a cancellation, for the end handlers (which may be waiting for
// it).
func (t *Table) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	for _, h := range t.m {
		t.endLocked(h, ErrClosed, false)
	}
	t.mu.Unlock()
	if t.c.current() {
		return // both notifiers finish once the caller returns
	}
	t.c.close()
	t.n.close()
}

// Reported waits until the HoldContexts of the holds ended so far have
// been ended (their cancellations run): the watchdog times it.
func (t *Table) Reported() { t.c.drained() }
