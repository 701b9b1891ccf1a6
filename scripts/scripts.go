// Package scripts holds the Lua scripts that implement Redisson's lock
// protocol on the server, embedded from .lua files, and a small runner that
// sends them as EVALSHA with a fallback to EVAL when the server answers
// NOSCRIPT.
//
// Each .lua file starts with its KEYS, ARGV and replies. The scripts are
// written from the protocol description, not copied from Redisson: Redis and
// Java care only about the data layout and the pub/sub traffic, not about the
// script text or its SHA-1.
//
// Scripts are never marked retryable for rueidis: acquire and unlock are
// not idempotent and must not be resent by the client library. Each
// carries a fence key instead: a call whose reply was lost is settled by
// the fence script, which stops it from running later and tells whether it
// ran, and only then may it be sent again. Renew, fence and force_unlock
// (with its latch) are idempotent.
package scripts

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/rueidis"
)

var (
	//go:embed acquire.lua
	acquireText string
	//go:embed unlock.lua
	unlockText string
	//go:embed force_unlock.lua
	forceUnlockText string
	//go:embed renew.lua
	renewText string
	//go:embed fence.lua
	fenceText string
	//go:embed read_acquire.lua
	readAcquireText string
	//go:embed read_unlock.lua
	readUnlockText string
	//go:embed write_acquire.lua
	writeAcquireText string
	//go:embed write_unlock.lua
	writeUnlockText string
	//go:embed renew_read.lua
	renewReadText string
	//go:embed read_locked.lua
	readLockedText string
	//go:embed expire.lua
	expireText string
	//go:embed fair_prelude.lua
	fairPrelude string
	//go:embed fair_acquire.lua
	fairAcquireText string
	//go:embed fair_unlock.lua
	fairUnlockText string
	//go:embed fair_cancel.lua
	fairCancelText string
	//go:embed fair_force_unlock.lua
	fairForceUnlockText string
	//go:embed acl_prelude.lua
	aclPrelude string
	//go:embed sync_prelude.lua
	syncPrelude string
	//go:embed sync_fence.lua
	syncFenceText string
	//go:embed sem_acquire.lua
	semAcquireText string
	//go:embed sem_update.lua
	semUpdateText string
	//go:embed psem_prelude.lua
	psemPrelude string
	//go:embed psem_acquire.lua
	psemAcquireText string
	//go:embed psem_release.lua
	psemReleaseText string
	//go:embed psem_update.lua
	psemUpdateText string
	//go:embed psem_query.lua
	psemQueryText string
	//go:embed latch_update.lua
	latchUpdateText string
	//go:embed inspect.lua
	inspectText string
)

// The lock scripts. See the header of each .lua file for KEYS, ARGV and
// replies.
var (
	Acquire     = joined("acquire", acl, source{"acquire.lua", acquireText})
	Unlock      = joined("unlock", acl, source{"unlock.lua", unlockText})
	ForceUnlock = joined("force_unlock", acl, source{"force_unlock.lua", forceUnlockText})
	Renew       = New("renew", renewText)
	Fence       = New("fence", fenceText)

	ReadAcquire  = joined("read_acquire", acl, source{"read_acquire.lua", readAcquireText})
	ReadUnlock   = joined("read_unlock", acl, source{"read_unlock.lua", readUnlockText})
	WriteAcquire = joined("write_acquire", acl, source{"write_acquire.lua", writeAcquireText})
	WriteUnlock  = joined("write_unlock", acl, source{"write_unlock.lua", writeUnlockText})
	RenewRead    = New("renew_read", renewReadText)
	ReadLocked   = New("read_locked", readLockedText)
	Expire       = New("expire", expireText)

	// The fair lock's scripts share the functions of fair_prelude.lua,
	// which runs first.
	FairAcquire     = joined("fair_acquire", acl, source{"fair_prelude.lua", fairPrelude}, source{"fair_acquire.lua", fairAcquireText})
	FairUnlock      = joined("fair_unlock", acl, source{"fair_prelude.lua", fairPrelude}, source{"fair_unlock.lua", fairUnlockText})
	FairCancel      = joined("fair_cancel", acl, source{"fair_prelude.lua", fairPrelude}, source{"fair_cancel.lua", fairCancelText})
	FairForceUnlock = joined("fair_force_unlock", acl, source{"fair_prelude.lua", fairPrelude}, source{"fair_force_unlock.lua", fairForceUnlockText})

	// The synchronizers' write scripts run sync_prelude.lua first: a
	// fence check and record(v), which keeps the outcome of a call that
	// changed data for SyncFence to read after a lost reply.
	SyncFence   = New("sync_fence", syncFenceText)
	SemAcquire  = joined("sem_acquire", acl, source{"sync_prelude.lua", syncPrelude}, source{"sem_acquire.lua", semAcquireText})
	SemUpdate   = joined("sem_update", acl, source{"sync_prelude.lua", syncPrelude}, source{"sem_update.lua", semUpdateText})
	PsemAcquire = joined("psem_acquire", acl, source{"sync_prelude.lua", syncPrelude}, source{"psem_acquire.lua", psemAcquireText})
	PsemRelease = joined("psem_release", acl, source{"sync_prelude.lua", syncPrelude}, source{"psem_prelude.lua", psemPrelude}, source{"psem_release.lua", psemReleaseText})
	PsemUpdate  = joined("psem_update", acl, source{"sync_prelude.lua", syncPrelude}, source{"psem_update.lua", psemUpdateText})
	PsemQuery   = joined("psem_query", acl, source{"psem_prelude.lua", psemPrelude}, source{"psem_query.lua", psemQueryText})
	LatchUpdate = joined("latch_update", acl, source{"sync_prelude.lua", syncPrelude}, source{"latch_update.lua", latchUpdateText})

	// Inspect reads, for the rlock tool, every key a lock or synchronizer
	// of one name keeps; it writes nothing.
	Inspect = New("inspect", inspectText)
)

// acl is the prelude of every script that checks its writes against the
// caller's ACL before it makes the first (acl_may).
var acl = source{"acl_prelude.lua", aclPrelude}

// Script is a Lua script with its SHA-1, safe for concurrent use.
type Script struct {
	name  string
	text  string
	sha1  string
	parts []part // the .lua files it is made of, in order
}

// part is one .lua file of a script: its name and the script's line on
// which it starts.
type part struct {
	file  string
	first int
}

// source is the text of one embedded .lua file, with the file's name.
type source struct{ file, text string }

// joined returns the Script made of sources, one after the other (a
// prelude's functions, then the script that uses them).
func joined(name string, sources ...source) *Script {
	var text strings.Builder
	var parts []part
	line := 1
	for _, src := range sources {
		if !strings.HasSuffix(src.text, "\n") {
			panic("scripts: " + src.file + " does not end with a newline") // its last line would run into the next file's first
		}
		parts = append(parts, part{src.file, line})
		text.WriteString(src.text)
		line += strings.Count(src.text, "\n")
	}
	s := New(name, text.String())
	s.parts = parts
	return s
}

// New returns a Script for text; name is used in String and in the
// errors that Explain names.
func New(name, text string) *Script {
	sum := sha1.Sum([]byte(text))
	s := &Script{name: name, text: text, sha1: hex.EncodeToString(sum[:]), parts: []part{{name + ".lua", 1}}}
	known.Store(s.sha1, s)
	return s
}

// fileLine maps a line of the script to a .lua file and its line there.
func (s *Script) fileLine(line int) (string, int) {
	p := s.parts[0]
	for _, q := range s.parts {
		if q.first <= line {
			p = q
		}
	}
	return p.file, line - p.first + 1
}

// known maps the SHA-1 of every Script made by New to it, for Explain.
var known sync.Map

// deniedInScript is the tail of Redis' (7.0) reply when the caller's ACL
// denies a call a script makes (a command, a key or a channel): it names
// the script's SHA-1 and the line, not the command.
var deniedInScript = regexp.MustCompile(`can't (?:run this command or subcommand|publish to the channel|access at least one of the keys)[^\n]*? script: ([0-9a-f]{40}), on @user_script:(\d+)`)

// calledCommand finds the command of a redis.call or redis.pcall on a line:
// a literal name, or a variable (the publish command a script is given).
var calledCommand = regexp.MustCompile(`redis\.p?call\(\s*(?:'([a-zA-Z|]+)'|"([a-zA-Z|]+)"|([A-Za-z_][A-Za-z_0-9]*(?:\[\d+\])?))`)

// Explain adds to err, when it is Redis' refusal of a command that one of
// these scripts calls (the caller's ACL denies it), the command's name and
// the script's line, which Redis' own message leaves out. Other errors are
// returned as they are. The result still wraps err.
func Explain(err error) error {
	if err == nil {
		return nil
	}
	m := deniedInScript.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	v, ok := known.Load(m[1])
	line, _ := strconv.Atoi(m[2])
	if !ok {
		return err
	}
	s := v.(*Script)
	lines := strings.Split(s.text, "\n")
	if line < 1 || line > len(lines) {
		return err
	}
	var cmds []string
	for _, c := range calledCommand.FindAllStringSubmatch(lines[line-1], -1) {
		switch {
		case c[1] != "":
			cmds = append(cmds, strings.ToUpper(c[1]))
		case c[2] != "":
			cmds = append(cmds, strings.ToUpper(c[2]))
		default:
			// Every command passed in ARGV is the wake-up message's.
			cmds = append(cmds, "PUBLISH (SPUBLISH on a cluster with sharded pub/sub)")
		}
	}
	if len(cmds) == 0 {
		return err
	}
	file, at := s.fileLine(line)
	return fmt.Errorf("%w (the user's ACL denies %s, which %s calls at line %d, in the %s script)",
		err, strings.Join(cmds, " or "), file, at, s.name)
}

// String returns the script's name.
func (s *Script) String() string { return s.name }

// Text returns the Lua source.
func (s *Script) Text() string { return s.text }

// SHA1 returns the hex SHA-1 of the source, as EVALSHA expects it.
func (s *Script) SHA1() string { return s.sha1 }

// Exec runs the script once with EVALSHA and, if the server does not know
// the script yet, once more with EVAL. The NOSCRIPT reply proves that the
// first attempt did not run, so the second never runs the script twice.
func (s *Script) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	res := c.Do(ctx, s.EvalSHA(c, keys, args))
	if isNoScript(res.Error()) {
		res = c.Do(ctx, s.Eval(c, keys, args))
	}
	return res
}

// Call is one execution of a script within ExecMulti.
type Call struct {
	Keys []string
	Args []string
}

// ExecMulti pipelines one execution per call (EVALSHA, then EVAL for those
// that got NOSCRIPT) and returns one result per call, in order. On a cluster
// client each call's keys must share a slot; calls may go to different slots.
func (s *Script) ExecMulti(ctx context.Context, c rueidis.Client, calls []Call) []rueidis.RedisResult {
	if len(calls) == 0 {
		return nil
	}
	cmds := make(rueidis.Commands, len(calls))
	for i, call := range calls {
		cmds[i] = s.EvalSHA(c, call.Keys, call.Args)
	}
	res := c.DoMulti(ctx, cmds...)
	var retry []int
	for i, r := range res {
		if isNoScript(r.Error()) {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		cmds = cmds[:0]
		for _, i := range retry {
			cmds = append(cmds, s.Eval(c, calls[i].Keys, calls[i].Args))
		}
		for j, r := range c.DoMulti(ctx, cmds...) {
			res[retry[j]] = r
		}
	}
	return res
}

// EvalSHA builds the EVALSHA command for one execution, for callers that
// pipeline it with other commands; on a NOSCRIPT reply they resend Eval.
func (s *Script) EvalSHA(c rueidis.Client, keys, args []string) rueidis.Completed {
	return c.B().Evalsha().Sha1(s.sha1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// Eval builds the EVAL command for one execution.
func (s *Script) Eval(c rueidis.Client, keys, args []string) rueidis.Completed {
	return c.B().Eval().Script(s.text).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}
