package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// runCLI shows the rlock command-line tool: two cron-style jobs on two
// "hosts" contend for one lock with `rlock run`, and `rlock status` shows the
// holder and the waiter in between.
func runCLI(ctx context.Context, srv *redistest.Server, bin string, start time.Time) error {
	url := "redis://" + srv.Addr
	const name = "nightly-report"
	fmt.Printf("\n--- the rlock tool: two jobs, one lock (%s) ---\n\n", name)
	var out sync.Mutex
	say := func(who, line string) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf("%6.3fs  %-8s %s\n", time.Since(start).Seconds(), who, line)
	}
	job := func(host string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, bin, "--redis", url, "run", name, "--",
			"sh", "-c", `echo "job starts on `+host+`"; sleep 1.5; echo "job done on `+host+`"`)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		for _, r := range []io.Reader{stdout, stderr} {
			go func() {
				s := bufio.NewScanner(r)
				for s.Scan() {
					say(host, s.Text())
				}
			}()
		}
		return cmd, nil
	}

	_, locks, done, err := newService(srv)
	if err != nil {
		return err
	}
	defer done()
	l := locks.Lock(name)
	waitFor := func(cond func(rlock.Info) bool) error {
		for {
			info, err := l.Inspect(ctx)
			if err != nil {
				return err
			}
			if cond(info) {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	say("shell", "$ rlock run "+name+" -- <job>   (host-a)")
	a, err := job("host-a")
	if err != nil {
		return err
	}
	if err := waitFor(func(i rlock.Info) bool { return i.Locked }); err != nil {
		return err
	}
	say("shell", "$ rlock run "+name+" -- <job>   (host-b)")
	b, err := job("host-b")
	if err != nil {
		return err
	}
	if err := waitFor(func(i rlock.Info) bool { return i.Subscribers > 0 }); err != nil {
		return err
	}
	say("shell", "$ rlock status "+name)
	status, err := exec.CommandContext(ctx, bin, "--redis", url, "status", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rlock status: %w: %s", err, status)
	}
	for _, line := range strings.Split(strings.TrimRight(string(status), "\n"), "\n") {
		say("status", line)
	}
	if err := a.Wait(); err != nil {
		return fmt.Errorf("job on host-a: %w", err)
	}
	if err := b.Wait(); err != nil {
		return fmt.Errorf("job on host-b: %w", err)
	}
	say("shell", "both jobs ran, one after the other; a Java service calling redisson.getLock(\""+name+"\") would have waited its turn too")
	return nil
}
