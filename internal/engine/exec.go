// Package engine is what every lock primitive shares: script execution
// with replica sync and exact outcomes (exec.go), the acquire loop run from
// a per-primitive spec (acquire.go) and the unlock (release.go), on top of
// the hold table (internal/hold) and the pub/sub hub (pubsub).
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/scripts"
)

// Errors of the engine; the rlock package exports them.
var (
	// ErrTimeout: a command or subscription took longer than the
	// client's own timeout while the caller's context was still alive.
	ErrTimeout = errors.New("rlock: timed out")
	// ErrNoSyncedReplicas: no replica acknowledged a lock write.
	ErrNoSyncedReplicas = errors.New("rlock: none of the replicas acknowledged the lock write")
	// ErrUnresolved: the outcome of a script call could not be learnt
	// within the call's budget (Redis unreachable). The client keeps
	// settling it in the background, undoing an acquisition the caller no
	// longer waits for.
	ErrUnresolved = errors.New("rlock: outcome not known yet")
	// ErrUnexpectedReply: Redis (or something between it and the client)
	// answered a script with a reply the script never gives. Such a
	// reply does not tell whether the call ran: it is settled as a lost
	// one.
	ErrUnexpectedReply = errors.New("rlock: unexpected reply")
)

// Class says what a script call's reply tells about whether it ran.
type Class uint8

const (
	// Done: Redis replied (a nil reply included); the script ran.
	Done Class = iota
	// NotRun: Redis refused the call before running it (TRYAGAIN, BUSY,
	// LOADING, CLUSTERDOWN, MASTERDOWN, READONLY, ...), or it was never
	// sent: sending it again is safe.
	NotRun
	// Unknown: the round trip failed after the call may have reached
	// Redis (connection lost, no reply within the timeout).
	Unknown
	// Failed: Redis answered with an error that a retry will not cure
	// (NOPERM, WRONGTYPE, ...). The script did not complete.
	Failed
	// Closed: the rueidis client is closed.
	Closed
)

// notRunPrefixes are the error replies with which Redis refuses a command
// before running any of it. Redisson retries them too.
var notRunPrefixes = []string{"TRYAGAIN", "BUSY", "LOADING", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "NOREPLICAS", "UNBLOCKED"}

// Classify says what err, from one round trip, tells about whether the
// command ran. callerCtx is the caller's context; a deadline of the
// client's own command timeout is reported as ErrTimeout, not as the
// caller's deadline.
func Classify(callerCtx context.Context, err error) (Class, error) {
	if err == nil || rueidis.IsRedisNil(err) {
		return Done, nil
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		for _, p := range notRunPrefixes {
			if strings.HasPrefix(msg, p) {
				return NotRun, err
			}
		}
		// A command a script calls that the ACL denies: name it.
		return Failed, scripts.Explain(err)
	}
	if errors.Is(err, rueidis.ErrClosing) {
		return Closed, err
	}
	if noConnection(err) {
		return NotRun, err // nothing was sent
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		if cerr := callerCtx.Err(); cerr != nil {
			return Unknown, cerr
		}
		return Unknown, fmt.Errorf("%w: no reply within the command timeout", ErrTimeout)
	}
	return Unknown, err
}

// ReplicaSync is Redisson's checkLockSyncedSlaves (PROTOCOL.md 13): after a
// lock write, WAIT for the master's replicas on the same connection.
type ReplicaSync struct {
	Enabled  bool
	Timeout  time.Duration
	Attempts int
	Delay    time.Duration // attempts are spaced by a random delay in [Delay, 2*Delay]
}

// Sleep waits the retry delay or until ctx ends.
func (s *ReplicaSync) Sleep(ctx context.Context) error {
	d := s.Delay
	if d > 0 {
		d += rand.N(d + 1)
	}
	return sleep(ctx, d)
}

func sleep(ctx context.Context, d time.Duration) error { return sleepOr(ctx, nil, d) }

// sleepOr sleeps d, or less when ctx ends (its error) or closing is closed
// (hold.ErrClosed; nil: never).
func sleepOr(ctx context.Context, closing <-chan struct{}, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-closing:
		return hold.ErrClosed
	case <-t.C:
		return nil
	}
}

// Executor runs scripts on the master of their first key, each call
// bounded by the command timeout whatever the caller's context, with
// replica sync when enabled.
type Executor struct {
	RC      rueidis.Client
	Cluster bool
	Timeout time.Duration // the command timeout
	Sync    ReplicaSync
	Log     *slog.Logger

	// replicas caches each slot's replica count (index 0 outside a
	// cluster), as connected_slaves + 1; 0 means unknown.
	replicas [names.NumSlots]atomic.Int32

	deadline atomic.Pointer[deadlineCtx] // the shared command deadline
	dmu      sync.Mutex
}

// deadlineCtx is a context whose deadline is the command timeout from when
// it was made, shared by the calls of the next slice of time, so that a
// call does not allocate a context and a timer of its own.
type deadlineCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
	until  time.Time // reuse it until then
}

// refusedError is a replica sync that Redis refused for good (NOPERM: the
// user may not run WAIT): trying again cannot cure it.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// SyncRefused reports whether err is (or wraps) a replica sync that Redis
// refused for good.
func SyncRefused(err error) bool {
	var r *refusedError
	return errors.As(err, &r)
}

// Reply is the outcome of one script call.
type Reply struct {
	Res   rueidis.RedisResult
	Class Class
	Err   error // the classified error; nil for Done

	// With replica sync: how many replicas acknowledged the write, of
	// how many; SyncErr when WAIT itself failed.
	Acked, Replicas int64
	SyncErr         error
}

// Unsynced reports whether a write that ran reached none of the replicas
// (or WAIT failed).
func (r Reply) Unsynced() bool {
	return r.Class == Done && (r.SyncErr != nil || (r.Replicas > 0 && r.Acked == 0))
}

// Int returns the script's integer reply.
func (r Reply) Int() (int64, error) { return r.Res.AsInt64() }

// Integer returns the reply when it is a RESP integer, the only form most
// scripts reply with (not a string of digits, which AsInt64 also reads).
func (r Reply) Integer() (int64, bool) {
	m, err := r.Res.ToMessage()
	if err != nil || !m.IsInt64() {
		return 0, false
	}
	v, _ := m.AsInt64()
	return v, true
}

// cmdCtx returns the context of one call: not ended by the caller's
// cancellation (a reply on its way must be read) and bounded by the
// command timeout (plus at most a twentieth of it: contexts are shared by
// the calls made within that slice of time).
func (e *Executor) cmdCtx(context.Context) (context.Context, context.CancelFunc) {
	now := time.Now()
	if d := e.deadline.Load(); d != nil && now.Before(d.until) {
		return d.ctx, noop
	}
	e.dmu.Lock()
	defer e.dmu.Unlock()
	if d := e.deadline.Load(); d != nil && now.Before(d.until) {
		return d.ctx, noop
	}
	slice := e.Timeout / 20
	ctx, cancel := context.WithTimeout(context.Background(), e.Timeout+slice)
	// A replaced context ends by its own deadline (calls may still use it).
	e.deadline.Store(&deadlineCtx{ctx: ctx, cancel: cancel, until: now.Add(slice)})
	return ctx, noop
}

func noop() {}

// RunPlain runs s once like Run, without replica sync (for the fence
// script: idempotent, and a plain call follows every redirect).
func (e *Executor) RunPlain(ctx context.Context, s *scripts.Script, keys, args []string) Reply {
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	res := s.Exec(cctx, e.RC, keys, args)
	class, err := Classify(ctx, res.Error())
	return Reply{Res: res, Class: class, Err: err}
}

// Run runs s once (EVALSHA, then EVAL on NOSCRIPT, which proves the first
// did not run), with WAIT after it when replica sync is on.
func (e *Executor) Run(ctx context.Context, s *scripts.Script, keys, args []string) Reply {
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	return e.run(ctx, cctx, s, keys, args)
}

// RunWithin is Run bounded by ctx as well as by the command timeout, for
// an idempotent call whose caller may send it again and need not read a
// reply that comes later (a reply left unread is a lost reply).
func (e *Executor) RunWithin(ctx context.Context, s *scripts.Script, keys, args []string) Reply {
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	bctx, bcancel := context.WithCancel(cctx)
	defer bcancel()
	stop := context.AfterFunc(ctx, bcancel)
	defer stop()
	return e.run(ctx, bctx, s, keys, args)
}

// run is Run with cctx, the context of the call's commands.
func (e *Executor) run(ctx, cctx context.Context, s *scripts.Script, keys, args []string) Reply {
	if !e.Sync.Enabled {
		res := s.Exec(cctx, e.RC, keys, args)
		class, err := Classify(ctx, res.Error())
		return Reply{Res: res, Class: class, Err: err}
	}
	replicas, err := e.replicaCount(cctx, keys[0])
	if err != nil {
		class, cerr := Classify(ctx, err)
		if class == Unknown || class == Done {
			class = NotRun // only INFO was sent
		}
		return Reply{Res: rueidis.NewErrorResult(err), Class: class, Err: fmt.Errorf("INFO replication: %w", cerr)}
	}
	if replicas == 0 {
		res := s.Exec(cctx, e.RC, keys, args)
		class, err := Classify(ctx, res.Error())
		return Reply{Res: res, Class: class, Err: err}
	}
	out := e.doMulti(cctx, s.EvalSHA(e.RC, keys, args), e.wait(replicas))
	if isNoScript(out[0].Error()) {
		out = e.doMulti(cctx, s.Eval(e.RC, keys, args), e.wait(replicas))
	}
	class, cerr := Classify(ctx, out[0].Error())
	r := Reply{Res: out[0], Class: class, Err: cerr, Replicas: replicas}
	if class == Done {
		r.Acked, r.SyncErr = e.acked(ctx, keys[0], replicas, out[1])
	}
	return r
}

// noConnection reports whether err is a dial's: no connection, nothing
// was sent.
func noConnection(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// errRueidisPanic stands for a panic of rueidis inside DoMulti.
var errRueidisPanic = errors.New("rueidis panicked while handling the reply (ASK redirect with WAIT in one pipeline)")

// doMulti is DoMulti that survives a panic of rueidis in the caller's
// goroutine: rueidis v1.0.79 indexes out of range when an ASK redirect
// hits a pipeline that holds a blocking command (WAIT), after the
// redirected command already ran on the target node. The outcome is then
// unknown, and settled like a lost reply.
func (e *Executor) doMulti(ctx context.Context, cmds ...rueidis.Completed) (out []rueidis.RedisResult) {
	defer func() {
		if p := recover(); p != nil {
			e.Log.Warn("rlock: rueidis panicked in DoMulti; treating the outcome as unknown", "panic", fmt.Sprint(p))
			out = make([]rueidis.RedisResult, len(cmds))
			for i := range out {
				out[i] = rueidis.NewErrorResult(fmt.Errorf("%w: %v", errRueidisPanic, p))
			}
		}
	}()
	return e.RC.DoMulti(ctx, cmds...)
}

func (e *Executor) wait(replicas int64) rueidis.Completed {
	return e.RC.B().Wait().Numreplicas(replicas).Timeout(e.Sync.Timeout.Milliseconds()).Build()
}

// acked reads a WAIT reply, and forgets the cached replica count when it
// differs from the acknowledgements.
func (e *Executor) acked(ctx context.Context, key string, replicas int64, res rueidis.RedisResult) (int64, error) {
	acked, err := res.AsInt64()
	if err != nil {
		_, cerr := Classify(ctx, err)
		if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "NOPERM") {
			cerr = &refusedError{cerr} // the ACL denies WAIT: no retry cures it
		}
		return 0, fmt.Errorf("WAIT: %w", cerr)
	}
	if acked != replicas {
		e.replicas[e.syncSlot(key)].Store(0) // re-read next time
	}
	return acked, nil
}

// Resync waits until the replicas of key's master have everything written
// before it: it writes the fence-free marker key of name (a harmless write
// in key's slot) and WAITs after it on the same connection. The
// replication stream is ordered, so an acknowledgement covers every earlier
// write, whichever connection made it. It never resends a lock script.
func (e *Executor) Resync(ctx context.Context, key, marker string) (acked, replicas int64, err error) {
	return e.ResyncTimeout(ctx, key, marker, e.Sync.Timeout)
}

// ResyncTimeout is Resync with its own WAIT timeout, bounded by ctx too.
func (e *Executor) ResyncTimeout(ctx context.Context, key, marker string, timeout time.Duration) (acked, replicas int64, err error) {
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	replicas, err = e.replicaCount(cctx, key)
	if err != nil || replicas == 0 {
		return 0, replicas, err
	}
	wait := e.RC.B().Wait().Numreplicas(replicas).Timeout(max(1, timeout.Milliseconds())).Build()
	out := e.doMulti(cctx, e.RC.B().Set().Key(marker).Value("1").Px(time.Minute).Build(), wait)
	if err := out[0].Error(); err != nil {
		_, cerr := Classify(ctx, err)
		return 0, replicas, cerr
	}
	acked, err = e.acked(ctx, key, replicas, out[1])
	return acked, replicas, err
}

func (e *Executor) syncSlot(key string) uint16 {
	if e.Cluster {
		return names.Slot(key)
	}
	return 0
}

// replicaCount returns the number of replicas connected to the master of
// key, from INFO replication on that master (cached until a WAIT disagrees).
func (e *Executor) replicaCount(ctx context.Context, key string) (int64, error) {
	cache := &e.replicas[e.syncSlot(key)]
	if n := cache.Load(); n > 0 {
		return int64(n - 1), nil
	}
	// A keyed command routes the keyless INFO to the key's master.
	out := e.RC.DoMulti(ctx, e.RC.B().Exists().Key(key).Build(), e.RC.B().Info().Section("replication").Build())
	info, err := out[1].ToString()
	if err != nil {
		return 0, err
	}
	n := int64(0)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			n, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	cache.Store(int32(n + 1))
	return n, nil
}

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

// Backoff is the delay schedule between retries of a call Redis refused
// (NotRun) or whose outcome is being settled: 10ms doubling to 500ms, with
// jitter.
type Backoff struct{ d time.Duration }

// Next returns the next delay.
func (b *Backoff) Next() time.Duration {
	if b.d == 0 {
		b.d = 10 * time.Millisecond
	} else {
		b.d = min(2*b.d, 500*time.Millisecond)
	}
	return b.d/2 + rand.N(b.d/2+1)
}
