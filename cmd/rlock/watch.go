package main

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/rlock"
)

const watchHelp = `Usage: rlock watch [flags] NAME...

Prints the state of each NAME, then a line for each change, until interrupted
(SIGINT, SIGTERM or SIGHUP end it with exit code 0). Every kind that status
recognises is followed: a lock's holders and counts, a read-write lock's mode
and readers, a fair lock's queue, a fenced lock's token, a semaphore's
available and acquired permits, a latch's count. Lines go to stdout:

  2026-08-21T10:00:00.123+02:00 NAME held by <client id>:<owner id> count 1 ttl 29.9s
  2026-08-21T10:00:04.567+02:00 NAME free (deleted)
  2026-08-21T10:00:05.000+02:00 NAME semaphore: 2 permits available, 1 acquired

After "free" comes the reason when keyspace notifications tell it: deleted
(unlocked or force-unlocked), expired, evicted or renamed. TTL renewals and
lease updates are not changes. Changes faster than one read may be seen as
one.

rlock follows the keyspace notifications of NAME and of its companion keys
(the fair lock's queue and timeouts, the fenced lock's token, the permits'
expiries) when the server's notify-keyspace-events includes K and the classes
g, $, l, h, z, x and e (for example "KEA"), and then also re-reads every 10s
as a safety net. Otherwise it polls every --interval, and says so on stderr.
It does not change the server's configuration unless --enable-notifications is
given. In a Redis Cluster, where notifications are per node, it always polls.

Flags:
  --enable-notifications  if notify-keyspace-events lacks what watch needs, add it
                          with CONFIG SET (the setting stays after rlock exits)
  --poll                  poll, even if keyspace notifications are available
  --interval D            polling period (default 200ms)

` + globalFlagsHelp + `
Exit codes: 0 interrupted, 64 usage error, 69 cannot reach Redis.
`

// safetyPoll is the re-read period when keyspace notifications drive watch.
const safetyPoll = 10 * time.Second

func cmdWatch(g *globals, args []string) int {
	fs := newFlagSet("watch")
	enable := fs.Bool("enable-notifications", false, "")
	poll := fs.Bool("poll", false, "")
	interval := durationValue{d: 200 * time.Millisecond}
	fs.Var(&interval, "interval", "")
	pos, after, _, code, done := g.parseCommand("watch", watchHelp, fs, args)
	if done {
		return code
	}
	names := append(pos, after...)
	if code, ok := g.checkNames("watch", names); !ok {
		return code
	}
	if interval.d <= 0 {
		return g.usageError("watch", "--interval %v is not positive", interval.d)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	c, code := g.connect("watch")
	if c == nil {
		return code
	}
	defer c.close()
	for _, name := range names {
		// A name no read can ever serve would be polled for ever.
		if err := clusterName(c, name); err != nil {
			g.errorf("%v", err)
			return exitUsage
		}
	}

	w := &watcher{
		g:        g,
		c:        c,
		names:    names,
		interval: interval.d,
		last:     make(map[string]string),
		lastErr:  make(map[string]string),
		freed:    make(map[string]freeing),
		poke:     make(chan struct{}, 1),
	}
	return w.run(ctx, *poll, *enable)
}

type watcher struct {
	g        *globals
	c        *conn
	names    []string
	interval time.Duration

	last    map[string]string // the last state printed, by name
	lastErr map[string]string // the last error printed, by name

	notifying bool // keyspace notifications drive the reads

	mu    sync.Mutex
	freed map[string]freeing // the last del/expired/... event not yet reported, by name
	seq   uint64             // numbers the freeing events
	poke  chan struct{}      // a notification arrived: read again
}

// freeing is a keyspace event that freed a lock.
type freeing struct {
	reason string // how a "free" line words it
	seq    uint64
}

func (w *watcher) run(ctx context.Context, forcePoll, enable bool) int {
	period := w.interval
	var failed chan error
	if forcePoll {
		w.g.note("watching by polling every %v (--poll)", w.interval)
	} else if reason := w.notificationsUsable(ctx, enable); reason != "" {
		if ctx.Err() != nil {
			return exitOK
		}
		w.g.note("watching by polling every %v: %s", w.interval, reason)
	} else {
		var subscribed chan struct{}
		subscribed, failed = w.subscribe(ctx)
		select {
		case <-ctx.Done():
			return exitOK
		case <-subscribed:
			period = safetyPoll
			w.notifying = true
			chans, _ := w.channels()
			w.g.note("watching via keyspace notifications (%s)", strings.Join(chans, " "))
		case err := <-failed:
			w.g.note("watching by polling every %v: cannot subscribe to keyspace notifications: %v", w.interval, err)
			failed = nil
		case <-time.After(10 * time.Second):
			w.g.note("watching by polling every %v: no confirmation of the keyspace subscription yet", w.interval)
		}
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		w.readAll(ctx)
		select {
		case <-ctx.Done():
			return exitOK
		case <-w.poke:
		case <-tick.C:
		case err := <-failed:
			failed = nil
			w.g.note("keyspace subscription failed (%v): polling every %v", err, w.interval)
			w.notifying = false
			tick.Reset(w.interval)
		}
	}
}

// notificationsUsable says why keyspace notifications cannot be used ("" if
// they can), enabling them first if enable.
func (w *watcher) notificationsUsable(ctx context.Context, enable bool) string {
	rc := w.c.rc
	if rc.Mode() == rueidis.ClientModeCluster {
		return "keyspace notifications are per node in a Redis Cluster"
	}
	cctx, cancel := opCtx(ctx)
	defer cancel()
	m, err := rc.Do(cctx, rc.B().ConfigGet().Parameter("notify-keyspace-events").Build()).AsStrMap()
	if err != nil {
		return fmt.Sprintf("cannot read notify-keyspace-events (%v)", err)
	}
	cur := m["notify-keyspace-events"]
	missing := missingClasses(cur)
	if missing == "" {
		return ""
	}
	if !enable {
		return fmt.Sprintf("notify-keyspace-events is %q and lacks %q (use --enable-notifications to add them with CONFIG SET)", cur, missing)
	}
	set := cur + missing
	if err := rc.Do(cctx, rc.B().ConfigSet().ParameterValue().ParameterValue("notify-keyspace-events", set).Build()).Error(); err != nil {
		return fmt.Sprintf("cannot set notify-keyspace-events to %q (%v)", set, err)
	}
	w.g.note("set notify-keyspace-events to %q (was %q)", set, cur)
	return ""
}

// missingClasses returns the flags watch needs that the
// notify-keyspace-events value v lacks: K (keyspace events), and the
// classes g (generic: del, expire), $ (string: semaphores, latches,
// tokens), l (list: a fair queue), h (hash: locks), z (sorted set: fair
// timeouts, permits), x (expired) and e (evicted), which "A" includes.
func missingClasses(v string) string {
	var missing strings.Builder
	if !strings.Contains(v, "K") {
		missing.WriteByte('K')
	}
	if strings.Contains(v, "A") {
		return missing.String()
	}
	for _, c := range "g$lhzxe" {
		if !strings.ContainsRune(v, c) {
			missing.WriteRune(c)
		}
	}
	return missing.String()
}

// channels returns the keyspace channels of every name's keys, and the
// name each belongs to. The name's own channel comes first: only its events
// free the name.
func (w *watcher) channels() ([]string, map[string]string) {
	prefix := "__keyspace@" + strconv.Itoa(w.c.opt.SelectDB) + "__:"
	var chans []string
	byChannel := make(map[string]string)
	for _, n := range w.names {
		for _, k := range []string{n, rlock.FairQueueName(n), rlock.FairTimeoutName(n), rlock.TokenName(n), rlock.PermitTimeoutName(n)} {
			if _, dup := byChannel[prefix+k]; !dup {
				chans = append(chans, prefix+k)
				byChannel[prefix+k] = n
			}
		}
	}
	return chans, byChannel
}

// subscribe subscribes to the keyspace channels of the names in the
// background, until ctx ends. subscribed is closed once every channel is
// confirmed; failed receives the error if Redis refuses the subscription.
// Every (re)confirmation and every event pokes the watcher to read again.
func (w *watcher) subscribe(ctx context.Context) (subscribed chan struct{}, failed chan error) {
	chans, byChannel := w.channels()
	prefix := "__keyspace@" + strconv.Itoa(w.c.opt.SelectDB) + "__:"
	subscribed = make(chan struct{})
	failed = make(chan error, 1)
	var (
		once      sync.Once
		confirmMu sync.Mutex
		confirmed = make(map[string]bool)
	)
	hctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind != "subscribe" {
			return
		}
		confirmMu.Lock()
		confirmed[s.Channel] = true
		all := len(confirmed) == len(chans)
		confirmMu.Unlock()
		if all {
			once.Do(func() { close(subscribed) })
		}
		w.wake()
	})
	rc := w.c.rc
	go func() {
		for {
			err := rc.Receive(hctx, rc.B().Subscribe().Channel(chans...).Build(), func(m rueidis.PubSubMessage) {
				if name, ok := byChannel[m.Channel]; ok && m.Channel == prefix+name && freeingEvents[m.Message] != "" {
					w.mu.Lock()
					w.seq++
					w.freed[name] = freeing{reason: freeingEvents[m.Message], seq: w.seq}
					w.mu.Unlock()
				}
				w.wake()
			})
			if ctx.Err() != nil {
				return
			}
			var re *rueidis.RedisError
			if errors.As(err, &re) {
				failed <- err
				return
			}
			w.g.note("keyspace subscription interrupted (%v); subscribing again", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return subscribed, failed
}

func (w *watcher) wake() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// freeingEvents are the keyspace events that free a lock, and how a "free"
// line words them.
var freeingEvents = map[string]string{
	"del":         "deleted",
	"expired":     "expired",
	"evicted":     "evicted",
	"rename_from": "renamed",
}

// freeWait bounds the wait for the event that freed a lock, when a read
// sees it free before that event has arrived on the subscription.
const freeWait = 250 * time.Millisecond

// readAll reads every lock and prints the ones whose state changed.
func (w *watcher) readAll(ctx context.Context) {
	for _, name := range w.names {
		w.mu.Lock()
		before := w.seq
		w.mu.Unlock()
		cctx, cancel := opCtx(ctx)
		o, err := inspect(cctx, w.c, name)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if msg := err.Error(); w.lastErr[name] != msg {
				w.g.errorf("%s: cannot read the lock: %v", name, err)
				w.lastErr[name] = msg
			}
			continue
		}
		delete(w.lastErr, name)
		state := stateKey(o)
		if !o.freeLock() {
			// A freeing event that arrived before this read belongs to the
			// past; one that arrived since may be about to show.
			w.forgetFreed(name, before)
		}
		prev, seen := w.last[name]
		if seen && prev == state {
			continue
		}
		w.last[name] = state
		reason := ""
		if o.freeLock() && seen {
			reason = w.takeFreed(name)
			if reason == "" && w.notifying {
				reason = w.awaitFreed(ctx, name)
			}
		}
		fmt.Fprintf(w.g.stdout, "%s %s %s\n", time.Now().Format("2006-01-02T15:04:05.000Z07:00"), name, stateLine(o, reason))
	}
}

func (w *watcher) takeFreed(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.freed[name]
	delete(w.freed, name)
	return f.reason
}

// forgetFreed drops name's freeing event if it is numbered up to seq.
func (w *watcher) forgetFreed(name string, seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.freed[name]; ok && f.seq <= seq {
		delete(w.freed, name)
	}
}

// awaitFreed waits (at most freeWait) for the keyspace event that freed
// name, which can arrive on the subscription after a read saw the lock free,
// and returns its wording ("" if none came). It pokes the watcher
// afterwards, as it consumed the pokes of other events.
func (w *watcher) awaitFreed(ctx context.Context, name string) string {
	defer w.wake()
	timer := time.NewTimer(freeWait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ""
		case <-timer.C:
			return ""
		case <-w.poke:
			if r := w.takeFreed(name); r != "" {
				return r
			}
		}
	}
}

// stateKey identifies a name's state for change detection: its kind, its
// holders and their counts, mode, queue, token, counter and permit ids
// (not the TTL or the permits' expiries, which renewals change all the
// time).
func stateKey(o object) string {
	if o.Kind == kindFree {
		return "free"
	}
	var b strings.Builder
	b.WriteString(o.Kind + ";" + o.Mode + ";")
	for _, h := range o.Holders {
		fmt.Fprintf(&b, "%s=%d;", h.Field, h.Count)
	}
	if o.held() && o.TTL == rlock.TTLNoExpiry {
		b.WriteString("noexpiry;")
	}
	for _, q := range o.Queue {
		b.WriteString("q=" + q.Field + ";")
	}
	if o.Token != nil {
		fmt.Fprintf(&b, "token=%d;", *o.Token)
	}
	if o.Value != nil {
		fmt.Fprintf(&b, "value=%d;", *o.Value)
	}
	for _, p := range o.Permits {
		b.WriteString("p=" + p.ID + ";")
	}
	return b.String()
}

func stateLine(o object, reason string) string {
	switch o.Kind {
	case kindFree:
		if reason != "" {
			return "free (" + reason + ")"
		}
		return "free"
	case kindSemaphore, kindPermits, kindLatch, kindCounter:
		return o.Kind + ": " + o.summary()
	case kindOther:
		return o.summary()
	}
	var b strings.Builder
	if !o.held() {
		b.WriteString("free")
		if reason != "" {
			b.WriteString(" (" + reason + ")")
		}
	} else {
		parts := make([]string, len(o.Holders))
		for i, h := range o.Holders {
			parts[i] = fmt.Sprintf("%s count %d", h.Field, h.Count)
		}
		ttl := "ttl " + formatTTL(o.TTL, 100*time.Millisecond)
		if o.TTL == rlock.TTLNoExpiry {
			ttl = "no ttl"
		}
		b.WriteString("held by " + strings.Join(parts, ", ") + " " + ttl)
	}
	if o.Mode != "" {
		b.WriteString(" mode " + o.Mode)
	}
	if len(o.Queue) > 0 {
		q := make([]string, len(o.Queue))
		for i, w := range o.Queue {
			q[i] = w.Field
		}
		b.WriteString(" queue " + strings.Join(q, ", "))
	}
	if o.Token != nil {
		fmt.Fprintf(&b, " token %d", *o.Token)
	}
	return b.String()
}
