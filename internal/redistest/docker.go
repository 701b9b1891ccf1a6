package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// dockerImage matches the redis-server the project's machines install.
const dockerImage = "redis:7.0"

// dockerAvailable reports, once per process, whether a Docker engine
// answers. testcontainers may panic without Docker, hence the recover.
var dockerAvailable = sync.OnceValue(func() (ok bool) {
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
})

// startDocker runs cfg as a testcontainers-go Redis container. Only Args,
// Username and Password are supported; Restart and Kill are unavailable.
func startDocker(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Name == "" {
		cfg.Name = "redis"
	}
	if cfg.Port != 0 || cfg.ClusterEnabled || cfg.Sentinel || cfg.ConfigText != "" || cfg.ACLFile != "" {
		return nil, fmt.Errorf("redistest: %s: the Docker fallback supports only Args and Password; %s", cfg.Name, installHint)
	}
	cmd := []string{"redis-server", "--save", "", "--appendonly", "no", "--protected-mode", "no"}
	if cfg.Password != "" {
		cmd = append(cmd, "--requirepass", cfg.Password)
	}
	cmd = append(cmd, cfg.Args...)
	c, err := tcredis.Run(ctx, dockerImage, testcontainers.WithCmd(cmd...))
	fail := func(err error) (*Server, error) {
		err = fmt.Errorf("redistest: %s: docker %s: %w", cfg.Name, dockerImage, err)
		if c != nil {
			err = errors.Join(err, testcontainers.TerminateContainer(c))
		}
		return nil, err
	}
	if err != nil {
		return fail(err)
	}
	host, err := c.Host(ctx)
	if err != nil {
		return fail(err)
	}
	port, err := c.MappedPort(ctx, "6379/tcp")
	if err != nil {
		return fail(err)
	}
	return &Server{
		Addr:      net.JoinHostPort(host, port.Port()),
		Name:      cfg.Name + " (docker)",
		cfg:       cfg,
		kind:      kindDocker,
		terminate: func(ctx context.Context) error { return c.Terminate(ctx) },
	}, nil
}
