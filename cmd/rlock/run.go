package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"time"

	"github.com/goredisson/locks/rlock"
)

const runHelp = `Usage: rlock run [flags] NAME -- COMMAND [ARGS...]

Takes lock NAME, runs COMMAND, releases the lock when COMMAND exits, and exits
with COMMAND's exit status (128+N if signal N killed it). The lock is a Redisson
RLock owned by "<client id>:<pid of rlock>"; Java services calling
redisson.getLock(NAME).lock() wait for it, and rlock waits for theirs.

The lock kind, at most one of (the Java side must use the same kind):
  (none)           an RLock: redisson.getLock(NAME)
  --fair           a fair lock, first come first served: getFairLock(NAME)
  --read           the read half of a read-write lock: shared with other
                   readers, excluded by a writer: getReadWriteLock(NAME).readLock()
  --write          its write half: getReadWriteLock(NAME).writeLock()
  --semaphore N    one permit of the permit-expirable semaphore NAME of N
                   permits: getPermitExpirableSemaphore(NAME). rlock sets it to N
                   permits if it does not exist (trySetPermits), and warns if it
                   has another number. The permit's lease is --lease, or the
                   watchdog timeout renewed every third of it, so the permit of a
                   killed rlock comes back by itself (a plain semaphore's would be
                   lost for good, hence the expirable kind)

Without --lease the lock has a watchdog lease (--watchdog, default 30s) that
rlock renews every third of it while COMMAND runs, so the lock outlives no
crashed rlock by more than the watchdog timeout.

While waiting, a status line on stderr says who holds the lock and for how long
(refreshed in place on a terminal, a plain line every 5s otherwise; --quiet
hides it).

If the lock is lost while COMMAND runs (it expired, was force-unlocked or
deleted, Redis lost it, a --lease ran out), rlock sends SIGTERM to COMMAND,
SIGKILL after --grace, and exits with 76; with --keep-running it only warns.

Signals: unless rlock is a terminal's foreground job (see --foreground),
COMMAND runs in a process group of its own. SIGINT, SIGTERM, SIGHUP and
SIGQUIT sent to rlock are forwarded to that whole group (COMMAND and its
children), and rlock exits with COMMAND's status once it exits. SIGTSTP
stops the group and then rlock; SIGCONT resumes it. Termination after a lost
lock also reaches the whole group. On Linux COMMAND also gets SIGTERM if rlock
itself dies. Before COMMAND starts, those signals end the wait for the lock
and rlock exits with 128+N.

The environment of COMMAND gets RLOCK_NAME (the lock name) and RLOCK_HOLDER
(the hash field "<client id>:<owner id>" that holds it; ":write" follows for
--write), or RLOCK_PERMIT (the permit's id) for --semaphore.

Flags:
  --wait D         give up if the lock is not obtained within D and exit with 75,
                   naming the holder; 0 makes exactly one attempt (default: wait
                   as long as it takes)
  --lease D        take a fixed lease of D instead of a watchdog lease: the lock
                   is not renewed and frees itself after D; if COMMAND is still
                   running then, the lock is lost (exit 76)
  --grace D        after SIGTERM on a lost lock, wait D before SIGKILL (default 10s)
  --keep-running   on a lost lock only warn, let COMMAND finish, exit with its status
  --foreground     run COMMAND in rlock's own process group, so that it can use the
                   terminal (read input, get ^C and ^Z from it directly); rlock then
                   forwards only SIGTERM and SIGHUP, to COMMAND's process alone, and
                   a lost lock terminates COMMAND's process alone. The default is
                   on when stdin is a terminal of which rlock is the foreground
                   job (an interactive shell), off otherwise (scripts, cron,
                   systemd); --foreground=false forces a separate process group
                   (COMMAND then cannot read the terminal: it would be stopped)

` + globalFlagsHelp + `
` + exitCodesHelp

type runOpts struct {
	fair, read, write bool
	semaphore         int           // > 0: --semaphore N
	wait              durationValue // not set: wait as long as it takes
	lease             durationValue // not set: watchdog lease
	grace             durationValue
	keepRunning       bool
	foreground        boolValue // not set: when rlock is a terminal's foreground job
}

// boolValue is a boolean flag that records whether it was given.
type boolValue struct{ v, set bool }

func (b *boolValue) IsBoolFlag() bool { return true }

func (b *boolValue) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(b.v)
}

func (b *boolValue) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	b.v, b.set = v, true
	return nil
}

func cmdRun(g *globals, args []string) int {
	fs := newFlagSet("run")
	o := runOpts{grace: durationValue{d: 10 * time.Second}}
	fs.Var(&o.wait, "wait", "")
	fs.Var(&o.lease, "lease", "")
	fs.Var(&o.grace, "grace", "")
	fs.BoolVar(&o.keepRunning, "keep-running", false, "")
	fs.Var(&o.foreground, "foreground", "")
	fs.BoolVar(&o.fair, "fair", false, "")
	fs.BoolVar(&o.read, "read", false, "")
	fs.BoolVar(&o.write, "write", false, "")
	sem := fs.Int("semaphore", 0, "")
	pos, command, dashDash, code, done := g.parseCommand("run", runHelp, fs, args)
	if done {
		return code
	}
	const synopsis = "rlock run [flags] NAME -- COMMAND [ARGS...]"
	switch {
	case len(pos) == 0:
		return g.usageError("run", "missing lock NAME (%s)", synopsis)
	case !dashDash:
		return g.usageError("run", "missing -- between NAME and COMMAND (%s)", synopsis)
	case len(pos) > 1:
		return g.usageError("run", "unexpected argument %q before --: run takes one lock NAME (%s)", pos[1], synopsis)
	case len(command) == 0:
		return g.usageError("run", "missing COMMAND after -- (%s)", synopsis)
	case o.wait.set && o.wait.d < 0:
		return g.usageError("run", "--wait %v is negative (leave --wait out to wait as long as it takes)", o.wait.d)
	case o.lease.set && o.lease.d < time.Millisecond:
		return g.usageError("run", "--lease %v is below 1ms (leave --lease out for a watchdog lease)", o.lease.d)
	case o.grace.d < 0:
		return g.usageError("run", "--grace %v is negative", o.grace.d)
	case *sem < 0 || (*sem == 0 && flagGiven(fs, "semaphore")):
		return g.usageError("run", "--semaphore %d: the number of permits must be at least 1", *sem)
	case btoi(o.fair)+btoi(o.read)+btoi(o.write)+btoi(*sem > 0) > 1:
		return g.usageError("run", "--fair, --read, --write and --semaphore exclude each other: a name holds one kind")
	}
	o.semaphore = *sem
	if code, ok := g.checkNames("run", pos); !ok {
		return code
	}
	if !o.foreground.set {
		o.foreground.v = isTerminal(os.Stdin) && inForeground(os.Stdin)
	}
	r := &runner{g: g, o: o, name: pos[0], command: command}
	return r.run()
}

type runner struct {
	g       *globals
	o       runOpts
	name    string
	command []string

	l      lockable
	permit *permitHold // --semaphore: l, with its permit id
	owner  int64       // rlock's pid: the owner id of every lock call
	field  string      // the hash field, "<client id>:<owner id>[:write]"
	conn   *conn
}

// what names what run takes, for messages: "lock NAME", "a permit of
// semaphore NAME".
func (r *runner) what() string {
	switch {
	case r.o.semaphore > 0:
		return "a permit of semaphore " + r.name
	case r.o.read:
		return "read lock " + r.name
	case r.o.write:
		return "write lock " + r.name
	case r.o.fair:
		return "fair lock " + r.name
	}
	return "lock " + r.name
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (r *runner) run() int {
	// Catch the signals first: one that arrives while connecting or waiting
	// ends the wait.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	c, code := r.g.connect("run")
	if c == nil {
		return code
	}
	defer c.close()
	r.conn = c
	r.owner = int64(os.Getpid())
	r.field = c.locks.ID() + ":" + strconv.FormatInt(r.owner, 10)
	switch {
	case r.o.semaphore > 0:
		r.permit = &permitHold{s: c.locks.PermitExpirableSemaphore(r.name), name: r.name, watchdog: r.g.watchdog.d}
		r.l = r.permit
		r.field = ""
		if code := r.setPermits(); code != exitOK {
			return code
		}
	case r.o.read:
		r.l = c.locks.ReadWriteLock(r.name).ReadLock()
	case r.o.write:
		r.l = c.locks.ReadWriteLock(r.name).WriteLock()
		r.field += ":write"
	case r.o.fair:
		r.l = c.locks.FairLock(r.name)
	default:
		r.l = c.locks.Lock(r.name)
	}

	ok, sig, err := r.acquire(sigs)
	switch {
	case sig != nil:
		if ok {
			_ = r.release()
		}
		r.g.note("interrupted by %s while waiting for %s", signalName(sig), r.what())
		return signalStatus(sig)
	case err != nil:
		r.g.errorf("acquiring %s: %v", r.what(), err)
		return errorCode(err)
	case !ok:
		return r.notObtained()
	}

	hold, err := r.l.HoldContext(rlock.WithOwner(context.Background(), r.owner))
	if err != nil {
		if errors.Is(err, rlock.ErrNotHeld) {
			r.g.errorf("%s was lost before the command could start (its lease ran out?)", r.what())
			return exitLost
		}
		r.g.errorf("watching %s: %v", r.what(), err)
		_ = r.release()
		return errorCode(err)
	}
	return r.runCommand(sigs, hold)
}

// acquire takes the lock as the flags say. A signal from sigs ends the
// wait; it is returned (ok may still be true if the lock was taken just
// before).
func (r *runner) acquire(sigs <-chan os.Signal) (ok bool, sig os.Signal, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case sig = <-sigs:
			cancel()
		case <-stop:
		}
	}()
	ok, err = r.tryAcquire(rlock.WithOwner(ctx, r.owner))
	close(stop)
	<-watcherDone
	return ok, sig, err
}

func (r *runner) tryAcquire(ctx context.Context) (bool, error) {
	start := time.Now()
	lease := r.o.lease.d // 0: watchdog lease
	ok, err := r.l.TryLock(ctx, 0, lease)
	if ok || err != nil || (r.o.wait.set && r.o.wait.d == 0) {
		return ok, err
	}
	stopStatus := r.startWaitStatus(ctx, start)
	defer stopStatus()
	if !r.o.wait.set {
		if lease > 0 {
			err = r.l.LockLease(ctx, lease)
		} else {
			err = r.l.Lock(ctx)
		}
		return err == nil, err
	}
	rem := r.o.wait.d - time.Since(start)
	if rem <= 0 {
		return false, nil
	}
	return r.l.TryLock(ctx, rem, lease)
}

// startWaitStatus starts the status line shown while waiting; the returned
// function stops it and clears the line.
func (r *runner) startWaitStatus(ctx context.Context, start time.Time) (stop func()) {
	if r.g.quiet {
		return func() {}
	}
	f, _ := r.g.stderr.(*os.File)
	tty := f != nil && isTerminal(f)
	every := 5 * time.Second
	if tty {
		every = 500 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	printed := false
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			ictx, icancel := context.WithTimeout(ctx, every)
			o, err := inspect(ictx, r.conn, r.name)
			icancel()
			if ctx.Err() != nil {
				return
			}
			if line := r.waitLine(o, err, time.Since(start)); line != "" {
				if tty {
					// One row, or \r would not get back to its start.
					if w := terminalWidth(f); w > 1 {
						line = truncate(line, w-1)
					}
					fmt.Fprintf(r.g.stderr, "\r\x1b[K%s", line)
				} else {
					fmt.Fprintln(r.g.stderr, line)
				}
				printed = true
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if tty && printed {
			fmt.Fprint(r.g.stderr, "\r\x1b[K")
		}
	}
}

func (r *runner) waitLine(o object, err error, waited time.Duration) string {
	prefix := fmt.Sprintf("rlock: waiting for %s (%v)", r.what(), waited.Round(time.Second))
	switch {
	case err != nil:
		return prefix + ": cannot inspect it: " + err.Error()
	case r.field != "" && slices.ContainsFunc(o.Holders, func(h rlock.Holder) bool { return h.Field == r.field }):
		return "" // just taken
	case r.permit == nil && !o.held():
		return prefix + ": free, taking it"
	}
	return prefix + ": " + o.summary()
}

// truncate shortens s to at most n runes, ending it with "…" if cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// notObtained reports a wait that ran out, naming the holder.
func (r *runner) notObtained() int {
	ctx, cancel := opCtx(context.Background())
	defer cancel()
	o, err := inspect(ctx, r.conn, r.name)
	msg := fmt.Sprintf("%s not obtained within %v", r.what(), r.o.wait.d)
	switch {
	case err != nil:
		msg += " (cannot inspect it: " + err.Error() + ")"
	case r.permit != nil:
		msg += fmt.Sprintf(": %s, waiting clients %d", o.summary(), o.subscribers())
	case !o.held():
		msg += ": it was released meanwhile"
	default:
		msg += fmt.Sprintf(": held by %s, ttl %s, waiting clients %d",
			holdersPhrase(o), formatTTL(o.TTL, time.Millisecond), o.subscribers())
	}
	r.g.errorf("%s", msg)
	return exitNotObtained
}

// release unlocks the lock (one level: rlock takes it once), or gives the
// permit back.
func (r *runner) release() error {
	ctx, cancel := opCtx(context.Background())
	defer cancel()
	return r.l.Unlock(rlock.WithOwner(ctx, r.owner))
}

// setPermits gives the semaphore its --semaphore N permits if it does not
// exist yet, and warns when it exists with another number (rlock does not
// change a semaphore other processes use).
func (r *runner) setPermits() int {
	ctx, cancel := opCtx(context.Background())
	defer cancel()
	set, err := r.permit.s.TrySetPermits(ctx, r.o.semaphore)
	if err == nil && !set {
		var n int
		if n, err = r.permit.s.Permits(ctx); err == nil && n != r.o.semaphore {
			r.g.note("semaphore %s has %d permits, not %d: using it as it is", r.name, n, r.o.semaphore)
		}
	}
	if err != nil {
		r.g.errorf("setting up semaphore %s: %v", r.name, err)
		return errorCode(err)
	}
	return exitOK
}

func isLost(cause error) bool {
	return errors.Is(cause, rlock.ErrLockLost) || errors.Is(cause, rlock.ErrLeaseExpired)
}

// runCommand runs the command under the lock held as hold says, and
// returns rlock's exit code.
func (r *runner) runCommand(sigs <-chan os.Signal, hold context.Context) int {
	group := !r.o.foreground.v
	cmd := exec.Command(r.command[0], r.command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, r.g.stdout, r.g.stderr
	cmd.Env = append(os.Environ(), "RLOCK_NAME="+r.name)
	if r.permit != nil {
		cmd.Env = append(cmd.Env, "RLOCK_PERMIT="+r.permit.permitID())
	} else {
		cmd.Env = append(cmd.Env, "RLOCK_HOLDER="+r.field)
	}
	cmd.SysProcAttr = childAttr(r.o.foreground.v)
	var jobs chan os.Signal
	if group && len(jobControlSignals) > 0 {
		jobs = make(chan os.Signal, 4)
		signal.Notify(jobs, jobControlSignals...)
		defer signal.Stop(jobs)
	}
	if err := cmd.Start(); err != nil {
		if rerr := r.release(); rerr != nil {
			r.g.errorf("releasing %s: %v", r.what(), rerr)
		}
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		r.g.errorf("cannot run %s: %v", r.command[0], err)
		return code
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(exited)
	}()

	var (
		lost     error
		graceC   <-chan time.Time
		holdDone = hold.Done()
	)
	for running := true; running; {
		select {
		case <-exited:
			running = false
		case s := <-sigs:
			if r.o.foreground.v && slices.Contains(terminalSignals, s) {
				continue // the terminal sent it to the command as well
			}
			_ = signalCommand(cmd.Process, s, group)
		case s := <-jobs:
			if s == sigTSTP {
				_ = signalCommand(cmd.Process, sigTSTP, true)
				stopSelf()
			} else {
				_ = signalCommand(cmd.Process, sigCONT, true)
			}
		case <-holdDone:
			holdDone = nil
			cause := context.Cause(hold)
			if !isLost(cause) {
				continue
			}
			lost = cause
			if r.o.keepRunning {
				r.g.errorf("%s lost while the command runs (%v); --keep-running: the command goes on without it", r.what(), cause)
				continue
			}
			r.g.errorf("%s lost while the command runs (%v): terminating the command (SIGTERM, SIGKILL after %v)", r.what(), cause, r.o.grace.d)
			_ = signalCommand(cmd.Process, sigTERM, group)
			graceC = time.After(r.o.grace.d)
		case <-graceC:
			graceC = nil
			r.g.errorf("the command is still running %v after SIGTERM: sending SIGKILL", r.o.grace.d)
			_ = signalCommand(cmd.Process, sigKILL, group)
		}
	}
	status := exitStatus(cmd.ProcessState)

	if lost == nil {
		select {
		case <-hold.Done():
			if cause := context.Cause(hold); isLost(cause) {
				lost = cause
				r.g.errorf("%s lost as the command ended (%v)", r.what(), cause)
			}
		default:
		}
	}
	if lost != nil {
		if r.o.keepRunning {
			return status
		}
		if group {
			// The command has exited; what is left of its group must stop
			// too, as it works without the lock.
			_ = signalCommand(cmd.Process, sigKILL, true)
		}
		return exitLost
	}
	if err := r.release(); errors.Is(err, rlock.ErrNotHeld) {
		r.g.errorf("%s was gone when the command ended (expired, deleted or force-unlocked): the command ran at least partly without it", r.what())
		if !r.o.keepRunning {
			return exitLost
		}
	} else if err != nil {
		r.g.errorf("releasing %s: %v (it frees itself within its lease)", r.what(), err)
	}
	return status
}
