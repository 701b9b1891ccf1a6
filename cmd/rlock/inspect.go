package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/internal/owner"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// The kinds of object status, watch and run recognise under a name. A spin
// lock and a non-reentrant lock keep the plain lock's format, and a fair
// lock with nobody queued looks like a plain lock too: all show as "lock".
const (
	kindFree      = "free"
	kindLock      = "lock"
	kindFair      = "fair lock"
	kindRW        = "read-write lock"
	kindFenced    = "fenced lock"
	kindSemaphore = "semaphore"
	kindPermits   = "permit-expirable semaphore"
	kindLatch     = "count-down latch"
	kindCounter   = "semaphore or count-down latch" // a counter nobody waits on: either
	kindOther     = "other"                         // not a Redisson object
)

// noExpiryScore is the expiry score of a permit that never expires
// (Redisson's marker).
const noExpiryScore = 922337203685477

// waiter is one entry of a fair lock's queue.
type waiter struct {
	rlock.Holder           // Field, ClientID, OwnerID (Count unused)
	Deadline     time.Time // until when its place is reserved; zero if none
}

// permit is one acquired permit of a permit-expirable semaphore.
type permit struct {
	ID      string    // 32 hex characters, as Java shows it
	Expires time.Time // zero: never
}

// object is what Redis holds under one name, read atomically (the inspect
// script) with the subscriber counts of its channels.
type object struct {
	Name    string
	Kind    string
	Type    string // the Redis TYPE of the name
	Holders []rlock.Holder
	Mode    string        // a read-write lock's "read" or "write"
	TTL     time.Duration // rlock.TTLNotLocked, rlock.TTLNoExpiry or the PTTL
	Queue   []waiter
	Token   *int64 // a fenced lock's last token
	Value   *int64 // a semaphore's available permits, a latch's count
	Permits []permit
	Raw     string // a string value that is not a number
	ReadAt  time.Time

	// Subscribers per channel kind: each is one client process (Go or
	// Java) with waiters.
	LockSubs, RWSubs, SemSubs, LatchSubs int64
}

// held reports whether a lock kind is held.
func (o object) held() bool { return len(o.Holders) > 0 }

// freeLock reports whether o is a lock kind (or nothing) that nobody holds.
func (o object) freeLock() bool {
	switch o.Kind {
	case kindFree, kindLock, kindFair, kindRW, kindFenced:
		return !o.held()
	}
	return false
}

// subscribers counts the client processes waiting on the kind's channel.
func (o object) subscribers() int64 {
	switch o.Kind {
	case kindRW:
		return o.RWSubs
	case kindSemaphore, kindPermits:
		return o.SemSubs
	case kindLatch:
		return o.LatchSubs
	case kindCounter:
		return o.SemSubs + o.LatchSubs
	case kindFree:
		return o.LockSubs + o.RWSubs
	}
	return o.LockSubs
}

// inspect reads name in two round trips: the inspect script (one atomic
// snapshot of the name and its companion keys), then the keyless
// subscriber counts, which a cluster client may send to another node.
func inspect(ctx context.Context, c *conn, name string) (object, error) {
	rc := c.rc
	o := object{Name: name}
	keys := append([]string{name}, companionKeys(name)...)
	chans := []string{rlock.ChannelName(name), rlock.RWLockChannelName(name), rlock.SemaphoreChannelName(name), rlock.LatchChannelName(name)}
	if err := clusterName(c, name); err != nil {
		return o, err
	}
	res := scripts.Inspect.Exec(ctx, rc, keys, nil)
	o.ReadAt = time.Now()
	arr, err := res.ToArray()
	if err != nil {
		return o, fmt.Errorf("%q: %w", name, err)
	}
	if len(arr) != 8 {
		return o, fmt.Errorf("%q: inspect replied %d elements, want 8", name, len(arr))
	}
	subs, err := subscribers(ctx, c, chans)
	if err != nil {
		return o, fmt.Errorf("%q: %w", name, err)
	}
	o.LockSubs, o.RWSubs, o.SemSubs, o.LatchSubs = subs[chans[0]], subs[chans[1]], subs[chans[2]], subs[chans[3]]

	o.Type, _ = arr[0].ToString()
	hash, _ := arr[1].AsStrMap()
	value := optString(arr[2])
	ms, _ := arr[3].AsInt64()
	o.TTL = time.Duration(ms) * time.Millisecond
	queue, _ := arr[4].AsStrSlice()
	timeouts := scoreMap(arr[5])
	if tok := optString(arr[6]); tok != nil {
		if n, err := strconv.ParseInt(*tok, 10, 64); err == nil {
			o.Token = &n
		}
	}
	for _, m := range scored(arr[7]) {
		p := permit{ID: hex.EncodeToString([]byte(m.member))}
		if m.score != noExpiryScore {
			p.Expires = time.UnixMilli(m.score)
		}
		o.Permits = append(o.Permits, p)
	}
	for f, v := range hash {
		if f == "mode" {
			o.Mode = v
			continue
		}
		o.Holders = append(o.Holders, parseHolder(f, v))
	}
	sort.Slice(o.Holders, func(i, j int) bool { return o.Holders[i].Field < o.Holders[j].Field })
	for _, f := range queue {
		w := waiter{Holder: parseHolder(f, "0")}
		if s, ok := timeouts[f]; ok {
			w.Deadline = time.UnixMilli(s)
		}
		o.Queue = append(o.Queue, w)
	}
	if value != nil {
		if n, err := strconv.ParseInt(*value, 10, 64); err == nil {
			o.Value = &n
		} else {
			o.Raw = *value
		}
	}

	switch o.Type {
	case "none":
		switch {
		case len(o.Permits) > 0:
			o.Kind = kindPermits // every permit acquired: no counter left
		case len(o.Queue) > 0:
			o.Kind = kindFair // between a hand-off's unlock and its grant
		case o.Token != nil:
			o.Kind = kindFenced
		default:
			o.Kind = kindFree
		}
	case "hash":
		switch {
		case !lockShaped(o):
			o.Kind = kindOther // an application's hash: never a DEL
		case o.Mode != "":
			o.Kind = kindRW
		case len(o.Queue) > 0:
			o.Kind = kindFair
		case o.Token != nil:
			o.Kind = kindFenced
		default:
			o.Kind = kindLock
		}
	case "string":
		switch {
		case o.Value == nil:
			o.Kind = kindOther
		case len(o.Permits) > 0:
			o.Kind = kindPermits
		case o.SemSubs > 0 && o.LatchSubs == 0:
			o.Kind = kindSemaphore
		case o.LatchSubs > 0 && o.SemSubs == 0:
			o.Kind = kindLatch
		default:
			o.Kind = kindCounter
		}
	default:
		o.Kind = kindOther
	}
	return o, nil
}

// companionKeys are the keys beside the name that inspect reads: the fair
// lock's queue and reservations, the fenced lock's token, the permit
// timeouts.
func companionKeys(name string) []string {
	return []string{rlock.FairQueueName(name), rlock.FairTimeoutName(name), rlock.TokenName(name), rlock.PermitTimeoutName(name)}
}

// clusterName checks, on a cluster, that the keys inspect reads share the
// name's slot: one script reads them all, which a name with "{" but no
// usable hash tag breaks (and rueidis panics on a cross-slot command).
func clusterName(c *conn, name string) error {
	if c.rc.Mode() != rueidis.ClientModeCluster {
		return nil
	}
	for _, k := range companionKeys(name) {
		if names.Slot(k) != names.Slot(name) {
			return fmt.Errorf("%w: %q: its keys would fall in different cluster slots; a name containing '{' must carry a complete, non-empty hash tag such as \"{user42}:cart\"", rlock.ErrInvalidName, name)
		}
	}
	return nil
}

// subscribers counts each channel's subscribers: one PUBSUB NUMSUB, or in
// sharded mode one PUBSUB SHARDNUMSUB per slot (a latch's channel, always
// braced, may hash apart from the others).
func subscribers(ctx context.Context, c *conn, chans []string) (map[string]int64, error) {
	rc := c.rc
	if !c.locks.PubSubSharded() {
		return rc.Do(ctx, rc.B().PubsubNumsub().Channel(chans...).Build()).AsIntMap()
	}
	bySlot := map[uint16][]string{}
	var slots []uint16
	for _, ch := range chans {
		s := names.Slot(ch)
		if bySlot[s] == nil {
			slots = append(slots, s)
		}
		bySlot[s] = append(bySlot[s], ch)
	}
	cmds := make(rueidis.Commands, len(slots))
	for i, s := range slots {
		cmds[i] = rc.B().PubsubShardnumsub().Channel(bySlot[s]...).Build()
	}
	out := map[string]int64{}
	for _, r := range rc.DoMulti(ctx, cmds...) {
		m, err := r.AsIntMap()
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			out[k] = v
		}
	}
	return out, nil
}

// lockShaped reports whether a hash looks like one of Redisson's locks: a
// read-write lock's mode, if any, is "read" or "write", and at least one
// field is an owner field ("<client id>:<owner id>[:write]" with a UUID
// client id, as every Redisson and rlock client writes), except in a
// read-write lock left with its mode alone. Anything else is someone
// else's data, which unlock --force must not delete.
func lockShaped(o object) bool {
	if o.foreignMode() {
		return false
	}
	if len(o.Holders) == 0 {
		return o.Mode != ""
	}
	for _, h := range o.Holders {
		if len(h.ClientID) == 36 && uuid.Validate(h.ClientID) == nil {
			return true
		}
	}
	return false
}

// foreignMode reports a mode field no read-write lock writes.
func (o object) foreignMode() bool { return o.Mode != "" && o.Mode != "read" && o.Mode != "write" }

// parseHolder splits "<clientId>:<ownerId>[:write]"; a field of another
// shape is returned with only Field and Count set.
func parseHolder(field, value string) rlock.Holder {
	h := rlock.Holder{Field: field}
	h.Count, _ = strconv.Atoi(value)
	h.ClientID, h.OwnerID, _ = owner.ParseField(field)
	return h
}

func optString(m rueidis.RedisMessage) *string {
	s, err := m.ToString()
	if err != nil {
		return nil // false (nil) in the script's reply
	}
	return &s
}

type member struct {
	member string
	score  int64
}

// scored reads a flat member, score, ... array.
func scored(m rueidis.RedisMessage) []member {
	arr, _ := m.ToArray()
	var out []member
	for i := 0; i+1 < len(arr); i += 2 {
		name, err1 := arr[i].ToString()
		s, err2 := arr[i+1].ToString()
		f, err3 := strconv.ParseFloat(s, 64)
		if err1 == nil && err2 == nil && err3 == nil {
			out = append(out, member{name, int64(f)})
		}
	}
	return out
}

func scoreMap(m rueidis.RedisMessage) map[string]int64 {
	out := map[string]int64{}
	for _, e := range scored(m) {
		out[e.member] = e.score
	}
	return out
}

// holderText words one holder: "client <id> owner <n>", or the raw field.
func holderText(h rlock.Holder) string {
	if h.ClientID == "" {
		return fmt.Sprintf("field %q", h.Field)
	}
	return "client " + h.ClientID + " owner " + strconv.FormatInt(h.OwnerID, 10)
}

// holdersPhrase names a lock's holders in one phrase:
// "client <id> owner <n> (count 1)".
func holdersPhrase(o object) string {
	if len(o.Holders) == 0 {
		return "nobody"
	}
	parts := make([]string, len(o.Holders))
	for i, h := range o.Holders {
		parts[i] = fmt.Sprintf("%s (count %d)", holderText(h), h.Count)
	}
	return strings.Join(parts, ", ")
}

// until words the time from now to t ("in 4.2s", "2s ago").
func until(t, now time.Time) string {
	d := t.Sub(now).Round(100 * time.Millisecond)
	if d < 0 {
		return (-d).String() + " ago"
	}
	return "in " + d.String()
}

// plural words n things.
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

// summary is the one-line state of o, without its name: what a wait
// status line and "not obtained" say about it.
func (o object) summary() string {
	switch o.Kind {
	case kindSemaphore, kindPermits, kindCounter:
		s := plural(o.available(), "permit", "permits") + " available"
		if len(o.Permits) > 0 {
			s += fmt.Sprintf(", %d acquired", len(o.Permits))
			if next, ok := o.nextExpiry(); ok {
				s += ", the next expires " + until(next, o.ReadAt)
			}
		}
		return s
	case kindLatch:
		return "count " + strconv.FormatInt(o.available(), 10)
	case kindOther:
		if o.Type == "hash" && o.foreignMode() {
			return fmt.Sprintf("not a Redisson lock or synchronizer (a Redis hash whose mode %q is no read-write lock's)", o.Mode)
		}
		if o.Type == "hash" {
			return "not a Redisson lock or synchronizer (a Redis hash with no Redisson owner field)"
		}
		return "not a Redisson lock or synchronizer (a Redis " + o.Type + ")"
	}
	if !o.held() {
		return "free"
	}
	s := "held by " + holdersPhrase(o)
	if o.Mode != "" {
		s += ", mode " + o.Mode
	}
	s += ", ttl " + formatTTL(o.TTL, 100*time.Millisecond)
	if len(o.Queue) > 0 {
		s += fmt.Sprintf(", %d queued", len(o.Queue))
	}
	return s
}

// available is a counter's value (0 when absent).
func (o object) available() int64 {
	if o.Value == nil {
		return 0
	}
	return *o.Value
}

// nextExpiry is the earliest expiry among the acquired permits.
func (o object) nextExpiry() (time.Time, bool) {
	var next time.Time
	for _, p := range o.Permits {
		if !p.Expires.IsZero() && (next.IsZero() || p.Expires.Before(next)) {
			next = p.Expires
		}
	}
	return next, !next.IsZero()
}
