package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/goredisson/locks/internal/hold"
	"github.com/goredisson/locks/scripts"
)

// forceLatchTTL is how long a force unlock's latch keeps its result: longer
// than any resend of the call (the budget) can come.
var forceLatchTTL = strconv.FormatInt(FenceTTL.Milliseconds(), 10)

// ForceDelete runs a force-unlock script (see scripts/force_unlock.lua):
// keys(latch) builds its keys around a fresh latch key, args its ARGV
// before the latch TTL, which is appended, and tail follows it. The script keeps its result in
// the latch, so it is resent, with the same latch, both when Redis refused
// it and when its reply was lost, until the budget runs out. It reports
// whether the lock existed.
func (e *Engine) ForceDelete(ctx context.Context, s *scripts.Script, name string, keys func(latch string) []string, args []string, tail ...string) (bool, error) {
	if e.Closed() {
		return false, hold.ErrClosed
	}
	k := keys(NewFence(name))
	a := append(append(args[:len(args):len(args)], forceLatchTTL), tail...)
	deadline := time.Now().Add(e.Budget)
	var bo Backoff
	for {
		r := e.X.Run(ctx, s, k, a)
		switch r.Class {
		case Done:
			if n, ok := r.Integer(); ok {
				if r.Unsynced() {
					return n == 1, e.resync(ctx, name, r)
				}
				return n == 1, nil
			}
			// A reply the script never gives does not tell whether it
			// ran: as after a lost reply, send it again with the same
			// latch, which returns the result of a run that happened.
			r.Err = Unexpected(s, r)
		case Failed, Closed:
			return false, fmt.Errorf("rlock: %q: force unlock: %w", name, r.Err)
		}
		d := bo.Next()
		if time.Now().Add(d).After(deadline) {
			return false, fmt.Errorf("rlock: %q: force unlock: %w", name, r.Err)
		}
		if err := sleep(ctx, d); err != nil {
			return false, err
		}
	}
}
