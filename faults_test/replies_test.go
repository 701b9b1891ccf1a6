package faults_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/scripts"
)

// hostileReply is a reply no command of this library expects, as the
// server itself sends it (to Args), handed out in place of another
// command's with redistest.Replace.
type hostileReply struct {
	name string
	args []string
}

// lua is the reply of a script returning expr.
func lua(name, expr string) hostileReply {
	return hostileReply{name, []string{"EVAL", "return " + expr, "0"}}
}

// hostileReplies are well-formed replies of every kind: the wrong type,
// the right type with the wrong length or range, RESP3 kinds no script
// returns, and the errors the fault matrix does not already inject (it
// has BUSY, TRYAGAIN, LOADING, CLUSTERDOWN and MASTERDOWN).
var hostileReplies = []hostileReply{
	lua("null", "false"),
	lua("int_0", "0"),
	lua("int_1", "1"),
	lua("int_2", "2"),
	lua("int_-1", "-1"),
	lua("int_-2", "-2"),
	{"int_max", []string{"EVAL", "redis.call('set', KEYS[1], '9223372036854775806') return redis.call('incr', KEYS[1])", "1", "hostile:int"}},
	{"int_min", []string{"EVAL", "redis.call('set', KEYS[1], '-9223372036854775807') return redis.call('decr', KEYS[1])", "1", "hostile:int"}},
	lua("bulk", "'garbage'"),
	lua("bulk_number", "'12345'"),
	lua("bulk_empty", "''"),
	lua("bulk_1MiB", "string.rep('x', 1048576)"),
	lua("status_OK", "{ok='OK'}"),
	lua("status_FENCED", "{ok='FENCED'}"),
	lua("status_HELD", "{ok='HELD'}"),
	lua("status_other", "{ok='QUEUED'}"),
	lua("array_empty", "{}"),
	lua("array_1", "{1}"),
	lua("array_2", "{1, 2}"),
	lua("array_2_neg", "{-1, -1}"),
	lua("array_3", "{1, 2, 3}"),
	lua("array_4", "{1, 2, 3, 4}"),
	lua("array_4_neg", "{-1, -1, -1, -1}"),
	lua("array_9", "{1, 2, 3, 4, 5, 6, 7, 8, 9}"),
	lua("array_strings", "{'a', 'b'}"),
	lua("array_nested", "{{1}, {}}"),
	lua("array_mixed", "{1, 'x', {ok='OK'}}"),
	lua("lua_true", "true"), // Redis 7.0 sends the integer 1
	lua("double", "{double=3.5}"),
	lua("map", "{map={a=1, b='x'}}"),
	lua("set", "{set={a=true}}"),
	lua("err_ERR", "redis.error_reply('ERR hostile')"),
	lua("err_no_code", "redis.error_reply('hostile')"),
	lua("err_WRONGTYPE", "redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')"),
	lua("err_NOSCRIPT", "redis.error_reply('NOSCRIPT No matching script. Please use EVAL.')"),
	lua("err_NOPERM", "redis.error_reply('NOPERM this user has no permissions to run the evalsha command')"),
	lua("err_READONLY", "redis.error_reply('READONLY You can not write against a read only replica.')"),
	lua("err_OOM", "redis.error_reply('OOM command not allowed when used memory > maxmemory.')"),
	lua("err_MOVED", "redis.error_reply('MOVED 1 127.0.0.1:1')"),
	lua("err_ASK", "redis.error_reply('ASK 1 127.0.0.1:1')"),
}

// inFormat reports whether reply (a name of hostileReplies) has a form
// that script gives in scenario (see each script's Replies). Any other
// reply to a script that ran must be settled: the run then goes as a
// clean one. Error replies are not of this test's after_run cases.
func inFormat(reply, script, scenario string) bool {
	acquire := script == "acquire" || script == "read_acquire" || script == "write_acquire" || script == "fair_acquire"
	unlock := script == "unlock" || script == "read_unlock" || script == "write_unlock" || script == "fair_unlock"
	switch reply {
	case "int_0", "int_1", "int_2", "int_-1", "int_-2", "int_max", "int_min", "lua_true":
		return true // every script replies integers
	case "array_1": // {c}: a lock call refused, the count being c
		return acquire || unlock
	case "array_2": // {n, v}: a fenced grant, a partial read unlock
		return script == "acquire" && scenario == "Fenced" || script == "read_unlock"
	case "status_HELD":
		return acquire
	case "status_FENCED":
		return strings.HasPrefix(script, "sem_") || strings.HasPrefix(script, "psem_") && script != "psem_query" || script == "latch_update"
	}
	return false
}

// results are what a scenario's calls returned, in order: each value
// (durations and ids by whether they are set) and whether it failed.
type results struct {
	out []string
}

func (r *results) e(err error) { r.out = append(r.out, outcome(err)) }

func (r *results) v(v any, err error) {
	r.out = append(r.out, fmt.Sprintf("%s %s", show(v), outcome(err)))
}

func (r *results) v3(v any, ok bool, err error) {
	r.out = append(r.out, fmt.Sprintf("%s %v %s", show(v), ok, outcome(err)))
}

func outcome(err error) string {
	if err != nil {
		return "failed"
	}
	return "ok"
}

func show(v any) string {
	switch v := v.(type) {
	case time.Duration:
		return fmt.Sprint(v > 0)
	case string:
		return fmt.Sprint(v != "")
	case []string:
		return fmt.Sprint(len(v))
	}
	return fmt.Sprint(v)
}

// replyScenario is a run of one kind's operations on c by one goroutine
// (one owner). o is another, fault-free client of the same server. Its
// errors are not checked: under a hostile reply any outcome but a panic
// or a hang is allowed.
type replyScenario struct {
	name string
	opts []rlock.Option
	run  func(ctx context.Context, c, o *rlock.Client, name string, r *results)
	// timed: the scenario's commands depend on timing (a renewal, a
	// wait), so its k-th command may not come in every run.
	timed bool
}

var replyScenarios = []replyScenario{
	{name: "Lock", run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		l := c.Lock(name)
		r.e(l.Lock(ctx))
		r.v(l.TryLock(ctx, 0, 5*time.Second))
		r.v(l.HoldCount(ctx))
		r.v(l.RemainTTL(ctx))
		r.v(l.IsLocked(ctx))
		r.v(l.IsHeld(ctx))
		r.e(l.Unlock(ctx))
		r.e(l.Unlock(ctx))
		r.e(l.Lock(ctx))
		r.v(l.ForceUnlock(ctx))
	}},
	{name: "LockWait", timed: true, run: func(ctx context.Context, c, o *rlock.Client, name string, r *results) {
		r.e(o.Lock(name).LockLease(ctx, 150*time.Millisecond))
		l := c.Lock(name)
		if ok, _ := l.TryLock(ctx, 2*time.Second, time.Second); ok {
			r.e(l.Unlock(ctx))
		}
	}},
	{name: "Watchdog", timed: true, opts: []rlock.Option{rlock.WithWatchdogTimeout(300 * time.Millisecond)}, run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		l := c.Lock(name)
		if l.Lock(ctx) != nil {
			return
		}
		// Held past two renewals (every 100 ms), or until lost.
		hc, err := l.HoldContext(ctx)
		if err == nil {
			select {
			case <-hc.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
		r.e(l.Unlock(ctx))
	}},
	{name: "ReadWrite", run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		rw := c.ReadWriteLock(name)
		rl, w := rw.ReadLock(), rw.WriteLock()
		r.e(rl.Lock(ctx))
		r.v(rl.TryLock(ctx, 0, 5*time.Second))
		r.v(rl.HoldCount(ctx))
		r.e(rl.Unlock(ctx))
		r.e(rl.Unlock(ctx))
		r.e(w.Lock(ctx))
		r.e(rl.Lock(ctx))
		r.v(w.RemainTTL(ctx))
		r.e(w.Unlock(ctx))
		r.e(rl.Unlock(ctx))
		r.e(rl.Lock(ctx))
		r.v(rl.ForceUnlock(ctx))
	}},
	{name: "Fenced", run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		l := c.FencedLock(name)
		r.v(l.LockAndGetToken(ctx))
		r.v3(l.TryLockAndGetToken(ctx, 0, 5*time.Second))
		r.v(l.Token(ctx))
		r.e(l.Unlock(ctx))
		r.e(l.Unlock(ctx))
		r.e(l.Lock(ctx))
		r.v(l.ForceUnlock(ctx))
	}},
	{name: "Spin", run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		l := c.SpinLock(name)
		r.e(l.Lock(ctx))
		r.e(l.Unlock(ctx))
		r.e(l.Lock(ctx))
		r.v(l.ForceUnlock(ctx))
	}},
	{name: "NonReentrant", run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		l := c.NonReentrantLock(name)
		r.e(l.Lock(ctx))
		r.v(l.TryLock(ctx, 0, 0))
		r.e(l.Unlock(ctx))
	}},
	{name: "Fair", run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		l := c.FairLock(name)
		r.e(l.Lock(ctx))
		r.v(l.TryLock(ctx, 0, 5*time.Second))
		r.e(l.Unlock(ctx))
		r.e(l.Unlock(ctx))
		r.e(l.Lock(ctx))
		r.v(l.ForceUnlock(ctx))
		n := c.NonReentrantFairLock(name + ":nr")
		r.e(n.Lock(ctx))
		r.v(n.TryLock(ctx, 0, 0))
		r.e(n.Unlock(ctx))
	}},
	{name: "FairWait", timed: true, run: func(ctx context.Context, c, o *rlock.Client, name string, r *results) {
		// Queued behind another client's hold until the wait ends: the
		// waiter leaves the queue.
		r.e(o.FairLock(name).LockLease(ctx, 2*time.Second))
		if ok, _ := c.FairLock(name).TryLock(ctx, 150*time.Millisecond, 0); ok {
			r.e(c.FairLock(name).Unlock(ctx))
		}
		r.v(o.FairLock(name).ForceUnlock(ctx))
	}},
	{name: "Semaphore", run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		s := c.Semaphore(name)
		r.v(s.TrySetPermits(ctx, 2))
		r.e(s.Acquire(ctx, 1))
		r.v(s.TryAcquire(ctx, 1, 0))
		r.v(s.AvailablePermits(ctx))
		r.e(s.Release(ctx, 2))
		r.e(s.AddPermits(ctx, -1))
		r.v(s.DrainPermits(ctx))
	}},
	{name: "PermitExpirable", run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		s := c.PermitExpirableSemaphore(name)
		r.v(s.TrySetPermits(ctx, 3))
		id, err := s.Acquire(ctx, 5*time.Second)
		r.v(id, err)
		id2, ok, err := s.TryAcquire(ctx, 0, 0)
		r.v3(id2, ok, err)
		ids, err := s.AcquireN(ctx, 1, 5*time.Second)
		r.v(ids, err)
		if id != "" {
			r.v(s.UpdateLeaseTime(ctx, id, 6*time.Second))
			r.v(s.LeaseTime(ctx, id))
			r.e(s.Release(ctx, id))
		}
		if id2 != "" {
			r.v(s.TryRelease(ctx, id2))
		}
		if len(ids) > 0 {
			r.v(s.TryReleaseN(ctx, ids))
		}
		r.v(s.AvailablePermits(ctx))
		r.v(s.AcquiredPermits(ctx))
		r.e(s.SetPermits(ctx, 4))
		r.e(s.AddPermits(ctx, 1))
	}},
	{name: "Latch", run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		l := c.CountDownLatch(name)
		r.v(l.TrySetCount(ctx, 2))
		r.e(l.CountDown(ctx))
		r.v(l.Count(ctx))
		r.e(l.CountDown(ctx))
		r.v(l.AwaitTimeout(ctx, 100*time.Millisecond))
		r.v(l.Delete(ctx))
	}},
	{name: "RedLock", timed: true, run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		g := rlock.NewRedLock(c.Lock(name+":1"), c.Lock(name+":2"), c.Lock(name+":3"))
		r.e(g.Lock(ctx))
		r.v(g.IsHeld(ctx))
		r.e(g.Unlock(ctx))
	}},
	{name: "MultiLock", timed: true, run: func(ctx context.Context, c, _ *rlock.Client, name string, r *results) {
		rw := c.ReadWriteLock(name + ":rw")
		g := rlock.NewMultiLock(c.Lock(name+":1"), rw.ReadLock(), c.FencedLock(name+":f"))
		r.v(g.TryLock(ctx, 0, 2*time.Second))
		r.e(g.Unlock(ctx))
	}},
}

// TestHostileReplies: no reply of the server crashes the process or hangs
// a call. Each case replaces the reply to the k-th command a scenario
// sends (every k of a clean run) with a reply of another kind, as the
// server sends it: no panic, on the caller's goroutine or in the
// background; the scenario returns; the client closes. The command does
// not run ("instead"), or, for a reply that no script gives, runs with
// its reply replaced ("after_run"): then, when the command was a script,
// the client settles it as a lost reply (or, for an idempotent one, sends
// it again), every call returns what it returns in a clean run, and the
// run leaves in Redis exactly what a clean run leaves. (A script answered
// so that did not run fails: whatever answers so would most likely answer
// so again; the scenario then goes another way.)
func TestHostileReplies(t *testing.T) {
	srv := redistest.Standalone(t)
	ctx := context.Background()
	rc, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	// Every script loaded, so that a run sends no EVAL after a NOSCRIPT
	// and its k-th command is the same in every run (err_NOSCRIPT tests
	// that path).
	for _, s := range allScripts {
		require.NoError(t, rc.Do(ctx, rc.B().ScriptLoad().Script(s.Text()).Build()).Error())
	}
	replies := make([]rueidis.RedisResult, len(hostileReplies))
	for i, h := range hostileReplies {
		replies[i] = redistest.Answer(ctx, rc, h.args...)
		_, err := replies[i].ToMessage()
		_, isRedis := rueidis.IsRedisErr(err)
		switch {
		case strings.HasPrefix(h.name, "err_"):
			require.True(t, isRedis && !rueidis.IsRedisNil(err), "%s is an error reply: %v", h.name, err)
		case h.name == "null":
			require.True(t, rueidis.IsRedisNil(err), "null is a null reply: %v", err)
		default:
			require.NoError(t, err, h.name)
		}
	}
	// The RESP3 kinds arrive as such (a RESP2 server would flatten them).
	m, _ := replies[indexOf("map")].ToMessage()
	require.True(t, m.IsMap(), "a RESP3 map")
	d, _ := replies[indexOf("double")].ToMessage()
	_, err = d.AsFloat64()
	require.NoError(t, err, "a RESP3 double")

	// The other service of LockWait and FairWait, without faults.
	o, err := rlock.New(rc)
	require.NoError(t, err)
	defer func() { require.NoError(t, o.Close()) }()
	var seq atomic.Int64
	// The cases run at once, up to 12 at a time whatever -parallel is
	// (most of their time is spent waiting: on a call's ctx, a back-off):
	// one after another they would take minutes.
	limit := make(chan struct{}, 12)
	var scenarios sync.WaitGroup
	for _, sc := range replyScenarios {
		scenarios.Go(func() {
			t.Run(sc.name, func(t *testing.T) {
				// A clean run, to count the commands and see what it leaves.
				f := redistest.NewFaulty(rc)
				var mu sync.Mutex
				var sent []string
				// Every command, as the Replace rule counts them (a
				// DoMulti's one by one), when it is sent.
				f.Count(func(args []string) bool {
					mu.Lock()
					defer mu.Unlock()
					sent = append(sent, scriptName(args))
					return false
				})
				all := func() int {
					mu.Lock()
					defer mu.Unlock()
					return len(sent)
				}
				limit <- struct{}{}
				clean := runReplyCase(t, f, o, sc, fmt.Sprintf("hostile%06d", seq.Add(1)), all)
				<-limit
				n := clean.commands
				require.Positive(t, n, "the scenario sends commands")
				mu.Lock()
				t.Logf("a clean run sends %d commands: %s; leaves %v", n, strings.Join(sent, " "), clean.left)
				mu.Unlock()
				var cases sync.WaitGroup
				for k := 1; k <= n; k++ {
					for i, h := range hostileReplies {
						// Each reply in place of the command's; a reply no
						// script gives also after the command ran.
						for _, ran := range []bool{false, true} {
							if ran && (strings.HasPrefix(h.name, "err_") || inFormat(h.name, "", "")) {
								continue // a lie of the server's own form, which no client can tell
							}
							how := "instead"
							if ran {
								how = "after_run"
							}
							cases.Go(func() {
								limit <- struct{}{}
								defer func() { <-limit }()
								t.Run(fmt.Sprintf("%d/%s/%s", k, h.name, how), func(t *testing.T) {
									hostileCase(t, rc, o, sc, clean, k, h.name, replies[i], ran, fmt.Sprintf("hostile%06d", seq.Add(1)))
								})
							})
						}
					}
				}
				cases.Wait()
			})
		})
	}
	scenarios.Wait()
}

// hostileCase runs sc with the reply to its k-th command replaced by
// reply (named name), the command run or not (ran), and checks the run
// against the clean one.
func hostileCase(t *testing.T, rc rueidis.Client, o *rlock.Client, sc replyScenario, clean replyCase, k int, name string, reply rueidis.RedisResult, ran bool, obj string) {
	f := redistest.NewFaulty(rc)
	var cmds atomic.Int64
	var script atomic.Value // the script's name, when the command is one
	script.Store("")
	f.Inject(redistest.Rule{Fault: redistest.Replace, Reply: reply, Ran: ran, Match: func(args []string) bool {
		if cmds.Add(1) != int64(k) {
			return false
		}
		if strings.EqualFold(args[0], "EVALSHA") {
			script.Store(scriptName(args))
		}
		return true
	}})
	got := runReplyCase(t, f, o, sc, obj, nil)
	if sc.timed {
		return
	}
	require.Zero(t, f.Pending(), "command %d of a clean run was never sent", k)
	if sn := script.Load().(string); ran && sn != "" && !inFormat(name, sn, sc.name) {
		require.Equal(t, clean.left, got.left, "a script call that ran, answered %s, is settled: the run ends as a clean one", name)
		require.Equal(t, clean.results, got.results, "a script call that ran, answered %s, is settled: every call returns what it returns in a clean run", name)
	}
}

var allScripts = []*scripts.Script{scripts.Acquire, scripts.Unlock, scripts.ForceUnlock, scripts.Renew, scripts.Fence,
	scripts.ReadAcquire, scripts.ReadUnlock, scripts.WriteAcquire, scripts.WriteUnlock, scripts.RenewRead, scripts.ReadLocked, scripts.Expire,
	scripts.FairAcquire, scripts.FairUnlock, scripts.FairCancel, scripts.FairForceUnlock,
	scripts.SyncFence, scripts.SemAcquire, scripts.SemUpdate, scripts.PsemAcquire, scripts.PsemRelease, scripts.PsemUpdate, scripts.PsemQuery, scripts.LatchUpdate}

// scriptName names a command for the log: a script by its file.
func scriptName(args []string) string {
	if len(args) > 1 && strings.EqualFold(args[0], "EVALSHA") {
		for _, s := range allScripts {
			if s.SHA1() == args[1] {
				return s.String()
			}
		}
	}
	return args[0]
}

func indexOf(name string) int {
	for i, h := range hostileReplies {
		if h.name == name {
			return i
		}
	}
	panic(name)
}

// replyCase is what a run of a scenario did: the commands it sent (when
// counted) and the keys of its objects it left (leftKeys).
type replyCase struct {
	commands int
	results  []string
	left     []string
}

// runReplyCase runs sc with a client through f and closes it, failing
// on a panic or when either takes too long. With count, it reports the
// commands the client sent during the scenario.
func runReplyCase(t *testing.T, f *redistest.Faulty, o *rlock.Client, sc replyScenario, name string, count func() int) replyCase {
	t.Helper()
	opts := append([]rlock.Option{rlock.WithCommandTimeout(time.Second)}, sc.opts...)
	c, err := rlock.New(f, opts...)
	require.NoError(t, err)
	before := 0
	if count != nil {
		before = count()
	}
	var res results
	ran := make(chan any, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ran <- fmt.Sprintf("%v\n%s", p, debug.Stack())
				return
			}
			ran <- nil
		}()
		sc.run(ctx, c, o, name, &res)
	}()
	select {
	case p := <-ran:
		require.Nil(t, p, "the scenario panicked")
	case <-time.After(20 * time.Second):
		t.Fatalf("the scenario did not return in 20 s (its calls have a 2 s ctx)")
	}
	out := replyCase{results: res.out}
	if count != nil {
		out.commands = count() - before
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatalf("Close did not return in 20 s")
	}
	out.left = leftKeys(t, f.Client, name, c.ID())
	return out
}

// leftKeys describes the Redisson-visible keys that hold name (this
// library's own goredisson_ keys aside): each key's name with name and the
// client's id replaced, its type, its content (a string's value, a hash's
// values, a collection's size) and whether it has a TTL. Then it deletes
// every key of name.
func leftKeys(t *testing.T, rc rueidis.Client, name, clientID string) []string {
	ctx := context.Background()
	var keys []string
	for cursor := uint64(0); ; {
		e, err := rc.Do(ctx, rc.B().Scan().Cursor(cursor).Match("*"+name+"*").Count(1000).Build()).AsScanEntry()
		require.NoError(t, err)
		keys = append(keys, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	owner := regexp.MustCompile(regexp.QuoteMeta(clientID) + `:\d+`)
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, "goredisson_") || strings.HasPrefix(k, name+":") && strings.Contains(k, "goredisson") {
			continue
		}
		typ, err := rc.Do(ctx, rc.B().Type().Key(k).Build()).ToString()
		require.NoError(t, err)
		var content string
		switch typ {
		case "none":
			continue // gone since the scan
		case "string":
			content, _ = rc.Do(ctx, rc.B().Get().Key(k).Build()).ToString()
		case "hash":
			vals, _ := rc.Do(ctx, rc.B().Hvals().Key(k).Build()).AsStrSlice()
			slices.Sort(vals)
			content = strings.Join(vals, ",")
		case "list":
			n, _ := rc.Do(ctx, rc.B().Llen().Key(k).Build()).AsInt64()
			content = fmt.Sprint(n)
		case "zset":
			n, _ := rc.Do(ctx, rc.B().Zcard().Key(k).Build()).AsInt64()
			content = fmt.Sprint(n)
		}
		ttl, _ := rc.Do(ctx, rc.B().Pttl().Key(k).Build()).AsInt64()
		k = strings.ReplaceAll(owner.ReplaceAllString(k, "OWNER"), name, "NAME")
		out = append(out, fmt.Sprintf("%s %s=%s ttl:%v", k, typ, content, ttl > 0))
	}
	slices.Sort(out)
	// The case is over: its keys go, so that the keyspace the next cases
	// scan does not grow with every case.
	for _, k := range keys {
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(k).Build()).Error())
	}
	return out
}
