// Package driver starts and talks to the Redisson interop driver, a Java
// program (interop_test/java) that runs real Redisson RLocks on behalf of Go
// tests, one JVM per Redisson version.
//
// Build the Java side first with interop_test/java/build.sh (the Makefile's
// deps target does): it writes interop_test/java/target/driver.jar and
// target/lib-<version>/ for every version in interop_test/java/versions.txt.
//
// Protocol (see Driver.java for the full table): Go writes "<id> <cmd> <args...>"
// lines, Java answers each with "<id> ok [value]" or
// "<id> err <ExceptionSimpleName> [message]". Commands that name a thread run
// on that Java thread (one per name, created on first use) in order; commands
// for different threads run concurrently, so a blocking lock on T1 does not hold
// back an unlock on T2. Use Send to issue a command that will block and Wait
// for it later.
package driver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// JavaDirEnv overrides where the Java project (interop_test/java) is looked
// for; by default it is found next to this source file.
const JavaDirEnv = "GOREDISSON_INTEROP_JAVA_DIR"

var (
	// ErrNotBuilt is returned (wrapped) by Start when the driver jars for the
	// requested version are missing or older than their sources.
	ErrNotBuilt = errors.New("redisson interop driver not built: run make deps / interop_test/java/build.sh")
	// ErrNoJava is returned (wrapped) by Start when java is not on PATH.
	ErrNoJava = errors.New("java not found on PATH")
	// ErrExited is returned (wrapped) for commands that cannot get a reply
	// because the JVM has exited (quit, Kill, crash).
	ErrExited = errors.New("driver JVM exited")
)

// JavaDir returns the absolute path of the Java project interop_test/java.
func JavaDir() string {
	if d := os.Getenv(JavaDirEnv); d != "" {
		return d
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("interop_test", "java")
	}
	return filepath.Join(filepath.Dir(file), "..", "java")
}

// Versions returns the Redisson versions pinned in interop_test/java/versions.txt,
// in file order.
func Versions() ([]string, error) {
	b, err := os.ReadFile(filepath.Join(JavaDir(), "versions.txt"))
	if err != nil {
		return nil, fmt.Errorf("redisson versions: %w", err)
	}
	var vs []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			vs = append(vs, line)
		}
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("redisson versions: none in %s", filepath.Join(JavaDir(), "versions.txt"))
	}
	return vs, nil
}

// ClassPath returns the java class path for the given Redisson version.
func ClassPath(version string) string {
	t := filepath.Join(JavaDir(), "target")
	return filepath.Join(t, "driver.jar") + string(os.PathListSeparator) + filepath.Join(t, "lib-"+version, "*")
}

// CheckBuilt reports (as an error wrapping ErrNotBuilt) whether the jars for
// version are missing or older than the Java sources.
func CheckBuilt(version string) error {
	dir := JavaDir()
	t := filepath.Join(dir, "target")
	for _, f := range []string{
		filepath.Join(t, "driver.jar"),
		filepath.Join(t, "lib-"+version, "redisson-"+version+".jar"),
	} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%w (Redisson %s: %s missing)", ErrNotBuilt, version, f)
		}
	}
	stamp, err := os.Stat(filepath.Join(t, ".build-stamp"))
	if err != nil {
		return fmt.Errorf("%w (Redisson %s: no build stamp)", ErrNotBuilt, version)
	}
	var newer string
	for _, src := range []string{"pom.xml", "versions.txt", "build.sh", "src"} {
		_ = filepath.WalkDir(filepath.Join(dir, src), func(p string, d fs.DirEntry, err error) error {
			if err != nil || newer != "" {
				return nil
			}
			if info, err := d.Info(); err == nil && !d.IsDir() && info.ModTime().After(stamp.ModTime()) {
				newer = p
			}
			return nil
		})
	}
	if newer != "" {
		return fmt.Errorf("%w (out of date: %s is newer than the build)", ErrNotBuilt, newer)
	}
	return nil
}

// Config says which Redisson to start and where its Redis is.
type Config struct {
	// Version is a Redisson version from Versions().
	Version string
	// RedisAddrs are host:port addresses: exactly one unless Cluster, then
	// the cluster's seed nodes.
	RedisAddrs []string
	// Cluster selects Config.useClusterServers (sharded subscription mode left
	// at the version's default) instead of useSingleServer.
	Cluster bool
	// Masters: RedisAddrs are independent masters, one RedissonClient each
	// (for MultiLock and RedLock: names "multi@x" and "red@x" stand for a
	// lock over getLock("x") of every client; other names use the first).
	Masters bool
	// WatchdogTimeout is Config.setLockWatchdogTimeout; 0 keeps Redisson's
	// default (30s). Millisecond resolution.
	WatchdogTimeout time.Duration
	// NamePrefix, when set, is a NameMapper that prefixes every object name
	// (map: prefix+name; single mode only), set on the Config where the
	// version has Config.setNameMapper and on the server config otherwise.
	NamePrefix string
	// Stderr receives the JVM's stderr (Redisson logs at WARN and above). The
	// last 64 KiB are also kept for error messages.
	Stderr io.Writer
	// JVMArgs are extra JVM options placed after the defaults (which favour
	// start-up time: -XX:+UseSerialGC -XX:TieredStopAtLevel=1), e.g.
	// -Dorg.slf4j.simpleLogger.defaultLogLevel=debug or -XX:TieredStopAtLevel=4.
	JVMArgs []string
}

// JavaError is a Java exception thrown by a driver command.
type JavaError struct {
	Class   string // simple class name, e.g. IllegalMonitorStateException
	Message string // the exception message on one line (may be empty)
	Command string // the command line that failed, without its id
}

func (e *JavaError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("redisson driver %q: %s", e.Command, e.Class)
	}
	return fmt.Sprintf("redisson driver %q: %s: %s", e.Command, e.Class, e.Message)
}

// IsJavaError reports whether err is (or wraps) a *JavaError of the given
// simple class name.
func IsJavaError(err error, class string) bool {
	var je *JavaError
	return errors.As(err, &je) && je.Class == class
}

// JVM is one running driver process.
type JVM struct {
	cfg     Config
	version string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *tailBuffer

	writeMu sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*Pending
	exitErr error // set before done is closed

	done      chan struct{} // closed when the process has exited and all replies are in
	closeOnce sync.Once
	closeErr  error

	clientIDOnce sync.Once
	clientID     string
	clientIDErr  error
}

// Start launches a driver JVM and waits until Redisson is connected. ctx
// bounds the start-up only; the JVM lives until Close or Kill (or the death of
// the thread that started it: Pdeathsig is SIGKILL on Linux).
func Start(ctx context.Context, cfg Config) (*JVM, error) {
	if cfg.Version == "" {
		return nil, errors.New("driver.Start: Config.Version is empty")
	}
	if len(cfg.RedisAddrs) == 0 || (!cfg.Cluster && !cfg.Masters && len(cfg.RedisAddrs) != 1) {
		return nil, fmt.Errorf("driver.Start: need one Redis address (or several with Cluster or Masters), got %q", cfg.RedisAddrs)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoJava, err)
	}
	if err := CheckBuilt(cfg.Version); err != nil {
		return nil, err
	}

	mode := "single"
	switch {
	case cfg.Cluster:
		mode = "cluster"
	case cfg.Masters:
		mode = "masters"
	}
	args := []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k"}
	args = append(args, cfg.JVMArgs...)
	args = append(args, "-cp", ClassPath(cfg.Version), "Driver",
		strings.Join(cfg.RedisAddrs, ","), strconv.FormatInt(cfg.WatchdogTimeout.Milliseconds(), 10), mode)
	if cfg.NamePrefix != "" {
		args = append(args, "prefix="+cfg.NamePrefix)
	}

	j := &JVM{
		cfg:     cfg,
		stderr:  &tailBuffer{max: 64 << 10},
		pending: map[uint64]*Pending{},
		done:    make(chan struct{}),
	}
	j.cmd = exec.Command(java, args...)
	setPdeathsig(j.cmd)
	if cfg.Stderr != nil {
		j.cmd.Stderr = io.MultiWriter(j.stderr, cfg.Stderr)
	} else {
		j.cmd.Stderr = j.stderr
	}
	if j.stdin, err = j.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := j.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := j.cmd.Start(); err != nil {
		return nil, fmt.Errorf("driver.Start: %w", err)
	}

	ready := make(chan string, 1)
	go j.readLoop(stdout, ready)

	select {
	case v := <-ready:
		j.version = v
	case <-j.done:
		return nil, fmt.Errorf("driver.Start (Redisson %s): %w", cfg.Version, j.exitErr)
	case <-ctx.Done():
		_ = j.Kill()
		return nil, fmt.Errorf("driver.Start (Redisson %s): %w; stderr: %s", cfg.Version, ctx.Err(), j.stderr.String())
	}
	if j.version != cfg.Version {
		_ = j.Kill()
		return nil, fmt.Errorf("driver.Start: asked for Redisson %s but the JVM loaded %s", cfg.Version, j.version)
	}
	return j, nil
}

// Version returns the Redisson version the JVM reported at start-up.
func (j *JVM) Version() string { return j.version }

// Stderr returns the last 64 KiB the JVM wrote to stderr.
func (j *JVM) Stderr() string { return j.stderr.String() }

// Exited is closed once the JVM process has exited.
func (j *JVM) Exited() <-chan struct{} { return j.done }

func (j *JVM) readLoop(stdout io.Reader, ready chan<- string) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	gotReady := false
	for sc.Scan() {
		line := sc.Text()
		if !gotReady {
			if v, ok := strings.CutPrefix(line, "ready "); ok {
				gotReady = true
				ready <- strings.TrimSpace(v)
				continue
			}
		}
		j.dispatch(line)
	}
	waitErr := j.cmd.Wait()
	var err error
	switch {
	case waitErr != nil:
		err = fmt.Errorf("%w: %v; stderr: %s", ErrExited, waitErr, j.stderr.String())
	default:
		err = fmt.Errorf("%w (exit status 0)", ErrExited)
	}
	j.mu.Lock()
	j.exitErr = err
	pend := j.pending
	j.pending = map[uint64]*Pending{}
	j.mu.Unlock()
	for _, p := range pend {
		p.complete("", err)
	}
	close(j.done)
}

func (j *JVM) dispatch(line string) {
	idStr, rest, _ := strings.Cut(line, " ")
	id, err := strconv.ParseUint(idStr, 10, 64)
	if err != nil {
		fmt.Fprintf(j.stderr, "driver: unexpected stdout line %q\n", line)
		return
	}
	j.mu.Lock()
	p := j.pending[id]
	delete(j.pending, id)
	j.mu.Unlock()
	if p == nil {
		fmt.Fprintf(j.stderr, "driver: reply for unknown request %q\n", line)
		return
	}
	status, val, _ := strings.Cut(rest, " ")
	switch status {
	case "ok":
		p.complete(val, nil)
	case "err":
		class, msg, _ := strings.Cut(val, " ")
		p.complete("", &JavaError{Class: class, Message: msg, Command: p.line})
	default:
		p.complete("", fmt.Errorf("redisson driver %q: malformed reply %q", p.line, line))
	}
}

// Pending is a command sent with Send whose reply has not been awaited yet.
type Pending struct {
	line string
	done chan struct{}
	val  string
	err  error
}

func (p *Pending) complete(val string, err error) {
	p.val, p.err = val, err
	close(p.done)
}

// Wait waits for the reply and returns its value ("" for a plain ok). It can
// be called any number of times. A done ctx returns ctx.Err() and leaves the
// command running.
func (p *Pending) Wait(ctx context.Context) (string, error) {
	select {
	case <-p.done:
		return p.val, p.err
	case <-ctx.Done():
		return "", fmt.Errorf("redisson driver %q: %w", p.line, ctx.Err())
	}
}

// Done is closed when the reply has arrived.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Command returns the command line (without the request id).
func (p *Pending) Command() string { return p.line }

// Send issues a command without waiting for its reply. Arguments are
// formatted with fmt.Sprint, except time.Duration, which is sent as whole
// milliseconds; none may be empty or contain white space.
func (j *JVM) Send(cmd string, args ...any) *Pending {
	parts := make([]string, 0, len(args)+1)
	parts = append(parts, cmd)
	var bad error
	for _, a := range args {
		var s string
		switch v := a.(type) {
		case time.Duration:
			s = strconv.FormatInt(v.Milliseconds(), 10)
		default:
			s = fmt.Sprint(v)
		}
		if s == "" || strings.ContainsAny(s, " \t\r\n") {
			bad = fmt.Errorf("redisson driver: argument %q of %s must be non-empty without white space", s, cmd)
		}
		parts = append(parts, s)
	}
	p := &Pending{line: strings.Join(parts, " "), done: make(chan struct{})}
	if bad != nil || cmd == "" || strings.ContainsAny(cmd, " \t\r\n") {
		if bad == nil {
			bad = fmt.Errorf("redisson driver: bad command name %q", cmd)
		}
		p.complete("", bad)
		return p
	}

	j.mu.Lock()
	if j.exitErr != nil {
		err := j.exitErr
		j.mu.Unlock()
		p.complete("", err)
		return p
	}
	j.nextID++
	id := j.nextID
	j.pending[id] = p
	j.mu.Unlock()

	j.writeMu.Lock()
	_, err := io.WriteString(j.stdin, strconv.FormatUint(id, 10)+" "+p.line+"\n")
	j.writeMu.Unlock()
	if err != nil {
		j.mu.Lock()
		_, still := j.pending[id]
		delete(j.pending, id)
		j.mu.Unlock()
		if still {
			p.complete("", fmt.Errorf("redisson driver %q: %w: %v", p.line, ErrExited, err))
		}
	}
	return p
}

// Do sends a command and waits for its reply value ("" for a plain ok). Java
// exceptions come back as *JavaError.
func (j *JVM) Do(ctx context.Context, cmd string, args ...any) (string, error) {
	return j.Send(cmd, args...).Wait(ctx)
}

// Close sends quit (Redisson shuts down, the JVM exits 0) and waits for the
// process. If that does not work within 20s the JVM is killed. Close after
// Kill or a crash returns nil. Safe to call more than once.
func (j *JVM) Close() error {
	j.closeOnce.Do(func() {
		select {
		case <-j.done:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := j.Do(ctx, "quit")
		if err != nil && !errors.Is(err, ErrExited) {
			j.closeErr = fmt.Errorf("redisson driver quit: %w", err)
		}
		_ = j.stdin.Close()
		select {
		case <-j.done:
		case <-ctx.Done():
			if j.closeErr == nil {
				j.closeErr = fmt.Errorf("redisson driver: JVM still running after quit: %w", ctx.Err())
			}
			_ = j.Kill()
		}
	})
	return j.closeErr
}

// Kill SIGKILLs the JVM without letting Redisson shut down (its watchdog stops
// renewing, its connections drop) and waits for it to exit.
func (j *JVM) Kill() error {
	select {
	case <-j.done:
		return nil
	default:
	}
	err := j.cmd.Process.Kill()
	<-j.done
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	return err
}

// ---- convenience wrappers ----

// Lock runs RLock.lock() on thread; it blocks until the lock is taken.
func (j *JVM) Lock(ctx context.Context, thread, name string) error {
	_, err := j.Do(ctx, "lock", thread, name)
	return err
}

// LockLease runs RLock.lock(lease, MILLISECONDS) on thread.
func (j *JVM) LockLease(ctx context.Context, thread, name string, lease time.Duration) error {
	_, err := j.Do(ctx, "locklease", thread, name, lease)
	return err
}

// TryLock runs RLock.tryLock() (no wait, watchdog lease) on thread.
func (j *JVM) TryLock(ctx context.Context, thread, name string) (bool, error) {
	return parseBool(j.Do(ctx, "trylock", thread, name, -1, -1))
}

// TryLockWait runs RLock.tryLock(wait, lease, MILLISECONDS) on thread; a
// negative lease is sent as -1 (watchdog).
func (j *JVM) TryLockWait(ctx context.Context, thread, name string, wait, lease time.Duration) (bool, error) {
	if wait < 0 {
		return false, errors.New("driver.TryLockWait: negative wait (use TryLock)")
	}
	leaseArg := any(lease)
	if lease < 0 {
		leaseArg = -1
	}
	return parseBool(j.Do(ctx, "trylock", thread, name, wait, leaseArg))
}

// Unlock runs RLock.unlock() on thread. A non-owner gets a *JavaError with
// Class IllegalMonitorStateException.
func (j *JVM) Unlock(ctx context.Context, thread, name string) error {
	_, err := j.Do(ctx, "unlock", thread, name)
	return err
}

// ForceUnlock runs RLock.forceUnlock().
func (j *JVM) ForceUnlock(ctx context.Context, name string) (bool, error) {
	return parseBool(j.Do(ctx, "forceunlock", name))
}

// HoldCount runs RLock.getHoldCount() on thread.
func (j *JVM) HoldCount(ctx context.Context, thread, name string) (int, error) {
	v, err := j.Do(ctx, "holdcount", thread, name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}

// IsLocked runs RLock.isLocked().
func (j *JVM) IsLocked(ctx context.Context, name string) (bool, error) {
	return parseBool(j.Do(ctx, "islocked", name))
}

// IsHeld runs RLock.isHeldByCurrentThread() on thread.
func (j *JVM) IsHeld(ctx context.Context, thread, name string) (bool, error) {
	return parseBool(j.Do(ctx, "isheld", thread, name))
}

// TTL runs RLock.remainTimeToLive(): milliseconds, -2 when the lock key does
// not exist, -1 when it has no expiry.
func (j *JVM) TTL(ctx context.Context, name string) (int64, error) {
	v, err := j.Do(ctx, "ttl", name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// ThreadID returns the Java thread id of thread (creating the thread).
func (j *JVM) ThreadID(ctx context.Context, thread string) (int64, error) {
	v, err := j.Do(ctx, "threadid", thread)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// Parked reports whether thread is parked on a java.util.concurrent.Semaphore:
// a Redisson lock call that has made its attempts and waits on its lock
// entry's latch for an unlock message. A thread that has not been used yet
// is not parked.
func (j *JVM) Parked(ctx context.Context, thread string) (bool, error) {
	v, err := j.Do(ctx, "parked", thread)
	if err != nil {
		return false, err
	}
	return strconv.ParseBool(v)
}

// ClientID returns the id Redisson prefixes lock hash fields with (cached).
func (j *JVM) ClientID(ctx context.Context) (string, error) {
	j.clientIDOnce.Do(func() {
		j.clientID, j.clientIDErr = j.Do(ctx, "clientid")
	})
	return j.clientID, j.clientIDErr
}

// LockField returns the lock hash field "<clientId>:<threadId>" that thread
// writes when it holds a lock.
func (j *JVM) LockField(ctx context.Context, thread string) (string, error) {
	id, err := j.ClientID(ctx)
	if err != nil {
		return "", err
	}
	tid, err := j.ThreadID(ctx, thread)
	if err != nil {
		return "", err
	}
	return id + ":" + strconv.FormatInt(tid, 10), nil
}

// Incr runs, on thread, n times: lock lockName; v = GET key; sleep; SET key
// v+1; unlock. It returns the last value written.
func (j *JVM) Incr(ctx context.Context, thread, lockName, key string, n int, sleep time.Duration) (int64, error) {
	v, err := j.Do(ctx, "incr", thread, lockName, key, n, sleep)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// Lock names for the other members of the family: the driver's
// "KIND@name" syntax.
func Read(name string) string         { return "read@" + name }
func Write(name string) string        { return "write@" + name }
func Fenced(name string) string       { return "fenced@" + name }
func Spin(name string) string         { return "spin@" + name }
func NonReentrant(name string) string { return "nr@" + name }

// LockAndGetToken runs RFencedLock.lockAndGetToken() on thread (name as
// Fenced(raw)).
func (j *JVM) LockAndGetToken(ctx context.Context, thread, name string) (int64, error) {
	return parseToken(j.Do(ctx, "locktoken", thread, name))
}

// TryLockAndGetToken runs RFencedLock.tryLockAndGetToken(wait, lease,
// MILLISECONDS) on thread: 0 when it was not acquired (Java's null).
func (j *JVM) TryLockAndGetToken(ctx context.Context, thread, name string, wait, lease time.Duration) (int64, error) {
	leaseArg := any(lease)
	if lease < 0 {
		leaseArg = -1
	}
	return parseToken(j.Do(ctx, "trylocktoken", thread, name, wait, leaseArg))
}

// Token runs RFencedLock.getToken(): 0 for Java's null.
func (j *JVM) Token(ctx context.Context, name string) (int64, error) {
	return parseToken(j.Do(ctx, "token", name))
}

func parseToken(v string, err error) (int64, error) {
	if err != nil || v == "null" {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// Info returns "version=<v> clientidsrc=<how the client id was found> java=<v>".
func (j *JVM) Info(ctx context.Context) (string, error) {
	return j.Do(ctx, "info")
}

func parseBool(v string, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	return strconv.ParseBool(v)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
