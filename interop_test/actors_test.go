package interop_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/interop_test/driver"
	"github.com/goredisson/locks/rlock"
)

// The family scenarios are written once, over "sides" (a Go client or a
// Redisson JVM), and run with Go against Java, Java against Go, and Java
// against Java: a scenario that Java-vs-Java does not pass describes
// something other than Redisson's behaviour.

// kind names a member of the lock family.
type kind string

const (
	kindLock   kind = "lock"
	kindRead   kind = "read"
	kindWrite  kind = "write"
	kindFenced kind = "fenced"
	kindSpin   kind = "spin"
	kindNR     kind = "nr"
	kindFair   kind = "fair"
	kindNRFair kind = "nrfair"
)

// side is one service: a Go client or a JVM. Its actors are owners in it
// (Go owner ids, Java threads).
type side interface {
	String() string
	actor(n int) actor
	// waiters counts this side's waiters on a lock whose channel is ch: a
	// Go client's waiting calls; for a JVM, the subscribers of ch (the
	// caller compares with a count taken before).
	waiters(t *testing.T, ch string) int64
	java() bool
}

// actor is one owner of one side.
type actor interface {
	String() string
	lock(ctx context.Context, k kind, name string) error
	lockLease(ctx context.Context, k kind, name string, lease time.Duration) error
	// tryLock with wait < 0 is one attempt with the watchdog (Java's
	// tryLock()).
	tryLock(ctx context.Context, k kind, name string, wait, lease time.Duration) (bool, error)
	unlock(ctx context.Context, k kind, name string) error
	holdCount(ctx context.Context, k kind, name string) (int, error)
	forceUnlock(ctx context.Context, k kind, name string) (bool, error)
	isLocked(ctx context.Context, k kind, name string) (bool, error)
	lockToken(ctx context.Context, name string) (int64, error)
	tryLockToken(ctx context.Context, name string, wait, lease time.Duration) (int64, error)
	token(ctx context.Context, name string) (int64, error)
	lockAsync(ctx context.Context, k kind, name string) *call
	// tryLockAsync is tryLock in the background.
	tryLockAsync(ctx context.Context, k kind, name string, wait, lease time.Duration) *call
}

// ---- Go ----

type goSide struct {
	c    *rlock.Client
	base int64
}

func (s *goSide) String() string { return "Go" }
func (s *goSide) java() bool     { return false }
func (s *goSide) actor(n int) actor {
	return &goActor{c: s.c, id: s.base + int64(n)}
}

// waiters counts the Go waiters parked after a failed attempt (not merely
// subscribed): a wake test must not unlock before its waiter can only get
// in by a message.
func (s *goSide) waiters(t *testing.T, _ string) int64 { return int64(s.c.Stats().Parked) }

type goActor struct {
	c  *rlock.Client
	id int64
}

type fullLocker interface {
	rlock.Locker
	HoldCount(context.Context) (int, error)
	ForceUnlock(context.Context) (bool, error)
	IsLocked(context.Context) (bool, error)
}

func (a *goActor) String() string { return "Go owner " + strconv.FormatInt(a.id, 10) }

func (a *goActor) l(k kind, name string) fullLocker {
	switch k {
	case kindRead:
		return a.c.ReadWriteLock(name).ReadLock()
	case kindWrite:
		return a.c.ReadWriteLock(name).WriteLock()
	case kindFenced:
		return a.c.FencedLock(name)
	case kindSpin:
		return a.c.SpinLock(name)
	case kindNR:
		return a.c.NonReentrantLock(name)
	case kindFair:
		return a.c.FairLock(name)
	case kindNRFair:
		return a.c.NonReentrantFairLock(name)
	}
	return a.c.Lock(name)
}

func (a *goActor) ctx(ctx context.Context) context.Context { return rlock.WithOwner(ctx, a.id) }

func (a *goActor) lock(ctx context.Context, k kind, name string) error {
	return a.l(k, name).Lock(a.ctx(ctx))
}
func (a *goActor) lockLease(ctx context.Context, k kind, name string, lease time.Duration) error {
	return a.l(k, name).LockLease(a.ctx(ctx), lease)
}
func (a *goActor) tryLock(ctx context.Context, k kind, name string, wait, lease time.Duration) (bool, error) {
	return a.l(k, name).TryLock(a.ctx(ctx), max(wait, 0), lease)
}
func (a *goActor) unlock(ctx context.Context, k kind, name string) error {
	return a.l(k, name).Unlock(a.ctx(ctx))
}
func (a *goActor) holdCount(ctx context.Context, k kind, name string) (int, error) {
	return a.l(k, name).HoldCount(a.ctx(ctx))
}
func (a *goActor) forceUnlock(ctx context.Context, k kind, name string) (bool, error) {
	return a.l(k, name).ForceUnlock(a.ctx(ctx))
}
func (a *goActor) isLocked(ctx context.Context, k kind, name string) (bool, error) {
	return a.l(k, name).IsLocked(a.ctx(ctx))
}
func (a *goActor) lockToken(ctx context.Context, name string) (int64, error) {
	return a.c.FencedLock(name).LockAndGetToken(a.ctx(ctx))
}
func (a *goActor) tryLockToken(ctx context.Context, name string, wait, lease time.Duration) (int64, error) {
	tok, _, err := a.c.FencedLock(name).TryLockAndGetToken(a.ctx(ctx), max(wait, 0), lease)
	return tok, err
}
func (a *goActor) token(ctx context.Context, name string) (int64, error) {
	return a.c.FencedLock(name).Token(a.ctx(ctx))
}
func (a *goActor) lockAsync(ctx context.Context, k kind, name string) *call {
	return goAsync(func() (bool, error) { return true, a.lock(ctx, k, name) })
}
func (a *goActor) tryLockAsync(ctx context.Context, k kind, name string, wait, lease time.Duration) *call {
	return goAsync(func() (bool, error) { return a.tryLock(ctx, k, name, wait, lease) })
}

// ---- Java ----

type javaSide struct {
	f  *fixture
	j  *driver.JVM
	id string
}

func (s *javaSide) String() string { return "Java " + s.id }
func (s *javaSide) java() bool     { return true }
func (s *javaSide) actor(n int) actor {
	return &javaActor{j: s.j, thread: "T" + strconv.Itoa(n)}
}
func (s *javaSide) waiters(t *testing.T, ch string) int64 { return numsub(t, s.f.raw, ch, s.f.sharded) }

type javaActor struct {
	j      *driver.JVM
	thread string
}

func (a *javaActor) String() string { return "Java thread " + a.thread }

// spec is the driver's lock name for kind k.
func spec(k kind, name string) string {
	if k == kindLock {
		return name
	}
	return string(k) + "@" + name
}

func (a *javaActor) lock(ctx context.Context, k kind, name string) error {
	return a.j.Lock(ctx, a.thread, spec(k, name))
}
func (a *javaActor) lockLease(ctx context.Context, k kind, name string, lease time.Duration) error {
	return a.j.LockLease(ctx, a.thread, spec(k, name), lease)
}
func (a *javaActor) tryLock(ctx context.Context, k kind, name string, wait, lease time.Duration) (bool, error) {
	if wait < 0 {
		return a.j.TryLock(ctx, a.thread, spec(k, name))
	}
	if lease <= 0 {
		lease = -1
	}
	return a.j.TryLockWait(ctx, a.thread, spec(k, name), wait, lease)
}
func (a *javaActor) unlock(ctx context.Context, k kind, name string) error {
	return a.j.Unlock(ctx, a.thread, spec(k, name))
}
func (a *javaActor) holdCount(ctx context.Context, k kind, name string) (int, error) {
	return a.j.HoldCount(ctx, a.thread, spec(k, name))
}
func (a *javaActor) forceUnlock(ctx context.Context, k kind, name string) (bool, error) {
	return a.j.ForceUnlock(ctx, spec(k, name))
}
func (a *javaActor) isLocked(ctx context.Context, k kind, name string) (bool, error) {
	return a.j.IsLocked(ctx, spec(k, name))
}
func (a *javaActor) lockToken(ctx context.Context, name string) (int64, error) {
	return a.j.LockAndGetToken(ctx, a.thread, spec(kindFenced, name))
}
func (a *javaActor) tryLockToken(ctx context.Context, name string, wait, lease time.Duration) (int64, error) {
	if lease <= 0 {
		lease = -1
	}
	return a.j.TryLockAndGetToken(ctx, a.thread, spec(kindFenced, name), wait, lease)
}
func (a *javaActor) token(ctx context.Context, name string) (int64, error) {
	return a.j.Token(ctx, spec(kindFenced, name))
}
func (a *javaActor) lockAsync(ctx context.Context, k kind, name string) *call {
	return javaAsync(a.j.Send("lock", a.thread, spec(k, name)))
}
func (a *javaActor) tryLockAsync(ctx context.Context, k kind, name string, wait, lease time.Duration) *call {
	if lease <= 0 {
		lease = -1
	}
	return javaAsync(a.j.Send("trylock", a.thread, spec(k, name), wait.Milliseconds(), lease.Milliseconds()))
}

// ---- pairs ----

// pair is the two sides of one run of a scenario.
type pair struct {
	name string
	a, b side
}

// pairs returns the three runs of a scenario: Go with Java, Java with Go,
// Java with Java (two Redisson instances). opts configure the Go client;
// watchdog the JVMs (0: Redisson's default).
func (f *fixture) pairs(t *testing.T, watchdog time.Duration, opts ...rlock.Option) []pair {
	t.Helper()
	key := "A"
	if watchdog > 0 {
		key = "wdA" + watchdog.String()
	}
	ja := &javaSide{f: f, j: f.jvm(t, key, watchdog), id: "A"}
	jb := &javaSide{f: f, j: f.jvm(t, strings.Replace(key, "A", "B", 1), watchdog), id: "B"}
	g := &goSide{c: f.goClient(t, opts...), base: 100}
	return []pair{{"GoJava", g, ja}, {"JavaGo", ja, g}, {"JavaJava", ja, jb}}
}

// runPairs runs fn once per pair, each with its own lock name.
func (f *fixture) runPairs(t *testing.T, watchdog time.Duration, opts []rlock.Option, fn func(t *testing.T, a, b side, name string)) {
	for _, p := range f.pairs(t, watchdog, opts...) {
		t.Run(p.name, func(t *testing.T) { fn(t, p.a, p.b, lockName(t, "x")) })
	}
}

// notHeld reports whether err is the side's "not held by the caller"
// (ErrNotHeld, IllegalMonitorStateException).
func notHeld(err error) bool {
	var je *driver.JavaError
	return errors.Is(err, rlock.ErrNotHeld) || (errors.As(err, &je) && je.Class == "IllegalMonitorStateException")
}

// alreadyHeld reports whether err is a non-reentrant re-acquire refused
// (ErrAlreadyHeld; Java's IllegalMonitorStateException).
func alreadyHeld(err error) bool {
	var je *driver.JavaError
	return errors.Is(err, rlock.ErrAlreadyHeld) || (errors.As(err, &je) && je.Class == "IllegalMonitorStateException")
}

// waitNewWaiter waits until s has one waiter more than before on ch.
func waitNewWaiter(t *testing.T, s side, ch string, before int64) {
	t.Helper()
	require.Eventually(t, func() bool { return s.waiters(t, ch) > before }, 30*time.Second, 5*time.Millisecond,
		"no new waiter on %s (%s)", ch, s)
}

// want(t).B(f()) etc. fail t on f's error and return its value.
type okT struct{ t *testing.T }

func want(t *testing.T) okT { return okT{t} }

func (o okT) B(v bool, err error) bool {
	o.t.Helper()
	require.NoError(o.t, err)
	return v
}

func (o okT) I(v int, err error) int {
	o.t.Helper()
	require.NoError(o.t, err)
	return v
}

func (o okT) I64(v int64, err error) int64 {
	o.t.Helper()
	require.NoError(o.t, err)
	return v
}

var _ = fmt.Sprint
