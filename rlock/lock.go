package rlock

import (
	"time"

	"github.com/goredisson/locks/internal/engine"
	"github.com/goredisson/locks/scripts"
)

// TTL values returned by RemainTTL, as Redis' PTTL reports them.
const (
	TTLNotLocked = -2 * time.Millisecond // the lock key does not exist
	TTLNoExpiry  = -1 * time.Millisecond // the key exists without an expiry
)

// Lock is a reentrant distributed lock. At most one owner holds it at a
// time, among every Client and every Java Redisson service on the same
// Redis, as long as the holder's lease lives on the Redis master (see the
// package doc's guarantees and limits); an owner may take it again while it
// holds it, and must then unlock as many times. The hold ends at the
// owner's last [Lock.Unlock], when its lease runs out (a fixed lease, or a
// watchdog lease the Client could not renew), or at a [Lock.ForceUnlock];
// [Lock.HoldContext] tells the holder. No order among waiters is promised
// ([FairLock] gives one).
//
// Its format is Redisson's RLock: a Redis hash named after the lock whose
// one field, "<clientId>:<ownerId>", counts the owner's nested
// acquisitions. A Java service that calls redisson.getLock(name) on the
// same Redis sees and respects it, and the other way round.
//
// A Lock is safe for use by many goroutines at once. The owner of each call
// is the calling goroutine, or the id set with [WithOwner] on its context.
type Lock struct{ base }

// lockVariant selects the plain lock's relatives that share its data.
type lockVariant struct {
	spin         func() engine.BackOff // the spin lock: no pub/sub
	fenced       bool                  // the fenced lock: INCR the token key
	nonReentrant bool
}

// lockSpec describes the plain lock's scripts (and those of the spin,
// fenced and non-reentrant locks, PROTOCOL.md 6-8) to the engine.
func (c *Client) lockSpec(name string, v lockVariant) *engine.Spec {
	channel := ChannelName(name)
	publish := c.eng.Publish
	if v.spin != nil {
		publish = "" // a spin lock never publishes
	}
	flag := ""
	if v.nonReentrant {
		flag = "n"
	}
	token := ""
	if v.fenced {
		token = TokenName(name)
	}
	return &engine.Spec{
		Kind:     kindLock,
		Name:     name,
		Channel:  channel,
		Spin:     v.spin,
		TokenKey: token,
		Acquire:  scripts.Acquire,
		AcquireKeys: func(dst []string, _, fence string) []string {
			if token != "" {
				return append(dst, name, token, fence)
			}
			return append(dst, name, fence)
		},
		AcquireArgs: func(dst []string, a engine.Attempt) []string {
			dst = append(dst, a.LeaseMs, a.Field, a.Expected, engine.FenceTTLArg())
			if flag != "" {
				dst = append(dst, flag)
			}
			return dst
		},
		Unlock:     scripts.Unlock,
		UnlockKeys: func(dst []string, _, fence string) []string { return append(dst, name, channel, fence) },
		UnlockArgs: func(dst []string, field, leaseMs, expected string) []string {
			return append(dst, "0", leaseMs, field, publish, expected, engine.FenceTTLArg())
		},
	}
}
