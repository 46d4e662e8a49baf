package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ErrTokenSourceRequired is returned by KgoOpts for OAUTHBEARER clusters:
// tokens come from the auth plugin (client-credentials flow, refreshed
// before expiry), so the caller builds the SASL option from it and uses
// KgoConnOpts for everything else.
var ErrTokenSourceRequired = errors.New("OAUTHBEARER needs a token source from the auth plugin")

var tlsVersions = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// problem is a validation finding about one key of a cluster.
type problem struct {
	key, reason string
}

func (p problem) error() error { return fmt.Errorf("%s: %s", p.key, p.reason) }

// SASL is a cluster's resolved SASL settings.
type SASL struct {
	// Mechanism is one of the Mechanism* constants, or "" when the
	// cluster's security.protocol does not use SASL.
	Mechanism string
	// Username and Password are set for PLAIN and SCRAM.
	Username string
	Password Secret
	// OAuth is set for OAUTHBEARER.
	OAuth OAuth
}

// OAuth holds the client-credentials settings of an OAUTHBEARER cluster.
type OAuth struct {
	TokenEndpointURL string
	ClientID         string
	ClientSecret     Secret
	Scope            string
}

// SASL resolves the cluster's SASL credentials from sasl.username with
// sasl.password or sasl.password.file, or from sasl.jaas.config. The password
// file is read at every call, so a rotated password is picked up by the next
// connection. Errors never contain a secret.
func (c *Cluster) SASL() (SASL, error) {
	s, probs := c.resolveSASL()
	if len(probs) > 0 {
		return SASL{}, probs[0].error()
	}
	return s, nil
}

func (c *Cluster) resolveSASL() (SASL, []problem) {
	if !c.UsesSASL() {
		return SASL{}, nil
	}
	var probs []problem
	add := func(key, format string, args ...any) {
		probs = append(probs, problem{key, fmt.Sprintf(format, args...)})
	}
	s := SASL{Mechanism: c.SASLMechanism}

	var jaas jaasConfig
	if c.SASLJAASConfig.IsSet() {
		var err error
		if jaas, err = parseJAAS(c.SASLJAASConfig.Reveal()); err != nil {
			add("sasl.jaas.config", "%v", err)
			return SASL{}, probs
		}
		if want := jaasModuleFor(s.Mechanism); jaas.module != want {
			add("sasl.jaas.config", "login module %s does not match sasl.mechanism %s; use %s", jaas.module, s.Mechanism, want)
			return SASL{}, probs
		}
	}

	userKeys := c.SASLUsername != "" || c.SASLPassword.IsSet() || c.SASLPasswordFile != ""
	oauthKeys := c.OAuthTokenEndpointURL != "" || c.OAuthClientID != "" || c.OAuthClientSecret.IsSet() || c.OAuthScope != ""

	switch s.Mechanism {
	case MechanismOAuthBearer:
		if userKeys {
			add(firstSet(map[string]bool{"sasl.username": c.SASLUsername != "", "sasl.password": c.SASLPassword.IsSet(), "sasl.password.file": c.SASLPasswordFile != ""}),
				"applies to PLAIN and SCRAM only, but sasl.mechanism is OAUTHBEARER")
		}
		s.OAuth = OAuth{TokenEndpointURL: c.OAuthTokenEndpointURL, ClientID: c.OAuthClientID, ClientSecret: c.OAuthClientSecret, Scope: c.OAuthScope}
		if c.SASLJAASConfig.IsSet() {
			for opt, dst := range map[string]*string{"clientId": &s.OAuth.ClientID, "scope": &s.OAuth.Scope} {
				if v, ok := jaas.options[opt]; ok {
					if *dst != "" {
						add("sasl.jaas.config", "sets %s, which sasl.oauthbearer.* also sets; keep one", opt)
					}
					*dst = v
				}
			}
			if v, ok := jaas.options["clientSecret"]; ok {
				if s.OAuth.ClientSecret.IsSet() {
					add("sasl.jaas.config", "sets clientSecret, which sasl.oauthbearer.client.secret also sets; keep one")
				}
				s.OAuth.ClientSecret = NewSecret(v)
			}
		}
		if s.OAuth.TokenEndpointURL == "" {
			add("sasl.oauthbearer.token.endpoint.url", "required for OAUTHBEARER: the token endpoint of the client-credentials flow")
		}
		if s.OAuth.ClientID == "" {
			add("sasl.oauthbearer.client.id", "required for OAUTHBEARER (or clientId in sasl.jaas.config)")
		}
		if !s.OAuth.ClientSecret.IsSet() {
			add("sasl.oauthbearer.client.secret", "required for OAUTHBEARER (or clientSecret in sasl.jaas.config)")
		}
	default: // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
		if oauthKeys {
			add(firstSet(map[string]bool{"sasl.oauthbearer.token.endpoint.url": c.OAuthTokenEndpointURL != "", "sasl.oauthbearer.client.id": c.OAuthClientID != "", "sasl.oauthbearer.client.secret": c.OAuthClientSecret.IsSet(), "sasl.oauthbearer.scope": c.OAuthScope != ""}),
				"applies to OAUTHBEARER only, but sasl.mechanism is %s", s.Mechanism)
		}
		switch {
		case c.SASLJAASConfig.IsSet() && userKeys:
			add("sasl.jaas.config", "set either sasl.jaas.config or sasl.username with sasl.password (or sasl.password.file), not both")
		case c.SASLJAASConfig.IsSet():
			s.Username = jaas.options["username"]
			s.Password = NewSecret(jaas.options["password"])
			if s.Username == "" {
				add("sasl.jaas.config", "has no username option")
			}
			if !s.Password.IsSet() {
				add("sasl.jaas.config", "has no password option")
			}
		case !userKeys:
			add("sasl.username", "SASL %s needs credentials: set sasl.username with sasl.password or sasl.password.file, or sasl.jaas.config", s.Mechanism)
		default:
			s.Username = c.SASLUsername
			if s.Username == "" {
				add("sasl.username", "required with sasl.password or sasl.password.file")
			}
			switch {
			case c.SASLPassword.IsSet() && c.SASLPasswordFile != "":
				add("sasl.password.file", "set either sasl.password or sasl.password.file, not both")
			case c.SASLPassword.IsSet():
				s.Password = c.SASLPassword
			case c.SASLPasswordFile != "":
				pw, err := readPasswordFile(c.SASLPasswordFile)
				if err != nil {
					add("sasl.password.file", "%v", err)
				}
				s.Password = pw
			default:
				add("sasl.password", "required with sasl.username (or set sasl.password.file)")
			}
		}
	}
	if len(probs) > 0 {
		return SASL{}, probs
	}
	return s, nil
}

// firstSet returns the alphabetically first key whose flag is true.
func firstSet(set map[string]bool) string {
	first := ""
	for k, v := range set {
		if v && (first == "" || k < first) {
			first = k
		}
	}
	return first
}

func readPasswordFile(path string) (Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Secret{}, fmt.Errorf("cannot read the password file: %v", err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return Secret{}, fmt.Errorf("password file %s is empty", path)
	}
	return NewSecret(pw), nil
}

// TLSConfig builds the TLS client configuration, or returns nil when
// security.protocol is PLAINTEXT or SASL_PLAINTEXT. Files are read at every
// call, so rotated certificates are picked up by the next client built.
// ServerName is left empty: franz-go sets it per broker from the address it
// dials.
func (c *Cluster) TLSConfig() (*tls.Config, error) {
	cfg, probs := c.resolveTLS()
	if len(probs) > 0 {
		return nil, probs[0].error()
	}
	return cfg, nil
}

func (c *Cluster) resolveTLS() (*tls.Config, []problem) {
	if !c.UsesTLS() {
		return nil, nil
	}
	var probs []problem
	cfg := &tls.Config{}

	roots, p := c.loadRoots()
	probs = append(probs, p...)
	cfg.RootCAs = roots

	cert, p := c.loadClientCert()
	probs = append(probs, p...)
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}

	if len(c.EnabledProtocols) == 0 {
		probs = append(probs, problem{"ssl.enabled.protocols", "must list at least one of TLSv1.2, TLSv1.3"})
	}
	for _, name := range c.EnabledProtocols {
		v, ok := tlsVersions[name]
		if !ok {
			probs = append(probs, problem{"ssl.enabled.protocols", checkTLSVersion(name).Error()})
			continue
		}
		if cfg.MinVersion == 0 || v < cfg.MinVersion {
			cfg.MinVersion = v
		}
		if v > cfg.MaxVersion {
			cfg.MaxVersion = v
		}
	}

	if c.EndpointIdentificationAlgorithm == "" {
		// Kafka's "" skips only the host name check; the chain is still
		// verified. Go can skip both or neither, so verify the chain here.
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
	if len(probs) > 0 {
		return nil, probs
	}
	return cfg, nil
}

// loadRoots returns the truststore, or nil for the system roots.
func (c *Cluster) loadRoots() (*x509.CertPool, []problem) {
	var data []byte
	var key, what string
	switch {
	case c.TruststoreLocation != "" && c.TruststoreCertificates != "":
		return nil, []problem{{"ssl.truststore.certificates", "set either ssl.truststore.location or ssl.truststore.certificates, not both"}}
	case c.TruststoreLocation != "":
		key, what = "ssl.truststore.location", "file "+c.TruststoreLocation
		var err error
		if data, err = os.ReadFile(c.TruststoreLocation); err != nil {
			return nil, []problem{{key, fmt.Sprintf("cannot read the truststore: %v", err)}}
		}
	case c.TruststoreCertificates != "":
		key, what, data = "ssl.truststore.certificates", "the value", []byte(c.TruststoreCertificates)
	default:
		return nil, nil
	}
	certs, err := parseCerts(data)
	if err != nil {
		return nil, []problem{{key, fmt.Sprintf("%s: %v", what, err)}}
	}
	if len(certs) == 0 {
		return nil, []problem{{key, what + " holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)"}}
	}
	pool := x509.NewCertPool()
	for _, ct := range certs {
		pool.AddCert(ct)
	}
	return pool, nil
}

// loadClientCert returns the client certificate for mutual TLS, or nil.
func (c *Cluster) loadClientCert() (*tls.Certificate, []problem) {
	var probs []problem
	if c.KeyPassword.IsSet() {
		probs = append(probs, problem{"ssl.key.password", "encrypted private keys are not supported: decrypt the key (openssl pkey -in key.pem -out key-plain.pem), protect the file with permissions, and remove ssl.key.password"})
	}
	inline := c.KeystoreCertificateChain != "" || c.KeystoreKey.IsSet()
	var certPEM, keyPEM []byte
	var key, what string
	switch {
	case c.KeystoreLocation != "" && inline:
		return nil, append(probs, problem{"ssl.keystore.location", "set either ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key, not both"})
	case c.KeystoreLocation != "":
		key, what = "ssl.keystore.location", "file "+c.KeystoreLocation
		data, err := os.ReadFile(c.KeystoreLocation)
		if err != nil {
			return nil, append(probs, problem{key, fmt.Sprintf("cannot read the keystore: %v", err)})
		}
		certPEM, keyPEM = data, data
	case inline:
		if c.KeystoreCertificateChain == "" {
			return nil, append(probs, problem{"ssl.keystore.certificate.chain", "required with ssl.keystore.key"})
		}
		if !c.KeystoreKey.IsSet() {
			return nil, append(probs, problem{"ssl.keystore.key", "required with ssl.keystore.certificate.chain"})
		}
		key, what = "ssl.keystore.certificate.chain", "the value"
		certPEM, keyPEM = []byte(c.KeystoreCertificateChain), []byte(c.KeystoreKey.Reveal())
	default:
		return nil, probs
	}
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, append(probs, problem{key, fmt.Sprintf("%s: %v", what, err)})
	}
	if len(certs) == 0 {
		return nil, append(probs, problem{key, what + " holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)"})
	}
	keyKey, keyWhat := key, what
	if c.KeystoreLocation == "" {
		keyKey, keyWhat = "ssl.keystore.key", "the value"
	}
	switch findKey(keyPEM) {
	case keyNone:
		return nil, append(probs, problem{keyKey, keyWhat + " holds no PEM private key (expected a -----BEGIN PRIVATE KEY----- block)"})
	case keyEncrypted:
		return nil, append(probs, problem{keyKey, keyWhat + " holds an encrypted private key, which is not supported: decrypt it (openssl pkey -in key.pem -out key-plain.pem) and protect the file with permissions"})
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, append(probs, problem{keyKey, fmt.Sprintf("%s: certificate and private key do not form a pair: %v", keyWhat, err)})
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return &pair, nil
}

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		ct, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d is not a valid certificate: %v", n, err)
		}
		certs = append(certs, ct)
	}
}

type keyKind int

const (
	keyNone keyKind = iota
	keyPlain
	keyEncrypted
)

func findKey(data []byte) keyKind {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return keyNone
		}
		if block.Type == "ENCRYPTED PRIVATE KEY" || (strings.HasSuffix(block.Type, "PRIVATE KEY") && strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED")) {
			return keyEncrypted
		}
		if strings.HasSuffix(block.Type, "PRIVATE KEY") {
			return keyPlain
		}
	}
}

// KgoConnOpts returns the franz-go options that connect to the cluster:
// seed brokers, client id and the TLS dialer. It adds no SASL mechanism.
func (c *Cluster) KgoConnOpts() ([]kgo.Opt, error) {
	return c.kgoConnOpts(nil)
}

// SocketOptions are the TCP settings of a client's connections
// (send.buffer.bytes, receive.buffer.bytes, replica.socket.receive.buffer.bytes
// and socket.connection.setup.timeout.ms). A buffer size of -1 or 0 keeps the
// operating system's default.
type SocketOptions struct {
	SendBuffer    int
	ReceiveBuffer int
	DialTimeout   time.Duration
}

// KgoOptsWithSockets is KgoOpts with connections dialed by kmirror's own
// dialer, which applies so and then TLS (franz-go takes either a TLS
// configuration or a dialer, not both).
func (c *Cluster) KgoOptsWithSockets(so SocketOptions) ([]kgo.Opt, error) {
	opts, err := c.kgoConnOpts(&so)
	if err != nil {
		return nil, err
	}
	sasl, err := c.saslOpts()
	if err != nil {
		return nil, err
	}
	return append(opts, sasl...), nil
}

func (c *Cluster) kgoConnOpts(so *SocketOptions) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.BootstrapServers...)}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	tc, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	switch {
	case so != nil:
		opts = append(opts, kgo.Dialer(Dialer(*so, tc)))
	case tc != nil:
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	return opts, nil
}

// Dialer returns a dial function that opens a TCP connection with so's buffer
// sizes and timeout and, when tc is not nil, runs the TLS handshake on it (the
// server name defaults to the host dialed, as franz-go's own TLS dialing does).
func Dialer(so SocketOptions, tc *tls.Config) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: so.DialTimeout}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			if so.SendBuffer > 0 {
				_ = tcp.SetWriteBuffer(so.SendBuffer)
			}
			if so.ReceiveBuffer > 0 {
				_ = tcp.SetReadBuffer(so.ReceiveBuffer)
			}
		}
		if tc == nil {
			return conn, nil
		}
		cfg := tc.Clone()
		if cfg.ServerName == "" {
			if h, _, err := net.SplitHostPort(host); err == nil {
				cfg.ServerName = h
			}
		}
		tlsConn := tls.Client(conn, cfg)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tlsConn, nil
	}
}

// KgoOpts returns KgoConnOpts plus the SASL mechanism for PLAIN and SCRAM.
// Credentials are resolved at every connection, so a rotated
// sasl.password.file is picked up. For OAUTHBEARER it returns
// ErrTokenSourceRequired: use KgoConnOpts and the auth plugin's mechanism.
func (c *Cluster) KgoOpts() ([]kgo.Opt, error) {
	opts, err := c.KgoConnOpts()
	if err != nil {
		return nil, err
	}
	sasl, err := c.saslOpts()
	if err != nil {
		return nil, err
	}
	return append(opts, sasl...), nil
}

// saslOpts returns the franz-go SASL option of the cluster, if it uses SASL.
func (c *Cluster) saslOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if !c.UsesSASL() {
		return opts, nil
	}
	if _, err := c.SASL(); err != nil {
		return nil, err
	}
	cc := *c // the closures below must not see later changes to c
	switch c.SASLMechanism {
	case MechanismPlain:
		opts = append(opts, kgo.SASL(plain.Plain(func(context.Context) (plain.Auth, error) {
			s, err := cc.SASL()
			return plain.Auth{User: s.Username, Pass: s.Password.Reveal()}, err
		})))
	case MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		auth := func(context.Context) (scram.Auth, error) {
			s, err := cc.SASL()
			return scram.Auth{User: s.Username, Pass: s.Password.Reveal()}, err
		}
		if c.SASLMechanism == MechanismSCRAMSHA256 {
			opts = append(opts, kgo.SASL(scram.Sha256(auth)))
		} else {
			opts = append(opts, kgo.SASL(scram.Sha512(auth)))
		}
	case MechanismOAuthBearer:
		return nil, fmt.Errorf("cluster %s: %w", strings.Join(c.BootstrapServers, ","), ErrTokenSourceRequired)
	default:
		return nil, fmt.Errorf("sasl.mechanism %q has no franz-go mechanism", c.SASLMechanism)
	}
	return opts, nil
}
