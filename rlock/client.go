package rlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

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
	unlockAttempts             = 4
)

type config struct {
	watchdogTimeout     time.Duration
	batchSize           int
	logger              *slog.Logger
	pubsub              PubSubMode
	commandTimeout      time.Duration
	subscriptionTimeout time.Duration
	onLost              func(LostEvent)
	maxHold             time.Duration
	sync                *replicaSync // nil: the default for the topology
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

// WithCommandTimeout bounds each script call made under a context that can
// end (default 3s, Redisson's timeout). Script calls do not end with the
// caller's context: an acquire whose reply is still on its way when the
// context ends is awaited and undone, so an abandoned wait never leaves a
// hold behind. Calls under a context that can never end (such as
// context.Background()) are bounded by rueidis' connection timeouts
// (ClientOption.ConnWriteTimeout) instead.
func WithCommandTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: command timeout %v is not positive", ErrInvalidArgument, d)
		}
		c.commandTimeout = d
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

// LostEvent describes a hold that ended without its owner's Unlock.
type LostEvent struct {
	Name  string // the lock name
	Owner int64  // the owner id
	Err   error  // wraps ErrLockLost, and the cause
}

// WithLostHandler sets a function called (on the watchdog's goroutine; keep
// it short) for every watchdog hold that is lost, for logging and metrics.
// HoldContext gives the same news to the code doing the work.
func WithLostHandler(fn func(LostEvent)) Option {
	return func(c *config) error {
		c.onLost = fn
		return nil
	}
}

// Client makes locks that share one rueidis client, one client id, one
// pub/sub hub and one watchdog. It is safe for concurrent use. Create one
// per process (per "service"), like a RedissonClient.
type Client struct {
	rc      rueidis.Client
	id      string
	cfg     config
	cluster bool
	publish string // "PUBLISH" or "SPUBLISH"

	hub    *pubsub.Hub
	wd     *watchdog.Watchdog
	holds  holdRegistry
	leases leaseBook

	watchdogMs string
	latchTTLs  []string
	fields     [256]atomic.Pointer[ownerField]

	latches   chan string
	stopBg    chan struct{}
	bgDone    chan struct{}
	closed    atomic.Bool
	closeOnce sync.Once
}

// New returns a Client that locks through rc, whatever its topology
// (standalone, sentinel or cluster). rc stays the caller's: Close does not
// close it. In PubSubAuto mode on a cluster, New asks the server whether it
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
		rc:         rc,
		id:         uuid.NewString(),
		cfg:        cfg,
		cluster:    mode == rueidis.ClientModeCluster,
		watchdogMs: strconv.FormatInt(cfg.watchdogTimeout.Milliseconds(), 10),
		latchTTLs:  latchTTLs(cfg.commandTimeout),
		latches:    make(chan string, 4096),
		stopBg:     make(chan struct{}),
		bgDone:     make(chan struct{}),
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
				if _, isRedis := rueidis.IsRedisErr(err); !isRedis {
					return nil, fmt.Errorf("rlock: probing sharded pub/sub support: %w", err)
				}
			}
			sharded = err == nil
		}
	}
	c.publish = "PUBLISH"
	if sharded {
		c.publish = "SPUBLISH"
	}
	c.hub = pubsub.New(rc, sharded, cfg.logger)
	var slot func(string) uint16
	if c.cluster {
		slot = Slot
	}
	wd, err := watchdog.New(watchdog.Config{
		Timeout:   cfg.watchdogTimeout,
		BatchSize: cfg.batchSize,
		Slot:      slot,
		MaxHold:   cfg.maxHold,
		Renew:     c.renew,
		OnLost:    c.onLost,
		Logger:    cfg.logger,
	})
	if err != nil {
		return nil, err
	}
	c.wd = wd
	go c.deleteLatches()
	return c, nil
}

// ID returns the client id: a random lowercase v4 UUID, the first half of
// every owner field this client writes ("<id>:<ownerId>").
func (c *Client) ID() string { return c.id }

// PubSubSharded reports whether this client uses sharded pub/sub.
func (c *Client) PubSubSharded() bool { return c.publish == "SPUBLISH" }

// Close stops every renewal (the locks this client holds then expire after
// their lease), drops every subscription, wakes every waiter with ErrClosed
// and cancels every HoldContext. It does not unlock and does not close the
// rueidis client. Close is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.wd.Close()
		c.hub.Close()
		c.holds.closeAll(ErrClosed)
		close(c.stopBg)
		<-c.bgDone
	})
	return nil
}

// Stats is a snapshot of a Client's activity.
type Stats struct {
	Subscriptions int // channels subscribed to (one per lock name waited on)
	Waiters       int // calls waiting for a lock
	Renewing      int // holds the watchdog renews
}

// Stats returns a snapshot of the client's subscriptions, waiters and
// renewed holds.
func (c *Client) Stats() Stats {
	ch, subs := c.hub.Stats()
	return Stats{Subscriptions: ch, Waiters: subs, Renewing: c.wd.Len()}
}

// Lock returns the lock called name, like Redisson's getLock(name): the
// name is the Redis key, with no prefix. It is cheap and does no I/O. An
// invalid name is reported by the Lock's methods.
func (c *Client) Lock(name string) *Lock {
	l := &Lock{c: c, name: name, err: checkName(name, c.cluster)}
	if l.err == nil {
		l.keys = []string{name}
		l.channel = ChannelName(name)
		l.forceKeys = []string{name, l.channel}
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

// cmdCtx returns a context for one script call: not ended by the caller's
// cancellation (a reply already on its way must be read), bounded by the
// command timeout. A context that can never end is used as it is, so the
// common case allocates nothing; such calls are bounded by rueidis' own
// connection timeouts.
func (c *Client) cmdCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, noop
	}
	return context.WithTimeout(context.WithoutCancel(ctx), c.cfg.commandTimeout)
}

func noop() {}

// renew is the watchdog's Renew: one pipelined script call per batch.
func (c *Client) renew(ctx context.Context, batches [][]watchdog.Hold) []watchdog.Result {
	calls := make([]scripts.Call, len(batches))
	for i, b := range batches {
		keys := make([]string, len(b))
		args := make([]string, len(b)+1)
		args[0] = c.watchdogMs
		for j, h := range b {
			keys[j] = h.Key
			args[j+1] = h.Field
		}
		calls[i] = scripts.Call{Keys: keys, Args: args}
	}
	// Pipelined in chunks, so that a round cut short by its deadline keeps
	// the renewals that made it.
	const chunk = 64
	out := make([]watchdog.Result, len(batches))
	for lo := 0; lo < len(calls); lo += chunk {
		hi := min(lo+chunk, len(calls))
		if err := ctx.Err(); err != nil {
			for i := lo; i < len(calls); i++ {
				out[i].Err = err
			}
			break
		}
		for k, r := range scripts.Renew.ExecMulti(ctx, c.rc, calls[lo:hi]) {
			i := lo + k
			vals, err := r.AsIntSlice()
			if err == nil && len(vals) != len(batches[i]) {
				err = fmt.Errorf("rlock: renew script returned %d results for %d keys", len(vals), len(batches[i]))
			}
			if err != nil {
				out[i].Err = err
				continue
			}
			out[i].Renewed = make([]bool, len(vals))
			for j, v := range vals {
				out[i].Renewed[j] = v == 1
			}
		}
	}
	return out
}

func (c *Client) onLost(h watchdog.Hold, cause error, at time.Time) {
	err := fmt.Errorf("%w: %q: %w", ErrLockLost, h.Key, cause)
	c.holds.fireBefore(h, err, at)
	if c.cfg.onLost != nil {
		owner, _ := strconv.ParseInt(h.Field[len(c.id)+1:], 10, 64)
		c.cfg.onLost(LostEvent{Name: h.Key, Owner: owner, Err: err})
	}
}

// latchTTL is the unlock latch's lifetime in ms, Redisson 4.x's formula:
// (timeout + a retry delay in [1s, 2s]) * retry attempts, so it outlives
// every retry of the unlock that wrote it. The delay is drawn from 11 steps
// precomputed in New.
func (c *Client) latchTTL() string { return c.latchTTLs[rand.IntN(len(c.latchTTLs))] }

func latchTTLs(timeout time.Duration) []string {
	out := make([]string, 11)
	for i := range out {
		delay := time.Second + time.Duration(i)*100*time.Millisecond
		out[i] = strconv.FormatInt(((timeout + delay) * unlockAttempts).Milliseconds(), 10)
	}
	return out
}

// appendRequestID appends a fresh unlock request id: 32 lowercase hex
// characters from 128 random bits.
func appendRequestID(b []byte) []byte {
	const hexdigits = "0123456789abcdef"
	for range 2 {
		v := rand.Uint64()
		for range 16 {
			b = append(b, hexdigits[v&15])
			v >>= 4
		}
	}
	return b
}

// requestID returns a fresh unlock request id.
func requestID() string { return string(appendRequestID(make([]byte, 0, 32))) }

// deleteLatches deletes unlock latches once their unlock has returned, as
// Redisson does after each unlock. The DELs are gathered for up to
// latchFlush (or latchBatch keys) and sent as one multi-key DEL per slot: a
// latch is useless once its unlock returned, so a few milliseconds' delay
// costs nothing, and it spares Redis a command per unlock. A latch whose
// DEL is lost expires by itself.
func (c *Client) deleteLatches() {
	defer close(c.bgDone)
	const latchFlush, latchBatch = 5 * time.Millisecond, 256
	batch := make([]string, 0, latchBatch)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		var cmds rueidis.Commands
		if c.cluster {
			bySlot := make(map[uint16][]string)
			for _, k := range batch {
				bySlot[Slot(k)] = append(bySlot[Slot(k)], k)
			}
			for _, keys := range bySlot {
				cmds = append(cmds, c.rc.B().Del().Key(keys...).Build())
			}
		} else {
			cmds = rueidis.Commands{c.rc.B().Del().Key(batch...).Build()}
		}
		for _, r := range c.rc.DoMulti(context.Background(), cmds...) {
			if err := r.Error(); err != nil {
				c.cfg.logger.Debug("rlock: deleting unlock latches", "err", err)
			}
		}
		clear(batch)
		batch = batch[:0]
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case k := <-c.latches:
			if len(batch) == 0 {
				timer.Reset(latchFlush)
			}
			batch = append(batch, k)
			if len(batch) == latchBatch {
				timer.Stop()
				flush()
			}
		case <-timer.C:
			flush()
		case <-c.stopBg:
			timer.Stop()
			for {
				select {
				case k := <-c.latches:
					batch = append(batch, k)
					if len(batch) == latchBatch {
						flush()
					}
				default:
					flush()
					return
				}
			}
		}
	}
}

// dropLatch queues the DEL of an unlock latch; if the queue is full the
// latch is left to expire.
func (c *Client) dropLatch(key string) {
	if c.closed.Load() {
		return
	}
	select {
	case c.latches <- key:
	default:
	}
}

// isRetryable reports whether err is a failed round trip (the command may
// or may not have run), as opposed to a reply from Redis. A nil reply is a
// reply: rueidis.IsRedisErr does not count it, so it is checked first.
func isRetryable(err error) bool {
	if err == nil || rueidis.IsRedisNil(err) {
		return false
	}
	if _, isRedis := rueidis.IsRedisErr(err); isRedis {
		return false
	}
	return !errors.Is(err, rueidis.ErrClosing)
}

// leaseBook remembers the explicit lease of each hold taken with one: the
// TTL a partial unlock restores, Redisson's internalLockLeaseTime. Holds
// without an entry use the watchdog timeout. Redisson keeps this per Java
// RLock object; keeping it per hold gives the same answer when one object
// is used, and the right one when Go code calls Client.Lock(name) anew for
// each use.
type leaseBook struct {
	n  atomic.Int64 // entries; lets the watchdog-only path skip the mutex
	mu sync.Mutex
	m  map[watchdog.Hold]int64
}

func (b *leaseBook) set(h watchdog.Hold, ms int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = make(map[watchdog.Hold]int64)
	}
	if _, ok := b.m[h]; !ok {
		b.n.Add(1)
	}
	b.m[h] = ms
}

func (b *leaseBook) get(h watchdog.Hold) (int64, bool) {
	if b.n.Load() == 0 {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ms, ok := b.m[h]
	return ms, ok
}

func (b *leaseBook) clear(h watchdog.Hold) {
	if b.n.Load() == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[h]; ok {
		delete(b.m, h)
		b.n.Add(-1)
	}
}

func (b *leaseBook) clearKey(key string) {
	if b.n.Load() == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for h := range b.m {
		if h.Key == key {
			delete(b.m, h)
			b.n.Add(-1)
		}
	}
}
