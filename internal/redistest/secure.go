package redistest

import (
	"errors"
	"strings"
)

// Secure is the TLS and ACL set-up of a cluster or a Sentinel group. Every
// process listens with TLS as well as in plain text (the harness keeps
// using the plain-text ports; clients under test use the TLS ones, which
// is what the cluster and the Sentinels announce), talks TLS to its peers
// (replication, the cluster bus, Sentinel links) and requires a login:
// the "default" user has AdminPassword and every permission (the harness,
// replication and the Sentinels log in with it), the other users are the
// ACL lines given.
type Secure struct {
	// TLS is the certificate material of every process; client
	// certificates are optional.
	TLS *TLSMaterial
	// AdminPassword is the password of the "default" user.
	AdminPassword string
	// Users are ACL lines ("user locker on >pw ~* +get ...") for the data
	// nodes, SentinelUsers the ones for the Sentinels.
	Users, SentinelUsers []string
}

func (s *Secure) check() error {
	switch {
	case s.TLS == nil:
		return errors.New("redistest: Secure needs TLS material")
	case s.AdminPassword == "" || strings.ContainsAny(s.AdminPassword, " \t\r\n\""):
		return errors.New("redistest: Secure needs an AdminPassword without spaces or quotes")
	}
	return nil
}

// users is the ACL part of a config file: the admin, then lines.
func (s *Secure) users(lines []string) string {
	return "user default on >" + s.AdminPassword + " ~* &* +@all\n" + strings.Join(lines, "\n") + "\n"
}

// node returns cfg with the TLS listener, the TLS links to peers, the
// logins and the data nodes' users; extra are more peer-TLS settings
// ("--tls-cluster yes").
func (s *Secure) node(cfg Config, extra ...string) Config {
	cfg.TLS = s.TLS
	cfg.Username, cfg.Password = "default", s.AdminPassword
	cfg.ConfigText = s.users(s.Users)
	cfg.Args = append(append([]string{"--tls-replication", "yes", "--masterauth", s.AdminPassword}, extra...), cfg.Args...)
	return cfg
}

// cliAuth are the redis-cli arguments that log in as the admin.
func (s *Secure) cliAuth() []string {
	if s == nil {
		return nil
	}
	return []string{"--user", "default", "--pass", s.AdminPassword, "--no-auth-warning"}
}

// clientAddr is the address a process announces to clients: its TLS one
// when the set-up is secure.
func (s *Secure) clientAddr(n *Server) string {
	if s != nil {
		return n.TLSAddr
	}
	return n.Addr
}
