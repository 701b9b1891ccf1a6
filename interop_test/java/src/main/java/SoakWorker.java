import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RAtomicLong;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * A Java worker of the Go stress/soak coordinator (github.com/goredisson/locks/stress):
 * threads that take Redisson locks on shared names, in every acquisition style, and
 * record each critical section in the coordinator's record format (JSON lines).
 *
 * <pre>
 * java -cp 'driver.jar:lib-VERSION/*' SoakWorker LOCK_ADDR SEQ_ADDR WATCHDOG_MS LEASE_MS MAX_HOLD_US THREADS SEED OUT NAME...
 * </pre>
 *
 * Each thread loops until stdin reaches EOF (the coordinator closes it to stop the
 * worker): it picks a name and a style, acquires (recording the wall clock before the
 * call as t0), INCRs the name's sequence key on the sequencer SEQ_ADDR (tb: the wall
 * clock before it; s1: its value), writes a B record, sleeps up to MAX_HOLD_US, INCRs
 * again (s2, te), writes an E record and unlocks. Styles (the "st" field):
 * lock (RLock.lock(), watchdog), locklease (lock(lease)), trylock-wait (tryLock(wait,
 * lease)), trylock-wait-wd (tryLock(wait): watchdog), trylock (tryLock(): one attempt,
 * a miss is just counted), lockasync (lockAsync().get(): watchdog), lockasync-lease.
 * A failed acquire writes an X record, a failed unlock a U record, each with the wall
 * clock t (the coordinator excuses Redisson's errors shortly after it killed the
 * command connections).
 * After a failed unlock whose outcome is unknown, the thread unlocks again while it
 * still holds the lock and writes an H record: state "gone" (the failed unlock had
 * run, or the unrenewed hold ran out), "released" (it had not; the retry released
 * the hold) or "stuck".
 */
public final class SoakWorker {
    private static OutputStream out;

    private static synchronized void emit(String json) {
        try {
            // One write per record: a SIGKILL rarely cuts one.
            out.write((json + "\n").getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            System.err.println("soak worker: writing a record: " + e);
        }
    }

    private static long wallNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    private static String url(String addr) {
        return addr.contains("://") ? addr : "redis://" + addr;
    }

    private static final String[] STYLES = {
        "lock", "locklease", "trylock-wait", "trylock-wait-wd", "trylock", "lockasync", "lockasync-lease",
    };

    public static void main(String[] args) throws Exception {
        if (args.length < 9) {
            System.err.println("usage: SoakWorker LOCK_ADDR SEQ_ADDR WATCHDOG_MS LEASE_MS MAX_HOLD_US THREADS SEED OUT NAME...");
            System.exit(2);
        }
        String lockAddr = args[0], seqAddr = args[1];
        long watchdogMs = Long.parseLong(args[2]);
        long leaseMs = Long.parseLong(args[3]);
        long maxHoldUs = Long.parseLong(args[4]);
        int threads = Integer.parseInt(args[5]);
        long seed = Long.parseLong(args[6]);
        out = new FileOutputStream(args[7], true);
        List<String> names = new ArrayList<>();
        for (int i = 8; i < args.length; i++) {
            names.add(args[i]);
        }

        Config lc = new Config();
        lc.setLockWatchdogTimeout(watchdogMs);
        lc.useSingleServer().setAddress(url(lockAddr));
        Config sc = new Config();
        sc.setCodec(StringCodec.INSTANCE);
        sc.useSingleServer().setAddress(url(seqAddr));
        RedissonClient locks, seq;
        try {
            locks = Redisson.create(lc);
            seq = Redisson.create(sc);
        } catch (Throwable t) {
            System.err.println("soak worker: cannot start Redisson: " + t);
            System.exit(1);
            return;
        }

        Thread[] ts = new Thread[threads];
        for (int g = 0; g < threads; g++) {
            final int gi = g;
            ts[g] = new Thread(() -> loop(gi, locks, seq, names, watchdogMs, leaseMs, maxHoldUs, new Random(seed ^ ((long) gi << 40))));
            ts[g].setDaemon(true);
            ts[g].start();
        }
        // Stop on EOF of stdin.
        InputStream in = System.in;
        byte[] buf = new byte[256];
        while (in.read(buf) >= 0) {
            // discard
        }
        stop = true;
        for (Thread t : ts) {
            t.join(20_000);
        }
        out.close();
        locks.shutdown();
        seq.shutdown();
        System.exit(0);
    }

    private static volatile boolean stop;

    /** -Dsoak.unsafe=true: no locking at all (the checker must then report violations). */
    private static final boolean UNSAFE = Boolean.getBoolean("soak.unsafe");

    private static void loop(int g, RedissonClient locks, RedissonClient seq, List<String> names,
                             long watchdogMs, long leaseMs, long maxHoldUs, Random rng) {
        while (!stop) {
            int n = rng.nextInt(names.size());
            String name = names.get(n);
            RLock l = locks.getLock(name);
            RAtomicLong sk = seq.getAtomicLong(name + ":seq");
            String st = STYLES[rng.nextInt(STYLES.length)];
            boolean wd;
            long t0 = wallNanos();
            try {
                if (UNSAFE) {
                    st = "unsafe";
                    wd = false;
                } else switch (st) {
                    case "lock":
                        l.lock();
                        wd = true;
                        break;
                    case "locklease":
                        l.lock(leaseMs, TimeUnit.MILLISECONDS);
                        wd = false;
                        break;
                    case "trylock-wait":
                        if (!l.tryLock(60_000, leaseMs, TimeUnit.MILLISECONDS)) {
                            emit("{\"k\":\"X\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"err\":\"tryLock(60s) timed out\"}");
                            continue;
                        }
                        wd = false;
                        break;
                    case "trylock-wait-wd":
                        if (!l.tryLock(60_000, TimeUnit.MILLISECONDS)) {
                            emit("{\"k\":\"X\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"err\":\"tryLock(60s) timed out\"}");
                            continue;
                        }
                        wd = true;
                        break;
                    case "trylock":
                        if (!l.tryLock()) {
                            emit("{\"k\":\"M\",\"g\":" + g + ",\"n\":" + n + "}");
                            continue;
                        }
                        wd = true;
                        break;
                    case "lockasync":
                        l.lockAsync().get();
                        wd = true;
                        break;
                    default: // lockasync-lease
                        l.lockAsync(leaseMs, TimeUnit.MILLISECONDS).get();
                        wd = false;
                        break;
                }
            } catch (Throwable t) {
                if (stop) {
                    return;
                }
                emit("{\"k\":\"X\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"err\":" + quote("acquire (" + st + "): " + t) + "}");
                continue;
            }
            long lease = wd ? watchdogMs : leaseMs;
            // A fixed lease runs out no earlier than PTTL's send plus the TTL it read
            // (Redisson's watchdog holds are never excused: it renews them).
            long expiresNs = Long.MAX_VALUE;
            if (!wd && !UNSAFE) {
                long sent = System.nanoTime();
                try {
                    long ttl = l.remainTimeToLive();
                    expiresNs = ttl > 0 ? sent + ttl * 1_000_000L : sent;
                } catch (Throwable t) {
                    expiresNs = sent; // unknown: counted as possibly run out
                }
            }
            long tb = wallNanos();
            long s1;
            try {
                s1 = sk.incrementAndGet();
            } catch (Throwable t) {
                emit("{\"k\":\"X\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"err\":" + quote("INCR: " + t) + "}");
                unlock(l, g, n, 0);
                return;
            }
            emit("{\"k\":\"B\",\"g\":" + g + ",\"n\":" + n + ",\"s1\":" + s1 + ",\"t0\":" + t0 + ",\"tb\":" + tb
                + ",\"lease\":" + lease + (wd ? ",\"wd\":true" : "") + ",\"st\":\"" + st + "\"}");
            if (maxHoldUs > 0) {
                long us = (long) (rng.nextDouble() * (maxHoldUs + 1));
                try {
                    Thread.sleep(us / 1000, (int) (us % 1000) * 1000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            long s2;
            try {
                s2 = sk.incrementAndGet();
            } catch (Throwable t) {
                emit("{\"k\":\"X\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"err\":" + quote("INCR: " + t) + "}");
                unlock(l, g, n, s1);
                return;
            }
            long te = wallNanos();
            boolean lost = System.nanoTime() >= expiresNs;
            emit("{\"k\":\"E\",\"g\":" + g + ",\"n\":" + n + ",\"s1\":" + s1 + ",\"s2\":" + s2 + ",\"te\":" + te
                + (lost ? ",\"lost\":true" : "") + "}");
            unlock(l, g, n, s1);
        }
    }


    private static void unlock(RLock l, int g, int n, long s1) {
        if (UNSAFE) {
            return;
        }
        try {
            l.unlock();
            return;
        } catch (Throwable t) {
            emit("{\"k\":\"U\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"s1\":" + s1 + ",\"err\":" + quote(t.toString()) + "}");
            if (t instanceof IllegalMonitorStateException) {
                return;
            }
        }
        // The unlock failed with its outcome unknown (a cut connection, a response
        // timeout). Redisson cancels the renewal but the hold may still be there, and
        // this thread's next lock() of the name re-enters it, resetting its lease:
        // a thread that keeps coming back holds the name until its JVM dies. Do what
        // a careful application does: while the thread still holds the lock, unlock
        // again (an unlock that did run makes isHeldByCurrentThread false). The H
        // record says whether the hold was still there and whether it ended.
        boolean held = false;
        for (int i = 0; i < 40; i++) {
            try {
                if (!l.isHeldByCurrentThread()) {
                    emitRetried(g, n, s1, held ? "released" : "gone");
                    return;
                }
                held = true;
                l.unlock();
            } catch (Throwable t) {
                // retried below
            }
            try {
                Thread.sleep(250);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        emitRetried(g, n, s1, "stuck");
    }

    private static void emitRetried(int g, int n, long s1, String state) {
        emit("{\"k\":\"H\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"s1\":" + s1 + ",\"state\":\"" + state + "\"}");
    }
}
