package rlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goredisson/locks/watchdog"
)

// HoldContext returns a copy of ctx that is cancelled when the calling
// owner's hold on the lock ends, with a cause (context.Cause) that says
// why:
//   - ErrLockLost: the watchdog found the hold gone (expired,
//     force-unlocked, Redis lost it) or could not renew it before the lease
//     could run out. The report comes before the lease ends.
//   - ErrLeaseExpired: a hold with a fixed lease reached its end.
//   - ErrUnlocked: the owner's last Unlock released it.
//   - ErrClosed: the Client was closed.
//
// Pass it to the work done under the lock, so that the work stops when the
// lock stops protecting it. It fails with ErrNotHeld when the owner does not
// hold the lock. It costs one round trip; resources are freed when the
// context ends.
func (l *Lock) HoldContext(ctx context.Context) (context.Context, error) {
	if l.err != nil {
		return nil, l.err
	}
	field := l.c.field(ownerOf(ctx))
	rc := l.c.rc
	res := rc.DoMulti(ctx,
		rc.B().Hexists().Key(l.name).Field(field).Build(),
		rc.B().Pttl().Key(l.name).Build())
	held, err := res[0].AsBool()
	if err != nil {
		return nil, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	pttl, err := res[1].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	if !held {
		return nil, fmt.Errorf("%w: %q", ErrNotHeld, l.name)
	}
	h := watchdog.Hold{Key: l.name, Field: field}
	lease := time.Duration(-1)
	if l.c.wd.Count(h) == 0 && pttl >= 0 {
		lease = time.Duration(pttl) * time.Millisecond
	}
	hctx, cancel := context.WithCancelCause(ctx)
	id, err := l.c.holds.add(h, cancel, lease)
	if err != nil {
		cancel(err)
		return nil, err
	}
	context.AfterFunc(hctx, func() { l.c.holds.remove(h, id) })
	return hctx, nil
}

// holdRegistry keeps the HoldContexts of a client by hold.
type holdRegistry struct {
	n      atomic.Int64 // holds watched; lets the hot path skip the mutex
	mu     sync.Mutex
	m      map[watchdog.Hold]*watched
	nextID uint64
	closed error
}

type watched struct {
	cancels map[uint64]registration
	timer   *time.Timer // fixed-lease expiry, nil for watchdog holds
}

type registration struct {
	cancel context.CancelCauseFunc
	at     time.Time // when HoldContext found the hold held
}

func (r *holdRegistry) add(h watchdog.Hold, cancel context.CancelCauseFunc, lease time.Duration) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed != nil {
		return 0, r.closed
	}
	if r.m == nil {
		r.m = make(map[watchdog.Hold]*watched)
	}
	w := r.m[h]
	if w == nil {
		w = &watched{cancels: make(map[uint64]registration)}
		r.m[h] = w
		r.n.Add(1)
	}
	r.nextID++
	w.cancels[r.nextID] = registration{cancel, time.Now()}
	if lease >= 0 {
		r.arm(h, w, lease)
	}
	return r.nextID, nil
}

// arm (re)starts the lease timer of a watched hold; r.mu is held.
func (r *holdRegistry) arm(h watchdog.Hold, w *watched, lease time.Duration) {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = time.AfterFunc(lease, func() {
		r.fire(h, fmt.Errorf("%w: %q", ErrLeaseExpired, h.Key))
	})
}

func (r *holdRegistry) remove(h watchdog.Hold, id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.m[h]; w != nil {
		delete(w.cancels, id)
		if len(w.cancels) == 0 {
			r.drop(h, w)
		}
	}
}

// drop forgets a watched hold; r.mu is held.
func (r *holdRegistry) drop(h watchdog.Hold, w *watched) {
	if w.timer != nil {
		w.timer.Stop()
	}
	delete(r.m, h)
	r.n.Add(-1)
}

// watching reports whether any HoldContext is registered, so that callers
// can skip building a cause nobody will read.
func (r *holdRegistry) watching() bool { return r.n.Load() != 0 }

// fire ends every HoldContext of h with cause.
func (r *holdRegistry) fire(h watchdog.Hold, cause error) {
	if r.n.Load() == 0 {
		return
	}
	r.mu.Lock()
	w := r.m[h]
	if w != nil {
		r.drop(h, w)
	}
	r.mu.Unlock()
	if w != nil {
		for _, reg := range w.cancels {
			reg.cancel(cause)
		}
	}
}

// fireBefore ends the HoldContexts of h registered before at (when a loss
// was found); later ones watch a newer hold of the same owner, which the
// report does not concern.
func (r *holdRegistry) fireBefore(h watchdog.Hold, cause error, at time.Time) {
	if r.n.Load() == 0 {
		return
	}
	var fire []context.CancelCauseFunc
	r.mu.Lock()
	if w := r.m[h]; w != nil {
		for id, reg := range w.cancels {
			if !reg.at.After(at) {
				fire = append(fire, reg.cancel)
				delete(w.cancels, id)
			}
		}
		if len(w.cancels) == 0 {
			r.drop(h, w)
		}
	}
	r.mu.Unlock()
	for _, cancel := range fire {
		cancel(cause)
	}
}

// fireKey ends every HoldContext on key, whoever the owner.
func (r *holdRegistry) fireKey(key string, cause error) {
	if r.n.Load() == 0 {
		return
	}
	var ws []*watched
	r.mu.Lock()
	for h, w := range r.m {
		if h.Key == key {
			r.drop(h, w)
			ws = append(ws, w)
		}
	}
	r.mu.Unlock()
	for _, w := range ws {
		for _, reg := range w.cancels {
			reg.cancel(cause)
		}
	}
}

// leased notes that h's lease was (re)set to lease, when h is watched and
// not renewed by the watchdog.
func (c *Client) leased(h watchdog.Hold, lease time.Duration) {
	r := &c.holds
	if r.n.Load() == 0 || c.wd.Count(h) > 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.m[h]; w != nil {
		r.arm(h, w, lease)
	}
}

func (r *holdRegistry) closeAll(cause error) {
	r.mu.Lock()
	r.closed = cause
	m := r.m
	r.m = nil
	for _, w := range m {
		if w.timer != nil {
			w.timer.Stop()
		}
	}
	r.n.Store(0)
	r.mu.Unlock()
	for _, w := range m {
		for _, reg := range w.cancels {
			reg.cancel(cause)
		}
	}
}
