import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;

/**
 * Redisson interop driver, controlled line by line over stdin/stdout by the Go
 * package github.com/goredisson/locks/interop_test/driver.
 *
 * <pre>
 * java -cp 'driver.jar:lib-VERSION/*' Driver ADDRS WATCHDOG_MS single|cluster|masters [prefix=P]
 *   ADDRS        host:port (single) or comma-separated host:port list (cluster:
 *                seed nodes; masters: one independent master each, a client per
 *                master, retrying a call to a stopped master once after 300 ms);
 *                a redis:// prefix is added when missing
 *   WATCHDOG_MS  Config.setLockWatchdogTimeout; 0 or less keeps Redisson's default
 *   prefix=P     single mode only: a NameMapper that prefixes every name with P
 * </pre>
 *
 * Once Redisson is connected the driver prints {@code ready VERSION} (the
 * Redisson version found on the class path). Then every stdin line is
 * {@code ID CMD ARGS...} and gets exactly one stdout line {@code ID ok [VALUE]} or
 * {@code ID err EXCEPTION_SIMPLE_NAME [MESSAGE ON ONE LINE]}. Replies to
 * commands on different threads may come out of order: match them by ID.
 *
 * <p>Commands naming a thread T run, in order, on one long-lived Java thread per
 * name (created on first use); commands for different threads run concurrently.
 * Commands without a thread run in order on one internal thread.
 *
 * <pre>
 * lock T name                    RLock.lock()                          ok
 * locklease T name leaseMs       RLock.lock(leaseMs, MILLISECONDS)     ok
 * trylock T name waitMs leaseMs  waitMs &lt; 0: RLock.tryLock();
 *                                else tryLock(waitMs, leaseMs, MILLISECONDS)
 *                                (leaseMs -1 = watchdog)               ok true|false
 * unlock T name                  RLock.unlock()                        ok
 * holdcount T name               RLock.getHoldCount()                  ok 3
 * isheld T name                  RLock.isHeldByCurrentThread()         ok true|false
 * threadid T                     Java thread id of T                   ok 42
 * incr T name key n sleepMs      n times { lock name; v = GET key (StringCodec bucket);
 *                                sleep sleepMs; SET key v+1; unlock }  ok LAST_VALUE_SET
 * sleep T ms                     sleep on thread T                     ok
 * sleep ms                       sleep on the stdin reader: delays the intake of all
 *                                later commands                        ok
 * locktoken T name               RFencedLock.lockAndGetToken()         ok 7
 * trylocktoken T name waitMs leaseMs
 *                                RFencedLock.tryLockAndGetToken(waitMs, leaseMs, MILLISECONDS)
 *                                                                      ok 7|null
 * token name                     RFencedLock.getToken()                ok 7|null
 * forceunlock name               RLock.forceUnlock()                   ok true|false
 * islocked name                  RLock.isLocked()                      ok true|false
 * ttl name                       RLock.remainTimeToLive() (ms; -2 none, -1 no expiry) ok 9876
 * clientid                       Redisson's client id, the prefix of lock hash fields
 *                                CLIENTID:THREADID                     ok UUID
 * parked T                       whether thread T is parked on a
 *                                java.util.concurrent.Semaphore (the wait of
 *                                Redisson's lock and semaphore entry latch) or
 *                                a ReclosableLatch (a count-down latch's)  ok true|false
 * Synchronizers (RSemaphore S, RPermitExpirableSemaphore P, RCountDownLatch L
 * of client, the first one in masters mode); T: commands that wait run on T:
 * semtryset name n               S.trySetPermits(n)                    ok true|false
 * semacquire T name n            S.acquire(n)                          ok
 * semtryacquire T name n waitMs  waitMs &lt; 0: S.tryAcquire(n), else
 *                                S.tryAcquire(n, waitMs, MILLISECONDS) ok true|false
 * semrelease name n, semadd name n                                     ok
 * semavail name, semdrain name   availablePermits(), drainPermits()    ok 3
 * psemtryset name n, psemset name n, psemadd name n, psemavail name
 * psemacquire T name leaseMs     leaseMs &lt; 0: P.acquire(), else
 *                                P.acquire(leaseMs, MILLISECONDS)      ok ID
 * psemtryacquire T name waitMs leaseMs
 *                                waitMs &lt; 0: P.tryAcquire(), else
 *                                P.tryAcquire(waitMs, leaseMs, MILLISECONDS) ok ID|null
 * psemrelease name id            P.release(id)                         ok
 * psemtryrelease name id         P.tryRelease(id)                      ok true|false
 * psemupdate name id leaseMs     P.updateLeaseTime(id, leaseMs, MILLISECONDS) ok true|false
 * latchtryset name n, latchcountdown name, latchcount name, latchdelete name
 * latchawait T name waitMs       waitMs &lt; 0: L.await() (ok true), else
 *                                L.await(waitMs, MILLISECONDS)         ok true|false
 * info                           ok version=V clientidsrc=HOW java=J
 * quit                           shuts Redisson down, replies, exits 0 ok
 * </pre>
 *
 * A name "KIND@name" selects another member of the family: read@ and write@
 * (getReadWriteLock(name).readLock()/writeLock()), fenced@ (getFencedLock),
 * spin@ (getSpinLock), nr@ (getNonReentrantLock, 4.4+), fair@ (getFairLock),
 * nrfair@ (getNonReentrantFairLock, 4.4+); in masters mode (one client per
 * address) multi@ and red@ (a RedissonMultiLock / RedissonRedLock of
 * getLock(name) on every client, in address order) and m<i>@ (getLock on
 * the client of address i); a plain name is
 * getLock(name).
 *
 * End of stdin shuts down and exits 0 too. Logging goes to stderr only
 * (slf4j-simple, WARN); System.out is redirected to stderr so that nothing but
 * protocol replies can reach stdout.
 */
public final class Driver {
    private static final String MAIN_WORKER = "@driver";

    private static PrintStream protocolOut;
    private static RedissonClient client;
    /** In masters mode: the clients of the other masters, in address order. */
    private static final java.util.List<RedissonClient> others = new java.util.ArrayList<>();
    private static String clientId;
    private static String clientIdSource;
    private static final Map<String, Worker> workers = new HashMap<>(); // reader thread only
    /**
     * One RLock object per name, shared by every thread, as an application
     * that keeps its RLock in a field would. Redisson keeps per-object state
     * (internalLockLeaseTime: the lease a partial unlock restores), so a
     * fresh getLock per command would lose the lease of lock(lease).
     */
    private static final Map<String, RLock> locks = new ConcurrentHashMap<>();

    private Driver() {}

    public static void main(String[] args) throws Exception {
        protocolOut = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);

        if (args.length != 3 && !(args.length == 4 && args[3].startsWith("prefix="))) {
            System.err.println("usage: Driver ADDRS WATCHDOG_MS single|cluster|masters [prefix=P]");
            System.exit(2);
        }
        String[] addrs = args[0].split(",");
        long watchdogMs = Long.parseLong(args[1]);
        String mode = args[2];
        String namePrefix = args.length == 4 ? args[3].substring("prefix=".length()) : "";
        if (!namePrefix.isEmpty() && !mode.equals("single")) {
            System.err.println("prefix= is supported in single mode only, got mode " + mode);
            System.exit(2);
        }

        Config config = new Config();
        if (watchdogMs > 0) {
            config.setLockWatchdogTimeout(watchdogMs);
        }
        switch (mode) {
            case "single":
                if (addrs.length != 1) {
                    System.err.println("single mode takes exactly one address, got " + args[0]);
                    System.exit(2);
                }
                org.redisson.config.SingleServerConfig sc = config.useSingleServer().setAddress(url(addrs[0]));
                if (!namePrefix.isEmpty()) {
                    setNameMapper(config, sc, namePrefix);
                }
                break;
            case "masters":
                break; // set up below
            case "cluster":
                ClusterServersConfig cc = config.useClusterServers();
                for (String a : addrs) {
                    cc.addNodeAddress(url(a));
                }
                break;
            default:
                System.err.println("mode must be single, cluster or masters, got " + mode);
                System.exit(2);
        }

        if (mode.equals("masters")) {
            // One client per independent master; the first is the main one.
            for (int i = 1; i < addrs.length; i++) {
                Config c = new Config();
                if (watchdogMs > 0) {
                    c.setLockWatchdogTimeout(watchdogMs);
                }
                quickRetries(c.useSingleServer().setAddress(url(addrs[i])));
                try {
                    others.add(Redisson.create(c));
                } catch (Throwable t) {
                    System.err.println("driver: cannot start Redisson for " + addrs[i] + ": " + t);
                    System.exit(1);
                }
            }
            quickRetries(config.useSingleServer().setAddress(url(addrs[0])));
        }
        try {
            client = Redisson.create(config);
        } catch (Throwable t) {
            System.err.println("driver: cannot start Redisson " + redissonVersion() + " (" + mode + " " + args[0] + "): " + t);
            t.printStackTrace();
            System.exit(1);
        }
        resolveClientId();
        reply("ready " + redissonVersion());

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\\s+");
            String id = f[0];
            if (f.length < 2) {
                reply(id + " err IllegalArgumentException missing command");
                continue;
            }
            dispatch(id, f[1], Arrays.copyOfRange(f, 2, f.length));
        }
        shutdown();
        System.exit(0);
    }

    /**
     * Masters mode (RedLock and MultiLock over independent masters, one of
     * them stopped in some scenarios): a call to a stopped master fails
     * after one retry 300 ms later, not Redisson's default three retries
     * 1.5 s apart, so that each RedLock call with a master down takes well
     * under a second instead of several (the outcomes are the same: the
     * member is not acquired). The timeouts stay Redisson's defaults.
     */
    private static void quickRetries(org.redisson.config.SingleServerConfig sc) {
        sc.setRetryAttempts(1);
        sc.setRetryInterval(300);
    }

    /**
     * A NameMapper that prefixes every name, set on the Config where the
     * version has Config.setNameMapper (4.x; the server config's is
     * deprecated there) and on the server config otherwise (3.x). All by
     * reflection: the interface is org.redisson.api.NameMapper in 3.x and
     * org.redisson.config.NameMapper in 4.x, and the driver is compiled
     * once, against the oldest version.
     */
    private static void setNameMapper(Config config, Object serverConfig, String prefix) {
        Class<?> iface;
        try {
            iface = Class.forName("org.redisson.config.NameMapper");
        } catch (ClassNotFoundException e) {
            try {
                iface = Class.forName("org.redisson.api.NameMapper");
            } catch (ClassNotFoundException e2) {
                throw new IllegalStateException("this Redisson has no NameMapper", e2);
            }
        }
        Object m = java.lang.reflect.Proxy.newProxyInstance(iface.getClassLoader(), new Class<?>[] {iface}, (proxy, method, a) -> {
            switch (method.getName()) {
                case "map":
                    return prefix + a[0];
                case "unmap": {
                    String n = (String) a[0];
                    return n.startsWith(prefix) ? n.substring(prefix.length()) : n;
                }
                case "hashCode":
                    return System.identityHashCode(proxy);
                case "equals":
                    return proxy == a[0];
                case "toString":
                    return "NameMapper(" + prefix + ")";
                default:
                    throw new UnsupportedOperationException(method.getName());
            }
        });
        try {
            try {
                Config.class.getMethod("setNameMapper", iface).invoke(config, m);
            } catch (NoSuchMethodException e) {
                serverConfig.getClass().getMethod("setNameMapper", iface).invoke(serverConfig, m);
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String url(String addr) {
        return addr.contains("://") ? addr : "redis://" + addr;
    }

    private static void dispatch(String id, String cmd, String[] a) {
        switch (cmd) {
            case "parked": {
                // Runs on the reader: it looks at thread T from outside.
                Worker w = a.length == 1 ? workers.get(a[0]) : null;
                boolean parked = w != null && w.parkedOnSemaphore();
                run(id, () -> {
                    need(a, 1, "parked T");
                    return Boolean.toString(parked);
                });
                return;
            }
            case "quit":
                shutdown();
                reply(id + " ok");
                System.exit(0);
                return;
            case "sleep":
                if (a.length == 1) { // on the reader: holds back every later command
                    run(id, () -> {
                        Thread.sleep(parseLong(a[0]));
                        return null;
                    });
                    return;
                }
                worker(a).submit(id, () -> exec(cmd, a));
                return;
            case "lock":
            case "locklease":
            case "trylock":
            case "unlock":
            case "holdcount":
            case "isheld":
            case "threadid":
            case "incr":
            case "locktoken":
            case "trylocktoken":
            case "semacquire":
            case "semtryacquire":
            case "psemacquire":
            case "psemacquiren":
            case "psemtryacquire":
            case "latchawait":
                worker(a).submit(id, () -> exec(cmd, a));
                return;
            default:
                workerNamed(MAIN_WORKER).submit(id, () -> exec(cmd, a));
        }
    }

    private static Worker worker(String[] a) {
        if (a.length == 0) {
            // Run on the main worker: exec reports the usage error in order.
            return workerNamed(MAIN_WORKER);
        }
        return workerNamed(a[0]);
    }

    private static Worker workerNamed(String name) {
        return workers.computeIfAbsent(name, Worker::new);
    }

    /** Executes one command on the current thread; returns the ok value or null. */
    private static String exec(String cmd, String[] a) throws Exception {
        switch (cmd) {
            case "lock":
                need(a, 2, "lock T name");
                lock(a[1]).lock();
                return null;
            case "locklease":
                need(a, 3, "locklease T name leaseMs");
                lock(a[1]).lock(parseLong(a[2]), TimeUnit.MILLISECONDS);
                return null;
            case "trylock": {
                need(a, 4, "trylock T name waitMs leaseMs");
                long waitMs = parseLong(a[2]);
                long leaseMs = parseLong(a[3]);
                RLock l = lock(a[1]);
                boolean ok = waitMs < 0 ? l.tryLock() : l.tryLock(waitMs, leaseMs, TimeUnit.MILLISECONDS);
                return Boolean.toString(ok);
            }
            case "unlock":
                need(a, 2, "unlock T name");
                lock(a[1]).unlock();
                return null;
            case "holdcount":
                need(a, 2, "holdcount T name");
                return Integer.toString(lock(a[1]).getHoldCount());
            case "isheld":
                need(a, 2, "isheld T name");
                return Boolean.toString(lock(a[1]).isHeldByCurrentThread());
            case "threadid":
                need(a, 1, "threadid T");
                return Long.toString(currentThreadId());
            case "incr":
                need(a, 5, "incr T name key n sleepMs");
                return incr(a[1], a[2], parseLong(a[3]), parseLong(a[4]));
            case "sleep":
                need(a, 2, "sleep [T] ms");
                Thread.sleep(parseLong(a[1]));
                return null;
            case "locktoken":
                need(a, 2, "locktoken T name");
                return String.valueOf(fenced(a[1]).lockAndGetToken());
            case "trylocktoken":
                need(a, 4, "trylocktoken T name waitMs leaseMs");
                return String.valueOf(fenced(a[1]).tryLockAndGetToken(parseLong(a[2]), parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "token":
                need(a, 1, "token name");
                return String.valueOf(fenced(a[0]).getToken());
            case "forceunlock":
                need(a, 1, "forceunlock name");
                return Boolean.toString(lock(a[0]).forceUnlock());
            case "islocked":
                need(a, 1, "islocked name");
                return Boolean.toString(lock(a[0]).isLocked());
            case "ttl":
                need(a, 1, "ttl name");
                return Long.toString(lock(a[0]).remainTimeToLive());
            // ---- synchronizers ----
            case "semtryset":
                need(a, 2, "semtryset name n");
                return Boolean.toString(client.getSemaphore(a[0]).trySetPermits(parseInt(a[1])));
            case "semacquire":
                need(a, 3, "semacquire T name n");
                client.getSemaphore(a[1]).acquire(parseInt(a[2]));
                return null;
            case "semtryacquire": {
                need(a, 4, "semtryacquire T name n waitMs");
                long waitMs = parseLong(a[3]);
                org.redisson.api.RSemaphore s = client.getSemaphore(a[1]);
                boolean ok = waitMs < 0 ? s.tryAcquire(parseInt(a[2])) : s.tryAcquire(parseInt(a[2]), waitMs, TimeUnit.MILLISECONDS);
                return Boolean.toString(ok);
            }
            case "semrelease":
                need(a, 2, "semrelease name n");
                client.getSemaphore(a[0]).release(parseInt(a[1]));
                return null;
            case "semadd":
                need(a, 2, "semadd name n");
                client.getSemaphore(a[0]).addPermits(parseInt(a[1]));
                return null;
            case "semavail":
                need(a, 1, "semavail name");
                return Integer.toString(client.getSemaphore(a[0]).availablePermits());
            case "semdrain":
                need(a, 1, "semdrain name");
                return Integer.toString(client.getSemaphore(a[0]).drainPermits());
            case "psemtryset":
                need(a, 2, "psemtryset name n");
                return Boolean.toString(client.getPermitExpirableSemaphore(a[0]).trySetPermits(parseInt(a[1])));
            case "psemset":
                need(a, 2, "psemset name n");
                client.getPermitExpirableSemaphore(a[0]).setPermits(parseInt(a[1]));
                return null;
            case "psemadd":
                need(a, 2, "psemadd name n");
                client.getPermitExpirableSemaphore(a[0]).addPermits(parseInt(a[1]));
                return null;
            case "psemavail":
                need(a, 1, "psemavail name");
                return Integer.toString(client.getPermitExpirableSemaphore(a[0]).availablePermits());
            case "psemacquire": {
                need(a, 3, "psemacquire T name leaseMs");
                long leaseMs = parseLong(a[2]);
                org.redisson.api.RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a[1]);
                return leaseMs < 0 ? s.acquire() : s.acquire(leaseMs, TimeUnit.MILLISECONDS);
            }
            case "psemtryacquire": {
                need(a, 4, "psemtryacquire T name waitMs leaseMs");
                long waitMs = parseLong(a[2]);
                org.redisson.api.RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a[1]);
                String pid = waitMs < 0 ? s.tryAcquire() : s.tryAcquire(waitMs, parseLong(a[3]), TimeUnit.MILLISECONDS);
                return String.valueOf(pid);
            }
            case "psemacquiren": {
                need(a, 4, "psemacquiren T name n leaseMs");
                long leaseMs = parseLong(a[3]);
                int n = Integer.parseInt(a[2]);
                org.redisson.api.RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a[1]);
                return String.join(",", leaseMs < 0 ? s.acquire(n) : s.acquire(n, leaseMs, TimeUnit.MILLISECONDS));
            }
            case "psemreleasen":
                need(a, 2, "psemreleasen name id,id,...");
                client.getPermitExpirableSemaphore(a[0]).release(java.util.Arrays.asList(a[1].split(",")));
                return null;
            case "psemtryreleasen":
                need(a, 2, "psemtryreleasen name id,id,...");
                return Integer.toString(client.getPermitExpirableSemaphore(a[0]).tryRelease(java.util.Arrays.asList(a[1].split(","))));
            case "psemrelease":
                need(a, 2, "psemrelease name id");
                client.getPermitExpirableSemaphore(a[0]).release(a[1]);
                return null;
            case "psemtryrelease":
                need(a, 2, "psemtryrelease name id");
                return Boolean.toString(client.getPermitExpirableSemaphore(a[0]).tryRelease(a[1]));
            case "psemupdate":
                need(a, 3, "psemupdate name id leaseMs");
                return Boolean.toString(client.getPermitExpirableSemaphore(a[0]).updateLeaseTime(a[1], parseLong(a[2]), TimeUnit.MILLISECONDS));
            case "latchtryset":
                need(a, 2, "latchtryset name n");
                return Boolean.toString(client.getCountDownLatch(a[0]).trySetCount(parseLong(a[1])));
            case "latchcountdown":
                need(a, 1, "latchcountdown name");
                client.getCountDownLatch(a[0]).countDown();
                return null;
            case "latchcount":
                need(a, 1, "latchcount name");
                return Long.toString(client.getCountDownLatch(a[0]).getCount());
            case "latchdelete":
                need(a, 1, "latchdelete name");
                return Boolean.toString(client.getCountDownLatch(a[0]).delete());
            case "latchawait": {
                need(a, 3, "latchawait T name waitMs");
                long waitMs = parseLong(a[2]);
                org.redisson.api.RCountDownLatch l = client.getCountDownLatch(a[1]);
                if (waitMs < 0) {
                    l.await();
                    return "true";
                }
                return Boolean.toString(l.await(waitMs, TimeUnit.MILLISECONDS));
            }
            case "clientid":
                need(a, 0, "clientid");
                return clientId;
            case "info":
                need(a, 0, "info");
                return "version=" + redissonVersion() + " clientidsrc=" + clientIdSource
                        + " java=" + System.getProperty("java.version");
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    private static RLock lock(String spec) {
        return locks.computeIfAbsent(spec, Driver::newLock);
    }

    private static RFencedLock fenced(String spec) {
        RLock l = lock(spec);
        if (!(l instanceof RFencedLock)) {
            throw new IllegalArgumentException("not a fenced lock: " + spec);
        }
        return (RFencedLock) l;
    }

    /** The lock a name "KIND@name" (or a plain name) stands for. */
    private static RLock newLock(String spec) {
        int at = spec.indexOf('@');
        if (at < 0) {
            return client.getLock(spec);
        }
        String kind = spec.substring(0, at), name = spec.substring(at + 1);
        if (kind.matches("m[0-9]+")) { // masters mode: getLock(name) of client i
            int i = Integer.parseInt(kind.substring(1));
            return i == 0 ? client.getLock(name) : others.get(i - 1).getLock(name);
        }
        switch (kind) {
            case "read":
                return client.getReadWriteLock(name).readLock();
            case "write":
                return client.getReadWriteLock(name).writeLock();
            case "fenced":
                return client.getFencedLock(name);
            case "spin":
                return client.getSpinLock(name);
            case "nr":
                return byReflection("getNonReentrantLock", name);
            case "fair":
                return client.getFairLock(name);
            case "multi":
                return new org.redisson.RedissonMultiLock(members(name));
            case "red":
                return new org.redisson.RedissonRedLock(members(name));
            case "nrfair":
                return byReflection("getNonReentrantFairLock", name);
            default:
                throw new IllegalArgumentException("unknown lock kind " + kind);
        }
    }

    /** getLock(name) of every client (masters mode), the main one first. */
    private static RLock[] members(String name) {
        RLock[] ls = new RLock[others.size() + 1];
        ls[0] = client.getLock(name);
        for (int i = 0; i < others.size(); i++) {
            ls[i + 1] = others.get(i).getLock(name);
        }
        return ls;
    }

    /** A 4.4+ lock getter, not in the API the driver is compiled against. */
    private static RLock byReflection(String getter, String name) {
        try {
            return (RLock) RedissonClient.class.getMethod(getter, String.class).invoke(client, name);
        } catch (ReflectiveOperationException e) {
            throw new UnsupportedOperationException(getter + " needs Redisson 4.4+: " + e);
        }
    }

    private static String incr(String lockName, String key, long n, long sleepMs) throws InterruptedException {
        RLock lock = lock(lockName);
        RBucket<String> bucket = client.getBucket(key, StringCodec.INSTANCE);
        long v = 0;
        for (long i = 0; i < n; i++) {
            lock.lock();
            try {
                String s = bucket.get();
                v = s == null ? 0 : Long.parseLong(s);
                if (sleepMs > 0) {
                    Thread.sleep(sleepMs);
                }
                v++;
                bucket.set(Long.toString(v));
            } finally {
                lock.unlock();
            }
        }
        return Long.toString(v);
    }

    @SuppressWarnings("deprecation") // Thread.getId: threadId() is Java 19+
    private static long currentThreadId() {
        return Thread.currentThread().getId();
    }

    private static void need(String[] a, int n, String usage) {
        if (a.length != n) {
            throw new IllegalArgumentException("usage: " + usage);
        }
    }

    private static long parseLong(String s) {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not an integer: " + s);
        }
    }

    private static int parseInt(String s) {
        long v = parseLong(s);
        if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("not an int: " + s);
        }
        return (int) v;
    }

    // ---- replies ----

    interface Command {
        String call() throws Exception;
    }

    private static void run(String id, Command c) {
        String r;
        try {
            String v = c.call();
            r = v == null ? id + " ok" : id + " ok " + v;
        } catch (Throwable t) {
            t = unwrap(t);
            String msg = t.getMessage() == null ? "" : t.getMessage().replaceAll("\\s+", " ").trim();
            r = id + " err " + t.getClass().getSimpleName() + (msg.isEmpty() ? "" : " " + msg);
            if (t instanceof Error && !(t instanceof AssertionError)) {
                t.printStackTrace(); // e.g. NoSuchMethodError: worth a stack on stderr
            }
        }
        reply(r);
    }

    private static Throwable unwrap(Throwable t) {
        while ((t instanceof CompletionException || t instanceof ExecutionException
                || t instanceof InvocationTargetException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    private static synchronized void reply(String line) {
        protocolOut.print(line);
        protocolOut.print('\n');
        protocolOut.flush();
    }

    // ---- threads ----

    private static final class Worker implements Runnable {
        private final LinkedBlockingQueue<Runnable> queue = new LinkedBlockingQueue<>();
        private final Thread thread;

        Worker(String name) {
            thread = new Thread(this, name);
            thread.setDaemon(true);
            thread.start();
        }

        /**
         * Whether the thread is parked in a Semaphore's acquire (or a
         * count-down latch entry's ReclosableLatch): Redisson's
         * lock loops wait on the lock entry's Semaphore latch, and an unlock
         * message releases only the threads already queued on it (a "1"
         * message of the read-write lock releases getQueueLength()). A
         * thread in that frame in state WAITING or TIMED_WAITING is queued.
         */
        boolean parkedOnSemaphore() {
            Thread.State st = thread.getState();
            if (st != Thread.State.WAITING && st != Thread.State.TIMED_WAITING) {
                return false;
            }
            for (StackTraceElement e : thread.getStackTrace()) {
                String c = e.getClassName();
                if (c.equals("java.util.concurrent.Semaphore") || c.equals("org.redisson.misc.ReclosableLatch")) {
                    return true;
                }
            }
            return false;
        }

        void submit(String id, Command c) {
            queue.add(() -> Driver.run(id, c));
        }

        @Override
        public void run() {
            for (;;) {
                Runnable r;
                try {
                    r = queue.take();
                } catch (InterruptedException e) {
                    return;
                }
                r.run();
            }
        }
    }

    // ---- version-dependent bits, all through reflection or public API ----

    private static void shutdown() {
        for (RedissonClient c : others) {
            try {
                c.shutdown(0, 2, TimeUnit.SECONDS);
            } catch (Throwable t) {
                System.err.println("driver: shutdown: " + t);
            }
        }
        try {
            client.shutdown(0, 2, TimeUnit.SECONDS);
        } catch (Throwable t) {
            System.err.println("driver: shutdown: " + t);
        }
    }

    /** The Redisson version on the class path, from the jar manifest or the jar's file name. */
    static String redissonVersion() {
        String v = Redisson.class.getPackage().getImplementationVersion();
        if (v != null && !v.isEmpty()) {
            return v;
        }
        CodeSource cs = Redisson.class.getProtectionDomain().getCodeSource();
        if (cs != null && cs.getLocation() != null) {
            Matcher m = Pattern.compile("redisson-([0-9][^/]*)\\.jar$").matcher(cs.getLocation().getPath());
            if (m.find()) {
                return m.group(1);
            }
        }
        return "unknown";
    }

    /**
     * Finds the id Redisson puts in front of ":threadId" in lock hash fields.
     * Tries, in order: RedissonClient.getId() (public API, 3.x newer lines and 4.x),
     * Redisson.getServiceManager().getId(), Redisson.getConnectionManager().getId()
     * (old lines, returns a UUID). As a last resort it takes a lock and reads
     * the hash field back. Each reflective result is cross-checked against the
     * lock hash once at startup; a mismatch is reported on stderr and the
     * hash-derived id wins.
     */
    private static void resolveClientId() {
        List<String> tried = new ArrayList<>();
        String id = null;
        String[][] paths = {
            {"getId"},
            {"getServiceManager", "getId"},
            {"getConnectionManager", "getId"},
        };
        for (String[] path : paths) {
            Object o = client;
            try {
                for (String m : path) {
                    Method meth = findMethod(o.getClass(), m);
                    o = meth.invoke(o);
                }
            } catch (Throwable t) {
                tried.add(String.join(".", path) + ": " + unwrap(t));
                continue;
            }
            if (o != null) {
                id = o.toString();
                clientIdSource = String.join(".", path);
                break;
            }
        }
        String fromHash = clientIdFromLockHash();
        if (id == null) {
            System.err.println("driver: no client id accessor worked: " + tried);
            id = fromHash;
            clientIdSource = "lockhash";
        } else if (fromHash != null && !fromHash.equals(id)) {
            System.err.println("driver: " + clientIdSource + " gave " + id + " but the lock hash says " + fromHash);
            id = fromHash;
            clientIdSource = "lockhash";
        }
        clientId = id;
    }

    private static Method findMethod(Class<?> c, String name) throws NoSuchMethodException {
        // Prefer a public interface/superclass declaration so setAccessible is not needed.
        try {
            Method m = c.getMethod(name);
            try {
                m.setAccessible(true); // the implementing class may not be public
            } catch (RuntimeException ignored) {
                // fine for public classes
            }
            return m;
        } catch (NoSuchMethodException e) {
            for (Class<?> k = c; k != null; k = k.getSuperclass()) {
                try {
                    Method m = k.getDeclaredMethod(name);
                    m.setAccessible(true);
                    return m;
                } catch (NoSuchMethodException ignored) {
                    // keep looking
                }
            }
            throw e;
        }
    }

    /** Takes a throwaway lock, reads its single hash field CLIENTID:THREADID, releases it. */
    private static String clientIdFromLockHash() {
        String name = "goredisson:interop:clientid:" + java.util.UUID.randomUUID();
        RLock l = client.getLock(name);
        try {
            l.lock(30, TimeUnit.SECONDS);
            try {
                Iterable<String> fields = client.<String, String>getMap(name, StringCodec.INSTANCE).keySet();
                String suffix = ":" + currentThreadId();
                for (String f : fields) {
                    if (f.endsWith(suffix)) {
                        return f.substring(0, f.length() - suffix.length());
                    }
                }
                return null;
            } finally {
                l.unlock();
            }
        } catch (Throwable t) {
            System.err.println("driver: reading the client id from a lock hash failed: " + unwrap(t));
            return null;
        }
    }
}
