package rlock

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/goredisson/locks/internal/engine"
)

// SpinLock is Redisson's spin lock (getSpinLock, PROTOCOL.md 6): the RLock's
// data on the same key, but no pub/sub at all. A waiter polls with a
// back-off between attempts (by default Redisson's exponential back-off:
// 1ms doubling to 128ms, with a little jitter), and Unlock and ForceUnlock
// publish nothing. Use it where pub/sub is unwelcome; the price is up to
// one back-off step of latency at each hand-off, and Redis load from every
// waiter's polling.
//
// A Java RLock waiter on the same name gets no message from a SpinLock's
// unlock: it tries again when the holder's TTL runs out (at most the
// watchdog timeout later). A SpinLock waiter notices a plain lock's unlock
// at its next attempt.
//
// Not fair: no queue; whichever waiter's attempt comes first after the
// unlock gets the lock, so a waiter that has backed off longest may be
// passed by a newer one (TestRedissonFamily/*/SpinLock,
// TestFaultMatrix/spin).
type SpinLock struct{ base }

// SpinOption configures a SpinLock.
type SpinOption func(*spinConfig) error

type spinConfig struct {
	exp                    bool
	initial, max, constant time.Duration
	multiplier             int
}

// WithExponentialBackOff sets the spin lock's back-off to Redisson's
// ExponentialBackOff: the first sleep is initial, each next one
// min(max, previous*multiplier + rand[0, attempts)) milliseconds, then max
// for good. Redisson's defaults are 1ms, 128ms and 2.
func WithExponentialBackOff(initial, max time.Duration, multiplier int) SpinOption {
	return func(c *spinConfig) error {
		if initial < time.Millisecond || max < initial || multiplier < 1 {
			return fmt.Errorf("%w: exponential back-off (initial %v, max %v, multiplier %d): want 1ms <= initial <= max and multiplier >= 1",
				ErrInvalidArgument, initial, max, multiplier)
		}
		*c = spinConfig{exp: true, initial: initial, max: max, multiplier: multiplier}
		return nil
	}
}

// WithConstantBackOff sets the spin lock's back-off to Redisson's
// ConstantBackOff: every sleep is d (Redisson's default 64ms).
func WithConstantBackOff(d time.Duration) SpinOption {
	return func(c *spinConfig) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: constant back-off %v is below 1ms", ErrInvalidArgument, d)
		}
		*c = spinConfig{constant: d}
		return nil
	}
}

// SpinLock returns the spin lock called name (Redisson's
// getSpinLock(name), or getSpinLock(name, backOff) with an option). It is
// cheap and does no I/O; an invalid name or option is reported by its
// methods.
func (c *Client) SpinLock(name string, opts ...SpinOption) *SpinLock {
	l := &SpinLock{c.newBase(name, KindSpinLock)}
	l.forcePub = false // Redisson's forceUnlock is a bare DEL
	cfg := spinConfig{exp: true, initial: time.Millisecond, max: 128 * time.Millisecond, multiplier: 2}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil && l.err == nil {
			l.err = err
		}
	}
	if l.err == nil {
		l.spec = c.lockSpec(name, lockVariant{spin: func() engine.BackOff {
			if !cfg.exp {
				return constantBackOff(cfg.constant)
			}
			return &expBackOff{next: cfg.initial, max: cfg.max, mul: cfg.multiplier}
		}})
	}
	return l
}

type constantBackOff time.Duration

func (c constantBackOff) Next() time.Duration { return time.Duration(c) }

// expBackOff is Redisson's ExponentialBackOffPolicy.
type expBackOff struct {
	next, max time.Duration
	mul       int
	fails     int
}

func (b *expBackOff) Next() time.Duration {
	if b.next >= b.max {
		return b.max
	}
	d := b.next
	b.fails++
	// next*mul+jitter capped at max, without overflowing (max and mul may
	// be as large as their types allow).
	jitter := time.Duration(rand.IntN(b.fails)) * time.Millisecond
	if b.next > (b.max-jitter)/time.Duration(b.mul) {
		b.next = b.max
	} else {
		b.next = min(b.max, b.next*time.Duration(b.mul)+jitter)
	}
	return d
}
