package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// ClusterConfig describes a Redis Cluster. Zero fields take the defaults.
type ClusterConfig struct {
	// Masters is the number of masters; default 3, the minimum redis-cli
	// accepts.
	Masters int
	// ReplicasPerMaster is the number of replicas of each master.
	ReplicasPerMaster int
	// NodeTimeout is cluster-node-timeout, which also bounds how fast a
	// failover happens; default 2s.
	NodeTimeout time.Duration
	// Args are extra redis-server arguments for every node.
	Args []string
	// Secure, when set, turns on TLS (client ports, the cluster bus,
	// replication) and logins on every node; see Secure.
	Secure *Secure
}

// DefaultClusterConfig is the cluster Cluster starts: 3 masters with one
// replica each.
func DefaultClusterConfig() ClusterConfig {
	return ClusterConfig{Masters: 3, ReplicasPerMaster: 1}
}

// RedisCluster is a Redis Cluster of local redis-server processes, created
// with redis-cli --cluster create. Topology queries (Masters, MasterForSlot,
// ...) ask the running nodes, so they follow failovers and resharding.
type RedisCluster struct {
	nodes   []*Server // in start order
	masters []string  // addresses of the masters at creation
	secure  *Secure
}

// StartCluster starts cfg.Masters*(1+cfg.ReplicasPerMaster) cluster-enabled
// nodes, joins them with redis-cli --cluster create, and waits until
// WaitHealthy succeeds (bounded by ctx, or one minute if ctx has no
// deadline). On error every node is closed.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*RedisCluster, error) {
	if cfg.Masters == 0 {
		cfg.Masters = 3
	}
	if cfg.Masters < 3 {
		return nil, fmt.Errorf("redistest: cluster needs at least 3 masters, got %d", cfg.Masters)
	}
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = 2 * time.Second
	}
	if _, err := exec.LookPath(cliBinary()); err != nil {
		return nil, fmt.Errorf("redistest: cluster: %s not found on PATH; %s: %w", cliBinary(), installHint, err)
	}
	if cfg.Secure != nil {
		if err := cfg.Secure.check(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := defaultTimeout(ctx, time.Minute)
	defer cancel()

	cfgs := make([]Config, cfg.Masters*(1+cfg.ReplicasPerMaster))
	for i := range cfgs {
		cfgs[i] = Config{
			Name:           fmt.Sprintf("cluster-node-%d", i),
			ClusterEnabled: true,
			Args: append([]string{
				"--cluster-node-timeout", strconv.FormatInt(cfg.NodeTimeout.Milliseconds(), 10),
			}, cfg.Args...),
		}
		if cfg.Secure != nil {
			cfgs[i] = cfg.Secure.node(cfgs[i], "--tls-cluster", "yes")
		}
	}
	nodes, err := startAll(ctx, cfgs, StartServer)
	if err != nil {
		return nil, fmt.Errorf("redistest: cluster: %w", err)
	}
	c := &RedisCluster{nodes: nodes, secure: cfg.Secure}
	fail := func(err error) (*RedisCluster, error) {
		return nil, errors.Join(fmt.Errorf("redistest: cluster: %w", err), c.Close())
	}

	args := append(append(cfg.Secure.cliAuth(), "--cluster", "create"), c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(cfg.ReplicasPerMaster), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cliBinary(), args...).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("%s %s: %w\n%s", cliBinary(), strings.Join(args, " "), err, tail(string(out), 30)))
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return fail(err)
	}
	masters, err := c.Masters(ctx)
	if err != nil {
		return fail(err)
	}
	for _, m := range masters {
		c.masters = append(c.masters, m.Addr)
	}
	return c, nil
}

// Nodes returns all nodes, running or not, in start order.
func (c *RedisCluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Addrs returns the addresses of all nodes, in start order.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// TLSAddrs returns the TLS addresses of all nodes, in start order ("" for
// each without Secure).
func (c *RedisCluster) TLSAddrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.TLSAddr
	}
	return addrs
}

// Node returns the node listening on addr (plain text or TLS), or nil.
func (c *RedisCluster) Node(addr string) *Server {
	for _, n := range c.nodes {
		if n.Addr == addr || (n.TLSAddr != "" && n.TLSAddr == addr) {
			return n
		}
	}
	return nil
}

// KillNode SIGKILLs the node at addr (see Server.Kill); Restart brings it
// back with its cluster identity.
func (c *RedisCluster) KillNode(addr string) error {
	n := c.Node(addr)
	if n == nil {
		return fmt.Errorf("redistest: cluster: no node at %s", addr)
	}
	return n.Kill()
}

// ClientOption returns options for a rueidis cluster client whose
// InitAddress is the running nodes among the masters at creation (in plain
// text, as the admin when Secure).
func (c *RedisCluster) ClientOption() rueidis.ClientOption {
	var addrs []string
	for _, a := range c.masters {
		if c.Node(a).Running() {
			addrs = append(addrs, a)
		}
	}
	o := rueidis.ClientOption{InitAddress: addrs}
	if c.secure != nil {
		o.Username, o.Password = "default", c.secure.AdminPassword
	}
	return o
}

// TLSClientOption returns options for a rueidis cluster client that logs
// in as user over TLS (trusting the CA, no client certificate) to the
// running masters at creation. It needs Secure.
func (c *RedisCluster) TLSClientOption(user, password string) rueidis.ClientOption {
	var addrs []string
	for _, a := range c.masters {
		if n := c.Node(a); n.Running() {
			addrs = append(addrs, n.TLSAddr)
		}
	}
	o := rueidis.ClientOption{InitAddress: addrs, Username: user, Password: password}
	if c.secure != nil {
		o.TLSConfig = c.secure.TLS.ClientConfig(false)
	}
	return o
}

// Client returns a new rueidis cluster client (see ClientOption) after
// applying opts. The caller must Close it.
func (c *RedisCluster) Client(opts ...func(*rueidis.ClientOption)) (rueidis.Client, error) {
	o := c.ClientOption()
	for _, f := range opts {
		f(&o)
	}
	cl, err := rueidis.NewClient(o)
	if err != nil {
		return nil, fmt.Errorf("redistest: cluster client for %v: %w", o.InitAddress, err)
	}
	return cl, nil
}

// Close closes every node; see Server.Close.
func (c *RedisCluster) Close() error { return closeAll(c.nodes) }

// Masters returns the running nodes that consider themselves masters.
func (c *RedisCluster) Masters(ctx context.Context) ([]*Server, error) {
	return c.withRole(ctx, "master")
}

// Replicas returns the running nodes that consider themselves replicas.
func (c *RedisCluster) Replicas(ctx context.Context) ([]*Server, error) {
	return c.withRole(ctx, "slave")
}

func (c *RedisCluster) withRole(ctx context.Context, role string) ([]*Server, error) {
	var out []*Server
	for _, n := range c.running() {
		me, _, err := clusterNodes(ctx, n)
		if err != nil {
			return nil, err
		}
		if me.flags[role] {
			out = append(out, n)
		}
	}
	return out, nil
}

// MasterForSlot returns the running master that, by its own view, serves
// slot (while a slot is migrating, that is the source node).
func (c *RedisCluster) MasterForSlot(ctx context.Context, slot uint16) (*Server, error) {
	for _, n := range c.running() {
		me, _, err := clusterNodes(ctx, n)
		if err != nil {
			return nil, err
		}
		if me.flags["master"] && me.owns(int(slot)) {
			return n, nil
		}
	}
	return nil, fmt.Errorf("redistest: cluster: no running master serves slot %d", slot)
}

// MasterForKey returns MasterForSlot(ctx, Slot(key)).
func (c *RedisCluster) MasterForKey(ctx context.Context, key string) (*Server, error) {
	return c.MasterForSlot(ctx, Slot(key))
}

// WaitHealthy waits until, on every running node, CLUSTER INFO says
// cluster_state:ok with all 16384 slots ok; every slot is served by exactly
// one running master; every running node knows every other running node,
// flags none of them as failing and agrees with them on roles and slot
// owners; and every running replica's replication link is up. Nodes that
// are not running (Kill) are ignored.
func (c *RedisCluster) WaitHealthy(ctx context.Context) error {
	return poll(ctx, "cluster not healthy", func() error { return c.checkHealthy(ctx) })
}

func (c *RedisCluster) checkHealthy(ctx context.Context) error {
	running := c.running()
	var owner [NumSlots]string
	self := make(map[string]nodeInfo, len(running))
	views := make(map[string][]nodeInfo, len(running))
	for _, n := range running {
		info, err := n.DoString(ctx, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384"} {
			if !strings.Contains(info, want+"\r\n") {
				return fmt.Errorf("%s: CLUSTER INFO lacks %s", n, want)
			}
		}
		me, view, err := clusterNodes(ctx, n)
		if err != nil {
			return err
		}
		self[n.Addr], views[n.Addr] = me, view
		if me.flags["master"] {
			for _, r := range me.slots {
				for s := r[0]; s <= r[1]; s++ {
					if owner[s] != "" {
						return fmt.Errorf("slot %d claimed by %s and %s", s, owner[s], n.Addr)
					}
					owner[s] = n.Addr
				}
			}
		} else if err := replicaLinkUp(ctx, n); err != nil {
			return err
		}
	}
	for s, a := range owner {
		if a == "" {
			return fmt.Errorf("slot %d is not served by a running master", s)
		}
	}
	for viewer, view := range views {
		known := make(map[string]nodeInfo, len(view))
		for _, l := range view {
			known[l.addr] = l
		}
		for _, n := range running {
			l, ok := known[n.Addr]
			switch {
			case !ok:
				return fmt.Errorf("%s does not know %s", viewer, n.Addr)
			case l.flags["fail"] || l.flags["fail?"] || l.flags["handshake"]:
				return fmt.Errorf("%s flags %s as %s", viewer, n.Addr, l.rawFlags)
			case l.flags["master"] != self[n.Addr].flags["master"]:
				return fmt.Errorf("%s sees %s as %s, it is %s", viewer, n.Addr, l.rawFlags, self[n.Addr].rawFlags)
			}
		}
		for _, l := range view {
			if !l.flags["master"] || l.flags["fail"] {
				continue
			}
			for _, r := range l.slots {
				for s := r[0]; s <= r[1]; s++ {
					if owner[s] != l.addr {
						return fmt.Errorf("%s thinks slot %d is served by %s, but it is %s", viewer, s, l.addr, owner[s])
					}
				}
			}
		}
	}
	return nil
}

// FailoverSlot fails the master serving slot over to one of its replicas
// with CLUSTER FAILOVER (a manual failover: the master stops taking
// writes until the replica has caught up, so none is lost), waits for
// WaitHealthy, and returns the new master.
func (c *RedisCluster) FailoverSlot(ctx context.Context, slot uint16) (*Server, error) {
	m, err := c.MasterForSlot(ctx, slot)
	if err != nil {
		return nil, err
	}
	mine, _, err := clusterNodes(ctx, m)
	if err != nil {
		return nil, err
	}
	var r *Server
	var seen []string
	for _, n := range c.running() {
		me, _, err := clusterNodes(ctx, n)
		if err != nil {
			return nil, err
		}
		seen = append(seen, fmt.Sprintf("%s %s %s of %s", n, me.id, me.rawFlags, me.masterID))
		if r == nil && me.flags["slave"] && me.masterID == mine.id {
			r = n
		}
	}
	if r == nil {
		return nil, fmt.Errorf("redistest: cluster: master %s (%s) of slot %d has no running replica: %s", m, mine.id, slot, strings.Join(seen, "; "))
	}
	tookOver := func() error {
		me, _, err := clusterNodes(ctx, r)
		if err != nil {
			return err
		}
		if !me.flags["master"] || !me.owns(int(slot)) {
			return fmt.Errorf("%s is %s", r, me.rawFlags)
		}
		return nil
	}
	// A manual failover the master does not complete within the
	// cluster's manual-failover timeout (5 s) is abandoned by the replica
	// ("Manual failover timed out", seen on a loaded 2-core machine): ask
	// again, up to three times, unless it took over meanwhile.
	for attempt := 1; ; attempt++ {
		if _, err := r.Do(ctx, "CLUSTER", "FAILOVER"); err != nil {
			if attempt == 1 || tookOver() != nil {
				return nil, fmt.Errorf("redistest: %s: CLUSTER FAILOVER: %w", r, err)
			}
		}
		actx, cancel := context.WithTimeout(ctx, 7*time.Second)
		err = poll(actx, "the replica did not take over", tookOver)
		cancel()
		if err == nil || attempt == 3 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	return r, c.WaitHealthy(ctx)
}

// MoveSlot migrates slot and its keys from its current master to the
// master to (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE in batches,
// SETSLOT NODE on all running masters), then waits for WaitHealthy.
func (c *RedisCluster) MoveSlot(ctx context.Context, slot uint16, to *Server) error {
	finish, err := c.BeginMoveSlot(ctx, slot, to)
	if err != nil {
		return err
	}
	return finish(ctx)
}

// BeginMoveSlot starts moving slot to the master to: it marks the slot
// IMPORTING on to and MIGRATING on its master, and stops there, so that
// commands on the slot get ASK (a key already gone from the source) or
// TRYAGAIN (a multi-key command whose keys are split) until finish
// migrates the keys and hands the slot over, as MoveSlot does.
func (c *RedisCluster) BeginMoveSlot(ctx context.Context, slot uint16, to *Server) (finish func(context.Context) error, err error) {
	from, err := c.MasterForSlot(ctx, slot)
	if err != nil {
		return nil, err
	}
	if from == to {
		return func(context.Context) error { return nil }, nil
	}
	fromID, err := from.DoString(ctx, "CLUSTER", "MYID")
	if err != nil {
		return nil, err
	}
	toID, err := to.DoString(ctx, "CLUSTER", "MYID")
	if err != nil {
		return nil, err
	}
	s := strconv.Itoa(int(slot))
	// MIGRATE speaks TLS when the cluster bus does.
	host, port, _ := strings.Cut(c.secure.clientAddr(to), ":")
	steps := []struct {
		node *Server
		args []string
	}{
		{to, []string{"CLUSTER", "SETSLOT", s, "IMPORTING", fromID}},
		{from, []string{"CLUSTER", "SETSLOT", s, "MIGRATING", toID}},
	}
	for _, st := range steps {
		if _, err := st.node.Do(ctx, st.args...); err != nil {
			return nil, fmt.Errorf("redistest: move slot %d: %s: %w", slot, strings.Join(st.args, " "), err)
		}
	}
	return func(ctx context.Context) error { return c.finishMove(ctx, slot, from, to, toID, host, port) }, nil
}

func (c *RedisCluster) finishMove(ctx context.Context, slot uint16, from, to *Server, toID, host, port string) error {
	s := strconv.Itoa(int(slot))
	for {
		keys, err := from.Do(ctx, "CLUSTER", "GETKEYSINSLOT", s, "100")
		if err != nil {
			return err
		}
		ks, err := keys.AsStrSlice()
		if err != nil {
			return err
		}
		if len(ks) == 0 {
			break
		}
		args := []string{"MIGRATE", host, port, "", "0", "5000"}
		if c.secure != nil {
			args = append(args, "AUTH2", "default", c.secure.AdminPassword)
		}
		args = append(append(args, "KEYS"), ks...)
		if _, err := from.Do(ctx, args...); err != nil {
			return fmt.Errorf("redistest: move slot %d: MIGRATE: %w", slot, err)
		}
	}
	// The target first, then the source, then the rest, as redis-cli does.
	masters, err := c.Masters(ctx)
	if err != nil {
		return err
	}
	order := []*Server{to, from}
	for _, m := range masters {
		if m != to && m != from {
			order = append(order, m)
		}
	}
	for _, m := range order {
		if _, err := m.Do(ctx, "CLUSTER", "SETSLOT", s, "NODE", toID); err != nil {
			return fmt.Errorf("redistest: move slot %d: SETSLOT NODE on %s: %w", slot, m, err)
		}
	}
	return c.WaitHealthy(ctx)
}

func (c *RedisCluster) running() []*Server {
	var out []*Server
	for _, n := range c.nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// nodeInfo is one line of CLUSTER NODES.
type nodeInfo struct {
	id, addr, rawFlags, masterID string
	flags                        map[string]bool
	slots                        [][2]int // ranges; migrating/importing markers are skipped
}

func (n nodeInfo) owns(slot int) bool {
	for _, r := range n.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// clusterNodes returns n's CLUSTER NODES, and separately its own line.
func clusterNodes(ctx context.Context, n *Server) (me nodeInfo, all []nodeInfo, err error) {
	text, err := n.DoString(ctx, "CLUSTER", "NODES")
	if err != nil {
		return me, nil, err
	}
	found := false
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		ni := nodeInfo{id: f[0], addr: addr, rawFlags: f[2], masterID: f[3], flags: map[string]bool{}}
		for fl := range strings.SplitSeq(f[2], ",") {
			ni.flags[fl] = true
		}
		for _, sr := range f[8:] {
			if strings.HasPrefix(sr, "[") {
				continue
			}
			lo, hi, ok := strings.Cut(sr, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return me, nil, fmt.Errorf("%s: bad slot range %q in CLUSTER NODES", n, sr)
			}
			ni.slots = append(ni.slots, [2]int{a, b})
		}
		if ni.flags["myself"] {
			me, found = ni, true
		}
		all = append(all, ni)
	}
	if !found {
		return me, nil, fmt.Errorf("%s: no myself line in CLUSTER NODES", n)
	}
	return me, all, nil
}

func replicaLinkUp(ctx context.Context, n *Server) error {
	info, err := n.DoString(ctx, "INFO", "replication")
	if err != nil {
		return err
	}
	if !strings.Contains(info, "master_link_status:up\r\n") {
		return fmt.Errorf("%s: replication link is not up", n)
	}
	return nil
}
