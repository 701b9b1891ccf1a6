package redistest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSMaterial is a throw-away certificate authority with a server
// certificate (for 127.0.0.1, ::1 and localhost) and a client certificate,
// written as PEM files into a directory.
type TLSMaterial struct {
	CAFile                        string // the CA certificate
	CertFile, KeyFile             string // the server's certificate and key
	ClientCertFile, ClientKeyFile string // the client's certificate and key

	// CAPool holds the CA certificate, for tls.Config.RootCAs.
	CAPool *x509.CertPool
	// ClientCert is the client certificate, for tls.Config.Certificates.
	ClientCert tls.Certificate
}

// NewTLSMaterial generates a CA, a server and a client certificate (ECDSA
// P-256, valid for a day) and writes them into dir.
func NewTLSMaterial(dir string) (*TLSMaterial, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("redistest: tls: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("redistest: tls: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("redistest: tls: %w", err)
	}
	m := &TLSMaterial{
		CAFile:         filepath.Join(dir, "ca.crt"),
		CertFile:       filepath.Join(dir, "server.crt"),
		KeyFile:        filepath.Join(dir, "server.key"),
		ClientCertFile: filepath.Join(dir, "client.crt"),
		ClientKeyFile:  filepath.Join(dir, "client.key"),
		CAPool:         x509.NewCertPool(),
	}
	m.CAPool.AddCert(ca)
	if err := writePEM(m.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, server bool, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("redistest: tls: %w", err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if server {
			// Servers present it to their peers too (replication, the
			// cluster bus, Sentinel links).
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("redistest: tls: %s certificate: %w", cn, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return fmt.Errorf("redistest: tls: %w", err)
		}
		return errors.Join(writePEM(certFile, "CERTIFICATE", der), writePEM(keyFile, "PRIVATE KEY", keyDER))
	}
	if err := leaf(2, "redistest server", x509.ExtKeyUsageServerAuth, true, m.CertFile, m.KeyFile); err != nil {
		return nil, err
	}
	if err := leaf(3, "redistest client", x509.ExtKeyUsageClientAuth, false, m.ClientCertFile, m.ClientKeyFile); err != nil {
		return nil, err
	}
	if m.ClientCert, err = tls.LoadX509KeyPair(m.ClientCertFile, m.ClientKeyFile); err != nil {
		return nil, fmt.Errorf("redistest: tls: %w", err)
	}
	return m, nil
}

func writePEM(path, kind string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("redistest: tls: %w", err)
	}
	return nil
}

// ClientConfig returns a TLS client configuration that trusts the CA and,
// with clientCert, presents the client certificate.
func (m *TLSMaterial) ClientConfig(clientCert bool) *tls.Config {
	c := &tls.Config{RootCAs: m.CAPool, MinVersion: tls.VersionTLS12}
	if clientCert {
		c.Certificates = []tls.Certificate{m.ClientCert}
	}
	return c
}

// TLSServer is a local redis-server that also listens with TLS.
type TLSServer struct {
	// Server is the server; its Addr is the plain-text port, which the
	// harness uses (readiness probe, Do), and its TLSAddr the TLS one.
	*Server
	// TLS is the certificate material the server uses.
	TLS *TLSMaterial
}

// StartTLSServer starts a local redis-server (StartServer with cfg) that
// listens with TLS on a second free port as well, using m's server
// certificate and CA. authClients is Redis' tls-auth-clients: "yes"
// (client certificates required), "optional" or "no".
func StartTLSServer(ctx context.Context, cfg Config, m *TLSMaterial, authClients string) (*TLSServer, error) {
	if cfg.Name == "" {
		cfg.Name = "redis-tls"
	}
	cfg.TLS, cfg.TLSAuthClients = m, authClients
	s, err := StartServer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &TLSServer{Server: s, TLS: m}, nil
}

// StandaloneTLS returns a local redis-server for t that accepts TLS
// connections (client certificates optional) on TLSAddr, with fresh
// certificates in a temporary directory; it is closed by t.Cleanup. It
// ignores REDIS_ADDR and needs redis-server on PATH.
func StandaloneTLS(t testing.TB) *TLSServer {
	t.Helper()
	m, err := NewTLSMaterial(t.TempDir())
	if err != nil {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s, err := StartTLSServer(ctx, Config{}, m, "optional")
	if err != nil {
		t.Fatalf("%v", err)
	}
	cleanup(t, []*Server{s.Server}, s.Close)
	return s
}
