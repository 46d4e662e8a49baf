package kclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/sdk/auth"
)

// Credentials returns the auth provider that serves req for cluster cl:
// the plugin that sasl.credentials.plugin names, or the built-in provider
// kmirror runs for the cluster from its sasl.* keys (ImplicitAuth).
// The daemon wires it to its plugin host; every SASL client gets its
// credentials through it, so there is one path for all of them.
type Credentials func(ctx context.Context, cl *config.Cluster, req auth.Request) (auth.Provider, error)

// ErrNoCredentials: a client of a SASL cluster was asked for without a
// Credentials to get its credentials from.
var ErrNoCredentials = errors.New("no credentials source for a SASL cluster")

// Option configures the options Opts and ConnOpts build.
type Option func(*options)

type options struct {
	sockets *SocketOptions
}

// WithSockets dials connections with kmirror's own dialer ([Dialer]), which
// applies so and then runs the TLS handshake (franz-go takes either a TLS
// configuration or a dialer, not both). The default is franz-go's dialer
// with the cluster's TLS configuration (kgo.DialTLSConfig) and the
// operating system's socket buffer sizes.
func WithSockets(so SocketOptions) Option {
	return func(o *options) { o.sockets = &so }
}

// Opts returns the franz-go options that connect to cl (ConnOpts) plus its
// SASL mechanism, whose credentials come from creds for req (req.Mechanism
// is filled from cl). They are asked for at every connection, so a rotated
// password or a refreshed token is used by the next one.
func Opts(ctx context.Context, cl *config.Cluster, creds Credentials, req auth.Request, opts ...Option) ([]kgo.Opt, error) {
	kopts, err := ConnOpts(cl, opts...)
	if err != nil {
		return nil, err
	}
	m, err := Mechanism(ctx, cl, creds, req)
	if err != nil {
		return nil, err
	}
	if m != nil {
		kopts = append(kopts, kgo.SASL(m))
	}
	return kopts, nil
}

// ConnOpts returns the franz-go options that connect to cl: seed brokers,
// client id and TLS (or kmirror's dialer, WithSockets). It adds no SASL
// mechanism.
func ConnOpts(cl *config.Cluster, opts ...Option) ([]kgo.Opt, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	kopts := []kgo.Opt{kgo.SeedBrokers(cl.BootstrapServers...)}
	if cl.ClientID != "" {
		kopts = append(kopts, kgo.ClientID(cl.ClientID))
	}
	tc, err := TLSConfig(cl)
	if err != nil {
		return nil, err
	}
	switch {
	case o.sockets != nil:
		kopts = append(kopts, kgo.Dialer(Dialer(*o.sockets, tc)))
	case tc != nil:
		kopts = append(kopts, kgo.DialTLSConfig(tc))
	}
	return kopts, nil
}

// TLSConfig builds the TLS client configuration of cl, or returns nil when
// security.protocol is PLAINTEXT or SASL_PLAINTEXT. Files are read at every
// call, so rotated certificates are picked up by the next client built.
// ServerName is left empty: franz-go (and Dialer) set it per broker from
// the address dialed.
func TLSConfig(cl *config.Cluster) (*tls.Config, error) {
	if !cl.UsesTLS() {
		return nil, nil
	}
	t, err := cl.TLS()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: t.Roots, MinVersion: t.MinVersion, MaxVersion: t.MaxVersion}
	if t.Certificate != nil {
		cfg.Certificates = []tls.Certificate{*t.Certificate}
	}
	if !t.VerifyHostname {
		// Kafka's "" skips only the host name check; the chain is still
		// verified. Go can skip both or neither, so verify the chain here.
		roots := t.Roots
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// Mechanism returns the franz-go SASL mechanism of cl, or nil when its
// security.protocol does not use SASL. The provider comes from creds now;
// its credentials are asked for at every connection. GSSAPI needs no
// provider: it logs in with the keytab of the sasl.kerberos.* keys (and
// re-reads it at every connection), so creds may be nil for it.
func Mechanism(ctx context.Context, cl *config.Cluster, creds Credentials, req auth.Request) (sasl.Mechanism, error) {
	if !cl.UsesSASL() {
		return nil, nil
	}
	req.Mechanism = cl.SASLMechanism
	if cl.SASLMechanism == config.MechanismGSSAPI {
		// Kerberos logs in with a keytab, not with credentials an auth
		// provider hands out per connection (docs/configuration.md,
		// "Kerberos").
		s, err := cl.SASL()
		if err != nil {
			return nil, fmt.Errorf("%v: %w", req, err)
		}
		return newGSSAPI(s.Kerberos, req), nil
	}
	if creds == nil {
		return nil, ErrNoCredentials
	}
	p, err := creds(ctx, cl, req)
	if err != nil {
		return nil, fmt.Errorf("credentials for %v: %w", req, err)
	}
	get := func(ctx context.Context) (auth.Credentials, error) {
		c, err := p.Credentials(ctx, req)
		if err != nil {
			return auth.Credentials{}, fmt.Errorf("credentials for %v: %w", req, err)
		}
		return c, nil
	}
	switch cl.SASLMechanism {
	case config.MechanismPlain:
		return plain.Plain(func(ctx context.Context) (plain.Auth, error) {
			c, err := get(ctx)
			return plain.Auth{User: c.Username, Pass: c.Password.Reveal()}, err
		}), nil
	case config.MechanismSCRAMSHA256, config.MechanismSCRAMSHA512:
		f := func(ctx context.Context) (scram.Auth, error) {
			c, err := get(ctx)
			return scram.Auth{User: c.Username, Pass: c.Password.Reveal(), IsToken: c.Extensions["tokenauth"] == "true"}, err
		}
		if cl.SASLMechanism == config.MechanismSCRAMSHA256 {
			return scram.Sha256(f), nil
		}
		return scram.Sha512(f), nil
	case config.MechanismOAuthBearer:
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			c, err := get(ctx)
			return oauth.Auth{Zid: c.Username, Token: c.Token.Reveal(), Extensions: c.Extensions}, err
		}), nil
	}
	return nil, fmt.Errorf("sasl.mechanism %q has no franz-go mechanism", cl.SASLMechanism)
}
