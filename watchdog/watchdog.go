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
// A round renews the holds whose leases end first first, and ends (failing
// what is left) after a period, or earlier, a margin (a tenth of a period)
// before the earliest lease in it could run out. A hold is lost, and ended
// in the table with a cause wrapping ErrLockLost, when a renewal finds the
// owner field gone (ErrNotHeld), or when its renewal failed and the next
// attempt could come too late (ErrRenewFailed):
//   - when Redis answered nothing in the round (unreachable, stalled,
//     refusing), the next attempt is taken to be a period away, so the loss
//     is reported about a period before the lease ends (two thirds of the
//     timeout after the last renewal);
//   - when Redis answered other batches of the round (it was serving, but
//     more holds were due than it renewed in the period, it paused, or one
//     cluster node failed), the next round begins at once and takes the
//     holds left first; they are reported lost when a round cannot renew
//     them a margin before their leases end.
//
// Either way the holder learns of the loss before the lease can run out,
// and so before another client can take the lock.
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
		// ...but must end (failing what is left) a margin before the
		// earliest lease in it could run out, so that a stalled round
		// still reports the loss in time (a re-entry's lease may be
		// shorter than the timeout).
		if by := it.Set.Add(it.TTL - w.margin()); by.Before(deadline) {
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
	ctx, cancel := context.WithDeadline(w.ctx, deadline)
	defer cancel()

	// Batches of one kind and slot, in the order of their first lease end;
	// the kinds in the order of their earliest batch.
	byKind := make(map[hold.Kind][][]int)
	for g, idx := range groups {
		for len(idx) > 0 {
			n := min(len(idx), w.cfg.BatchSize)
			byKind[g.kind] = append(byKind[g.kind], idx[:n:n])
			idx = idx[n:]
		}
	}
	kinds := make([]hold.Kind, 0, len(byKind))
	for kind, batches := range byKind {
		slices.SortStableFunc(batches, func(a, b []int) int { return cmp.Compare(ends[a[0]], ends[b[0]]) })
		kinds = append(kinds, kind)
	}
	slices.SortFunc(kinds, func(a, b hold.Kind) int { return cmp.Compare(ends[byKind[a][0][0]], ends[byKind[b][0][0]]) })

	type outcome struct {
		batches [][]int
		results []Result
		end     time.Time
	}
	outcomes := make([]outcome, 0, len(kinds))
	progress := false // a batch of the round was answered: Redis is serving
	for _, kind := range kinds {
		batches := byKind[kind]
		keys := make([][]hold.Key, len(batches))
		for i, b := range batches {
			keys[i] = make([]hold.Key, len(b))
			for j, k := range b {
				keys[i][j] = items[k].Key
			}
		}
		results := w.cfg.Renew(ctx, kind, keys)
		for _, res := range results {
			progress = progress || res.Err == nil
		}
		outcomes = append(outcomes, outcome{batches, results, time.Now()})
	}
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
			for j, k := range b {
				it := items[k]
				switch {
				case res.Err == nil && j < len(res.Renewed) && res.Renewed[j]:
					tab.Renewed(r, it, start, o.end)
				case res.Err == nil:
					tab.Gone(r, it, w.lost(it, ErrNotHeld))
				case w.ctx.Err() != nil:
					// Closing: nothing to report.
				case progress && next.Add(2*w.margin()).Before(it.Set.Add(it.TTL)),
					o.end.Add(w.period + w.margin()).Before(it.Set.Add(it.TTL)):
					// Redis answered other batches of this round (this
					// one failed, or the round ran out of time before
					// it), and the next round, which takes the earliest
					// leases first, can still renew it a margin before
					// its lease runs out; or, with no answer at all, the
					// round after a whole period still can.
					retried++
					retryErr = res.Err
				default:
					tab.Lost(r, it, w.lost(it, fmt.Errorf("%w: %w", ErrRenewFailed, res.Err)))
				}
			}
		}
	}
	if retried > 0 {
		w.cfg.Logger.Warn("watchdog: renewals not done this round, will retry", "holds", retried, "of", len(items), "err", retryErr)
	}
}

// lost builds the cause of a lost hold (the table's end handler logs it).
func (w *Watchdog) lost(it hold.Item, cause error) error {
	return fmt.Errorf("%w: %q: %w", hold.ErrLockLost, it.Key.Name, cause)
}
