package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// installHint tells a developer how to get the binaries this package runs.
const installHint = "install Redis (Debian/Ubuntu: `apt-get install redis-server`, or `make deps`)"

// Config describes one redis-server process. The zero value is a plain
// standalone server on a free port.
type Config struct {
	// Name labels the server in errors and logs; default "redis".
	Name string
	// Port to listen on; 0 picks a free port (and retries with another
	// one if the port is taken before redis-server binds it).
	Port int
	// Args are extra redis-server arguments, e.g.
	// []string{"--notify-keyspace-events", "KEA"}. They come after the
	// package's defaults, so they override them.
	Args []string
	// Username and Password are used by Client, Do and the readiness
	// probe. Unless ACLFile is set, Password is also passed as
	// --requirepass.
	Username, Password string
	// ACLFile, when set, is passed as --aclfile.
	ACLFile string
	// TLS, when set, makes the server listen with TLS too, on a second
	// free port (Server.TLSAddr), with TLS's server certificate and CA.
	// The harness keeps using the plain-text Addr. TLSAuthClients is
	// tls-auth-clients: "yes" (client certificates required), "optional"
	// (the default) or "no". It needs a server built with TLS support
	// (Debian's and the Valkey wheel's are).
	TLS            *TLSMaterial
	TLSAuthClients string
	// ClusterEnabled starts the server with --cluster-enabled yes, a
	// free cluster bus port (--cluster-port) and nodes.conf in Dir.
	ClusterEnabled bool
	// Sentinel runs the process as a Sentinel (redis-server --sentinel);
	// ConfigText must then hold its "sentinel monitor ..." directives.
	Sentinel bool
	// ConfigText, when set, is written to Dir/redis.conf on the first
	// start and passed as the config file (Sentinel rewrites it, so a
	// Restart keeps the Sentinel's state).
	ConfigText string
	// Binary is the server binary; default "redis-server" ("valkey-server"
	// when REDISTEST_FLAVOR=valkey).
	Binary string
	// StartTimeout bounds the wait for the first reply; default 10s.
	StartTimeout time.Duration

	// afterStart is a command run after every start (including Restart),
	// for runtime-only settings such as SENTINEL DEBUG.
	afterStart []string
}

func (c Config) binary() string {
	if c.Binary != "" {
		return c.Binary
	}
	return Flavor() + "-server"
}

// EnvFlavor selects the server the harness starts: "redis" (the default)
// runs redis-server and redis-cli, "valkey" runs valkey-server and
// valkey-cli (make deps-valkey puts Valkey's in bin/valkey; make test runs
// the lock suites on both).
const EnvFlavor = "REDISTEST_FLAVOR"

// Flavor is the server flavor of this run: "redis" or "valkey".
func Flavor() string {
	if os.Getenv(EnvFlavor) == "valkey" {
		return "valkey"
	}
	return "redis"
}

// cliBinary is the command-line client of the flavor (cluster creation,
// slot moves).
func cliBinary() string { return Flavor() + "-cli" }

type kind int

const (
	kindLocal    kind = iota // a child process started by this package
	kindExternal             // REDIS_ADDR: never stopped or restarted
	kindDocker               // a testcontainers container
)

// Server is one Redis server. For servers started by this package, Addr is
// 127.0.0.1:port and stays the same across Restart. All methods are safe for
// concurrent use.
type Server struct {
	// Addr is the host:port clients connect to.
	Addr string
	// TLSAddr is the host:port of the TLS listener ("" without
	// Config.TLS); it too stays the same across Restart.
	TLSAddr string
	// Name labels the server in errors and logs.
	Name string
	// Dir is the server's private temporary directory ("" unless the
	// package started the process). Close removes it.
	Dir string

	cfg       Config
	kind      kind
	port      int
	busPort   int
	tlsPort   int
	terminate func(context.Context) error // kindDocker

	mu     sync.Mutex
	proc   *process       // nil while not running
	client rueidis.Client // owned by the server, used by Do
	closed bool
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // Wait's result, valid after done
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// errAddrInUse marks start failures caused by a port taken by someone else.
var errAddrInUse = errors.New("address already in use")

// StartServer starts a redis-server child process as described by cfg and
// waits until it answers on its port (at most cfg.StartTimeout, and never
// beyond ctx). On error nothing is left running and the temp dir is removed;
// the error names the server and includes the tail of its log.
func StartServer(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Name == "" {
		cfg.Name = "redis"
	}
	if _, err := exec.LookPath(cfg.binary()); err != nil {
		return nil, fmt.Errorf("redistest: %s: %s not found on PATH; %s: %w", cfg.Name, cfg.binary(), installHint, err)
	}
	dir, err := os.MkdirTemp("", "redistest-"+strings.ReplaceAll(cfg.Name, string(os.PathSeparator), "_")+"-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %s: %w", cfg.Name, err)
	}
	s := &Server{Name: cfg.Name, Dir: dir, cfg: cfg, kind: kindLocal}
	if cfg.ConfigText != "" {
		if err := os.WriteFile(s.confPath(), []byte(cfg.ConfigText), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("redistest: %s: %w", cfg.Name, err)
		}
	}
	const attempts = 5
	for i := 0; ; i++ {
		if err = s.pickPorts(); err == nil {
			s.mu.Lock()
			err = s.start(ctx)
			s.mu.Unlock()
			if err == nil {
				return s, nil
			}
		}
		if cfg.Port != 0 || !errors.Is(err, errAddrInUse) || i == attempts-1 || ctx.Err() != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

// StartMasters starts n independent standalone redis-server processes in
// parallel. On error none is left running.
func StartMasters(ctx context.Context, n int) ([]*Server, error) {
	return startAll(ctx, masterConfigs(n), StartServer)
}

func masterConfigs(n int) []Config {
	cfgs := make([]Config, n)
	for i := range cfgs {
		cfgs[i].Name = fmt.Sprintf("master-%d", i)
	}
	return cfgs
}

// pickPorts chooses the client port (and the cluster bus port) by listening
// on 127.0.0.1:0 and closing the listeners again.
func (s *Server) pickPorts() error {
	n := 0
	if s.cfg.Port == 0 {
		n++
	}
	if s.cfg.ClusterEnabled {
		n++
	}
	if s.cfg.TLS != nil {
		n++
	}
	ports, err := freePorts(n)
	if err != nil {
		return fmt.Errorf("redistest: %s: choosing a free port: %w", s.Name, err)
	}
	s.port = s.cfg.Port
	if s.port == 0 {
		s.port, ports = ports[0], ports[1:]
	}
	if s.cfg.ClusterEnabled {
		s.busPort, ports = ports[0], ports[1:]
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	if s.cfg.TLS != nil {
		s.tlsPort = ports[0]
		s.TLSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
	}
	return nil
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are chosen, so they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (s *Server) confPath() string { return filepath.Join(s.Dir, "redis.conf") }

func (s *Server) args() []string {
	var a []string
	if s.cfg.ConfigText != "" {
		a = append(a, s.confPath())
	}
	if s.cfg.Sentinel {
		a = append(a, "--sentinel")
	}
	a = append(a,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--logfile", filepath.Join(s.Dir, "redis.log"),
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		// Full syncs start at once instead of after the default 5s wait
		// for more replicas, so replicas are in sync quickly.
		"--repl-diskless-sync-delay", "0",
	)
	if s.cfg.ClusterEnabled {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(s.busPort),
			"--cluster-config-file", filepath.Join(s.Dir, "nodes.conf"))
	}
	if m := s.cfg.TLS; m != nil {
		auth := s.cfg.TLSAuthClients
		if auth == "" {
			auth = "optional"
		}
		a = append(a,
			"--tls-port", strconv.Itoa(s.tlsPort),
			"--tls-cert-file", m.CertFile,
			"--tls-key-file", m.KeyFile,
			"--tls-ca-cert-file", m.CAFile,
			"--tls-auth-clients", auth)
	}
	if s.cfg.ACLFile != "" {
		a = append(a, "--aclfile", s.cfg.ACLFile)
	} else if s.cfg.Password != "" {
		a = append(a, "--requirepass", s.cfg.Password)
	}
	return append(a, s.cfg.Args...)
}

// start runs the process and waits for it to answer. s.mu must be held.
func (s *Server) start(ctx context.Context) error {
	out, err := os.OpenFile(filepath.Join(s.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return s.errorf("%w", err)
	}
	logStart := s.logSizes()
	cmd := exec.Command(s.cfg.binary(), s.args()...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return s.errorf("start %s: %w", s.cfg.binary(), err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	s.proc = p
	if err := s.waitReady(ctx, p, logStart); err != nil {
		_ = s.stop()
		return err
	}
	if len(s.cfg.afterStart) > 0 {
		if _, err := rawCommand(ctx, s.Addr, s.cfg.Username, s.cfg.Password, s.cfg.afterStart...); err != nil {
			_ = s.stop()
			return s.errorf("%s: %w", strings.Join(s.cfg.afterStart, " "), err)
		}
	}
	return nil
}

// waitReady polls until the server on s.Addr answers INFO with our pid, so a
// foreign process that grabbed the port is never mistaken for ours.
func (s *Server) waitReady(ctx context.Context, p *process, logStart [2]int64) error {
	timeout := s.cfg.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	want := fmt.Sprintf("process_id:%d\r\n", p.cmd.Process.Pid)
	// Abort a probe stuck on a foreign listener as soon as our process exits.
	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	go func() {
		select {
		case <-p.done:
			stopProbes()
		case <-probeCtx.Done():
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := rawCommand(probeCtx, s.Addr, s.cfg.Username, s.cfg.Password, "INFO", "server")
		if err == nil && strings.Contains(info, want) {
			return nil
		}
		select {
		case <-p.done:
			tail := s.LogTail()
			if s.logContains(logStart, "Address already in use") {
				return s.errorf("%w; log tail:\n%s", errAddrInUse, tail)
			}
			return s.errorf("exited during startup (%v); log tail:\n%s", p.err, tail)
		case <-ctx.Done():
			return s.errorf("not ready after %v (last probe: %v): %w; log tail:\n%s", timeout, err, ctx.Err(), s.LogTail())
		case <-tick.C:
		}
	}
}

// stop SIGKILLs the process group and waits for the process to be reaped.
// It also closes the owned client. s.mu must be held.
func (s *Server) stop() error {
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	var err error
	if !p.exited() {
		err = killProcessGroup(p.cmd.Process)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		return s.errorf("pid %d did not exit after SIGKILL (kill: %v)", p.cmd.Process.Pid, err)
	}
	return nil
}

// Close stops the server with SIGKILL and removes its temp dir. It is
// idempotent; after it returns (even with an error) no process of this
// Server is left running. For a REDIS_ADDR server it only closes the
// connections this Server opened; for a Docker server it terminates the
// container.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	switch s.kind {
	case kindLocal:
		errs = append(errs, s.stop(), os.RemoveAll(s.Dir))
	case kindDocker:
		errs = append(errs, s.stop())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		errs = append(errs, s.terminate(ctx))
		cancel()
	default:
		errs = append(errs, s.stop())
	}
	if err := errors.Join(errs...); err != nil {
		return s.errorf("close: %w", err)
	}
	return nil
}

func (s *Server) checkLocal(op string) error {
	switch {
	case s.closed:
		return s.errorf("%s: server is closed", op)
	case s.kind == kindExternal:
		return s.errorf("%s is unavailable with REDIS_ADDR (an external server is never stopped)", op)
	case s.kind == kindDocker:
		return s.errorf("%s is unavailable for a Docker-backed server", op)
	}
	return nil
}

// Restart stops the server (SIGKILL) and starts it again on the same port
// and in the same dir. All data is lost: RDB/AOF files are deleted before
// the start, while nodes.conf and a Sentinel's config are kept, so a cluster
// node or Sentinel keeps its identity. Restart also works after Kill.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkLocal("restart"); err != nil {
		return err
	}
	if err := s.stop(); err != nil {
		return err
	}
	if err := s.removeData(); err != nil {
		return s.errorf("restart: %w", err)
	}
	for i := 0; ; i++ {
		err := s.start(ctx)
		if !errors.Is(err, errAddrInUse) || i == 50 {
			return err
		}
		// The port was taken meanwhile; it may be freed again soon.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) removeData() error {
	var errs []error
	for _, pat := range []string{"*.rdb", "*.aof", "appendonlydir"} {
		matches, _ := filepath.Glob(filepath.Join(s.Dir, pat))
		for _, m := range matches {
			errs = append(errs, os.RemoveAll(m))
		}
	}
	return errors.Join(errs...)
}

// Kill sends SIGKILL to the server's process group and waits for it to
// exit, for fault-injection tests. The dir is kept, so Restart can bring the
// server back on the same port. Killing a stopped server is a no-op.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkLocal("kill"); err != nil {
		return err
	}
	return s.stop()
}

// Pid returns the server's process id, or 0 if it is not running or is not
// a child process of this program.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Running reports whether the server is up: for a local process, that it
// was started and has not exited; external and Docker servers count as
// running until Close.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kind != kindLocal {
		return !s.closed
	}
	return s.proc != nil && !s.proc.exited()
}

// ClientOption returns options for a client connected to this one server
// (ForceSingleClient, so no cluster or sentinel discovery happens).
func (s *Server) ClientOption() rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{s.Addr},
		Username:          s.cfg.Username,
		Password:          s.cfg.Password,
		ForceSingleClient: true,
		DisableCache:      s.cfg.Sentinel, // sentinels do not support CLIENT TRACKING
	}
}

// Client returns a new rueidis client for this server (see ClientOption),
// after applying opts. The caller must Close it.
func (s *Server) Client(opts ...func(*rueidis.ClientOption)) (rueidis.Client, error) {
	o := s.ClientOption()
	for _, f := range opts {
		f(&o)
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		return nil, s.errorf("new client: %w", err)
	}
	return c, nil
}

// Do runs one raw command, e.g. Do(ctx, "CLUSTER", "INFO"), on a client the
// Server owns (single node, no retries, no client-side cache; it is closed by
// Kill, Restart and Close). Redis error replies, including rueidis.Nil, are
// returned as they are, so rueidis.IsRedisNil and rueidis.IsRedisErr work;
// other errors are wrapped with the server's name and address.
func (s *Server) Do(ctx context.Context, args ...string) (rueidis.RedisMessage, error) {
	c, err := s.doClient()
	if err != nil {
		return rueidis.RedisMessage{}, err
	}
	msg, err := c.Do(ctx, c.B().Arbitrary(args...).Build()).ToMessage()
	var redisErr *rueidis.RedisError
	if err != nil && !errors.As(err, &redisErr) {
		err = s.errorf("%s: %w", strings.Join(args, " "), err)
	}
	return msg, err
}

// WaitReplicated waits until every replica connected to this master has
// acknowledged the master's whole replication stream as it stood at the
// call (INFO replication: each slaveN offset reaches master_repl_offset),
// so that killing the master then loses no write made before the call,
// whichever connection made it. (WAIT from this server's own client would
// not do: it waits only for that connection's own writes.)
func (s *Server) WaitReplicated(ctx context.Context) error {
	ctx, cancel := defaultTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := s.DoString(ctx, "INFO", "replication")
	if err != nil {
		return err
	}
	target, ok := infoInt(info, "master_repl_offset")
	if !ok {
		return s.errorf("INFO replication has no master_repl_offset")
	}
	return poll(ctx, s.String()+": replicas not caught up", func() error {
		info, err := s.DoString(ctx, "INFO", "replication")
		if err != nil {
			return err
		}
		n, _ := infoInt(info, "connected_slaves")
		if n == 0 {
			return errors.New("no replica connected")
		}
		for i := range n {
			line, _ := infoField(info, fmt.Sprintf("slave%d", i))
			off := int64(-1)
			for _, kv := range strings.Split(line, ",") {
				if v, ok := strings.CutPrefix(kv, "offset="); ok {
					off, _ = strconv.ParseInt(v, 10, 64)
				}
			}
			if off < target {
				return fmt.Errorf("replica %d at offset %d of %d (%s)", i, off, target, line)
			}
		}
		return nil
	})
}

func infoField(info, name string) (string, bool) {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v, true
		}
	}
	return "", false
}

func infoInt(info, name string) (int64, bool) {
	v, ok := infoField(info, name)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// DoString is Do for commands with a string reply, such as INFO or GET.
func (s *Server) DoString(ctx context.Context, args ...string) (string, error) {
	msg, err := s.Do(ctx, args...)
	if err != nil {
		return "", err
	}
	text, err := msg.ToString()
	if err != nil {
		return "", err
	}
	// RESP3 sends INFO, CLUSTER NODES, ... as verbatim strings, which
	// rueidis keeps with their format prefix ("txt:"): without this the
	// first line of CLUSTER NODES has a node id that matches no other.
	if strings.Contains(msg.String(), `"verbatim string"`) && len(text) >= 4 && text[3] == ':' {
		text = text[4:]
	}
	return text, nil
}

func (s *Server) doClient() (rueidis.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, s.errorf("server is closed")
	}
	if s.client == nil {
		o := s.ClientOption()
		o.DisableRetry = true
		o.DisableCache = true
		c, err := rueidis.NewClient(o)
		if err != nil {
			return nil, s.errorf("connect: %w", err)
		}
		s.client = c
	}
	return s.client, nil
}

var logFiles = [2]string{"stdout.log", "redis.log"}

func (s *Server) logSizes() (sizes [2]int64) {
	for i, name := range logFiles {
		if fi, err := os.Stat(filepath.Join(s.Dir, name)); err == nil {
			sizes[i] = fi.Size()
		}
	}
	return sizes
}

// logContains reports whether the logs contain text after the given sizes,
// i.e. in what the current start wrote.
func (s *Server) logContains(from [2]int64, text string) bool {
	for i, name := range logFiles {
		data, err := os.ReadFile(filepath.Join(s.Dir, name))
		if err == nil && int64(len(data)) >= from[i] && strings.Contains(string(data[from[i]:]), text) {
			return true
		}
	}
	return false
}

// LogTail returns the last lines of the server's log file and of its
// stdout/stderr, for error messages and failed tests.
func (s *Server) LogTail() string {
	if s.Dir == "" {
		return "(no local log)"
	}
	var b strings.Builder
	for _, name := range logFiles {
		data, err := os.ReadFile(filepath.Join(s.Dir, name))
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		lines = lines[max(0, len(lines)-25):]
		fmt.Fprintf(&b, "--- %s/%s\n%s\n", s.Dir, name, strings.Join(lines, "\n"))
	}
	if b.Len() == 0 {
		return "(log is empty)"
	}
	return b.String()
}

func (s *Server) errorf(format string, args ...any) error {
	return fmt.Errorf("redistest: %s (%s): "+format, append([]any{s.Name, s.Addr}, args...)...)
}

func (s *Server) String() string { return s.Name + " (" + s.Addr + ")" }

// rawCommand runs AUTH (if a password is set) and then args over a fresh
// connection, using a tiny RESP client so that readiness checks do not
// depend on rueidis' connection handling. It handles status, error and
// bulk string replies.
func rawCommand(ctx context.Context, addr, user, pass string, args ...string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	defer context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })()
	r := bufio.NewReader(conn)
	if pass != "" {
		auth := []string{"AUTH", pass}
		if user != "" {
			auth = []string{"AUTH", user, pass}
		}
		if _, err := roundTrip(conn, r, auth...); err != nil {
			return "", err
		}
	}
	return roundTrip(conn, r, args...)
}

func roundTrip(w io.Writer, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk header %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
