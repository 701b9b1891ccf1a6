// Package watchdog renews the leases of every lock a client holds in
// watchdog mode, the way Redisson's LockRenewalScheduler does: one scheduler
// per client (not a goroutine or timer per lock) that, every Timeout/3,
// renews all held keys in batches of at most BatchSize keys per script call,
// each batch of one lock kind and, on a cluster, one hash slot.
//
// The holds and their renewal state live in the client's hold table
// (internal/hold), the one record of each hold; the watchdog keeps none of
// its own.
//
// A round renews the holds whose leases end first first (the kinds of
// lock side by side), and ends, failing what is left, after a period, or
// earlier when a lease in it is near its end: a margin (a tenth of a
// period) plus a reserve for reporting losses before it. The reserve is
// the measured cost of reporting a hold lost until its HoldContexts have
// ended (at least 5µs; 25µs under the race detector), times the holds and
// HoldContexts in the round: reporting 100,000 holds takes a good part of
// a second. A hold is lost, and ended in the table with a cause wrapping
// ErrLockLost, when a renewal finds the owner field gone (ErrNotHeld), or
// when its renewal failed and the next attempt could come too late
// (ErrRenewFailed):
//   - when Redis answered nothing in the round (unreachable, stalled,
//     refusing), the next attempt is taken to be a period away, so the loss
//     is reported about a period before the lease ends (two thirds of the
//     timeout after the last renewal);
//   - when Redis answered other batches of the round (it was serving, but
//     more holds were due than it renewed in the period, it paused, or one
//     cluster node failed), the next round begins at once and takes the
//     holds left first; a hold is left to it only if it can still renew
//     it, or report it lost, a margin and the reserve before its lease
//     ends. With many holds and a short timeout the reserve leaves no room
//     for that, and the holds a cut round left are reported at once.
//
// Either way the holder learns of the loss before the lease can run out,
// and so before another client can take the lock. HoldContexts end on a
// goroutine of their own: a slow end handler does not delay them.
//
// A renewal's lease is counted from when the round was sent, not from when
// its reply was read. Ending a hold in the table waits for a round in
// flight that includes it, so no renewal is sent for a hold once it ended.
// Close cancels a round in flight and returns at once.
package watchdog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/goredisson/locks/internal/hold"
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

// Result is the outcome of renewing one batch: Renewed[i] tells whether the
// batch's i-th hold was renewed, unless Err is set.
type Result struct {
	Renewed []bool
	Err     error
}

// Config configures a Watchdog. Table, Timeout and Renew are required.
type Config struct {
	Table *hold.Table
	// Timeout is the lease each renewal sets; renewals run every Timeout/3.
	Timeout time.Duration
	// BatchSize is the most holds renewed by one script call (default 100).
	BatchSize int
	// Slot maps a key to its cluster hash slot so that a batch never spans
	// slots; nil puts all keys in one group.
	Slot func(key string) uint16
	// Renew renews batches of holds of one kind and returns one Result per
	// batch. It must honour ctx, which ends when the round has taken a
	// period, or earlier when a lease in it is about to run out, or at
	// Close; batches it could not renew by then get
	// an error. It should renew the batches in the order given (the
	// earliest leases first).
	Renew func(ctx context.Context, kind hold.Kind, batches [][]hold.Key) []Result
	// MaxHold, when positive, bounds how long a hold is renewed: after
	// MaxHold from its beginning it is reported lost (ErrMaxHold) and left
	// to expire, so a stuck holder cannot keep a lock forever.
	MaxHold time.Duration
	// Logger receives renewal failures; nil discards them.
	Logger *slog.Logger
}

// Watchdog renews the holds of a table. It is safe for concurrent use.
type Watchdog struct {
	cfg    Config
	period time.Duration
	// reportCost is what reporting one hold lost costs, per hold and
	// HoldContext, as measured over the rounds that reported losses (the
	// round's goroutine only reads and writes it).
	reportCost time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	done   chan struct{}
}

// New returns a running Watchdog.
func New(cfg Config) (*Watchdog, error) {
	if cfg.Timeout < 3*time.Millisecond {
		return nil, fmt.Errorf("watchdog: timeout %v is too short (at least 3ms)", cfg.Timeout)
	}
	if cfg.Renew == nil || cfg.Table == nil {
		return nil, errors.New("watchdog: Config.Renew and Config.Table are required")
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watchdog{cfg: cfg, period: cfg.Timeout / 3, done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go w.loop()
	return w, nil
}

// Timeout returns the lease each renewal sets.
func (w *Watchdog) Timeout() time.Duration { return w.cfg.Timeout }

// Close stops renewing, cancelling a round in flight, and waits for the
// scheduler to end (which it does at once).
func (w *Watchdog) Close() {
	w.once.Do(w.cancel)
	<-w.done
}

// margin is how long before a lease's end the watchdog wants to have
// renewed it or reported it lost.
func (w *Watchdog) margin() time.Duration { return w.period / 10 }

// reserve is the time kept, on top of the margin, to report holds lost
// before their leases end: reporting 100,000 holds takes a good part of a
// second, which a short timeout's margin does not cover. units counts the
// holds and their HoldContexts; per unit the reserve is twice the measured
// cost of a report (see measured), at least minReportCost (norace.go,
// race.go).
func (w *Watchdog) reserve(units int) time.Duration {
	return time.Duration(units) * max(minReportCost, 2*w.reportCost)
}

// measured records what reporting units (holds and HoldContexts) lost took
// in a round, until their HoldContexts had ended. A higher sample is taken
// at once, a lower one averaged in, and rounds without a sample (fewer than
// 100 units) let it fall by a quarter, back towards minReportCost, which
// reserve applies: each sample is bounded by 20 times minReportCost, so
// that one round slowed by something else cannot stop deferring for long.
func (w *Watchdog) measured(d time.Duration, units int) {
	if units < 100 {
		w.reportCost -= w.reportCost / 4
		return
	}
	c := min(d/time.Duration(units), 20*minReportCost)
	w.reportCost = max(c, (3*w.reportCost+c)/4)
}

func (w *Watchdog) loop() {
	defer close(w.done)
	t := time.NewTicker(w.period)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		w.round()
	}
}

type group struct {
	kind hold.Kind
	slot uint16
}

// round runs one renewal round.
func (w *Watchdog) round() {
	tab := w.cfg.Table
	r, items := tab.StartRound()
	defer tab.FinishRound(r, items)
	if len(items) == 0 {
		return
	}
	start := time.Now()
	units := len(items)
	for _, it := range items {
		units += it.Watchers
	}
	reserve := w.reserve(units)
	// Holds go in the order their leases end, the earliest first, so that
	// a round cut short by its deadline (more holds than one period can
	// renew, or a server that paused) leaves out those with the most
	// lease left, which the next round then takes first.
	order := make([]int, 0, len(items))
	ends := make([]int64, len(items))
	deadline := start.Add(w.period) // a round may take a period
	for i, it := range items {
		if w.cfg.MaxHold > 0 && start.Sub(it.Since) >= w.cfg.MaxHold {
			tab.Lost(r, it, w.lost(it, fmt.Errorf("%w (%v)", ErrMaxHold, w.cfg.MaxHold)))
			continue
		}
		ends[i] = it.Set.Add(it.TTL).UnixNano()
		// ...but must end (failing what is left) a margin and the
		// reserve before the earliest lease in it could run out, so that
		// a stalled round still reports the loss in time (a re-entry's
		// lease may be shorter than the timeout). A reserve longer than
		// the rest of a period would shorten rounds of holds renewed on
		// time: those are reported, as ever, a period before their end.
		// A hold whose lease ends too soon for that (a re-entry's short
		// lease) is renewed first and cuts the round, but the round still
		// has a margin for the others.
		if by := it.Set.Add(it.TTL - w.margin() - min(reserve, w.period-w.margin())); by.Before(deadline) {
			deadline = by
		}
		order = append(order, i)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ends[a], ends[b]) })
	groups := make(map[group][]int)
	for _, i := range order {
		g := group{kind: items[i].Key.Kind}
		if w.cfg.Slot != nil {
			g.slot = w.cfg.Slot(items[i].Key.Name)
		}
		groups[g] = append(groups[g], i)
	}
	if floor := start.Add(w.margin()); deadline.Before(floor) {
		deadline = floor
	}
	ctx, cancel := context.WithDeadline(w.ctx, deadline)
	defer cancel()

	// Batches of one kind and slot, in the order of their first lease
	// end. The kinds are renewed side by side, so that one kind's retries
	// (a cluster node down) do not hold back the others.
	byKind := make(map[hold.Kind][][]int)
	for g, idx := range groups {
		for len(idx) > 0 {
			n := min(len(idx), w.cfg.BatchSize)
			byKind[g.kind] = append(byKind[g.kind], idx[:n:n])
			idx = idx[n:]
		}
	}
	type outcome struct {
		kind    hold.Kind
		batches [][]int
		results []Result
		end     time.Time
	}
	outcomes := make([]outcome, 0, len(byKind))
	for kind, batches := range byKind {
		slices.SortStableFunc(batches, func(a, b []int) int { return cmp.Compare(ends[a[0]], ends[b[0]]) })
		outcomes = append(outcomes, outcome{kind: kind, batches: batches})
	}
	var wg sync.WaitGroup
	for i := range outcomes {
		o := &outcomes[i]
		keys := make([][]hold.Key, len(o.batches))
		for j, b := range o.batches {
			keys[j] = make([]hold.Key, len(b))
			for m, k := range b {
				keys[j][m] = items[k].Key
			}
		}
		wg.Go(func() {
			o.results = w.cfg.Renew(ctx, o.kind, keys)
			o.end = time.Now()
		})
	}
	wg.Wait()
	progress := false // a batch of the round was answered: Redis is serving
	for _, o := range outcomes {
		for _, res := range o.results {
			progress = progress || res.Err == nil
		}
	}
	var lostUnits int
	var lostTime time.Duration
	// When the round's time ran out, the ticker has a tick waiting and the
	// next round begins at once; otherwise at the next tick, at the latest
	// a period after this round began.
	next := start.Add(w.period)
	if now := time.Now(); now.After(next) {
		next = now
	}
	var retried int
	var retryErr error
	for _, o := range outcomes {
		for i, b := range o.batches {
			var res Result
			if i < len(o.results) {
				res = o.results[i]
			} else {
				res.Err = errors.New("watchdog: renew returned no result for the batch")
			}
			var failed error // the batch's ErrRenewFailed cause, built once
			for j, k := range b {
				it := items[k]
				switch {
				case res.Err == nil && j < len(res.Renewed) && res.Renewed[j]:
					tab.Renewed(r, it, start, o.end)
				case res.Err == nil:
					tab.Gone(r, it, w.lost(it, ErrNotHeld))
				case w.ctx.Err() != nil:
					// Closing: nothing to report.
				case progress && next.Add(2*w.margin()+reserve).Before(it.Set.Add(it.TTL)),
					o.end.Add(w.period + w.margin()).Before(it.Set.Add(it.TTL)):
					// Redis answered other batches of this round (this
					// one failed, or the round ran out of time before
					// it), and the next round, which takes the earliest
					// leases first, can still renew it, or report it, a
					// margin and the reserve before its lease runs out;
					// or, with no answer at all, the round after a whole
					// period still can.
					retried++
					retryErr = res.Err
				default:
					t0 := time.Now()
					if failed == nil {
						failed = fmt.Errorf("%w: %w", ErrRenewFailed, res.Err)
					}
					tab.Lost(r, it, w.lost(it, failed))
					lostTime += time.Since(t0)
					lostUnits += 1 + it.Watchers
				}
			}
		}
	}
	if lostUnits >= 100 {
		// A report's cost ends when its HoldContexts have ended. Close
		// stops the wait: a cancellation may itself be closing the
		// client, which waits for this round.
		t0 := time.Now()
		reported := make(chan struct{})
		go func() { tab.Reported(); close(reported) }()
		select {
		case <-reported:
			lostTime += time.Since(t0)
		case <-w.ctx.Done():
			return
		}
	}
	w.measured(lostTime, lostUnits)
	if retried > 0 {
		w.cfg.Logger.Warn("watchdog: renewals not done this round, will retry", "holds", retried, "of", len(items), "err", retryErr)
	}
}

// lost builds the cause of a lost hold (the table's end handler logs it).
func (w *Watchdog) lost(it hold.Item, cause error) error {
	return &lostError{name: it.Key.Name, cause: cause}
}

// lostError is the cause of a lost hold: hold.ErrLockLost, the lock's name
// and why. It is formatted only when read: a round may report 100,000 of
// them, and formatting each would double what reporting them costs.
type lostError struct {
	name  string
	cause error
}

func (e *lostError) Error() string {
	return fmt.Sprintf("%v: %q: %v", hold.ErrLockLost, e.name, e.cause)
}

func (e *lostError) Unwrap() []error { return []error{hold.ErrLockLost, e.cause} }
