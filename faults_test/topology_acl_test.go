package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// The least-privilege ACL of the whole lock family, per topology (the
// README's "Least-privilege ACL" section is these constants):
//
//   - familyKeys: lock names are arbitrary keys, next to the derived keys
//     (fence, token, rwlock_timeout, queue, timeout, semaphore timeouts);
//     familyChannels: every kind's channel prefix, nothing else;
//   - familyCommands: the scripts (EVALSHA, and EVAL after NOSCRIPT),
//     the commands they call (Redis checks each against the caller's
//     ACL), and the direct reads (IsLocked, IsHeld, HoldCount, RemainTTL,
//     Inspect, Count, AvailablePermits, Token) and rueidis' PING;
//   - classic pub/sub (standalone, Sentinel): PUBLISH from the scripts,
//     SUBSCRIBE to wait, PUBSUB NUMSUB for Inspect;
//   - cluster: sharded pub/sub (SPUBLISH, SSUBSCRIBE, PUBSUB
//     SHARDNUMSUB, which rlock.New also uses to detect it), CLUSTER SLOTS
//     (rueidis' slot map; CLUSTER SHARDS on Redis 8), ASKING (a slot in
//     migration), and WAIT and INFO (replica sync);
//   - Sentinel data nodes: WAIT and INFO (replica sync), ROLE (rueidis
//     checks the master it was given);
//   - the Sentinels themselves (a user of their own): the lookups rueidis
//     makes and its subscription to the Sentinels' events.
const (
	familyKeys     = "~*"
	familyChannels = "resetchannels &redisson_lock__channel:* &redisson_rwlock:* &redisson_sc:* &redisson_countdownlatch__channel__*"
	familyCommands = "-@all +evalsha +eval " +
		"+get +set +del +exists +pttl +pexpire +incr +incrby +decr +decrby " +
		"+hget +hset +hdel +hexists +hincrby +hlen +hkeys +hgetall " +
		"+lindex +lrange +lpop +rpush +lrem " +
		"+zadd +zrem +zscore +zincrby +zcount +zrange +zrangebyscore +zremrangebyscore +ping"
	classicPubSub   = "+publish +subscribe +pubsub|numsub"
	clusterEntries  = "+spublish +ssubscribe +pubsub|shardnumsub +cluster|slots +asking +wait +info"
	sentinelEntries = "+wait +info +role"
	sentinelUserACL = "resetchannels &+sentinel &+slave &-sdown &+sdown &+switch-master &+reboot -@all " +
		"+sentinel|get-master-addr-by-name +sentinel|sentinels +subscribe +unsubscribe +ping"
)

// dataBackground and sentinelBackground are the entries only rueidis'
// background work uses, on the data nodes and on the Sentinels: without
// one the workload works, and the server logs the denied command.
var (
	dataBackground = map[string]string{
		"+ping": "rueidis' health check of an idle connection",
	}
	sentinelBackground = map[string]string{
		"+subscribe":   "rueidis' subscription to the Sentinels' events (+switch-master and others), which makes a failover known at once",
		"+unsubscribe": "rueidis drops that subscription before it subscribes again",
		"+ping":        "rueidis' health check of an idle connection",
	}
)

// aclUnnamed are the entries whose absence gives an error that cannot name
// them, and why.
var aclUnnamed = map[string]string{
	"+asking": "rueidis v1.0.79 ignores the reply to the ASKING it sends after an ASK redirect and follows the redirect again " +
		"until the call's context ends: the caller gets ErrTimeout once the budget is spent, and the server logs the denied ASKING",
}

// secureTopology is a TLS cluster or Sentinel group whose "locker" user
// has exactly acl on the data nodes (and sentinelACL on the Sentinels).
type secureTopology struct {
	data, sentinels  []*redistest.Server
	acl, sentinelACL string
	// entries are the ACL entries of this topology to prove needed one
	// by one, with the servers they are removed from.
	entries []aclEntry
	option  func() rueidis.ClientOption
	// extra runs after the family workload (the cluster's slot move).
	extra func(ctx context.Context, a, b *rlock.Client) error
	runs  int
}

type aclEntry struct {
	rule       string
	servers    []*redistest.Server
	background string // why only background work needs it, if so
}

func secureMaterial(t *testing.T, dataACL, sentinelACL string) *redistest.Secure {
	m, err := redistest.NewTLSMaterial(t.TempDir())
	require.NoError(t, err)
	return &redistest.Secure{
		TLS: m, AdminPassword: adminPassword,
		Users:         []string{"user locker on >" + lockerPassword + " " + dataACL},
		SentinelUsers: []string{"user locker on >" + lockerPassword + " " + sentinelACL},
	}
}

func entries(rules string, servers []*redistest.Server, background map[string]string) []aclEntry {
	var out []aclEntry
	for _, r := range strings.Fields(rules) {
		if strings.HasPrefix(r, "+") {
			out = append(out, aclEntry{r, servers, background[r]})
		}
	}
	return out
}

func secureCluster(t *testing.T) *secureTopology {
	acl := strings.Join([]string{familyChannels, familyKeys, familyCommands, clusterEntries}, " ")
	c := redistest.ClusterWith(t, redistest.ClusterConfig{Masters: 3, ReplicasPerMaster: 1, Secure: secureMaterial(t, acl, "")})
	st := &secureTopology{data: c.Nodes(), acl: acl, option: func() rueidis.ClientOption {
		o := c.TLSClientOption("locker", lockerPassword)
		o.DisableCache = true
		return o
	}}
	st.entries = entries(clusterEntries, st.data, dataBackground)
	// A query of a lock whose slot is being migrated and which is on
	// neither side yet: the source answers ASK, rueidis sends ASKING. (A
	// script on such a name gets TRYAGAIN until the move ends, as
	// Redisson's does.) Then the lock is taken and released on the new
	// master.
	st.extra = func(ctx context.Context, a, b *rlock.Client) error {
		slot := redistest.Slot("{fam}")
		from, err := c.MasterForSlot(ctx, slot)
		if err != nil {
			return err
		}
		masters, err := c.Masters(ctx)
		if err != nil {
			return err
		}
		to := masters[0]
		if to == from {
			to = masters[1]
		}
		finish, err := c.BeginMoveSlot(ctx, slot, to)
		if err != nil {
			return err
		}
		l := a.Lock(fmt.Sprintf("{fam}:moving-%d", time.Now().UnixNano()))
		locked, err := l.IsLocked(ctx)
		if ferr := finish(ctx); ferr != nil {
			return ferr
		}
		if err != nil || locked {
			return fmt.Errorf("IsLocked in a migrating slot: %v, %w", locked, err)
		}
		if err := l.LockLease(ctx, time.Minute); err != nil {
			return fmt.Errorf("after a slot move: %w", err)
		}
		return l.Unlock(ctx)
	}
	return st
}

func secureSentinel(t *testing.T) *secureTopology {
	acl := strings.Join([]string{familyChannels, familyKeys, familyCommands, classicPubSub, sentinelEntries}, " ")
	g := redistest.SentinelWith(t, redistest.SentinelConfig{Secure: secureMaterial(t, acl, sentinelUserACL)})
	st := &secureTopology{data: g.DataNodes(), sentinels: g.Sentinels(), acl: acl, sentinelACL: sentinelUserACL,
		option: func() rueidis.ClientOption {
			o := g.TLSClientOption("locker", lockerPassword, "locker", lockerPassword)
			o.DisableCache = true
			return o
		}}
	// The family's commands, proved here, on the smaller set-up.
	st.entries = append(entries(sentinelEntries+" "+familyCommands+" "+classicPubSub, st.data, dataBackground),
		entries(sentinelUserACL, st.sentinels, sentinelBackground)...)
	return st
}

func (st *secureTopology) all() []*redistest.Server {
	return append(append([]*redistest.Server(nil), st.data...), st.sentinels...)
}

// denied is every node's ACL LOG.
func (st *secureTopology) denied(t *testing.T) []string {
	var out []string
	for _, s := range st.all() {
		out = append(out, aclLog(t, s)...)
	}
	return out
}

func (st *secureTopology) reset(t *testing.T) {
	for _, s := range st.all() {
		do(t, s, "ACL", "LOG", "RESET")
	}
	for _, s := range st.data {
		do(t, s, "SCRIPT", "FLUSH") // the first EVALSHA gets NOSCRIPT: EVAL is used too
	}
}

// run creates two lock clients and runs the family workload and the
// topology's extra step; a client that cannot be created is an error too.
// Each run has names of its own (in the slot of "{fam}"): a failed run may
// leave a hold behind until its lease ends.
func (st *secureTopology) run(t *testing.T, ctx context.Context, renewal bool) error {
	var cs []*rlock.Client
	for range 2 {
		rc, err := rueidis.NewClient(st.option())
		if err != nil {
			return fmt.Errorf("rueidis.NewClient: %w", err)
		}
		t.Cleanup(rc.Close)
		c, err := rlock.New(rc, rlock.WithWatchdogTimeout(workloadWatchdog))
		if err != nil {
			return fmt.Errorf("rlock.New: %w", err)
		}
		t.Cleanup(func() { _ = c.Close() })
		cs = append(cs, c)
	}
	st.runs++
	if err := familyWorkload(ctx, cs[0], cs[1], fmt.Sprintf("{fam}:%d:", st.runs), renewal); err != nil {
		return err
	}
	if st.extra != nil {
		return st.extra(ctx, cs[0], cs[1])
	}
	return nil
}

// orphans lists the lock hashes on the data nodes that have no TTL: locks
// that would never go away.
func (st *secureTopology) orphans(t *testing.T) []string {
	var out []string
	for _, s := range st.data {
		if role := do(t, s, "ROLE"); !isMaster(role) {
			continue
		}
		msg := do(t, s, "KEYS", "*")
		keys, err := msg.AsStrSlice()
		require.NoError(t, err)
		for _, k := range keys {
			tm := do(t, s, "TYPE", k)
			typ, _ := tm.ToString()
			if typ == "hash" && doInt(t, s, "PTTL", k) == -1 {
				out = append(out, s.Name+": "+k)
			}
		}
	}
	return out
}

func testSecureTopology(t *testing.T, st *secureTopology) {
	ctx := context.Background()
	t.Run("works", func(t *testing.T) {
		st.reset(t)
		require.NoError(t, st.run(t, ctx, true))
		assert.Empty(t, st.denied(t), "the servers denied commands of the lock user")
	})
	t.Run("soak slice", func(t *testing.T) { st.soakSlice(t, 8*time.Second) })
	for _, e := range st.entries {
		t.Run("without "+e.rule, func(t *testing.T) {
			st.reset(t)
			for _, s := range e.servers {
				do(t, s, "ACL", "SETUSER", "locker", "-"+e.rule[1:])
			}
			defer func() {
				for _, s := range e.servers {
					do(t, s, "ACL", "SETUSER", "locker", e.rule)
				}
			}()
			start := time.Now()
			// Without the renewal wait (1.3 s a run): the renewal's
			// commands are all in the acquire's and the unlock's too.
			err := st.run(t, ctx, false)
			took := time.Since(start)
			denied := st.denied(t)
			t.Logf("without %s: after %v: error: %v; denied: %v", e.rule, took.Round(time.Millisecond), err, denied)
			want := "command " + e.rule[1:] + " (locker)"
			if why := e.background; why != "" {
				require.NoError(t, err, "without %s (%s)", e.rule, why)
				eventually(t, 5*time.Second, "the denied "+e.rule[1:]+" in ACL LOG", func() bool { return slices.Contains(st.denied(t), want) })
				return
			}
			require.Error(t, err, "%s is not needed", e.rule)
			if why, ok := aclUnnamed[e.rule]; ok {
				assert.ErrorIs(t, err, rlock.ErrTimeout, why)
				assert.Contains(t, denied, want, why)
			} else {
				// Redis' NOPERM names 'cmd' (or 'cmd|sub'); the library's
				// naming of a command inside a script says CMD as a word.
				named := regexp.MustCompile(`'` + regexp.QuoteMeta(e.rule[1:]) + `'|\b` + regexp.QuoteMeta(strings.ToUpper(strings.ReplaceAll(e.rule[1:], "|", " "))) + `\b`)
				assert.Regexp(t, named, err.Error(), "the error does not name %s", e.rule[1:])
			}
			assert.Empty(t, st.orphans(t), "a lock without a TTL was left behind")
		})
	}
}

// The family's least-privilege ACL user runs every kind's basic scenario
// over TLS on a cluster (with a slot migration) and on a Sentinel group,
// the servers deny nothing, and without any one of the topology's entries
// the user gets an error naming it, never a hang, and no lock is left
// without a TTL.
func TestSecureClusterACL(t *testing.T) { testSecureTopology(t, secureCluster(t)) }

func TestSecureSentinelACL(t *testing.T) { testSecureTopology(t, secureSentinel(t)) }

func isMaster(role rueidis.RedisMessage) bool {
	r, err := role.ToArray()
	if err != nil || len(r) == 0 {
		return false
	}
	s, _ := r[0].ToString()
	return s == "master"
}

// soakSlice runs goroutines of two lock clients of the ACL user over TLS
// for d, locking a few names of several kinds with every style, and checks
// in process that no two holders of a name overlap (the leases are long
// and nothing fails here: any overlap is a violation).
func (st *secureTopology) soakSlice(t *testing.T, d time.Duration) {
	st.reset(t)
	var cs []*rlock.Client
	for range 2 {
		rc := newRueidis(t, st.option())
		cs = append(cs, newLocks(t, rc, rlock.WithWatchdogTimeout(2*time.Second)))
	}
	const names = 3
	type kind struct {
		name string
		get  func(c *rlock.Client, n string) rlock.Locker
	}
	kinds := []kind{
		{"lock", func(c *rlock.Client, n string) rlock.Locker { return c.Lock(n) }},
		{"fair", func(c *rlock.Client, n string) rlock.Locker { return c.FairLock(n) }},
		{"write", func(c *rlock.Client, n string) rlock.Locker { return c.ReadWriteLock(n).WriteLock() }},
		{"fenced", func(c *rlock.Client, n string) rlock.Locker { return c.FencedLock(n) }},
	}
	holders := make([]atomic.Int64, names*len(kinds))
	var acquired, violations atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 7))
			octx := rlock.WithOwner(context.Background(), int64(100+g))
			for ctx.Err() == nil {
				k := rnd.IntN(len(kinds))
				n := rnd.IntN(names)
				l := kinds[k].get(cs[g%2], fmt.Sprintf("{soak}:%s:%d", kinds[k].name, n))
				var ok bool
				var err error
				switch rnd.IntN(4) {
				case 0:
					err, ok = l.Lock(octx), true
				case 1:
					err, ok = l.LockLease(octx, 10*time.Second), true
				case 2:
					ok, err = l.TryLock(octx, 2*time.Second, 10*time.Second)
				default:
					ok, err = l.TryLock(octx, 0, 0)
				}
				if err != nil {
					errs <- fmt.Errorf("%s acquire: %w", l.Name(), err)
					return
				}
				if !ok {
					continue
				}
				h := &holders[k*names+n]
				if !h.CompareAndSwap(0, int64(g+1)) {
					violations.Add(1)
				}
				acquired.Add(1)
				time.Sleep(time.Duration(rnd.IntN(500)) * time.Microsecond) // the critical section
				h.CompareAndSwap(int64(g+1), 0)
				if err := l.Unlock(octx); err != nil {
					errs <- fmt.Errorf("%s unlock: %w", l.Name(), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("soak slice: %d acquisitions in %v, %d violations", acquired.Load(), d, violations.Load())
	assert.Zero(t, violations.Load(), "two holders at once")
	assert.Greater(t, acquired.Load(), int64(500), "too few acquisitions")
	assert.Empty(t, st.denied(t), "the servers denied commands of the lock user")
}
