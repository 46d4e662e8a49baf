package config

import (
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/kmirror/kmirror/core/config/security"

	"github.com/kmirror/kmirror/core/config/value"
)

// DefaultAdminTokenFile is the name of the admin token file the daemon keeps
// in state.dir when admin.token.file is unset.
const DefaultAdminTokenFile = "admin.token"

// AdminUsesToken reports whether admin callers must present the bearer
// token: when admin.token.file is set, and whenever no client CA is
// configured (then the token in state.dir is used), so that the admin API is
// never unauthenticated.
func (c *Config) AdminUsesToken() bool {
	return c.AdminTokenFile != "" || c.AdminTLSClientCAFile == ""
}

// AdminUsesTLS reports whether the admin API serves HTTPS.
func (c *Config) AdminUsesTLS() bool { return c.AdminTLSCertFile != "" }

// AdminUsesClientCerts reports whether admin callers need a client
// certificate (mutual TLS).
func (c *Config) AdminUsesClientCerts() bool { return c.AdminTLSClientCAFile != "" }

// AdminTokenPath returns the file the admin bearer token is read from:
// admin.token.file, else <state.dir>/admin.token. It returns "" when no token
// is used (mTLS alone).
func (c *Config) AdminTokenPath() string {
	switch {
	case c.AdminTokenFile != "":
		return c.AdminTokenFile
	case !c.AdminUsesToken():
		return ""
	}
	return filepath.Join(c.State.Dir, DefaultAdminTokenFile)
}

// AdminServerTLS returns the admin listener's TLS configuration, or nil when
// admin.tls.cert.file is unset. With admin.tls.client.ca.file, client
// certificates are verified against it when given (ClientAuth is
// VerifyClientCertIfGiven: the admin API itself answers a call without one
// with 401 and a reason, rather than a bare handshake failure). Files are
// read at every call, so a reload picks up rotated certificates.
func (c *Config) AdminServerTLS() (*tls.Config, error) {
	tc, probs := c.resolveAdminTLS()
	if len(probs) > 0 {
		return nil, probs[0].Err()
	}
	return tc, nil
}

func (c *Config) resolveAdminTLS() (*tls.Config, []security.Problem) {
	return security.ServerTLS(c.AdminTLSCertFile, c.AdminTLSKeyFile, c.AdminTLSClientCAFile)
}

// IsLoopbackAddress reports whether a listen address binds only the loopback
// interface: its host is "localhost" or a loopback IP. An empty host (all
// interfaces) and any other host name are not loopback.
func IsLoopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validateAdmin checks the admin.* keys together: the exposure rule for
// non-loopback addresses, complete and readable TLS material, a readable
// token file.
func validateAdmin(cfg *Config, failed map[string]bool, c *collector) {
	for _, k := range []string{"admin.address", "admin.token.file", "admin.tls.cert.file", "admin.tls.key.file", "admin.tls.client.ca.file"} {
		if failed[k] {
			return
		}
	}
	if cfg.AdminAddress == "" {
		return
	}
	switch {
	case IsLoopbackAddress(cfg.AdminAddress):
	case cfg.AdminTokenFile == "" && cfg.AdminTLSClientCAFile == "":
		c.add("admin.address", fmt.Sprintf("%s is not a loopback address: the admin API is off by default on non-loopback addresses; set admin.tls.client.ca.file (mutual TLS) and/or admin.token.file (with admin.tls.cert.file and admin.tls.key.file), or listen on 127.0.0.1", value.Quote(cfg.AdminAddress)))
	case cfg.AdminTLSCertFile == "":
		c.add("admin.address", fmt.Sprintf("%s is not a loopback address, and off loopback the admin API needs TLS (a bearer token must not cross the network in clear text): set admin.tls.cert.file and admin.tls.key.file, or listen on 127.0.0.1", value.Quote(cfg.AdminAddress)))
	}
	if cfg.AdminTLSClientSubjects.Len() > 0 && cfg.AdminTLSClientCAFile == "" {
		c.add("admin.tls.client.subjects", "needs admin.tls.client.ca.file: without client certificates there is no subject to match")
	}
	_, probs := cfg.resolveAdminTLS()
	for _, p := range probs {
		c.add(p.Key, p.Reason)
	}
	if cfg.AdminTokenFile != "" {
		if _, err := security.ReadAdminToken(cfg.AdminTokenFile); err != nil {
			c.add("admin.token.file", err.Error())
		}
	}
}
