package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// workerEnv carries a workerConfig (JSON) to a worker process: the stress
// binary (or the test binary) re-executed by the coordinator.
const workerEnv = "GOREDISSON_STRESS_WORKER"

type workerConfig struct {
	Addr       string   `json:"addr"`
	SeqAddr    string   `json:"seq_addr"` // the sequencer: where the sequence keys are INCRed
	Names      []string `json:"names"`
	Goroutines int      `json:"goroutines"`
	WatchdogMs int64    `json:"watchdog_ms"`
	LeaseMs    int64    `json:"lease_ms"`
	MaxHoldUs  int64    `json:"max_hold_us"`
	Unsafe     bool     `json:"unsafe"`
	Faults     float64  `json:"faults"`
	RW         bool     `json:"rw"`
	FairWaitMs int64    `json:"fair_wait_ms"` // > 0: fair locks with this wait timeout
	// FairTryWaitMs is the wait of TryLock on fair names (with Styles).
	FairTryWaitMs int64    `json:"fair_try_wait_ms"`
	Permits       int      `json:"permits"`   // > 0: semaphores instead of locks
	Expirable     bool     `json:"expirable"` // permit-expirable semaphores, permits with the lease
	Masters       []string `json:"masters"`   // RedLocks over these independent masters
	Out           string   `json:"out"`
	Seed          uint64   `json:"seed"`
	Styles        bool     `json:"styles"` // every acquisition style of each kind
	// Kinds is the kind of each name (kindPlain, kindRW, ...), set by the
	// coordinator from the run's flags.
	Kinds []string `json:"kinds"`
}

// record is one line of a worker's output file.
//
//	B: a critical section began: goroutine G entered lock N; S1 is the
//	   value its INCR of N's sequence key returned, TB the wall clock
//	   just before that INCR, T0 the wall clock before the acquire call
//	   began, Lease the hold's lease in ms (the fixed lease, or the
//	   watchdog timeout), WD whether the watchdog renews it, Read whether
//	   it is a read hold of a read-write lock, Tok the token of a fenced
//	   lock's grant. Java only: Gone says that the worker found its own
//	   fixed-lease hold no longer in the lock's hash at entry (Redisson's
//	   lock() returned after the hold it took had run out; see
//	   Verdict.RedissonGoneAtEntry).
//	E: it ended: S2 is the value of the second INCR, TE the wall clock
//	   after it, Lost whether the hold's lease may have run out
//	   meanwhile: a lease set at the acquisition (after T0) can only have
//	   run out if Lease has elapsed since T0 (on the monotonic clock).
//	L: the watchdog reported goroutine G's hold on lock N lost at T;
//	   State is what G was doing then: "holding" N, "unlocking" N, or
//	   "other" (not holding N).
//	U: Unlock of the section S1 failed with Err.
//	X: another failure (acquire, Redis).
//	F: N more faults of kind State were injected (--faults): written every
//	   second and at the end.
//	Q, R: plain semaphore mode: goroutine G is about to acquire a permit
//	   of N; it released its permit of N (see giveBack).
//	K: written by the coordinator after a kill: it gave back the permit
//	   of the section S1, after the INCR that returned S2.
//	M: a one-attempt TryLock of N found the lock taken (no section).
//	W: a TryLock with a wait on fair name N ran out at T (see
//	   Verdict.FairWaitsOut).
//	H: Java only: after the failed unlock of section S1 (a U record), the
//	   worker unlocked again while its thread still held the lock; State
//	   is "gone", "released" or "stuck" (see Verdict.RedissonUnlockRetries).
type record struct {
	K     string `json:"k"`
	G     int    `json:"g"`
	N     int    `json:"n,omitempty"`
	S1    int64  `json:"s1,omitempty"`
	S2    int64  `json:"s2,omitempty"`
	T0    int64  `json:"t0,omitempty"`
	TB    int64  `json:"tb,omitempty"`
	TE    int64  `json:"te,omitempty"`
	T     int64  `json:"t,omitempty"`
	Lease int64  `json:"lease,omitempty"`
	WD    bool   `json:"wd,omitempty"`
	Read  bool   `json:"read,omitempty"`
	Lost  bool   `json:"lost,omitempty"`
	Gone  bool   `json:"gone,omitempty"` // B, Java: the fixed-lease hold was gone at entry
	Tok   int64  `json:"tok,omitempty"`  // B, fenced lock: the token of this grant
	St    string `json:"st,omitempty"`   // B: the acquisition style (lock, locklease, trylock-wait, ...)
	State string `json:"state,omitempty"`
	Err   string `json:"err,omitempty"`
}

// goStyles are the Go workers' acquisition styles of the lock kinds (with
// Config.Styles), named as the Java workers name theirs: Lock (watchdog),
// LockLease, TryLock with a wait and a fixed lease, with a wait and the
// watchdog, and one attempt (a miss is an M record). A fenced lock takes
// each through its token-returning form (LockAndGetToken,
// TryLockAndGetToken; LockLease then Token). Every goroutine is its own
// owner (WithOwner).
var goStyles = []string{"lock", "locklease", "trylock-wait", "trylock-wait-wd", "trylock"}

// goSemStyles are those of a permit-expirable semaphore: Acquire with the
// lease, TryAcquire with a wait, one attempt.
var goSemStyles = []string{"acquire", "tryacquire-wait", "tryacquire"}

// seqKey is the per-name sequence key every critical section increments on
// entry and on exit, inside the lock.
func seqKey(name string) string { return name + ":seq" }

// workerMain runs a worker process until its stdin reaches EOF (the
// coordinator closes it to stop the worker, or dies), then finishes the
// critical sections under way and returns 0. It returns 1 when it could
// not start.
func workerMain(specJSON string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(specJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "stress worker:", err)
		return 1
	}
	out, err := os.OpenFile(cfg.Out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stress worker:", err)
		return 1
	}
	defer out.Close()
	var outMu sync.Mutex
	emit := func(r record) {
		b, _ := json.Marshal(r)
		b = append(b, '\n')
		outMu.Lock()
		defer outMu.Unlock()
		// One write per record: a SIGKILL rarely cuts one (the checker
		// allows one cut line per killed process).
		if _, err := out.Write(b); err != nil {
			fmt.Fprintln(os.Stderr, "stress worker: writing a record:", err)
		}
	}

	// The lock server may be restarting (--restart-lock-every): retry.
	rc, err := dial(cfg.Addr)
	for deadline := time.Now().Add(time.Minute); err != nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		rc, err = dial(cfg.Addr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stress worker:", err)
		return 1
	}
	defer rc.Close()
	seqRC := rc
	if cfg.SeqAddr != "" && cfg.SeqAddr != cfg.Addr {
		if seqRC, err = dial(cfg.SeqAddr); err != nil {
			fmt.Fprintln(os.Stderr, "stress worker: sequencer:", err)
			return 1
		}
		defer seqRC.Close()
	}
	var lockRC rueidis.Client = rc
	if cfg.Faults > 0 {
		// Fault injection on every script call: dropped requests, lost
		// replies, late requests, BUSY/TRYAGAIN/LOADING refusals.
		f := redistest.NewFaulty(rc)
		rules := []redistest.Rule{{Fault: redistest.Drop}, {Fault: redistest.LoseReply}, {Fault: redistest.Late}}
		for _, msg := range []string{"BUSY Redis is busy running a script", "TRYAGAIN Multiple keys request during rehashing of slot", "LOADING Redis is loading the dataset in memory"} {
			if err := redistest.RedisError(context.Background(), rc, msg); err != nil {
				rules = append(rules, redistest.Rule{Fault: redistest.Refuse, Err: err})
			}
		}
		f.Chaos(cfg.Faults, cfg.Seed, rules...)
		lockRC = f
		// F records carry the faults injected since the last one: every
		// second and at the end, so that a killed process' faults count
		// too (up to its last second).
		var fmu sync.Mutex
		reported := map[string]int{}
		flush := func() {
			fmu.Lock()
			defer fmu.Unlock()
			for k, n := range f.Injected() {
				if d := n - reported[k]; d > 0 {
					emit(record{K: "F", State: k, N: d})
					reported[k] = n
				}
			}
		}
		tick := time.NewTicker(time.Second)
		tickDone := make(chan struct{})
		go func() {
			for {
				select {
				case <-tick.C:
					flush()
				case <-tickDone:
					return
				}
			}
		}()
		defer func() {
			tick.Stop()
			close(tickDone)
			flush()
		}()
	}
	// What each goroutine is doing, for classifying lost reports.
	const (
		idle = iota
		holding
		unlocking
	)
	type gstate struct {
		phase int
		name  int
	}
	var stMu sync.Mutex
	states := make([]gstate, cfg.Goroutines)
	setState := func(g, phase, name int) {
		stMu.Lock()
		states[g] = gstate{phase, name}
		stMu.Unlock()
	}
	index := make(map[string]int, len(cfg.Names))
	for i, n := range cfg.Names {
		index[n] = i
	}
	fairWait := rlock.WithFairLockWaitTimeout(rlock.DefaultFairLockWaitTimeout)
	if cfg.FairWaitMs > 0 {
		fairWait = rlock.WithFairLockWaitTimeout(time.Duration(cfg.FairWaitMs) * time.Millisecond)
	}
	c, err := rlock.New(lockRC, fairWait,
		rlock.WithWatchdogTimeout(time.Duration(cfg.WatchdogMs)*time.Millisecond),
		rlock.WithLostHandler(func(ev rlock.LostEvent) {
			g, n := int(ev.Owner-1), index[ev.Name]
			state := "other"
			if g >= 0 && g < len(states) {
				stMu.Lock()
				st := states[g]
				stMu.Unlock()
				if st.phase == holding && st.name == n {
					state = "holding"
				} else if st.phase == unlocking && st.name == n {
					state = "unlocking"
				}
			}
			emit(record{K: "L", G: g, N: n, T: time.Now().UnixNano(), State: state, Err: ev.Err.Error()})
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "stress worker:", err)
		return 1
	}
	defer c.Close()

	// --redlock: one Client per independent master (rueidis cannot start
	// on a master that is down: retry while the coordinator restarts it).
	var masters []*rlock.Client
	for _, addr := range cfg.Masters {
		var mrc rueidis.Client
		deadline := time.Now().Add(time.Minute)
		for {
			mrc, err = dial(addr)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "stress worker: master", addr, err)
			return 1
		}
		defer mrc.Close()
		mc, err := rlock.New(mrc, rlock.WithWatchdogTimeout(time.Duration(cfg.WatchdogMs)*time.Millisecond))
		if err != nil {
			fmt.Fprintln(os.Stderr, "stress worker:", err)
			return 1
		}
		defer mc.Close()
		masters = append(masters, mc)
	}

	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	lease := time.Duration(cfg.LeaseMs) * time.Millisecond
	var wg sync.WaitGroup
	for g := range cfg.Goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(g)))
			owner := int64(g + 1)
			incr := func(key string) (int64, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return seqRC.Do(ctx, seqRC.B().Incr().Key(key).Build()).AsInt64()
			}
			for stop.Err() == nil {
				n := rng.IntN(len(cfg.Names))
				kind := cfg.Kinds[n]
				var l rlock.Locker
				var fenced *rlock.FencedLock
				read := false
				switch kind {
				case kindRW:
					// Three reads for every write.
					rw := c.ReadWriteLock(cfg.Names[n])
					if read = rng.IntN(4) != 0; read {
						l = rw.ReadLock()
					} else {
						l = rw.WriteLock()
					}
				case kindFair:
					l = c.FairLock(cfg.Names[n])
				case kindFenced:
					fenced = c.FencedLock(cfg.Names[n])
					l = fenced
				case kindRedLock:
					members := make([]rlock.Locker, len(masters))
					for i, mc := range masters {
						members[i] = mc.Lock(cfg.Names[n])
					}
					l = rlock.NewRedLock(members...)
				case kindSemaphore, kindPlainSemaphore:
					l = &permitHolder{c: c, name: cfg.Names[n], expirable: kind == kindSemaphore}
				default:
					l = c.Lock(cfg.Names[n])
				}
				fixed := rng.IntN(2) == 0
				style := "lock"
				if fixed {
					style = "locklease"
				}
				if cfg.Styles {
					style = goStyles[rng.IntN(len(goStyles))]
					fixed = style == "locklease" || style == "trylock-wait"
				}
				switch kind {
				case kindSemaphore:
					// A permit's lease; every style has one.
					fixed, style = true, "acquire"
					if cfg.Styles {
						style = goSemStyles[rng.IntN(len(goSemStyles))]
					}
				case kindPlainSemaphore:
					fixed, style = false, "acquire" // a plain permit has no lease
				}
				// A fair lock's TryLock(wait) reserves its place in the
				// line for the whole wait: a waiter that dies holds up
				// those behind it that long. On fair names the waits are
				// shorter, and one that runs out is a W record.
				tryWait := time.Minute
				if kind == kindFair {
					tryWait = time.Duration(cfg.FairTryWaitMs) * time.Millisecond
				}
				t0 := time.Now()
				plainSem := kind == kindPlainSemaphore
				if plainSem {
					emit(record{K: "Q", G: g, N: n}) // acquiring (see giveBack)
				}
				var tok int64
				if !cfg.Unsafe {
					actx, cancelAcquire := context.WithTimeout(rlock.WithOwner(stop, owner), time.Minute)
					var err error
					got := true
					switch {
					case fenced != nil && style == "lock":
						tok, err = fenced.LockAndGetToken(actx)
					case fenced != nil && style == "locklease":
						if err = fenced.LockLease(actx, lease); err == nil {
							// Held: no other grant can come between.
							tok, err = fenced.Token(actx)
						}
					case fenced != nil && style == "trylock-wait":
						tok, got, err = fenced.TryLockAndGetToken(actx, time.Minute, lease)
					case fenced != nil && style == "trylock-wait-wd":
						tok, got, err = fenced.TryLockAndGetToken(actx, time.Minute, 0)
					case fenced != nil && style == "trylock":
						tok, got, err = fenced.TryLockAndGetToken(actx, 0, 0)
					case style == "trylock-wait", style == "tryacquire-wait":
						got, err = l.TryLock(actx, tryWait, lease)
					case style == "trylock-wait-wd":
						got, err = l.TryLock(actx, tryWait, 0)
					case style == "trylock":
						got, err = l.TryLock(actx, 0, 0)
					case style == "tryacquire":
						got, err = l.TryLock(actx, 0, lease)
					default:
						if fixed {
							err = l.LockLease(actx, lease)
						} else {
							err = l.Lock(actx)
						}
					}
					cancelAcquire()
					if err == nil && !got {
						if style == "trylock" || style == "tryacquire" {
							emit(record{K: "M", G: g, N: n})
							continue
						}
						if kind == kindFair {
							emit(record{K: "W", G: g, N: n, T: time.Now().UnixNano()})
							continue
						}
						err = errors.New("TryLock(1m) timed out")
					}
					if err != nil {
						if stop.Err() != nil {
							return
						}
						emit(record{K: "X", G: g, N: n, T: time.Now().UnixNano(), Err: "acquire: " + err.Error()})
						continue
					}
				}
				setState(g, holding, n)
				leaseMs, wd := cfg.LeaseMs, !fixed
				if wd {
					leaseMs = cfg.WatchdogMs
				}
				if plainSem {
					leaseMs, wd = 0, false // a plain semaphore's permit never expires
				}
				var s1 int64
				var tb time.Time
				unlock := func() {
					setState(g, unlocking, n)
					defer setState(g, idle, n)
					if cfg.Unsafe {
						return
					}
					u0 := time.Now()
					if err := l.Unlock(rlock.WithOwner(context.Background(), owner)); err != nil {
						msg := err.Error()
						if errors.Is(err, rlock.ErrNotHeld) {
							msg = "not held: " + msg
						}
						emit(record{K: "U", G: g, N: n, S1: s1, T0: t0.UnixNano(), TB: tb.UnixNano(), TE: u0.UnixNano(), T: time.Now().UnixNano(), Lease: leaseMs, WD: wd, St: style, Err: msg})
					} else if plainSem {
						emit(record{K: "R", G: g, N: n}) // released (see giveBack)
					}
				}
				// The library's own word on whether the hold lasts: its
				// HoldContext ends when a fixed lease could have run out
				// (from the send time of the script that granted it) or
				// the hold was found lost. A section is excused (Lost)
				// only if it had ended by the section's end.
				var held context.Context
				endedAtStart := false
				if _, permit := l.(*permitHolder); !cfg.Unsafe && !permit {
					hc, err := l.HoldContext(rlock.WithOwner(context.Background(), owner))
					if err != nil {
						endedAtStart = true
					} else {
						held = hc
					}
				}
				tb = time.Now()
				var err error
				s1, err = incr(seqKey(cfg.Names[n]))
				if err != nil {
					// Redis failed us: report, release and stop this
					// goroutine (the run then fails).
					emit(record{K: "X", G: g, N: n, Err: "INCR: " + err.Error()})
					unlock()
					return
				}
				emit(record{K: "B", G: g, N: n, S1: s1, T0: t0.UnixNano(), TB: tb.UnixNano(), Lease: leaseMs, WD: wd, Read: read, Tok: tok, St: style})
				if cfg.MaxHoldUs > 0 {
					time.Sleep(time.Duration(rng.Int64N(cfg.MaxHoldUs+1)) * time.Microsecond)
				}
				s2, err := incr(seqKey(cfg.Names[n]))
				te := time.Now()
				if err != nil {
					emit(record{K: "X", G: g, N: n, Err: "INCR: " + err.Error()})
					unlock()
					return
				}
				mayHaveExpired := endedAtStart || held != nil && held.Err() != nil
				if held == nil && !endedAtStart && leaseMs > 0 {
					// A permit (no HoldContext): its lease, from before
					// the acquire call.
					mayHaveExpired = te.Sub(t0) >= time.Duration(leaseMs)*time.Millisecond
				}
				emit(record{K: "E", G: g, N: n, S1: s1, S2: s2, TE: te.UnixNano(), Lost: mayHaveExpired})
				unlock()
			}
		})
	}
	wg.Wait()
	return 0
}

// permitHolder takes and gives back one permit of a semaphore through the
// Locker methods the worker loop uses (Lock, LockLease, Unlock; TryLock:
// permit-expirable only).
type permitHolder struct {
	rlock.Locker // nil: only the methods below are called
	c            *rlock.Client
	name         string
	expirable    bool
	id           string
}

func (p *permitHolder) Lock(ctx context.Context) error {
	return p.c.Semaphore(p.name).Acquire(ctx, 1)
}

func (p *permitHolder) LockLease(ctx context.Context, lease time.Duration) error {
	if !p.expirable {
		return p.Lock(ctx)
	}
	id, err := p.c.PermitExpirableSemaphore(p.name).Acquire(ctx, lease)
	p.id = id
	return err
}

func (p *permitHolder) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	id, ok, err := p.c.PermitExpirableSemaphore(p.name).TryAcquire(ctx, wait, lease)
	p.id = id
	return ok, err
}

func (p *permitHolder) Unlock(ctx context.Context) error {
	if p.expirable {
		return p.c.PermitExpirableSemaphore(p.name).Release(ctx, p.id)
	}
	return p.c.Semaphore(p.name).Release(ctx, 1)
}
