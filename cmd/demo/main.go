// Command demo shows two services contending for one Redisson-compatible
// lock, then (with -rlock) two shell jobs contending through the rlock
// tool: it starts a throwaway redis-server on a free loopback port, creates
// two lock Clients (two "services", each with its own client id), and lets
// three workers in each take the lock with nested (reentrant) calls and
// increment a shared counter with GET then SET. If the lock ever let two
// workers in at once, increments would be lost and the final count would be
// short. It stops its server before exiting.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

const (
	lockName = "demo:invoice-42"
	workers  = 3 // per service
	rounds   = 4 // per worker
)

var rlockBin = flag.String("rlock", "", "path to a built rlock tool; when set, the demo also shows two jobs contending through it")

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	srv, err := redistest.StartServer(ctx, redistest.Config{Name: "demo-redis"})
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Printf("redis-server started on %s (throwaway, stopped at exit)\n\n", srv.Addr)

	start := time.Now()
	var out sync.Mutex
	say := func(service string, worker int, format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf("%6.3fs  %-9s worker %d  %s\n", time.Since(start).Seconds(), service, worker, fmt.Sprintf(format, args...))
	}

	var wg sync.WaitGroup
	var errs []error
	var errMu sync.Mutex
	for _, service := range []string{"billing", "shipping"} {
		rc, locks, done, err := newService(srv)
		if err != nil {
			return err
		}
		defer done()
		fmt.Printf("service %-9s client id %s\n", service, locks.ID())
		for w := 1; w <= workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := work(ctx, locks, rc, func(format string, args ...any) { say(service, w, format, args...) }); err != nil {
					errMu.Lock()
					errs = append(errs, fmt.Errorf("%s worker %d: %w", service, w, err))
					errMu.Unlock()
				}
			}()
		}
	}
	fmt.Println()
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	raw, err := srv.Client()
	if err != nil {
		return err
	}
	defer raw.Close()
	n, err := raw.Do(ctx, raw.B().Get().Key("demo:counter").Build()).AsInt64()
	if err != nil {
		return err
	}
	want := int64(2 * workers * rounds)
	fmt.Printf("\ncounter = %d, expected %d: %s\n", n, want, map[bool]string{true: "mutual exclusion held", false: "INCREMENTS LOST"}[n == want])
	if n != want {
		return fmt.Errorf("counter %d != %d", n, want)
	}
	if *rlockBin != "" {
		return runCLI(ctx, srv, *rlockBin, start)
	}
	return nil
}

// work takes the lock rounds times; each time it re-enters it once (as a
// nested helper would) and increments the counter non-atomically.
func work(ctx context.Context, locks *rlock.Client, rc rueidis.Client, say func(string, ...any)) error {
	l := locks.Lock(lockName)
	for range rounds {
		if err := l.Lock(ctx); err != nil {
			return err
		}
		if err := nested(ctx, l, rc, say); err != nil {
			return err
		}
		if err := l.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

func nested(ctx context.Context, l *rlock.Lock, rc rueidis.Client, say func(string, ...any)) error {
	if err := l.Lock(ctx); err != nil { // re-entry: same goroutine, same owner
		return err
	}
	defer l.Unlock(ctx)
	n, _ := l.HoldCount(ctx)
	v, err := rc.Do(ctx, rc.B().Get().Key("demo:counter").Build()).AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		return err
	}
	say("holds the lock (hold count %d), counter %d -> %d", n, v, v+1)
	time.Sleep(40 * time.Millisecond) // the critical section's work
	return rc.Do(ctx, rc.B().Set().Key("demo:counter").Value(strconv.FormatInt(v+1, 10)).Build()).Error()
}

// newService returns a rueidis client and a lock client on srv, as one
// service would have; done closes both.
func newService(srv *redistest.Server) (rueidis.Client, *rlock.Client, func(), error) {
	rc, err := srv.Client()
	if err != nil {
		return nil, nil, nil, err
	}
	locks, err := rlock.New(rc)
	if err != nil {
		rc.Close()
		return nil, nil, nil, err
	}
	return rc, locks, func() { _ = locks.Close(); rc.Close() }, nil
}
