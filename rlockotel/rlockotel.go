// Package rlockotel records the lock events of goredisson/locks clients as
// OpenTelemetry metrics. It is a module of its own, so that the library
// imports no telemetry: wire it with rlock.WithHooks.
//
//	m, err := rlockotel.New(otel.GetMeterProvider())
//	locks, err := rlock.New(rc, rlock.WithHooks(m.Hooks()))
//	defer m.Observe(locks)()
//
// Instruments (attributes in brackets; "name", the lock name, only with
// WithLockNames, as names are unbounded):
//
//	rlock.acquire.count     counter    acquisitions [kind, outcome, name]
//	rlock.acquire.duration  histogram  s, from the call to its return [kind, outcome, name]
//	rlock.release.count     counter    unlocks [kind, result, name]
//	rlock.hold.duration     histogram  s, from a hold's first acquisition to its last unlock [kind, name]
//	rlock.renewal.count     counter    watchdog renewals [kind, result: renewed, gone, failed]
//	                                   (gone: Redis no longer had the field, lost or unlocked meanwhile;
//	                                   the lost ones are in rlock.lost.count)
//	rlock.lost.count        counter    holds that ended without their owner's unlock [kind, cause, name]
//	rlock.holds             gauge      hold records of the observed clients (holds and calls under way)
//	rlock.holds.renewing    gauge      holds the watchdog renews
//	rlock.waiters           gauge      calls waiting for a lock or permits
//
// kind is the rlock.Kind* constant of the primitive; outcome is an
// rlock.Outcome (acquired, not_acquired, canceled, error); a release's
// result is ok, not_held or error; a lost hold's cause is lease_expired
// (a fixed lease ran out), gone (a renewal found it gone: expired, deleted
// or force-unlocked elsewhere), renew_failed (renewals failed until the
// lease could run out), max_hold (WithWatchdogMaxHold) or lost (another
// way, such as this client's own ForceUnlock).
package rlockotel

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goredisson/locks/rlock"
)

// ScopeName is the instrumentation scope of the instruments.
const ScopeName = "github.com/goredisson/locks/rlockotel"

// Option configures Metrics.
type Option func(*Metrics)

// WithLockNames adds the lock name as the attribute "name" to the
// per-lock instruments. Off by default: every name is a new time series.
func WithLockNames() Option { return func(m *Metrics) { m.names = true } }

// Metrics turns rlock events into OpenTelemetry instruments.
type Metrics struct {
	names bool

	acquires, releases, renewals, lost metric.Int64Counter
	wait, held                         metric.Float64Histogram
	holds, renewing, waiters           metric.Int64ObservableGauge
	meter                              metric.Meter

	mu      sync.Mutex
	clients map[*rlock.Client]int
}

// New creates the instruments on mp's meter for ScopeName.
func New(mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	m := &Metrics{meter: mp.Meter(ScopeName), clients: map[*rlock.Client]int{}}
	for _, o := range opts {
		o(m)
	}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	m.acquires, err = m.meter.Int64Counter("rlock.acquire.count", metric.WithDescription("Lock and semaphore acquisitions, by outcome"), metric.WithUnit("{acquisition}"))
	add(err)
	m.wait, err = m.meter.Float64Histogram("rlock.acquire.duration", metric.WithDescription("Time from an acquire call to its return"), metric.WithUnit("s"))
	add(err)
	m.releases, err = m.meter.Int64Counter("rlock.release.count", metric.WithDescription("Unlocks, by result"), metric.WithUnit("{release}"))
	add(err)
	m.held, err = m.meter.Float64Histogram("rlock.hold.duration", metric.WithDescription("Time from a hold's first acquisition to its last unlock"), metric.WithUnit("s"))
	add(err)
	m.renewals, err = m.meter.Int64Counter("rlock.renewal.count", metric.WithDescription("Watchdog renewals of holds, by result"), metric.WithUnit("{renewal}"))
	add(err)
	m.lost, err = m.meter.Int64Counter("rlock.lost.count", metric.WithDescription("Holds that ended without their owner's unlock, by cause"), metric.WithUnit("{hold}"))
	add(err)
	m.holds, err = m.meter.Int64ObservableGauge("rlock.holds", metric.WithDescription("Hold records of the observed clients (holds and calls under way)"), metric.WithUnit("{hold}"))
	add(err)
	m.renewing, err = m.meter.Int64ObservableGauge("rlock.holds.renewing", metric.WithDescription("Holds the watchdog renews"), metric.WithUnit("{hold}"))
	add(err)
	m.waiters, err = m.meter.Int64ObservableGauge("rlock.waiters", metric.WithDescription("Calls waiting for a lock or permits"), metric.WithUnit("{call}"))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Registered once, never under m.mu: a collection holds the SDK's
	// lock while the callback takes m.mu, so registering under m.mu
	// could deadlock with it.
	if _, err := m.meter.RegisterCallback(m.observe, m.holds, m.renewing, m.waiters); err != nil {
		return nil, err
	}
	return m, nil
}

// Hooks returns the hooks to pass to rlock.WithHooks. One Metrics may
// serve several Clients.
func (m *Metrics) Hooks() rlock.Hooks {
	return rlock.Hooks{Acquire: m.acquire, Release: m.release, Renew: m.renew, Lost: m.lose}
}

func (m *Metrics) attrs(kind, name string, more ...attribute.KeyValue) metric.MeasurementOption {
	kv := append([]attribute.KeyValue{attribute.String("kind", kind)}, more...)
	if m.names {
		kv = append(kv, attribute.String("name", name))
	}
	return metric.WithAttributes(kv...)
}

func (m *Metrics) acquire(e rlock.AcquireEvent) {
	ctx := context.Background()
	a := m.attrs(e.Kind, e.Name, attribute.String("outcome", string(e.Outcome)))
	m.acquires.Add(ctx, 1, a)
	m.wait.Record(ctx, e.Wait.Seconds(), a)
}

func (m *Metrics) release(e rlock.ReleaseEvent) {
	ctx := context.Background()
	result := "ok"
	switch {
	case errors.Is(e.Err, rlock.ErrNotHeld):
		result = "not_held"
	case e.Err != nil:
		result = "error"
	}
	m.releases.Add(ctx, 1, m.attrs(e.Kind, e.Name, attribute.String("result", result)))
	if e.Last {
		m.held.Record(ctx, e.Held.Seconds(), m.attrs(e.Kind, e.Name))
	}
}

func (m *Metrics) renew(e rlock.RenewEvent) {
	ctx := context.Background()
	for _, r := range []struct {
		result string
		n      int
	}{{"renewed", e.Renewed}, {"gone", e.Gone}, {"failed", e.Failed}} {
		if r.n > 0 {
			m.renewals.Add(ctx, int64(r.n), metric.WithAttributes(attribute.String("kind", e.Kind), attribute.String("result", r.result)))
		}
	}
}

func (m *Metrics) lose(e rlock.LostEvent) {
	cause := "lost"
	switch {
	case errors.Is(e.Err, rlock.ErrLeaseExpired):
		cause = "lease_expired"
	case errors.Is(e.Err, rlock.ErrHoldGone):
		cause = "gone"
	case errors.Is(e.Err, rlock.ErrRenewFailed):
		cause = "renew_failed"
	case errors.Is(e.Err, rlock.ErrMaxHold):
		cause = "max_hold"
	}
	m.lost.Add(context.Background(), 1, m.attrs(e.Kind, e.Name, attribute.String("cause", cause)))
}

// Observe adds c's holds and waiters (Client.Stats) to the gauges, until
// the returned function is called. With no client observed the gauges
// read 0.
func (m *Metrics) Observe(c *rlock.Client) (stop func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clients[c]++
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.clients[c]--; m.clients[c] <= 0 {
				delete(m.clients, c)
			}
		})
	}
}

func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var holds, renewing, waiters int64
	for c := range m.clients {
		s := c.Stats()
		holds += int64(s.Holds)
		renewing += int64(s.Renewing)
		waiters += int64(s.Waiters)
	}
	o.ObserveInt64(m.holds, holds)
	o.ObserveInt64(m.renewing, renewing)
	o.ObserveInt64(m.waiters, waiters)
	return nil
}
