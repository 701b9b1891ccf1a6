import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Redisson side of the lock benchmark in bench/ (github.com/goredisson/locks/bench),
 * driven line by line over stdin by the Go runner (bench/cmd/bench). Every command
 * gets exactly one JSON line on stdout, with the fields of the Go bench.Result.
 *
 * <pre>
 * java -cp 'target/driver.jar:target/lib-VERSION/*' Bench HOST:PORT
 *   info                                        {"ok":true,"java":..,"redisson":..,"config":..}
 *   warmup MS                                   S1 (16 threads) then S2 for MS in all
 *   s1 THREADS WARM_MS DUR_MS [KIND]            uncontended lock()+unlock(), own name per thread;
 *                                               KIND lock (default), read (readLock()), fenced
 *   s5 READERS WARM_MS DUR_MS                   writer hand-off under READERS readers (bench.S5)
 *   s2 THREADS WARM_MS DUR_MS MAX_MS MIN_ACQ CS_US [fair]   contended, two RedissonClients, laps
 *                                               (fair: getFairLock)
 *   s3 LOCKS WATCHDOG_MS HOLD_MS                watchdog scale (lockAsync(threadId))
 *   s4 LOCKS PER SETTLE_MS TIMEOUT_MS [SUBS]    waiting scale (lockAsync(threadId)); SUBS &gt; 0 sets
 *                                               subscriptionsPerConnection
 *   quit
 * </pre>
 *
 * Redisson runs with its defaults (Config defaults, useSingleServer), except
 * lockWatchdogTimeout in S3 and, when asked, subscriptionsPerConnection in S4. The measured loops are the same as the Go ones in
 * bench/scenarios.go. Compiled against the oldest Redisson in versions.txt, like
 * Driver; only the stable RLock API is used.
 */
public final class Bench {
    private static String addr;
    private static PrintStream out;
    private static RedissonClient s1Client;
    private static RedissonClient s2a;
    private static RedissonClient s2b;

    private Bench() {}

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (args.length != 1) {
            System.err.println("usage: Bench HOST:PORT");
            System.exit(2);
        }
        addr = args[0];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\\s+");
            String res;
            try {
                res = run(f);
            } catch (Throwable t) {
                t.printStackTrace();
                res = "{\"ok\":false,\"error\":" + q(t.toString()) + "}";
            }
            out.println(res);
            if (f[0].equals("quit")) {
                break;
            }
        }
        shutdown();
        System.exit(0);
    }

    /** Shuts the S1/S2 clients down (recreated when needed), so that S3 and S4 measure one client. */
    private static synchronized void closeIdleClients() {
        shutdown();
        masterClients.clear();
        s2Others.clear();
        s1Client = null;
        s2a = null;
        s2b = null;
    }

    private static void shutdown() {
        List<RedissonClient> others = new ArrayList<>(masterClients.values());
        for (RedissonClient[] pair : s2Others.values()) {
            others.addAll(Arrays.asList(pair));
        }
        for (RedissonClient c : others) {
            try {
                c.shutdown();
            } catch (Throwable ignored) {
                // exiting anyway
            }
        }
        for (RedissonClient c : new RedissonClient[] {s1Client, s2a, s2b}) {
            if (c != null) {
                try {
                    c.shutdown();
                } catch (Throwable ignored) {
                    // exiting anyway
                }
            }
        }
    }

    private static String run(String[] f) throws Exception {
        switch (f[0]) {
            case "info":
                return info();
            case "warmup": {
                long ms = Long.parseLong(f[1]);
                s1(16, 0, ms / 2, "lock");
                s2(16, 0, ms / 2, ms / 2, 0, 100, "lock", addr);
                return "{\"ok\":true}";
            }
            case "s1":
                return s1(Integer.parseInt(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), f.length > 4 ? f[4] : "lock");
            case "s5":
                return s5(Integer.parseInt(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]));
            case "s2":
                return s2(Integer.parseInt(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]),
                        Long.parseLong(f[5]), Long.parseLong(f[6]), f.length > 7 ? f[7] : "lock", f.length > 8 ? f[8] : addr);
            case "latch":
                return latch(Integer.parseInt(f[1]), Integer.parseInt(f[2]));
            case "redlock":
                return redlock(Integer.parseInt(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), f[4].split(","));
            case "s3":
                closeIdleClients();
                return s3(Integer.parseInt(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]));
            case "s4":
                closeIdleClients();
                return s4(Integer.parseInt(f[1]), Integer.parseInt(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]),
                        f.length > 5 ? Integer.parseInt(f[5]) : 0);
            case "quit":
                return "{\"ok\":true}";
            default:
                return "{\"ok\":false,\"error\":" + q("unknown command " + f[0]) + "}";
        }
    }

    private static Config config() {
        Config c = new Config();
        c.useSingleServer().setAddress("redis://" + addr);
        return c;
    }

    private static synchronized RedissonClient s1Client() {
        if (s1Client == null) {
            s1Client = Redisson.create(config());
        }
        return s1Client;
    }

    private static String info() {
        Config c = config();
        String cfg = "connectionPoolSize=" + c.useSingleServer().getConnectionPoolSize()
                + " connectionMinimumIdleSize=" + c.useSingleServer().getConnectionMinimumIdleSize()
                + " subscriptionConnectionPoolSize=" + c.useSingleServer().getSubscriptionConnectionPoolSize()
                + " subscriptionsPerConnection=" + c.useSingleServer().getSubscriptionsPerConnection()
                + " nettyThreads=" + c.getNettyThreads()
                + " threads=" + c.getThreads()
                + " lockWatchdogTimeout=" + c.getLockWatchdogTimeout();
        return "{\"ok\":true,\"java\":" + q(System.getProperty("java.version") + " (" + System.getProperty("java.vm.name") + ")")
                + ",\"redisson\":" + q(redissonVersion()) + ",\"config\":" + q(cfg)
                + ",\"gc\":" + q(gcNames()) + "}";
    }

    private static String gcNames() {
        List<String> names = new ArrayList<>();
        ManagementFactory.getGarbageCollectorMXBeans().forEach(b -> names.add(b.getName()));
        return String.join(", ", names);
    }

    static String redissonVersion() {
        String v = Redisson.class.getPackage().getImplementationVersion();
        if (v != null) {
            return v;
        }
        try {
            String p = Redisson.class.getProtectionDomain().getCodeSource().getLocation().getPath();
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("redisson-([0-9][^/]*)\\.jar").matcher(p);
            if (m.find()) {
                return m.group(1);
            }
        } catch (Exception ignored) {
            // unknown
        }
        return "unknown";
    }

    // ---- S1 ----

    /** What S1 and S2 take and give back: a lock, or one permit of a semaphore. */
    interface Mut {
        void lock() throws Exception;

        void unlock() throws Exception;
    }

    private static Mut mut(RLock l) {
        return new Mut() {
            public void lock() {
                l.lock();
            }

            public void unlock() {
                l.unlock();
            }
        };
    }

    /** One permit of a semaphore of one permit (set before the run). */
    private static Mut semMut(RedissonClient c, String name) {
        org.redisson.api.RSemaphore s = c.getSemaphore(name);
        s.trySetPermits(1);
        return new Mut() {
            public void lock() throws InterruptedException {
                s.acquire();
            }

            public void unlock() {
                s.release();
            }
        };
    }

    private static Mut s1Mut(RedissonClient c, String kind, String name) {
        return kind.equals("sem") ? semMut(c, name) : mut(s1Lock(c, kind, name));
    }

    private static RLock s1Lock(RedissonClient c, String kind, String name) {
        switch (kind) {
            case "read":
                return c.getReadWriteLock(name).readLock();
            case "fenced":
                return c.getFencedLock(name);
            default:
                return c.getLock(name);
        }
    }

    private static String s1(int conc, long warmMs, long durMs, String kind) throws Exception {
        RedissonClient c = s1Client();
        AtomicInteger phase = new AtomicInteger();
        Hist[] hists = new Hist[conc];
        AtomicReference<Throwable> err = new AtomicReference<>();
        Thread[] ts = new Thread[conc];
        for (int i = 0; i < conc; i++) {
            Mut l = s1Mut(c, kind, "s1:redisson-" + kind + ":" + i);
            Hist h = new Hist();
            hists[i] = h;
            ts[i] = new Thread(() -> {
                try {
                    while (true) {
                        int p = phase.get();
                        if (p == 2) {
                            break;
                        }
                        long t = System.nanoTime();
                        l.lock();
                        l.unlock();
                        if (p == 1 && phase.get() == 1) {
                            h.add(System.nanoTime() - t);
                        }
                    }
                } catch (Throwable e) {
                    err.compareAndSet(null, e);
                }
            }, "s1-" + i);
            ts[i].setDaemon(true);
            ts[i].start();
        }
        Thread.sleep(warmMs);
        double rcpu0;
        double rcpu1;
        long ccpu0;
        long ccpu1;
        long start;
        double secs;
        try (Resp admin = new Resp(addr)) {
            rcpu0 = admin.serverCPU();
            ccpu0 = cpuTime();
            start = System.nanoTime();
            phase.set(1);
            Thread.sleep(durMs);
            phase.set(2);
            secs = (System.nanoTime() - start) / 1e9;
            ccpu1 = cpuTime();
            rcpu1 = admin.serverCPU();
        }
        String note = "";
        long deadline = System.currentTimeMillis() + 10_000;
        for (Thread t : ts) {
            t.join(Math.max(1, deadline - System.currentTimeMillis()));
            if (t.isAlive()) {
                note = "some threads did not return from lock/unlock within 10s after the end";
            }
        }
        if (err.get() != null) {
            return fail(err.get());
        }
        Hist all = new Hist();
        for (Hist h : hists) {
            all.merge(h);
        }
        long n = all.n;
        return "{\"ok\":true" + (note.isEmpty() ? "" : ",\"note\":" + q(note)) + ",\"ops\":" + n + ",\"seconds\":" + secs
                + ",\"rate\":" + (n / secs) + ",\"p50_us\":" + all.quantile(0.5) / 1e3 + ",\"p99_us\":" + all.quantile(0.99) / 1e3
                + ",\"ext\":{\"redis_cpu_us_per_op\":" + ((rcpu1 - rcpu0) * 1e6 / Math.max(n, 1)) + ",\"redis_cpu_pct\":" + (100 * (rcpu1 - rcpu0) / secs)
                + (ccpu0 > 0 && ccpu1 > 0 ? ",\"client_cpu_us_per_op\":" + ((ccpu1 - ccpu0) / 1e3 / Math.max(n, 1)) : "") + "}}";
    }

    // ---- S5: writer hand-off under readers ----

    /** The loops of bench.S5: readers lock+unlock and pause 2ms, one writer lock+unlock and pause 5ms. */
    private static String s5(int readers, long warmMs, long durMs) throws Exception {
        RedissonClient c = s1Client();
        String name = "s5:redisson:rw";
        AtomicInteger phase = new AtomicInteger();
        AtomicLong readPairs = new AtomicLong();
        AtomicReference<Throwable> err = new AtomicReference<>();
        Hist wh = new Hist();
        // The hand-off, as bench.S5's: the writer's grant minus the return
        // of the last read unlock before it (negative counted as 0).
        AtomicLong lastReadUnlock = new AtomicLong(Long.MIN_VALUE);
        Hist hh = new Hist();
        AtomicLong late = new AtomicLong(); // hand-offs measured negative
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i <= readers; i++) {
            boolean writer = i == readers;
            RLock l = writer ? c.getReadWriteLock(name).writeLock() : c.getReadWriteLock(name).readLock();
            Thread t = new Thread(() -> {
                try {
                    while (phase.get() != 2) {
                        long t0 = System.nanoTime();
                        l.lock();
                        long granted = System.nanoTime();
                        long waited = granted - t0;
                        long lu = lastReadUnlock.get();
                        l.unlock();
                        if (!writer) {
                            lastReadUnlock.set(System.nanoTime());
                        }
                        if (phase.get() == 1) {
                            if (writer) {
                                synchronized (wh) {
                                    wh.add(waited);
                                    if (lu != Long.MIN_VALUE && lu - t0 > 0) {
                                        if (granted - lu < 0) {
                                            late.incrementAndGet();
                                        }
                                        hh.add(Math.max(granted - lu, 0));
                                    }
                                }
                            } else {
                                readPairs.incrementAndGet();
                            }
                        }
                        Thread.sleep(writer ? 5 : 2);
                    }
                } catch (Throwable e) {
                    err.compareAndSet(null, e);
                }
            }, "s5-" + i);
            t.setDaemon(true);
            t.start();
            ts.add(t);
        }
        Thread.sleep(warmMs);
        long start = System.nanoTime();
        phase.set(1);
        Thread.sleep(durMs);
        phase.set(2);
        double secs = (System.nanoTime() - start) / 1e9;
        long deadline = System.currentTimeMillis() + 30_000;
        for (Thread t : ts) {
            t.join(Math.max(1, deadline - System.currentTimeMillis()));
        }
        if (err.get() != null) {
            return fail(err.get());
        }
        long n = wh.n;
        return "{\"ok\":true,\"ops\":" + n + ",\"seconds\":" + secs + ",\"rate\":" + (n / secs)
                + ",\"p50_us\":" + wh.quantile(0.5) / 1e3 + ",\"p99_us\":" + wh.quantile(0.99) / 1e3
                + ",\"ext\":{\"read_pairs_per_s\":" + (readPairs.get() / secs)
                + ",\"handoff_p50_us\":" + hh.quantile(0.5) / 1e3 + ",\"handoff_p99_us\":" + hh.quantile(0.99) / 1e3
                + ",\"handoffs\":" + hh.n + ",\"handoffs_late\":" + late.get() + "}}";
    }

    // ---- S2 ----

    private static final class Rec {
        int who;
        boolean measured;
        long start;
        long acq;
        long call;
        long unl;
    }

    /**
     * The latch release: rounds of n awaiter threads on a latch of count 1;
     * once all are parked, one countDown; each awaiter's latency is its
     * await return minus the countDown call's start.
     */
    private static String latch(int n, int rounds) throws Exception {
        RedissonClient c = s1Client();
        Hist h = new Hist();
        List<Long> alls = new ArrayList<>();
        long subs = 0;
        for (int r = 0; r < rounds; r++) {
            String name = "latch:redisson:" + r;
            org.redisson.api.RCountDownLatch l = c.getCountDownLatch(name);
            l.trySetCount(1);
            long[] back = new long[n];
            AtomicReference<Throwable> err = new AtomicReference<>();
            Thread[] ts = new Thread[n];
            for (int i = 0; i < n; i++) {
                int who = i;
                ts[i] = new Thread(() -> {
                    try {
                        l.await();
                        back[who] = System.nanoTime();
                    } catch (Throwable e) {
                        err.compareAndSet(null, e);
                    }
                }, "latch-" + i);
                ts[i].setDaemon(true);
                ts[i].start();
            }
            long deadline = System.currentTimeMillis() + 60_000;
            for (Thread t : ts) {
                while (t.getState() != Thread.State.WAITING && t.isAlive()) {
                    if (System.currentTimeMillis() > deadline) {
                        return "{\"ok\":false,\"error\":\"the awaiters never all waited\"}";
                    }
                    Thread.sleep(1);
                }
            }
            try (Resp admin = new Resp(addr)) {
                subs = Math.max(subs, admin.numsub("redisson_countdownlatch__channel__{" + name + "}"));
            }
            long t0 = System.nanoTime();
            l.countDown();
            long last = 0;
            for (int i = 0; i < n; i++) {
                ts[i].join(60_000);
                if (ts[i].isAlive()) {
                    return "{\"ok\":false,\"error\":\"an awaiter was not released within a minute\"}";
                }
                long d = back[i] - t0;
                h.add(d);
                last = Math.max(last, d);
            }
            if (err.get() != null) {
                return fail(err.get());
            }
            alls.add(last);
        }
        java.util.Collections.sort(alls);
        return "{\"ok\":true,\"ops\":" + h.n + ",\"p50_us\":" + h.quantile(0.5) / 1e3 + ",\"p99_us\":" + h.quantile(0.99) / 1e3
                + ",\"waiters\":" + n + ",\"ext\":{\"all_us\":" + alls.get(alls.size() / 2) / 1e3 + ",\"subs\":" + subs + "}}";
    }

    /** One client per independent master (redlock), by address. */
    private static final Map<String, RedissonClient> masterClients = new HashMap<>();

    private static synchronized RedissonClient masterClient(String a) {
        return masterClients.computeIfAbsent(a, x -> {
            Config c = new Config();
            c.useSingleServer().setAddress("redis://" + x);
            return Redisson.create(c);
        });
    }

    /**
     * RedLock pairs on one thread: lock() then unlock() of a RedissonRedLock
     * over getLock(name) of the first n masters (n == 1: that lock alone).
     */
    private static String redlock(int n, long warmMs, long durMs, String[] addrs) throws Exception {
        RLock[] ms = new RLock[n];
        for (int i = 0; i < n; i++) {
            ms[i] = masterClient(addrs[i]).getLock("redlock:redisson");
        }
        RLock l = n == 1 ? ms[0] : new org.redisson.RedissonRedLock(ms);
        Hist h = new Hist();
        long ops = 0;
        long start = System.nanoTime();
        long from = start + warmMs * 1_000_000;
        long until = from + durMs * 1_000_000;
        while (true) {
            long t = System.nanoTime();
            if (t > until) {
                break;
            }
            l.lock();
            l.unlock();
            if (t > from) {
                h.add(System.nanoTime() - t);
                ops++;
            }
        }
        double secs = durMs / 1e3;
        return "{\"ok\":true,\"ops\":" + ops + ",\"seconds\":" + secs + ",\"rate\":" + (ops / secs)
                + ",\"p50_us\":" + h.quantile(0.5) / 1e3 + ",\"p99_us\":" + h.quantile(0.99) / 1e3 + "}";
    }

    /** S2's two clients of another address than the main one (a link in front of it), by address. */
    private static final Map<String, RedissonClient[]> s2Others = new HashMap<>();

    private static synchronized RedissonClient[] s2Clients(String a) {
        if (!a.equals(addr)) {
            return s2Others.computeIfAbsent(a, x -> {
                Config c = new Config();
                c.useSingleServer().setAddress("redis://" + x);
                Config d = new Config();
                d.useSingleServer().setAddress("redis://" + x);
                return new RedissonClient[] {Redisson.create(c), Redisson.create(d)};
            });
        }
        if (s2a == null) {
            s2a = Redisson.create(config());
            s2b = Redisson.create(config());
        }
        return new RedissonClient[] {s2a, s2b};
    }

    private static String s2(int conc, long warmMs, long durMs, long maxMs, long minAcq, long csUs, String kind, String a) throws Exception {
        RedissonClient[] cs = s2Clients(a);
        boolean fair = kind.equals("fair");
        String name = "s2:redisson:" + kind;
        long base = System.nanoTime();
        long csNs = csUs * 1000;
        List<Rec> recs = new ArrayList<>();
        AtomicLong seq = new AtomicLong();
        AtomicInteger inCS = new AtomicInteger();
        AtomicLong viol = new AtomicLong();
        AtomicInteger phase = new AtomicInteger();
        Object lapMu = new Object();
        long[] lap = {0};
        int[] lapCount = {0};
        AtomicReference<Throwable> err = new AtomicReference<>();
        Thread[] ts = new Thread[conc];
        for (int i = 0; i < conc; i++) {
            Mut l = kind.equals("sem") ? semMut(cs[i % 2], name) : mut(fair ? cs[i % 2].getFairLock(name) : cs[i % 2].getLock(name));
            int who = i;
            ts[i] = new Thread(() -> {
                long myLap = 0;
                try {
                    while (true) {
                        synchronized (lapMu) {
                            while (lap[0] < myLap && phase.get() != 2) {
                                lapMu.wait();
                            }
                        }
                        if (phase.get() == 2) {
                            return;
                        }
                        long st = System.nanoTime() - base;
                        l.lock();
                        long t = System.nanoTime() - base;
                        if (!inCS.compareAndSet(0, 1)) {
                            viol.incrementAndGet();
                        }
                        long k = seq.getAndIncrement();
                        Rec r = new Rec();
                        r.who = who;
                        r.measured = phase.get() == 1;
                        r.start = st;
                        r.acq = t;
                        synchronized (recs) {
                            while (recs.size() <= k) {
                                recs.add(null);
                            }
                            recs.set((int) k, r);
                        }
                        long end = System.nanoTime() + csNs;
                        while (System.nanoTime() < end) {
                            Thread.onSpinWait();
                        }
                        inCS.set(0);
                        long call = System.nanoTime() - base;
                        l.unlock();
                        long u = System.nanoTime() - base;
                        synchronized (recs) {
                            r.call = call;
                            r.unl = u;
                        }
                        myLap++;
                        synchronized (lapMu) {
                            if (++lapCount[0] == conc) {
                                lapCount[0] = 0;
                                lap[0]++;
                                lapMu.notifyAll();
                            }
                        }
                    }
                } catch (Throwable e) {
                    err.compareAndSet(null, e);
                }
            }, "s2-" + i);
            ts[i].setDaemon(true);
            ts[i].start();
        }
        Thread.sleep(warmMs);
        long[] st0;
        long[] st1;
        long k0;
        long k1;
        double secs;
        try (Resp admin = new Resp(addr)) {
            st0 = admin.scriptStats();
            k0 = seq.get();
            long start = System.nanoTime();
            phase.set(1);
            Thread.sleep(durMs);
            while (seq.get() - k0 < minAcq && (System.nanoTime() - start) / 1_000_000 < maxMs) {
                Thread.sleep(50);
            }
            k1 = seq.get();
            secs = (System.nanoTime() - start) / 1e9;
            st1 = admin.scriptStats();
        }
        phase.set(2);
        synchronized (lapMu) {
            lapMu.notifyAll();
        }
        long deadline = System.currentTimeMillis() + 10_000;
        int stuck = 0;
        for (Thread t : ts) {
            t.join(Math.max(1, deadline - System.currentTimeMillis()));
            if (t.isAlive()) {
                stuck++;
            }
        }
        String note = stuck == 0 ? "" : stuck + " thread(s) still waiting in lock() 10s after the end, with the lock free";
        if (err.get() != null) {
            return fail(err.get());
        }
        Hist hRet = new Hist();
        Hist hCall = new Hist();
        long n = 0;
        long negative = 0;
        synchronized (recs) {
            for (int k = 0; k + 1 < recs.size(); k++) {
                Rec p = recs.get(k);
                Rec qq = recs.get(k + 1);
                if (p == null || qq == null || !p.measured || !qq.measured || p.unl == 0 || qq.start > p.acq) {
                    continue;
                }
                if (qq.acq < p.unl) {
                    negative++;
                }
                hRet.add(qq.acq - p.unl);
                hCall.add(qq.acq - p.call);
                n++;
            }
        }
        long acquires = k1 - k0;
        return "{\"ok\":true" + (note.isEmpty() ? "" : ",\"note\":" + q(note)) + ",\"ops\":" + n + ",\"acquires\":" + acquires + ",\"seconds\":" + secs + ",\"rate\":" + (acquires / secs)
                + ",\"p50_us\":" + hRet.quantile(0.5) / 1e3 + ",\"p99_us\":" + hRet.quantile(0.99) / 1e3
                + ",\"violations\":" + viol.get()
                + ",\"ext\":{\"from_call_p50_us\":" + hCall.quantile(0.5) / 1e3 + ",\"from_call_p99_us\":" + hCall.quantile(0.99) / 1e3
                + ",\"negative_share\":" + ((double) negative / Math.max(n, 1))
                + ",\"scripts_per_acq\":" + ((double) (st1[0] - st0[0]) / Math.max(acquires, 1))
                + ",\"cmds_per_acq\":" + ((double) (st1[2] - st0[2]) / Math.max(acquires, 1)) + "}}";
    }

    // ---- S3 ----

    private static String s3(int n, long watchdogMs, long holdMs) throws Exception {
        Config cfg = config();
        cfg.setLockWatchdogTimeout(watchdogMs);
        RedissonClient c = Redisson.create(cfg);
        try (Resp admin = new Resp(addr)) {
            long mem0 = liveMem();
            RLock[] locks = new RLock[n];
            Semaphore sem = new Semaphore(64);
            CountDownLatch done = new CountDownLatch(n);
            AtomicReference<Throwable> err = new AtomicReference<>();
            long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                sem.acquire();
                RLock l = c.getLock("s3:redisson:" + i);
                locks[i] = l;
                l.lockAsync(i + 1L).whenComplete((v, e) -> {
                    if (e != null) {
                        err.compareAndSet(null, e);
                    }
                    sem.release();
                    done.countDown();
                });
            }
            if (!done.await(90, TimeUnit.SECONDS)) {
                return fail(new IllegalStateException("taking the locks: only " + (n - done.getCount()) + " of " + n + " returned within 90s"));
            }
            if (err.get() != null) {
                return fail(err.get());
            }
            double acquireS = (System.nanoTime() - t0) / 1e9;
            liveMem();
            boolean quiet = admin.waitQuiet(2 * watchdogMs / 3 + 1000);
            long[] st0 = admin.scriptStats();
            long cpu0 = cpuTime();
            long w0 = System.nanoTime();
            Thread.sleep(holdMs);
            long cpu1 = cpuTime();
            long w1 = System.nanoTime();
            long[] st1 = admin.scriptStats();
            long mem1 = liveMem();
            long held = admin.integer("DBSIZE");
            double wall = (w1 - w0) / 1e9;
            long calls = st1[0] - st0[0];
            double cpuS = (cpu1 - cpu0) / 1e9;
            String res = "{\"ok\":true" + (quiet ? "" : ",\"note\":\"renewals never paused for 100ms: the window is not aligned to a round\"")
                    + ",\"locks\":" + n + ",\"acquire_s\":" + acquireS + ",\"hold_s\":" + wall
                    + ",\"period_s\":" + (watchdogMs / 3 / 1000.0) + ",\"script_calls\":" + calls + ",\"script_per_s\":" + (calls / wall)
                    + ",\"script_us_per_s\":" + ((st1[1] - st0[1]) / wall) + ",\"cpu_s\":" + cpuS + ",\"cpu_pct\":" + (100 * cpuS / wall)
                    + ",\"mem_bytes\":" + (mem1 - mem0) + ",\"mem_total_bytes\":" + mem1 + ",\"still_held\":" + held
                    + ",\"ext\":{\"heap_bytes\":" + (mem1 - mem0) + "}}";
            CountDownLatch released = new CountDownLatch(n);
            for (int i = 0; i < n; i++) {
                sem.acquire();
                locks[i].unlockAsync(i + 1L).whenComplete((v, e) -> {
                    sem.release();
                    released.countDown();
                });
            }
            released.await(90, TimeUnit.SECONDS);
            return res;
        } finally {
            c.shutdown();
        }
    }

    // ---- S4 ----

    private static String s4(int locks, int per, long settleMs, long timeoutMs, int subsPerConn) throws Exception {
        Config cfg = config();
        if (subsPerConn > 0) {
            cfg.useSingleServer().setSubscriptionsPerConnection(subsPerConn);
        }
        RedissonClient c = Redisson.create(cfg);
        try (Resp admin = new Resp(addr)) {
            RLock[] ls = new RLock[locks];
            String[] channels = new String[locks];
            CountDownLatch held = new CountDownLatch(locks);
            AtomicReference<Throwable> err = new AtomicReference<>();
            for (int i = 0; i < locks; i++) {
                String name = "s4:redisson:" + i;
                channels[i] = "redisson_lock__channel:{" + name + "}";
                ls[i] = c.getLock(name);
                ls[i].lockAsync(1_000_000_000L + i).whenComplete((v, e) -> {
                    if (e != null) {
                        err.compareAndSet(null, e);
                    }
                    held.countDown();
                });
            }
            if (!held.await(90, TimeUnit.SECONDS) || err.get() != null) {
                return fail(err.get() != null ? err.get() : new IllegalStateException("holders did not get their locks"));
            }
            long mem0 = liveMem();
            int total = locks * per;
            CountDownLatch all = new CountDownLatch(total);
            AtomicLong through = new AtomicLong();
            AtomicLong failed = new AtomicLong();
            AtomicLong lastDone = new AtomicLong();
            AtomicReference<Throwable> firstErr = new AtomicReference<>();
            long base = System.nanoTime();
            for (int j = 0; j < locks; j++) {
                RLock l = ls[j];
                for (int k = 0; k < per; k++) {
                    long id = (long) j * per + k + 1;
                    l.lockAsync(id).whenComplete((v, e) -> {
                        if (e != null) {
                            firstErr.compareAndSet(null, e);
                            failed.incrementAndGet();
                            all.countDown();
                            return;
                        }
                        l.unlockAsync(id).whenComplete((v2, e2) -> {
                            if (e2 == null) {
                                through.incrementAndGet();
                                lastDone.set(System.nanoTime() - base);
                            } else {
                                firstErr.compareAndSet(null, e2);
                                failed.incrementAndGet();
                            }
                            all.countDown();
                        });
                    });
                }
            }
            Thread.sleep(settleMs);
            long active = admin.arrayLen("PUBSUB", "CHANNELS");
            long numsub = 0;
            for (int i = 0; i < locks; i += 500) {
                List<String> args = new ArrayList<>();
                args.add("PUBSUB");
                args.add("NUMSUB");
                for (int x = i; x < Math.min(locks, i + 500); x++) {
                    args.add(channels[x]);
                }
                List<?> r = (List<?>) admin.call(args.toArray(new String[0]));
                for (int x = 1; x < r.size(); x += 2) {
                    numsub += (Long) r.get(x);
                }
            }
            long mem1 = liveMem();
            long t0 = System.nanoTime() - base;
            for (int i = 0; i < locks; i++) {
                ls[i].unlockAsync(1_000_000_000L + i);
            }
            boolean finished = all.await(timeoutMs, TimeUnit.MILLISECONDS);
            long th = through.get();
            double throughS = finished && th == total ? (lastDone.get() - t0) / 1e9 : timeoutMs / 1e3;
            String note = "";
            if (th < total) {
                note = th + " of " + total + " waiters through within " + timeoutMs + "ms";
                if (firstErr.get() != null) {
                    note += "; " + failed.get() + " failed, first error: " + firstErr.get();
                }
            }
            return "{\"ok\":true" + (note.isEmpty() ? "" : ",\"note\":" + q(note)) + ",\"waiters\":" + total
                    + ",\"channels\":" + active + ",\"numsub\":" + numsub + ",\"mem_bytes\":" + (mem1 - mem0)
                    + ",\"mem_total_bytes\":" + mem1 + ",\"through\":" + th + ",\"through_s\":" + throughS
                    + ",\"ext\":{\"heap_bytes\":" + (mem1 - mem0) + "}}";
        } finally {
            c.shutdown();
        }
    }

    // ---- helpers ----

    private static long liveMem() throws InterruptedException {
        System.gc();
        Thread.sleep(50);
        System.gc();
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    private static long cpuTime() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return 0;
    }

    private static String fail(Throwable t) {
        return "{\"ok\":false,\"error\":" + q(String.valueOf(t)) + "}";
    }

    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"':
                    b.append("\\\"");
                    break;
                case '\\':
                    b.append("\\\\");
                    break;
                case '\n':
                    b.append("\\n");
                    break;
                case '\r':
                    b.append("\\r");
                    break;
                case '\t':
                    b.append("\\t");
                    break;
                default:
                    if (ch < 0x20) {
                        b.append(String.format("\\u%04x", (int) ch));
                    } else {
                        b.append(ch);
                    }
            }
        }
        return b.append('"').toString();
    }

    /** Log-linear latency histogram, the same buckets as bench/hist.go. */
    static final class Hist {
        final long[] counts = new long[2048];
        long n;

        static int bucket(long ns) {
            if (ns < 64) {
                return (int) ns;
            }
            int e = 64 - Long.numberOfLeadingZeros(ns) - 6;
            return e * 32 + (int) (ns >>> e);
        }

        static long value(int i) {
            if (i < 64) {
                return i;
            }
            int e = i / 32 - 1;
            long m = i - e * 32L;
            return ((m << e) + ((m + 1) << e)) / 2;
        }

        void add(long ns) {
            int b = bucket(Math.max(0, ns));
            counts[Math.min(b, counts.length - 1)]++;
            n++;
        }

        void merge(Hist o) {
            for (int i = 0; i < counts.length; i++) {
                counts[i] += o.counts[i];
            }
            n += o.n;
        }

        double quantile(double q) {
            if (n == 0) {
                return 0;
            }
            long rank = (long) (q * (n - 1)) + 1;
            long seen = 0;
            for (int i = 0; i < counts.length; i++) {
                seen += counts[i];
                if (seen >= rank) {
                    return value(i);
                }
            }
            return 0;
        }
    }

    /** A minimal RESP client for the measurements (INFO, DBSIZE, PUBSUB), outside Redisson. */
    static final class Resp implements AutoCloseable {
        private final Socket s;
        private final InputStream in;
        private final OutputStream o;

        Resp(String hostPort) throws IOException {
            int i = hostPort.lastIndexOf(':');
            s = new Socket(hostPort.substring(0, i), Integer.parseInt(hostPort.substring(i + 1)));
            s.setTcpNoDelay(true);
            in = new BufferedInputStream(s.getInputStream());
            o = s.getOutputStream();
        }

        Object call(String... args) throws IOException {
            StringBuilder b = new StringBuilder("*").append(args.length).append("\r\n");
            for (String a : args) {
                byte[] bs = a.getBytes(StandardCharsets.UTF_8);
                b.append('$').append(bs.length).append("\r\n").append(a).append("\r\n");
            }
            o.write(b.toString().getBytes(StandardCharsets.UTF_8));
            o.flush();
            return read();
        }

        long integer(String... args) throws IOException {
            return (Long) call(args);
        }

        long arrayLen(String... args) throws IOException {
            return ((List<?>) call(args)).size();
        }

        /** PUBSUB NUMSUB of one channel. */
        long numsub(String channel) throws IOException {
            return (Long) ((List<?>) call("PUBSUB", "NUMSUB", channel)).get(1);
        }

        /** used_cpu_user + used_cpu_sys of INFO cpu, in seconds. */
        double serverCPU() throws IOException {
            double t = 0;
            for (String line : ((String) call("INFO", "cpu")).split("\n")) {
                line = line.trim();
                if (line.startsWith("used_cpu_user:") || line.startsWith("used_cpu_sys:")) {
                    t += Double.parseDouble(line.substring(line.indexOf(':') + 1));
                }
            }
            return t;
        }

        /** Waits, at most maxMs, for a burst of script calls followed by 100ms without any. */
        boolean waitQuiet(long maxMs) throws IOException, InterruptedException {
            long deadline = System.nanoTime() + maxMs * 1_000_000;
            long last = -1;
            boolean burst = false;
            long quietSince = System.nanoTime();
            while (System.nanoTime() < deadline) {
                long n = scriptStats()[0];
                if (last >= 0 && n != last) {
                    burst = true;
                    quietSince = System.nanoTime();
                } else if (burst && System.nanoTime() - quietSince >= 100_000_000L) {
                    return true;
                }
                last = n;
                Thread.sleep(10);
            }
            return false;
        }

        /**
         * Calls and usec of EVAL, EVALSHA and their kin, and the calls of every
         * command but INFO (those inside scripts included), from INFO commandstats.
         */
        long[] scriptStats() throws IOException {
            String info = (String) call("INFO", "commandstats");
            long calls = 0;
            long usec = 0;
            long all = 0;
            for (String line : info.split("\n")) {
                line = line.trim();
                int colon = line.indexOf(':');
                if (colon < 0 || !line.startsWith("cmdstat_")) {
                    continue;
                }
                String cmd = line.substring("cmdstat_".length(), colon);
                Map<String, String> kv = new HashMap<>();
                for (String p : line.substring(colon + 1).split(",")) {
                    int eq = p.indexOf('=');
                    if (eq > 0) {
                        kv.put(p.substring(0, eq), p.substring(eq + 1));
                    }
                }
                if (!cmd.equals("info")) {
                    all += Long.parseLong(kv.getOrDefault("calls", "0"));
                }
                if (!cmd.equals("eval") && !cmd.equals("evalsha") && !cmd.equals("eval_ro") && !cmd.equals("evalsha_ro")
                        && !cmd.equals("fcall") && !cmd.equals("fcall_ro")) {
                    continue;
                }
                calls += Long.parseLong(kv.getOrDefault("calls", "0"));
                usec += Long.parseLong(kv.getOrDefault("usec", "0"));
            }
            return new long[] {calls, usec, all};
        }

        private String line() throws IOException {
            StringBuilder b = new StringBuilder();
            int c;
            while ((c = in.read()) != -1) {
                if (c == '\r') {
                    in.read(); // '\n'
                    break;
                }
                b.append((char) c);
            }
            return b.toString();
        }

        private Object read() throws IOException {
            int t = in.read();
            String l = line();
            switch (t) {
                case '+':
                    return l;
                case '-':
                    throw new IOException("redis: " + l);
                case ':':
                    return Long.parseLong(l);
                case '$': {
                    int n = Integer.parseInt(l);
                    if (n < 0) {
                        return null;
                    }
                    byte[] buf = in.readNBytes(n);
                    in.read();
                    in.read();
                    return new String(buf, StandardCharsets.UTF_8);
                }
                case '*': {
                    int n = Integer.parseInt(l);
                    List<Object> xs = new ArrayList<>();
                    for (int i = 0; i < n; i++) {
                        xs.add(read());
                    }
                    return xs;
                }
                default:
                    throw new IOException("unexpected RESP type " + (char) t);
            }
        }

        @Override
        public void close() throws IOException {
            s.close();
        }
    }
}
