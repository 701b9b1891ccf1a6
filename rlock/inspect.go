package rlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/owner"
)

// Holder is one owner field of a lock hash.
type Holder struct {
	ClientID string // the holder's client id (a Go Client's ID, or a Redisson instance's id)
	OwnerID  int64  // the goroutine, WithOwner id, or Java thread id
	Count    int    // its reentrancy count
	Field    string // the raw field, "<clientId>:<ownerId>" (":write" for a Redisson write lock)
}

// Info is what Redis says about a lock at one moment, for operators.
type Info struct {
	Name    string
	Locked  bool
	Holders []Holder      // normally zero or one
	Mode    string        // "read" or "write" for a Redisson read-write lock's hash, else empty
	TTL     time.Duration // as RemainTTL
	// Subscribers counts the connections subscribed to the lock's channel,
	// in this Client's pub/sub mode: each client process (Go or Java) with
	// waiters on this lock has one.
	Subscribers int64
}

// Inspect reads the lock's hash, TTL and channel subscribers in two round
// trips (the hash and TTL pipelined, then the keyless subscriber count,
// which a cluster client may send to another node). It works for locks
// held by any client, Go or Java.
func (l *base) Inspect(ctx context.Context) (Info, error) {
	if l.err != nil {
		return Info{}, l.err
	}
	rc := l.c.rc
	info := Info{Name: l.name}
	var fields map[string]string
	var ms int64
	// One retried read (one budget) for both round trips.
	err := l.c.read(ctx, func(ctx context.Context) (err error) {
		res := rc.DoMulti(ctx,
			rc.B().Hgetall().Key(l.name).Build(),
			rc.B().Pttl().Key(l.name).Build())
		if fields, err = res[0].AsStrMap(); err != nil {
			return err
		}
		if ms, err = res[1].AsInt64(); err != nil {
			return err
		}
		arr, err := rc.Do(ctx, l.numsub()).ToArray()
		if err == nil && len(arr) == 2 {
			info.Subscribers, _ = arr[1].AsInt64()
		}
		return err
	})
	if err != nil {
		return info, fmt.Errorf("rlock: %q: %w", l.name, err)
	}
	info.TTL = time.Duration(ms) * time.Millisecond
	info.Locked = ms != -2
	for f, v := range fields {
		if f == "mode" {
			// A Redisson read-write lock's hash also holds its mode
			// ("read"/"write"); it is not a holder.
			info.Mode = v
			continue
		}
		info.Holders = append(info.Holders, parseHolder(f, v))
	}
	return info, nil
}

// parseHolder splits "<clientId>:<ownerId>[:write]"; a field of another
// shape is returned with only Field and Count set.
func parseHolder(field, value string) Holder {
	h := Holder{Field: field}
	h.Count, _ = strconv.Atoi(value)
	h.ClientID, h.OwnerID, _ = owner.ParseField(field)
	return h
}

// numsub is the command that counts the subscribers of the lock's channel.
func (l *base) numsub() rueidis.Completed {
	rc := l.c.rc
	if l.c.PubSubSharded() {
		return rc.B().PubsubShardnumsub().Channel(l.spec.Channel).Build()
	}
	return rc.B().PubsubNumsub().Channel(l.spec.Channel).Build()
}
