package rlock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/engine"
	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/internal/owner"
	"github.com/goredisson/locks/pubsub"
	"github.com/goredisson/locks/scripts"
	"github.com/goredisson/locks/watchdog"
)

// PubSubMode chooses how unlock messages travel.
type PubSubMode int

const (
	// PubSubAuto follows Redisson's rule: sharded pub/sub on a Redis Cluster
	// whose servers support it (Redis 7+), classic pub/sub otherwise. It
	// matches Redisson's default shardedSubscriptionMode AUTO.
	PubSubAuto PubSubMode = iota
	// PubSubClassic always uses PUBLISH/SUBSCRIBE, like Redisson before
	// 3.22, on non-cluster setups, or with shardedSubscriptionMode OFF.
	PubSubClassic
	// PubSubSharded always uses SPUBLISH/SSUBSCRIBE, like Redisson with
	// shardedSubscriptionMode ON. It needs Redis 7+.
	PubSubSharded
)

func (m PubSubMode) String() string {
	switch m {
	case PubSubAuto:
		return "auto"
	case PubSubClassic:
		return "classic"
	case PubSubSharded:
		return "sharded"
	}
	return "PubSubMode(" + strconv.Itoa(int(m)) + ")"
}

// Defaults, as in Redisson 4.x.
const (
	DefaultWatchdogTimeout     = 30 * time.Second
	DefaultWatchdogBatchSize   = 100
	DefaultCommandTimeout      = 3 * time.Second
	DefaultSubscriptionTimeout = 7500 * time.Millisecond
	// DefaultFairLockWaitTimeout is Redisson's fairLockWaitTimeout: how
	// long a FairLock waiter with no wait limit reserves its place.
	DefaultFairLockWaitTimeout = 5 * time.Minute
	// retryAttempts is Redisson's retryAttempts: a call whose script Redis
	// refused, or whose reply was lost, is retried or settled for up to
	// this many command timeouts.
	retryAttempts = 4
)

type config struct {
	watchdogTimeout     time.Duration
	batchSize           int
	logger              *slog.Logger
	pubsub              PubSubMode
	commandTimeout      time.Duration
	subscriptionTimeout time.Duration
	linger              time.Duration
	onLost              func(LostEvent)
	maxHold             time.Duration
	fairWait            time.Duration
	sync                *engine.ReplicaSync // nil: the default for the topology
	hooks               Hooks
}

// Option configures a Client.
type Option func(*config) error

// WithWatchdogTimeout sets the lease of locks taken without one (default
// 30s, Redisson's lockWatchdogTimeout); the watchdog renews them every
// timeout/3. Use the same value as the Java services sharing the locks.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 3*time.Millisecond {
			return fmt.Errorf("%w: watchdog timeout %v is below 3ms", ErrInvalidArgument, d)
		}
		c.watchdogTimeout = d
		return nil
	}
}

// WithWatchdogBatchSize sets the most locks renewed by one script call
// (default 100, Redisson's lockWatchdogBatchSize).
func WithWatchdogBatchSize(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("%w: watchdog batch size %d is not positive", ErrInvalidArgument, n)
		}
		c.batchSize = n
		return nil
	}
}

// WithWatchdogMaxHold bounds how long the watchdog renews one hold (from
// its first acquisition): after d the hold is no longer renewed, its
// HoldContext ends with ErrLockLost (wrapping ErrMaxHold), and the lock
// expires one lease later unless unlocked. It keeps a stuck or runaway
// holder from keeping a lock forever (Redisson #5115). Default: unbounded.
func WithWatchdogMaxHold(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: watchdog max hold %v is not positive", ErrInvalidArgument, d)
		}
		c.maxHold = d
		return nil
	}
}

// WithLogger sets where the client logs renewal failures and lost locks
// (default: nowhere).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidArgument)
		}
		c.logger = l
		return nil
	}
}

// WithPubSubMode sets the pub/sub mode (default PubSubAuto).
func WithPubSubMode(m PubSubMode) Option {
	return func(c *config) error {
		if m < PubSubAuto || m > PubSubSharded {
			return fmt.Errorf("%w: unknown pub/sub mode %d", ErrInvalidArgument, int(m))
		}
		c.pubsub = m
		return nil
	}
}

// WithCommandTimeout bounds each script call (default 3s, Redisson's
// timeout), whatever the caller's context. Script calls do not end with the
// caller's context: an acquire whose reply is still on its way when the
// context ends is awaited and undone, so an abandoned wait never leaves a
// hold behind. A call that Redis refused before running it (BUSY,
// TRYAGAIN, LOADING, ...) is retried with back-off, and one whose reply was
// lost is settled, for up to 4 command timeouts (Redisson's retryAttempts),
// or as long as a waiter's wait lasts. A call with no reply within the
// timeout returns an error wrapping ErrTimeout, not the context's. Reads
// (IsLocked, HoldCount, RemainTTL, Inspect, Token, ...) are bounded the
// same way: each attempt by the timeout, retried within the same budget.
// A call that gives something back or sets a state (Unlock, ForceUnlock,
// Release, AddPermits, TrySetPermits, DrainPermits, CountDown,
// TrySetCount) is still sent when its context has already ended, so that
// a deferred release with a request's cancelled context still releases
// (one that must first wait for another call of the same owner waits only
// while its context lives); an acquire with an ended context returns the
// context's error without a call.
func WithCommandTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: command timeout %v is not positive", ErrInvalidArgument, d)
		}
		c.commandTimeout = d
		return nil
	}
}

// WithFairLockWaitTimeout sets how long a FairLock waiter with no wait
// limit (Lock, LockLease) reserves its place in line (default 5 minutes,
// Redisson's fairLockWaitTimeout, configurable in Redisson 3.46+): if it
// is first in line and has not taken the lock by then (its process died,
// or the holder kept the lock), the others drop it. Use the same value as
// the Java services sharing the locks.
func WithFairLockWaitTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: fair lock wait timeout %v is below 1ms", ErrInvalidArgument, d)
		}
		c.fairWait = d
		return nil
	}
}

// WithSubscriptionTimeout bounds the wait for a channel subscription when a
// waiter starts waiting (default 7.5s, Redisson's subscriptionTimeout).
func WithSubscriptionTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: subscription timeout %v is not positive", ErrInvalidArgument, d)
		}
		c.subscriptionTimeout = d
		return nil
	}
}

// WithSubscriptionLinger sets how long a channel stays subscribed after its
// last waiter stopped waiting (default 1s; 0: it is unsubscribed at once).
// A waiter that comes back to the channel within that time (the next
// contended Lock of a name; a fair lock's waiter, which has a channel of
// its own, every time it waits) finds it subscribed and sends no
// SUBSCRIBE. Messages to a lingering channel wake nobody. A count-down
// latch's channel never lingers, and a lingering channel whose connection
// breaks ends then.
func WithSubscriptionLinger(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: subscription linger %v is negative", ErrInvalidArgument, d)
		}
		c.linger = d
		return nil
	}
}

// LostEvent describes a hold that ended without its owner's Unlock.
type LostEvent struct {
	Kind  string // the hold's kind: KindLock, KindReadLock or KindWriteLock
	Name  string // the lock name
	Owner int64  // the owner id
	Err   error  // wraps ErrLockLost, and the cause
}

// WithLostHandler sets a function called for every hold that ends without
// its owner's Unlock (lost, lease expired), for logging and metrics. It
// runs on a goroutine of its own, never the renewal's: a slow handler
// delays later handlers, not renewals nor the end of other holds'
// HoldContexts (which end on a goroutine of their own), and it may call
// any method,
// Client.Close included. HoldContext gives the same news to the code doing
// the work.
func WithLostHandler(fn func(LostEvent)) Option {
	return func(c *config) error {
		c.onLost = fn
		return nil
	}
}

// Client makes locks that share one rueidis client, one client id, one
// pub/sub hub, one hold table and one watchdog. It is safe for concurrent
// use. Create one per process (per "service"), like a RedissonClient.
type Client struct {
	rc      rueidis.Client
	id      string
	cfg     config
	cluster bool

	eng   *engine.Engine
	table *hold.Table
	hub   *pubsub.Hub
	wd    *watchdog.Watchdog

	fields  [256]atomic.Pointer[ownerField]
	wfields [64]atomic.Pointer[ownerField]

	closed atomic.Bool
}

// New returns a Client that locks through rc, whatever its topology
// (standalone, sentinel or cluster). rc stays the caller's: Close does not
// close it. Do not set rueidis' ClientOption.ConnLifetime on rc: rueidis
// then resends a script by itself when a connection expires under it. In PubSubAuto mode on a cluster, New asks the server whether it
// supports sharded pub/sub.
func New(rc rueidis.Client, opts ...Option) (*Client, error) {
	if rc == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", ErrInvalidArgument)
	}
	cfg := config{
		watchdogTimeout:     DefaultWatchdogTimeout,
		batchSize:           DefaultWatchdogBatchSize,
		logger:              slog.New(slog.DiscardHandler),
		commandTimeout:      DefaultCommandTimeout,
		subscriptionTimeout: DefaultSubscriptionTimeout,
		linger:              pubsub.DefaultLinger,
		fairWait:            DefaultFairLockWaitTimeout,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	mode := rc.Mode()
	if cfg.sync == nil {
		// Redisson skips WAIT only for single-server configs.
		cfg.sync = defaultReplicaSync(mode == rueidis.ClientModeCluster || mode == rueidis.ClientModeSentinel)
	}
	c := &Client{
		rc:      rc,
		id:      uuid.NewString(),
		cfg:     cfg,
		cluster: mode == rueidis.ClientModeCluster,
	}
	sharded := false
	switch cfg.pubsub {
	case PubSubSharded:
		sharded = true
	case PubSubAuto:
		if c.cluster {
			ctx, cancel := context.WithTimeout(context.Background(), cfg.commandTimeout)
			err := rc.Do(ctx, rc.B().PubsubShardnumsub().Channel("0").Build()).Error()
			cancel()
			if err != nil {
				re, isRedis := rueidis.IsRedisErr(err)
				if !isRedis {
					return nil, fmt.Errorf("rlock: probing sharded pub/sub support: %w", err)
				}
				if strings.HasPrefix(re.Error(), "NOPERM") {
					// Not an answer: a silent fall-back to classic
					// pub/sub would miss Redisson's sharded wake-ups.
					return nil, fmt.Errorf("rlock: probing sharded pub/sub support with PUBSUB SHARDNUMSUB: %w "+
						"(grant the user +pubsub|shardnumsub, or choose the pub/sub kind with WithPubSubMode)", err)
				}
			}
			sharded = err == nil
		}
	}
	c.table = hold.New(cfg.watchdogTimeout, c.onEnd)
	c.hub = pubsub.New(rc, sharded, cfg.logger)
	c.hub.SetLinger(cfg.linger)
	e := engine.New()
	e.X = &engine.Executor{RC: rc, Cluster: c.cluster, Timeout: cfg.commandTimeout, Sync: *cfg.sync, Log: cfg.logger}
	e.Table, e.Hub, e.ClientID = c.table, c.hub, c.id
	e.Publish = "PUBLISH"
	if sharded {
		e.Publish = "SPUBLISH"
	}
	e.WatchdogTimeout, e.WatchdogMs = cfg.watchdogTimeout, strconv.FormatInt(cfg.watchdogTimeout.Milliseconds(), 10)
	e.SubscriptionTimeout = cfg.subscriptionTimeout
	e.Budget = retryAttempts * cfg.commandTimeout
	c.eng = e
	var slot func(string) uint16
	if c.cluster {
		slot = names.Slot
	}
	wd, err := watchdog.New(watchdog.Config{
		Table:     c.table,
		Timeout:   cfg.watchdogTimeout,
		BatchSize: cfg.batchSize,
		Slot:      slot,
		MaxHold:   cfg.maxHold,
		Renew:     c.renew,
		Logger:    cfg.logger,
	})
	if err != nil {
		return nil, err
	}
	c.wd = wd
	return c, nil
}

// ID returns the client id: a random lowercase v4 UUID, the first half of
// every owner field this client writes ("<id>:<ownerId>").
func (c *Client) ID() string { return c.id }

// PubSubSharded reports whether this client uses sharded pub/sub.
func (c *Client) PubSubSharded() bool { return c.eng.Publish == "SPUBLISH" }

// Close stops every renewal (the locks this client holds then expire after
// their lease), drops every subscription, wakes every waiter with ErrClosed
// and cancels every HoldContext. It does not unlock and does not close the
// rueidis client (close that after Close returns). A fair lock's waiter it
// wakes leaves the lock's queue, as a waiter whose wait ends does, and
// Close waits up to one command timeout for those calls, sending again a
// call that Redis refused (BUSY, LOADING) or whose reply was lost, and
// cutting the last at that bound (a crashed process's entry would stall
// the next waiter until its reservation ends).
// Close is idempotent, returns without waiting for a renewal round in
// flight, and may be called from anywhere, a lost handler included.
func (c *Client) Close() error {
	// A second Close (a lost handler's, while another goroutine's Close
	// waits for that handler) returns at once instead of waiting.
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.wd.Close()
	c.eng.Close()
	c.hub.Close()   // wakes every waiter with ErrClosed
	c.table.Close() // no acquire in flight counts from now: it is undone
	c.eng.Leavers() // fair waiters leave their queues
	return nil
}

// read runs try, an idempotent read, with each attempt bounded by the
// command timeout, and again after a refusal (BUSY, TRYAGAIN, ...) or a
// lost reply until the budget (retry attempts × command timeout) is
// spent. The caller's context must not be the only bound: rueidis follows
// redirects until its context ends (a user without +asking, in a slot
// migration, is redirected forever). A nil reply is returned as it is
// (rueidis.IsRedisNil); other errors are classified: the command timeout
// as ErrTimeout, a denied command named.
func (c *Client) read(ctx context.Context, try func(ctx context.Context) error) error {
	deadline := time.Now().Add(c.eng.Budget)
	var bo engine.Backoff
	for {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.commandTimeout)
		err := try(cctx)
		cancel()
		if err == nil || rueidis.IsRedisNil(err) {
			return err
		}
		class, cerr := engine.Classify(ctx, err)
		if class == engine.Failed || class == engine.Closed || ctx.Err() != nil {
			return cerr
		}
		d := bo.Next()
		if time.Now().Add(d).After(deadline) {
			return cerr
		}
		if err := sleepCtx(ctx, d); err != nil {
			return err
		}
	}
}

// Stats is a snapshot of a Client's activity.
type Stats struct {
	Subscriptions int // channels subscribed to for waiters (one per lock name waited on)
	Lingering     int // channels still subscribed after their last waiter left (see WithSubscriptionLinger), or tearing down
	Waiters       int // calls waiting for a lock (and, for an instant, calls that joined a live channel before their first attempt)
	Parked        int // of those, the ones parked until a message (or their timeout) after an attempt
	Renewing      int // holds the watchdog renews
	Holds         int // records in the hold table (holds, and operations under way)
}

// Stats returns a snapshot of the client's subscriptions, waiters and
// holds.
func (c *Client) Stats() Stats {
	ch, lingering, subs := c.hub.Stats()
	records, renewing := c.table.Stats()
	return Stats{Subscriptions: ch - lingering, Lingering: lingering, Waiters: subs, Parked: c.hub.Parked(), Renewing: renewing, Holds: records}
}

// Lock returns the lock called name, like Redisson's getLock(name): the
// name is the Redis key, with no prefix. It is cheap and does no I/O. An
// invalid name is reported by the Lock's methods.
func (c *Client) Lock(name string) *Lock {
	l := &Lock{c.newBase(name, KindLock)}
	if l.err == nil {
		l.spec = c.lockSpec(name, lockVariant{})
	}
	return l
}

// field returns the owner field "<clientId>:<owner>". Recent fields are
// kept in a small direct-mapped cache (by the owner's low bits), so the
// lock and unlock of one goroutine build the string once.
func (c *Client) field(owner int64) string {
	slot := &c.fields[uint64(owner)%uint64(len(c.fields))]
	if f := slot.Load(); f != nil && f.owner == owner {
		return f.field
	}
	f := &ownerField{owner: owner, field: c.id + ":" + strconv.FormatInt(owner, 10)}
	slot.Store(f)
	return f.field
}

type ownerField struct {
	owner int64
	field string
}

// writeField returns the owner's write-lock field "<clientId>:<owner>:write"
// (PROTOCOL.md 5.1), cached as field is.
func (c *Client) writeField(owner int64) string {
	slot := &c.wfields[uint64(owner)%uint64(len(c.wfields))]
	if f := slot.Load(); f != nil && f.owner == owner {
		return f.field
	}
	f := &ownerField{owner: owner, field: c.field(owner) + ":write"}
	slot.Store(f)
	return f.field
}

// onEnd is the hold table's end handler: a hold ended without its owner's
// unlock. It runs on the table's notifier goroutine.
func (c *Client) onEnd(k hold.Key, cause error) {
	c.cfg.logger.Warn("rlock: lock lost", "lock", k.Name, "owner", k.Field, "err", cause)
	if c.cfg.onLost != nil || c.cfg.hooks.Lost != nil {
		_, id, _ := owner.ParseField(k.Field)
		ev := LostEvent{Kind: renewKind(k.Kind), Name: k.Name, Owner: id, Err: cause}
		if c.cfg.onLost != nil {
			c.cfg.onLost(ev)
		}
		if c.cfg.hooks.Lost != nil {
			c.cfg.hooks.Lost(ev)
		}
	}
}

// renew is the watchdog's renewer: one script call per batch (renew.lua
// for plain and write holds, renew_read.lua for read holds, which also
// extends their timeout keys), pipelined in chunks without WAIT, each batch
// retried while Redis refuses it or its reply is lost (renewal is
// idempotent) until ctx ends; with replica sync, syncRenewals then waits
// once per slot for the replicas (Redisson WAITs on each renewal call; a
// lagging replica here never delays a renewal).
func (c *Client) renew(ctx context.Context, kind hold.Kind, batches [][]hold.Key) []watchdog.Result {
	script := scripts.Renew
	if kind == kindRead {
		script = scripts.RenewRead
	}
	calls := make([]scripts.Call, len(batches))
	for i, b := range batches {
		per := 1
		if kind == kindRead {
			per = 2
		}
		keys := make([]string, 0, per*len(b))
		args := make([]string, len(b)+1)
		args[0] = c.eng.WatchdogMs
		for j, h := range b {
			keys = append(keys, h.Name)
			if kind == kindRead {
				keys = append(keys, names.ReadTimeoutPrefix(h.Name, h.Field))
			}
			args[j+1] = h.Field
		}
		calls[i] = scripts.Call{Keys: keys, Args: args}
	}
	out := make([]watchdog.Result, len(batches))
	pending := make([]int, len(batches))
	for i := range pending {
		pending[i] = i
	}
	if c.eng.X.Sync.Enabled {
		// Synced like Redisson's renewals, but after them, so that a
		// lagging replica never delays a renewal: one harmless write and
		// WAIT per slot covers every renewal before it.
		defer c.syncRenewals(ctx, batches)
	}
	var bo engine.Backoff
	for len(pending) > 0 {
		var retry []int
		c.renewOnce(ctx, script, calls, pending, out)
		for _, i := range pending {
			if out[i].Err != nil {
				retry = append(retry, i)
			}
		}
		pending = retry
		if len(pending) == 0 || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(bo.Next()):
		}
	}
	if h := c.cfg.hooks.Renew; h != nil {
		ev := RenewEvent{Kind: renewKind(kind)}
		for i, r := range out {
			switch {
			case r.Err != nil:
				ev.Failed += len(batches[i])
			default:
				for _, ok := range r.Renewed {
					if ok {
						ev.Renewed++
					} else {
						ev.Gone++
					}
				}
			}
		}
		h(ev)
	}
	return out
}

// syncRenewals waits for the replicas after a renewal round (one WAIT per
// slot, bounded by a quarter period), and logs the slots that no replica
// acknowledged. A renewal is idempotent and renewed again next period, so
// nothing else is done.
func (c *Client) syncRenewals(ctx context.Context, batches [][]hold.Key) {
	seen := make(map[uint16]bool)
	timeout := min(c.eng.X.Sync.Timeout, c.cfg.watchdogTimeout/12)
	for _, b := range batches {
		if len(b) == 0 || ctx.Err() != nil {
			continue
		}
		slot := names.Slot(b[0].Name)
		if seen[slot] {
			continue
		}
		seen[slot] = true
		acked, replicas, err := c.eng.X.ResyncTimeout(ctx, b[0].Name, engine.NewFence(b[0].Name), timeout)
		if err != nil || (replicas > 0 && acked == 0) {
			c.cfg.logger.Debug("rlock: renewals not acknowledged by any replica", "lock", b[0].Name, "replicas", replicas, "err", err)
		}
	}
}

// renewOnce sends the renewal calls idx once and fills their results.
func (c *Client) renewOnce(ctx context.Context, script *scripts.Script, calls []scripts.Call, idx []int, out []watchdog.Result) {
	set := func(i int, res rueidis.RedisResult, err error) {
		out[i] = watchdog.Result{}
		if err != nil {
			out[i].Err = err
			return
		}
		vals, err := res.AsIntSlice()
		if err == nil && len(vals) != len(calls[i].Args)-1 {
			err = fmt.Errorf("rlock: %s script returned %d results for %d holds", script, len(vals), len(calls[i].Args)-1)
		}
		if err != nil {
			out[i].Err = err
			return
		}
		out[i].Renewed = make([]bool, len(vals))
		for j, v := range vals {
			out[i].Renewed[j] = v == 1
		}
	}
	// Pipelined in chunks, so that a round cut short by its deadline keeps
	// the renewals that made it.
	const chunk = 64
	for lo := 0; lo < len(idx); lo += chunk {
		hi := min(lo+chunk, len(idx))
		if err := ctx.Err(); err != nil {
			for _, i := range idx[lo:] {
				out[i].Err = err
			}
			return
		}
		part := make([]scripts.Call, hi-lo)
		for k, i := range idx[lo:hi] {
			part[k] = calls[i]
		}
		for k, r := range script.ExecMulti(ctx, c.rc, part) {
			_, err := engine.Classify(ctx, r.Error())
			set(idx[lo+k], r, err)
		}
	}
}
