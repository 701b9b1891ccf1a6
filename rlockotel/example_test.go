package rlockotel_test

import (
	"context"
	"log"

	"github.com/redis/rueidis"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/rlockotel"
)

// Wiring the metrics to a MeterProvider (here the SDK's, with a reader of
// your exporter's; otel.GetMeterProvider() serves as well).
func Example() {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	m, err := rlockotel.New(mp) // rlockotel.WithLockNames() adds each lock's name
	if err != nil {
		log.Fatal(err)
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	locks, err := rlock.New(rc, rlock.WithHooks(m.Hooks()))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	defer m.Observe(locks)() // the holds and waiters gauges

	l := locks.Lock("invoice:42")
	if err := l.Lock(context.Background()); err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(context.Background())
}
