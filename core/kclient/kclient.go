package kclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/core/config"
)

// ErrTokenSourceRequired is returned by Opts and Mechanism for OAUTHBEARER
// clusters: tokens come from the auth plugin (client-credentials flow,
// refreshed before expiry), so the caller builds the SASL option from it and
// uses ConnOpts for everything else.
var ErrTokenSourceRequired = errors.New("OAUTHBEARER needs a token source from the auth plugin")

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
// SASL mechanism for PLAIN and SCRAM. Credentials are resolved at every
// connection, so a rotated sasl.password.file is picked up. For OAUTHBEARER
// it returns ErrTokenSourceRequired: use ConnOpts and the auth plugin's
// mechanism.
func Opts(cl *config.Cluster, opts ...Option) ([]kgo.Opt, error) {
	kopts, err := ConnOpts(cl, opts...)
	if err != nil {
		return nil, err
	}
	m, err := Mechanism(cl)
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
// security.protocol does not use SASL. The credentials are checked now and
// resolved again at every connection. For OAUTHBEARER it returns
// ErrTokenSourceRequired.
func Mechanism(cl *config.Cluster) (sasl.Mechanism, error) {
	if !cl.UsesSASL() {
		return nil, nil
	}
	if _, err := cl.SASL(); err != nil {
		return nil, err
	}
	cc := *cl // the closures below must not see later changes to cl
	switch cl.SASLMechanism {
	case config.MechanismPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			s, err := cc.SASL()
			return plain.Auth{User: s.Username, Pass: s.Password.Reveal()}, err
		}), nil
	case config.MechanismSCRAMSHA256, config.MechanismSCRAMSHA512:
		auth := func(context.Context) (scram.Auth, error) {
			s, err := cc.SASL()
			return scram.Auth{User: s.Username, Pass: s.Password.Reveal()}, err
		}
		if cl.SASLMechanism == config.MechanismSCRAMSHA256 {
			return scram.Sha256(auth), nil
		}
		return scram.Sha512(auth), nil
	case config.MechanismOAuthBearer:
		return nil, fmt.Errorf("cluster %s: %w", strings.Join(cl.BootstrapServers, ","), ErrTokenSourceRequired)
	}
	return nil, fmt.Errorf("sasl.mechanism %q has no franz-go mechanism", cl.SASLMechanism)
}
