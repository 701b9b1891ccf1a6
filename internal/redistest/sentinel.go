package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// SentinelConfig describes a Sentinel-monitored master group. Zero fields
// take the defaults.
type SentinelConfig struct {
	// MasterName is the monitored master set; default "mymaster".
	MasterName string
	// Replicas is the number of replicas; default 1.
	Replicas int
	// Sentinels is the number of Sentinel processes; default 3.
	Sentinels int
	// Quorum is the Sentinel quorum; default 2.
	Quorum int
	// DownAfter is down-after-milliseconds; default 1s.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout; default 3s.
	FailoverTimeout time.Duration
	// Args are extra redis-server arguments for the master and replicas.
	Args []string
	// Secure, when set, turns on TLS (client ports, replication, the
	// Sentinels' links) and logins on every process; see Secure. The
	// Sentinels then monitor and announce TLS addresses only.
	Secure *Secure
}

// SentinelGroup is one master, its replicas and the Sentinels monitoring
// them, all local processes. Queries (MasterAddr, Master, ...) ask the
// running Sentinels, so they follow failovers.
type SentinelGroup struct {
	// MasterName is the master set name the Sentinels monitor.
	MasterName string

	data      []*Server // the initial master first, then the replicas
	sentinels []*Server
	secure    *Secure
}

// StartSentinel starts the master, the replicas (--replicaof the master)
// and, once the replicas are in sync, the Sentinels; then it waits until
// WaitHealthy succeeds (bounded by ctx, or one minute if ctx has no
// deadline). On error every process is closed.
func StartSentinel(ctx context.Context, cfg SentinelConfig) (*SentinelGroup, error) {
	if cfg.MasterName == "" {
		cfg.MasterName = "mymaster"
	}
	cfg.Replicas = orDefault(cfg.Replicas, 1)
	cfg.Sentinels = orDefault(cfg.Sentinels, 3)
	cfg.Quorum = orDefault(cfg.Quorum, 2)
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = time.Second
	}
	if cfg.FailoverTimeout <= 0 {
		cfg.FailoverTimeout = 3 * time.Second
	}
	ctx, cancel := defaultTimeout(ctx, time.Minute)
	defer cancel()

	if cfg.Secure != nil {
		if err := cfg.Secure.check(); err != nil {
			return nil, err
		}
	}
	g := &SentinelGroup{MasterName: cfg.MasterName, secure: cfg.Secure}
	fail := func(err error) (*SentinelGroup, error) {
		return nil, errors.Join(fmt.Errorf("redistest: sentinel: %w", err), g.Close())
	}
	data := func(c Config) Config {
		if cfg.Secure != nil {
			return cfg.Secure.node(c)
		}
		return c
	}
	master, err := StartServer(ctx, data(Config{Name: "sentinel-master", Args: cfg.Args}))
	if err != nil {
		return fail(err)
	}
	g.data = []*Server{master}
	_, masterPort, _ := net.SplitHostPort(g.addrOf(master))
	cfgs := make([]Config, cfg.Replicas)
	for i := range cfgs {
		cfgs[i] = data(Config{
			Name: fmt.Sprintf("sentinel-replica-%d", i),
			Args: append([]string{"--replicaof", "127.0.0.1", masterPort}, cfg.Args...),
		})
	}
	replicas, err := startAll(ctx, cfgs, StartServer)
	if err != nil {
		return fail(err)
	}
	g.data = append(g.data, replicas...)
	err = poll(ctx, "replicas not in sync", func() error {
		for _, r := range replicas {
			if err := replicaLinkUp(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}

	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		cfg.MasterName, masterPort, cfg.Quorum, cfg.DownAfter.Milliseconds(), cfg.FailoverTimeout.Milliseconds())
	var secureArgs []string
	if sec := cfg.Secure; sec != nil {
		// The Sentinels log in to the data nodes and to each other as
		// the admin, and talk TLS to both.
		conf += fmt.Sprintf("sentinel auth-pass %s %s\nsentinel sentinel-pass %s\n", cfg.MasterName, sec.AdminPassword, sec.AdminPassword) +
			sec.users(sec.SentinelUsers)
		secureArgs = []string{"--tls-replication", "yes"}
	}
	cfgs = make([]Config, cfg.Sentinels)
	for i := range cfgs {
		cfgs[i] = Config{
			Args: secureArgs,
			Name: fmt.Sprintf("sentinel-%d", i), Sentinel: true, ConfigText: conf,
			// Refresh INFO every 1s instead of 10s, so a demoted or
			// restarted master is reconfigured as a replica quickly, and
			// send hellos every 500ms instead of 2s, so Sentinels find
			// each other quickly. Not persisted, so applied on every start.
			afterStart: []string{"SENTINEL", "DEBUG", "INFO-PERIOD", "1000", "PUBLISH-PERIOD", "500"},
		}
	}
	if sec := cfg.Secure; sec != nil {
		for i := range cfgs {
			cfgs[i].TLS = sec.TLS
			cfgs[i].Username, cfgs[i].Password = "default", sec.AdminPassword
		}
	}
	if g.sentinels, err = startAll(ctx, cfgs, StartServer); err != nil {
		return fail(err)
	}
	if err := g.WaitHealthy(ctx); err != nil {
		return fail(err)
	}
	return g, nil
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Sentinels returns the Sentinel processes.
func (g *SentinelGroup) Sentinels() []*Server { return slices.Clone(g.sentinels) }

// SentinelAddrs returns the Sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		addrs[i] = s.Addr
	}
	return addrs
}

// DataNodes returns the master and replicas as started (the initial master
// first); after a failover their roles may differ.
func (g *SentinelGroup) DataNodes() []*Server { return slices.Clone(g.data) }

// addrOf is the address the Sentinels know n by: its TLS one when Secure.
func (g *SentinelGroup) addrOf(n *Server) string { return g.secure.clientAddr(n) }

// Node returns the data node or Sentinel listening on addr (plain text or
// TLS), or nil.
func (g *SentinelGroup) Node(addr string) *Server {
	for _, s := range append(g.DataNodes(), g.sentinels...) {
		if s.Addr == addr || (s.TLSAddr != "" && s.TLSAddr == addr) {
			return s
		}
	}
	return nil
}

// MasterAddr returns the master address reported by the first running
// Sentinel that answers SENTINEL GET-MASTER-ADDR-BY-NAME.
func (g *SentinelGroup) MasterAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range g.sentinels {
		if !s.Running() {
			continue
		}
		addr, err := g.masterAddrFrom(ctx, s)
		if err == nil {
			return addr, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("redistest: sentinel: no Sentinel reported the master: %w", errors.Join(errs...))
}

func (g *SentinelGroup) masterAddrFrom(ctx context.Context, s *Server) (string, error) {
	msg, err := s.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.MasterName)
	if err != nil {
		return "", err
	}
	hp, err := msg.AsStrSlice()
	if err != nil || len(hp) != 2 {
		return "", fmt.Errorf("%s: bad GET-MASTER-ADDR-BY-NAME reply %v: %v", s, hp, err)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// Master returns the data node that the Sentinels report as master.
func (g *SentinelGroup) Master(ctx context.Context) (*Server, error) {
	addr, err := g.MasterAddr(ctx)
	if err != nil {
		return nil, err
	}
	if s := g.Node(addr); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("redistest: sentinel: master %s is not a node of this group", addr)
}

// WaitForNewMaster waits until every running Sentinel reports a master other
// than old and that node answers ROLE as master, and returns its address.
// Use it after killing the master.
func (g *SentinelGroup) WaitForNewMaster(ctx context.Context, old string) (string, error) {
	var addr string
	err := poll(ctx, "no new master", func() error {
		var err error
		if addr, err = g.agreedMaster(ctx); err != nil {
			return err
		}
		if addr == old {
			return fmt.Errorf("sentinels still report %s", old)
		}
		return g.isMaster(ctx, addr)
	})
	return addr, err
}

// Failover forces a failover with SENTINEL FAILOVER, waits for a new master
// and then for WaitHealthy, and returns the new master's address.
func (g *SentinelGroup) Failover(ctx context.Context) (string, error) {
	old, err := g.MasterAddr(ctx)
	if err != nil {
		return "", err
	}
	var s *Server
	for _, c := range g.sentinels {
		if c.Running() {
			s = c
			break
		}
	}
	if s == nil {
		return "", errors.New("redistest: sentinel: no running Sentinel")
	}
	if _, err := s.Do(ctx, "SENTINEL", "FAILOVER", g.MasterName); err != nil {
		return "", fmt.Errorf("redistest: %s: SENTINEL FAILOVER: %w", s, err)
	}
	addr, err := g.WaitForNewMaster(ctx, old)
	if err != nil {
		return "", err
	}
	return addr, g.WaitHealthy(ctx)
}

// WaitHealthy waits until all running Sentinels agree on the master, see it
// as healthy (flags "master", CKQUORUM OK) and know all other Sentinels; the
// master is running and answers ROLE as master; and every other running
// data node replicates from it with its link up and is known to every
// running Sentinel as a healthy replica.
func (g *SentinelGroup) WaitHealthy(ctx context.Context) error {
	return poll(ctx, "sentinel group not healthy", func() error { return g.checkHealthy(ctx) })
}

func (g *SentinelGroup) checkHealthy(ctx context.Context) error {
	master, err := g.agreedMaster(ctx)
	if err != nil {
		return err
	}
	if err := g.isMaster(ctx, master); err != nil {
		return err
	}
	_, masterPort, _ := net.SplitHostPort(master)
	for _, d := range g.data {
		if g.addrOf(d) == master || !d.Running() {
			continue
		}
		info, err := d.DoString(ctx, "INFO", "replication")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_port:"+masterPort+"\r\n") || !strings.Contains(info, "master_link_status:up\r\n") {
			return fmt.Errorf("%s does not replicate from %s with its link up", d, master)
		}
	}
	for _, s := range g.sentinels {
		if !s.Running() {
			continue
		}
		m, err := s.Do(ctx, "SENTINEL", "MASTER", g.MasterName)
		if err != nil {
			return err
		}
		mi, err := m.AsStrMap()
		if err != nil {
			return err
		}
		if mi["flags"] != "master" {
			return fmt.Errorf("%s: master flags are %q", s, mi["flags"])
		}
		if n, _ := strconv.Atoi(mi["num-other-sentinels"]); n != len(g.sentinels)-1 {
			return fmt.Errorf("%s knows %d other Sentinels, want %d", s, n, len(g.sentinels)-1)
		}
		if _, err := s.Do(ctx, "SENTINEL", "CKQUORUM", g.MasterName); err != nil {
			return fmt.Errorf("%s: CKQUORUM: %w", s, err)
		}
		rs, err := s.Do(ctx, "SENTINEL", "REPLICAS", g.MasterName)
		if err != nil {
			return err
		}
		list, err := rs.ToArray()
		if err != nil {
			return err
		}
		flags := map[string]string{}
		for _, r := range list {
			ri, err := r.AsStrMap()
			if err != nil {
				return err
			}
			flags[net.JoinHostPort(ri["ip"], ri["port"])] = ri["flags"]
		}
		for _, d := range g.data {
			if a := g.addrOf(d); a != master && d.Running() && flags[a] != "slave" {
				return fmt.Errorf("%s: replica %s has flags %q", s, a, flags[a])
			}
		}
	}
	return nil
}

// agreedMaster returns the master address all running Sentinels report.
func (g *SentinelGroup) agreedMaster(ctx context.Context) (string, error) {
	var master string
	for _, s := range g.sentinels {
		if !s.Running() {
			continue
		}
		addr, err := g.masterAddrFrom(ctx, s)
		if err != nil {
			return "", err
		}
		if master != "" && addr != master {
			return "", fmt.Errorf("sentinels disagree on the master: %s vs %s", master, addr)
		}
		master = addr
	}
	if master == "" {
		return "", errors.New("no running Sentinel")
	}
	return master, nil
}

func (g *SentinelGroup) isMaster(ctx context.Context, addr string) error {
	d := g.Node(addr)
	if d == nil || !d.Running() {
		return fmt.Errorf("master %s is not a running node of this group", addr)
	}
	role, err := d.Do(ctx, "ROLE")
	if err != nil {
		return err
	}
	r, err := role.ToArray()
	if err != nil || len(r) == 0 {
		return fmt.Errorf("%s: bad ROLE reply: %v", d, err)
	}
	if s, _ := r[0].ToString(); s != "master" {
		return fmt.Errorf("%s: ROLE is %q, not master", d, s)
	}
	return nil
}

// ClientOption returns options for a rueidis Sentinel client: InitAddress
// is the Sentinels, Sentinel.MasterSet the master name. When Secure, it is
// TLSClientOption for the admin.
func (g *SentinelGroup) ClientOption() rueidis.ClientOption {
	if sec := g.secure; sec != nil {
		return g.TLSClientOption("default", sec.AdminPassword, "default", sec.AdminPassword)
	}
	return rueidis.ClientOption{
		InitAddress: g.SentinelAddrs(),
		Sentinel:    rueidis.SentinelOption{MasterSet: g.MasterName},
	}
}

// TLSClientOption returns options for a rueidis Sentinel client that talks
// TLS (trusting the CA, no client certificate) to the Sentinels, logging
// in as sentinelUser, and to the data nodes, logging in as user. It needs
// Secure.
func (g *SentinelGroup) TLSClientOption(user, password, sentinelUser, sentinelPassword string) rueidis.ClientOption {
	addrs := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		addrs[i] = s.TLSAddr
	}
	o := rueidis.ClientOption{
		InitAddress: addrs, Username: user, Password: password,
		Sentinel: rueidis.SentinelOption{MasterSet: g.MasterName, Username: sentinelUser, Password: sentinelPassword},
	}
	if g.secure != nil {
		o.TLSConfig = g.secure.TLS.ClientConfig(false)
		o.Sentinel.TLSConfig = g.secure.TLS.ClientConfig(false)
	}
	return o
}

// Client returns a new rueidis Sentinel client (see ClientOption) after
// applying opts. The caller must Close it.
func (g *SentinelGroup) Client(opts ...func(*rueidis.ClientOption)) (rueidis.Client, error) {
	o := g.ClientOption()
	for _, f := range opts {
		f(&o)
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		return nil, fmt.Errorf("redistest: sentinel client for %s via %v: %w", g.MasterName, o.InitAddress, err)
	}
	return c, nil
}

// Close closes the Sentinels, then the data nodes; see Server.Close.
func (g *SentinelGroup) Close() error {
	return errors.Join(closeAll(g.sentinels), closeAll(g.data))
}
