package rlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/goredisson/locks/internal/engine"
	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/scripts"
)

// maxPermitsPerCall bounds the ids of one AcquireN or TryReleaseN: each
// is a script argument, and Redis' Lua unpacks at most about 8000.
const maxPermitsPerCall = 4096

// neverExpires is Redisson's score of a permit without a lease
// (PROTOCOL.md 11).
const neverExpires = "922337203685477"

// PermitExpirableSemaphore is Redisson's RPermitExpirableSemaphore
// (getPermitExpirableSemaphore(name)): a semaphore whose permits each have
// an id and may have a lease. A permit whose lease ends goes back to the
// pool (at the next call of any client on the semaphore, as in Redisson),
// so the permits of a holder that died come back after their lease; a
// permit without a lease stays taken until released, like [Semaphore]'s.
//
// The available count is the string key name; the held permits are the
// sorted set "{name}:timeout", whose members are the ids' 16 bytes and
// whose scores their expiry (ms since the epoch, from the acquiring
// client's clock, as Java's: clock skew between hosts moves expiries).
// An id shows as 32 lowercase hex characters, as Java shows it, and may be
// released by any Client or JVM. Writes are exact and go through replica
// sync as [Semaphore]'s do.
type PermitExpirableSemaphore struct {
	c        *Client
	name     string
	err      error
	channel  string
	timeouts string
	record   string   // this client's record key of it (engine.RecCall.Record)
	keys     []string // {name, channel, timeouts} (read only)
}

// PermitExpirableSemaphore returns the permit-expirable semaphore called
// name.
func (c *Client) PermitExpirableSemaphore(name string) *PermitExpirableSemaphore {
	s := &PermitExpirableSemaphore{c: c, name: name, channel: names.SemaphoreChannel(name), timeouts: names.PermitTimeouts(name), record: names.Record(name, c.ID())}
	s.keys = []string{name, s.channel, s.timeouts}
	s.err = checkSyncName(name, c.cluster, s.channel)
	if s.err == nil && c.cluster && names.Slot(s.timeouts) != names.Slot(name) {
		s.err = fmt.Errorf("%w: %q: its timeout set %q falls in another cluster slot", ErrInvalidName, name, s.timeouts)
	}
	return s
}

// Name returns the semaphore's name, the key of its available permits.
func (s *PermitExpirableSemaphore) Name() string { return s.name }

// TrySetPermits sets the number of permits to n if the semaphore does not
// exist yet, and reports whether it did.
func (s *PermitExpirableSemaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	v, err := s.update(ctx, "tryset", n)
	return v == 1, err
}

// SetPermits makes the total number of permits, available and held, n:
// the available count moves by the difference (it may go below 0 while
// permits are held), as Redisson's setPermits. As Redisson's, it does not
// first give back expired permits: they count as held until the next
// acquire or query.
func (s *PermitExpirableSemaphore) SetPermits(ctx context.Context, n int) error {
	_, err := s.update(ctx, "set", n)
	return err
}

// AddPermits adds n permits to the available count (n may be negative).
func (s *PermitExpirableSemaphore) AddPermits(ctx context.Context, n int) error {
	_, err := s.update(ctx, "add", n)
	return err
}

// AvailablePermits returns the number of available permits, after giving
// back expired ones.
func (s *PermitExpirableSemaphore) AvailablePermits(ctx context.Context) (int, error) {
	v, err := s.query(ctx, "available", "", "")
	return int(v), err
}

// Permits returns the total number of permits, available and held (0 when
// the semaphore does not exist), after giving back expired ones.
func (s *PermitExpirableSemaphore) Permits(ctx context.Context) (int, error) {
	v, err := s.query(ctx, "permits", "", "")
	return int(v), err
}

// AcquiredPermits returns the number of held permits, after giving back
// expired ones.
func (s *PermitExpirableSemaphore) AcquiredPermits(ctx context.Context) (int, error) {
	v, err := s.query(ctx, "acquired", "", "")
	return int(v), err
}

// Acquire takes a permit with the given lease (lease <= 0: it never
// expires; a lease under 1ms is refused with ErrInvalidArgument, as
// everywhere a lease is given), waiting until one is available or ctx
// ends, and returns its id.
// A waiter looks again when a permit is released or added, and when the
// nearest held permit's lease ends.
func (s *PermitExpirableSemaphore) Acquire(ctx context.Context, lease time.Duration) (string, error) {
	ids, _, err := s.acquire(ctx, 1, -1, lease)
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// TryAcquire takes a permit if one becomes available within wait (wait <=
// 0: one attempt), with the given lease (lease <= 0: it never expires).
func (s *PermitExpirableSemaphore) TryAcquire(ctx context.Context, wait, lease time.Duration) (string, bool, error) {
	ids, ok, err := s.acquire(ctx, 1, max(wait, 0), lease)
	if !ok || err != nil {
		return "", ok, err
	}
	return ids[0], true, nil
}

// AcquireN takes n permits at once (n >= 1), each with the lease, waiting
// until n are available or ctx ends (Redisson 3.23.4+'s acquire(n)).
func (s *PermitExpirableSemaphore) AcquireN(ctx context.Context, n int, lease time.Duration) ([]string, error) {
	ids, _, err := s.acquire(ctx, n, -1, lease)
	return ids, err
}

// TryAcquireN takes n permits at once if n become available within wait.
func (s *PermitExpirableSemaphore) TryAcquireN(ctx context.Context, n int, wait, lease time.Duration) ([]string, bool, error) {
	return s.acquire(ctx, n, max(wait, 0), lease)
}

// Release gives the permit id back. It fails with ErrNoPermit when id is
// not held: unknown, released already, or expired (an expired permit is
// given back all the same), as Redisson's release throws.
func (s *PermitExpirableSemaphore) Release(ctx context.Context, id string) error {
	ok, err := s.TryRelease(ctx, id)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %q: permit %s has been released already, has expired or does not exist", ErrNoPermit, s.name, id)
	}
	return err
}

// TryRelease gives the permit id back and reports whether it was held and
// not expired.
func (s *PermitExpirableSemaphore) TryRelease(ctx context.Context, id string) (bool, error) {
	raw, err := s.rawID(id)
	if err != nil {
		return false, err
	}
	v, err := s.release(ctx, "one", raw)
	return v == 1, err
}

// TryReleaseN gives the permits ids back if every one of them is held and
// not expired, and returns how many it gave back (0 and nothing changed
// otherwise), as Redisson's tryRelease(ids).
func (s *PermitExpirableSemaphore) TryReleaseN(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 || len(ids) > maxPermitsPerCall {
		return 0, fmt.Errorf("%w: %q: %d permit ids: from 1 to %d at once", ErrInvalidArgument, s.name, len(ids), maxPermitsPerCall)
	}
	raw := make([]string, len(ids))
	for i, id := range ids {
		r, err := s.rawID(id)
		if err != nil {
			return 0, err
		}
		raw[i] = r
	}
	v, err := s.release(ctx, "all", raw...)
	return int(v), err
}

// ReleaseN is TryReleaseN that fails with ErrNoPermit unless every id was
// given back.
func (s *PermitExpirableSemaphore) ReleaseN(ctx context.Context, ids []string) error {
	n, err := s.TryReleaseN(ctx, ids)
	if err == nil && n != len(ids) {
		err = fmt.Errorf("%w: %q: permits %v have been released already, have expired or do not exist", ErrNoPermit, s.name, ids)
	}
	return err
}

// UpdateLeaseTime gives the held permit id a new lease from now (lease <=
// 0: it never expires) and reports whether id was held. With replica sync,
// an update no replica acknowledged reports ErrNoSyncedReplicas (the new
// lease is on the master), as a release does.
func (s *PermitExpirableSemaphore) UpdateLeaseTime(ctx context.Context, id string, lease time.Duration) (bool, error) {
	raw, err := s.rawID(id)
	if err != nil {
		return false, err
	}
	if err := permitLease(s.name, lease); err != nil {
		return false, err
	}
	v, err := s.query(ctx, "update", raw, expiry(time.Now(), lease))
	return v == 1, err
}

// permitLease refuses a permit lease above 0 but below the millisecond
// Redis keeps (lease <= 0: the permit never expires): the permit would be
// gone before its id came back, as a lock's lease below 1 ms is refused.
func permitLease(name string, lease time.Duration) error {
	if lease > 0 && lease < time.Millisecond {
		return fmt.Errorf("%w: %q: a permit lease of %v: at least 1ms (or <= 0: never expires)", ErrInvalidArgument, name, lease)
	}
	return nil
}

// LeaseTime returns how long the held permit id has left, -1 when it never
// expires, and ErrNoPermit when it is not held.
func (s *PermitExpirableSemaphore) LeaseTime(ctx context.Context, id string) (time.Duration, error) {
	raw, err := s.rawID(id)
	if err != nil {
		return 0, err
	}
	v, err := s.query(ctx, "lease", raw, "")
	switch {
	case err != nil:
		return 0, err
	case v == -2:
		return 0, fmt.Errorf("%w: %q: permit %s has been released already, has expired or does not exist", ErrNoPermit, s.name, id)
	case v == -1:
		return -1, nil
	}
	return time.Duration(v) * time.Millisecond, nil
}

// rawID checks an id's form and returns its 16 bytes.
func (s *PermitExpirableSemaphore) rawID(id string) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	if len(id) != 32 {
		return "", fmt.Errorf("%w: %q: permit id %q is not 32 hex characters", ErrInvalidArgument, s.name, id)
	}
	b, err := hex.DecodeString(id)
	if err != nil {
		return "", fmt.Errorf("%w: %q: permit id %q is not 32 hex characters", ErrInvalidArgument, s.name, id)
	}
	return string(b), nil
}

func expiry(now time.Time, lease time.Duration) string {
	if lease <= 0 {
		return neverExpires
	}
	return strconv.FormatInt(now.Add(lease).UnixMilli(), 10)
}

func (s *PermitExpirableSemaphore) acquire(ctx context.Context, n int, wait, lease time.Duration) (got []string, ok bool, err error) {
	if s.err != nil {
		return nil, false, s.err
	}
	if n < 1 || n > maxPermitsPerCall {
		return nil, false, fmt.Errorf("%w: %q: acquire %d permits: from 1 to %d at once", ErrInvalidArgument, s.name, n, maxPermitsPerCall)
	}
	if err := permitLease(s.name, lease); err != nil {
		return nil, false, err
	}
	if s.c.cfg.hooks.Acquire != nil {
		start := time.Now()
		defer func() { s.c.reportAcquire(KindPermitSemaphore, s.name, start, ok, err) }()
	}
	e := s.c.eng
	var end time.Time
	if wait >= 0 {
		end = time.Now().Add(wait)
	}
	var ids []string
	ok, err = e.WaitSync(ctx, s.name, s.channel, end, func(ctx context.Context, deadline time.Time) (bool, time.Duration, error) {
		for unsynced := 1; ; unsynced++ {
			raw := make([]string, n)
			buf := make([]byte, 16*n)
			_, _ = rand.Read(buf) // never fails (crypto/rand)
			for i := range raw {
				raw[i] = string(buf[16*i : 16*(i+1)])
			}
			o, err := e.Recorded(ctx, deadline, &engine.RecCall{
				Script: scripts.PsemAcquire, Name: s.name, Record: s.record, Keys: []string{s.name, s.timeouts, s.channel},
				Fresh: func() []string {
					now := time.Now()
					return append([]string{strconv.Itoa(n), expiry(now, lease), strconv.FormatInt(now.UnixMilli(), 10), neverExpires, e.Publish}, raw...)
				},
				Stop: ctx.Done(),
				Undo: func(bg context.Context, _ string) { s.undo(bg, raw, time.Now().Add(engine.RecordTTL/4)) },
			})
			if err != nil {
				if ctx.Err() != nil && errors.Is(err, engine.ErrUnresolved) {
					return false, 0, ctx.Err() // the background gives them back if it ran
				}
				return false, 0, fmt.Errorf("rlock: %q: acquire %d permit(s): %w", s.name, n, err)
			}
			v, err := o.Int()
			if err != nil {
				return false, 0, fmt.Errorf("rlock: %q: acquire: unexpected reply: %w", s.name, err)
			}
			if v != 1 {
				var hint time.Duration
				if v > 1 {
					hint = max(time.Until(time.UnixMilli(v)), time.Millisecond)
				}
				return false, hint, nil
			}
			if o.Reply.Unsynced() {
				s.undo(context.WithoutCancel(ctx), raw, time.Now().Add(e.Budget))
				if err := e.UnsyncedGiveUp(s.name, unsynced, o.Reply); err != nil {
					return false, 0, err
				}
				if err := e.X.Sync.Sleep(ctx); err != nil {
					return false, 0, err
				}
				continue
			}
			ids = make([]string, n)
			for i, r := range raw {
				ids[i] = hex.EncodeToString([]byte(r))
			}
			return true, 0, nil
		}
	})
	if !ok || err != nil {
		return nil, false, err
	}
	return ids, true, nil
}

// undo gives back permits an acquisition took that its caller will not
// use, retrying a refused call until deadline while ctx lives (the
// background's ends with Close, which still lets owed calls go for
// one command timeout).
func (s *PermitExpirableSemaphore) undo(ctx context.Context, raw []string, deadline time.Time) {
	for i, r := range raw {
		call := s.releaseCall("one", r)
		call.Owed = true
		_, err := s.c.recordedUntil(ctx, deadline, call, "give back")
		if errors.Is(err, ErrClosed) {
			s.c.cfg.logger.Warn("rlock: client closed before the permits an abandoned acquisition took were all given back; they come back after their lease, if they have one",
				"semaphore", s.name, "left", len(raw)-i)
			return
		}
		if err != nil && !errors.Is(err, ErrNoSyncedReplicas) && !errors.Is(err, ErrUnresolved) {
			s.c.cfg.logger.Warn("rlock: cannot give back a permit an abandoned acquisition took; it comes back after its lease, if it has one",
				"semaphore", s.name, "id", hex.EncodeToString([]byte(r)), "err", err)
		}
	}
}

func (s *PermitExpirableSemaphore) release(ctx context.Context, mode string, raw ...string) (int64, error) {
	return s.c.recorded(ctx, s.releaseCall(mode, raw...), "release")
}

// releaseCall is the recorded call of psem_release.lua.
func (s *PermitExpirableSemaphore) releaseCall(mode string, raw ...string) *engine.RecCall {
	return &engine.RecCall{Script: scripts.PsemRelease, Name: s.name, Record: s.record, Keys: s.keys, Redo: true,
		Fresh: func() []string {
			return append([]string{strconv.FormatInt(time.Now().UnixMilli(), 10), s.c.eng.Publish, mode}, raw...)
		}}
}

func (s *PermitExpirableSemaphore) update(ctx context.Context, op string, n int) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	if err := javaInt(s.name, n); err != nil {
		return 0, err
	}
	return s.c.recorded(ctx, &engine.RecCall{Script: scripts.PsemUpdate, Name: s.name, Record: s.record, Keys: s.keys,
		Args: []string{op, strconv.Itoa(n), s.c.eng.Publish}}, op)
}

// query runs psem_query.lua, which may be sent again: after a refusal or a
// lost reply it is resent within the budget.
func (s *PermitExpirableSemaphore) query(ctx context.Context, op, id, date string) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	e := s.c.eng
	deadline := time.Now().Add(e.Budget)
	var bo engine.Backoff
	for {
		args := []string{op, strconv.FormatInt(time.Now().UnixMilli(), 10), e.Publish, id, date, neverExpires}
		r := e.X.Run(ctx, scripts.PsemQuery, []string{s.name, s.timeouts, s.channel}, args)
		switch r.Class {
		case engine.Done:
			if v, ok := r.Integer(); ok {
				if op == "update" && r.Unsynced() {
					// The new expiry is on the master: wait for the replicas
					// as after any other write, and say so if none has it.
					return v, e.SyncResync(ctx, s.name, r)
				}
				return v, nil
			}
			// It replies an integer: another reply does not tell what it
			// did. It is safe to resend, as after a lost reply.
			r.Err = engine.Unexpected(scripts.PsemQuery, r)
		case engine.Failed, engine.Closed:
			return 0, fmt.Errorf("rlock: %q: %s: %w", s.name, op, r.Err)
		}
		d := bo.Next()
		if ctx.Err() != nil || time.Now().Add(d).After(deadline) {
			return 0, fmt.Errorf("rlock: %q: %s: %w", s.name, op, r.Err)
		}
		if err := sleepCtx(ctx, d); err != nil {
			return 0, err
		}
	}
}
