package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testAdminPassword = "adm1n-7c0ffee"

func testSecure(t *testing.T) *Secure {
	m, err := NewTLSMaterial(t.TempDir())
	require.NoError(t, err)
	return &Secure{
		TLS: m, AdminPassword: testAdminPassword,
		Users:         []string{"user app on >app-pw ~* &* +@all"},
		SentinelUsers: []string{"user app on >app-pw &* +@all"},
	}
}

// A secure cluster takes TLS logins only for known users, announces its
// TLS ports to TLS clients, and still fails over and moves slots.
func TestSecureCluster(t *testing.T) {
	c := ClusterWith(t, ClusterConfig{Masters: 3, ReplicasPerMaster: 1, Secure: testSecure(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	rc, err := rueidis.NewClient(c.TLSClientOption("app", "app-pw"))
	require.NoError(t, err)
	defer rc.Close()
	for i := range 50 {
		k := fmt.Sprintf("k%d", i)
		require.NoError(t, rc.Do(ctx, rc.B().Set().Key(k).Value("v").Build()).Error())
	}
	// The slot map a TLS client gets names TLS ports only.
	for addr := range rc.Nodes() {
		n := c.Node(addr)
		require.NotNil(t, n, addr)
		assert.Equal(t, n.TLSAddr, addr)
	}

	_, err = rueidis.NewClient(c.TLSClientOption("app", "wrong"))
	require.Error(t, err)
	o := c.TLSClientOption("app", "app-pw")
	o.TLSConfig = nil
	o.Dialer.Timeout = time.Second
	if bad, err := rueidis.NewClient(o); err == nil {
		bad.Close()
		t.Fatal("a plain-text client got in through the TLS port")
	}

	// Replication runs over TLS with the admin's login: a replica is in
	// sync, and a slot moves with MIGRATE over TLS.
	replicas, err := c.Replicas(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, replicas)
	require.NoError(t, replicaLinkUp(ctx, replicas[0]))
	slot := Slot("k1")
	from, err := c.MasterForKey(ctx, "k1")
	require.NoError(t, err)
	masters, err := c.Masters(ctx)
	require.NoError(t, err)
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	require.NoError(t, c.MoveSlot(ctx, slot, to))
	v, err := rc.Do(ctx, rc.B().Get().Key("k1").Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "v", v)
	n, err := to.Do(ctx, "EXISTS", "k1")
	require.NoError(t, err)
	got, _ := n.AsInt64()
	assert.Equal(t, int64(1), got, "k1 is not on the new master")
}

// A secure Sentinel group hands out TLS master addresses, takes TLS logins
// on Sentinels and data nodes, and still fails over.
func TestSecureSentinel(t *testing.T) {
	g := SentinelWith(t, SentinelConfig{Secure: testSecure(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := rueidis.NewClient(g.TLSClientOption("app", "app-pw", "app", "app-pw"))
	require.NoError(t, err)
	defer rc.Close()
	require.NoError(t, rc.Do(ctx, rc.B().Set().Key("k").Value("v").Build()).Error())
	// The replica has it before the forced failover (which does not wait
	// for the replication stream): WAIT for it.
	acked, err := rc.Do(ctx, rc.B().Wait().Numreplicas(1).Timeout(5000).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), acked, "the replica did not acknowledge the write")
	master, err := g.MasterAddr(ctx)
	require.NoError(t, err)
	assert.Equal(t, g.DataNodes()[0].TLSAddr, master)

	_, err = rueidis.NewClient(g.TLSClientOption("app", "wrong", "app", "app-pw"))
	require.Error(t, err, "a wrong data-node password")
	_, err = rueidis.NewClient(g.TLSClientOption("app", "app-pw", "app", "wrong"))
	require.Error(t, err, "a wrong Sentinel password")

	next, err := g.Failover(ctx)
	require.NoError(t, err)
	require.NotEqual(t, master, next)
	require.Eventually(t, func() bool {
		v, err := rc.Do(ctx, rc.B().Get().Key("k").Build()).ToString()
		return err == nil && v == "v" && rc.Do(ctx, rc.B().Set().Key("k2").Value("v").Build()).Error() == nil
	}, 20*time.Second, 50*time.Millisecond, "the client did not follow the failover")
}
