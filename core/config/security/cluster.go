package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/kmirror/kmirror/core/config/value"
	"github.com/kmirror/kmirror/sdk/auth"
)

var tlsVersions = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// Security protocols accepted by security.protocol.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// SASL mechanisms accepted by sasl.mechanism.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
	MechanismGSSAPI      = "GSSAPI"
)

// Keys holds the security keys of one cluster (security.protocol, sasl.*,
// ssl.*), as core/config decoded them. Use TLS and SASL rather than reading
// the fields directly: they resolve files, JAAS and inline PEM.
type Keys struct {
	SecurityProtocol string // security.protocol, one of the Protocol* constants
	SASLMechanism    string // sasl.mechanism, one of the Mechanism* constants

	SASLUsername     string      // sasl.username
	SASLPassword     auth.Secret // sasl.password
	SASLPasswordFile string      // sasl.password.file
	SASLJAASConfig   auth.Secret // sasl.jaas.config
	// SASLCredentialsPlugin names the auth plugin that supplies the
	// credentials (sasl.credentials.plugin); "" for credentials from the
	// keys above or sasl.oauthbearer.*.
	SASLCredentialsPlugin string

	OAuthTokenEndpointURL string      // sasl.oauthbearer.token.endpoint.url
	OAuthClientID         string      // sasl.oauthbearer.client.id
	OAuthClientSecret     auth.Secret // sasl.oauthbearer.client.secret
	OAuthScope            string      // sasl.oauthbearer.scope

	KerberosServiceName string // sasl.kerberos.service.name
	KerberosPrincipal   string // sasl.kerberos.principal
	KerberosKeytab      string // sasl.kerberos.keytab (path)
	KerberosKrb5Conf    string // sasl.kerberos.krb5.conf (path)

	TruststoreLocation              string      // ssl.truststore.location (PEM file)
	TruststoreType                  string      // ssl.truststore.type (PEM)
	TruststoreCertificates          string      // ssl.truststore.certificates (inline PEM)
	KeystoreLocation                string      // ssl.keystore.location (PEM file: chain + key)
	KeystoreType                    string      // ssl.keystore.type (PEM)
	KeystoreCertificateChain        string      // ssl.keystore.certificate.chain (inline PEM)
	KeystoreKey                     auth.Secret // ssl.keystore.key (inline PEM)
	KeyPassword                     auth.Secret // ssl.key.password
	EndpointIdentificationAlgorithm string      // ssl.endpoint.identification.algorithm: "https" or ""
	EnabledProtocols                []string    // ssl.enabled.protocols
}

// UsesTLS reports whether connections are encrypted (SSL or SASL_SSL).
func (c *Keys) UsesTLS() bool {
	return c.SecurityProtocol == ProtocolSSL || c.SecurityProtocol == ProtocolSASLSSL
}

// UsesSASL reports whether connections authenticate with SASL.
func (c *Keys) UsesSASL() bool {
	return c.SecurityProtocol == ProtocolSASLPlaintext || c.SecurityProtocol == ProtocolSASLSSL
}

// Problem is a validation finding about one key: core/config reports it
// under the key's path in the file.
type Problem struct {
	Key, Reason string
}

// Err returns the problem as an error: "key: reason".
func (p Problem) Err() error { return fmt.Errorf("%s: %s", p.Key, p.Reason) }

// SASL is a cluster's resolved SASL settings.
type SASL struct {
	// Mechanism is one of the Mechanism* constants, or "" when the
	// cluster's security.protocol does not use SASL.
	Mechanism string
	// Username and Password are set for PLAIN and SCRAM.
	Username string
	Password auth.Secret
	// OAuth is set for OAUTHBEARER.
	OAuth OAuth
	// Kerberos is set for GSSAPI.
	Kerberos Kerberos
}

// OAuth holds the client-credentials settings of an OAUTHBEARER cluster.
type OAuth struct {
	TokenEndpointURL string
	ClientID         string
	ClientSecret     auth.Secret
	Scope            string
}

// SASL resolves the cluster's SASL credentials from sasl.username with
// sasl.password or sasl.password.file, or from sasl.jaas.config. The password
// file is read at every call, so a rotated password is picked up by the next
// connection. Errors never contain a secret.
func (c *Keys) SASL() (SASL, error) {
	s, probs := c.ResolveSASL()
	if len(probs) > 0 {
		return SASL{}, probs[0].Err()
	}
	return s, nil
}

// ResolveSASL is SASL for validation: it returns every problem, each naming
// its key, rather than the first.
func (c *Keys) ResolveSASL() (SASL, []Problem) {
	if !c.UsesSASL() {
		return SASL{}, nil
	}
	var probs []Problem
	add := func(key, format string, args ...any) {
		probs = append(probs, Problem{key, fmt.Sprintf(format, args...)})
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
	if c.SASLCredentialsPlugin != "" {
		// The plugin supplies every credential: a key that would supply one
		// too is a contradiction, not a fallback.
		if k := firstSet(map[string]bool{
			"sasl.username": c.SASLUsername != "", "sasl.password": c.SASLPassword.IsSet(), "sasl.password.file": c.SASLPasswordFile != "",
			"sasl.jaas.config": c.SASLJAASConfig.IsSet(), "sasl.oauthbearer.token.endpoint.url": c.OAuthTokenEndpointURL != "",
			"sasl.oauthbearer.client.id": c.OAuthClientID != "", "sasl.oauthbearer.client.secret": c.OAuthClientSecret.IsSet(),
			"sasl.oauthbearer.scope": c.OAuthScope != "", "sasl.kerberos.principal": c.KerberosPrincipal != "", "sasl.kerberos.keytab": c.KerberosKeytab != "",
		}); k != "" {
			add(k, "set together with sasl.credentials.plugin, which supplies the credentials; remove one of them")
			return SASL{}, probs
		}
		if s.Mechanism == MechanismGSSAPI {
			add("sasl.credentials.plugin", "GSSAPI logs in with a keytab (sasl.kerberos.keytab and sasl.kerberos.principal), not through an auth plugin, which serves PLAIN, SCRAM and OAUTHBEARER; remove sasl.credentials.plugin")
			return SASL{}, probs
		}
		return s, nil
	}
	kerberosKeys := c.KerberosPrincipal != "" || c.KerberosKeytab != ""
	if kerberosKeys && s.Mechanism != MechanismGSSAPI {
		add(firstSet(map[string]bool{"sasl.kerberos.principal": c.KerberosPrincipal != "", "sasl.kerberos.keytab": c.KerberosKeytab != ""}),
			"applies to GSSAPI only, but sasl.mechanism is %s", s.Mechanism)
	}

	switch s.Mechanism {
	case MechanismGSSAPI:
		if k := firstSet(map[string]bool{
			"sasl.username": c.SASLUsername != "", "sasl.password": c.SASLPassword.IsSet(), "sasl.password.file": c.SASLPasswordFile != "",
			"sasl.oauthbearer.token.endpoint.url": c.OAuthTokenEndpointURL != "", "sasl.oauthbearer.client.id": c.OAuthClientID != "",
			"sasl.oauthbearer.client.secret": c.OAuthClientSecret.IsSet(), "sasl.oauthbearer.scope": c.OAuthScope != "",
		}); k != "" {
			add(k, "does not apply to GSSAPI, which logs in with sasl.kerberos.principal and sasl.kerberos.keytab")
		}
		var kp []Problem
		s.Kerberos, kp = c.resolveKerberos(jaas)
		probs = append(probs, kp...)
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
				s.OAuth.ClientSecret = auth.NewSecret(v)
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
			s.Password = auth.NewSecret(jaas.options["password"])
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

func readPasswordFile(path string) (auth.Secret, error) {
	b, err := value.ReadFile(path, value.MaxSecretFileBytes)
	if err != nil {
		return auth.Secret{}, fmt.Errorf("cannot read the password file: %v", err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return auth.Secret{}, fmt.Errorf("password file %s is empty", path)
	}
	return auth.NewSecret(pw), nil
}

// Describe names the cluster's security settings for a summary: the
// protocol, the SASL mechanism and user (or OAuth client), the CA, a client
// certificate, a disabled host name check. It never shows a secret.
func (c *Keys) Describe() []string {
	var sec []string
	sec = append(sec, c.SecurityProtocol)
	if c.UsesSASL() {
		mech := c.SASLMechanism
		switch {
		case c.SASLMechanism == MechanismOAuthBearer:
			if id := c.OAuthClientID; id != "" {
				mech += " client " + id
			}
		case c.SASLMechanism == MechanismGSSAPI:
			p := c.KerberosPrincipal
			if p == "" {
				p = c.kerberosJAAS().options["principal"]
			}
			if p != "" {
				mech += " principal " + p
			}
		case c.SASLUsername != "":
			mech += " user " + c.SASLUsername
		case c.SASLJAASConfig.IsSet():
			if j, err := parseJAAS(c.SASLJAASConfig.Reveal()); err == nil && j.options["username"] != "" {
				mech += " user " + j.options["username"]
			}
		}
		sec = append(sec, mech)
	}
	if c.UsesTLS() {
		switch {
		case c.TruststoreLocation != "":
			sec = append(sec, "CA "+c.TruststoreLocation)
		case c.TruststoreCertificates != "":
			sec = append(sec, "CA inline")
		default:
			sec = append(sec, "system CAs")
		}
		if c.KeystoreLocation != "" || c.KeystoreCertificateChain != "" {
			sec = append(sec, "client certificate")
		}
		if c.EndpointIdentificationAlgorithm == "" {
			sec = append(sec, "no hostname verification")
		}
	}
	return sec
}

// TLS is a cluster's resolved ssl.* settings: the truststore and keystore its
// keys name, read and checked, and the protocol versions. core/kclient
// builds the crypto/tls client configuration from it.
type TLS struct {
	// Roots verifies the brokers' certificate chains; nil means the
	// system roots (no truststore configured).
	Roots *x509.CertPool
	// Certificate is the client certificate for mutual TLS, or nil.
	Certificate *tls.Certificate
	// MinVersion and MaxVersion bound the TLS versions to
	// ssl.enabled.protocols, as crypto/tls version constants.
	MinVersion, MaxVersion uint16
	// VerifyHostname is ssl.endpoint.identification.algorithm=https: the
	// broker's certificate must name the host dialed. When false only the
	// chain is verified (Kafka's "" skips the host name check, not the
	// chain).
	VerifyHostname bool
}

// TLS resolves the cluster's TLS settings, or returns the zero TLS when
// security.protocol is PLAINTEXT or SASL_PLAINTEXT. Files are read at every
// call, so rotated certificates are picked up by the next client built.
// Errors name the key and never contain a private key.
func (c *Keys) TLS() (TLS, error) {
	t, probs := c.ResolveTLS()
	if len(probs) > 0 {
		return TLS{}, probs[0].Err()
	}
	return t, nil
}

// ResolveTLS is TLS for validation: it returns every problem, each naming
// its key, rather than the first.
func (c *Keys) ResolveTLS() (TLS, []Problem) {
	if !c.UsesTLS() {
		return TLS{}, nil
	}
	var probs []Problem
	t := TLS{VerifyHostname: c.EndpointIdentificationAlgorithm != ""}

	roots, p := c.loadRoots()
	probs = append(probs, p...)
	t.Roots = roots

	cert, p := c.loadClientCert()
	probs = append(probs, p...)
	t.Certificate = cert

	if len(c.EnabledProtocols) == 0 {
		probs = append(probs, Problem{"ssl.enabled.protocols", "must list at least one of TLSv1.2, TLSv1.3"})
	}
	for _, name := range c.EnabledProtocols {
		v, ok := tlsVersions[name]
		if !ok {
			probs = append(probs, Problem{"ssl.enabled.protocols", CheckTLSVersion(name).Error()})
			continue
		}
		if t.MinVersion == 0 || v < t.MinVersion {
			t.MinVersion = v
		}
		if v > t.MaxVersion {
			t.MaxVersion = v
		}
	}
	if len(probs) > 0 {
		return TLS{}, probs
	}
	return t, nil
}

// loadRoots returns the truststore, or nil for the system roots.
func (c *Keys) loadRoots() (*x509.CertPool, []Problem) {
	var data []byte
	var key, what string
	switch {
	case c.TruststoreLocation != "" && c.TruststoreCertificates != "":
		return nil, []Problem{{"ssl.truststore.certificates", "set either ssl.truststore.location or ssl.truststore.certificates, not both"}}
	case c.TruststoreLocation != "":
		key, what = "ssl.truststore.location", "file "+c.TruststoreLocation
		var err error
		if data, err = value.ReadFile(c.TruststoreLocation, value.MaxPEMFileBytes); err != nil {
			return nil, []Problem{{key, fmt.Sprintf("cannot read the truststore: %v", err)}}
		}
	case c.TruststoreCertificates != "":
		key, what, data = "ssl.truststore.certificates", "the value", []byte(c.TruststoreCertificates)
	default:
		return nil, nil
	}
	certs, err := parseCerts(data)
	if err != nil {
		return nil, []Problem{{key, fmt.Sprintf("%s: %v", what, err)}}
	}
	if len(certs) == 0 {
		return nil, []Problem{{key, what + " holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)"}}
	}
	pool := x509.NewCertPool()
	for _, ct := range certs {
		pool.AddCert(ct)
	}
	return pool, nil
}

// loadClientCert returns the client certificate for mutual TLS, or nil.
func (c *Keys) loadClientCert() (*tls.Certificate, []Problem) {
	var probs []Problem
	if c.KeyPassword.IsSet() {
		probs = append(probs, Problem{"ssl.key.password", "encrypted private keys are not supported: decrypt the key (openssl pkey -in key.pem -out key-plain.pem), protect the file with permissions, and remove ssl.key.password"})
	}
	inline := c.KeystoreCertificateChain != "" || c.KeystoreKey.IsSet()
	var certPEM, keyPEM []byte
	var key, what string
	switch {
	case c.KeystoreLocation != "" && inline:
		return nil, append(probs, Problem{"ssl.keystore.location", "set either ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key, not both"})
	case c.KeystoreLocation != "":
		key, what = "ssl.keystore.location", "file "+c.KeystoreLocation
		data, err := value.ReadFile(c.KeystoreLocation, value.MaxPEMFileBytes)
		if err != nil {
			return nil, append(probs, Problem{key, fmt.Sprintf("cannot read the keystore: %v", err)})
		}
		certPEM, keyPEM = data, data
	case inline:
		if c.KeystoreCertificateChain == "" {
			return nil, append(probs, Problem{"ssl.keystore.certificate.chain", "required with ssl.keystore.key"})
		}
		if !c.KeystoreKey.IsSet() {
			return nil, append(probs, Problem{"ssl.keystore.key", "required with ssl.keystore.certificate.chain"})
		}
		key, what = "ssl.keystore.certificate.chain", "the value"
		certPEM, keyPEM = []byte(c.KeystoreCertificateChain), []byte(c.KeystoreKey.Reveal())
	default:
		return nil, probs
	}
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, append(probs, Problem{key, fmt.Sprintf("%s: %v", what, err)})
	}
	if len(certs) == 0 {
		return nil, append(probs, Problem{key, what + " holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)"})
	}
	keyKey, keyWhat := key, what
	if c.KeystoreLocation == "" {
		keyKey, keyWhat = "ssl.keystore.key", "the value"
	}
	switch findKey(keyPEM) {
	case keyNone:
		return nil, append(probs, Problem{keyKey, keyWhat + " holds no PEM private key (expected a -----BEGIN PRIVATE KEY----- block)"})
	case keyEncrypted:
		return nil, append(probs, Problem{keyKey, keyWhat + " holds an encrypted private key, which is not supported: decrypt it (openssl pkey -in key.pem -out key-plain.pem) and protect the file with permissions"})
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, append(probs, Problem{keyKey, fmt.Sprintf("%s: certificate and private key do not form a pair: %v", keyWhat, err)})
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

// CheckTLSVersion checks one entry of ssl.enabled.protocols.
func CheckTLSVersion(s string) error {
	if _, ok := tlsVersions[s]; ok {
		return nil
	}
	switch s {
	case "TLSv1", "TLSv1.1", "SSLv3":
		return fmt.Errorf("%s is not supported: it is insecure; use TLSv1.2 and/or TLSv1.3", value.Quote(s))
	}
	return fmt.Errorf("unknown protocol %s; valid values: TLSv1.2, TLSv1.3", value.Quote(s))
}
