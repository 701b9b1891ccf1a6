package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// Server is a throwaway redis-server on 127.0.0.1: no persistence, killed
// by Stop.
type Server struct {
	Addr string
	cmd  *exec.Cmd
}

// Pid returns the redis-server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// StartRedis starts redis-server on a free loopback port and waits until it
// answers PING.
func StartRedis() (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (make deps-redis installs it): %w", err)
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "",
			"--maxclients", "20000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.Stdout, cmd.Stderr = nil, nil
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
		if lastErr = s.waitReady(5 * time.Second); lastErr == nil {
			return s, nil
		}
		s.Stop()
	}
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		var c net.Conn
		c, err = net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			if err == nil {
				var line string
				line, err = bufio.NewReader(c).ReadString('\n')
				if err == nil && strings.HasPrefix(line, "+PONG") {
					c.Close()
					return nil
				}
			}
			c.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// Stop kills the server.
func (s *Server) Stop() {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// Admin is a plain rueidis client (no client-side caching) for
// measurements: INFO, DBSIZE, PUBSUB, FLUSHALL.
type Admin struct{ rc rueidis.Client }

// NewAdmin connects to addr.
func NewAdmin(addr string) (*Admin, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	return &Admin{rc: rc}, nil
}

// Client returns the rueidis client.
func (a *Admin) Client() rueidis.Client { return a.rc }

// Close closes the client.
func (a *Admin) Close() { a.rc.Close() }

// FlushAll empties the server.
func (a *Admin) FlushAll(ctx context.Context) error {
	return a.rc.Do(ctx, a.rc.B().Flushall().Build()).Error()
}

// DBSize returns the number of keys.
func (a *Admin) DBSize(ctx context.Context) (int64, error) {
	return a.rc.Do(ctx, a.rc.B().Dbsize().Build()).AsInt64()
}

// Info returns INFO section.
func (a *Admin) Info(ctx context.Context, section string) (string, error) {
	return a.rc.Do(ctx, a.rc.B().Info().Section(section).Build()).ToString()
}

// CmdStat is one command's line of INFO commandstats.
type CmdStat struct{ Calls, Usec int64 }

// CommandStats returns INFO commandstats by command name.
func (a *Admin) CommandStats(ctx context.Context) (map[string]CmdStat, error) {
	s, err := a.Info(ctx, "commandstats")
	if err != nil {
		return nil, err
	}
	return ParseCommandStats(s), nil
}

// ParseCommandStats parses INFO commandstats: cmdstat_<name>:calls=N,usec=N,...
// Commands that scripts run count there too.
func ParseCommandStats(s string) map[string]CmdStat {
	out := map[string]CmdStat{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st CmdStat
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				st.Calls, _ = strconv.ParseInt(v, 10, 64)
			} else if v, ok := strings.CutPrefix(kv, "usec="); ok {
				st.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

// ScriptStats sums the script commands (EVAL, EVALSHA, their _RO forms,
// FCALL): calls, and the server time they took (including the commands they
// ran).
func ScriptStats(stats map[string]CmdStat) CmdStat {
	var n CmdStat
	for k, v := range stats {
		switch k {
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
			n.Calls += v.Calls
			n.Usec += v.Usec
		}
	}
	return n
}

// WaitQuiet waits, at most max, until a burst of script calls has been
// followed by 100ms without any, so that a window of whole renewal periods
// that starts now holds whole renewal rounds. It reports whether it saw
// the pause.
func (a *Admin) WaitQuiet(ctx context.Context, max time.Duration) bool {
	deadline := time.Now().Add(max)
	last, burst := int64(-1), false
	quietSince := time.Now()
	for time.Now().Before(deadline) {
		st, err := a.CommandStats(ctx)
		if err != nil {
			return false
		}
		n := ScriptStats(st).Calls
		switch {
		case last >= 0 && n != last:
			burst, quietSince = true, time.Now()
		case burst && time.Since(quietSince) >= 100*time.Millisecond:
			return true
		}
		last = n
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// ServerCPU returns the server's used_cpu_user + used_cpu_sys (INFO cpu) in
// seconds, 0 if unknown.
func (a *Admin) ServerCPU(ctx context.Context) float64 {
	s, err := a.Info(ctx, "cpu")
	if err != nil {
		return 0
	}
	return ParseServerCPU(s)
}

// ParseServerCPU sums used_cpu_user and used_cpu_sys of INFO cpu.
func ParseServerCPU(s string) float64 {
	var t float64
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			t += f
		}
	}
	return t
}

// PubSub returns the number of active channels (PUBSUB CHANNELS) and the
// summed subscriber count (PUBSUB NUMSUB) of the given channels.
func (a *Admin) PubSub(ctx context.Context, channels []string) (active, numsub int64, err error) {
	all, err := a.rc.Do(ctx, a.rc.B().PubsubChannels().Build()).AsStrSlice()
	if err != nil {
		return 0, 0, err
	}
	active = int64(len(all))
	for len(channels) > 0 {
		n := min(len(channels), 500)
		m, err := a.rc.Do(ctx, a.rc.B().PubsubNumsub().Channel(channels[:n]...).Build()).ToArray()
		if err != nil {
			return 0, 0, err
		}
		for i := 1; i < len(m); i += 2 {
			v, _ := m[i].AsInt64()
			numsub += v
		}
		channels = channels[n:]
	}
	return active, numsub, nil
}

// Subscriptions returns the subscriptions on the server now: PUBSUB
// NUMSUB summed over every active channel (PUBSUB CHANNELS).
func (a *Admin) Subscriptions(ctx context.Context) (int64, error) {
	all, err := a.rc.Do(ctx, a.rc.B().PubsubChannels().Build()).AsStrSlice()
	if err != nil {
		return 0, err
	}
	_, n, err := a.PubSub(ctx, all)
	return n, err
}

// RedisVersion returns redis_version from INFO server.
func (a *Admin) RedisVersion(ctx context.Context) string {
	s, err := a.Info(ctx, "server")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}

// PingRTT returns the p50 and p99 of n sequential PINGs through rueidis.
func (a *Admin) PingRTT(ctx context.Context, n int) (p50, p99 time.Duration, err error) {
	var h Hist
	for i := 0; i < n+100; i++ {
		t := time.Now()
		if err := a.rc.Do(ctx, a.rc.B().Ping().Build()).Error(); err != nil {
			return 0, 0, err
		}
		if i >= 100 {
			h.Add(time.Since(t))
		}
	}
	return h.Quantile(0.5), h.Quantile(0.99), nil
}

// Hostname is os.Hostname or "unknown".
func Hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
