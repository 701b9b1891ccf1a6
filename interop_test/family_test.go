package interop_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

const suiteFamily = "TestRedissonFamily"

// TestRedissonFamily runs the read-write, fenced, spin and non-reentrant
// lock scenarios against every Redisson version, each as Go/Java,
// Java/Go and Java/Java: TestRedissonFamily/<version>/<Scenario>/<pair>.
func TestRedissonFamily(t *testing.T) {
	versions := mustHaveDeps(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			f := newFixture(t, v)
			t.Run("ReadersShare", f.testReadersShare)
			t.Run("WriterExcludes", f.testWriterExcludes)
			t.Run("ReentrantReadWrite", f.testReentrantReadWrite)
			t.Run("WriterReads", f.testWriterReads)
			t.Run("LastReadUnlockWakesWriter", f.testLastReadUnlockWakesWriter)
			t.Run("WriteUnlockWakesReaders", f.testWriteUnlockWakesReaders)
			t.Run("ReadWatchdog", f.testReadWatchdog)
			t.Run("ReadWriteForceUnlock", f.testReadWriteForceUnlock)
			t.Run("FencedTokens", f.testFencedTokens)
			t.Run("SpinLock", f.testSpinLock)
			if atLeast(v, "4.4.0") {
				t.Run("NonReentrant", f.testNonReentrant)
			}
			t.Run("FairFIFO", f.testFairFIFO)
			t.Run("FairWaiterTimeout", f.testFairWaiterTimeout)
			t.Run("FairKilledWaiter", f.testFairKilledWaiter)
			if atLeast(v, "4.4.0") {
				t.Run("FairNonReentrant", f.testFairNonReentrant)
			}
			t.Run("FairNameMapper", f.testFairNameMapper)
		})
	}
	logSummary(t, suiteFamily)
}

// testReadersShare: readers of both sides hold at once, and each side
// sees the lock read-locked.
func (f *fixture) testReadersShare(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		ra, rb := a.actor(1), b.actor(1)
		require.NoError(t, ra.lock(ctx, kindRead, name))
		ok := want(t).B(rb.tryLock(ctx, kindRead, name, -1, 0))
		require.True(t, ok, "%s's reader must share with %s's", b, a)
		for _, x := range []actor{ra, rb} {
			assert.True(t, want(t).B(x.isLocked(ctx, kindRead, name)), "%s: read-locked", x)
			assert.False(t, want(t).B(x.isLocked(ctx, kindWrite, name)), "%s: not write-locked", x)
			assert.Equal(t, 1, want(t).I(x.holdCount(ctx, kindRead, name)))
		}
		assert.Equal(t, "read", hgetall(t, f.raw, name)["mode"])
		assert.Len(t, hgetall(t, f.raw, name), 3, "mode and one field per reader")
		require.NoError(t, ra.unlock(ctx, kindRead, name))
		assert.True(t, want(t).B(rb.isLocked(ctx, kindRead, name)), "one reader left")
		require.NoError(t, rb.unlock(ctx, kindRead, name))
		assert.Empty(t, hgetall(t, f.raw, name))
	})
}

// testWriterExcludes: a writer of either side keeps the other's readers
// and writers out, and readers keep the other's writer out (and a reader
// cannot upgrade).
func (f *fixture) testWriterExcludes(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		wa, xb := a.actor(1), b.actor(1)
		require.NoError(t, wa.lock(ctx, kindWrite, name))
		assert.False(t, want(t).B(xb.tryLock(ctx, kindRead, name, -1, 0)), "%s read while %s writes", b, a)
		assert.False(t, want(t).B(xb.tryLock(ctx, kindWrite, name, -1, 0)), "%s wrote while %s writes", b, a)
		assert.False(t, want(t).B(xb.tryLock(ctx, kindRead, name, 200*time.Millisecond, 0)))
		assert.True(t, want(t).B(xb.isLocked(ctx, kindWrite, name)))
		assert.True(t, notHeld(xb.unlock(ctx, kindWrite, name)), "a non-owner's write unlock")
		require.NoError(t, wa.unlock(ctx, kindWrite, name))

		require.NoError(t, wa.lock(ctx, kindRead, name))
		assert.False(t, want(t).B(xb.tryLock(ctx, kindWrite, name, -1, 0)), "%s wrote while %s reads", b, a)
		assert.False(t, want(t).B(wa.tryLock(ctx, kindWrite, name, -1, 0)), "no upgrade")
		require.NoError(t, wa.unlock(ctx, kindRead, name))
		assert.True(t, want(t).B(xb.tryLock(ctx, kindWrite, name, -1, 0)))
		require.NoError(t, xb.unlock(ctx, kindWrite, name))
	})
}

// testReentrantReadWrite: a two-deep read (and write) hold is one hold for
// the other side until the second unlock.
func (f *fixture) testReentrantReadWrite(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		xa, xb := a.actor(1), b.actor(1)
		for _, k := range []kind{kindRead, kindWrite} {
			require.NoError(t, xa.lock(ctx, k, name))
			require.NoError(t, xa.lockLease(ctx, k, name, 20*time.Second))
			assert.Equal(t, 2, want(t).I(xa.holdCount(ctx, k, name)))
			require.NoError(t, xa.unlock(ctx, k, name))
			assert.False(t, want(t).B(xb.tryLock(ctx, kindWrite, name, -1, 0)), "%s got the write lock after one of %s's two %s unlocks", b, a, k)
			require.NoError(t, xa.unlock(ctx, k, name))
			assert.Zero(t, want(t).I(xa.holdCount(ctx, k, name)))
			assert.True(t, want(t).B(xb.tryLock(ctx, kindWrite, name, -1, 0)))
			require.NoError(t, xb.unlock(ctx, kindWrite, name))
		}
	})
}

// testWriterReads: a writer takes the read lock and unlocks in either
// order; releasing the write first leaves a read hold (a downgrade) that
// lets the other side read but not write.
func (f *fixture) testWriterReads(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		xa, xb := a.actor(1), b.actor(1)
		for _, writeFirst := range []bool{true, false} {
			require.NoError(t, xa.lock(ctx, kindWrite, name))
			require.True(t, want(t).B(xa.tryLock(ctx, kindRead, name, -1, 0)), "the writer may read")
			if !b.java() || atLeast(f.version, "3.24.0") {
				// Before 3.24.0 Java's read isLocked is mode == "read".
				assert.True(t, want(t).B(xb.isLocked(ctx, kindRead, name)), "%s sees a read hold", b)
			}
			assert.False(t, want(t).B(xb.tryLock(ctx, kindRead, name, -1, 0)), "%s reads while %s writes", b, a)
			if writeFirst {
				require.NoError(t, xa.unlock(ctx, kindWrite, name))
				assert.Equal(t, "read", hgetall(t, f.raw, name)["mode"])
				assert.False(t, want(t).B(xb.tryLock(ctx, kindWrite, name, -1, 0)))
				require.True(t, want(t).B(xb.tryLock(ctx, kindRead, name, -1, 0)), "after the downgrade %s may read", b)
				require.NoError(t, xb.unlock(ctx, kindRead, name))
				require.NoError(t, xa.unlock(ctx, kindRead, name))
			} else {
				require.NoError(t, xa.unlock(ctx, kindRead, name))
				assert.True(t, want(t).B(xb.isLocked(ctx, kindWrite, name)))
				require.NoError(t, xa.unlock(ctx, kindWrite, name))
			}
			assert.Empty(t, hgetall(t, f.raw, name))
		}
	})
}

// testLastReadUnlockWakesWriter: readers on side a, a writer of side b
// waiting; the first read unlock keeps it out, the last wakes it promptly.
func (f *fixture) testLastReadUnlockWakesWriter(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		r1, r2, w := a.actor(1), a.actor(2), b.actor(1)
		ch := rlock.RWLockChannelName(name)
		require.NoError(t, r1.lock(ctx, kindRead, name))
		require.NoError(t, r2.lock(ctx, kindRead, name))
		before := b.waiters(t, ch)
		waiter := w.lockAsync(ctx, kindWrite, name)
		waitNewWaiter(t, b, ch, before)
		watch := f.watch(t, ch)
		published := publishCount(t, f)
		require.NoError(t, r1.unlock(ctx, kindRead, name))
		assert.Equal(t, published, publishCount(t, f), "the first read unlock published")
		require.False(t, waiter.finished(), "the writer got in while a reader held")
		start := time.Now()
		require.NoError(t, r2.unlock(ctx, kindRead, name))
		waiter.wait(t, promptly)
		require.NoError(t, waiter.err)
		// The first read unlock woke nobody: the channel's first message
		// is the last read unlock's.
		assert.False(t, watch.waitMessage(t, promptly).at.Before(start), "the first read unlock published a wake-up")
		measure(t, suiteFamily, f.version, "last read unlock ("+a.String()+") -> writer ("+b.String()+")", waiter.at.Sub(start))
		assert.Equal(t, 1, want(t).I(w.holdCount(ctx, kindWrite, name)))
		require.NoError(t, w.unlock(ctx, kindWrite, name))
	})
}

// testWriteUnlockWakesReaders: a write unlock (message "1") wakes every
// waiting reader of the other side at once.
func (f *fixture) testWriteUnlockWakesReaders(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		w := a.actor(1)
		ch := rlock.RWLockChannelName(name)
		require.NoError(t, w.lock(ctx, kindWrite, name))
		var readers []*call
		var actors []actor
		for i := 1; i <= 3; i++ {
			r := b.actor(i)
			before := b.waiters(t, ch)
			readers = append(readers, r.lockAsync(ctx, kindRead, name))
			actors = append(actors, r)
			waitParkedReader(t, b, r, ch, before)
		}
		start := time.Now()
		require.NoError(t, w.unlock(ctx, kindWrite, name))
		for _, r := range readers {
			r.wait(t, promptly)
			require.NoError(t, r.err)
			assert.Less(t, r.at.Sub(start), promptly)
		}
		measure(t, suiteFamily, f.version, "write unlock ("+a.String()+") -> 3 readers ("+b.String()+")", readers[len(readers)-1].at.Sub(start))
		for _, r := range actors {
			require.NoError(t, r.unlock(ctx, kindRead, name))
		}
	})
}

// waitParkedReader waits until reader r of side s waits for the write
// unlock's message. A Java reader must be parked on its lock entry's latch:
// Redisson's "1" message releases only the threads already queued there,
// and one that made its attempt after subscribing but had not parked yet
// when the message came sleeps out the TTL, as Java/Java shows (its eval
// count was not enough to wait for).
func waitParkedReader(t *testing.T, s side, r actor, ch string, before int64) {
	t.Helper()
	if ja, ok := r.(*javaActor); ok {
		require.Eventually(t, func() bool { return want(t).B(ja.j.Parked(context.Background(), ja.thread)) }, 30*time.Second, time.Millisecond)
		return
	}
	waitNewWaiter(t, s, ch, before)
}

// testReadWatchdog: with a 3s watchdog on both sides, a reader holding 10s
// keeps the other side's writer out, and another reader's expiring lease
// does not free the lock while it holds.
func (f *fixture) testReadWatchdog(t *testing.T) {
	f.runPairs(t, shortWatchdog, []rlock.Option{rlock.WithWatchdogTimeout(shortWatchdog)}, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		long, short, w := a.actor(1), b.actor(1), b.actor(2)
		require.NoError(t, long.lock(ctx, kindRead, name))
		require.NoError(t, short.lockLease(ctx, kindRead, name, time.Second))
		// Each read hold has a timeout key; the short one's ends with its
		// lease, unless the long reader is Redisson before 4.4, whose
		// watchdog renews every reader's timeout key (PROTOCOL.md 4.4)
		// when its renewal (every second) comes before the short lease's
		// end: either may happen there (both seen on 3.52.0 and 3.23.5).
		timeoutKeys := func() int {
			keys, err := doRaw(t, f.raw, "KEYS", "{"+name+"}:*:rwlock_timeout:*").AsStrSlice()
			require.NoError(t, err)
			return len(keys)
		}
		require.Equal(t, 2, timeoutKeys())
		shortExpires := !a.java() || atLeast(f.version, "4.4.0")
		expired := false
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			require.False(t, want(t).B(w.tryLock(ctx, kindWrite, name, -1, 0)), "%s's writer got in while %s's renewed reader held", b, a)
			if timeoutKeys() == 1 {
				expired = true
			}
			time.Sleep(500 * time.Millisecond)
		}
		if shortExpires {
			assert.True(t, expired, "the short reader's lease never ended: the writer was kept out by it, not only by the long reader")
		} else {
			t.Logf("Redisson %s's renewal of every reader: the short reader's lease ended: %v", f.version, expired)
		}
		assert.Greater(t, pttl(t, f.raw, name), time.Second, "the watchdog keeps the hash alive")
		require.NoError(t, long.unlock(ctx, kindRead, name))
		// The short reader's lease ended long ago; its field lingers until
		// the hash expires. Redisson 3.x-4.3 renews every reader's timeout
		// keys (the short reader's too), so the hash may live one more
		// watchdog timeout (Java/Java on 3.52.0 shows it).
		require.True(t, want(t).B(w.tryLock(ctx, kindWrite, name, shortWatchdog+2*time.Second, 0)))
		require.NoError(t, w.unlock(ctx, kindWrite, name))
	})
}

// testReadWriteForceUnlock: a read force unlock frees every reader (of
// both sides) and wakes the other side's waiting writer; a write force
// unlock leaves readers alone; an unlock that then finds the lock gone
// still publishes its message, as Redisson's does.
func (f *fixture) testReadWriteForceUnlock(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		ra, rb, w := a.actor(1), b.actor(1), b.actor(2)
		ch := rlock.RWLockChannelName(name)
		require.NoError(t, ra.lock(ctx, kindRead, name))
		require.NoError(t, rb.lock(ctx, kindRead, name))
		assert.False(t, want(t).B(ra.forceUnlock(ctx, kindWrite, name)), "a write force unlock leaves readers")
		before := b.waiters(t, ch)
		waiter := w.lockAsync(ctx, kindWrite, name)
		waitNewWaiter(t, b, ch, before)
		start := time.Now()
		require.True(t, want(t).B(ra.forceUnlock(ctx, kindRead, name)))
		waiter.wait(t, promptly)
		require.NoError(t, waiter.err)
		measure(t, suiteFamily, f.version, "read force unlock ("+a.String()+") -> writer ("+b.String()+")", waiter.at.Sub(start))
		assert.True(t, notHeld(ra.unlock(ctx, kindRead, name)), "the writer holds now")
		assert.Zero(t, want(t).I(rb.holdCount(ctx, kindRead, name)))
		assert.False(t, want(t).B(ra.forceUnlock(ctx, kindRead, name)), "a read force unlock leaves a writer")
		// A write force unlock wakes the other side's waiting reader.
		rw := b.actor(3)
		before = b.waiters(t, ch)
		rwait := rw.lockAsync(ctx, kindRead, name)
		waitParkedReader(t, b, rw, ch, before)
		start = time.Now()
		require.True(t, want(t).B(ra.forceUnlock(ctx, kindWrite, name)))
		rwait.wait(t, promptly)
		require.NoError(t, rwait.err)
		measure(t, suiteFamily, f.version, "write force unlock ("+a.String()+") -> reader ("+b.String()+")", rwait.at.Sub(start))
		assert.True(t, notHeld(w.unlock(ctx, kindWrite, name)), "the force unlock took the write hold")
		require.NoError(t, rw.unlock(ctx, kindRead, name))
		assert.Empty(t, hgetall(t, f.raw, name))
		// An unlock that finds the lock gone still publishes its message
		// (write "1", read "0"), on both sides.
		watch := f.watch(t, ch)
		assert.True(t, unlockGone(f, b, w.unlock(ctx, kindWrite, name)))
		assert.Equal(t, "1", watch.waitMessage(t, promptly).payload, "%s's write unlock of a gone lock", b)
		watch = f.watch(t, ch)
		assert.True(t, unlockGone(f, b, rb.unlock(ctx, kindRead, name)))
		assert.Equal(t, "0", watch.waitMessage(t, promptly).payload, "%s's read unlock of a gone lock", b)
	})
}

// unlockGone checks the error of a read or write unlock of a hash that is
// gone: "not held", except that Redisson before 3.44.0 returns 1 (no
// error) on a missing key (PROTOCOL.md 18.6).
func unlockGone(f *fixture, s side, err error) bool {
	if s.java() && !atLeast(f.version, "3.44.0") {
		return err == nil
	}
	return notHeld(err)
}

// testFencedTokens: grants alternating between the sides, re-entry and
// plain lock included, get strictly increasing tokens, and both sides
// read the same last token.
func (f *fixture) testFencedTokens(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		xa, xb := a.actor(1), b.actor(1)
		var seq []int64
		for round := range 3 {
			for _, x := range []actor{xa, xb} {
				tok := want(t).I64(x.lockToken(ctx, name))
				seq = append(seq, tok)
				// A re-entry by plain lock increments the token too.
				require.NoError(t, x.lock(ctx, kindFenced, name))
				tok = want(t).I64(x.token(ctx, name))
				seq = append(seq, tok)
				tok = want(t).I64(x.tryLockToken(ctx, name, time.Second, 0))
				seq = append(seq, tok)
				other := xb
				if x == xb {
					other = xa
				}
				assert.Zero(t, want(t).I64(other.tryLockToken(ctx, name, 0, 0)), "round %d: %s got a token while %s held", round, other, x)
				for range 3 {
					require.NoError(t, x.unlock(ctx, kindFenced, name))
				}
			}
		}
		for i := 1; i < len(seq); i++ {
			require.Equal(t, seq[i-1]+1, seq[i], "tokens must rise by one per grant: %v", seq)
		}
		require.Equal(t, int64(1), seq[0])
		assert.Equal(t, seq[len(seq)-1], want(t).I64(xa.token(ctx, name)))
		assert.Equal(t, seq[len(seq)-1], want(t).I64(xb.token(ctx, name)))
	})
}

// testSpinLock: a spin-lock waiter of one side gets in within the back-off
// bound of the other's unlock, and nobody subscribes to anything.
func (f *fixture) testSpinLock(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		xa, xb := a.actor(1), b.actor(1)
		require.NoError(t, xa.lock(ctx, kindSpin, name))
		before := evalCount(t, f)
		waiter := xb.lockAsync(ctx, kindSpin, name)
		// The waiter is polling: several attempts (back-off 1, 2, 4, ... ms).
		require.Eventually(t, func() bool { return evalCount(t, f)-before >= 8 }, 30*time.Second, 5*time.Millisecond)
		require.False(t, waiter.finished(), "%s got the spin lock while %s held it", b, a)
		chans, err := doRaw(t, f.raw, "PUBSUB", "CHANNELS", "*"+name+"*").AsStrSlice()
		require.NoError(t, err)
		assert.Empty(t, chans, "a spin lock waiter subscribed")
		published := publishCount(t, f)
		start := time.Now()
		require.NoError(t, xa.unlock(ctx, kindSpin, name))
		waiter.wait(t, promptly)
		require.NoError(t, waiter.err)
		took := waiter.at.Sub(start)
		measure(t, suiteFamily, f.version, "spin unlock ("+a.String()+") -> spin waiter ("+b.String()+")", took)
		assert.Less(t, took, 128*time.Millisecond+400*time.Millisecond, "within one back-off step (128ms) and the driver's overhead")
		assert.Equal(t, 1, want(t).I(xb.holdCount(ctx, kindSpin, name)))
		require.True(t, want(t).B(xa.forceUnlock(ctx, kindSpin, name)))
		assert.True(t, notHeld(xb.unlock(ctx, kindSpin, name)))
		assert.Equal(t, published, publishCount(t, f), "a spin lock's unlock or force unlock published a message")
	})
}

// publishCount is the number of PUBLISH and SPUBLISH calls so far (those
// of scripts included), summed over every node the raw client knows (the
// server, or each node of a cluster).
func publishCount(t *testing.T, f *fixture) int64 {
	n, err := redistest.CommandCalls(context.Background(), f.raw, "publish", "spublish")
	require.NoError(t, err)
	return n
}

// evalCount is the number of EVAL and EVALSHA calls so far, summed over
// every node.
func evalCount(t *testing.T, f *fixture) int64 {
	n, err := redistest.CommandCalls(context.Background(), f.raw, "evalsha", "eval")
	require.NoError(t, err)
	return n
}

// testNonReentrant (4.4+): a holder's re-acquire fails on both sides and
// the count stays 1; the other side waits and gets it after one unlock.
func (f *fixture) testNonReentrant(t *testing.T) {
	f.runPairs(t, 0, nil, func(t *testing.T, a, b side, name string) {
		ctx := scenarioCtx(t)
		xa, xb := a.actor(1), b.actor(1)
		require.NoError(t, xa.lock(ctx, kindNR, name))
		assert.True(t, alreadyHeld(xa.lock(ctx, kindNR, name)), "%s re-acquired a non-reentrant lock", a)
		_, err := xa.tryLock(ctx, kindNR, name, -1, 0)
		assert.True(t, alreadyHeld(err))
		_, err = xa.tryLock(ctx, kindNR, name, 100*time.Millisecond, 0)
		assert.True(t, alreadyHeld(err))
		assert.Equal(t, 1, want(t).I(xb.holdCount(ctx, kindNR, name))+want(t).I(xa.holdCount(ctx, kindNR, name)))
		assert.Equal(t, "1", firstValue(hgetall(t, f.raw, name)))
		assert.False(t, want(t).B(xb.tryLock(ctx, kindNR, name, -1, 0)))
		ch := rlock.ChannelName(name)
		before := b.waiters(t, ch)
		waiter := xb.lockAsync(ctx, kindNR, name)
		waitNewWaiter(t, b, ch, before)
		require.NoError(t, xa.unlock(ctx, kindNR, name))
		waiter.wait(t, promptly)
		require.NoError(t, waiter.err)
		require.NoError(t, xb.unlock(ctx, kindNR, name))
		assert.Empty(t, hgetall(t, f.raw, name))
	})
}

func firstValue(m map[string]string) string {
	for _, v := range m {
		return v
	}
	return ""
}
