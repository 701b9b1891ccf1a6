package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// proc identifies one worker process: its slot and its generation (each
// restart after a kill is a new generation).
type proc struct{ Slot, Gen int }

// lang names the language and library of a worker: "go", or
// "java-<Redisson version>".
func (p procResult) lang() string {
	if p.Lang == "" {
		return "go"
	}
	return p.Lang
}

func (p proc) String() string { return fmt.Sprintf("worker %d.%d", p.Slot, p.Gen) }

// procResult is what the coordinator knows about one worker process.
type procResult struct {
	proc
	Out      string // its records file
	KilledAt int64  // wall clock (UnixNano) just before the coordinator's SIGKILL; 0 if not killed
	ExitErr  error  // how it ended, when it was not killed and did not exit 0
	Lang     string // "" (Go) or "java-<Redisson version>"
}

// section is one critical section: from the INCR that returned S1 to the
// INCR that returned S2 on its name's sequence key, both done while holding
// the lock.
type section struct {
	proc
	G     int   // goroutine (owner = G+1)
	N     int   // name index
	S1    int64 // seq on entry
	S2    int64 // seq on exit; 0 while open (no E record: the process was killed)
	T0    int64 // before the acquire call
	TB    int64 // before the entry INCR
	TE    int64 // after the exit INCR
	Lease int64 // the hold's lease in ms (fixed, or the watchdog timeout)
	WD    bool  // the watchdog renews the hold
	Read  bool  // a read hold (--rw): it may overlap other read holds
	Lost  bool  // the hold's lease may have run out during the section
	Lang  string
	St    string // the acquisition style
	Kind  string // the name's kind (kindPlain, ...; set by Run)
	Tok   int64  // fenced lock: the grant's token

	killedAt int64 // the process' kill time
	returned bool  // cut by the kill; the coordinator gave its permit back (K)
	unheld   bool  // Java: its unlock found the lock not held (see RedissonUnheld)
	gone     bool  // Java: its fixed-lease hold was gone at entry (see RedissonGoneAtEntry)
}

func (s *section) open() bool { return s.S2 == 0 }

func (s *section) String() string {
	end := "open"
	if !s.open() {
		end = fmt.Sprint(s.S2)
	}
	return fmt.Sprintf("%s (%s) goroutine %d [%d, %s]", s.proc, s.Lang, s.G, s.S1, end)
}

// Verdict is the outcome of checking the records of a run.
type Verdict struct {
	Acquisitions        int   // critical sections entered (B records)
	Completed           int   // ... and finished (E records)
	PerName             []int // acquisitions per name
	Violations          int   // overlapping sections not explained by a lease that ran out
	ReadOverlaps        int   // read sections that overlapped other read sections (--rw: allowed)
	Reads               int   // read sections (--rw)
	LeaseExpiryOverlaps int   // overlaps explained by a lease that ran out (killed or lost holder)
	LostOverlaps        int   // ... of which with a live holder that knew its hold had ended (Lost)
	// RedissonUnheld counts Java unlocks that found the lock not held
	// (IllegalMonitorStateException) within javaConnWindow after a CLIENT
	// KILL of the command connections; RedissonPhantomOverlaps the
	// overlaps involving such a section: Redisson reported an
	// acquisition it did not hold. Both are Redisson's behaviour under
	// cut connections (Java-only runs show them too), reported apart.
	RedissonUnheld, RedissonPhantomOverlaps int
	// RedissonUnheldExpired counts Java unlocks that found the lock not
	// held (or the permit gone) when the hold's fixed lease may have run
	// out by the time the unlock returned, as the worker measured it (the
	// U record's Lost): "not held" is then the right answer.
	RedissonUnheldExpired int
	// RedissonGoneAtEntry counts Java sections whose worker found, right
	// after lock() returned, that its own fixed-lease hold was no longer in
	// the lock's hash (the B record's Gone): Redisson's lock() returned
	// after the hold it took had run out, as when the reply to its script
	// came after the response timeout and a retry. Such a section held
	// nothing; RedissonGoneOverlaps counts the overlaps with one where the
	// other section entered once the gone hold could have run out (from
	// the call's start plus the lease; not violations: the Java side
	// reports an acquisition it no longer had). An earlier entry is judged
	// as any overlap: the hold may still have been live.
	RedissonGoneAtEntry, RedissonGoneOverlaps int
	// RedissonUnlockRetries counts, by outcome, the Java workers' second
	// tries after an unlock that failed with its outcome unknown (the H
	// records): "gone" (the failed unlock had run, or the hold ran out
	// unrenewed), "released" (the hold was still there, renewed no more,
	// and this thread's next lock of the name would have re-entered it,
	// keeping the name taken until the JVM died) or "stuck" (still held
	// after 10 s).
	RedissonUnlockRetries map[string]int
	ViolationsByPair      map[string]int // exclusive-lock violations by "<first holder's language> then <second's>"
	CutByKill             int            // sections open when their process was killed
	Unrecorded            int            // sequence numbers no record accounts for (INCRs of killed processes)
	AcquireErrors         int
	UnlockErrors          int // Unlock failures other than ErrNotHeld after a lost hold
	// Holds the watchdog reported lost, by what the owner was doing then:
	// holding that lock, unlocking it, or neither. In a run whose only
	// faults are kills, a live worker's hold is never really lost (its
	// sections last milliseconds, its lease seconds): every report is a
	// false alarm of the library.
	LostHolds, LostHolding, LostUnlocking, LostOther int
	Faults                                           map[string]int // injected faults by kind (--faults)
	// --fair (see checkFIFO): FIFOHonoured counts grants followed by a
	// grant to a caller already waiting fifoSlack or more after them (the
	// cases FIFO decided); FIFOViolations grants that came before a call
	// that began fifoSlack or more earlier; FIFOExplained such reorders
	// after a busy period of fairWait (the reservations may have run out,
	// as in Redisson), or, with injected faults, any.
	FIFOHonoured, FIFOViolations, FIFOExplained int
	WorkerErrors                                int // unreadable records, open sections of live processes, unexpected exits
	// --semaphore: Shared counts sections that entered while others held
	// permits (the permits were shared); MostInside the most sections
	// inside at once; PermitsExpired the permits of killed holders that
	// came back by their lease (--expirable); PermitsReturned those the
	// coordinator gave back after a kill (plain semaphore: a dead holder's
	// permits never come back by themselves).
	Shared, MostInside, PermitsExpired, PermitsReturned int
	// ExpiryGapMin/Max: for overlaps with a killed holder, how long after
	// the kill the next holder entered.
	ExpiryGapMin, ExpiryGapMax time.Duration
	Problems                   []string // the first violations and errors, described
	// ByLang and ByStyle count the acquisitions per worker language
	// ("go", "java-4.7.0", ...) and per language/style ("go/trylock-wait");
	// Misses the one-attempt TryLocks that found the lock taken, per
	// language. LongestWait is the longest acquire call that got the lock
	// (from T0 to TB).
	ByLang, ByStyle, Misses map[string]int
	LongestWait             time.Duration
	// ByKind counts the acquisitions per kind of name; ByKindLang per
	// "<kind>/<language>".
	ByKind, ByKindLang map[string]int
	// Fenced locks (see checkTokens): TokensChecked sections whose token
	// was compared with the previous grant's on the name; TokenViolations
	// tokens not larger than the previous section's; TokenExplained such
	// inversions by a section that entered after its lease could have run
	// out, or by a Redisson section that did not hold the lock.
	TokensChecked, TokenViolations, TokenExplained int
	// TokensLost: fenced sections with no token whose lock server
	// restarted or failed over between the call's start and the section's
	// entry (a LockLease, then a Token read that found the counter gone
	// with the hold).
	TokensLost int
	// FIFOAfterConnKill: the FIFOExplained reorders with a CLIENT KILL
	// while the passed-over waiter waited (Redisson's queueing call may
	// have failed; it queues again behind the others).
	FIFOAfterConnKill int
	// FIFOAfterTopology: the FIFOExplained reorders whose passed-over
	// waiter waited during a failover or a slot migration (see
	// topoChangeDuring).
	FIFOAfterTopology int
	// JavaConnErrors counts Redisson's acquire and unlock errors within
	// javaConnWindow after the coordinator closed every command or
	// pub/sub connection (CLIENT KILL): Redisson reports a command cut by
	// a closed connection as an error (RedisException, a response
	// timeout, StacklessClosedChannelException, a SUBSCRIBE that could
	// not be written, a tryLock that returns false before its wait); this
	// library resolves such calls, so a Go error is never excused. By the
	// error's class.
	JavaConnErrors    map[string]int
	LongestWaitBy     string // the section that waited longest
	LongestWaitByLang map[string]time.Duration
	// FairWaitsOut counts, per language, the TryLocks with a wait on fair
	// names that ran out (W records) within fairWaitsOutWindow waits after
	// a SIGKILL or CLIENT KILL (a killed process' waiters, up to one per
	// goroutine, each hold up the line for their wait), or within
	// javaTopologyWindow and as many waits after a failover or slot
	// migration (Redisson waiters that failed then do the same); one that
	// ran out otherwise is an acquire error.
	FairWaitsOut map[string]int
	// connKills are the wall-clock times of those CLIENT KILLs (set by
	// Run before readRecords); fairTryWait is the wait of TryLock on fair
	// names.
	connKills   []connKill
	fairTryWait time.Duration
	// restarts are the lock server's restarts (set by Run): every hold,
	// token and permit count was lost with its data. RestartOverlaps
	// counts the overlaps they explain (a hold taken before a restart, the
	// next after it); RestartErrors the errors within restartWindow of
	// one, by "<language> <record kind>" (Go too: the server was down).
	restarts        []restart
	RestartOverlaps int
	RestartErrors   map[string]int
	// FailoverOverlaps and FailoverErrors are the same for the Sentinel
	// failovers (restarts with failover set): a write acknowledged by the
	// old master that the new one never had loses what it wrote.
	FailoverOverlaps int
	FailoverErrors   map[string]int
	// topoChanges are the failovers and slot migrations (set by Run), by
	// wall clock from the start of each to a healthy topology;
	// JavaTopologyErrors counts the Redisson errors they excuse (see
	// javaTopologyError), by class; JavaTopologyLag is the longest time
	// from a change's end to such an error (tryLock timeouts aside).
	topoChanges        []restart
	JavaTopologyErrors map[string]int
	JavaTopologyLag    time.Duration
	// FaultErrorSamples is the first error of each kind that a restart or
	// failover excused, as "lang K: text".
	FaultErrorSamples []string
}

// restart is a time the lock server may have lost data, by wall clock:
// from before the kill (or SENTINEL FAILOVER) to when it answered again
// (or the group was healthy).
type restart struct {
	down, up int64
	failover bool
	// only: for a slot migration, 1 + the index of the name whose slot
	// moved (its keys are hash-tagged by the name, so no other name's
	// moved); 0: every name (a restart or a failover).
	only int
}

// touches reports whether the change affected name n.
func (x restart) touches(n int) bool { return x.only == 0 || x.only == n+1 }

// restartWindow: errors this long after a restart are the outage's.
const restartWindow = 10 * time.Second

// restartError reports (and counts) whether record r came while the lock
// server was down or within restartWindow after it was up again.
func (v *Verdict) restartError(p procResult, r record) bool {
	if r.T == 0 || strings.HasPrefix(r.Err, "INCR") {
		return false
	}
	for _, x := range v.restarts {
		if r.T >= x.down && r.T <= x.up+restartWindow.Nanoseconds() {
			m := &v.RestartErrors
			if x.failover {
				m = &v.FailoverErrors
			}
			if *m == nil {
				*m = make(map[string]int)
			}
			key := p.lang() + " " + r.K
			if (*m)[key] == 0 && len(v.FaultErrorSamples) < maxProblems {
				v.FaultErrorSamples = append(v.FaultErrorSamples, key+": "+r.Err)
			}
			(*m)[key]++
			return true
		}
	}
	return false
}

// granted is the earliest time s's hold may have been granted: its call's
// start (T0) where recorded, else its entry. Entry is not enough: a reply
// held up in the TCP proxy by a stall reaches its caller after the
// server it came from was killed and restarted (a soak's fenced section
// entered after a restart with the counter's old token).
func (s *section) granted() int64 {
	if s.T0 > 0 && s.T0 < s.TB {
		return s.T0
	}
	return s.TB
}

// restartBetween reports whether the lock server restarted (or failed
// over) after a hold was taken (before from) and before another one
// entered at to.
func (v *Verdict) restartBetween(from, to int64) bool { return v.lossBetween(from, to) != nil }

func (v *Verdict) lossBetween(from, to int64) *restart {
	for i, x := range v.restarts {
		if from <= x.up && to >= x.down {
			return &v.restarts[i]
		}
	}
	return nil
}

// goneBefore reports whether section o entered once the hold of x, if x's
// was gone at entry (section.gone), could have run out: x's grant came
// after its call began (T0), so its hold lasted until T0 + lease at the
// earliest; an o that entered before that overlapped a hold that may have
// been live (a violation, whoever's defect). For an x that was not gone,
// true.
func goneBefore(x, o *section) bool {
	return !x.gone || o.TB >= x.T0+x.Lease*ms-expirySlack
}

// lostOverlap counts an overlap that a restart or failover between from
// and to explains, and reports whether there was one.
// Each is noted in Problems (not as a violation) with the pair.
func (v *Verdict) lostOverlap(from, to int64, n int, e, l *section) bool {
	x := v.lossBetween(from, to)
	if x == nil {
		return false
	}
	cause := "restart"
	if x.failover {
		cause = "failover"
		v.FailoverOverlaps++
	} else {
		v.RestartOverlaps++
	}
	v.problem("name %d: overlap explained by a %s (not counted as a violation): %s entered while %s was inside", n, cause, l, e)
	return true
}

type connKill struct {
	t      int64 // wall clock, before the CLIENT KILL
	normal bool  // command connections (else pub/sub)
}

// javaConnWindow: Redisson's default timeout (3s) and retry interval
// (1.5s) twice over, and a margin (the errors seen came at once or after
// one timeout).
const javaConnWindow = 10 * time.Second

var exceptionRE = regexp.MustCompile(`(?:[a-z0-9]+\.)+([A-Z][A-Za-z0-9]*(?:Exception|Error))`)

// afterConnKill reports whether wall-clock time t came within javaConnWindow
// after a CLIENT KILL of the command connections.
// connKillIn reports whether a CLIENT KILL (of either type) came between
// wall-clock times from and to.
func (v *Verdict) connKillIn(from, to int64) bool {
	for _, k := range v.connKills {
		if k.t >= from && k.t <= to {
			return true
		}
	}
	return false
}

func (v *Verdict) afterConnKill(t int64) bool {
	for _, k := range v.connKills {
		if k.normal && t >= k.t && t <= k.t+javaConnWindow.Nanoseconds() {
			return true
		}
	}
	return false
}

// javaConnError reports whether record r of a JVM worker came within
// javaConnWindow after a CLIENT KILL of the command connections.
func (v *Verdict) javaConnError(p procResult, r record) bool {
	if p.Lang == "" || r.T == 0 || strings.HasPrefix(r.Err, "INCR") || notHeldErr(r.Err) {
		// Go errors, INCRs on the sequencer (no fault touches it) and
		// unlocks of a lock not held are never excused.
		return false
	}
	for _, k := range v.connKills {
		if r.K == "U" && !k.normal {
			continue // closing pub/sub connections cuts no unlock
		}
		if r.T >= k.t && r.T <= k.t+javaConnWindow.Nanoseconds() {
			if v.JavaConnErrors == nil {
				v.JavaConnErrors = make(map[string]int)
			}
			v.JavaConnErrors[r.K+" "+redissonErrClass(r.Err)]++
			return true
		}
	}
	return false
}

// javaTopologyWindow: how long after a failover or a slot migration (on a
// cluster or a Sentinel group) Redisson's errors are its own reaction to
// the change. Redisson re-subscribes its (sharded) channels after the
// node changed and, meanwhile, fails acquisitions with subscription
// timeouts (3 s for the response, 7.5 s for its subscription lock, each
// after retries) and tryLock calls that return false before their wait;
// Java-only runs (--procs 0) show the same. The tryLock and tryAcquire
// calls with a 60 s wait that return false count when their wait
// overlapped the window.
const javaTopologyWindow = 30 * time.Second

// javaWait is the wait of the SoakWorker's tryLock(60s) calls.
const javaWait = 60 * time.Second

// javaTopologyError reports (and counts, by the error's class) whether
// record r of a JVM worker came within javaTopologyWindow after a
// failover or a slot migration. Go errors are never excused this way.
func (v *Verdict) javaTopologyError(p procResult, r record) bool {
	if p.Lang == "" || r.T == 0 || strings.HasPrefix(r.Err, "INCR") || notHeldErr(r.Err) {
		return false
	}
	from := r.T
	timedOut := strings.Contains(r.Err, "timed out")
	if timedOut {
		from -= javaWait.Nanoseconds()
	}
	for _, x := range v.topoChanges {
		if r.T >= x.down && from <= x.up+javaTopologyWindow.Nanoseconds() {
			if v.JavaTopologyErrors == nil {
				v.JavaTopologyErrors = make(map[string]int)
			}
			v.JavaTopologyErrors[r.K+" "+redissonErrClass(r.Err)]++
			if lag := time.Duration(r.T - x.up); !timedOut && lag > v.JavaTopologyLag {
				v.JavaTopologyLag = lag
			}
			return true
		}
	}
	return false
}

// redissonErrClass names a Redisson error by its innermost exception
// class, or "tryLock returned false" for a wait that ran out.
func redissonErrClass(err string) string {
	if m := exceptionRE.FindAllStringSubmatch(err, -1); len(m) > 0 {
		return m[len(m)-1][1]
	}
	if strings.Contains(err, "timed out") {
		return "tryLock returned false"
	}
	return "other"
}

// notHeldErr reports whether a Redisson unlock error says the lock was
// not held (or the permit not taken): IllegalMonitorStateException, or the
// permit-expirable semaphore's IllegalArgumentException.
func notHeldErr(err string) bool {
	return strings.Contains(err, "IllegalMonitorStateException") || strings.Contains(err, "has already been released")
}

const maxProblems = 20

// unlockTiming is timing for a JVM worker's U record, which carries only
// the unlock's end (t): the section's end stands for the unlock's start
// (the worker unlocks right after it).
func (s *section) unlockTiming(t int64) string {
	return record{T0: s.T0, TB: s.TB, TE: s.TE, T: t, St: s.St, Lease: s.Lease, WD: s.WD}.timing()
}

// timing describes a U record's times, where the worker recorded them.
func (r record) timing() string {
	if r.TE == 0 || r.T0 == 0 {
		return ""
	}
	d := func(a, b int64) time.Duration { return time.Duration(b - a).Round(time.Millisecond) }
	lease := "watchdog"
	if !r.WD {
		lease = "lease"
	}
	return fmt.Sprintf(" (%s, %s %dms: acquire began %v before the unlock, the section entered %v before it; the unlock took %v)",
		r.St, lease, r.Lease, d(r.T0, r.TE), d(r.TB, r.TE), d(r.TE, r.T))
}

// fairWaitsOutWindow: see Verdict.FairWaitsOut.
const fairWaitsOutWindow = 5

const (
	ms = int64(time.Millisecond)
	// clockSlack absorbs clock granularity when wall-clock times of two
	// processes on one machine are compared.
	clockSlack = 2 * ms
	// expirySlack: a fixed lease starts when its acquire script ran,
	// before TB (the acquire's return) by the reply's trip; an overlap is
	// explained by the lease only from TB + lease - expirySlack (T0 + lease
	// would excuse too much: T0 is before the whole wait).
	expirySlack = 100 * ms
)

func (v *Verdict) problem(format string, args ...any) {
	if len(v.Problems) < maxProblems {
		v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
	}
}

// OK reports whether the run showed mutual exclusion and no errors.
func (v *Verdict) OK() bool {
	return v.Violations == 0 && v.FIFOViolations == 0 && v.TokenViolations == 0 && v.WorkerErrors == 0 && v.AcquireErrors == 0 && v.UnlockErrors == 0 && v.Acquisitions > 0
}

// readRecords reads the records of each process into sections and counts
// the other records into v.
func readRecords(procs []procResult, v *Verdict) ([]*section, error) {
	var sections []*section
	type key struct {
		proc
		n  int
		s1 int64
	}
	var kills []int64 // SIGKILLs and CLIENT KILLs
	for _, p := range procs {
		if p.KilledAt != 0 {
			kills = append(kills, p.KilledAt)
		}
	}
	for _, k := range v.connKills {
		kills = append(kills, k.t)
	}
	open := make(map[key]*section)
	ended := make(map[key]*section) // for the Java unlock records that follow E
	for _, p := range procs {
		f, err := os.Open(p.Out)
		if os.IsNotExist(err) {
			continue // killed before it wrote anything
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		line, cut := 0, false
		for sc.Scan() {
			line++
			var r record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				if p.KilledAt != 0 && !cut {
					// A SIGKILL can cut the write under way: one line
					// of a killed process may be incomplete (its INCR
					// is then one of the unrecorded ones).
					cut = true
					continue
				}
				v.WorkerErrors++
				v.problem("%s: %s line %d: %v", p.proc, p.Out, line, err)
				continue
			}
			switch r.K {
			case "B":
				s := &section{proc: p.proc, G: r.G, N: r.N, S1: r.S1, T0: r.T0, TB: r.TB, Lease: r.Lease, WD: r.WD, Read: r.Read, killedAt: p.KilledAt, Lang: p.lang(), St: r.St, Tok: r.Tok}
				switch {
				case r.Gone && (p.Lang == "" || r.WD || r.Read || r.Lease <= 0):
					// Only the Java worker's fixed-lease write holds
					// check their own field at entry.
					v.WorkerErrors++
					v.problem("%s: a gone mark on a section that cannot carry one (Go, watchdog, read or no lease): %+v", p.proc, r)
				case r.Gone:
					s.gone = true
					v.RedissonGoneAtEntry++
				}
				sections = append(sections, s)
				open[key{p.proc, r.N, r.S1}] = s
			case "M":
				if v.Misses == nil {
					v.Misses = make(map[string]int)
				}
				v.Misses[p.lang()]++
			case "W":
				afterKill := slices.ContainsFunc(kills, func(k int64) bool { return k <= r.T && r.T-k <= fairWaitsOutWindow*v.fairTryWait.Nanoseconds() })
				// After a failover or migration, Redisson waiters that
				// failed (javaTopologyError) leave their places in the
				// line as a killed waiter does.
				afterChange := slices.ContainsFunc(v.topoChanges, func(x restart) bool {
					return x.down <= r.T && r.T-x.up <= javaTopologyWindow.Nanoseconds()+fairWaitsOutWindow*v.fairTryWait.Nanoseconds()
				})
				if afterKill || afterChange {
					if v.FairWaitsOut == nil {
						v.FairWaitsOut = make(map[string]int)
					}
					v.FairWaitsOut[p.lang()]++
					continue
				}
				v.AcquireErrors++
				v.problem("%s goroutine %d: TryLock(%v) of fair name %d ran out with no kill in the %d waits before", p.proc, r.G, v.fairTryWait, r.N, fairWaitsOutWindow)
			case "Q", "R":
				// Plain semaphore mode's acquiring and released marks
				// (for giveBack).
			case "K":
				// The coordinator gave back the permit of a section cut by
				// the kill, after INCRing the sequence key to S2.
				s := open[key{p.proc, r.N, r.S1}]
				if s == nil {
					v.WorkerErrors++
					v.problem("%s: a permit given back for a section that never began: %+v", p.proc, r)
					continue
				}
				delete(open, key{p.proc, r.N, r.S1})
				s.S2, s.returned = r.S2, true
				v.PermitsReturned++
			case "E":
				s := open[key{p.proc, r.N, r.S1}]
				if s == nil {
					v.WorkerErrors++
					v.problem("%s: end of a section that never began: %+v", p.proc, r)
					continue
				}
				delete(open, key{p.proc, r.N, r.S1})
				s.S2, s.TE, s.Lost = r.S2, r.TE, r.Lost
				if p.Lang != "" {
					ended[key{p.proc, r.N, r.S1}] = s
				}
			case "L":
				v.LostHolds++
				switch r.State {
				case "holding":
					v.LostHolding++
				case "unlocking":
					v.LostUnlocking++
				default:
					v.LostOther++
				}
			case "U":
				if s := ended[key{p.proc, r.N, r.S1}]; s != nil && notHeldErr(r.Err) && v.afterConnKill(r.T) {
					// Redisson's unlock found the lock not held, shortly
					// after a CLIENT KILL of the command connections:
					// either it resent an unlock that had run (its retry
					// of a command whose reply was cut), or it had
					// reported an acquisition it never held. Java-only
					// runs show both (RedissonPhantomOverlaps).
					s.unheld = true
					v.RedissonUnheld++
					continue
				}
				if p.Lang != "" && r.Lost && notHeldErr(r.Err) {
					v.RedissonUnheldExpired++
					continue
				}
				if v.restartError(p, r) || v.javaConnError(p, r) || v.javaTopologyError(p, r) {
					continue
				}
				v.UnlockErrors++
				timing := r.timing()
				if s := ended[key{p.proc, r.N, r.S1}]; timing == "" && s != nil {
					timing = s.unlockTiming(r.T)
				}
				v.problem("%s goroutine %d: unlock of section %d%s: %s", p.proc, r.G, r.S1, timing, r.Err)
			case "H":
				if v.RedissonUnlockRetries == nil {
					v.RedissonUnlockRetries = make(map[string]int)
				}
				v.RedissonUnlockRetries[r.State]++
				if r.State == "stuck" {
					v.problem("%s goroutine %d: Redisson still holds name %d after its unlock failed and 40 more tries", p.proc, r.G, r.N)
				}
			case "X":
				if v.restartError(p, r) || v.javaConnError(p, r) || v.javaTopologyError(p, r) {
					continue
				}
				v.AcquireErrors++
				v.problem("%s goroutine %d: %s", p.proc, r.G, r.Err)
			case "F":
				if v.Faults == nil {
					v.Faults = make(map[string]int)
				}
				v.Faults[r.State] += r.N
			default:
				v.WorkerErrors++
				v.problem("%s: unknown record %q", p.proc, sc.Text())
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Out, err)
		}
	}
	return sections, nil
}

// check verifies mutual exclusion, name by name, on the sequence numbers.
//
// Every section increments its name's sequence key once on entry (S1) and
// once on exit (S2) while it holds the lock. Redis orders all INCRs of a
// key, so two sections overlapped if and only if one's entry INCR falls
// between the other's two INCRs: with S1 < S1' < S2 the second section
// entered while the first was still inside. (Sections that are exclusive
// have S2 = S1 + 1.) A section cut by a kill has no S2 and stays "inside"
// until some section enters after it.
//
// An overlap of an earlier section E by a later one L is explained by a
// lease that ran out, and counted apart, when
//   - E was cut by a kill (its process died holding the lock), and L
//     entered once the lease set at E's acquisition could have run out:
//     for a fixed lease, TB + lease (less expirySlack: the script ran
//     before TB); for a watchdog hold, after the kill and T0 + lease (a
//     weaker test: the last renewal before the kill is not recorded); or
//   - E ended after its lease could have run out (Lost: T0 + lease had
//     passed on E's monotonic clock when E ended).
//
// The watchdog's lost reports are not trusted for this: in a run whose
// only faults are kills, sections of milliseconds and leases of seconds,
// the time test is enough.
//
// With --rw, read sections may overlap each other (counted apart); an
// overlap involving a write section is judged as above.
//
// Any other overlap is a violation. Every unexplained sequence number must
// come from a killed process (an INCR whose record the kill prevented).
//
// With permits > 0 (--semaphore), a section holds one of permits permits:
// sections may overlap, but a section that enters while permits others are
// inside is a violation. A killed holder's section stays inside until its
// permit came back: by its lease (a permit-expirable semaphore: l entered
// once T0 + lease had passed), or by the coordinator's release after the
// kill (its K record closes the section at that release's sequence number).
func check(sections []*section, seqMax []int64, kills int, goroutines int, permits []int, v *Verdict) {
	v.PerName = make([]int, len(seqMax))
	byName := make([][]*section, len(seqMax))
	for _, s := range sections {
		if s.N < 0 || s.N >= len(seqMax) {
			v.WorkerErrors++
			v.problem("%s: unknown name index %d", s, s.N)
			continue
		}
		byName[s.N] = append(byName[s.N], s)
		v.PerName[s.N]++
		if s.Read {
			v.Reads++
		}
		v.Acquisitions++
		if v.ByLang == nil {
			v.ByLang, v.ByStyle = make(map[string]int), make(map[string]int)
		}
		v.ByLang[s.Lang]++
		if s.St != "" {
			v.ByStyle[s.Lang+"/"+s.St]++
		}
		if s.Kind != "" {
			if v.ByKind == nil {
				v.ByKind, v.ByKindLang = make(map[string]int), make(map[string]int)
			}
			v.ByKind[s.Kind]++
			v.ByKindLang[s.Kind+"/"+s.Lang]++
		}
		if s.T0 > 0 && s.TB-s.T0 > v.LongestWait.Nanoseconds() {
			v.LongestWait, v.LongestWaitBy = time.Duration(s.TB-s.T0), s.St+" "+s.String()
		}
		if s.T0 > 0 && s.TB > s.T0 {
			if v.LongestWaitByLang == nil {
				v.LongestWaitByLang = make(map[string]time.Duration)
			}
			v.LongestWaitByLang[s.Lang] = max(v.LongestWaitByLang[s.Lang], time.Duration(s.TB-s.T0))
		}
		if !s.open() && !s.returned {
			v.Completed++
		} else if s.killedAt != 0 {
			v.CutByKill++
		} else {
			v.WorkerErrors++
			v.problem("%s: section never ended though its process was not killed", s)
		}
	}
	for n, ss := range byName {
		sort.Slice(ss, func(i, j int) bool { return ss[i].S1 < ss[j].S1 })
		seen := make(map[int64]*section)
		claim := func(seq int64, s *section) {
			if other := seen[seq]; other != nil {
				v.Violations++
				v.problem("name %d: sequence number %d claimed by %s and %s", n, seq, other, s)
			}
			seen[seq] = s
		}
		var active []*section // sections that may still be inside
		for _, l := range ss {
			claim(l.S1, l)
			if !l.open() {
				claim(l.S2, l)
				if l.S2 <= l.S1 {
					v.Violations++
					v.problem("name %d: %s exits before it enters", n, l)
				}
			}
			if permits[n] > 0 {
				kept := active[:0]
				for _, e := range active {
					switch {
					case !e.open() && e.S2 < l.S1:
						continue // e was out before l entered
					case e.open() && e.killedAt != 0 && e.Lease > 0 && l.TB >= e.TB+e.Lease*ms-expirySlack:
						v.PermitsExpired++ // its lease ran out: its permit came back
						e.Lease = 0        // counted once
						continue
					}
					kept = append(kept, e)
				}
				// Too many inside: a hold the lock server lost (a restart
				// set the count anew, a failover rolled it back) explains
				// one over the permits each, and no more.
				for i := 0; len(kept) >= permits[n] && i < len(kept); {
					if e := kept[i]; v.lostOverlap(e.granted(), l.TB, n, e, l) {
						kept = slices.Delete(kept, i, i+1)
						continue
					}
					i++
				}
				if len(kept) > 0 {
					v.Shared++
				}
				if len(kept) >= permits[n] {
					v.Violations++
					v.problem("name %d: %s entered while %d sections held the %d permits (%s, ...)", n, l, len(kept), permits[n], kept[0])
				}
				active = append(kept, l)
				v.MostInside = max(v.MostInside, len(active))
				continue
			}
			kept := active[:0]
			for _, e := range active {
				if !e.open() && e.S2 < l.S1 {
					continue // e was out before l entered
				}
				// e entered before l, and was still inside when l entered.
				if e.Read && l.Read {
					v.ReadOverlaps++ // readers share
					kept = append(kept, e)
					continue
				}
				switch {
				case e.open() && e.killedAt != 0 && l.TB >= e.TB+e.Lease*ms-expirySlack &&
					(!e.WD || l.TB >= e.killedAt+e.Lease*ms/3-expirySlack):
					// e's process died holding the lock: l entered once
					// the lease set at e's acquisition could have run out
					// and, for a watchdog hold, a third of a lease after
					// the process died (its last renewal, every third of
					// a lease, came at most a period before the kill; a
					// late renewal round is allowed another third; a
					// fixed lease may also run out in a process that
					// still lives).
					v.LeaseExpiryOverlaps++
					if gap := time.Duration(l.TB - e.killedAt); gap > 0 {
						if v.ExpiryGapMin == 0 || gap < v.ExpiryGapMin {
							v.ExpiryGapMin = gap
						}
						v.ExpiryGapMax = max(v.ExpiryGapMax, gap)
					}
					continue // its lease ran out: it is no longer inside
				case !e.open() && e.Lost && !e.gone:
					// e's holder knew by its end that its hold had ended
					// (Go: its HoldContext was done; Java: its fixed
					// lease's TTL had run out).
					v.LeaseExpiryOverlaps++
					v.LostOverlaps++
				case v.lostOverlap(e.granted(), l.TB, n, e, l):
					// The lock server restarted empty (or failed over)
					// after e's hold was taken and before l entered: the
					// restart lost e's hold (Go: its watchdog reports it
					// lost).
					continue
				case (e.gone || l.gone) && goneBefore(e, l) && goneBefore(l, e):
					// One of the two was a Redisson section that found its
					// own hold gone at entry, and the other entered once
					// that hold's lease could have run out: it held
					// nothing by then.
					v.RedissonGoneOverlaps++
					v.problem("name %d: Redisson overlap (not counted as a violation): %s entered while %s was inside, and the Redisson one's hold was gone at its entry (lock() returned after its hold ran out)", n, l, e)
				case e.unheld || l.unheld:
					// One of the two was a Redisson section whose unlock
					// found the lock not held, after a CLIENT KILL: an
					// acquisition Redisson reported without holding it
					// (the same happens between two Redisson JVMs).
					v.RedissonPhantomOverlaps++
					v.problem("name %d: Redisson overlap (not counted as a violation): %s entered while %s was inside, and one of them then found the lock not held at its unlock", n, l, e)
				default:
					v.Violations++
					if v.ViolationsByPair == nil {
						v.ViolationsByPair = make(map[string]int)
					}
					v.ViolationsByPair[e.Lang+" then "+l.Lang]++
					v.problem("name %d: %s entered while %s was inside (%s)", n, l, e, describeGap(e, l))
				}
				kept = append(kept, e)
			}
			active = append(kept, l)
		}
		unrecorded := seqMax[n] - int64(len(seen))
		if unrecorded < 0 {
			v.WorkerErrors++
			v.problem("name %d: %d sequence numbers recorded but the key is at %d", n, len(seen), seqMax[n])
			unrecorded = 0
		}
		v.Unrecorded += int(unrecorded)
	}
	// A killed process leaves at most one unrecorded INCR per goroutine.
	if v.Unrecorded > kills*goroutines {
		v.WorkerErrors++
		v.problem("%d sequence numbers have no record, more than %d kills can explain", v.Unrecorded, kills)
	}
}

func describeGap(e, l *section) string {
	if e.open() {
		if e.killedAt != 0 {
			return fmt.Sprintf("%v after the kill, %v after the other's acquire call began, lease %dms",
				time.Duration(l.TB-e.killedAt), time.Duration(l.TB-e.T0), e.Lease)
		}
		return "the earlier section never ended"
	}
	return fmt.Sprintf("wall clock: entered %v after the other's entry", time.Duration(l.TB-e.TB))
}

// fifoSlack is how much earlier an acquire call must begin than another's
// for FIFO to order them: more than the time from the call to its queueing
// script reaching Redis (a round trip and the scheduling of two processes
// on a loaded machine).
const fifoSlack = 100 * time.Millisecond

// javaFifoSlack is fifoSlack for a Redisson caller: a JVM's first calls on
// a lock (class loading, the compiler warming up, the script's first load)
// take longer to reach Redis.
const javaFifoSlack = 300 * time.Millisecond

// fifoSlackOf is the slack for the call of section s.
func fifoSlackOf(s *section) int64 {
	if s.Lang != "" && s.Lang != "go" {
		return javaFifoSlack.Nanoseconds()
	}
	return fifoSlack.Nanoseconds()
}

// checkFIFO checks that the fair locks served waiters in the order of their
// calls: a section granted before another (a smaller S1) must not come from
// an acquire call that began fifoSlack or more after the other's. As in
// Redisson, every grant pulls the reservations behind it forward by one
// wait, so while the queue never empties the first waiter's deadline stays
// about one wait after the queue formed; once a busy period (grants whose
// calls all began before the previous section ended) has lasted fairWait,
// a waiter may have been dropped and queued again: such reorders are
// counted as explained. So is a reorder whose passed-over waiter waited
// through a CLIENT KILL (FIFOAfterConnKill) or a failover or migration of
// its name's slot (FIFOAfterTopology, see topoChangeDuring). With faults,
// a refused queueing call may arrive late, so every reorder is counted as
// explained and none fails the run.
//
// FIFOHonoured counts grants followed by a grant to a caller that was
// already waiting (its call began fifoSlack or more after the first's, and
// before the first was granted): the cases FIFO decided.
func checkFIFO(sections []*section, fair []bool, fairWait time.Duration, faults bool, v *Verdict) {
	byName := make([][]*section, len(fair))
	for _, s := range sections {
		if s.N >= 0 && s.N < len(fair) && fair[s.N] {
			byName[s.N] = append(byName[s.N], s)
		}
	}
	slack := fifoSlack.Nanoseconds()
	for n, ss := range byName {
		sort.Slice(ss, func(i, j int) bool { return ss[i].S1 < ss[j].S1 })
		// busy[i]: when the busy period of grant i began. A period goes
		// on across a hand-off when someone granted then or later was
		// already waiting (called) when the previous section ended.
		sufMin := make([]int64, len(ss)+1)
		sufMin[len(ss)] = math.MaxInt64
		for i := len(ss) - 1; i >= 0; i-- {
			sufMin[i] = min(sufMin[i+1], ss[i].T0)
		}
		busy := make([]int64, len(ss))
		for i, s := range ss {
			busy[i] = s.T0
			if i > 0 && (ss[i-1].open() || sufMin[i] < ss[i-1].TE) {
				busy[i] = busy[i-1]
			}
		}
		// Walking the grants backwards, keep the earliest call among the
		// later grants.
		var minAll *section
		for i := len(ss) - 1; i >= 0; i-- {
			b := ss[i]
			// Among the next grants (a line is at most a few dozen long),
			// one to a caller that was already waiting, well after b.
			for _, a := range ss[i+1 : min(len(ss), i+1+64)] {
				if a.T0 >= b.T0+slack && a.T0 < b.TB {
					v.FIFOHonoured++
					break
				}
			}
			if minAll != nil && minAll.T0+fifoSlackOf(minAll) <= b.T0 {
				switch {
				case faults || b.TB-busy[i] >= fairWait.Nanoseconds()-slack:
					v.FIFOExplained++
				case v.connKillIn(minAll.T0-javaConnWindow.Nanoseconds(), b.TB):
					v.FIFOExplained++
					v.FIFOAfterConnKill++
				case v.topoChangeDuring(minAll, b.TB):
					v.FIFOExplained++
					v.FIFOAfterTopology++
				default:
					v.FIFOViolations++
					v.problem("name %d: FIFO: %s (acquire call at %d) was served before %s, whose call began %v earlier (busy for %v)",
						n, b, b.T0, minAll, time.Duration(b.T0-minAll.T0), time.Duration(b.TB-busy[i]))
				}
			}
			if minAll == nil || b.T0 < minAll.T0 {
				minAll = b
			}
		}
	}
}

// topoChangeDuring reports whether a failover or a slot migration may have
// cost waiter w its place in its fair lock's line before to (the grant
// that passed it): a change that affected w's name (a failover every
// name, a migration the one whose slot moved) overlapped w's wait, from
// its call to to. A failover can lose w's queue entry (a write the new
// master never had), a migration moves the line's keys, and the waiter
// queues again behind the others. For a Redisson waiter the change counts
// until javaConnWindow after it ended: Redisson's queueing call reaches
// the moved slot only after a MOVED or a response timeout (3 s) and its
// retry, so it may reach Redis seconds after it began (soaks on a cluster
// showed Go grants served before a Redisson waiter whose call began about
// 0.9 s earlier, around the changes).
func (v *Verdict) topoChangeDuring(w *section, to int64) bool {
	after := int64(0)
	if w.Lang != "" && w.Lang != "go" {
		after = javaConnWindow.Nanoseconds()
	}
	return slices.ContainsFunc(v.topoChanges, func(x restart) bool {
		return x.touches(w.N) && x.down <= to && x.up+after >= w.T0
	})
}

// checkTokens checks the fenced locks' tokens: every grant's token is
// larger than every earlier grant's, so in the order of the sections'
// entries (S1) the tokens strictly increase, across languages. A section
// whose token is not larger than the one before it entered after the
// other's grant although it was granted first: allowed only when it
// entered after its lease could have run out (Lost: the paused holder
// that fencing is for), or when one of the two was a Redisson section
// that did not hold the lock (RedissonUnheld). After a restart of the
// lock server (which loses the counter) the tokens start again and must
// rise from there. A fenced section without a token is a worker error,
// unless the server restarted between its call's start and its entry.
func checkTokens(sections []*section, fenced []bool, v *Verdict) {
	byName := make([][]*section, len(fenced))
	for _, s := range sections {
		if s.N >= 0 && s.N < len(fenced) && fenced[s.N] {
			byName[s.N] = append(byName[s.N], s)
		}
	}
	for n, ss := range byName {
		sort.Slice(ss, func(i, j int) bool { return ss[i].S1 < ss[j].S1 })
		var prev *section
		for _, s := range ss {
			if s.Tok <= 0 {
				if v.restartBetween(s.granted(), s.TB) {
					v.TokensLost++
					continue
				}
				v.WorkerErrors++
				v.problem("name %d: fenced section %s has no token", n, s)
				continue
			}
			if prev != nil {
				v.TokensChecked++
				if s.Tok <= prev.Tok {
					switch {
					case v.restartBetween(prev.granted(), s.TB):
						// A restart lost the token counter with the rest:
						// the tokens start again, and rise from there.
						v.TokenExplained++
						prev = s
						continue
					case s.Lost || s.unheld || prev.unheld:
						v.TokenExplained++
					default:
						v.TokenViolations++
						v.problem("name %d: token %d of %s is not larger than token %d of %s, which entered before it", n, s.Tok, s, prev.Tok, prev)
					}
				}
			}
			if prev == nil || s.Tok > prev.Tok {
				prev = s
			}
		}
	}
}
