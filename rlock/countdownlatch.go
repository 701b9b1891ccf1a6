package rlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/goredisson/locks/internal/engine"
	"github.com/goredisson/locks/internal/names"
	"github.com/goredisson/locks/pubsub"
	"github.com/goredisson/locks/scripts"
)

// CountDownLatch is Redisson's RCountDownLatch (getCountDownLatch(name)):
// a count that services count down; Await returns once it reaches zero.
// The count is the string key name (deleted at zero); the channel is
// "redisson_countdownlatch__channel__{name}" (braces always), where "0"
// opens the latch and "1" announces a new count.
//
// As Redisson's, CountDown is not replica-synced; it is exact all the
// same: a call whose reply was lost is settled from Redis, never sent
// twice.
type CountDownLatch struct {
	c       *Client
	name    string
	err     error
	channel string
	record  string // this client's record key of it (engine.RecCall.Record)
}

// CountDownLatch returns the count-down latch called name.
func (c *Client) CountDownLatch(name string) *CountDownLatch {
	l := &CountDownLatch{c: c, name: name, channel: names.LatchChannel(name), record: names.Record(name, c.ID())}
	l.err = checkSyncName(name, c.cluster, l.channel)
	if l.err != nil && c.cluster && strings.Contains(name, "{") {
		// Redisson's latch channel wraps the name in braces whatever it
		// holds, so a hash tag in the name moves the channel's slot.
		l.err = fmt.Errorf("%w: %q: a count-down latch's channel %q wraps the name in braces (as Redisson's does), "+
			"so on a cluster a latch name must not contain '{' (Redisson's script fails there with CROSSSLOT)", ErrInvalidName, name, l.channel)
	}
	return l
}

// Name returns the latch's name, its Redis key.
func (l *CountDownLatch) Name() string { return l.name }

// TrySetCount sets the count to n (n >= 1) if the latch does not exist (it
// is deleted when its count reaches zero), and reports whether it did.
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	if n < 1 {
		return false, fmt.Errorf("%w: %q: a latch count must be at least 1, not %d", ErrInvalidArgument, l.name, n)
	}
	v, err := l.update(ctx, false, "tryset", strconv.FormatInt(n, 10))
	return v == 1, err
}

// CountDown decrements the count; at zero the latch is deleted and every
// awaiter of every Client and JVM is released. On a missing latch it does
// nothing.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	_, err := l.update(ctx, true, "countdown")
	return err
}

// Count returns the count (0 when the latch does not exist).
func (l *CountDownLatch) Count(ctx context.Context) (int64, error) {
	if l.err != nil {
		return 0, l.err
	}
	return l.c.getInt(ctx, l.name)
}

// Delete deletes the latch and reports whether it existed. As in
// Redisson, it does not release the awaiters: they wait on until a latch
// set again under the name reaches zero, or their ctx ends.
func (l *CountDownLatch) Delete(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	v, err := l.update(ctx, false, "delete")
	return v == 1, err
}

// Await waits until the count is zero (at once when the latch does not
// exist) or ctx ends, and then returns ctx's error. Awaiters wake on the
// "0" message; a lost message costs at most a second of latency.
func (l *CountDownLatch) Await(ctx context.Context) error {
	_, err := l.await(ctx, time.Time{})
	return err
}

// AwaitTimeout waits at most d for the count to reach zero and reports
// whether it did (Redisson's await(time, unit)).
func (l *CountDownLatch) AwaitTimeout(ctx context.Context, d time.Duration) (bool, error) {
	return l.await(ctx, time.Now().Add(max(d, 0)))
}

func (l *CountDownLatch) await(ctx context.Context, end time.Time) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	var seen uint64 // the message mark before the last read of a count > 0
	return l.c.eng.WaitLatch(ctx, l.name, l.channel, end, func(ctx context.Context, sub *pubsub.Sub) (bool, error) {
		var mark uint64
		if sub != nil {
			mark = sub.LatchMark()
		}
		n, err := l.c.getInt(ctx, l.name)
		if err != nil {
			return false, err
		}
		if n > 0 {
			seen = mark
			return false, nil
		}
		// Zero: open, unless the latch was deleted (or set again) since
		// the count was last seen above zero: a "1" came after that read
		// with no "0" since, and Redisson's awaiters wait on through a
		// delete. Without messages (a lost "0"), the re-check opens.
		return sub == nil || !sub.LatchShut(seen), nil
	})
}

func (l *CountDownLatch) update(ctx context.Context, noSync bool, op string, arg ...string) (int64, error) {
	args := append(append([]string{op}, arg...), l.c.eng.Publish)
	return l.c.recorded(ctx, &engine.RecCall{Script: scripts.LatchUpdate, Name: l.name, Record: l.record, Keys: []string{l.name, l.channel}, Args: args, NoSync: noSync, Redo: op == "countdown"}, op)
}
