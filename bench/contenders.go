// Package bench compares github.com/goredisson/locks/rlock with other Redis
// lock libraries for Go (and, through interop_test/java, with Redisson).
//
// Every Go contender is driven through the same two-method Mutex, created
// once per goroutine and lock name outside the measured loop, so the harness
// adds no work to the measured calls. See cmd/bench for the runner and
// RESULTS.md for the numbers.
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// Mutex is one goroutine's handle on one lock name (or, with an owner, one
// owner's handle). It is not safe for concurrent use.
type Mutex interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// Contender makes Mutexes that all share one client (one connection pool).
type Contender interface {
	// NewMutex returns a handle on name. owner != 0 names the owner
	// explicitly (rlock.WithOwner); 0 lets the library choose (rlock: the
	// calling goroutine; the token-based libraries: the handle).
	NewMutex(name string, owner int64) Mutex
	Close()
}

// Statser is implemented by contenders that can report client-side
// counters (rlock: subscriptions, waiters, renewed holds).
type Statser interface {
	Stats() map[string]int
}

// Config configures a contender.
type Config struct {
	Addr string
	// Watchdog, if > 0, is the watchdog timeout (rlock) or key validity
	// (rueidislock, which extends every validity/2). Others ignore it.
	Watchdog time.Duration
}

// Names lists the Go contenders in report order ("redisson" runs in Java).
var Names = []string{"rlock", "limit", "bsm", "redsync", "rueidislock"}

// Watchdogs lists the Go contenders that renew held locks by themselves.
var Watchdogs = map[string]bool{"rlock": true, "rueidislock": true}

// Settings describes, per contender, the settings the benchmark uses.
var Settings = map[string]string{
	"rlock":          "rueidis v1.0.79 client with defaults; rlock defaults (watchdog 30s; 3s in S3)",
	"limit":          "scripts.Acquire/scripts.Unlock Exec straight on a default rueidis v1.0.79 client; one fence key per handle, never written (no fault settling); S2 waits on one bare rueidis Receive per lock name (no hub); S5 uses the read and write scripts (ReadAcquire/ReadUnlock, WriteAcquire/WriteUnlock) the same way",
	"bsm":            "bsm/redislock " + bsmVersion + " on go-redis v9.23.0 defaults (pool 10×GOMAXPROCS); TTL 30s; waits with LinearBackoff(16ms): the shortest interval its docs recommend",
	"redsync":        "redsync/v4 " + redsyncVersion + ", one goredis/v9 pool on go-redis v9.23.0 defaults; NewMutex defaults (expiry 8s, 32 tries, retry delay rand[50ms,250ms)); ErrFailed retried",
	"rlock-read":     "rlock ReadWriteLock(name).ReadLock(), defaults as rlock",
	"rlock-fenced":   "rlock FencedLock(name), defaults as rlock",
	"rlock-fair":     "rlock FairLock(name), defaults as rlock (fair wait timeout 5 min)",
	"rlock-sem":      "rlock Semaphore(name) of 1 permit (TrySetPermits(1) before the run), Acquire(1)/Release(1), defaults as rlock",
	"limit-read":     "scripts.ReadAcquire/ReadUnlock Exec straight on rueidis (one attempt, no settling)",
	"limit-fenced":   "scripts.Acquire/Unlock with the token key, Exec straight on rueidis (a fresh fence per grant, no settling)",
	"limit-sem":      "scripts.SemAcquire/SemUpdate (this library's semaphore scripts, exactness frame included: fence check, record, TTL) Exec straight on rueidis; one record key and one never-written fence key per handle, no settling",
	"limit-semplain": "Redisson's semaphore commands alone (acquire: GET, DECRBY; release: INCRBY, PUBLISH) as two small scripts Exec straight on rueidis: what any client of Redisson's format costs, without this library's exactness frame",
	"rueidislock":    "rueidislock (rueidis v1.0.79): KeyMajority 1, NoLoopTracking (Redis ≥ 7.0.5, as its README advises), client-side caching on; KeyValidity 5s default (3s in S3, extends every validity/2)",
}

const (
	bsmVersion     = "v0.9.4"
	redsyncVersion = "v4.18.1"
	leaseMs        = "30000"
	bsmTTL         = 30 * time.Second
)

// BsmRetry is the backoff bsm/redislock waits with: a retry every 16ms, the
// shortest interval its documentation recommends (ExponentialBackoff: "the
// recommended minimum value is not less than 16ms"); its examples use
// LinearBackoff(100ms) and (500ms), which would only be slower here.
func BsmRetry() redislock.RetryStrategy { return redislock.LinearBackoff(16 * time.Millisecond) }

// New returns the Go contender called name.
func New(name string, cfg Config) (Contender, error) {
	switch name {
	case "rlock":
		return newRlock(cfg)
	case "limit":
		return newLimit(cfg)
	case "bsm":
		return newBsm(cfg)
	case "redsync":
		return newRedsync(cfg)
	case "rueidislock":
		return newRueidisLock(cfg)
	case "rlock-read", "rlock-fenced", "rlock-fair", "rlock-sem":
		c, err := newRlock(cfg)
		if err != nil {
			return nil, err
		}
		c.(*rlockC).kind = strings.TrimPrefix(name, "rlock-")
		return c, nil
	case "limit-read", "limit-fenced", "limit-sem", "limit-semplain":
		c, err := newLimit(cfg)
		if err != nil {
			return nil, err
		}
		c.(*limitC).kind = strings.TrimPrefix(name, "limit-")
		return c, nil
	}
	return nil, fmt.Errorf("unknown contender %q", name)
}

// ---- rlock ----

type rlockC struct {
	rc   rueidis.Client
	c    *rlock.Client
	lost atomic.Int64 // holds reported lost (WithLostHandler)
	kind string       // "": the plain lock; "read": a read lock; "fenced"
}

func newRlock(cfg Config) (Contender, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.Addr}})
	if err != nil {
		return nil, err
	}
	var opts []rlock.Option
	if os.Getenv("BENCH_RLOCK_LOG") != "" {
		opts = append(opts, rlock.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	if cfg.Watchdog > 0 {
		opts = append(opts, rlock.WithWatchdogTimeout(cfg.Watchdog))
	}
	rc2 := &rlockC{rc: rc}
	opts = append(opts, rlock.WithLostHandler(func(rlock.LostEvent) { rc2.lost.Add(1) }))
	c, err := rlock.New(rc, opts...)
	if err != nil {
		rc.Close()
		return nil, err
	}
	rc2.c = c
	return rc2, nil
}

func (c *rlockC) NewMutex(name string, owner int64) Mutex {
	switch c.kind {
	case "read":
		return &rlockM{l: c.c.ReadWriteLock(name).ReadLock(), owner: owner}
	case "fenced":
		return &rlockM{l: c.c.FencedLock(name), owner: owner}
	case "fair":
		return &rlockM{l: c.c.FairLock(name), owner: owner}
	case "sem":
		sem := c.c.Semaphore(name)
		if _, err := sem.TrySetPermits(context.Background(), 1); err != nil {
			panic(fmt.Sprintf("TrySetPermits(%q): %v", name, err))
		}
		return semM{sem}
	}
	return &rlockM{l: c.c.Lock(name), owner: owner}
}

// NewRW returns the read and write sides of the read-write lock name.
func (c *rlockC) NewRW(name string, owner int64) (read, write Mutex) {
	rw := c.c.ReadWriteLock(name)
	return &rlockM{l: rw.ReadLock(), owner: owner}, &rlockM{l: rw.WriteLock(), owner: owner}
}

func (c *rlockC) Close() {
	c.c.Close()
	c.rc.Close()
}

func (c *rlockC) Stats() map[string]int {
	s := c.c.Stats()
	return map[string]int{"subscriptions": s.Subscriptions, "waiters": s.Waiters, "renewing": s.Renewing, "lost": int(c.lost.Load())}
}

// semM takes one permit of a semaphore as a Mutex.
type semM struct{ s *rlock.Semaphore }

func (m semM) Lock(ctx context.Context) error   { return m.s.Acquire(ctx, 1) }
func (m semM) Unlock(ctx context.Context) error { return m.s.Release(ctx, 1) }

// Latch runs rounds of the latch release: n awaiters (goroutines of this
// client) Await a latch of count 1; once all wait, one CountDown; each
// awaiter's latency is its Await return minus the CountDown call's start.
// P50us/P99us are over every awaiter of every round; Ext["all_us"] the
// median over the rounds of the time until the last awaiter returned,
// Ext["subs"] the client's subscriptions while the n waited.
func (c *rlockC) Latch(name string, n, rounds int) Result {
	ctx := context.Background()
	var h Hist
	var alls []float64
	subs := 0
	for r := range rounds {
		l := c.c.CountDownLatch(name + ":" + strconv.Itoa(r))
		if ok, err := l.TrySetCount(ctx, 1); err != nil || !ok {
			return Result{Error: fmt.Sprintf("TrySetCount: %v %v", ok, err)}
		}
		back := make(chan time.Time, n)
		errs := make(chan error, n)
		for range n {
			go func() {
				if err := l.Await(ctx); err != nil {
					errs <- err
					return
				}
				back <- time.Now()
			}()
		}
		deadline := time.Now().Add(time.Minute)
		for c.c.Stats().Waiters < n {
			if time.Now().After(deadline) {
				return Result{Error: "the awaiters never all waited"}
			}
			time.Sleep(time.Millisecond)
		}
		subs = max(subs, c.c.Stats().Subscriptions)
		t0 := time.Now()
		if err := l.CountDown(ctx); err != nil {
			return Result{Error: "CountDown: " + err.Error()}
		}
		var last time.Duration
		for range n {
			select {
			case at := <-back:
				d := at.Sub(t0)
				h.Add(d)
				last = max(last, d)
			case err := <-errs:
				return Result{Error: "Await: " + err.Error()}
			case <-time.After(time.Minute):
				return Result{Error: "an awaiter was not released within a minute"}
			}
		}
		alls = append(alls, float64(last.Microseconds()))
	}
	sort.Float64s(alls)
	return Result{OK: true, Ops: int64(h.Count()), P50us: us(h.Quantile(0.5)), P99us: us(h.Quantile(0.99)),
		Waiters: n, Ext: map[string]float64{"all_us": alls[len(alls)/2], "subs": float64(subs)}}
}

type rlockM struct {
	l     rlock.Locker
	owner int64
}

func (m *rlockM) Lock(ctx context.Context) error {
	if m.owner != 0 {
		ctx = rlock.WithOwner(ctx, m.owner)
	}
	return m.l.Lock(ctx)
}

func (m *rlockM) Unlock(ctx context.Context) error {
	if m.owner != 0 {
		ctx = rlock.WithOwner(ctx, m.owner)
	}
	return m.l.Unlock(ctx)
}

// ---- the limit: the same scripts, no library ----

type limitC struct {
	rc     rueidis.Client
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	subs map[string]*limitSub

	kind string // "": the plain lock; "read", "fenced", "sem", "semplain": one attempt per Lock (S1 only)
}

type limitSub struct {
	ready chan struct{}
	wake  chan struct{} // capacity 1: one message wakes one waiter (the plain lock)

	mu  sync.Mutex
	all chan struct{} // closed and replaced by every message: wakes every waiter (the read-write lock)
}

// allChan returns the channel the next message closes.
func (s *limitSub) allChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all
}

func newLimit(cfg Config) (Contender, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.Addr}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &limitC{rc: rc, id: uuid.NewString(), ctx: ctx, cancel: cancel, subs: map[string]*limitSub{}}, nil
}

func (c *limitC) NewMutex(name string, owner int64) Mutex {
	if owner == 0 {
		owner = int64(nextOwner())
	}
	field := c.id + ":" + strconv.FormatInt(owner, 10)
	ch := rlock.ChannelName(name)
	fence := "goredisson_fence:{" + name + "}:bench" + strconv.FormatInt(owner, 16)
	if strings.Contains(name, "{") {
		fence = "goredisson_fence:" + name + ":bench" + strconv.FormatInt(owner, 16)
	}
	switch c.kind {
	case "sem", "semplain":
		if err := c.rc.Do(context.Background(), c.rc.B().Set().Key(name).Value("1").Build()).Error(); err != nil {
			panic(fmt.Sprintf("SET %q 1: %v", name, err))
		}
		return &limitSem{rc: c.rc, plain: c.kind == "semplain", name: name, channel: rlock.SemaphoreChannelName(name),
			fence: fence, record: strings.Replace(fence, "goredisson_fence:", "goredisson_ops:", 1)}
	case "read":
		prefix := "{" + name + "}:" + field + ":rwlock_timeout"
		return &limitOnce{rc: c.rc, acq: scripts.ReadAcquire, unl: scripts.ReadUnlock,
			keys: []string{name, prefix, fence}, acqArgs: []string{leaseMs, field, field + ":write", "0", "60000"},
			ukeys: []string{name, rlock.RWLockChannelName(name), prefix, "{" + name + "}", fence}, uargs: []string{field, "PUBLISH", "1", "60000"}}
	case "fenced":
		return &limitOnce{rc: c.rc, acq: scripts.Acquire, unl: scripts.Unlock,
			keys: []string{name, rlock.TokenName(name), fence}, acqArgs: []string{leaseMs, field, "0", "60000"},
			ukeys: []string{name, ch, fence}, uargs: []string{"0", leaseMs, field, "PUBLISH", "1", "60000"}}
	}
	return &limitM{
		c:       c,
		channel: ch,
		keys:    []string{name, fence},
		acqArgs: []string{leaseMs, field, "0", "60000"}, // one level at a time: expects count 0
		ukeys:   []string{name, ch, fence},
		uargs:   []string{"0", leaseMs, field, "PUBLISH", "1", "60000"},
	}
}

func (c *limitC) Close() {
	c.cancel()
	c.wg.Wait()
	c.rc.Close()
}

// sub returns the wake channel of a lock channel, subscribing once (the
// subscription is kept until Close).
func (c *limitC) sub(ctx context.Context, channel string) (*limitSub, error) {
	c.mu.Lock()
	s := c.subs[channel]
	if s == nil {
		s = &limitSub{ready: make(chan struct{}), wake: make(chan struct{}, 1), all: make(chan struct{})}
		c.subs[channel] = s
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			var once sync.Once
			rctx := rueidis.WithOnSubscriptionHook(c.ctx, func(rueidis.PubSubSubscription) {
				once.Do(func() { close(s.ready) })
			})
			for c.ctx.Err() == nil {
				_ = c.rc.Receive(rctx, c.rc.B().Subscribe().Channel(channel).Build(), func(rueidis.PubSubMessage) {
					select {
					case s.wake <- struct{}{}:
					default:
					}
					s.mu.Lock()
					close(s.all)
					s.all = make(chan struct{})
					s.mu.Unlock()
				})
			}
		}()
	}
	c.mu.Unlock()
	select {
	case <-s.ready:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type limitM struct {
	c        *limitC
	acq, unl *scripts.Script // nil: the plain lock's
	channel  string
	all      bool // a message wakes every waiter (the read-write lock's channel), not one
	keys     []string
	acqArgs  []string
	ukeys    []string
	uargs    []string
	timer    *time.Timer
}

// NewRW returns the bare read and write locks of the read-write lock
// name (S5): the scripts sent straight through rueidis, waiting on the
// lock's channel, one attempt per wake-up; a message wakes every waiter
// (a write unlock lets all readers in, as the library's wake policy for
// this channel), where the plain lock's wakes one.
func (c *limitC) NewRW(name string, owner int64) (read, write Mutex) {
	if owner == 0 {
		owner = int64(nextOwner())
	}
	field := c.id + ":" + strconv.FormatInt(owner, 10)
	ch := rlock.RWLockChannelName(name)
	fence := "goredisson_fence:{" + name + "}:bench" + strconv.FormatInt(owner, 16)
	prefix := "{" + name + "}:" + field + ":rwlock_timeout"
	read = &limitM{c: c, acq: scripts.ReadAcquire, unl: scripts.ReadUnlock, channel: ch, all: true,
		keys: []string{name, prefix, fence}, acqArgs: []string{leaseMs, field, field + ":write", "0", "60000"},
		ukeys: []string{name, ch, prefix, "{" + name + "}", fence}, uargs: []string{field, "PUBLISH", "1", "60000"}}
	write = &limitM{c: c, acq: scripts.WriteAcquire, unl: scripts.WriteUnlock, channel: ch, all: true,
		keys: []string{name, fence}, acqArgs: []string{leaseMs, field + ":write", "0", "60000"},
		ukeys: []string{name, ch, fence}, uargs: []string{"1", leaseMs, field + ":write", "PUBLISH", "1", "60000"}}
	return read, write
}

func (m *limitM) try(ctx context.Context) (int64, bool, error) {
	acq := m.acq
	if acq == nil {
		acq = scripts.Acquire
	}
	r, err := acq.Exec(ctx, m.c.rc, m.keys, m.acqArgs).AsInt64()
	if err != nil {
		return 0, false, err
	}
	if r > 0 {
		return 0, true, nil
	}
	return -2 - r, false, nil
}

func (m *limitM) Lock(ctx context.Context) error {
	if _, ok, err := m.try(ctx); ok || err != nil {
		return err
	}
	s, err := m.c.sub(ctx, m.channel)
	if err != nil {
		return err
	}
	for {
		wake := s.wake
		if m.all {
			wake = s.allChan() // taken before the attempt: a message after it is not missed
		}
		ttl, ok, err := m.try(ctx)
		if ok || err != nil {
			return err
		}
		d := time.Duration(ttl) * time.Millisecond
		if ttl < 0 {
			d = time.Second
		}
		if m.timer == nil {
			m.timer = time.NewTimer(d)
		} else {
			m.timer.Reset(d)
		}
		select {
		case <-wake:
		case <-m.timer.C:
		case <-ctx.Done():
			m.timer.Stop()
			return ctx.Err()
		}
		m.timer.Stop()
	}
}

func (m *limitM) Unlock(ctx context.Context) error {
	unl := m.unl
	if unl == nil {
		unl = scripts.Unlock
	}
	r, err := unl.Exec(ctx, m.c.rc, m.ukeys, m.uargs).AsInt64()
	if err == nil && r < 0 {
		return errors.New("limit: unlock: not held")
	}
	return err
}

// limitOnce is the bare scripts of a read or fenced lock: one acquire
// attempt per Lock (S1 never waits), no fault settling.
type limitOnce struct {
	rc            rueidis.Client
	acq, unl      *scripts.Script
	keys, acqArgs []string
	ukeys, uargs  []string
	burn          bool
	n             int
}

func (m *limitOnce) Lock(ctx context.Context) error {
	res := m.acq.Exec(ctx, m.rc, m.keys, m.acqArgs)
	if vals, err := res.AsIntSlice(); err == nil && len(vals) == 2 {
		return nil // {count, token}
	}
	r, err := res.AsInt64()
	if err != nil {
		return err
	}
	if r <= 0 {
		return errors.New("limit: acquire: not free (S1 only)")
	}
	return nil
}

func (m *limitOnce) Unlock(ctx context.Context) error {
	r, err := m.unl.Exec(ctx, m.rc, m.ukeys, m.uargs).AsInt64()
	if err == nil && r < 0 {
		return errors.New("limit: unlock: not held")
	}
	return err
}

// limitSem is the bare scripts of a semaphore of one permit: Acquire(1)
// and Release(1), one attempt each (S1 never waits), no settling. With
// plain, Redisson's commands alone; otherwise this library's scripts,
// each call a fresh sequence number in slot 0 (the slot the library gives
// a call when no other of its calls on the object is in flight).
type limitSem struct {
	rc            rueidis.Client
	plain         bool
	name, channel string
	fence, record string
	seq           uint64
}

var (
	semPlainAcquire = rueidis.NewLuaScript(`local v = tonumber(redis.call('get', KEYS[1]))
if v ~= nil and v >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0`)
	semPlainRelease = rueidis.NewLuaScript(`local v = redis.call('incrby', KEYS[1], ARGV[1])
redis.call('publish', KEYS[2], v)
return v`)
)

func (m *limitSem) Lock(ctx context.Context) error {
	var res rueidis.RedisResult
	if m.plain {
		res = semPlainAcquire.Exec(ctx, m.rc, []string{m.name}, []string{"1"})
	} else {
		m.seq++
		s := strconv.FormatUint(m.seq, 10)
		res = scripts.SemAcquire.Exec(ctx, m.rc, []string{m.name, m.fence, m.record}, []string{s, "0", "3600000", "1"})
	}
	r, err := res.AsInt64()
	if err != nil {
		return err
	}
	if r != 1 {
		return errors.New("limit: semaphore acquire: no permit (S1 only)")
	}
	return nil
}

func (m *limitSem) Unlock(ctx context.Context) error {
	if m.plain {
		return semPlainRelease.Exec(ctx, m.rc, []string{m.name, m.channel}, []string{"1"}).Error()
	}
	m.seq++
	s := strconv.FormatUint(m.seq, 10)
	return scripts.SemUpdate.Exec(ctx, m.rc, []string{m.name, m.channel, m.fence, m.record},
		[]string{s, "0", "3600000", "release", "1", "PUBLISH"}).Error()
}

var ownerMu sync.Mutex
var ownerSeq uint64

func nextOwner() uint64 {
	ownerMu.Lock()
	defer ownerMu.Unlock()
	ownerSeq++
	return ownerSeq
}

// ---- bsm/redislock ----

type bsmC struct {
	rdb *goredis.Client
	lk  *redislock.Client
}

func newBsm(cfg Config) (Contender, error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: cfg.Addr})
	return &bsmC{rdb: rdb, lk: redislock.New(rdb)}, nil
}

func (c *bsmC) NewMutex(name string, _ int64) Mutex { return &bsmM{c: c, name: name} }
func (c *bsmC) Close()                              { _ = c.rdb.Close() }

type bsmM struct {
	c    *bsmC
	name string
	l    *redislock.Lock
}

func (m *bsmM) Lock(ctx context.Context) error {
	// First attempt without a retry strategy (Obtain tries at once anyway),
	// so an uncontended lock does not pay for a strategy object.
	l, err := m.c.lk.Obtain(ctx, m.name, bsmTTL, nil)
	for errors.Is(err, redislock.ErrNotObtained) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil) {
		// Obtain gives up after the TTL when ctx has no deadline: ask again.
		l, err = m.c.lk.Obtain(ctx, m.name, bsmTTL, &redislock.Options{RetryStrategy: BsmRetry()})
	}
	if err != nil {
		return err
	}
	m.l = l
	return nil
}

func (m *bsmM) Unlock(ctx context.Context) error {
	err := m.l.Release(ctx)
	m.l = nil
	return err
}

// ---- redsync ----

type redsyncC struct {
	rdb *goredis.Client
	rs  *redsync.Redsync
}

func newRedsync(cfg Config) (Contender, error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: cfg.Addr})
	return &redsyncC{rdb: rdb, rs: redsync.New(redsyncgoredis.NewPool(rdb))}, nil
}

func (c *redsyncC) NewMutex(name string, _ int64) Mutex { return &redsyncM{m: c.rs.NewMutex(name)} }
func (c *redsyncC) Close()                              { _ = c.rdb.Close() }

type redsyncM struct{ m *redsync.Mutex }

func (m *redsyncM) Lock(ctx context.Context) error {
	for {
		err := m.m.LockContext(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var taken *redsync.ErrTaken
		if !errors.Is(err, redsync.ErrFailed) && !errors.As(err, &taken) {
			return err
		}
		// 32 tries ran out: an application that must get the lock asks again.
	}
}

func (m *redsyncM) Unlock(ctx context.Context) error {
	ok, err := m.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock failed")
	}
	return err
}

// ---- rueidislock ----

type rueidisLockC struct{ l rueidislock.Locker }

func newRueidisLock(cfg Config) (Contender, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{cfg.Addr}},
		KeyMajority:    1,
		NoLoopTracking: true,
		KeyValidity:    cfg.Watchdog,
	})
	if err != nil {
		return nil, err
	}
	return &rueidisLockC{l: l}, nil
}

func (c *rueidisLockC) NewMutex(name string, _ int64) Mutex { return &rueidisLockM{l: c.l, name: name} }
func (c *rueidisLockC) Close()                              { c.l.Close() }

type rueidisLockM struct {
	l      rueidislock.Locker
	name   string
	ctx    context.Context
	cancel context.CancelFunc
}

func (m *rueidisLockM) Lock(ctx context.Context) error {
	hctx, cancel, err := m.l.WithContext(ctx, m.name)
	if err != nil {
		return err
	}
	m.ctx, m.cancel = hctx, cancel
	return nil
}

// Lost reports whether the hold ended without Unlock (rueidislock cancels
// the context it returned).
func (m *rueidisLockM) Lost() bool { return m.ctx != nil && m.ctx.Err() != nil }

func (m *rueidisLockM) Unlock(context.Context) error {
	if m.cancel == nil {
		return errors.New("rueidislock: not held")
	}
	m.cancel()
	m.cancel, m.ctx = nil, nil
	return nil
}

// RedLockLimitPairs is RedLockPairs for the bare scripts: the limit
// contender's Lock and Unlock on each of the first n of addrs, sent at once
// from one goroutine per master (a WaitGroup per step), with no bookkeeping,
// no bound and no validity check: what n concurrent script calls cost on
// this machine, the floor of any RedLock of Redisson's lock.
func RedLockLimitPairs(addrs []string, n int, warm, dur time.Duration) Result {
	if n < 1 || n > len(addrs) {
		return Result{Error: fmt.Sprintf("redlock: %d members of %d masters", n, len(addrs))}
	}
	var members []Mutex
	for _, a := range addrs[:n] {
		c, err := newLimit(Config{Addr: a})
		if err != nil {
			return Result{Error: err.Error()}
		}
		defer c.Close()
		members = append(members, c.NewMutex("redlock:limit", 1))
	}
	ctx := context.Background()
	errs := make([]error, n)
	all := func(f func(m Mutex) error) error {
		if n == 1 {
			return f(members[0])
		}
		var wg sync.WaitGroup
		for i, m := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = f(m)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	return serialPairs(warm, dur,
		func() error { return all(func(m Mutex) error { return m.Lock(ctx) }) },
		func() error { return all(func(m Mutex) error { return m.Unlock(ctx) }) })
}

// serialPairs runs lock+unlock pairs on the calling goroutine for warm, then
// for dur measured, and reports their rate and latency.
func serialPairs(warm, dur time.Duration, lock, unlock func() error) Result {
	var h Hist
	var ops int64
	measureFrom := time.Now().Add(warm)
	for {
		t := time.Now()
		if t.After(measureFrom.Add(dur)) {
			break
		}
		if err := lock(); err != nil {
			return Result{Error: "lock: " + err.Error()}
		}
		if err := unlock(); err != nil {
			return Result{Error: "unlock: " + err.Error()}
		}
		if t.After(measureFrom) {
			h.Add(time.Since(t))
			ops++
		}
	}
	return Result{OK: true, Ops: ops, Seconds: dur.Seconds(), Rate: float64(ops) / dur.Seconds(),
		P50us: us(h.Quantile(0.5)), P99us: us(h.Quantile(0.99))}
}

// RedLockPairs runs, on one goroutine, acquire+release pairs of a RedLock
// over the first n of addrs (one rlock Client per independent master; n
// == 1: that member's plain Lock alone), warm first, then dur measured.
func RedLockPairs(addrs []string, n int, warm, dur time.Duration) Result {
	if n < 1 || n > len(addrs) {
		return Result{Error: fmt.Sprintf("redlock: %d members of %d masters", n, len(addrs))}
	}
	var members []rlock.Locker
	for _, a := range addrs[:n] {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}})
		if err != nil {
			return Result{Error: err.Error()}
		}
		defer rc.Close()
		c, err := rlock.New(rc)
		if err != nil {
			return Result{Error: err.Error()}
		}
		defer c.Close()
		members = append(members, c.Lock("redlock:rlock"))
	}
	var l rlock.Locker = members[0]
	if n > 1 {
		l = rlock.NewRedLock(members...)
	}
	ctx := context.Background()
	return serialPairs(warm, dur, func() error { return l.Lock(ctx) }, func() error { return l.Unlock(ctx) })
}
