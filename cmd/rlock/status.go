package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goredisson/locks/rlock"
)

const statusHelp = `Usage: rlock status [--json] NAME...

Shows, for each lock NAME: whether it is free or held; each holder's client id
(a Go rlock client's or a Redisson instance's id), owner id (goroutine/owner id,
Java thread id, or the pid of an 'rlock run') and hold count; the remaining TTL;
and the number of client connections subscribed to its channel, that is of
client processes (Go or Java) with threads waiting for it. Locks held by Java
services are shown the same way: they use the same hash format.

Flags:
  --json    print a JSON array, one object per NAME:
            {"name", "locked", "holders": [{"client_id", "owner_id", "count",
            "field"}], "ttl_ms" (when locked; -1: no expiry), "subscribers",
            "error" (when the lock could not be read)}

` + globalFlagsHelp + `
Exit codes: 0 when every lock was read, 64 usage error, 69 cannot reach Redis,
70 Redis refused a read (e.g. the key is not a hash).
`

const unlockHelp = `Usage: rlock unlock --force NAME...

Deletes each lock NAME whoever holds it (Redisson's forceUnlock) and publishes
the unlock message, so that waiters in any process and language wake at once.
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
		info, err := c.locks.Lock(name).Inspect(ctx)
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
			out = append(out, toJSON(info))
		} else {
			fmt.Fprint(g.stdout, statusText(info))
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

type jsonStatus struct {
	Name        string       `json:"name"`
	Locked      bool         `json:"locked"`
	Holders     []jsonHolder `json:"holders"`
	TTLms       *int64       `json:"ttl_ms,omitempty"`
	Subscribers int64        `json:"subscribers"`
	Error       string       `json:"error,omitempty"`
}

func toJSON(info rlock.Info) jsonStatus {
	s := jsonStatus{Name: info.Name, Locked: info.Locked, Holders: []jsonHolder{}, Subscribers: info.Subscribers}
	for _, h := range sortedHolders(info) {
		s.Holders = append(s.Holders, jsonHolder{ClientID: h.ClientID, OwnerID: h.OwnerID, Count: h.Count, Field: h.Field})
	}
	if info.Locked {
		ms := info.TTL.Milliseconds()
		s.TTLms = &ms
	}
	return s
}

// statusText is the text form of one lock's status, one or more lines.
func statusText(info rlock.Info) string {
	var b strings.Builder
	if !info.Locked {
		fmt.Fprintf(&b, "%s: free, waiting clients %d\n", info.Name, info.Subscribers)
		return b.String()
	}
	fmt.Fprintf(&b, "%s: held, ttl %s, waiting clients %d\n", info.Name, formatTTL(info.TTL, time.Millisecond), info.Subscribers)
	for _, h := range sortedHolders(info) {
		if h.ClientID == "" {
			fmt.Fprintf(&b, "  holder: field %q count %d (not in Redisson's <client id>:<owner id> format)\n", h.Field, h.Count)
			continue
		}
		fmt.Fprintf(&b, "  holder: client %s owner %d count %d", h.ClientID, h.OwnerID, h.Count)
		if strings.HasSuffix(h.Field, ":write") {
			b.WriteString(" (write lock)")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func sortedHolders(info rlock.Info) []rlock.Holder {
	hs := append([]rlock.Holder(nil), info.Holders...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].Field < hs[j].Field })
	return hs
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

// holdersText names the holders of a lock in one phrase:
// "<client>:<owner> (count 1)".
func holdersText(info rlock.Info) string {
	hs := sortedHolders(info)
	if len(hs) == 0 {
		return "nobody"
	}
	parts := make([]string, len(hs))
	for i, h := range hs {
		id := h.Field
		if h.ClientID != "" {
			id = "client " + h.ClientID + " owner " + strconv.FormatInt(h.OwnerID, 10)
		}
		parts[i] = fmt.Sprintf("%s (count %d)", id, h.Count)
	}
	return strings.Join(parts, ", ")
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
		l := c.locks.Lock(name)
		ctx, cancel := opCtx(context.Background())
		info, ierr := l.Inspect(ctx)
		held, err := l.ForceUnlock(ctx)
		cancel()
		switch {
		case err != nil:
			g.errorf("%s: force unlock failed: %v", name, err)
			if ec := errorCode(err); ec == exitUnavailable || code == exitOK {
				code = ec
			}
		case held && ierr == nil && len(info.Holders) > 0:
			fmt.Fprintf(g.stdout, "%s: was held by %s; force-unlocked\n", name, holdersText(info))
		case held:
			fmt.Fprintf(g.stdout, "%s: was held; force-unlocked\n", name)
		default:
			fmt.Fprintf(g.stdout, "%s: was not locked\n", name)
		}
	}
	return code
}
