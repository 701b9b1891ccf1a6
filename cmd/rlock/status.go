package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/goredisson/locks/rlock"
)

const statusHelp = `Usage: rlock status [--json] NAME...

Shows what each NAME holds, recognising every Redisson lock and synchronizer
on its own (Go and Java ones alike: they share the format):

  lock              free or held; each holder's client id (a Go client's or a
                    Redisson instance's id), owner id (goroutine/owner id, Java
                    thread id, or the pid of an 'rlock run') and hold count, and
                    the TTL (spin and non-reentrant locks look the same)
  fair lock         the same, plus its queue of waiters in order, each with the
                    time until which its place is reserved (a fair lock nobody
                    queues for looks like a plain lock)
  read-write lock   the mode (read or write), the readers with their counts or
                    the writer
  fenced lock       the same as a lock, plus the last token issued
  semaphore         the permits available
  permit-expirable semaphore
                    the permits available and each acquired permit's id and
                    expiry
  count-down latch  the count
  A counter nobody waits on cannot tell a semaphore from a latch: it shows as
  "semaphore or count-down latch". "waiting clients" counts the client
  processes (Go or Java) subscribed to the kind's channel, that is with threads
  waiting.

Flags:
  --json    print a JSON array, one object per NAME:
            {"name", "kind", "locked", "holders": [{"client_id", "owner_id",
            "count", "field"}], "ttl_ms" (when locked; -1: no expiry),
            "mode" (read-write lock), "queue": [{"field", "client_id",
            "owner_id", "deadline_ms"}] (fair lock), "token" (fenced lock),
            "permits_available" (semaphores), "permits_acquired": [{"id",
            "expires_ms" (absent: never)}], "count" (latch), "value" (a counter
            of unknown kind), "subscribers", "error" (when it could not be
            read)}

` + globalFlagsHelp + `
Exit codes: 0 when every NAME was read, 64 usage error, 69 cannot reach Redis,
70 Redis refused a read.
`

const unlockHelp = `Usage: rlock unlock --force NAME...

Deletes each lock NAME whoever holds it (Redisson's forceUnlock) and publishes
the unlock message, so that waiters in any process and language wake at once:
on the read-write lock's channel for a read-write lock, to the first waiter of
a fair lock's queue. A semaphore or latch is refused (exit 70): it has no
holder to break.
Reports, for each NAME, whether it was held, and by whom just before.
The holder is not told directly: a Go or Java holder with a watchdog lease
notices at its next renewal (an 'rlock run' then terminates its command).

Flags:
  --force   required: acknowledges that this breaks another process's hold

` + globalFlagsHelp + `
Exit codes: 0 done (held or not), 64 usage error (e.g. no --force), 69 cannot
reach Redis, 70 Redis refused the operation.
`

func cmdStatus(g *globals, args []string) int {
	fs := newFlagSet("status")
	asJSON := fs.Bool("json", false, "")
	pos, after, _, code, done := g.parseCommand("status", statusHelp, fs, args)
	if done {
		return code
	}
	names := append(pos, after...)
	if code, ok := g.checkNames("status", names); !ok {
		return code
	}
	c, code := g.connect("status")
	if c == nil {
		return code
	}
	defer c.close()

	out := make([]jsonStatus, 0, len(names))
	code = exitOK
	for _, name := range names {
		ctx, cancel := opCtx(context.Background())
		o, err := inspect(ctx, c, name)
		cancel()
		if err != nil {
			if ec := errorCode(err); ec == exitUnavailable || code == exitOK {
				code = ec
			}
			if !*asJSON {
				fmt.Fprintf(g.stdout, "%s: error: %v\n", name, err)
			}
			out = append(out, jsonStatus{Name: name, Holders: []jsonHolder{}, Error: err.Error()})
			continue
		}
		if *asJSON {
			out = append(out, toJSON(o))
		} else {
			fmt.Fprint(g.stdout, statusText(o))
		}
	}
	if *asJSON {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			g.errorf("%v", err)
			return exitSoftware
		}
	}
	return code
}

type jsonHolder struct {
	ClientID string `json:"client_id"`
	OwnerID  int64  `json:"owner_id"`
	Count    int    `json:"count"`
	Field    string `json:"field"`
}

type jsonWaiter struct {
	Field      string `json:"field"`
	ClientID   string `json:"client_id"`
	OwnerID    int64  `json:"owner_id"`
	DeadlineMs *int64 `json:"deadline_ms,omitempty"`
}

type jsonPermit struct {
	ID        string `json:"id"`
	ExpiresMs *int64 `json:"expires_ms,omitempty"`
}

type jsonStatus struct {
	Name        string       `json:"name"`
	Kind        string       `json:"kind,omitempty"`
	Locked      bool         `json:"locked"`
	Holders     []jsonHolder `json:"holders"`
	TTLms       *int64       `json:"ttl_ms,omitempty"`
	Mode        string       `json:"mode,omitempty"`
	Queue       []jsonWaiter `json:"queue,omitempty"`
	Token       *int64       `json:"token,omitempty"`
	Available   *int64       `json:"permits_available,omitempty"`
	Acquired    []jsonPermit `json:"permits_acquired,omitempty"`
	Count       *int64       `json:"count,omitempty"`
	Value       *int64       `json:"value,omitempty"`
	Subscribers int64        `json:"subscribers"`
	Error       string       `json:"error,omitempty"`
}

func toJSON(o object) jsonStatus {
	s := jsonStatus{Name: o.Name, Kind: o.Kind, Locked: o.held(), Holders: []jsonHolder{}, Mode: o.Mode, Token: o.Token, Subscribers: o.subscribers()}
	for _, h := range o.Holders {
		s.Holders = append(s.Holders, jsonHolder{ClientID: h.ClientID, OwnerID: h.OwnerID, Count: h.Count, Field: h.Field})
	}
	if o.held() {
		ms := o.TTL.Milliseconds()
		s.TTLms = &ms
	}
	for _, w := range o.Queue {
		jw := jsonWaiter{Field: w.Field, ClientID: w.ClientID, OwnerID: w.OwnerID}
		if !w.Deadline.IsZero() {
			ms := w.Deadline.UnixMilli()
			jw.DeadlineMs = &ms
		}
		s.Queue = append(s.Queue, jw)
	}
	switch o.Kind {
	case kindSemaphore, kindPermits:
		v := o.available()
		s.Available = &v
	case kindLatch:
		v := o.available()
		s.Count = &v
	case kindCounter:
		s.Value = o.Value
	}
	for _, p := range o.Permits {
		jp := jsonPermit{ID: p.ID}
		if !p.Expires.IsZero() {
			ms := p.Expires.UnixMilli()
			jp.ExpiresMs = &ms
		}
		s.Acquired = append(s.Acquired, jp)
	}
	return s
}

// statusText is the text form of one name's status, one or more lines.
func statusText(o object) string {
	var b strings.Builder
	subs := o.subscribers()
	switch o.Kind {
	case kindOther:
		fmt.Fprintf(&b, "%s: %s\n", o.Name, o.summary())
		return b.String()
	case kindSemaphore, kindPermits:
		fmt.Fprintf(&b, "%s: %s, %s, waiting clients %d\n", o.Name, o.Kind, o.summary(), subs)
		for _, p := range o.Permits {
			exp := "never expires"
			if !p.Expires.IsZero() {
				exp = "expires " + until(p.Expires, o.ReadAt)
			}
			fmt.Fprintf(&b, "  permit %s %s\n", p.ID, exp)
		}
		return b.String()
	case kindLatch:
		fmt.Fprintf(&b, "%s: count-down latch, count %d, waiting clients %d\n", o.Name, o.available(), subs)
		return b.String()
	case kindCounter:
		fmt.Fprintf(&b, "%s: counter %d: a semaphore with %s available or a count-down latch at %d (nobody waits on either to tell which)\n",
			o.Name, o.available(), plural(o.available(), "permit", "permits"), o.available())
		return b.String()
	}
	kind := ""
	switch o.Kind {
	case kindFair, kindRW:
		kind = " (" + o.Kind + ")"
	case kindFenced:
		kind = fmt.Sprintf(" (fenced lock, last token %d)", *o.Token)
	}
	if !o.held() {
		fmt.Fprintf(&b, "%s: free%s, waiting clients %d\n", o.Name, kind, subs)
	} else {
		if o.Mode != "" {
			kind = " (read-write lock, mode " + o.Mode + ")"
		}
		fmt.Fprintf(&b, "%s: held%s, ttl %s, waiting clients %d\n", o.Name, kind, formatTTL(o.TTL, time.Millisecond), subs)
	}
	for _, h := range o.Holders {
		if h.ClientID == "" {
			fmt.Fprintf(&b, "  holder: field %q count %d (not in Redisson's <client id>:<owner id> format)\n", h.Field, h.Count)
			continue
		}
		fmt.Fprintf(&b, "  holder: client %s owner %d count %d", h.ClientID, h.OwnerID, h.Count)
		switch {
		case strings.HasSuffix(h.Field, ":write"):
			b.WriteString(" (write lock)")
		case o.Mode != "":
			b.WriteString(" (read lock)")
		}
		b.WriteByte('\n')
	}
	for i, w := range o.Queue {
		fmt.Fprintf(&b, "  queued %d: %s", i+1, holderText(w.Holder))
		if !w.Deadline.IsZero() {
			fmt.Fprintf(&b, ", place reserved until %s", until(w.Deadline, o.ReadAt))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// formatTTL words a TTL as RemainTTL reports it, rounded to round.
func formatTTL(ttl, round time.Duration) string {
	switch ttl {
	case rlock.TTLNoExpiry:
		return "none (no expiry)"
	case rlock.TTLNotLocked:
		return "none (not locked)"
	}
	return ttl.Round(round).String()
}

func cmdUnlock(g *globals, args []string) int {
	fs := newFlagSet("unlock")
	force := fs.Bool("force", false, "")
	pos, after, _, code, done := g.parseCommand("unlock", unlockHelp, fs, args)
	if done {
		return code
	}
	names := append(pos, after...)
	if code, ok := g.checkNames("unlock", names); !ok {
		return code
	}
	if !*force {
		return g.usageError("unlock", "unlock needs --force: it deletes the lock whoever holds it (an 'rlock run' releases its own lock when its command ends)")
	}
	c, code := g.connect("unlock")
	if c == nil {
		return code
	}
	defer c.close()

	code = exitOK
	for _, name := range names {
		ctx, cancel := opCtx(context.Background())
		o, ierr := inspect(ctx, c, name)
		var held bool
		var err error
		switch {
		case ierr != nil:
			// Without knowing the kind, a DEL could wipe a semaphore or
			// latch: leave the name alone.
			cancel()
			g.errorf("%s: not force-unlocked: cannot tell what it is: %v", name, ierr)
			if ec := errorCode(ierr); ec == exitUnavailable || code == exitOK {
				code = ec
			}
			continue
		case o.Kind != kindFree && o.Kind != kindLock && o.Kind != kindFair && o.Kind != kindRW && o.Kind != kindFenced:
			cancel()
			why := "it is a " + o.Kind + ", not a lock (" + o.summary() + ")"
			if o.Kind == kindOther {
				why = o.summary()
			}
			g.errorf("%s: not force-unlocked: %s", name, why)
			if code == exitOK {
				code = exitSoftware
			}
			continue
		case o.Kind == kindRW && o.Mode == "read":
			// Deletes the hash and publishes on the read-write lock's
			// channel, where its waiters listen; each half deletes a
			// hash only in its own mode.
			held, err = c.locks.ReadWriteLock(name).ReadLock().ForceUnlock(ctx)
		case o.Kind == kindRW:
			held, err = c.locks.ReadWriteLock(name).WriteLock().ForceUnlock(ctx)
		case o.Kind == kindFair:
			// Also wakes the first queued waiter on its own channel.
			held, err = c.locks.FairLock(name).ForceUnlock(ctx)
		default:
			held, err = c.locks.Lock(name).ForceUnlock(ctx)
		}
		cancel()
		switch {
		case err != nil:
			g.errorf("%s: force unlock failed: %v", name, err)
			if ec := errorCode(err); ec == exitUnavailable || code == exitOK {
				code = ec
			}
		case held && o.held():
			fmt.Fprintf(g.stdout, "%s: was held by %s; force-unlocked\n", name, holdersPhrase(o))
		case held:
			fmt.Fprintf(g.stdout, "%s: was held; force-unlocked\n", name)
		default:
			fmt.Fprintf(g.stdout, "%s: was not locked\n", name)
		}
	}
	return code
}
