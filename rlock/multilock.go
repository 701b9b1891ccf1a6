package rlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MultiLock is Redisson's RedissonMultiLock (PROTOCOL.md 9): one lock made
// of several member locks, of any kind and from any Clients (so on any
// Redis servers), held when every member is held. It keeps no state of its
// own in Redis: each member is an ordinary lock that Java sees as such.
//
// Its algorithm is Redisson's: TryLock(wait, lease) tries every member with
// the wait that is left and, with a lease and a wait, a member lease of
// twice the wait; when a member fails it releases the members it took and,
// while the wait lasts, starts again from the first; on success with a
// lease it sets every member's TTL to the lease. Unlike Redisson's, the
// members of one attempt are reached concurrently, so that an attempt
// costs about one round trip, not one per member. Members are called from
// other goroutines with the calling owner pinned (WithOwner), so the owner
// of the MultiLock and of each member's hold is the caller.
//
// Unlock unlocks the members in order and stops at the first error (as
// Redisson 4.x): the members after it are not unlocked. IsHeld reports
// whether every member is held; HoldContext ends when any member's hold
// ends.
type MultiLock struct{ group }

// RedLock is Redisson's RedissonRedLock (PROTOCOL.md 9): the Redlock
// algorithm over member locks on independent Redis masters (one Client
// each). It is held when a majority (a quorum, n/2+1 of n) of its members
// is: TryLock succeeds when at most n - quorum members fail, each member
// waiting at most wait/n. Each member's attempt is bounded by its wait
// plus 100ms (or the lease, if shorter), and the RedLock waits for it at
// most 200ms beyond the wait; every other call on one member (setting its
// lease, releasing it, Unlock, IsHeld, HoldContext) is waited for at most
// 200ms. A member whose master does not answer in time (refuses
// connections, keeps refusing the call, or hangs without closing them)
// counts as failed for that call instead of stalling the others while
// their leases run; the call itself goes on in the background up to the
// member client's command timeout (WithCommandTimeout), and an attempt
// that took its member too late gives it back there. A master that needs
// longer than that (a far one, or replica sync waiting for a lagging
// replica) fails its member every time: RedLock members are meant to be
// independent nearby masters.
//
// Validity: an acquisition that took as long as the lease its members
// were taken with, or whose setting of the lease on the members took as
// long as the lease, releases what it took and reports false, since the
// first members' leases may have run out by then. (With a wait, members
// are taken for twice the wait, as in Redisson, and set to the lease once
// all are held.) HoldContext ends when fewer than a
// quorum of members remain held; IsHeld reports whether a quorum is held
// (Java's isHeldByThread requires every member). Unlock unlocks every
// member, concurrently, whatever each one's result (as Redisson).
//
// Safety caveats of Redlock: it assumes bounded clock drift between the
// Redis servers and bounded process pauses; a member master that restarts
// without persistence forgets its locks; and a paused holder can outlive
// its validity without noticing, so protect the resource with a fencing
// token (FencedLock) where it matters. Redisson deprecates RedLock for a
// single lock with replica sync (the default here on Cluster and Sentinel)
// or a fenced lock.
type RedLock struct{ group }

var (
	_ Locker = (*MultiLock)(nil)
	_ Locker = (*RedLock)(nil)
)

// NewMultiLock returns a MultiLock of locks (at least one, none nil; an
// invalid list is reported by its methods).
func NewMultiLock(locks ...Locker) *MultiLock { return &MultiLock{newGroup(false, locks)} }

// NewRedLock returns a RedLock of locks, one per independent Redis master
// (at least one, none nil; an invalid list is reported by its methods).
func NewRedLock(locks ...Locker) *RedLock { return &RedLock{newGroup(true, locks)} }

// redLockMemberTimeout bounds a RedLock member's attempt beyond its wait,
// and every other call a RedLock makes on one member (setting its lease,
// releasing it, checking it): a master that does not answer fails its
// member, as Redlock's per-instance timeout, instead of stalling the
// others while their leases run.
const redLockMemberTimeout = 100 * time.Millisecond

// group is what MultiLock and RedLock share.
type group struct {
	locks []Locker
	red   bool
	err   error
	late  *lateAttempts // a RedLock's attempts it stopped waiting for
}

// lateAttempts counts, per member and owner, a RedLock's attempts still
// running (with the release of what a late one took). While one runs, the
// owner's next attempt on that member fails at once: the late one's
// release, an Unlock of one level, must not take away a level that a
// newer attempt took.
type lateAttempts struct {
	mu sync.Mutex
	n  map[lateKey]int
}

type lateKey struct {
	member int
	owner  int64
}

// enter registers an attempt on member for owner, or reports false if one
// is still running.
func (a *lateAttempts) enter(k lateKey) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[k] > 0 {
		return false
	}
	if a.n == nil {
		a.n = make(map[lateKey]int)
	}
	a.n[k]++
	return true
}

func (a *lateAttempts) leave(k lateKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[k]--; a.n[k] <= 0 {
		delete(a.n, k)
	}
}

func newGroup(red bool, locks []Locker) group {
	g := group{locks: append([]Locker(nil), locks...), red: red, late: &lateAttempts{}}
	if len(locks) == 0 {
		g.err = fmt.Errorf("%w: %s of no locks", ErrInvalidArgument, g.kind())
	}
	for i, l := range locks {
		if v := reflect.ValueOf(l); l == nil || (v.Kind() == reflect.Pointer && v.IsNil()) {
			g.err = fmt.Errorf("%w: %s member %d is nil", ErrInvalidArgument, g.kind(), i)
			break
		}
	}
	return g
}

func (g *group) kind() string {
	if g.red {
		return "RedLock"
	}
	return "MultiLock"
}

// failedLimit is how many members may fail (Redisson's failedLocksLimit).
func (g *group) failedLimit() int {
	if !g.red {
		return 0
	}
	n := len(g.locks)
	return n - (n/2 + 1)
}

// Name returns the members' names, joined by commas.
func (g *group) Name() string {
	names := make([]string, len(g.locks))
	for i, l := range g.locks {
		if l != nil {
			names[i] = l.Name()
		}
	}
	return strings.Join(names, ",")
}

// Lock takes the lock with watchdog leases on its members, trying again
// (Redisson's lock(): attempts with a wait of 1.5s per member) until it
// succeeds or ctx ends.
func (g *group) Lock(ctx context.Context) error { return g.lock(ctx, 0) }

// LockLease takes the lock like Lock, with a fixed lease: attempts wait a
// random time in [lease/2, lease) (or [n*1.5s, lease) for a longer lease),
// as Redisson's.
func (g *group) LockLease(ctx context.Context, lease time.Duration) error {
	if lease < time.Millisecond {
		return fmt.Errorf("%w: %s LockLease: lease %v is below 1ms (use Lock for watchdog leases)", ErrInvalidArgument, g.kind(), lease)
	}
	return g.lock(ctx, lease)
}

func (g *group) lock(ctx context.Context, lease time.Duration) error {
	if g.err != nil {
		return g.err
	}
	base := time.Duration(len(g.locks)) * 1500 * time.Millisecond
	for {
		wait := base
		if lease > 0 {
			if lease <= base {
				wait = lease/2 + rand.N(max(lease-lease/2, 1))
			} else {
				wait = base + rand.N(lease-base)
			}
		}
		ok, err := g.TryLock(ctx, wait, lease)
		if err != nil || ok {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// TryLock tries to take the lock within wait (wait <= 0: one attempt on
// each member), with a fixed lease (lease <= 0: the members' watchdog
// leases). It returns false, nil when the wait ran out (or, with a
// lease, when the acquisition or the setting of the lease on the members
// outlived it: a member may have expired meanwhile), and an
// error wrapping ctx's when ctx ended first; members it took are released
// before it returns false or an error.
func (g *group) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if g.err != nil {
		return false, g.err
	}
	if lease > 0 && lease < time.Millisecond {
		return false, fmt.Errorf("%w: %s TryLock: lease %v is below 1ms", ErrInvalidArgument, g.kind(), lease)
	}
	lease = max(lease, 0)              // lease <= 0: the watchdog (Java's -1 too)
	ctx = WithOwner(ctx, ownerOf(ctx)) // members run on other goroutines
	n := len(g.locks)
	memberLease := time.Duration(0) // the members' watchdog
	if lease > 0 {
		memberLease = lease
		if wait > 0 {
			// The first members must outlive the wait for the last.
			memberLease = 2 * min(wait, math.MaxInt64/2)
		}
	}
	// A member whose TTL cannot be set afterwards (a read lock, a Locker
	// of another package) is taken with the lease itself.
	leases := make([]time.Duration, n)
	fixed := false
	for i, l := range g.locks {
		leases[i] = memberLease
		if memberLease != lease && !canExpire(l) {
			leases[i], fixed = lease, true
		}
	}
	memberWait := time.Duration(0) // a single attempt
	if wait > 0 {
		memberWait = wait
		if g.red {
			memberWait = max(wait/time.Duration(n), time.Millisecond)
		}
	}
	start := time.Now()
	for round := 0; ; round++ {
		passStart := time.Now() // no member of this pass was taken before
		held, err := g.pass(ctx, start, wait, memberWait, leases)
		if err != nil {
			return false, err
		}
		if held == nil {
			// Failed: with a wait, start again from the first member.
			if wait <= 0 || time.Since(start) >= wait {
				return false, nil
			}
			if err := sleepCtx(ctx, min(time.Duration(round+1)*time.Millisecond, wait-time.Since(start))); err != nil {
				return false, err
			}
			continue
		}
		if wait > 0 && time.Since(start) >= wait {
			g.release(ctx, held) // out of time (Redisson's remainTime)
			return false, nil
		}
		if took := time.Since(passStart); (g.red && memberLease > 0 && took >= memberLease) || (fixed && took >= lease) {
			// The first members taken may have expired meanwhile
			// (Redlock's validity; for any group, a member taken with the
			// lease itself): not obtained, and tried again while the wait
			// lasts.
			g.release(ctx, held)
			if wait <= 0 || time.Since(start) >= wait {
				return false, nil
			}
			continue
		}
		if lease > 0 && memberLease != lease {
			set := time.Now()
			if held, err = g.expire(ctx, held, lease); err != nil {
				return false, err
			}
			if held != nil && (time.Since(set) >= lease || fixed && time.Since(passStart) >= lease) {
				// The first leases set may have run out while the last
				// was being set, or a member taken with the lease itself
				// meanwhile: not obtained (Redlock's validity).
				g.release(ctx, held)
				held = nil
			}
			if held == nil {
				if time.Since(start) >= wait {
					return false, nil
				}
				continue
			}
		}
		return true, nil
	}
}

// pass is one pass of Redisson's loop over the members in order (PROTOCOL.md
// 9), with the members reached concurrently: every member not yet
// decided gets one attempt at once, and the results are read in member
// order as Redisson's loop would meet them. Where that loop would stop (a
// failure with no budget left), the members taken after that point are
// released, and that member is tried again, alone, with a wait (the
// member's wait; for a single attempt, a few round trips): in Redisson's
// loop it might have been free by then, since an owner that failed
// earlier in the order releases what it took. Owners then take members
// in the same order, and only an owner that holds every member before
// the one it waits for waits, so two owners each holding a part never
// wait for each other, and of owners racing for free members one wins
// (Redisson's "exactly one"). It returns the members held, nil when the
// pass failed (all released), or an error that ends the acquisition.
func (g *group) pass(ctx context.Context, start time.Time, wait, memberWait time.Duration, leases []time.Duration) ([]Locker, error) {
	n, limit := len(g.locks), g.failedLimit()
	held := make([]bool, n)
	budget := limit
	for i := 0; i < n; {
		t0 := time.Now()
		oks, errs := g.attempt(ctx, i, 0, leases[i:])
		copy(held[i:], oks)
		if err := ctx.Err(); err != nil {
			return nil, g.failedAll(ctx, held, err)
		}
		if err := permanent(errs); err != nil {
			return nil, g.failedAll(ctx, held, err)
		}
		stop, taken := -1, 0
		for j := 0; j < i; j++ {
			if held[j] {
				taken++
			}
		}
		for j := i; j < n && stop < 0; j++ {
			switch {
			case held[j]:
				taken++
			case n-taken == limit:
				i = n // a quorum: Redisson stops here
				stop = -2
			case budget == 0:
				stop = j
			default:
				budget--
			}
		}
		if stop < 0 {
			break // every member decided, within the budget
		}
		// Redisson's loop stops at member stop: what was taken after it
		// would not have been reached.
		var after []Locker
		for j := stop + 1; j < n; j++ {
			if held[j] {
				after = append(after, g.locks[j])
				held[j] = false
			}
		}
		g.release(ctx, after)
		// (At most the member bound: the pass may have waited that long
		// for a master that did not answer.)
		mw := min(max(3*time.Since(t0), 20*time.Millisecond), memberBound)
		if wait > 0 {
			remain := wait - time.Since(start)
			if remain <= 0 {
				return nil, g.failedAll(ctx, held, nil)
			}
			mw = min(memberWait, remain)
		}
		var ok bool
		var err error
		if g.red {
			r := g.tries(ctx, stop, 1, mw, leases[stop:stop+1])[0]
			ok, err = r.ok, r.err
		} else {
			ok, err = g.try(ctx, g.locks[stop], mw, leases[stop])
		}
		if err != nil && (ctx.Err() != nil || permanent([]error{err}) != nil) {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, g.failedAll(ctx, held, err)
		}
		if !ok {
			return nil, g.failedAll(ctx, held, nil)
		}
		held[stop] = true
		i = stop + 1
	}
	var got []Locker
	for j, h := range held {
		if h {
			got = append(got, g.locks[j])
		}
	}
	return got, nil
}

// failedAll releases every member held and returns err.
func (g *group) failedAll(ctx context.Context, held []bool, err error) error {
	var got []Locker
	for j, h := range held {
		if h {
			got = append(got, g.locks[j])
		}
	}
	g.release(ctx, got)
	return err
}

// attempt tries each member from the from'th once, concurrently, and
// returns which were taken and the errors of the others.
func (g *group) attempt(ctx context.Context, from int, wait time.Duration, leases []time.Duration) (oks []bool, errs []error) {
	locks := g.locks[from:]
	oks = make([]bool, len(locks))
	es := make([]error, len(locks))
	if g.red {
		rs := g.tries(ctx, from, len(locks), wait, leases)
		for i, r := range rs {
			oks[i], es[i] = r.ok, r.err
		}
	} else {
		eachOf(locks, func(i int, l Locker) { oks[i], es[i] = g.try(ctx, l, wait, leases[i]) })
	}
	for i, l := range locks {
		if es[i] != nil {
			errs = append(errs, fmt.Errorf("%s member %q: %w", g.kind(), l.Name(), es[i]))
		}
	}
	return oks, errs
}

type tried struct {
	ok  bool
	err error
}

// tries is a RedLock's attempt on n members from the from'th at once. An
// attempt that has not returned shortly after its bound fails its member
// and has its ctx cancelled (this package's locks then give back a grant
// that comes later, under the hold's operation slot); if it took the
// member after all, it releases it in the background, and until then the
// owner's next attempts on that member fail (see lateAttempts).
func (g *group) tries(ctx context.Context, from, n int, wait time.Duration, leases []time.Duration) []tried {
	bg := context.WithoutCancel(ctx)
	owner := ownerOf(ctx)
	cancels := make([]context.CancelFunc, n)
	ctxs := make([]context.Context, n)
	entered := make([]bool, n)
	for i := range n {
		ctxs[i], cancels[i] = context.WithCancel(ctx)
		entered[i] = g.late.enter(lateKey{from + i, owner})
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	return memberCalls(ctx, g.locks[from:from+n], wait+memberBound, func(_ context.Context, i int, l Locker) tried {
		if !entered[i] {
			return tried{false, fmt.Errorf("%w: an earlier attempt on member %q has not ended yet", ErrTimeout, l.Name())}
		}
		ok, err := g.try(ctxs[i], l, wait, leases[i])
		return tried{ok, err}
	}, func(i int, err error) tried {
		cancels[i]()
		return tried{false, err}
	}, func(l Locker, r tried) {
		if r.ok {
			_ = l.Unlock(bg)
		}
	}, func(i int) {
		if entered[i] {
			g.late.leave(lateKey{from + i, owner})
		}
	})
}

// try is one member's TryLock. A RedLock bounds it: a master that does
// not answer fails its member (Redlock's per-instance timeout) instead of
// stalling the acquisition.
func (g *group) try(ctx context.Context, l Locker, wait, lease time.Duration) (bool, error) {
	if g.red {
		grace := redLockMemberTimeout
		if lease > 0 {
			grace = min(grace, lease)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait+grace)
		defer cancel()
	}
	return l.TryLock(ctx, wait, lease)
}

// each runs fn for every member, concurrently, and waits for them all.
func (g *group) each(fn func(i int, l Locker)) { eachOf(g.locks, fn) }

func eachOf(locks []Locker, fn func(i int, l Locker)) {
	if len(locks) == 0 {
		return
	}
	if len(locks) == 1 {
		fn(0, locks[0])
		return
	}
	var wg sync.WaitGroup
	for i, l := range locks[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i+1, l)
		}()
	}
	fn(0, locks[0]) // the first on the caller's goroutine
	wg.Wait()
}

// release unlocks members taken by an attempt that failed, whatever ctx
// (a RedLock waits for each at most the member bound; an unlock a master
// does not answer in time goes on in the background).
func (g *group) release(ctx context.Context, got []Locker) {
	ctx = context.WithoutCancel(ctx)
	if !g.red {
		eachOf(got, func(_ int, l Locker) { _ = l.Unlock(ctx) })
		return
	}
	memberCalls(ctx, got, memberBound, func(ctx context.Context, _ int, l Locker) error { return l.Unlock(ctx) }, nil, nil, nil)
}

// memberCalls runs call on every member of a RedLock at once and returns
// their results, waiting for them at most bound. A call that has not
// returned by then gets late(i, err) as its result (the zero T when late
// is nil) and finishes in the background, where undo, if not nil, gets
// what it returns (an acquisition taken too late is released there);
// done, if not nil, runs after each call (and its undo) ends. The
// calls are not cut short: rueidis bounds a command by its own timeout,
// not by ctx, and a call cut at its op slot or its settling would leave
// its member held or its outcome unfenced; only the caller stops waiting,
// so that a master that does not answer does not stall the others while
// their leases run.
func memberCalls[T any](ctx context.Context, locks []Locker, bound time.Duration, call func(ctx context.Context, i int, l Locker) T, late func(i int, err error) T, undo func(l Locker, r T), done func(i int)) []T {
	const (
		pending = iota
		delivered
		abandoned
	)
	results := make([]T, len(locks))
	chans := make([]chan T, len(locks))
	states := make([]atomic.Int32, len(locks))
	for i, l := range locks {
		ch := make(chan T, 1)
		chans[i] = ch
		go func() {
			r := call(ctx, i, l)
			if states[i].CompareAndSwap(pending, delivered) {
				if done != nil {
					done(i)
				}
				ch <- r
				return
			}
			if undo != nil {
				undo(l, r)
			}
			if done != nil {
				done(i)
			}
		}()
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	expired := false
	for i, ch := range chans {
		if !expired {
			select {
			case results[i] = <-ch:
				continue
			case <-timer.C:
				expired = true
			case <-ctx.Done():
				expired = true // the caller has gone: stop waiting
			}
		}
		if states[i].CompareAndSwap(pending, abandoned) {
			if late != nil {
				results[i] = late(i, fmt.Errorf("%w: RedLock member %q: no answer within %v", ErrTimeout, locks[i].Name(), bound))
			}
			continue
		}
		results[i] = <-ch // delivered: it is on its way
	}
	return results
}

// memberBound is how long a RedLock waits for one member's call other
// than an acquisition attempt.
const memberBound = 2 * redLockMemberTimeout

// lateErr is memberCalls' late result for calls that return an error.
func lateErr(_ int, err error) error { return err }

// leaser is implemented by this package's locks: the PEXPIRE a group
// makes on its members after an acquisition with a lease.
type leaser interface {
	canExpire() bool
	expire(ctx context.Context, lease time.Duration) (bool, error)
}

func canExpire(l Locker) bool {
	x, ok := l.(leaser)
	return ok && x.canExpire()
}

// expire sets every member's TTL to lease (Redisson's expire on each
// member; a member that cannot be, taken with lease itself, is left) and
// returns
// the members still held. A member it fails on is released: a MultiLock
// then fails (all its members are released, and the error returned); a
// RedLock goes on while a quorum is left, and otherwise releases all and
// returns nil, nil (an attempt that failed).
func (g *group) expire(ctx context.Context, got []Locker, lease time.Duration) ([]Locker, error) {
	one := func(ctx context.Context, _ int, l Locker) error {
		x, ok := l.(leaser)
		if !ok || !x.canExpire() {
			return nil
		}
		held, err := x.expire(ctx, lease)
		if err == nil && !held {
			err = fmt.Errorf("%w: %s member %q was lost before its lease was set", ErrLockLost, g.kind(), l.Name())
		}
		return err
	}
	var es []error
	if g.red {
		// Whatever ctx: a PEXPIRE whose reply is lost is fenced, so
		// that a late copy cannot shorten a hold taken again since.
		// A lease-setting slower than a quarter of the lease fails its
		// member (Redlock's per-instance timeout, small next to the TTL).
		bound := min(memberBound, max(lease/4, time.Millisecond))
		es = memberCalls(context.WithoutCancel(ctx), got, bound, one, lateErr, nil, nil)
	} else {
		es = make([]error, len(got))
		eachOf(got, func(i int, l Locker) { es[i] = one(ctx, i, l) })
	}
	var kept, lost []Locker
	for i, l := range got {
		if es[i] != nil {
			lost = append(lost, l)
		} else {
			kept = append(kept, l)
		}
	}
	if len(lost) == 0 {
		return got, nil
	}
	if len(g.locks)-len(kept) > g.failedLimit() {
		g.release(ctx, got)
		if g.red {
			return nil, nil // like a failed attempt: no quorum left
		}
		return nil, errors.Join(es...)
	}
	g.release(ctx, lost)
	return kept, nil
}

// Unlock releases the owner's hold on the members. A MultiLock unlocks
// them in order and stops at the first error, which it returns; a RedLock
// unlocks all of them concurrently and returns an error only when none
// was held (the members' errors joined).
func (g *group) Unlock(ctx context.Context) error {
	if g.err != nil {
		return g.err
	}
	if !g.red {
		for _, l := range g.locks {
			if err := l.Unlock(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	ctx = WithOwner(ctx, ownerOf(ctx))
	// Whatever ctx (an unlock cut at its op slot would leave the member
	// held and renewed). An unlock a master does not answer in time goes
	// on in the background; the member's renewal, if any, stops when it
	// ends.
	es := memberCalls(context.WithoutCancel(ctx), g.locks, memberBound, func(ctx context.Context, _ int, l Locker) error { return l.Unlock(ctx) }, lateErr, nil, nil)
	for _, err := range es {
		if err == nil {
			return nil
		}
	}
	return errors.Join(es...)
}

// IsHeld reports whether the owner holds every member (a RedLock: a
// quorum of them).
func (g *group) IsHeld(ctx context.Context) (bool, error) {
	if g.err != nil {
		return false, g.err
	}
	ctx = WithOwner(ctx, ownerOf(ctx))
	type answer struct {
		held bool
		err  error
	}
	held := make([]bool, len(g.locks))
	es := make([]error, len(g.locks))
	if g.red {
		// A master that does not answer in time: not held there.
		as := memberCalls(ctx, g.locks, memberBound, func(ctx context.Context, _ int, l Locker) answer {
			h, err := l.IsHeld(ctx)
			return answer{h, err}
		}, func(_ int, err error) answer { return answer{false, err} }, nil, nil)
		for i, a := range as {
			held[i], es[i] = a.held, a.err
		}
	} else {
		g.each(func(i int, l Locker) { held[i], es[i] = l.IsHeld(ctx) })
	}
	missing := 0
	for i := range held {
		if !held[i] {
			missing++
		}
	}
	if missing > g.failedLimit() {
		if err := errors.Join(es...); err != nil {
			return false, err
		}
		return false, nil
	}
	return true, nil
}

// HoldContext returns a context that ends when the owner's hold ends: for
// a MultiLock when any member's hold ends, for a RedLock when fewer than a
// quorum of members remain held (its cause is the last member's). It
// returns an error wrapping ErrNotHeld when the owner does not hold the
// lock now.
func (g *group) HoldContext(ctx context.Context) (context.Context, error) {
	if g.err != nil {
		return nil, g.err
	}
	hctx, cancel := context.WithCancelCause(ctx)
	// Member contexts derive from hctx: ending it ends their watches.
	mctx := WithOwner(hctx, ownerOf(ctx))
	ctxs := make([]context.Context, len(g.locks))
	es := make([]error, len(g.locks))
	if g.red {
		// A member whose check has not answered in time counts as ended
		// for the life of the group's context: its own is cancelled,
		// which ends its check and its watch (the members' contexts
		// derive from hctx, so they end with it too).
		type answer struct {
			ctx context.Context
			err error
		}
		cancels := make([]context.CancelCauseFunc, len(g.locks))
		parents := make([]context.Context, len(g.locks))
		for i := range g.locks {
			parents[i], cancels[i] = context.WithCancelCause(mctx)
		}
		as := memberCalls(mctx, g.locks, memberBound, func(_ context.Context, i int, l Locker) answer {
			c, err := l.HoldContext(parents[i])
			return answer{c, err}
		}, func(i int, err error) answer {
			cancels[i](err)
			return answer{nil, err}
		}, nil, nil)
		for i, a := range as {
			ctxs[i], es[i] = a.ctx, a.err
		}
	} else {
		g.each(func(i int, l Locker) { ctxs[i], es[i] = l.HoldContext(mctx) })
	}
	limit := g.failedLimit()
	failed := 0
	for _, err := range es {
		if err != nil {
			failed++
		}
	}
	if failed > limit {
		cancel(ErrNotHeld)
		if err := errors.Join(es...); err != nil && !errors.Is(err, ErrNotHeld) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s %q: %d of %d members held", ErrNotHeld, g.kind(), g.Name(), len(g.locks)-failed, len(g.locks))
	}
	var ended atomic.Int32
	ended.Store(int32(failed))
	for _, c := range ctxs {
		if c == nil {
			continue
		}
		context.AfterFunc(c, func() {
			if int(ended.Add(1)) > limit {
				cancel(context.Cause(c))
			}
		})
	}
	// hctx ends with ctx, or with the members above; nothing else holds it.
	context.AfterFunc(hctx, func() { cancel(nil) })
	return hctx, nil
}

// permanent returns the first error no retry can cure (an invalid
// argument or name, a non-reentrant re-acquire, a closed client).
func permanent(errs []error) error {
	for _, err := range errs {
		if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrInvalidName) || errors.Is(err, ErrAlreadyHeld) || errors.Is(err, ErrClosed) {
			return err
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// canExpire reports whether a group can set this lock's TTL after taking
// it: not a read hold's, whose TTL lives in its timeout keys too (a group
// takes a read member with its lease itself).
func (l *base) canExpire() bool { return l.err == nil && l.spec.Kind != kindRead }

// expire is the PEXPIRE of a group member (see leaser).
func (l *base) expire(ctx context.Context, lease time.Duration) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	return l.c.eng.Expire(ctx, l.spec, l.field(ctx), lease)
}
