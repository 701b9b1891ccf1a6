// Package pubsub shares one Redis subscription per channel among all the
// local waiters of a client, the way Redisson's LockPubSub does.
//
// A Hub subscribes to a channel when its first waiter arrives and
// unsubscribes when its last waiter leaves. Messages wake local waiters by
// the channel's kind. On the locks' channels "0" wakes exactly one waiter
// and "1" every waiter (keeping a wake for each share not waiting at that
// moment); a semaphore's channel ("redisson_sc:...") carries a number of
// permits n and wakes up to n waiters; a count-down latch's
// ("redisson_countdownlatch__channel__...") wakes every share on "0".
// Other payloads are ignored. A wake that arrives while nobody waits is
// kept as a permit, so the next Wait returns at once (one harmless extra
// attempt for the caller, never a missed unlock).
//
// Subscriptions ride on dedicated connections taken from rueidis'
// dedicated pool (ClientOption.BlockingPoolSize, 1024 by default), up to
// ChannelsPerConn channels each (on a cluster, channels of one hash slot
// share a connection). No UNSUBSCRIBE is ever sent, because rueidis panics
// when Redis answers one with -BUSY: a channel that ends stops being
// listened to, its subscription stays on the connection (its messages are
// dropped), and the connection is closed once no channel on it is
// listened to; a connection that served ChannelsPerConn channels takes no
// new ones. A channel whose last waiter leaves ends after the linger time
// (SetLinger; at once for a count-down latch's), still listened to until
// then, its messages waking nobody, so that a waiter coming back to it
// soon (the next contended Lock of a name, a fair lock's waiter on its own
// channel every time it waits) finds it subscribed and needs no SUBSCRIBE
// round trip. When a
// connection breaks, or the server drops a subscription (a sharded channel
// whose slot moved), its channels subscribe again on
// another connection and wake every waiter, since messages may have been
// lost in between. A SUBSCRIBE refused for the topology's sake (MOVED:
// the connection is bound to a node that no longer serves the slot;
// CLUSTERDOWN), or not confirmed within subscribeBound (rueidis resends
// some refusals on the same connection by itself), is sent again on a
// new connection after a short back-off; any other refusal (an ACL rule)
// fails Subscribe. Callers must still bound every wait (by the lock's
// TTL): a wake-up is a hint, never a guarantee.
package pubsub

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/names"
)

// ErrClosed is returned by Subscribe and Wait once the Hub is closed.
var ErrClosed = errors.New("pubsub: hub closed")

// ChannelsPerConn is how many channels one dedicated connection serves over
// its life (a rueidis connection costs about 1.4 MB of buffers).
const ChannelsPerConn = 64

// subscribeBound is how long a SUBSCRIBE may go unconfirmed before its
// connection is given up and the channel subscribes on a new one: a
// CLUSTERDOWN or TRYAGAIN reply is resent by rueidis on the same
// connection (bound to one node) for as long as it comes back.
const subscribeBound = 3 * time.Second

// probeEvery is how often, while any channel is subscribed, the Hub checks
// that its rueidis client was not closed underneath it (a dedicated
// connection does not learn of that by itself).
const probeEvery = time.Second

// DefaultLinger is how long a channel stays subscribed after its last
// waiter left (see SetLinger).
const DefaultLinger = time.Second

// Hub multiplexes channel subscriptions for one rueidis client. It is safe
// for concurrent use.
type Hub struct {
	client  rueidis.Client
	sharded bool
	cluster bool
	log     *slog.Logger

	mu      sync.Mutex
	entries map[string]*entry
	conns   map[uint16][]*conn // open connections by slot group (0 off a cluster)
	closed  bool
	probing bool
	wg      sync.WaitGroup

	gone     context.Context // cancelled once the rueidis client is found closed
	markGone context.CancelFunc
	stop     context.Context // cancelled by Close
	stopFn   context.CancelFunc

	parked atomic.Int64 // waiters inside Sub.Wait, for Parked
	count  atomic.Int64 // len(entries), read by Join without h.mu

	linger time.Duration // see SetLinger; guarded by mu
}

// SetLinger sets how long a channel stays subscribed after its last waiter
// left (DefaultLinger; 0: it goes at once). A Subscribe in that time shares
// the live subscription and returns without a round trip. A lingering
// channel keeps its connection open as a waiting one does, so the Hub's
// connections are those of the channels waited on within the linger time.
// A lingering channel whose connection breaks ends then, and a channel
// whose connection broke before its last waiter left does not linger. A
// count-down latch's channel never lingers.
func (h *Hub) SetLinger(d time.Duration) {
	h.mu.Lock()
	h.linger = max(d, 0)
	h.mu.Unlock()
}

// New returns a Hub that subscribes through client; with sharded it uses
// SSUBSCRIBE/SUNSUBSCRIBE (Redis 7 cluster), otherwise SUBSCRIBE/UNSUBSCRIBE.
// A nil logger discards logs.
func New(client rueidis.Client, sharded bool, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{client: client, sharded: sharded, log: log, entries: make(map[string]*entry), conns: make(map[uint16][]*conn), linger: DefaultLinger}
	h.cluster = client.Mode() == rueidis.ClientModeCluster
	h.gone, h.markGone = context.WithCancel(context.Background())
	h.stop, h.stopFn = context.WithCancel(context.Background())
	return h
}

// probe runs while channels are subscribed: a PING a second, to find out
// that the rueidis client was closed (it then answers ErrClosing at once).
func (h *Hub) probe() {
	defer h.wg.Done()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-h.stop.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		if len(h.entries) == 0 {
			h.probing = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(h.stop, probeEvery)
		err := h.client.Do(ctx, h.client.B().Ping().Build()).Error()
		cancel()
		if errors.Is(err, rueidis.ErrClosing) {
			h.markGone()
			return
		}
	}
}

// entry is one channel's subscription and its local waiters.
type entry struct {
	hub     *Hub
	channel string
	cancel  context.CancelFunc
	ready   chan struct{} // closed once subscribed, or when subscribing failed
	done    chan struct{} // closed when the receive loop has returned

	// guarded by hub.mu
	refs    int
	closing bool
	conn    *conn       // the connection of the current receive, if any
	idleAt  time.Time   // when refs last fell to 0 (it lingers: see SetLinger)
	idle    *time.Timer // ends a lingering entry; made on its first linger
	live    atomic.Bool // its SUBSCRIBE was confirmed once (ready, no error)

	policy policy // how a message wakes waiters, by the channel's kind

	mu        sync.Mutex // guards the fields below
	confirmed bool       // ready is closed
	subs      uint64     // confirmations of the channel's SUBSCRIBE so far
	err       error      // why subscribing failed; read after ready is closed
	permits   int
	waiters   []*Sub
	closed    bool
	// Latch policy: msgs counts the messages (and resyncs) so far; lastNew
	// is the number of the last "1" (a new count, or a delete), lastOpen
	// that of the last "0" or resync (messages may have been lost).
	msgs, lastNew, lastOpen uint64
}

// Sub is one waiter's share of a channel subscription. A Sub is used by one
// goroutine at a time.
type Sub struct {
	e    *entry
	wake chan struct{}
	done bool

	// A share that Join took on a lingering channel: when the channel
	// began to linger. Until the share waits (waited),
	// it leaves the linger as it found it: an acquisition that got in at
	// its first attempt does not keep a channel subscribed.
	lingered time.Time
	waited   atomic.Bool
}

// Subscribe returns a share of the subscription to channel, subscribing on
// the server if this is the first share. It returns once the server has
// confirmed the subscription, so a message published after Subscribe returns
// reaches the waiter. The caller must Release the Sub.
func (h *Hub) Subscribe(ctx context.Context, channel string) (*Sub, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, ErrClosed
		}
		e := h.entries[channel]
		if e != nil && e.closing {
			// The previous subscription is still being torn down; a new
			// SUBSCRIBE must not race its UNSUBSCRIBE on the connection.
			h.mu.Unlock()
			select {
			case <-e.done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if e == nil {
			e = h.start(channel)
		}
		e.refs++
		h.mu.Unlock()

		s := &Sub{e: e, wake: make(chan struct{}, 1)}
		select {
		case <-e.ready:
			if e.err != nil {
				s.Release()
				return nil, e.err
			}
			return s, nil
		case <-ctx.Done():
			s.Release()
			return nil, ctx.Err()
		}
	}
}

// Join returns a share of channel's subscription if the server has already
// confirmed it (another waiter holds a share, or it lingers after its last
// one), with no round trip; nil otherwise (then Subscribe). As with
// Subscribe, a message published after Join returns reaches the waiter: a
// waiter that joins before its first attempt need not attempt again
// before it waits. A count-down latch's channel is never joined (its
// awaiters read the channel's history from their own Subscribe on). The
// caller must Release the Sub.
func (h *Hub) Join(channel string) *Sub {
	if h.count.Load() == 0 {
		return nil // nothing subscribed: the uncontended path stays free
	}
	h.mu.Lock()
	e := h.entries[channel]
	if h.closed || e == nil || e.closing || !e.live.Load() || e.policy == latchPolicy {
		h.mu.Unlock()
		return nil
	}
	// While it lingered (no share) no message left a wake behind: the
	// joiner's first attempt sees whatever they were about. If its
	// connection broke meanwhile, this share keeps the entry, which
	// subscribes again and then wakes every share (resync).
	s := &Sub{e: e, wake: make(chan struct{}, 1)}
	if e.refs == 0 {
		s.lingered = e.idleAt
	}
	e.refs++
	h.mu.Unlock()
	return s
}

// start creates the entry for channel and its receive loop; h.mu is held.
func (h *Hub) start(channel string) *entry {
	ctx, cancel := context.WithCancel(context.Background())
	e := &entry{hub: h, channel: channel, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{}), policy: policyOf(channel)}
	h.entries[channel] = e
	h.count.Add(1)
	h.wg.Add(1)
	go e.run(ctx)
	if !h.probing {
		h.probing = true
		h.wg.Add(1)
		go h.probe()
	}
	return e
}

// Release gives the share back. After the last Release of a channel it
// lingers, still subscribed, for the Hub's linger time (see SetLinger), and
// then unsubscribes. Release is idempotent, and does nothing on a nil Sub.
func (s *Sub) Release() {
	if s == nil {
		return
	}
	h := s.e.hub
	e := s.e
	h.mu.Lock()
	if s.done {
		h.mu.Unlock()
		return
	}
	s.done = true
	if !e.release(s) {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	// It lingers: a wake kept for a share that has left is nobody's (the
	// next waiter's attempt, after its Subscribe, sees whatever the
	// message was about). Lock order: e.mu, then h.mu.
	e.mu.Lock()
	h.mu.Lock()
	if e.refs == 0 && !e.closing {
		e.permits = 0
	}
	h.mu.Unlock()
	e.mu.Unlock()
}

// release drops s's share and, for the last one, either lets the entry
// linger (reported true) or ends it; h.mu is held.
func (e *entry) release(s *Sub) (lingers bool) {
	h := e.hub
	e.refs--
	if e.refs > 0 || e.closing {
		return false
	}
	// A latch's channel does not linger: its awaiters read the channel's
	// history (LatchShut), which must begin with their own Subscribe.
	if h.linger <= 0 || h.closed || e.policy == latchPolicy || !e.live.Load() || e.conn == nil || e.conn.retired {
		e.closing = true
		e.cancel()
		return false
	}
	e.idleAt = time.Now()
	if !s.lingered.IsZero() && !s.waited.Load() {
		// Joined while it lingered and never waited: the linger goes
		// on from when it began.
		e.idleAt = s.lingered
	}
	d := h.linger - time.Since(e.idleAt)
	if d <= 0 {
		e.closing = true
		e.cancel()
		return false
	}
	if e.idle == nil {
		e.idle = time.AfterFunc(d, e.endLinger)
	} else {
		e.idle.Reset(d)
	}
	return true
}

// endLinger unsubscribes a channel that has had no share for the linger
// time.
func (e *entry) endLinger() {
	h := e.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.refs > 0 || e.closing {
		return // taken again (its next Release lingers anew), or going
	}
	if d := h.linger - time.Since(e.idleAt); d > 0 {
		e.idle.Reset(d) // it was taken and left again since
		return
	}
	e.closing = true
	e.cancel()
}

// Wait blocks until a message wakes this waiter, d elapses (d < 0: no time
// limit), or ctx ends. It reports whether it was woken; ctx's error or
// ErrClosed come back as errors.
func (s *Sub) Wait(ctx context.Context, d time.Duration) (bool, error) {
	e := s.e
	s.waited.Store(true)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false, ErrClosed
	}
	if e.permits > 0 {
		e.permits--
		e.mu.Unlock()
		return true, nil
	}
	e.waiters = append(e.waiters, s)
	e.mu.Unlock()
	e.hub.parked.Add(1)
	defer e.hub.parked.Add(-1)

	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case <-s.wake:
		return true, e.closedErr()
	case <-timeout:
	case <-ctx.Done():
		err = ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removeWaiter(s) {
		return false, err
	}
	// A wake was sent to us while we were giving up: take it.
	<-s.wake
	if err != nil && !e.closed {
		e.signalOne() // pass it on, we are leaving
		return false, err
	}
	if e.closed {
		return false, ErrClosed
	}
	return true, nil
}

// LatchMark returns a mark of the messages a count-down latch's channel
// has had so far, to take before reading the count.
func (s *Sub) LatchMark() uint64 {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.e.msgs
}

// LatchShut reports, on a count-down latch's channel, whether a "1" (the
// latch set again, or deleted) came after mark with no "0" and no resync
// since: a count of zero read then is a deleted latch, which Redisson's
// awaiters keep waiting on, not an opened one whose "0" was lost.
func (s *Sub) LatchShut(mark uint64) bool {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.e.lastNew > mark && s.e.lastOpen < s.e.lastNew
}

func (e *entry) closedErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	return nil
}

// removeWaiter drops s from the queue and reports whether it was there;
// e.mu is held.
func (e *entry) removeWaiter(s *Sub) bool {
	for i, w := range e.waiters {
		if w == s {
			copy(e.waiters[i:], e.waiters[i+1:])
			e.waiters[len(e.waiters)-1] = nil
			e.waiters = e.waiters[:len(e.waiters)-1]
			return true
		}
	}
	return false
}

// signalOne wakes the longest waiting waiter, or keeps a permit for the next
// one; e.mu is held.
func (e *entry) signalOne() {
	if len(e.waiters) > 0 {
		w := e.waiters[0]
		copy(e.waiters, e.waiters[1:])
		e.waiters[len(e.waiters)-1] = nil
		e.waiters = e.waiters[:len(e.waiters)-1]
		w.wake <- struct{}{}
		return
	}
	e.hub.mu.Lock()
	limit := e.refs
	e.hub.mu.Unlock()
	if e.permits < limit {
		e.permits++
	}
}

// wakeAllShares wakes every current waiter and keeps a wake for each
// other share, so that one about to wait returns at once; e.mu is held.
func (e *entry) wakeAllShares() {
	woken := len(e.waiters)
	e.signalAll()
	e.hub.mu.Lock()
	e.permits = max(e.permits, e.refs-woken)
	e.hub.mu.Unlock()
}

// signalAll wakes every current waiter; e.mu is held.
func (e *entry) signalAll() {
	for i, w := range e.waiters {
		w.wake <- struct{}{}
		e.waiters[i] = nil
	}
	e.waiters = e.waiters[:0]
}

// policy is how a channel's messages wake its waiters.
type policy uint8

const (
	// lockPolicy (the locks' channels): "0" wakes one waiter, "1" every
	// waiter (PROTOCOL.md 3.2).
	lockPolicy policy = iota
	// permitPolicy (the semaphores' "redisson_sc:" channels): a message
	// is a number of permits, n > 0 wakes up to n waiters, as Redisson's
	// SemaphorePubSub releases min(subscribers, n).
	permitPolicy
	// latchPolicy (the count-down latch's channel): "0" (the count
	// reached zero) wakes every waiter, and leaves a wake for each share
	// not waiting at that moment; "1" (a new count) wakes nobody.
	latchPolicy
)

func policyOf(channel string) policy {
	switch {
	case strings.HasPrefix(channel, names.SemaphorePrefix+":"):
		return permitPolicy
	case strings.HasPrefix(channel, names.LatchChannelPrefix):
		return latchPolicy
	}
	return lockPolicy
}

func (e *entry) onMessage(m rueidis.PubSubMessage) {
	switch e.policy {
	case permitPolicy:
		n, err := strconv.ParseInt(m.Message, 10, 64)
		if err != nil || n <= 0 {
			return
		}
		e.mu.Lock()
		e.hub.mu.Lock()
		limit := int64(e.refs)
		e.hub.mu.Unlock()
		for i := int64(0); i < min(n, limit); i++ {
			e.signalOne()
		}
		e.mu.Unlock()
	case latchPolicy:
		if m.Message == "1" {
			e.mu.Lock()
			e.msgs++
			e.lastNew = e.msgs
			e.mu.Unlock()
		}
		if m.Message != "0" {
			return
		}
		e.mu.Lock()
		e.msgs++
		e.lastOpen = e.msgs
		e.wakeAllShares()
		e.mu.Unlock()
	default:
		switch m.Message {
		case "0":
			e.mu.Lock()
			e.signalOne()
			e.mu.Unlock()
		case "1":
			// Every waiter, and a wake kept for each share not waiting at
			// this moment (one between its attempt and its Wait would
			// otherwise miss the message and sleep out the holder's TTL).
			e.mu.Lock()
			e.wakeAllShares()
			e.mu.Unlock()
		}
	}
}

// onSubscribed runs for every subscribe confirmation. The first one makes
// the entry ready; later ones follow a reconnect, after which messages may
// have been lost, so every waiter is woken to try again.
func (e *entry) onSubscribed() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.subs++
	e.live.Store(true)
	if !e.markReady(nil) {
		e.resync()
	}
}

// markReady closes ready with the subscription's outcome, once; it reports
// whether this call did it. e.mu is held.
func (e *entry) markReady(err error) bool {
	if e.confirmed {
		return false
	}
	e.confirmed = true
	e.err = err
	close(e.ready)
	return true
}

// resync wakes every waiter and leaves a permit for waiters about to wait;
// e.mu is held.
func (e *entry) resync() {
	e.msgs++
	e.lastOpen = e.msgs
	e.signalAll()
	e.hub.mu.Lock()
	e.permits = e.refs
	e.hub.mu.Unlock()
}

func (h *Hub) subscribeCmd(c rueidis.CommandClient, channel string) rueidis.Completed {
	if h.sharded {
		return c.B().Ssubscribe().Channel(channel).Build()
	}
	return c.B().Subscribe().Channel(channel).Build()
}

// run keeps the channel subscribed until the entry is cancelled. The
// subscription rides on a shared dedicated connection (see attach); no
// UNSUBSCRIBE is ever sent. rueidis (v1.0.79) panics in its reader
// goroutine when Redis answers an UNSUBSCRIBE with an error such as -BUSY
// (a script past busy-reply-threshold): ending this entry's Receive only
// drops its local handler, and closing the connection, once no channel on
// it is listened to, ends the subscriptions on the server.
func (e *entry) run(ctx context.Context) {
	h := e.hub
	defer h.wg.Done()
	defer close(e.done)
	defer e.cancel()
	defer func() {
		h.mu.Lock()
		if h.entries[e.channel] == e {
			delete(h.entries, e.channel)
			h.count.Add(-1)
		}
		if e.idle != nil {
			e.idle.Stop()
		}
		h.mu.Unlock()
	}()

	rctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if (s.Kind == "subscribe" || s.Kind == "ssubscribe") && s.Channel == e.channel {
			e.onSubscribed()
		}
	})
	// subscribed reports whether the SUBSCRIBE of the receive that began
	// when the entry had seen from confirmations was confirmed.
	subscribed := func(from uint64) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.subs > from
	}
	receive := func() (wasSubscribed bool, err error) {
		if h.gone.Err() != nil {
			return false, rueidis.ErrClosing
		}
		c := h.attach(e.channel)
		h.mu.Lock()
		e.conn = c
		h.mu.Unlock()
		e.mu.Lock()
		from := e.subs
		e.mu.Unlock()
		cctx, cancel := context.WithCancel(rctx)
		defer cancel()
		defer context.AfterFunc(h.gone, cancel)()
		defer context.AfterFunc(c.ctx, cancel)()
		// Unconfirmed for too long: end this Receive; the connection is
		// then retired (below), since its node keeps refusing.
		defer time.AfterFunc(subscribeBound, func() {
			if !subscribed(from) {
				cancel()
			}
		}).Stop()
		err = c.dc.Receive(cctx, h.subscribeCmd(c.dc, e.channel), e.onMessage)
		// Ended by this entry's cancel, or the server refused this
		// channel's SUBSCRIBE (an ACL rule): the connection is fine. Ended
		// any other way (the connection broke, a sibling's did, the server
		// dropped the subscription): no channel may stay on it.
		e.mu.Lock()
		confirmed := e.confirmed
		e.mu.Unlock()
		h.mu.Lock()
		e.conn = nil
		h.mu.Unlock()
		h.detach(c, ctx.Err() == nil && !(refusedForGood(err) && !confirmed))
		if h.gone.Err() != nil {
			return false, rueidis.ErrClosing
		}
		return subscribed(from), err
	}
	const firstBackoff = 50 * time.Millisecond
	backoff := firstBackoff
	for {
		wasSubscribed, err := receive()
		if wasSubscribed {
			backoff = firstBackoff // it worked until now: try again soon
		}
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		if e.refs == 0 && !e.closing {
			// It was lingering: nobody needs it subscribed again.
			e.closing = true
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		e.mu.Lock()
		confirmed := e.confirmed
		e.mu.Unlock()
		if errors.Is(err, rueidis.ErrClosing) {
			// The rueidis client was closed under us: nothing will work
			// again. Fail the subscribers and wake the waiters.
			h.mu.Lock()
			e.closing = true
			h.mu.Unlock()
			e.mu.Lock()
			e.markReady(err)
			e.closed = true
			e.signalAll()
			e.mu.Unlock()
			return
		}
		if refusedForGood(err) && !confirmed {
			// The server refused the subscription itself (unknown command,
			// ACL): report it to the subscribers rather than retry forever.
			h.mu.Lock()
			e.closing = true
			h.mu.Unlock()
			e.mu.Lock()
			e.markReady(err)
			e.mu.Unlock()
			return
		}
		h.log.Debug("pubsub: subscription ended, subscribing again", "channel", e.channel, "err", err)
		if confirmed {
			e.mu.Lock()
			e.resync()
			e.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// refusedForGood reports whether err is the server's refusal of a
// SUBSCRIBE that asking again will not change (an unknown command, an ACL
// rule). MOVED (the slot moved to another shard: the connection is bound
// to its old node) and CLUSTERDOWN are the topology's state, as are ASK,
// TRYAGAIN and LOADING, which Redis 7 does not send a SSUBSCRIBE but
// another server might: the connection goes and the channel subscribes
// again, on a connection rueidis picks from its slot map (a MOVED reply
// makes rueidis refresh it).
func refusedForGood(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	if _, moved := re.IsMoved(); moved {
		return false
	}
	if _, ask := re.IsAsk(); ask {
		return false
	}
	return !re.IsTryAgain() && !re.IsClusterDown() && !re.IsLoading()
}

// conn is a dedicated connection shared by up to ChannelsPerConn channels.
type conn struct {
	group   uint16
	dc      rueidis.DedicatedClient
	release func()
	ctx     context.Context // cancelled when the connection must go: every Receive on it ends
	cancel  context.CancelFunc
	used    int // channels it took, over its life
	active  int // receive loops on it now
	retired bool
}

// attach returns a connection for channel, counting one receive loop on
// it: an open one of its group with room, or a new one.
func (h *Hub) attach(channel string) *conn {
	var group uint16
	if h.cluster && h.sharded {
		// A dedicated cluster connection serves one slot; a classic
		// SUBSCRIBE has none, so any connection will do.
		group = names.Slot(channel)
	}
	take := func() *conn { // h.mu is held
		for _, c := range h.conns[group] {
			if !c.retired && c.used < ChannelsPerConn {
				c.used++
				c.active++
				return c
			}
		}
		return nil
	}
	h.mu.Lock()
	if c := take(); c != nil {
		h.mu.Unlock()
		return c
	}
	h.mu.Unlock()
	// Not under h.mu: Dedicate may dial, or wait for the dedicated pool.
	dc, release := h.client.Dedicate()
	h.mu.Lock()
	if c := take(); c != nil { // another channel opened one meanwhile
		h.mu.Unlock()
		dc.Close()
		release()
		return c
	}
	c := &conn{group: group, dc: dc, release: release, used: 1, active: 1}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	h.conns[group] = append(h.conns[group], c)
	h.mu.Unlock()
	return c
}

// detach ends one receive loop on c; broken retires c (its other loops
// end and subscribe elsewhere). The last loop closes the connection.
func (h *Hub) detach(c *conn, broken bool) {
	h.mu.Lock()
	c.active--
	if broken || c.used >= ChannelsPerConn {
		c.retired = true
	}
	if broken {
		c.cancel()
	}
	last := c.active == 0
	if last {
		list := h.conns[c.group]
		for i, x := range list {
			if x == c {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(h.conns, c.group)
		} else {
			h.conns[c.group] = list
		}
	}
	h.mu.Unlock()
	if last {
		c.cancel()
		c.dc.Close() // before release: release would unsubscribe
		c.release()
	}
}

// Conns returns the number of dedicated connections the Hub holds.
func (h *Hub) Conns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.conns {
		n += len(l)
	}
	return n
}

// Stats returns the number of channels this Hub is subscribed to (those
// tearing down included), how many of them have no share (lingering after
// their last one, see SetLinger, or tearing down), and the number of shares
// (Subs) held on them.
func (h *Hub) Stats() (channels, lingering, subs int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.entries {
		subs += e.refs
		if e.refs == 0 {
			lingering++
		}
	}
	return len(h.entries), lingering, subs
}

// Parked returns the number of waiters parked in Wait, waiting for a
// message (a waiter between its attempt and its Wait is not counted).
func (h *Hub) Parked() int { return int(h.parked.Load()) }

// Close unsubscribes every channel, wakes every waiter with ErrClosed and
// waits for the receive loops to end. Further Subscribes fail with ErrClosed.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.wg.Wait()
		return
	}
	h.closed = true
	h.stopFn()
	entries := make([]*entry, 0, len(h.entries))
	for _, e := range h.entries {
		entries = append(entries, e)
		e.closing = true
		e.cancel()
	}
	h.mu.Unlock()
	for _, e := range entries {
		e.mu.Lock()
		e.closed = true
		e.signalAll()
		e.markReady(ErrClosed)
		e.mu.Unlock()
	}
	h.wg.Wait()
}
