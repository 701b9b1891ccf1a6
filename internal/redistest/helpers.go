package redistest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// startAll starts the servers in parallel; on error it closes those that
// started.
func startAll(ctx context.Context, cfgs []Config, start func(context.Context, Config) (*Server, error)) ([]*Server, error) {
	servers := make([]*Server, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Go(func() { servers[i], errs[i] = start(ctx, cfg) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, closeAll(servers))
	}
	return servers, nil
}

func closeAll(servers []*Server) error {
	var errs []error
	for _, s := range servers {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// poll calls check every 50ms until it succeeds or ctx ends.
func poll(ctx context.Context, what string, check func() error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: %s: %w (last check: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func defaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
