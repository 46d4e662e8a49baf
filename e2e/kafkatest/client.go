package kafkatest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ErrBadIdentity is returned for an Identity the cluster cannot turn into a
// client: a listener it does not have, SASL without a mechanism, ...
var ErrBadIdentity = errors.New("kafkatest: bad client identity")

// Identity says how a client connects: through which listener and as whom.
// Nothing checks that the credentials are right, so tests can use wrong ones.
type Identity struct {
	// Listener to connect to. Default Plaintext.
	Listener Listener
	// Mechanism, User and Password log in on SASL listeners. For
	// OAuthBearer, Password is the bearer token and User is not sent.
	Mechanism      Mechanism
	User, Password string
	// Cert is the client certificate presented on SSL listeners: one the
	// cluster issued (ClientCert) or any other; nil presents none.
	Cert *Cert
}

// String describes the identity without its password.
func (id Identity) String() string {
	s := string(id.listener())
	if id.Mechanism != "" {
		s += fmt.Sprintf(" %s user=%s", id.Mechanism, id.User)
	}
	if id.Cert != nil {
		s += " cert=" + id.Cert.Name
	}
	return s
}

func (id Identity) listener() Listener {
	if id.Listener == "" {
		return Plaintext
	}
	return id.Listener
}

// AdminIdentity is the cluster's own super user on the INTERNAL listener. It
// can do anything, with or without an authorizer.
func (c *Cluster) AdminIdentity() Identity {
	return Identity{Listener: Internal, Mechanism: Plain, User: adminUser, Password: c.spec.adminPassword}
}

// Bootstrap returns the addresses of listener l on every broker (running or
// not), or nil when the cluster has no such listener. For Proxied they are
// the fault proxies' addresses.
func (c *Cluster) Bootstrap(l Listener) []string {
	if l == controller || len(c.spec.ports) == 0 {
		return nil
	}
	if _, ok := c.spec.ports[0][l]; !ok {
		return nil
	}
	out := make([]string, len(c.spec.ports))
	for i, p := range c.spec.ports {
		out[i] = addr(p[l])
		if l == Proxied {
			out[i] = c.spec.proxyAddrs[i]
		}
	}
	return out
}

// BootstrapServers is Bootstrap joined with commas, as Kafka's tools take it.
func (c *Cluster) BootstrapServers(l Listener) string { return strings.Join(c.Bootstrap(l), ",") }

// CA is the cluster's certificate authority (nil without TLS).
func (c *Cluster) CA() *CA { return c.ca }

// CAFile is the path of the CA certificate in PEM form ("" without TLS).
func (c *Cluster) CAFile() string { return c.caFile }

// ClientCert returns the client certificate issued for name (listed in
// TLSOptions.ClientCerts), with its files written, or nil.
func (c *Cluster) ClientCert(name string) *Cert { return c.certs[name] }

// TLSConfig returns a client TLS configuration trusting the cluster's CA and
// presenting cert (nil for none).
func (c *Cluster) TLSConfig(cert *Cert) (*tls.Config, error) {
	if c.ca == nil {
		return nil, fmt.Errorf("%w: cluster %q has no TLS", ErrBadIdentity, c.opts.Name)
	}
	cfg := &tls.Config{RootCAs: c.ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLS}
	}
	return cfg, nil
}

// ClientOpts returns franz-go options that connect as id: seed brokers, SASL
// and TLS. Append your own options after them.
func (c *Cluster) ClientOpts(id Identity) ([]kgo.Opt, error) {
	opts, err := c.identityOpts(id)
	if err != nil {
		return nil, err
	}
	return append(opts, kgo.SeedBrokers(c.Bootstrap(id.listener())...)), nil
}

// identityOpts returns the SASL and TLS options of id, without seeds.
func (c *Cluster) identityOpts(id Identity) ([]kgo.Opt, error) {
	l := id.listener()
	if c.Bootstrap(l) == nil {
		return nil, fmt.Errorf("%w: cluster %q has no %s listener", ErrBadIdentity, c.opts.Name, l)
	}
	var opts []kgo.Opt
	if l.sasl() {
		m, err := saslMechanism(id)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadIdentity, id, err)
		}
		opts = append(opts, kgo.SASL(m))
	} else if id.Mechanism != "" {
		return nil, fmt.Errorf("%w: %s: listener %s does not use SASL", ErrBadIdentity, id, l)
	}
	if l.tls() {
		cfg, err := c.TLSConfig(id.Cert)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	} else if id.Cert != nil {
		return nil, fmt.Errorf("%w: %s: listener %s does not use TLS", ErrBadIdentity, id, l)
	}
	return opts, nil
}

func saslMechanism(id Identity) (sasl.Mechanism, error) {
	switch id.Mechanism {
	case Plain:
		return plain.Auth{User: id.User, Pass: id.Password}.AsMechanism(), nil
	case ScramSHA256:
		return scram.Auth{User: id.User, Pass: id.Password}.AsSha256Mechanism(), nil
	case ScramSHA512:
		return scram.Auth{User: id.User, Pass: id.Password}.AsSha512Mechanism(), nil
	case OAuthBearer:
		return oauth.Auth{Token: id.Password}.AsMechanism(), nil
	case "":
		return nil, errors.New("a SASL listener needs a Mechanism")
	default:
		return nil, fmt.Errorf("unknown SASL mechanism %q", id.Mechanism)
	}
}

// NewClient returns a franz-go client connected as id, with extra options
// applied after the identity's.
func (c *Cluster) NewClient(id Identity, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := c.ClientOpts(id)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: client for cluster %q as %s: %w", c.opts.Name, id, err)
	}
	return cl, nil
}

// Admin returns an admin client logged in as AdminIdentity (a super user).
// Closing it closes its franz-go client.
func (c *Cluster) Admin(extra ...kgo.Opt) (*kadm.Client, error) {
	cl, err := c.NewClient(c.AdminIdentity(), extra...)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// ClientProperties returns the Java client properties that connect as id
// (bootstrap.servers, security.protocol, sasl.*, ssl.*), for Kafka's tools
// and other Java clients. TLS certificates are referenced by file.
func (c *Cluster) ClientProperties(id Identity) (map[string]string, error) {
	if _, err := c.identityOpts(id); err != nil {
		return nil, err
	}
	l := id.listener()
	p := map[string]string{
		"bootstrap.servers": c.BootstrapServers(l),
		"security.protocol": securityProtocol(l),
	}
	if l.sasl() {
		p["sasl.mechanism"] = string(id.Mechanism)
		module := "org.apache.kafka.common.security.plain.PlainLoginModule"
		if id.Mechanism.scram() {
			module = "org.apache.kafka.common.security.scram.ScramLoginModule"
		}
		p["sasl.jaas.config"] = fmt.Sprintf(`%s required username="%s" password="%s";`, module, id.User, id.Password)
	}
	if l.tls() {
		p["ssl.truststore.type"] = "PEM"
		p["ssl.truststore.location"] = c.caFile
		if id.Cert != nil {
			if id.Cert.KeystoreFile == "" {
				return nil, fmt.Errorf("%w: %s: certificate %q has no files; call its WriteFiles first", ErrBadIdentity, id, id.Cert.Name)
			}
			p["ssl.keystore.type"] = "PEM"
			p["ssl.keystore.location"] = id.Cert.KeystoreFile
		}
	}
	return p, nil
}

// ClientConfigFile writes ClientProperties(id) to a new file in the
// cluster's directory, for a tool's --command-config, and returns its path.
func (c *Cluster) ClientConfigFile(id Identity) (string, error) {
	p, err := c.ClientProperties(id)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(c.dir, "client-*.properties")
	if err != nil {
		return "", fmt.Errorf("kafkatest: client config file: %w", err)
	}
	f.Close()
	if err := writeProperties(f.Name(), p); err != nil {
		return "", err
	}
	return filepath.Clean(f.Name()), nil
}
