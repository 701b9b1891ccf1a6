// Command stress checks that the locks exclude each other across processes
// while processes die.
//
// It runs --procs worker processes (this program, re-executed), each with
// --goroutines goroutines that lock one of --names lock names at random
// (Lock with the watchdog, or LockLease) and, inside the lock, INCR the
// name's sequence key on entry and again on exit, recording both values
// and the wall-clock times. Every --kill-every (on average) it SIGKILLs a
// random worker, with whatever it holds, and starts a new one in its place.
// After --duration it stops the workers and checks the records: two
// critical sections on one name overlapped exactly when one's entry INCR
// falls between the other's two INCRs. Overlaps explained by a lease that
// ran out (a killed holder's lease expired, or a holder outlived its lease)
// are counted apart; any other overlap is a violation. It also counts the
// watchdog's lost reports by what the owner was doing at the time: with
// kills as the only fault, a live worker never really loses a hold.
//
//	go run ./stress --duration 30s --procs 3 --goroutines 4 --names 4 --kill-every 3s
//
// With --redlock M the names are RedLocks over M independent masters
// (one rlock Client per master in each worker); every --restart-every one
// master is killed, kept down for the longest lease (Redlock's delayed
// restart: no lock on it outlives that) and restarted empty. The check is
// the same: a majority that restarts empty never lets two holders in.
//
// With --semaphore N the names are semaphores of N permits (with
// --expirable, permit-expirable ones whose permits have the --lease): the
// check is then that no section enters while N others are inside, a
// killed holder's section counting as inside until its permit comes back
// (by its lease, or, for a plain semaphore, by the coordinator's release
// after the kill).
//
// With --java N the run also has N JVM workers running Java Redisson (the
// SoakWorker class of the interop Maven project, the --java-versions
// taking turns) on the same names, writing the same records: the soak of
// mixed Go/Java fleets (make soak; TestSoakSlice in make test). Both
// languages then go through every acquisition style (Go: Lock, LockLease,
// TryLock with a wait and a lease or the watchdog, one-attempt TryLock;
// Java: lock, lock(lease), tryLock(wait, lease), tryLock(wait), tryLock(),
// lockAsync, lockAsync(lease)), and kills alternate between the languages.
// --client-kills closes every pub/sub or every command connection on the
// lock server now and then (CLIENT KILL TYPE pubsub|normal). The sequence
// keys live on a server of their own (the sequencer) that no fault
// touches.
//
// With --kinds the names are of several kinds, taking turns: plain, rw
// (read-write: readers may share, never with a writer), fair (also FIFO,
// checkFIFO), fenced (the tokens of the grants must strictly increase in
// the order the sections entered, checkTokens) and semaphore
// (permit-expirable, --semaphore permits each, default 3, each permit with
// the --lease): the soak of every kind both languages have (make soak:
// --kinds plain,rw,fair,fenced,semaphore with --java).
//
// Why an interval checker on Redis sequence numbers, not porcupine's
// linearizability check: the question is mutual exclusion, and Redis
// orders every INCR of a name's sequence key, so whether two sections
// overlapped is read off exactly (S1 < S1' < S2), in linear time for a
// million sections; porcupine would have to search the interleavings of
// lock/unlock operations known only by client-side intervals, and a lock's
// history is not linearizable anyway whenever a lease runs out (a killed
// holder never unlocks), which is the very case the checker must tell
// apart and explain.
//
// Without --redis it starts its own redis-server. It prints acquisitions,
// violations and lease-expiry overlaps, and exits 1 on any violation or
// error. --unsafe skips the locking, to show that the check catches
// overlaps.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/interop_test/driver"
	"github.com/goredisson/locks/rlock"
)

func main() {
	if spec := os.Getenv(workerEnv); spec != "" {
		os.Exit(workerMain(spec))
	}
	os.Exit(cliMain(os.Args[1:], os.Stdout, os.Stderr))
}

// Config is a stress run.
type Config struct {
	Redis        string        // host:port; empty: start a redis-server
	Procs        int           // worker processes
	Goroutines   int           // goroutines per worker
	Names        int           // lock names
	Duration     time.Duration // how long the workers run
	KillEvery    time.Duration // mean time between SIGKILLs; 0: none
	Watchdog     time.Duration // the workers' watchdog timeout
	Lease        time.Duration // the lease of LockLease holds
	MaxHold      time.Duration // a critical section lasts up to this
	Unsafe       bool          // skip locking (the check must then fail)
	Faults       float64       // chance that a worker's script call gets an injected fault
	RW           bool          // read-write locks: three reads to one write
	Fair         bool          // fair locks: waiters must be served in the order they called
	FairWait     time.Duration // the fair locks' wait timeout (reservation per waiter); 0: 3s
	Semaphore    int           // > 0: semaphores of this many permits instead of locks (with Kinds: the permits of each semaphore name; default 3)
	Expirable    bool          // with Semaphore: permit-expirable semaphores (permits with the lease)
	RedLock      int           // > 0: RedLocks over this many independent masters (restarted at random)
	RestartEvery time.Duration // --redlock: mean time between master restarts; 0: none
	Seed         uint64        // 0: random
	KeepDir      bool          // keep the workers' records (and print where)
	// Java adds this many JVM workers running Redisson (the Maven
	// project's SoakWorker, interop_test/java) on the same names, each
	// with Goroutines threads; the versions in JavaVersions take turns.
	// Kills pick among all workers, Go and Java. Needs the plain lock.
	Java         int
	JavaVersions []string      // default: 4.7.0 and 3.52.0
	Styles       bool          // Go workers use every acquisition style (TryLock with and without wait too); on with Java
	ClientKills  time.Duration // mean time between CLIENT KILLs on the lock server (of pub/sub or of command connections); 0: none
	// RestartLockEvery is the mean time between restarts of the lock
	// server (empty: every hold lost); 0: none. Needs Redis empty (the
	// run's own server).
	RestartLockEvery time.Duration
	// StallEvery is the mean time between stalls of all the workers'
	// traffic to the lock server, through the harness' TCP proxy, each
	// for StallMax/4 to StallMax (default 1s); 0: none.
	StallEvery, StallMax time.Duration
	// Sentinel runs the lock server as a Sentinel group (a master, two
	// replicas, three Sentinels) that every worker reaches through the
	// Sentinels (Redisson's useSentinelServers, rueidis' Sentinel client);
	// FailoverEvery is the mean time between forced failovers (SENTINEL
	// FAILOVER), 0: none. Needs Redis empty.
	Sentinel      bool
	FailoverEvery time.Duration
	// Cluster runs the lock server as a Redis Cluster (3 masters with a
	// replica each) instead; FailoverEvery is then the mean time between
	// manual failovers (CLUSTER FAILOVER) of the master of one of the
	// first len(Kinds) names (one of each kind, taking turns), and
	// MigrateEvery the mean time between migrations of such a name's slot
	// to another master; 0: none.
	Cluster      bool
	MigrateEvery time.Duration
	// Kinds are the kinds of the names, taking turns: name i is of kind
	// Kinds[i % len(Kinds)], among kindPlain, kindRW, kindFair,
	// kindFenced and kindSemaphore (permit-expirable, with the Lease):
	// the kinds both languages have. Empty: set from RW, Fair, RedLock or
	// Semaphore and Expirable (every name of that kind), else plain.
	Kinds []string

	// Exe is the worker binary, run with workerEnv set; default: this
	// program (os.Executable).
	Exe string
	// Stderr receives the workers' stderr; default os.Stderr.
	Stderr io.Writer
}

// The kinds of names. The Java workers have the first five.
const (
	kindPlain          = "plain"
	kindRW             = "rw"
	kindFair           = "fair"
	kindFenced         = "fenced"
	kindSemaphore      = "semaphore" // permit-expirable
	kindPlainSemaphore = "plain-semaphore"
	kindRedLock        = "redlock"
)

var mixedKinds = []string{kindPlain, kindRW, kindFair, kindFenced, kindSemaphore}

// kindOf is the kind of name i.
func (c *Config) kindOf(i int) string { return c.Kinds[i%len(c.Kinds)] }

// has reports whether some name is of kind k.
func (c *Config) has(k string) bool { return slices.Contains(c.Kinds, k) }

func (c *Config) defaults() error {
	if c.Procs < 0 || c.Procs == 0 && c.Java <= 0 || c.Goroutines <= 0 || c.Names <= 0 {
		return errors.New("--procs (unless --java), --goroutines and --names must be positive")
	}
	if c.Duration <= 0 || c.Watchdog < 3*time.Millisecond || c.Lease < time.Millisecond || c.KillEvery < 0 || c.MaxHold < 0 {
		return errors.New("--duration, --watchdog and --lease must be positive, --kill-every and --max-hold not negative")
	}
	if c.Fair && c.RW {
		return errors.New("--fair and --rw cannot be combined")
	}
	if c.RedLock < 0 || c.RedLock == 1 || c.RedLock == 2 || (c.RedLock > 0 && (c.Fair || c.RW || c.Semaphore > 0)) {
		return errors.New("--redlock needs at least 3 masters and cannot be combined with --fair, --rw or --semaphore")
	}
	if c.Semaphore < 0 || (c.Semaphore > 0 && (c.Fair || c.RW)) || (c.Expirable && c.Semaphore == 0) {
		return errors.New("--semaphore must be positive, and cannot be combined with --fair or --rw; --expirable needs --semaphore")
	}
	if len(c.Kinds) > 0 {
		if c.RW || c.Fair || c.RedLock > 0 || c.Expirable {
			return errors.New("--kinds cannot be combined with --rw, --fair, --redlock or --expirable")
		}
		for _, k := range c.Kinds {
			if !slices.Contains(mixedKinds, k) {
				return fmt.Errorf("--kinds: unknown kind %q (known: %s)", k, strings.Join(mixedKinds, ", "))
			}
		}
		if c.has(kindSemaphore) && c.Semaphore == 0 {
			c.Semaphore = 3
		}
		c.Expirable = c.has(kindSemaphore)
	} else {
		switch {
		case c.RW:
			c.Kinds = []string{kindRW}
		case c.Fair:
			c.Kinds = []string{kindFair}
		case c.RedLock > 0:
			c.Kinds = []string{kindRedLock}
		case c.Semaphore > 0 && c.Expirable:
			c.Kinds = []string{kindSemaphore}
		case c.Semaphore > 0:
			c.Kinds = []string{kindPlainSemaphore}
		default:
			c.Kinds = []string{kindPlain}
		}
	}
	if c.has(kindFair) && c.FairWait <= 0 {
		c.FairWait = 3 * time.Second
	}
	if c.Java < 0 || c.ClientKills < 0 || c.RestartLockEvery < 0 || c.StallEvery < 0 || c.StallMax < 0 {
		return errors.New("--java, --client-kills, --restart-lock-every, --stall-every and --stall-max must not be negative")
	}
	if c.RestartLockEvery > 0 && c.Redis != "" {
		return errors.New("--restart-lock-every restarts the run's own server: not with --redis")
	}
	if c.FailoverEvery < 0 || c.FailoverEvery > 0 && !c.Sentinel && !c.Cluster {
		return errors.New("--failover-every must not be negative, and needs --sentinel or --cluster")
	}
	if c.MigrateEvery < 0 || c.MigrateEvery > 0 && !c.Cluster {
		return errors.New("--migrate-every must not be negative, and needs --cluster")
	}
	if c.Sentinel && c.Cluster {
		return errors.New("--sentinel or --cluster, not both")
	}
	if (c.Sentinel || c.Cluster) && (c.Redis != "" || c.RestartLockEvery > 0 || c.StallEvery > 0 || c.RedLock > 0) {
		return errors.New("--sentinel and --cluster start the run's own servers: not with --redis, --restart-lock-every, --stall-every (the servers hand out their own addresses) or --redlock")
	}
	if c.StallEvery > 0 && c.StallMax == 0 {
		c.StallMax = time.Second
	}
	if c.Java > 0 {
		c.Styles = true
		if len(c.JavaVersions) == 0 {
			c.JavaVersions = []string{"4.7.0", "3.52.0"}
		}
		for _, v := range c.JavaVersions {
			if err := driver.CheckBuilt(v); err != nil {
				return fmt.Errorf("--java: %w", err)
			}
		}
		if _, err := exec.LookPath("java"); err != nil {
			return fmt.Errorf("--java: %w", driver.ErrNoJava)
		}
	}
	if c.Styles && (c.has(kindPlainSemaphore) || c.has(kindRedLock)) {
		return errors.New("--java and --styles need kinds among " + strings.Join(mixedKinds, ", ") + " (not a plain --semaphore or --redlock)")
	}
	if c.Seed == 0 {
		c.Seed = mrand.Uint64()
	}
	if c.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.Exe = exe
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	return nil
}

func fairWaitMs(c Config) int64 {
	if !c.has(kindFair) {
		return 0
	}
	return max(1, c.FairWait.Milliseconds())
}

// fairTryWait is the wait of TryLock on fair names: two fair wait
// timeouts (a waiter's place in the line lasts its whole wait, so a dead
// waiter with a long wait would hold up the line as long).
func fairTryWait(c Config) time.Duration { return 2 * c.FairWait }

// Report is the outcome of a run.
type Report struct {
	Verdict
	Config   Config
	Kills    int
	Restarts int
	Elapsed  time.Duration
	Dir      string // where the records are, with --keep
	// --semaphore: the permits available on every name at the end (with
	// --expirable, once the killed holders' leases ran out), of
	// Semaphore per name.
	PermitsAtEnd, PermitsTotal int
	// PermitsAmbiguous: plain semaphore, goroutines killed while their
	// acquire or release was under way (each may have left one permit
	// taken); the permits at the end must be at least the total less these.
	PermitsAmbiguous int
	// --redlock: masters killed and restarted empty (each kept down for
	// the longest lease first, Redlock's delayed restart).
	MasterRestarts int
	// LockRestarts counts the lock server's restarts (--restart-lock-every);
	// Stalls the proxy's stalls, StallTotal and StallLongest their time.
	LockRestarts int
	// Failovers counts the forced failovers (--failover-every),
	// FailoverLongest the longest from SENTINEL (CLUSTER) FAILOVER to a
	// healthy group; UnplannedFailovers the +switch-master events outside
	// them (recorded as failovers too). Migrations counts the slot
	// migrations (--migrate-every), MigrationLongest the longest.
	Failovers, UnplannedFailovers int
	FailoverLongest               time.Duration
	Migrations                    int
	MigrationLongest              time.Duration
	Stalls                        int
	StallTotal, StallLongest      time.Duration
	// KillsByLang counts the SIGKILLs by the killed worker's language;
	// ClientKills the CLIENT KILLs on the lock server by connection type
	// and the connections they closed.
	KillsByLang, ClientKills, ConnsKilled map[string]int
}

func cliMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stress", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	fs.StringVar(&c.Redis, "redis", "", "Redis address host:port (default: start a redis-server)")
	fs.IntVar(&c.Procs, "procs", 3, "worker processes")
	fs.IntVar(&c.Goroutines, "goroutines", 4, "goroutines per worker process")
	fs.IntVar(&c.Names, "names", 4, "lock names")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "how long the workers run")
	fs.DurationVar(&c.KillEvery, "kill-every", 3*time.Second, "mean time between SIGKILLs of a random worker (0: none)")
	fs.DurationVar(&c.Watchdog, "watchdog", 2*time.Second, "watchdog timeout of the workers' locks")
	fs.DurationVar(&c.Lease, "lease", 2*time.Second, "lease of the LockLease holds")
	fs.DurationVar(&c.MaxHold, "max-hold", 8*time.Millisecond, "longest critical section")
	fs.BoolVar(&c.Unsafe, "unsafe", false, "do not lock (the check must report violations)")
	fs.Float64Var(&c.Faults, "faults", 0, "chance (0-1) that a script call gets an injected fault: dropped, reply lost, late, BUSY, TRYAGAIN, LOADING")
	fs.BoolVar(&c.RW, "rw", false, "use read-write locks (three reads to one write): readers may share, never with a writer")
	fs.BoolVar(&c.Fair, "fair", false, "use fair locks: also check that waiters are served in the order they called (FIFO)")
	fs.DurationVar(&c.FairWait, "fair-wait", 3*time.Second, "the fair locks' wait timeout (how long a dead waiter can hold up the line)")
	fs.IntVar(&c.Semaphore, "semaphore", 0, "use semaphores with this many permits per name instead of locks: never more holders than permits")
	fs.BoolVar(&c.Expirable, "expirable", false, "with --semaphore: permit-expirable semaphores, each permit with the --lease (a killed holder's permits come back after it)")
	fs.IntVar(&c.RedLock, "redlock", 0, "use RedLocks over this many (>= 3) independent masters that the run kills and restarts empty")
	fs.DurationVar(&c.RestartEvery, "restart-every", 4*time.Second, "with --redlock: mean time between master restarts (0: none); each stays down for the longest lease first")
	fs.Uint64Var(&c.Seed, "seed", 0, "random seed (0: random)")
	fs.BoolVar(&c.KeepDir, "keep", false, "keep the workers' record files and print their directory (a failed run keeps them anyway)")
	longHolds := fs.Int("long-holds", 0, "instead of workers: hold this many locks with the watchdog for --duration in this process (--watchdog sets the timeout), then restart Redis; checks memory, goroutines, renewal calls and the loss reports")
	fs.IntVar(&c.Java, "java", 0, "also run this many JVM workers (Redisson, every acquisition style) on the same names")
	javaVersions := fs.String("java-versions", "4.7.0,3.52.0", "with --java: the Redisson versions, taking turns")
	fs.BoolVar(&c.Styles, "styles", false, "Go workers use every acquisition style (on with --java)")
	kindsFlag := fs.String("kinds", "", "the kinds of the names, taking turns, among "+strings.Join(mixedKinds, ",")+" (semaphore: permit-expirable, --semaphore permits each, default 3); default: plain, or the kind of --rw, --fair, --semaphore, --redlock")
	fs.DurationVar(&c.RestartLockEvery, "restart-lock-every", 0, "mean time between restarts of the lock server, empty (0: none)")
	fs.BoolVar(&c.Sentinel, "sentinel", false, "run the lock server as a Sentinel group (master, 2 replicas, 3 Sentinels), reached through the Sentinels")
	fs.BoolVar(&c.Cluster, "cluster", false, "run the lock server as a Redis Cluster (3 masters, a replica each)")
	fs.DurationVar(&c.FailoverEvery, "failover-every", 0, "with --sentinel or --cluster: mean time between forced failovers (SENTINEL FAILOVER; CLUSTER FAILOVER of a name's master; 0: none)")
	fs.DurationVar(&c.MigrateEvery, "migrate-every", 0, "with --cluster: mean time between migrations of a name's slot to another master (0: none)")
	fs.DurationVar(&c.StallEvery, "stall-every", 0, "mean time between stalls of the workers' traffic to the lock server through a TCP proxy (0: none)")
	fs.DurationVar(&c.StallMax, "stall-max", time.Second, "with --stall-every: the longest stall (each lasts a quarter of this to all of it)")
	fs.DurationVar(&c.ClientKills, "client-kills", 0, "mean time between CLIENT KILLs of every pub/sub or command connection on the lock server (0: none)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kindsFlag != "" {
		c.Kinds = strings.Split(*kindsFlag, ",")
	}
	if *javaVersions != "" {
		c.JavaVersions = strings.Split(*javaVersions, ",")
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "stress: unexpected arguments %q\n", fs.Args())
		return 2
	}
	c.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), c.Duration+5*time.Minute)
	defer cancel()
	var rep interface {
		Print(io.Writer)
		OK() bool
	}
	var err error
	if *longHolds > 0 {
		rep, err = RunLongHolds(ctx, LongHoldConfig{Locks: *longHolds, Duration: c.Duration, Watchdog: c.Watchdog, Redis: c.Redis})
	} else {
		rep, err = Run(ctx, c)
	}
	if err != nil {
		fmt.Fprintln(stderr, "stress:", err)
		return 2
	}
	rep.Print(stdout)
	if !rep.OK() {
		return 1
	}
	return 0
}

// Print writes the report.
func (r *Report) Print(w io.Writer) {
	c := r.Config
	mode := "Lock (watchdog) and LockLease"
	if c.RW {
		mode = "read-write locks, 3 reads : 1 write, watchdog and fixed leases"
	}
	if c.Fair {
		mode = fmt.Sprintf("fair locks (wait timeout %v), Lock (watchdog) and LockLease", c.FairWait)
	}
	if c.RedLock > 0 {
		mode = fmt.Sprintf("RedLocks over %d masters, one killed and restarted empty every %v on average (down for the longest lease first), Lock (watchdog) and LockLease", c.RedLock, c.RestartEvery)
	}
	if c.Semaphore > 0 {
		mode = fmt.Sprintf("semaphores of %d permits (a killed holder's permits given back by the coordinator)", c.Semaphore)
		if c.Expirable {
			mode = fmt.Sprintf("permit-expirable semaphores of %d permits, lease %v (a killed holder's permits come back after it)", c.Semaphore, c.Lease)
		}
	}
	if len(c.Kinds) > 1 || c.Kinds[0] == kindFenced || c.Styles && c.Kinds[0] != kindPlain {
		mode = fmt.Sprintf("names of the kinds %s taking turns (fair wait timeout %v; semaphores of %d permits, lease %v)", strings.Join(c.Kinds, ", "), c.FairWait, c.Semaphore, c.Lease)
	}
	if c.Faults > 0 {
		mode += fmt.Sprintf(", faults on %.0f%% of script calls", 100*c.Faults)
	}
	if c.Unsafe {
		mode = "UNSAFE: no locking"
	}
	fmt.Fprintf(w, "stress: %d procs x %d goroutines, %d names, %v (%s; watchdog %v, lease %v, sections up to %v, seed %d)\n",
		c.Procs, c.Goroutines, c.Names, c.Duration, mode, c.Watchdog, c.Lease, c.MaxHold, c.Seed)
	if c.Java > 0 {
		fmt.Fprintf(w, "workers: %d Go, %d Java (Redisson %s)\n", c.Procs, c.Java, strings.Join(c.JavaVersions, ", "))
	}
	fmt.Fprintf(w, "acquisitions: %d (completed %d, per name %v) in %v, %.0f/s; longest wait %v (%s)\n", r.Acquisitions, r.Completed, r.PerName,
		r.Elapsed.Round(time.Millisecond), float64(r.Acquisitions)/r.Elapsed.Seconds(), r.LongestWait.Round(time.Millisecond), r.LongestWaitBy)
	if len(r.ByLang) > 1 || len(r.ByStyle) > 0 {
		fmt.Fprintf(w, "acquisitions by language: %s\n", sortedCounts(r.ByLang))
		fmt.Fprintf(w, "acquisitions by style: %s\n", sortedCounts(r.ByStyle))
		if len(r.ByKind) > 1 {
			fmt.Fprintf(w, "acquisitions by kind: %s\n", sortedCounts(r.ByKind))
			fmt.Fprintf(w, "acquisitions by kind and language: %s\n", sortedCounts(r.ByKindLang))
		}
		var waits []string
		for lang, d := range r.LongestWaitByLang {
			waits = append(waits, fmt.Sprintf("%s %v", lang, d.Round(time.Millisecond)))
		}
		sort.Strings(waits)
		fmt.Fprintf(w, "longest wait by language: %s\n", strings.Join(waits, ", "))
		if len(r.Misses) > 0 {
			fmt.Fprintf(w, "one-attempt TryLocks that found the lock taken: %s\n", sortedCounts(r.Misses))
		}
	}
	fmt.Fprintf(w, "kills: %d (restarts %d); sections cut by a kill: %d; increments left unrecorded by kills: %d\n",
		r.Kills, r.Restarts, r.CutByKill, r.Unrecorded)
	if len(r.KillsByLang) > 0 {
		fmt.Fprintf(w, "SIGKILLs by language: %s\n", sortedCounts(r.KillsByLang))
	}
	if len(r.ClientKills) > 0 {
		fmt.Fprintf(w, "CLIENT KILLs on the lock server: %s (connections closed: %s)\n", sortedCounts(r.ClientKills), sortedCounts(r.ConnsKilled))
	}
	if r.LockRestarts > 0 {
		fmt.Fprintf(w, "lock server restarts (empty): %d; overlaps explained by a restart: %d; errors within %v of one (the server was down; not counted): %s\n",
			r.LockRestarts, r.RestartOverlaps, restartWindow, sortedCounts(r.RestartErrors))
	}
	if c.Cluster {
		fmt.Fprintf(w, "cluster: manual failovers %d (longest %v to a healthy cluster), slot migrations %d (longest %v); overlaps explained by a failover: %d; errors within %v of a failover (not counted): %s\n",
			r.Failovers, r.FailoverLongest.Round(time.Millisecond), r.Migrations, r.MigrationLongest.Round(time.Millisecond), r.FailoverOverlaps, restartWindow, sortedCounts(r.FailoverErrors))
	}
	if c.Sentinel {
		fmt.Fprintf(w, "Sentinel failovers: %d forced (longest %v to a healthy group), %d unplanned; overlaps explained by a failover (a write the new master never had): %d; errors within %v of one (not counted): %s\n",
			r.Failovers, r.FailoverLongest.Round(time.Millisecond), r.UnplannedFailovers, r.FailoverOverlaps, restartWindow, sortedCounts(r.FailoverErrors))
	}
	if len(r.JavaTopologyErrors) > 0 {
		fmt.Fprintf(w, "Redisson errors within %v after a failover or slot migration (Redisson's re-subscription; Java-only runs show the same; not counted as errors; X acquire, U unlock): %s; latest %v after the change\n",
			javaTopologyWindow, sortedCounts(r.JavaTopologyErrors), r.JavaTopologyLag.Round(time.Millisecond))
	}
	for _, e := range r.FaultErrorSamples {
		fmt.Fprintf(w, "  first excused error of its kind: %s\n", e)
	}
	if r.Stalls > 0 {
		fmt.Fprintf(w, "proxy stalls of all worker traffic to the lock server: %d, %v in all, longest %v\n", r.Stalls, r.StallTotal.Round(time.Millisecond), r.StallLongest.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "lease-expiry overlaps: %d (with a live holder that knew its hold had ended: %d)", r.LeaseExpiryOverlaps, r.LostOverlaps)
	if r.ExpiryGapMax > 0 {
		fmt.Fprintf(w, " (next holder entered %v..%v after the kill)", r.ExpiryGapMin.Round(time.Millisecond), r.ExpiryGapMax.Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "watchdog lost reports: %d (owner holding the lock: %d, unlocking it: %d, not holding it: %d)\n",
		r.LostHolds, r.LostHolding, r.LostUnlocking, r.LostOther)
	if len(r.Faults) > 0 {
		fmt.Fprintf(w, "faults injected (killed processes: up to their last second): %v\n", r.Faults)
	}
	if c.has(kindFenced) {
		fmt.Fprintf(w, "fenced tokens: %d compared with the previous grant's, not larger: %d (explained by a lease that ran out or a Redisson section that did not hold the lock: %d); none, the server having restarted between the grant and the token read: %d\n",
			r.TokensChecked, r.TokenViolations+r.TokenExplained, r.TokenExplained, r.TokensLost)
	}
	if c.has(kindRW) {
		fmt.Fprintf(w, "read sections: %d; reader overlaps (allowed): %d\n", r.Reads, r.ReadOverlaps)
	}
	if c.has(kindFair) {
		fmt.Fprintf(w, "FIFO: %d grants served before a waiter that called %v or more later, as FIFO requires; out of order: %d (explained by a busy period past the wait timeout, a CLIENT KILL, or a failover or migration of the name's slot while waiting (for Redisson: or up to %v before): %d, of which CLIENT KILL %d, failover or migration %d)",
			r.FIFOHonoured, fifoSlack, r.FIFOViolations+r.FIFOExplained, javaConnWindow, r.FIFOExplained, r.FIFOAfterConnKill, r.FIFOAfterTopology)
		if c.Faults > 0 {
			fmt.Fprintf(w, " (with injected faults, a refused queueing call may arrive late: reordering is reported, not failed)")
		}
		fmt.Fprintln(w)
	}
	if c.RedLock > 0 {
		fmt.Fprintf(w, "master restarts: %d\n", r.MasterRestarts)
	}
	if c.Semaphore > 0 {
		fmt.Fprintf(w, "semaphore: most holders at once %d of %d permits; sections that shared the permits %d; killed holders' permits back by lease %d, given back by the coordinator %d; kills during an acquire or release %d; permits available at the end %d of %d\n",
			r.MostInside, c.Semaphore, r.Shared, r.PermitsExpired, r.PermitsReturned, r.PermitsAmbiguous, r.PermitsAtEnd, r.PermitsTotal)
	}
	if len(r.FairWaitsOut) > 0 {
		fmt.Fprintf(w, "TryLocks on fair names whose wait (%v) ran out within five waits after a kill, or after a failover or migration (a dead or failed waiter's place in the line lasts its wait): %s\n", fairTryWait(c), sortedCounts(r.FairWaitsOut))
	}
	if len(r.JavaConnErrors) > 0 {
		fmt.Fprintf(w, "Redisson errors within %v of a CLIENT KILL (Redisson's behaviour, not counted as errors; X acquire, U unlock): %s\n",
			javaConnWindow, sortedCounts(r.JavaConnErrors))
	}
	if r.RedissonUnheld > 0 || r.RedissonPhantomOverlaps > 0 {
		fmt.Fprintf(w, "Redisson unlocks that found the lock not held within %v of a CLIENT KILL: %d; overlaps with such a section (Redisson reported an acquisition it did not hold; not counted as violations): %d\n",
			javaConnWindow, r.RedissonUnheld, r.RedissonPhantomOverlaps)
	}
	if r.RedissonGoneAtEntry > 0 {
		fmt.Fprintf(w, "Redisson fixed-lease sections whose hold was gone at entry (lock() returned after the hold it took ran out): %d; overlaps with such a section (not counted as violations): %d\n", r.RedissonGoneAtEntry, r.RedissonGoneOverlaps)
	}
	if r.RedissonUnheldExpired > 0 {
		fmt.Fprintf(w, "Redisson unlocks that found the lock not held (or the permit gone) after the hold's lease could have run out: %d\n", r.RedissonUnheldExpired)
	}
	if len(r.RedissonUnlockRetries) > 0 {
		fmt.Fprintf(w, "Redisson unlocks tried again after a failed unlock (gone: it had run or the hold had run out; released: the hold was still there): %s\n", sortedCounts(r.RedissonUnlockRetries))
	}
	fmt.Fprintf(w, "violations: %d\n", r.Violations)
	if len(r.ViolationsByPair) > 0 {
		fmt.Fprintf(w, "violations by languages: %s\n", sortedCounts(r.ViolationsByPair))
	}
	fmt.Fprintf(w, "errors: acquire %d, unlock %d, worker %d\n", r.AcquireErrors, r.UnlockErrors, r.WorkerErrors)
	if r.Dir != "" {
		fmt.Fprintf(w, "records kept in %s\n", r.Dir)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	if r.OK() {
		fmt.Fprintln(w, "OK")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}

// worker is a running worker process.
type worker struct {
	procResult
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	err    error // cmd.Wait's result, after exited
}

// Run runs the workers for cfg.Duration, killing and restarting them, and
// checks their records.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{Config: cfg}
	addr := cfg.Redis
	var srv *redistest.Server
	var group *redistest.SentinelGroup
	var cluster *redistest.RedisCluster
	if cfg.Cluster {
		var err error
		if cluster, err = redistest.StartCluster(ctx, redistest.DefaultClusterConfig()); err != nil {
			return nil, err
		}
		defer cluster.Close()
		addr = clusterPrefix + strings.Join(cluster.Addrs(), ",")
	} else if cfg.Sentinel {
		var err error
		if group, err = redistest.StartSentinel(ctx, redistest.SentinelConfig{MasterName: "stress", Replicas: 2}); err != nil {
			return nil, err
		}
		defer group.Close()
		addr = sentinelAddr(group)
	} else if addr == "" {
		var err error
		if srv, err = redistest.StartServer(ctx, redistest.Config{Name: "stress"}); err != nil {
			return nil, err
		}
		defer srv.Close()
		addr = srv.Addr
	}
	// --stall-every: the workers reach the lock server through the
	// harness' TCP proxy, which stalls all traffic now and then; the
	// coordinator talks to the server directly.
	workerAddr := addr
	var proxy *redistest.Proxy
	if cfg.StallEvery > 0 {
		var err error
		if proxy, err = redistest.StartProxy(addr); err != nil {
			return nil, err
		}
		defer proxy.Close()
		workerAddr = proxy.Addr
	}
	rc, err := dial(addr)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// The sequencer: the sequence keys live on a server of their own that
	// no fault touches (always started here, with --redis too), so that
	// faults on the lock server (CLIENT KILL) never cut an INCR.
	seqSrv, err := redistest.StartServer(ctx, redistest.Config{Name: "stress-seq"})
	if err != nil {
		return nil, err
	}
	defer seqSrv.Close()
	seqAddr := seqSrv.Addr
	seqRC, err := dial(seqAddr)
	if err != nil {
		return nil, err
	}
	defer seqRC.Close()

	dir, err := os.MkdirTemp("", "stress-")
	if err != nil {
		return nil, err
	}
	// The records stay for a run that failed, to explain it (make soak
	// runs without --keep), and with --keep; not for --unsafe, whose runs
	// fail by design (the tests of the checker).
	rep.Dir = dir
	defer func() {
		if !cfg.KeepDir && (rep.OK() || cfg.Unsafe) {
			os.RemoveAll(dir)
			rep.Dir = ""
		}
	}()
	var id [6]byte
	_, _ = rand.Read(id[:])
	run := hex.EncodeToString(id[:])
	names := make([]string, cfg.Names)
	kinds := make([]string, cfg.Names)
	javaNames := make([]string, cfg.Names) // "KIND=name" (SoakWorker's arguments)
	var keys []string
	for i := range names {
		names[i] = fmt.Sprintf("stress:%s:%d", run, i)
		kinds[i] = cfg.kindOf(i)
		javaNames[i] = names[i]
		if kinds[i] != kindPlain {
			javaNames[i] = kinds[i] + "=" + names[i]
		}
		keys = append(keys, names[i], seqKey(names[i]), rlock.TokenName(names[i]), rlock.FairQueueName(names[i]), rlock.FairTimeoutName(names[i]))
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if cfg.Redis != "" {
			// (Only on a server of the caller's: the run's own go away.
			// One DEL of keys in many slots would not do on a cluster.)
			rc.Do(dctx, rc.B().Del().Key(keys...).Build())
		}
		seqRC.Do(dctx, seqRC.B().Del().Key(keys...).Build())
	}()

	var sems *rlock.Client
	if cfg.has(kindSemaphore) || cfg.has(kindPlainSemaphore) {
		if sems, err = rlock.New(rc); err != nil {
			return nil, err
		}
		defer sems.Close()
		for i, n := range names {
			if kinds[i] != kindSemaphore && kinds[i] != kindPlainSemaphore {
				continue
			}
			keys = append(keys, rlock.PermitTimeoutName(n)) // deleted at the end, like the names
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := rc.Do(sctx, rc.B().Set().Key(n).Value(strconv.Itoa(cfg.Semaphore)).Build()).Error()
			cancel()
			if err != nil {
				return nil, fmt.Errorf("setting the permits of %s: %w", n, err)
			}
		}
		if group != nil {
			// On both replicas before the first failover.
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n, err := rc.Do(wctx, rc.B().Wait().Numreplicas(2).Timeout(5000).Build()).AsInt64()
			cancel()
			if err != nil || n < 2 {
				return nil, fmt.Errorf("the permits reached %d of 2 replicas: %v", n, err)
			}
		}
	}
	var lastKill, lastConnKill time.Time

	// --redlock: the independent masters, and their restarts.
	var masterAddrs []string
	var masters []*redistest.Server
	for i := range cfg.RedLock {
		m, err := redistest.StartServer(ctx, redistest.Config{Name: fmt.Sprintf("stress-master-%d", i)})
		if err != nil {
			return nil, err
		}
		defer m.Close()
		masters = append(masters, m)
		masterAddrs = append(masterAddrs, m.Addr)
	}
	restartsDone := make(chan error, 1)
	restartStop := make(chan struct{})
	if len(masters) > 0 && cfg.RestartEvery > 0 {
		down := max(cfg.Watchdog, cfg.Lease) + 200*time.Millisecond // no lock on it outlives this
		rrng := mrand.New(mrand.NewPCG(cfg.Seed, 1))
		go func() {
			for {
				d := cfg.RestartEvery/2 + time.Duration(rrng.Int64N(int64(cfg.RestartEvery)+1))
				select {
				case <-restartStop:
					restartsDone <- nil
					return
				case <-time.After(d):
				}
				m := masters[rrng.IntN(len(masters))]
				if err := m.Kill(); err != nil {
					restartsDone <- err
					return
				}
				select {
				case <-restartStop:
				case <-time.After(down):
				}
				if err := m.Restart(ctx); err != nil {
					restartsDone <- err
					return
				}
				rep.MasterRestarts++ // read after restartsDone
			}
		}()
	} else {
		close(restartStop)
		restartsDone <- nil
	}
	stopRestarts := func() error {
		select {
		case <-restartStop:
		default:
			close(restartStop)
		}
		return <-restartsDone
	}

	rng := mrand.New(mrand.NewPCG(cfg.Seed, 0))
	start := func(slot, gen int) (*worker, error) {
		w := &worker{procResult: procResult{proc: proc{slot, gen}, Out: filepath.Join(dir, fmt.Sprintf("worker-%d-%d.jsonl", slot, gen))}}
		seed := cfg.Seed ^ uint64(slot)<<32 ^ uint64(gen)<<48
		if slot >= cfg.Procs {
			// A JVM worker: Redisson, the versions taking turns by slot.
			v := cfg.JavaVersions[(slot-cfg.Procs)%len(cfg.JavaVersions)]
			w.Lang = "java-" + v
			args := []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Xmx256m",
				"-Dsoak.unsafe=" + strconv.FormatBool(cfg.Unsafe), "-Dsoak.fairWaitMs=" + strconv.FormatInt(fairWaitMs(cfg), 10),
				"-Dsoak.fairTryWaitMs=" + strconv.FormatInt(fairTryWait(cfg).Milliseconds(), 10), "-cp", driver.ClassPath(v), "SoakWorker", workerAddr, seqAddr,
				strconv.FormatInt(cfg.Watchdog.Milliseconds(), 10), strconv.FormatInt(cfg.Lease.Milliseconds(), 10),
				strconv.FormatInt(cfg.MaxHold.Microseconds(), 10), strconv.Itoa(cfg.Goroutines),
				strconv.FormatInt(int64(seed>>1), 10), w.Out}
			w.cmd = exec.Command("java", append(args, javaNames...)...)
		} else {
			spec, _ := json.Marshal(workerConfig{
				Addr: workerAddr, SeqAddr: seqAddr, Names: names, Goroutines: cfg.Goroutines, Styles: cfg.Styles,
				WatchdogMs: cfg.Watchdog.Milliseconds(), LeaseMs: cfg.Lease.Milliseconds(),
				MaxHoldUs: cfg.MaxHold.Microseconds(), Unsafe: cfg.Unsafe, Faults: cfg.Faults, RW: cfg.RW, Out: w.Out,
				FairWaitMs: fairWaitMs(cfg), FairTryWaitMs: fairTryWait(cfg).Milliseconds(), Permits: cfg.Semaphore, Expirable: cfg.Expirable, Masters: masterAddrs,
				Seed: seed, Kinds: kinds,
			})
			w.cmd = exec.Command(cfg.Exe)
			w.cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
		}
		w.cmd.Stdout = cfg.Stderr
		w.cmd.Stderr = cfg.Stderr
		dieWithParent(w.cmd)
		var err error
		if w.stdin, err = w.cmd.StdinPipe(); err != nil {
			return nil, err
		}
		if err := w.cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting %s: %w", w.proc, err)
		}
		w.exited = make(chan struct{})
		go func() {
			w.err = w.cmd.Wait()
			close(w.exited)
		}()
		return w, nil
	}
	var (
		all     []*worker // every process started
		running = make([]*worker, cfg.Procs+cfg.Java)
		mu      sync.Mutex
	)
	killAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range all {
			_ = w.cmd.Process.Kill()
			<-w.exited
		}
	}
	for i := range running {
		w, err := start(i, 0)
		if err != nil {
			killAll()
			return nil, err
		}
		running[i] = w
		all = append(all, w)
	}

	began := time.Now()
	deadline := time.NewTimer(cfg.Duration)
	defer deadline.Stop()
	killTimer := jitterAfter(rng, cfg.KillEvery)
	clientKillTimer := jitterAfter(rng, cfg.ClientKills)
	clientKills := 0
	restartTimer := jitterAfter(rng, cfg.RestartLockEvery)
	stallTimer := jitterAfter(rng, cfg.StallEvery)
	stallDone := make(chan time.Duration, 1)
	stalling := false
	defer func() {
		if stalling {
			<-stallDone
		}
	}()
	// --failover-every: SENTINEL FAILOVER now and then, on a goroutine
	// (the group takes seconds to be healthy again).
	failoverTimer := jitterAfter(rng, cfg.FailoverEvery)
	type failoverDone struct {
		down, up int64
		err      error
	}
	failovers := make(chan failoverDone, 1)
	failingOver := false
	defer func() {
		if failingOver {
			<-failovers
		}
	}()
	// --migrate-every: slot migrations, likewise.
	migrateTimer := jitterAfter(rng, cfg.MigrateEvery)
	migrated := make(chan failoverDone, 1)
	migratingName := 0 // the index of the name whose slot is moving
	migrating := false
	defer func() {
		if migrating {
			<-migrated
		}
	}()
	// Every +switch-master a Sentinel announces, forced or not: one that
	// no forced failover explains is recorded as an unplanned failover.
	var switches struct {
		sync.Mutex
		t []int64
	}
	if group != nil {
		sc, err := dial(group.SentinelAddrs()[0])
		if err != nil {
			killAll()
			return nil, err
		}
		defer sc.Close()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		subscribed := make(chan error, 1)
		go func() {
			subscribed <- sc.Receive(wctx, sc.B().Subscribe().Channel("+switch-master").Build(), func(rueidis.PubSubMessage) {
				switches.Lock()
				switches.t = append(switches.t, time.Now().UnixNano())
				switches.Unlock()
			})
		}()
		defer func() { cancel(); <-subscribed }()
	}
loop:
	for {
		select {
		case d := <-stallDone:
			stalling = false
			rep.Stalls++
			rep.StallTotal += d
			rep.StallLongest = max(rep.StallLongest, d)
			stallTimer = jitterAfter(rng, cfg.StallEvery)
		case <-stallTimer:
			// Stall every worker connection to the lock server (both
			// directions, nothing closed) for StallMax/4 to StallMax.
			d := cfg.StallMax/4 + time.Duration(rng.Int64N(int64(cfg.StallMax*3/4)+1))
			stalling = true
			go func() {
				proxy.Stall()
				time.Sleep(d)
				proxy.Resume()
				stallDone <- d
			}()
		case d := <-migrated:
			migrating = false
			if d.err != nil {
				killAll()
				return nil, fmt.Errorf("migrating a slot: %w", d.err)
			}
			rep.topoChanges = append(rep.topoChanges, restart{down: d.down, up: d.up, only: migratingName + 1})
			rep.Migrations++
			rep.MigrationLongest = max(rep.MigrationLongest, time.Duration(d.up-d.down))
			migrateTimer = jitterAfter(rng, cfg.MigrateEvery)
		case <-migrateTimer:
			if failingOver {
				migrateTimer = jitterAfter(rng, cfg.MigrateEvery)
				continue
			}
			// Move a hot name's slot (one of each kind, taking turns) to
			// another master: its keys go over in batches (MIGRATE),
			// with ASK and TRYAGAIN replies meanwhile, then MOVED.
			hotN := rep.Migrations % min(len(names), len(cfg.Kinds))
			hot := names[hotN]
			migratingName = hotN
			migrating = true
			go func() {
				down := time.Now().UnixNano()
				fctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				err := func() error {
					from, err := cluster.MasterForKey(fctx, hot)
					if err != nil {
						return err
					}
					ms, err := cluster.Masters(fctx)
					if err != nil {
						return err
					}
					var to []*redistest.Server
					for _, m := range ms {
						if m != from {
							to = append(to, m)
						}
					}
					if len(to) == 0 {
						return errors.New("no other master")
					}
					return cluster.MoveSlot(fctx, redistest.Slot(hot), to[int(down)%len(to)])
				}()
				migrated <- failoverDone{down, time.Now().UnixNano(), err}
			}()
		case <-failoverTimer:
			if migrating {
				failoverTimer = jitterAfter(rng, cfg.FailoverEvery)
				continue
			}
			failingOver = true
			hot := names[rep.Failovers%min(len(names), len(cfg.Kinds))]
			go func() {
				down := time.Now().UnixNano()
				fctx, cancel := context.WithTimeout(ctx, time.Minute)
				var err error
				if cluster != nil {
					_, err = cluster.FailoverSlot(fctx, redistest.Slot(hot))
				} else {
					_, err = group.Failover(fctx)
				}
				cancel()
				failovers <- failoverDone{down, time.Now().UnixNano(), err}
			}()
		case f := <-failovers:
			failingOver = false
			if f.err != nil {
				killAll()
				return nil, fmt.Errorf("forcing a failover: %w", f.err)
			}
			// Writes the old master took and no replica had are lost:
			// explained like a restart's; Redisson's errors as after a
			// CLIENT KILL of the command connections.
			rep.restarts = append(rep.restarts, restart{down: f.down, up: f.up, failover: true})
			rep.topoChanges = append(rep.topoChanges, restart{down: f.down, up: f.up, failover: true})
			rep.connKills = append(rep.connKills, connKill{f.down, true})
			lastConnKill = time.Now()
			rep.Failovers++
			rep.FailoverLongest = max(rep.FailoverLongest, time.Duration(f.up-f.down))
			failoverTimer = jitterAfter(rng, cfg.FailoverEvery)
		case <-restartTimer:
			// Restart the lock server empty: every hold, token counter,
			// fair queue and permit count is gone; the coordinator sets
			// the semaphores' permits again, as an operator would.
			down := time.Now().UnixNano()
			if err := srv.Restart(ctx); err != nil {
				killAll()
				return nil, fmt.Errorf("restarting the lock server: %w", err)
			}
			for i, n := range names {
				if kinds[i] != kindSemaphore && kinds[i] != kindPlainSemaphore {
					continue
				}
				// (The coordinator's connection died with the server:
				// the first tries fail until rueidis reconnects.)
				var err error
				for deadline := time.Now().Add(10 * time.Second); ; {
					sctx, cancel := context.WithTimeout(ctx, time.Second)
					err = rc.Do(sctx, rc.B().Set().Key(n).Value(strconv.Itoa(cfg.Semaphore)).Build()).Error()
					cancel()
					if err == nil || time.Now().After(deadline) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err != nil {
					killAll()
					return nil, fmt.Errorf("setting the permits of %s after a restart: %w", n, err)
				}
			}
			up := time.Now().UnixNano()
			rep.restarts = append(rep.restarts, restart{down: down, up: up})
			// Redisson's errors after it are excused as after a CLIENT
			// KILL of the command connections.
			rep.connKills = append(rep.connKills, connKill{down, true})
			lastConnKill = time.Now()
			rep.LockRestarts++
			restartTimer = jitterAfter(rng, cfg.RestartLockEvery)
		case <-clientKillTimer:
			if failingOver {
				// The coordinator's connection follows the master: not
				// while the group fails over.
				clientKillTimer = jitterAfter(rng, cfg.ClientKills)
				continue
			}
			// Close every pub/sub connection, or every command
			// connection but the coordinator's, of every worker: the
			// lock clients must reconnect, resubscribe and resolve the
			// calls that were under way.
			typ := "pubsub"
			if clientKills%2 == 1 {
				typ = "normal"
			}
			clientKills++
			kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var n int64
			var err error
			if cluster != nil {
				// On every node (a cluster client's connection to one
				// node would only reach that one).
				rep.connKills = append(rep.connKills, connKill{time.Now().UnixNano(), typ == "normal"})
				lastConnKill = time.Now()
				for _, node := range cluster.Nodes() {
					m, e := node.Do(kctx, "CLIENT", "KILL", "TYPE", typ, "SKIPME", "yes")
					k, _ := m.AsInt64()
					n += k
					err = errors.Join(err, e)
				}
			} else {
				n, err = killClients(kctx, rc, typ, func(t int64) {
					rep.connKills = append(rep.connKills, connKill{t, typ == "normal"})
					lastConnKill = time.Now()
				})
			}
			cancel()
			if err != nil {
				killAll()
				return nil, fmt.Errorf("CLIENT KILL TYPE %s: %w", typ, err)
			}
			if rep.ClientKills == nil {
				rep.ClientKills, rep.ConnsKilled = make(map[string]int), make(map[string]int)
			}
			rep.ClientKills[typ]++
			rep.ConnsKilled[typ] += int(n)
			clientKillTimer = jitterAfter(rng, cfg.ClientKills)
		case <-ctx.Done():
			killAll()
			return nil, ctx.Err()
		case <-deadline.C:
			break loop
		case <-killTimer:
			slot := rng.IntN(len(running))
			if cfg.Java > 0 && cfg.Procs > 0 {
				// Kills alternate between the languages.
				if rep.Kills%2 == 0 {
					slot = rng.IntN(cfg.Procs)
				} else {
					slot = cfg.Procs + rng.IntN(cfg.Java)
				}
			}
			w := running[slot]
			w.KilledAt = time.Now().UnixNano()
			if err := w.cmd.Process.Kill(); err != nil {
				killAll()
				return nil, fmt.Errorf("killing %s: %w", w.proc, err)
			}
			<-w.exited
			rep.Kills++
			if rep.KillsByLang == nil {
				rep.KillsByLang = make(map[string]int)
			}
			rep.KillsByLang[w.lang()]++
			lastKill = time.Now()
			if cfg.has(kindPlainSemaphore) {
				amb, err := giveBack(ctx, seqRC, sems, names, w)
				if err != nil {
					killAll()
					return nil, err
				}
				rep.PermitsAmbiguous += amb
			}
			nw, err := start(slot, w.Gen+1)
			if err != nil {
				killAll()
				return nil, err
			}
			rep.Restarts++
			mu.Lock()
			running[slot] = nw
			all = append(all, nw)
			mu.Unlock()
			killTimer = jitterAfter(rng, cfg.KillEvery)
		}
	}

	if err := stopRestarts(); err != nil {
		killAll()
		return nil, fmt.Errorf("restarting a master: %w", err)
	}
	// Stop: EOF on stdin; each worker finishes its sections and exits.
	for _, w := range running {
		_ = w.stdin.Close()
	}
	// A JVM's thread may be inside a tryLock(60 s) that Redisson cannot
	// end sooner (after a failover or migration its subscription may be
	// lost: the cluster soak leg saw a JVM still waiting at the 34 s mark).
	stopIn := cfg.Lease + cfg.Watchdog + 30*time.Second
	if cfg.Java > 0 {
		stopIn += javaWait
	}
	stopBy := time.NewTimer(stopIn)
	defer stopBy.Stop()
	late := false
	for _, w := range running {
		if !late {
			select {
			case <-w.exited:
				continue
			case <-stopBy.C:
				late = true
			}
		}
		select {
		case <-w.exited:
		default:
			// Past the deadline: every worker still running is killed.
			_ = w.cmd.Process.Kill()
			<-w.exited
			rep.WorkerErrors++
			rep.problem("%s did not stop in time", w.proc)
		}
	}
	rep.Elapsed = time.Since(began)

	var procs []procResult
	for _, w := range all {
		if w.KilledAt == 0 && w.err != nil {
			w.ExitErr = w.err
			rep.WorkerErrors++
			rep.problem("%s exited: %v", w.proc, w.err)
		}
		procs = append(procs, w.procResult)
	}
	rep.fairTryWait = fairTryWait(cfg)
	switches.Lock()
	for _, t := range switches.t {
		planned := false
		for _, x := range rep.restarts {
			planned = planned || x.failover && t >= x.down && t <= x.up
		}
		if !planned {
			// The old master took writes from when it was last seen up
			// (down-after, 1s, before the switch) until it was demoted
			// (the Sentinels' next INFO, 1s): 3s each side.
			rep.restarts = append(rep.restarts, restart{down: t - 3*time.Second.Nanoseconds(), up: t + 3*time.Second.Nanoseconds(), failover: true})
			rep.topoChanges = append(rep.topoChanges, rep.restarts[len(rep.restarts)-1])
			rep.connKills = append(rep.connKills, connKill{t - 3*time.Second.Nanoseconds(), true})
			rep.UnplannedFailovers++
		}
	}
	switches.Unlock()
	sections, err := readRecords(procs, &rep.Verdict)
	if err != nil {
		return nil, err
	}
	seqMax := make([]int64, len(names))
	for i, n := range names {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := seqRC.Do(gctx, seqRC.B().Get().Key(seqKey(n)).Build()).AsInt64()
		cancel()
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, fmt.Errorf("reading %s: %w", seqKey(n), err)
		}
		seqMax[i] = v
	}
	permits := make([]int, len(names)) // per name: 0 for a lock
	fair, fenced := make([]bool, len(names)), make([]bool, len(names))
	for i, k := range kinds {
		if k == kindSemaphore || k == kindPlainSemaphore {
			permits[i] = cfg.Semaphore
		}
		fair[i], fenced[i] = k == kindFair, k == kindFenced
	}
	for _, s := range sections {
		if s.N >= 0 && s.N < len(kinds) {
			s.Kind = kinds[s.N]
		}
	}
	check(sections, seqMax, rep.Kills, cfg.Goroutines, permits, &rep.Verdict)
	if cfg.has(kindSemaphore) || cfg.has(kindPlainSemaphore) {
		last := lastKill
		if lastConnKill.After(last) {
			last = lastConnKill
		}
		if cfg.Expirable && !last.IsZero() {
			// The permits of the last killed holders, and of Java
			// releases a CLIENT KILL cut, come back once their lease has
			// run out, at the next call.
			if err := sleepCtx(ctx, time.Until(last.Add(cfg.Lease+100*time.Millisecond))); err != nil {
				return nil, err
			}
		}
		for i, n := range names {
			if permits[i] == 0 {
				continue
			}
			rep.PermitsTotal += permits[i]
			var avail int
			var err error
			if cfg.Expirable {
				avail, err = sems.PermitExpirableSemaphore(n).AvailablePermits(ctx)
			} else {
				avail, err = sems.Semaphore(n).AvailablePermits(ctx)
			}
			if err != nil {
				return nil, fmt.Errorf("reading the permits of %s: %w", n, err)
			}
			rep.PermitsAtEnd += avail
		}
		if !cfg.Expirable && rep.PermitsAtEnd < rep.PermitsTotal-rep.PermitsAmbiguous {
			rep.WorkerErrors++
			rep.problem("%d permits available at the end, fewer than the %d set less the %d kills during an acquire or release: a permit was lost",
				rep.PermitsAtEnd, rep.PermitsTotal, rep.PermitsAmbiguous)
		}
		if cfg.Expirable && rep.PermitsAtEnd != rep.PermitsTotal {
			rep.WorkerErrors++
			rep.problem("%d permits available at the end, not %d: a permit was lost or made up", rep.PermitsAtEnd, rep.PermitsTotal)
		}
		if rep.PermitsAtEnd > rep.PermitsTotal {
			rep.WorkerErrors++
			rep.problem("%d permits available at the end, more than the %d set: a permit was given back twice", rep.PermitsAtEnd, rep.PermitsTotal)
		}
	}
	if cfg.has(kindFair) {
		checkFIFO(sections, fair, cfg.FairWait, cfg.Faults > 0, &rep.Verdict)
	}
	if cfg.has(kindFenced) {
		checkTokens(sections, fenced, &rep.Verdict)
	}
	return rep, nil
}

// giveBack gives back, after a kill, the permits the killed worker held.
// In plain semaphore mode each goroutine records Q before its Acquire, B
// once inside, E before its Release and R after it: a goroutine whose last
// record is B held a permit for sure. For each, giveBack INCRs the name's
// sequence key (so that whoever the permit lets in enters after that
// number), releases one permit and appends a K record with that number. A
// goroutine killed after Q (its acquire may have taken a permit) or after
// E (its release may not have run) is ambiguous: its permit, if any, stays
// taken, as a dead holder's permits of a plain semaphore do. It returns
// how many were ambiguous.
func giveBack(ctx context.Context, rc rueidis.Client, sems *rlock.Client, names []string, w *worker) (ambiguous int, err error) {
	recs, err := os.ReadFile(w.Out)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	last := map[int]record{} // by goroutine
	for _, line := range splitLines(recs) {
		var r record
		if json.Unmarshal(line, &r) != nil {
			continue
		}
		switch r.K {
		case "Q", "B", "E", "R", "X", "U":
			last[r.G] = r
		}
	}
	f, err := os.OpenFile(w.Out, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if len(recs) > 0 && recs[len(recs)-1] != '\n' {
		// The kill cut the last record: end it, so that K records stand
		// on lines of their own.
		if _, err := f.Write([]byte{'\n'}); err != nil {
			return 0, err
		}
	}
	for g, r := range last {
		switch r.K {
		case "Q", "E", "U":
			ambiguous++
			continue
		case "B":
		default:
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		s2, err := rc.Do(cctx, rc.B().Incr().Key(seqKey(names[r.N])).Build()).AsInt64()
		cancel()
		if err != nil {
			return ambiguous, fmt.Errorf("giving back a killed holder's permit: %w", err)
		}
		if err := sems.Semaphore(names[r.N]).Release(ctx, 1); err != nil {
			return ambiguous, fmt.Errorf("giving back a killed holder's permit: %w", err)
		}
		b, _ := json.Marshal(record{K: "K", G: g, N: r.N, S1: r.S1, S2: s2})
		if _, err := f.Write(append(b, '\n')); err != nil {
			return ambiguous, err
		}
	}
	return ambiguous, nil
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		out = append(out, b[:i])
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// sortedCounts formats counts by key, in key order.
func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	return b.String()
}

// sentinelPrefix starts an address that names a Sentinel group rather
// than one server: "sentinel:<master set>@<host:port>,<host:port>,..."
// (the Go and the Java workers both read it).
const sentinelPrefix = "sentinel:"

// clusterPrefix starts an address that names a Redis Cluster by its
// nodes: "cluster:<host:port>,<host:port>,...".
const clusterPrefix = "cluster:"

// sentinelAddr is the address of group g.
func sentinelAddr(g *redistest.SentinelGroup) string {
	return sentinelPrefix + g.MasterName + "@" + strings.Join(g.SentinelAddrs(), ",")
}

// killClients closes, on a standalone server, every pub/sub connection and,
// when typ is "normal", then every command connection, each but rc's own,
// and returns how many connections of typ it closed. mark gets the wall
// clock before the first CLIENT KILL is sent: the checker excuses
// Redisson's errors from that time on, and a worker can see its connection
// closed before the KILL's reply is back (a mark taken after the reply
// left a Redisson SUBSCRIBE error of the same instant unexcused, failing
// the soak of 1cb6c15).
func killClients(ctx context.Context, rc rueidis.Client, typ string, mark func(t int64)) (int64, error) {
	mark(time.Now().UnixNano())
	n, err := rc.Do(ctx, rc.B().ClientKill().TypePubsub().SkipmeYes().Build()).AsInt64()
	if typ == "normal" && err == nil {
		n, err = rc.Do(ctx, rc.B().ClientKill().TypeNormal().SkipmeYes().Build()).AsInt64()
	}
	return n, err
}

// dial connects a plain client to one server, or a Sentinel client to a
// Sentinel group (no client-side cache).
func dial(addr string) (rueidis.Client, error) {
	if rest, ok := strings.CutPrefix(addr, sentinelPrefix); ok {
		set, list, _ := strings.Cut(rest, "@")
		return rueidis.NewClient(rueidis.ClientOption{InitAddress: strings.Split(list, ","), Sentinel: rueidis.SentinelOption{MasterSet: set}, DisableCache: true})
	}
	if list, ok := strings.CutPrefix(addr, clusterPrefix); ok {
		return rueidis.NewClient(rueidis.ClientOption{InitAddress: strings.Split(list, ","), DisableCache: true})
	}
	return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
}

// jitterAfter returns a channel that fires once, after a random time from
// mean/2 to 3*mean/2; nil (never) when mean is not positive.
func jitterAfter(rng *mrand.Rand, mean time.Duration) <-chan time.Time {
	if mean <= 0 {
		return nil
	}
	return time.After(mean/2 + time.Duration(rng.Int64N(int64(mean)+1)))
}
