package faults_test

import (
	"context"
	"crypto/x509"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// The locks work over TLS, configured with a tls.Config (here with a
// client certificate) or with a rediss:// URL: lock, renew, wait, wake,
// unlock, force unlock. A plain-text client, and a TLS client that does not
// trust the server's CA, cannot connect to the TLS port at all.
func TestTLS(t *testing.T) {
	srv := redistest.StandaloneTLS(t)
	ctx := context.Background()

	t.Run("TLSConfig", func(t *testing.T) {
		opt := rueidis.ClientOption{
			InitAddress:       []string{srv.TLSAddr},
			TLSConfig:         srv.TLS.ClientConfig(true),
			ForceSingleClient: true,
		}
		a := newLocks(t, newRueidis(t, opt), rlock.WithWatchdogTimeout(workloadWatchdog))
		b := newLocks(t, newRueidis(t, opt), rlock.WithWatchdogTimeout(workloadWatchdog))
		require.NoError(t, workload(ctx, a, b, "tls-config", true))
	})

	t.Run("rediss URL", func(t *testing.T) {
		opt, err := rueidis.ParseURL("rediss://" + srv.TLSAddr + "/0")
		require.NoError(t, err)
		require.NotNil(t, opt.TLSConfig, "rediss:// must enable TLS")
		opt.TLSConfig.RootCAs = srv.TLS.CAPool // no client certificate
		opt.ForceSingleClient = true
		a := newLocks(t, newRueidis(t, opt), rlock.WithWatchdogTimeout(workloadWatchdog))
		b := newLocks(t, newRueidis(t, opt), rlock.WithWatchdogTimeout(workloadWatchdog))
		require.NoError(t, workload(ctx, a, b, "tls-url", true))
	})

	t.Run("plain text is refused", func(t *testing.T) {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.TLSAddr}, ForceSingleClient: true})
		if err == nil {
			rc.Close()
		}
		require.Error(t, err)
	})

	t.Run("unknown CA is refused", func(t *testing.T) {
		opt := rueidis.ClientOption{InitAddress: []string{srv.TLSAddr}, ForceSingleClient: true, TLSConfig: srv.TLS.ClientConfig(false)}
		opt.TLSConfig.RootCAs = x509.NewCertPool()
		rc, err := rueidis.NewClient(opt)
		if err == nil {
			rc.Close()
		}
		var unknown x509.UnknownAuthorityError
		require.ErrorAs(t, err, &unknown)
	})
}
