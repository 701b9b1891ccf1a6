package rlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/engine"
	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/scripts"
)

// Semaphore is Redisson's RSemaphore (getSemaphore(name)): a count of
// permits shared by every Client and every Java service using the name.
// The count is the string key name; waiters wake on the channel
// "redisson_sc:{name}", whose messages carry the new count.
//
// Permits are anonymous: a process that dies holding some does not give
// them back; they are lost until someone calls Release (use
// [PermitExpirableSemaphore] when holders may die). Every write goes
// through replica sync when it is on, and is exact: a call whose reply was
// lost is settled from Redis, never sent twice, so a permit is never taken
// or given back twice by one call. Permit counts are Java ints, as in
// Redisson's API: a count outside -2^31 .. 2^31-1 is refused with
// ErrInvalidArgument (so are those of [PermitExpirableSemaphore]).
type Semaphore struct {
	c       *Client
	name    string
	err     error
	channel string
	record  string   // this client's record key of it (engine.RecCall.Record)
	keys    []string // {name}: the acquire's keys (read only)
	upKeys  []string // {name, channel}: the other writes' keys (read only)
}

// Semaphore returns the semaphore called name.
func (c *Client) Semaphore(name string) *Semaphore {
	s := &Semaphore{c: c, name: name, channel: names.SemaphoreChannel(name), record: names.Record(name, c.ID())}
	s.keys, s.upKeys = []string{name}, []string{name, s.channel}
	s.err = checkSyncName(name, c.cluster, s.channel)
	return s
}

// Name returns the semaphore's name, its Redis key.
func (s *Semaphore) Name() string { return s.name }

// TrySetPermits sets the number of permits to n if the semaphore does not
// exist yet, and reports whether it did (Redisson's trySetPermits).
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	if err := javaInt(s.name, n); err != nil {
		return false, err
	}
	v, err := s.update(ctx, "tryset", strconv.Itoa(n))
	return v == 1, err
}

// AddPermits adds n permits (n may be negative: the count can go below 0)
// and wakes waiters (Redisson's addPermits; like it, it drops any TTL the
// key had).
func (s *Semaphore) AddPermits(ctx context.Context, n int) error {
	if err := javaInt(s.name, n); err != nil {
		return err
	}
	_, err := s.update(ctx, "add", strconv.Itoa(n))
	return err
}

// DrainPermits sets the number of available permits to 0 and returns how
// many there were (0 when the semaphore does not exist).
func (s *Semaphore) DrainPermits(ctx context.Context) (int, error) {
	v, err := s.update(ctx, "drain")
	return int(v), err
}

// Release gives n permits back (n >= 0; 0 does nothing), creating the
// semaphore if it does not exist, and wakes up to n waiters of every
// Client and JVM. Any caller may release, whether it acquired or not, as
// in Redisson. When replica sync is on and no replica acknowledges the
// write, the permits are released on the master and the error wraps
// ErrNoSyncedReplicas: do not release them again.
func (s *Semaphore) Release(ctx context.Context, n int) error {
	if err := s.check(n); err != nil || n == 0 {
		return err
	}
	_, err := s.update(ctx, "release", strconv.Itoa(n))
	return err
}

// AvailablePermits returns the number of available permits (0 when the
// semaphore does not exist; negative after a negative AddPermits).
func (s *Semaphore) AvailablePermits(ctx context.Context) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	v, err := s.c.getInt(ctx, s.name)
	return int(v), err
}

// Acquire takes n permits (n >= 0; 0 returns at once), waiting until that
// many are available or ctx ends. Waiters wake on the other side's
// releases; a lost message costs at most a second of latency. There is no
// fairness: a waiter for fewer permits may pass one for more.
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	_, err := s.acquire(ctx, n, -1)
	return err
}

// TryAcquire takes n permits if that many become available within wait
// (wait <= 0: one attempt), and reports whether it did.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	return s.acquire(ctx, n, max(wait, 0))
}

func (s *Semaphore) check(n int) error {
	if s.err != nil {
		return s.err
	}
	if n < 0 {
		return fmt.Errorf("%w: %q: a negative number of permits (%d)", ErrInvalidArgument, s.name, n)
	}
	return javaInt(s.name, n)
}

// javaInt checks a permit count against Redisson's API, which takes a Java
// int: a larger count is refused here, before Redis computes with it in
// Lua numbers (doubles), which would store a count no client can read back.
func javaInt(name string, n int) error {
	if n < math.MinInt32 || n > math.MaxInt32 {
		return fmt.Errorf("%w: %q: %d permits: a count must fit Redisson's Java int (%d to %d)", ErrInvalidArgument, name, n, math.MinInt32, math.MaxInt32)
	}
	return nil
}

func (s *Semaphore) acquire(ctx context.Context, n int, wait time.Duration) (ok bool, err error) {
	if err := s.check(n); err != nil {
		return false, err
	}
	if n == 0 {
		return true, nil // as Redisson: no call
	}
	if s.c.cfg.hooks.Acquire != nil {
		start := time.Now()
		defer func() { s.c.reportAcquire(KindSemaphore, s.name, start, ok, err) }()
	}
	e := s.c.eng
	var end time.Time
	if wait >= 0 {
		end = time.Now().Add(wait)
	}
	arg := strconv.Itoa(n)
	return e.WaitSync(ctx, s.name, s.channel, end, func(ctx context.Context, deadline time.Time) (bool, time.Duration, error) {
		for unsynced := 1; ; unsynced++ {
			o, err := e.Recorded(ctx, deadline, &engine.RecCall{
				Script: scripts.SemAcquire, Name: s.name, Record: s.record, Keys: s.keys, Args: []string{arg},
				Stop: ctx.Done(),
				Undo: func(bg context.Context, _ string) { s.undo(bg, arg, time.Now().Add(engine.RecordTTL/4)) },
			})
			if err != nil {
				if ctx.Err() != nil && errors.Is(err, engine.ErrUnresolved) {
					return false, 0, ctx.Err() // the background gives it back if it ran
				}
				return false, 0, fmt.Errorf("rlock: %q: acquire %d permit(s): %w", s.name, n, err)
			}
			v, err := o.Int()
			if err != nil {
				return false, 0, fmt.Errorf("rlock: %q: acquire: unexpected reply: %w", s.name, err)
			}
			if v != 1 {
				return false, 0, nil
			}
			if !o.Reply.Unsynced() {
				return true, 0, nil
			}
			// No replica has the permits taken: a failover would hand
			// them out again. Give them back and try again, as Redisson
			// does (handleNoSync).
			s.undo(context.WithoutCancel(ctx), arg, time.Now().Add(e.Budget))
			if err := e.UnsyncedGiveUp(s.name, unsynced, o.Reply); err != nil {
				return false, 0, err
			}
			if err := e.X.Sync.Sleep(ctx); err != nil {
				return false, 0, err
			}
		}
	})
}

// undo gives back permits an acquisition took that its caller will not
// use, retrying a refused call until deadline while ctx lives (the
// background's ends with Close, which still lets owed calls go for
// one command timeout).
func (s *Semaphore) undo(ctx context.Context, n string, deadline time.Time) {
	call := s.updateCall("release", n)
	call.Owed = true
	if _, err := s.c.recordedUntil(ctx, deadline, call, "give back"); err != nil && !errors.Is(err, ErrNoSyncedReplicas) && !errors.Is(err, ErrUnresolved) {
		s.c.cfg.logger.Warn("rlock: cannot give back permits an abandoned acquisition took", "semaphore", s.name, "permits", n, "err", err)
	}
}

// update runs sem_update.lua's op exactly and returns its reply.
func (s *Semaphore) update(ctx context.Context, op string, arg ...string) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	return s.c.recorded(ctx, s.updateCall(op, arg...), op)
}

// updateCall is the recorded call of sem_update.lua's op.
func (s *Semaphore) updateCall(op string, arg ...string) *engine.RecCall {
	args := make([]string, 1, 3)
	args[0] = op
	if len(arg) > 0 {
		args = append(args, arg[0])
	} else {
		args = append(args, "0")
	}
	args = append(args, s.c.eng.Publish)
	// A release whose outcome stays unknown is owed: the background
	// sends it again if it did not run.
	return &engine.RecCall{Script: scripts.SemUpdate, Name: s.name, Record: s.record, Keys: s.upKeys, Args: args, Redo: op == "release"}
}

// recorded runs a synchronizer's write exactly, with replica sync, and
// returns its integer outcome.
func (c *Client) recorded(ctx context.Context, call *engine.RecCall, what string) (int64, error) {
	return c.recordedUntil(ctx, time.Now().Add(c.eng.Budget), call, what)
}

// recordedUntil is recorded with its own deadline for resending a call
// Redis refused.
func (c *Client) recordedUntil(ctx context.Context, deadline time.Time, call *engine.RecCall, what string) (int64, error) {
	o, err := c.eng.Recorded(ctx, deadline, call)
	if err != nil {
		return 0, fmt.Errorf("rlock: %q: %s: %w", call.Name, what, err)
	}
	v, err := o.Int()
	if err != nil {
		return 0, fmt.Errorf("rlock: %q: %s: unexpected reply: %w", call.Name, what, err)
	}
	if o.Reply.Unsynced() {
		return v, c.eng.SyncResync(ctx, call.Name, o.Reply)
	}
	return v, nil
}

// getInt reads a string integer key (missing: 0), retrying a read Redis
// refused or whose reply was lost (a read may be sent again) within the
// budget.
func (c *Client) getInt(ctx context.Context, key string) (int64, error) {
	var v int64
	err := c.read(ctx, func(ctx context.Context) (err error) {
		v, err = c.rc.Do(ctx, c.rc.B().Get().Key(key).Build()).AsInt64()
		return err
	})
	if err != nil && !rueidis.IsRedisNil(err) {
		return 0, fmt.Errorf("rlock: %q: GET: %w", key, err)
	}
	return v, nil
}

// checkSyncName checks a synchronizer's name: not empty, and on a cluster
// its key, its channel and this library's record and fence keys in one
// slot.
func checkSyncName(name string, cluster bool, channel string) error {
	if name == "" {
		return fmt.Errorf("%w: the name is empty", ErrInvalidName)
	}
	if cluster {
		ks, cs := names.Slot(name), names.Slot(channel)
		rs := names.Slot(names.Record(name, "0"))
		if ks != cs || ks != rs {
			return fmt.Errorf("%w: %q: the key (slot %d) and its channel %q (slot %d) would fall in different cluster slots; "+
				"a name containing '{' must carry a complete, non-empty hash tag such as \"{user42}:jobs\"",
				ErrInvalidName, name, ks, channel, cs)
		}
	}
	return nil
}
