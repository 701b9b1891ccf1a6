// Package watchdog renews the leases of every lock a client holds in
// watchdog mode, the way Redisson's LockRenewalScheduler does: one scheduler
// per client (not a goroutine or timer per lock) that, every Timeout/3,
// renews all held keys in batches of at most BatchSize keys per script call,
// each batch within one hash slot when a slot function is given.
//
// A hold is a (key, owner field) pair with a count: every watchdog
// acquisition adds one, every unlock removes one, and the hold is renewed
// while its count is above zero. A hold is lost, and reported through
// OnLost, when a renewal finds the owner field gone, or when renewals keep
// failing and the next attempt could come too late: the report then comes
// before the lease can run out (after two failed rounds, about 2/3 of the
// timeout after the last successful renewal; never later than a tenth of
// a period before the lease ends), so the holder learns of the loss before
// another client can take the lock.
//
// Remove, Drop, DropKey and Close return only after any renewal round that
// included the hold has finished, so no renewal is ever sent for a hold
// after they return.
package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrNotHeld is the cause reported when a renewal finds that the owner no
// longer holds the lock (it expired, was force-unlocked, or Redis lost it).
var ErrNotHeld = errors.New("watchdog: lock no longer held by its owner")

// ErrMaxHold is the cause reported when a hold reached Config.MaxHold and
// was no longer renewed.
var ErrMaxHold = errors.New("watchdog: hold reached its maximum duration")

// ErrRenewFailed is the cause reported when renewals failed until the lease
// could run out; the reported error wraps it and the last failure.
var ErrRenewFailed = errors.New("watchdog: could not renew the lease in time")

// Hold names one owner's hold on one lock key.
type Hold struct {
	Key   string // the lock key
	Field string // the owner field, "<clientId>:<ownerId>"
}

// Result is the outcome of renewing one batch: Renewed[i] tells whether the
// batch's i-th hold was renewed, unless Err is set.
type Result struct {
	Renewed []bool
	Err     error
}

// Config configures a Watchdog. Timeout and Renew are required.
type Config struct {
	// Timeout is the lease each renewal sets; renewals run every Timeout/3.
	Timeout time.Duration
	// BatchSize is the most holds renewed by one script call (default 100).
	BatchSize int
	// Slot maps a key to its cluster hash slot so that a batch never spans
	// slots; nil puts all keys in one group.
	Slot func(key string) uint16
	// Renew renews batches of holds and returns one Result per batch. It
	// must honour ctx, which ends when the round has taken a period, or
	// earlier when a lease in it is about to run out; batches it could not
	// renew by then get ctx's error.
	Renew func(ctx context.Context, batches [][]Hold) []Result
	// MaxHold, when positive, bounds how long a hold is renewed: after
	// MaxHold from its first Add it is reported lost (ErrMaxHold) and left
	// to expire, so a stuck holder cannot keep a lock forever.
	MaxHold time.Duration
	// OnLost is called, outside any lock, for each hold that was lost; at
	// is when the loss was found. A hold acquired again after at is a new
	// hold that the report does not concern.
	OnLost func(h Hold, err error, at time.Time)
	// Logger receives renewal failures; nil discards them.
	Logger *slog.Logger
}

// Watchdog renews holds. It is safe for concurrent use.
type Watchdog struct {
	cfg    Config
	period time.Duration

	mu      sync.Mutex
	holds   map[Hold]*hold
	running bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

type hold struct {
	since     time.Time // the first Add
	count     int
	releasing int       // unlocks in flight: a gone field is then their doing, not a loss
	renewed   time.Time // when the last renewal known to succeed was sent
	inflight  *round    // the round renewing this hold, if any
}

type round struct{ done chan struct{} }

// New returns a Watchdog; it starts renewing on the first Add.
func New(cfg Config) (*Watchdog, error) {
	if cfg.Timeout < 3*time.Millisecond {
		return nil, fmt.Errorf("watchdog: timeout %v is too short (at least 3ms)", cfg.Timeout)
	}
	if cfg.Renew == nil {
		return nil, errors.New("watchdog: Config.Renew is nil")
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watchdog{cfg: cfg, period: cfg.Timeout / 3, holds: make(map[Hold]*hold), stop: make(chan struct{})}, nil
}

// Timeout returns the lease each renewal sets.
func (w *Watchdog) Timeout() time.Duration { return w.cfg.Timeout }

// Add counts one more acquisition of h; renewal of h starts with its first
// Add. It returns false if the Watchdog is closed.
func (w *Watchdog) Add(h Hold) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if st := w.holds[h]; st != nil {
		st.count++
		return true
	}
	now := time.Now()
	w.holds[h] = &hold{since: now, count: 1, renewed: now}
	if !w.running {
		w.running = true
		w.wg.Add(1)
		go w.loop()
	}
	return true
}

// Remove counts one release of h; at zero, renewal of h stops.
func (w *Watchdog) Remove(h Hold) {
	w.mu.Lock()
	st := w.holds[h]
	if st == nil {
		w.mu.Unlock()
		return
	}
	st.count--
	if st.count > 0 {
		w.mu.Unlock()
		return
	}
	delete(w.holds, h)
	r := st.inflight
	w.mu.Unlock()
	wait(r)
}

// BeginRelease tells the watchdog that the owner is unlocking h: until the
// matching EndRelease, a renewal that finds h gone (the unlock deleted it)
// is not a loss. Renewal of h otherwise goes on (a partial unlock keeps it).
func (w *Watchdog) BeginRelease(h Hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := w.holds[h]; st != nil {
		st.releasing++
	}
}

// EndRelease ends a BeginRelease, after the unlock's Remove or Drop.
func (w *Watchdog) EndRelease(h Hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := w.holds[h]; st != nil && st.releasing > 0 {
		st.releasing--
	}
}

// Drop stops renewing h whatever its count, and reports whether it was
// renewed.
func (w *Watchdog) Drop(h Hold) bool {
	w.mu.Lock()
	st := w.holds[h]
	if st == nil {
		w.mu.Unlock()
		return false
	}
	delete(w.holds, h)
	r := st.inflight
	w.mu.Unlock()
	wait(r)
	return true
}

// DropKey stops renewing every hold on key and returns them.
func (w *Watchdog) DropKey(key string) []Hold {
	var dropped []Hold
	var rounds []*round
	w.mu.Lock()
	for h, st := range w.holds {
		if h.Key == key {
			dropped = append(dropped, h)
			rounds = append(rounds, st.inflight)
			delete(w.holds, h)
		}
	}
	w.mu.Unlock()
	for _, r := range rounds {
		wait(r)
	}
	return dropped
}

// Count returns how many acquisitions of h are being renewed (0 if none).
func (w *Watchdog) Count(h Hold) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := w.holds[h]; st != nil {
		return st.count
	}
	return 0
}

// Len returns the number of holds being renewed.
func (w *Watchdog) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.holds)
}

// Close stops all renewal and waits for the scheduler to end. The holds are
// forgotten without being reported lost.
func (w *Watchdog) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.stop)
	}
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	w.holds = make(map[Hold]*hold)
	w.mu.Unlock()
}

// margin is how long before a lease's end the watchdog wants to have
// renewed it or reported it lost.
func (w *Watchdog) margin() time.Duration { return w.period / 10 }

func wait(r *round) {
	if r != nil {
		<-r.done
	}
}

func (w *Watchdog) loop() {
	defer w.wg.Done()
	t := time.NewTicker(w.period)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if !w.renewAll() {
			return
		}
	}
}

// renewAll runs one renewal round; it returns false (and marks the loop as
// stopped) when there is nothing left to renew.
func (w *Watchdog) renewAll() bool {
	r := &round{done: make(chan struct{})}
	defer close(r.done)

	w.mu.Lock()
	if len(w.holds) == 0 || w.closed {
		w.running = false
		w.mu.Unlock()
		return false
	}
	type lost struct {
		h   Hold
		err error
	}
	var losses []lost
	groups := make(map[uint16][]Hold)
	now := time.Now()
	earliest := now // the oldest successful renewal in the round
	for h, st := range w.holds {
		if w.cfg.MaxHold > 0 && now.Sub(st.since) >= w.cfg.MaxHold {
			delete(w.holds, h)
			losses = append(losses, lost{h, fmt.Errorf("%w (%v)", ErrMaxHold, w.cfg.MaxHold)})
			continue
		}
		var slot uint16
		if w.cfg.Slot != nil {
			slot = w.cfg.Slot(h.Key)
		}
		groups[slot] = append(groups[slot], h)
		st.inflight = r
		if st.renewed.Before(earliest) {
			earliest = st.renewed
		}
	}
	w.mu.Unlock()

	var batches [][]Hold
	for _, g := range groups {
		for len(g) > 0 {
			n := min(len(g), w.cfg.BatchSize)
			batches = append(batches, g[:n:n])
			g = g[n:]
		}
	}

	// A round may take a period, but must end (failing what is left) a
	// margin before the earliest lease in it could run out, so that a
	// stalled round still reports the loss in time.
	start := time.Now()
	deadline := start.Add(w.period)
	if d := earliest.Add(w.cfg.Timeout - w.margin()); d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	results := w.cfg.Renew(ctx, batches)
	cancel()
	end := time.Now()

	w.mu.Lock()
	for i, batch := range batches {
		var res Result
		if i < len(results) {
			res = results[i]
		} else {
			res.Err = errors.New("watchdog: renew returned no result for the batch")
		}
		for j, h := range batch {
			st := w.holds[h]
			if st == nil || st.inflight != r {
				continue // released while the round ran
			}
			st.inflight = nil
			switch {
			case res.Err == nil && j < len(res.Renewed) && res.Renewed[j]:
				st.renewed = start
			case st.releasing > 0:
				// The owner's unlock is in flight and decides: it
				// removes the hold, or keeps it if it fails.
			case res.Err == nil:
				delete(w.holds, h)
				losses = append(losses, lost{h, ErrNotHeld})
			case end.Add(w.period + w.margin()).Before(st.renewed.Add(w.cfg.Timeout)):
				// The next round, one period away, can still renew
				// before the lease runs out.
				w.cfg.Logger.Warn("watchdog: renewal failed, will retry", "key", h.Key, "err", res.Err)
			default:
				delete(w.holds, h)
				losses = append(losses, lost{h, fmt.Errorf("%w: %w", ErrRenewFailed, res.Err)})
			}
		}
	}
	w.mu.Unlock()
	for _, l := range losses {
		w.cfg.Logger.Warn("watchdog: lock lost", "key", l.h.Key, "owner", l.h.Field, "err", l.err)
		if w.cfg.OnLost != nil {
			w.cfg.OnLost(l.h, l.err, end)
		}
	}
	return true
}
