// Command redisdocker runs a Redis container with testcontainers-go for
// the test harness (internal/redistest) on a machine that has a Docker
// engine but no redis-server. It is a module of its own so that the
// library's module graph carries none of Docker's requirements.
//
//	redisdocker probe            exit 0 if a Docker engine answers
//	redisdocker run ARGS...      start redis-server ARGS... in a container,
//	                             print "addr HOST:PORT", and terminate the
//	                             container when stdin closes (or on SIGTERM)
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// image matches the redis-server the project's machines install.
const image = "redis:7.0"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: redisdocker probe | redisdocker run [redis-server args...]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "probe":
		if !probe() {
			os.Exit(1)
		}
	case "run":
		if err := run(os.Args[2:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "redisdocker:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "redisdocker: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

// probe reports whether a Docker engine answers. testcontainers may panic
// without Docker, hence the recover.
func probe() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Health(ctx) == nil // Health closes the provider
}

// run starts the container, prints its address to out, and terminates it
// once in reaches EOF or a signal arrives.
func run(args []string, in io.Reader, out io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := append([]string{"redis-server", "--save", "", "--appendonly", "no", "--protected-mode", "no"}, args...)
	c, err := tcredis.Run(ctx, image, testcontainers.WithCmd(cmd...))
	defer func() {
		if c != nil {
			tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if terr := c.Terminate(tctx); terr != nil {
				fmt.Fprintln(os.Stderr, "redisdocker: terminate:", terr)
			}
		}
	}()
	if err != nil {
		return fmt.Errorf("docker %s: %w", image, err)
	}
	host, err := c.Host(ctx)
	if err != nil {
		return err
	}
	port, err := c.MappedPort(ctx, "6379/tcp")
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, "addr %s\n", net.JoinHostPort(host, port.Port())); err != nil {
		return err
	}
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(in))
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	return nil
}
