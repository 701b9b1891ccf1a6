package rlockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/rlockotel"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// collected reads every metric the reader has, by name.
func collected(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, rlockotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum adds the points of a counter whose attributes include want.
func sum(t *testing.T, data map[string]metricdata.Aggregation, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	s, ok := data[name].(metricdata.Sum[int64])
	if !ok {
		return 0
	}
	var n int64
	for _, p := range s.DataPoints {
		if has(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// histCount returns the count and sum of a histogram's points whose
// attributes include want.
func histCount(t *testing.T, data map[string]metricdata.Aggregation, name string, want ...attribute.KeyValue) (uint64, float64) {
	t.Helper()
	h, ok := data[name].(metricdata.Histogram[float64])
	if !ok {
		return 0, 0
	}
	var n uint64
	var total float64
	for _, p := range h.DataPoints {
		if has(p.Attributes, want) {
			n += p.Count
			total += p.Sum
		}
	}
	return n, total
}

func gauge(t *testing.T, data map[string]metricdata.Aggregation, name string) int64 {
	t.Helper()
	g, ok := data[name].(metricdata.Gauge[int64])
	require.True(t, ok, "%s is a gauge: %T", name, data[name])
	require.Len(t, g.DataPoints, 1)
	return g.DataPoints[0].Value
}

// TestMetrics drives a real Redis and reads what was recorded with the
// SDK's manual reader: every outcome of an acquisition, hold times,
// renewals, a lost hold by cause, the gauges, and lock names only when
// asked for.
func TestMetrics(t *testing.T) {
	srv := redistest.Standalone(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := rlockotel.New(mp)
	require.NoError(t, err)
	rc, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	c, err := rlock.New(rc, rlock.WithHooks(m.Hooks()), rlock.WithWatchdogTimeout(300*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	stop := m.Observe(c)
	defer stop()

	ctx := context.Background()
	o1, o2 := rlock.WithOwner(ctx, 1), rlock.WithOwner(ctx, 2)
	l := c.Lock("metrics")
	require.NoError(t, l.Lock(o1))
	// A contended attempt, a wait that runs out, a cancelled wait, and a
	// waiter seen by the gauge.
	ok, err := l.TryLock(o2, 0, 0)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = l.TryLock(o2, 20*time.Millisecond, 0)
	require.NoError(t, err)
	require.False(t, ok)
	cctx, cancel := context.WithCancel(o2)
	waiting := make(chan error, 1)
	go func() { waiting <- l.Lock(cctx) }()
	require.Eventually(t, func() bool { return gauge(t, collected(t, reader), "rlock.waiters") == 1 }, 5*time.Second, 5*time.Millisecond)
	data := collected(t, reader)
	assert.Equal(t, int64(1), gauge(t, data, "rlock.holds.renewing"))
	assert.GreaterOrEqual(t, gauge(t, data, "rlock.holds"), int64(1))
	cancel()
	require.ErrorIs(t, <-waiting, context.Canceled)

	// Renewed at least twice (every 100ms) before the unlock.
	require.Eventually(t, func() bool {
		return sum(t, collected(t, reader), "rlock.renewal.count", attribute.String("result", "renewed")) >= 2
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, l.Unlock(o1))
	require.ErrorIs(t, l.Unlock(o1), rlock.ErrNotHeld)

	// A fixed lease that runs out: lost, by lease expiry.
	require.NoError(t, c.Lock("metrics-lease").LockLease(o1, 30*time.Millisecond))
	require.Eventually(t, func() bool {
		return sum(t, collected(t, reader), "rlock.lost.count", attribute.String("cause", "lease_expired")) == 1
	}, 5*time.Second, 5*time.Millisecond)
	// A watchdog hold deleted behind the client's back: a renewal finds it
	// gone.
	require.NoError(t, c.Lock("metrics-gone").Lock(o1))
	_, err = srv.Do(ctx, "DEL", "metrics-gone")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		data := collected(t, reader)
		return sum(t, data, "rlock.lost.count", attribute.String("cause", "gone")) == 1 &&
			sum(t, data, "rlock.renewal.count", attribute.String("result", "gone")) == 1
	}, 5*time.Second, 5*time.Millisecond)
	// A permit.
	s := c.Semaphore("metrics-sem")
	require.NoError(t, s.AddPermits(ctx, 1))
	require.NoError(t, s.Acquire(ctx, 1))
	ok, err = s.TryAcquire(ctx, 1, 0)
	require.NoError(t, err)
	require.False(t, ok)

	data = collected(t, reader)
	lock := attribute.String("kind", rlock.KindLock)
	for outcome, want := range map[rlock.Outcome]int64{rlock.Acquired: 3, rlock.NotAcquired: 2, rlock.Canceled: 1, rlock.Failed: 0} {
		assert.Equal(t, want, sum(t, data, "rlock.acquire.count", lock, attribute.String("outcome", string(outcome))), "outcome %s", outcome)
	}
	sem := attribute.String("kind", rlock.KindSemaphore)
	assert.Equal(t, int64(1), sum(t, data, "rlock.acquire.count", sem, attribute.String("outcome", "acquired")))
	assert.Equal(t, int64(1), sum(t, data, "rlock.acquire.count", sem, attribute.String("outcome", "not_acquired")))
	n, total := histCount(t, data, "rlock.acquire.duration", lock, attribute.String("outcome", "not_acquired"))
	assert.Equal(t, uint64(2), n)
	assert.GreaterOrEqual(t, total, 0.020, "the 20ms wait is in the histogram")
	assert.Equal(t, int64(1), sum(t, data, "rlock.release.count", lock, attribute.String("result", "ok")))
	assert.Equal(t, int64(1), sum(t, data, "rlock.release.count", lock, attribute.String("result", "not_held")))
	n, total = histCount(t, data, "rlock.hold.duration", lock)
	assert.Equal(t, uint64(1), n)
	assert.GreaterOrEqual(t, total, 0.2, "held through two renewals")
	assert.Equal(t, int64(0), gauge(t, data, "rlock.waiters"))
	assert.Equal(t, int64(0), gauge(t, data, "rlock.holds.renewing"))

	// No lock names unless asked.
	for _, a := range data {
		if s, ok := a.(metricdata.Sum[int64]); ok {
			for _, p := range s.DataPoints {
				_, named := p.Attributes.Value("name")
				assert.False(t, named, "a name attribute without WithLockNames")
			}
		}
	}
}

// TestLockNames: WithLockNames adds the name to the per-lock instruments.
func TestLockNames(t *testing.T) {
	srv := redistest.Standalone(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := rlockotel.New(mp, rlockotel.WithLockNames())
	require.NoError(t, err)
	rc, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	c, err := rlock.New(rc, rlock.WithHooks(m.Hooks()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l := c.FairLock("named")
	require.NoError(t, l.Lock(context.Background()))
	require.NoError(t, l.Unlock(context.Background()))
	data := collected(t, reader)
	assert.Equal(t, int64(1), sum(t, data, "rlock.acquire.count", attribute.String("kind", rlock.KindFairLock), attribute.String("name", "named")))
	assert.Equal(t, int64(1), sum(t, data, "rlock.release.count", attribute.String("kind", rlock.KindFairLock), attribute.String("name", "named")))
	assert.Equal(t, int64(0), gauge(t, data, "rlock.holds"), "no client observed")
}

// TestObserveWhileCollecting: observing and un-observing clients while the
// SDK collects never deadlocks (Observe registered the callback under its
// own mutex, which the callback takes under the SDK's lock).
func TestObserveWhileCollecting(t *testing.T) {
	srv := redistest.Standalone(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := rlockotel.New(mp)
	require.NoError(t, err)
	rc, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	c, err := rlock.New(rc, rlock.WithHooks(m.Hooks()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20000 {
			m.Observe(c)()
		}
	}()
	collecting := make(chan struct{})
	go func() {
		defer close(collecting)
		for {
			select {
			case <-done:
				return
			default:
			}
			var rm metricdata.ResourceMetrics
			_ = reader.Collect(context.Background(), &rm)
		}
	}()
	select {
	case <-done:
		<-collecting
	case <-time.After(30 * time.Second):
		t.Fatal("Observe and Collect deadlocked")
	}
}
