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
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;
import org.redisson.config.SentinelServersConfig;

/**
 * A Java worker of the Go stress/soak coordinator (github.com/goredisson/locks/stress):
 * threads that take Redisson locks on shared names, in every acquisition style, and
 * record each critical section in the coordinator's record format (JSON lines).
 *
 * <pre>
 * java -cp 'driver.jar:lib-VERSION/*' SoakWorker LOCK_ADDR SEQ_ADDR WATCHDOG_MS LEASE_MS MAX_HOLD_US THREADS SEED OUT NAME...
 * </pre>
 *
 * LOCK_ADDR is host:port, sentinel:MASTER_SET@host:port,host:port,... for a
 * Sentinel group (useSentinelServers) or cluster:host:port,... for a Redis Cluster
 * (useClusterServers); reads go to the master.
 *
 * Each thread loops until stdin reaches EOF (the coordinator closes it to stop the
 * worker): it picks a name and a style, acquires (recording the wall clock before the
 * call as t0), INCRs the name's sequence key on the sequencer SEQ_ADDR (tb: the wall
 * clock before it; s1: its value), writes a B record, sleeps up to MAX_HOLD_US, INCRs
 * again (s2, te), writes an E record and unlocks. A fixed-lease hold of a lock
 * whose own field was already gone from the lock's hash at entry has "gone" in its B
 * record (lock() returned after the hold it took ran out). Styles (the "st" field):
 * lock (RLock.lock(), watchdog), locklease (lock(lease)), trylock-wait (tryLock(wait,
 * lease)), trylock-wait-wd (tryLock(wait): watchdog), trylock (tryLock(): one attempt,
 * a miss is just counted), lockasync (lockAsync().get(): watchdog), lockasync-lease.
 * <p>
 * A NAME is "KIND=name" or a plain name (kind plain, getLock). Kinds: rw
 * (getReadWriteLock: three reads for every write, the B record says "read"), fair
 * (getFairLock; -Dsoak.fairWaitMs sets Config.setFairLockWaitTimeout), fenced
 * (getFencedLock: each style through its token-returning form, lockAndGetToken,
 * tryLockAndGetToken, ...; the B record carries the token "tok"), semaphore
 * (getPermitExpirableSemaphore: a permit with the lease, by acquire(lease),
 * tryAcquire(wait, lease), tryAcquire(0, lease): one attempt, acquireAsync(lease);
 * the coordinator sets the permits). A failed release of a permit is tried again
 * with tryRelease.
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

    /**
     * An exception and its causes ("A: m; caused by B: m2"): Redisson wraps a
     * closed channel or a timeout in a RedisException whose own message says
     * only "Unexpected exception while processing command".
     */
    private static String describe(Throwable t) {
        StringBuilder b = new StringBuilder(t.toString());
        Throwable c = t.getCause();
        for (int i = 0; c != null && c != t && i < 5; i++, c = c.getCause()) {
            b.append("; caused by ").append(c);
        }
        return b.toString();
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
        List<Name> names = new ArrayList<>();
        for (int i = 8; i < args.length; i++) {
            names.add(new Name(args[i]));
        }

        Config lc = new Config();
        lc.setLockWatchdogTimeout(watchdogMs);
        long fairWaitMs = Long.getLong("soak.fairWaitMs", 0);
        if (fairWaitMs > 0) {
            // Config.setFairLockWaitTimeout: Redisson 3.24+ (the driver compiles against 3.23.5).
            Config.class.getMethod("setFairLockWaitTimeout", long.class).invoke(lc, fairWaitMs);
        }
        if (lockAddr.startsWith("sentinel:")) {
            // "sentinel:<master set>@<host:port>,...": through the Sentinels.
            // Reads (remainTimeToLive, isHeldByCurrentThread: the records'
            // evidence) go to the master, not a replica that may lag.
            String[] set = lockAddr.substring("sentinel:".length()).split("@", 2);
            SentinelServersConfig ss = lc.useSentinelServers().setMasterName(set[0]).setReadMode(ReadMode.MASTER);
            for (String a : set[1].split(",")) {
                ss.addSentinelAddress(url(a));
            }
        } else if (lockAddr.startsWith("cluster:")) {
            // "cluster:<host:port>,...": a Redis Cluster by its nodes.
            ClusterServersConfig cs = lc.useClusterServers().setReadMode(ReadMode.MASTER);
            for (String a : lockAddr.substring("cluster:".length()).split(",")) {
                cs.addNodeAddress(url(a));
            }
        } else {
            lc.useSingleServer().setAddress(url(lockAddr));
        }
        Config sc = new Config();
        sc.setCodec(StringCodec.INSTANCE);
        sc.useSingleServer().setAddress(url(seqAddr));
        RedissonClient seq, created = null;
        try {
            // The lock server may be restarting: try for up to a minute.
            for (int i = 0; created == null; i++) {
                try {
                    created = Redisson.create(lc);
                } catch (Throwable t) {
                    if (i >= 240) {
                        throw t;
                    }
                    Thread.sleep(250);
                }
            }
            seq = Redisson.create(sc);
        } catch (Throwable t) {
            System.err.println("soak worker: cannot start Redisson: " + t);
            System.exit(1);
            return;
        }
        RedissonClient locks = created;

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

    /** A name argument: "KIND=name", or a plain name (kind "plain"). */
    private static final class Name {
        final String kind, name;

        Name(String arg) {
            int eq = arg.indexOf('=');
            kind = eq < 0 ? "plain" : arg.substring(0, eq);
            name = eq < 0 ? arg : arg.substring(eq + 1);
            switch (kind) {
                case "plain": case "rw": case "fair": case "fenced": case "semaphore":
                    break;
                default:
                    throw new IllegalArgumentException("unknown kind " + kind + " in " + arg);
            }
        }
    }

    /** One acquisition: what the B record says, and how to give it back. */
    private static final class Grant {
        String st;
        boolean wd, read;
        Long tok; // fenced: the token of this grant
        RLock lock; // the lock kinds
        RPermitExpirableSemaphore sem; // semaphore: the permit's semaphore and id
        String permit;
    }

    /** -Dsoak.fairTryWaitMs: the wait of tryLock(wait) on fair names. */
    private static final long FAIR_TRY_WAIT_MS = Long.getLong("soak.fairTryWaitMs", 12_000);

    private static final String[] SEM_STYLES = {"acquire", "tryacquire-wait", "tryacquire", "acquireasync"};

    /** The lock a lock-kind name stands for (rw: the read or the write lock). */
    private static RLock lockOf(RedissonClient locks, Name nm, boolean read) {
        switch (nm.kind) {
            case "rw":
                return read ? locks.getReadWriteLock(nm.name).readLock() : locks.getReadWriteLock(nm.name).writeLock();
            case "fair":
                return locks.getFairLock(nm.name);
            case "fenced":
                return locks.getFencedLock(nm.name);
            default:
                return locks.getLock(nm.name);
        }
    }

    /**
     * Acquires name nm in a random style of its kind; null when a one-attempt try
     * found it taken (an M record is written) or a wait ran out (an X record).
     */
    private static Grant acquire(Grant gr, RedissonClient locks, Name nm, int g, int n, long leaseMs, Random rng) throws Exception {
        if (nm.kind.equals("semaphore")) {
            gr.sem = locks.getPermitExpirableSemaphore(nm.name);
            switch (gr.st) {
                case "acquire":
                    gr.permit = gr.sem.acquire(leaseMs, TimeUnit.MILLISECONDS);
                    break;
                case "tryacquire-wait":
                    gr.permit = gr.sem.tryAcquire(60_000, leaseMs, TimeUnit.MILLISECONDS);
                    if (gr.permit == null) {
                        emit("{\"k\":\"X\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"err\":\"tryAcquire(60s) timed out\"}");
                        return null;
                    }
                    break;
                case "tryacquire":
                    gr.permit = gr.sem.tryAcquire(0, leaseMs, TimeUnit.MILLISECONDS);
                    if (gr.permit == null) {
                        emit("{\"k\":\"M\",\"g\":" + g + ",\"n\":" + n + "}");
                        return null;
                    }
                    break;
                default: // acquireasync
                    gr.permit = gr.sem.acquireAsync(leaseMs, TimeUnit.MILLISECONDS).get();
                    break;
            }
            return gr;
        }
        RLock l = lockOf(locks, nm, gr.read);
        gr.lock = l;
        // A fair lock's tryLock(wait) reserves its place in the line for the whole
        // wait: a waiter that dies holds up those behind it that long. On fair names
        // the waits are shorter, and one that runs out is a W record.
        boolean fair = nm.kind.equals("fair");
        long tryWaitMs = fair ? FAIR_TRY_WAIT_MS : 60_000;
        gr.wd = gr.st.equals("lock") || gr.st.equals("trylock-wait-wd") || gr.st.equals("trylock") || gr.st.equals("lockasync");
        boolean got = true;
        if (nm.kind.equals("fenced")) {
            // Every style through its token-returning form.
            RFencedLock f = (RFencedLock) l;
            switch (gr.st) {
                case "lock": gr.tok = f.lockAndGetToken(); break;
                case "locklease": gr.tok = f.lockAndGetToken(leaseMs, TimeUnit.MILLISECONDS); break;
                case "trylock-wait": gr.tok = f.tryLockAndGetToken(60_000, leaseMs, TimeUnit.MILLISECONDS); break;
                case "trylock-wait-wd": gr.tok = f.tryLockAndGetToken(60_000, TimeUnit.MILLISECONDS); break;
                case "trylock": gr.tok = f.tryLockAndGetToken(); break;
                case "lockasync": gr.tok = f.lockAndGetTokenAsync().get(); break;
                default: gr.tok = f.lockAndGetTokenAsync(leaseMs, TimeUnit.MILLISECONDS).get(); break;
            }
            got = gr.tok != null;
        } else {
            switch (gr.st) {
                case "lock": l.lock(); break;
                case "locklease": l.lock(leaseMs, TimeUnit.MILLISECONDS); break;
                case "trylock-wait": got = l.tryLock(tryWaitMs, leaseMs, TimeUnit.MILLISECONDS); break;
                case "trylock-wait-wd": got = l.tryLock(tryWaitMs, TimeUnit.MILLISECONDS); break;
                case "trylock": got = l.tryLock(); break;
                case "lockasync": l.lockAsync().get(); break;
                default: l.lockAsync(leaseMs, TimeUnit.MILLISECONDS).get(); break;
            }
        }
        if (!got) {
            if (gr.st.equals("trylock")) {
                emit("{\"k\":\"M\",\"g\":" + g + ",\"n\":" + n + "}");
            } else if (fair) {
                emit("{\"k\":\"W\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + "}");
            } else {
                emit("{\"k\":\"X\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"err\":\"tryLock(60s) timed out\"}");
            }
            return null;
        }
        return gr;
    }

    private static void loop(int g, RedissonClient locks, RedissonClient seq, List<Name> names,
                             long watchdogMs, long leaseMs, long maxHoldUs, Random rng) {
        while (!stop) {
            int n = rng.nextInt(names.size());
            Name nm = names.get(n);
            RAtomicLong sk = seq.getAtomicLong(nm.name + ":seq");
            long t0 = wallNanos(), t0Mono = System.nanoTime();
            Grant gr = new Grant();
            if (nm.kind.equals("semaphore")) {
                gr.st = SEM_STYLES[rng.nextInt(SEM_STYLES.length)];
            } else {
                gr.read = nm.kind.equals("rw") && rng.nextInt(4) != 0; // three reads for every write
                gr.st = STYLES[rng.nextInt(STYLES.length)];
            }
            try {
                if (UNSAFE) {
                    gr.st = "unsafe";
                } else if (acquire(gr, locks, nm, g, n, leaseMs, rng) == null) {
                    continue;
                }
            } catch (Throwable t) {
                if (stop) {
                    return;
                }
                emit("{\"k\":\"X\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"err\":" + quote("acquire (" + nm.kind + " " + gr.st + "): " + describe(t)) + "}");
                continue;
            }
            long lease = gr.wd ? watchdogMs : leaseMs;
            // When the hold may have run out: a fixed lease runs out no earlier than
            // PTTL's send plus the TTL it read (Redisson's watchdog holds are never
            // excused: it renews them). A read hold's own lease is not the hash's
            // TTL, and a permit's lease has no TTL to read: for those, no earlier
            // than the lease after the acquire call began.
            //
            // The key's TTL is this hold's only while the hold is there: a lock()
            // whose reply came late (Redisson's retries after a response timeout)
            // may return after the hold it took has run out and another owner's
            // has begun, and PTTL then reads that owner's lease. So the worker
            // asks, after PTTL, whether its own hold is still there
            // (isHeldByCurrentThread: its field in the hash, for a write lock
            // also the write mode): if it is, it was there at PTTL too (only
            // this thread's script adds its field) and the TTL is its own; if
            // not, the hold was gone at entry (the B record's gone), and the
            // section counts as lost from its start. (One narrow exception: an
            // earlier attempt of the lock script, resent by Redisson and held
            // up by a stall, lands between the two reads; the TTL read was then
            // another owner's, and the section's end may be counted lost
            // though its hold was not, excusing an overlap with it.)
            long expiresNs = Long.MAX_VALUE;
            boolean gone = false;
            if (!gr.wd && !UNSAFE) {
                if (gr.lock == null || gr.read) {
                    expiresNs = t0Mono + leaseMs * 1_000_000L;
                } else {
                    long sent = System.nanoTime();
                    try {
                        long ttl = gr.lock.remainTimeToLive();
                        gone = !gr.lock.isHeldByCurrentThread();
                        expiresNs = ttl > 0 && !gone ? sent + ttl * 1_000_000L : sent;
                    } catch (Throwable t) {
                        expiresNs = sent; // unknown: counted as possibly run out
                    }
                }
            }
            long tb = wallNanos();
            long s1;
            try {
                s1 = sk.incrementAndGet();
            } catch (Throwable t) {
                emit("{\"k\":\"X\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"err\":" + quote("INCR: " + t) + "}");
                release(gr, g, n, 0, Long.MAX_VALUE);
                return;
            }
            emit("{\"k\":\"B\",\"g\":" + g + ",\"n\":" + n + ",\"s1\":" + s1 + ",\"t0\":" + t0 + ",\"tb\":" + tb
                + ",\"lease\":" + lease + (gr.wd ? ",\"wd\":true" : "") + (gr.read ? ",\"read\":true" : "")
                + (gr.tok != null ? ",\"tok\":" + gr.tok : "") + (gone ? ",\"gone\":true" : "") + ",\"st\":\"" + gr.st + "\"}");
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
                release(gr, g, n, s1, expiresNs);
                return;
            }
            long te = wallNanos();
            boolean lost = System.nanoTime() >= expiresNs;
            emit("{\"k\":\"E\",\"g\":" + g + ",\"n\":" + n + ",\"s1\":" + s1 + ",\"s2\":" + s2 + ",\"te\":" + te
                + (lost ? ",\"lost\":true" : "") + "}");
            release(gr, g, n, s1, expiresNs);
        }
    }

    /**
     * Unlocks the lock, or releases the permit, of a grant. expiresNs is when its
     * fixed lease may have run out (System.nanoTime; Long.MAX_VALUE: never): a
     * failed unlock's U record says (lost) whether that time had come when the
     * unlock returned, for a "not held" answer is then the right one.
     */
    private static void release(Grant gr, int g, int n, long s1, long expiresNs) {
        if (UNSAFE) {
            return;
        }
        try {
            if (gr.sem != null) {
                gr.sem.release(gr.permit);
            } else {
                gr.lock.unlock();
            }
            return;
        } catch (Throwable t) {
            boolean lost = System.nanoTime() >= expiresNs;
            emit("{\"k\":\"U\",\"t\":" + wallNanos() + ",\"g\":" + g + ",\"n\":" + n + ",\"s1\":" + s1
                + (lost ? ",\"lost\":true" : "") + ",\"err\":" + quote(describe(t)) + "}");
            if (t instanceof IllegalMonitorStateException) {
                return; // not held: the outcome is known
            }
        }
        // The unlock failed with its outcome unknown (a cut connection, a response
        // timeout). Redisson cancels the renewal but the hold may still be there, and
        // this thread's next lock() of the name re-enters it, resetting its lease:
        // a thread that keeps coming back holds the name until its JVM dies. Do what
        // a careful application does: while the thread still holds the lock, unlock
        // again (an unlock that did run makes isHeldByCurrentThread false); for a
        // permit, tryRelease it (false: it was released or ran out). The H record
        // says whether the hold was still there and whether it ended.
        boolean held = false;
        for (int i = 0; i < 40; i++) {
            try {
                if (gr.sem != null) {
                    emitRetried(g, n, s1, gr.sem.tryRelease(gr.permit) ? "released" : "gone");
                    return;
                }
                if (!gr.lock.isHeldByCurrentThread()) {
                    emitRetried(g, n, s1, held ? "released" : "gone");
                    return;
                }
                held = true;
                gr.lock.unlock();
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
