package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// The Docker fallback runs the program in tools/redisdocker (a module of
// its own, so that testcontainers-go and Docker's requirements stay out of
// the library's go.mod) with "go run": "probe" tells whether a Docker
// engine answers, "run" starts a container, prints its address and
// terminates it when its stdin closes, which also happens when this
// process dies.

// dockerTool returns the directory of tools/redisdocker, next to this
// package's source, and an error if it or the go command is missing.
var dockerTool = sync.OnceValues(func() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("redistest: cannot locate the harness' source")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "tools", "redisdocker")
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("redistest: the Docker fallback needs the go command: %w", err)
	}
	return dir, nil
})

// dockerAvailable reports, once per process, whether a Docker engine
// answers.
var dockerAvailable = sync.OnceValue(func() bool {
	dir, err := dockerTool()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // includes the first build
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", ".", "probe")
	cmd.Dir = dir
	return cmd.Run() == nil
})

// startDocker runs cfg as a Redis container. Only Args, Username and
// Password are supported; Restart and Kill are unavailable.
func startDocker(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Name == "" {
		cfg.Name = "redis"
	}
	if cfg.Port != 0 || cfg.ClusterEnabled || cfg.Sentinel || cfg.ConfigText != "" || cfg.ACLFile != "" {
		return nil, fmt.Errorf("redistest: %s: the Docker fallback supports only Args and Password; %s", cfg.Name, installHint)
	}
	dir, err := dockerTool()
	if err != nil {
		return nil, err
	}
	args := []string{"run", ".", "run"}
	if cfg.Password != "" {
		args = append(args, "--requirepass", cfg.Password)
	}
	args = append(args, cfg.Args...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redistest: %s: docker: %w", cfg.Name, err)
	}
	exited := make(chan error, 1)
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addr <- strings.TrimPrefix(strings.TrimSpace(line), "addr ")
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	terminate := func(ctx context.Context) error {
		_ = stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("docker: %w: %s", err, strings.TrimSpace(stderr.String()))
			}
			return nil
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return fmt.Errorf("docker: the container did not stop: %w", ctx.Err())
		}
	}
	select {
	case a := <-addr:
		if a == "" {
			err := terminate(context.Background())
			return nil, fmt.Errorf("redistest: %s: docker: no container started: %v", cfg.Name, err)
		}
		return &Server{
			Addr:      a,
			Name:      cfg.Name + " (docker)",
			cfg:       cfg,
			kind:      kindDocker,
			terminate: terminate,
		}, nil
	case <-ctx.Done():
		tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("redistest: %s: docker: %w", cfg.Name, ctx.Err()), terminate(tctx))
	}
}
