// Command rlock takes Redisson-compatible distributed locks from the shell:
// a distributed flock(1) that Java services using Redisson respect, and
// tools to inspect, watch and break such locks.
//
//	rlock run [--fair | --read | --write | --semaphore N] [--wait D] [--lease D] [--keep-running] [--grace D] [--foreground] NAME -- COMMAND [ARGS...]
//	rlock status [--json] NAME...
//	rlock unlock --force NAME...
//	rlock watch [--enable-notifications] [--poll] [--interval D] NAME...
//
// Global flags (before or after the command name): --redis URL (or
// $REDIS_URL), --watchdog D, --quiet, --version, --help. See README.md and
// `rlock --help` for the exit codes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/goredisson/locks/rlock"
)

// version is set at build time: go build -ldflags "-X main.version=1.2.3".
var version = "dev"

// Exit codes. The sysexits(3) values name rlock's own outcomes; run
// otherwise exits with its command's status.
const (
	exitOK          = 0
	exitUsage       = 64  // EX_USAGE: bad command, flag, argument, duration or URL
	exitUnavailable = 69  // EX_UNAVAILABLE: cannot reach Redis (connect or I/O failure)
	exitSoftware    = 70  // EX_SOFTWARE: Redis refused an operation (error reply, e.g. WRONGTYPE, NOPERM)
	exitNotObtained = 75  // EX_TEMPFAIL: run: the lock was not obtained within --wait
	exitLost        = 76  // run: the lock was lost while the command ran
	exitCannotExec  = 126 // run: the command was found but could not be started
	exitNotFound    = 127 // run: the command was not found
	exitSignalBase  = 128 // run: 128+N when the command (or rlock, while waiting) was killed by signal N
)

const defaultRedisURL = "redis://127.0.0.1:6379"

const exitCodesHelp = `Exit codes:
  0        success; for run: the command's own exit status (0-255)
  64       usage error: unknown command or flag, missing NAME or --, bad duration or URL
  69       cannot reach Redis (connection refused, timeout, authentication failed)
  70       Redis refused an operation (an error reply, e.g. WRONGTYPE: the key is not a lock)
  75       run: the lock was not obtained within --wait (the message names the holder)
  76       run: the lock was lost while the command ran (the command was terminated
           unless --keep-running), or was found gone when the command finished
  126      run: the command could not be started (e.g. permission denied)
  127      run: the command was not found
  128+N    run: the command was killed by signal N (e.g. 143 for SIGTERM), or rlock
           was interrupted by signal N while waiting for the lock
A command may itself exit with one of these values; rlock passes it on unchanged.
`

const mainHelp = `rlock: Redisson-compatible distributed locks from the shell.

Locks are Redisson RLocks (the Redis hash NAME, field "<client id>:<owner id>"),
so Java services using redisson.getLock(NAME) on the same Redis respect them,
and rlock sees and respects theirs.

Usage:
  rlock [global flags] COMMAND [flags] ARGS...

Commands:
  run     NAME -- COMMAND [ARGS...]   run COMMAND while holding lock NAME
  status  NAME...                     show what each NAME holds (any lock, semaphore or latch)
  unlock  --force NAME...             delete locks whoever holds them, waking waiters
  watch   NAME...                     print each change of holder or state until interrupted
  help    [COMMAND]                   show help for rlock or for COMMAND

Run 'rlock COMMAND --help' for a command's flags.

` + globalFlagsHelp + `
` + exitCodesHelp

const globalFlagsHelp = `Global flags (before or after COMMAND):
  --redis URL       the Redis to use; default $REDIS_URL, else ` + defaultRedisURL + `.
                    redis://[user:password@]host:port[/db], rediss:// for TLS,
                    unix:///path/to/socket, extra seed nodes with ?addr=host:port
                    (a cluster is detected automatically), a Sentinel master with
                    ?master_set=NAME (the URL then names the Sentinels).
                    Passwords are never printed.
  --watchdog D      watchdog lease of locks taken without --lease (default 30s);
                    it must match the Java services' lockWatchdogTimeout
  --quiet           no status lines or notes on stderr (errors are still printed)
  --version         print the version and exit
  --help, -h        show help
`

// globals are the flags every command accepts.
type globals struct {
	redisURL string
	watchdog durationValue
	quiet    bool
	version  bool
	stdout   io.Writer
	stderr   io.Writer
}

// register adds the global flags to fs with their current values as
// defaults, so flags given before the command name survive the command's
// own parse.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.redisURL, "redis", g.redisURL, "")
	fs.Var(&g.watchdog, "watchdog", "")
	fs.BoolVar(&g.quiet, "quiet", g.quiet, "")
	fs.BoolVar(&g.version, "version", g.version, "")
}

// note prints an informational line on stderr unless --quiet.
func (g *globals) note(format string, args ...any) {
	if !g.quiet {
		fmt.Fprintf(g.stderr, "rlock: "+format+"\n", args...)
	}
}

// errorf prints an error line on stderr (even with --quiet).
func (g *globals) errorf(format string, args ...any) {
	fmt.Fprintf(g.stderr, "rlock: "+format+"\n", args...)
}

// usageError reports a usage error for cmd ("" for rlock itself) and
// returns exitUsage.
func (g *globals) usageError(cmd, format string, args ...any) int {
	prefix, help := "rlock", "rlock --help"
	if cmd != "" {
		prefix, help = "rlock "+cmd, "rlock "+cmd+" --help"
	}
	fmt.Fprintf(g.stderr, "%s: %s\nRun '%s' for usage.\n", prefix, fmt.Sprintf(format, args...), help)
	return exitUsage
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand.
type command struct {
	help string
	run  func(g *globals, args []string) int
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"run":    {runHelp, cmdRun},
		"status": {statusHelp, cmdStatus},
		"unlock": {unlockHelp, cmdUnlock},
		"watch":  {watchHelp, cmdWatch},
	}
}

func realMain(args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr, watchdog: durationValue{d: rlock.DefaultWatchdogTimeout}}
	fs := newFlagSet("rlock")
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, mainHelp)
			return exitOK
		}
		return g.usageError("", "%s", flagError(err))
	}
	if g.version {
		fmt.Fprintf(stdout, "rlock %s\n", versionString())
		return exitOK
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return g.usageError("", "missing COMMAND (run, status, unlock, watch or help)")
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) == 0 {
			fmt.Fprint(stdout, mainHelp)
			return exitOK
		}
		c, ok := commands[rest[0]]
		if !ok {
			return g.usageError("", "unknown command %q (want run, status, unlock, watch or help)", rest[0])
		}
		fmt.Fprint(stdout, c.help)
		return exitOK
	}
	c, ok := commands[name]
	if !ok {
		return g.usageError("", "unknown command %q (want run, status, unlock, watch or help)", name)
	}
	return c.run(g, rest)
}

func versionString() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

// newFlagSet returns a FlagSet that reports nothing itself: the caller
// prints help and errors.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseCommand parses a command's flags and returns its positional
// arguments. Flags may come before and after positional arguments; "--"
// ends the flags, and what follows it is returned as afterDashDash
// (sawDashDash reports whether there was one). It handles --help (printing
// help, code exitOK), --version, and errors (code exitUsage); done is true
// when the caller should return code.
func (g *globals) parseCommand(cmd, help string, fs *flag.FlagSet, args []string) (pos, afterDashDash []string, sawDashDash bool, code int, done bool) {
	g.register(fs)
	before := args
	for i, a := range args {
		if a == "--" {
			before, afterDashDash, sawDashDash = args[:i], args[i+1:], true
			break
		}
	}
	for {
		if err := fs.Parse(before); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(g.stdout, help)
				return nil, nil, false, exitOK, true
			}
			return nil, nil, false, g.usageError(cmd, "%s", flagError(err)), true
		}
		before = fs.Args()
		if len(before) == 0 {
			break
		}
		pos = append(pos, before[0])
		before = before[1:]
	}
	if g.version {
		fmt.Fprintf(g.stdout, "rlock %s\n", versionString())
		return nil, nil, false, exitOK, true
	}
	if g.watchdog.d < 3*time.Millisecond {
		return nil, nil, false, g.usageError(cmd, "--watchdog %v is too short (at least 3ms)", g.watchdog.d), true
	}
	return pos, afterDashDash, sawDashDash, exitOK, false
}

// checkNames rejects empty lock names.
func (g *globals) checkNames(cmd string, names []string) (int, bool) {
	if len(names) == 0 {
		return g.usageError(cmd, "missing lock NAME"), false
	}
	for _, n := range names {
		if n == "" {
			return g.usageError(cmd, "a lock NAME cannot be empty"), false
		}
	}
	return exitOK, true
}

// flagError words a flag package error with the "--flag" spelling used in
// the help texts.
func flagError(err error) string {
	msg := err.Error()
	for _, p := range []string{"for flag -", "not defined: -", "an argument: -"} {
		msg = strings.Replace(msg, p, p+"-", 1)
	}
	return msg
}

// flagGiven reports whether the flag called name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// durationValue is a flag.Value for a duration with a clear error message
// and a record of whether it was set.
type durationValue struct {
	d   time.Duration
	set bool
}

func (v *durationValue) String() string {
	if v == nil {
		return ""
	}
	return v.d.String()
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return errors.New("not a duration (examples: 0, 500ms, 10s, 1m30s)")
	}
	v.d, v.set = d, true
	return nil
}
