package kafkatest

import (
	"errors"
	"fmt"
	"log"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Listener names a client listener of a test cluster. Client listeners are
// named after their security protocol.
type Listener string

// Listeners of a test cluster.
const (
	// Plaintext is always present; its clients are User:ANONYMOUS.
	Plaintext Listener = "PLAINTEXT"
	// SASLPlaintext is present when Options.SASL is set.
	SASLPlaintext Listener = "SASL_PLAINTEXT"
	// SSL is present when Options.TLS is set.
	SSL Listener = "SSL"
	// SASLSSL is present when both Options.SASL and Options.TLS are set.
	SASLSSL Listener = "SASL_SSL"
	// Proxied is present when Options.FaultProxies is set: a PLAINTEXT
	// listener each broker advertises at the address of its fault proxy
	// (Cluster.Proxy), so that its clients keep connecting through the
	// proxy. Its clients are User:ANONYMOUS.
	Proxied Listener = "PROXIED"
	// Internal is the inter-broker listener (SASL_PLAINTEXT, PLAIN); only
	// the cluster's own super user (AdminIdentity) can log in on it.
	Internal Listener = "INTERNAL"
	// controller is the KRaft controller listener; clients never use it.
	controller Listener = "CONTROLLER"
)

func (l Listener) sasl() bool { return l == SASLPlaintext || l == SASLSSL || l == Internal }
func (l Listener) tls() bool  { return l == SSL || l == SASLSSL }

// Mechanism is a SASL mechanism.
type Mechanism string

// SASL mechanisms a test cluster can enable.
const (
	Plain       Mechanism = "PLAIN"
	ScramSHA256 Mechanism = "SCRAM-SHA-256"
	ScramSHA512 Mechanism = "SCRAM-SHA-512"
	// OAuthBearer validates JWTs against a JWKS endpoint (Kafka's
	// OAuthBearerValidatorCallbackHandler); it needs SASLOptions.OAuth and
	// is not in AllMechanisms.
	OAuthBearer Mechanism = "OAUTHBEARER"
	// GSSAPI is Kerberos: the broker logs in with a keytab to a KDC the
	// test runs; it needs SASLOptions.Kerberos and is not in AllMechanisms.
	GSSAPI Mechanism = "GSSAPI"
)

// AllMechanisms lists every mechanism, the default of SASLOptions.Mechanisms.
var AllMechanisms = []Mechanism{Plain, ScramSHA256, ScramSHA512}

func (m Mechanism) scram() bool { return m == ScramSHA256 || m == ScramSHA512 }

// Options describe a test cluster. The zero value is a one-node cluster with
// a PLAINTEXT listener only.
type Options struct {
	// Name appears in logs and in the temporary directory's name.
	// Default "kafka".
	Name string
	// Brokers is the number of nodes, 1 or 3; each node is a combined
	// broker and controller. Default 1.
	Brokers int
	// Dist is the Kafka installation to run (ResolveVersion for another
	// version than the default; version.go). Default Resolve's.
	Dist *Dist
	// SASL adds the SASL_PLAINTEXT listener (and SASL_SSL with TLS).
	SASL *SASLOptions
	// TLS adds the SSL listener (and SASL_SSL with SASL).
	TLS *TLSOptions
	// Authorizer enables org.apache.kafka.metadata.authorizer.StandardAuthorizer.
	// The cluster's own super user (AdminIdentity) is always a super user.
	Authorizer bool
	// SuperUsers are extra super users, as principals ("User:alice").
	// Only meaningful with Authorizer.
	SuperUsers []string
	// BrokerConfig overrides or adds broker properties on every node, applied
	// after the harness's defaults (e.g. "transaction.max.timeout.ms").
	BrokerConfig map[string]string
	// NodeConfig overrides or adds broker properties on one node, by node
	// id, applied after BrokerConfig: e.g. a node whose log.dirs is a small
	// volume the test mounted (its metadata.log.dir elsewhere).
	NodeConfig map[int]map[string]string
	// JVMOptions are appended to the harness's JVM flags (-Xmx512m,
	// -XX:+UseSerialGC, -XX:TieredStopAtLevel=1, ...); HotSpot takes the
	// last occurrence of a flag, so they override.
	JVMOptions []string
	// FaultProxies adds the Proxied listener and starts a fault proxy
	// (package faultproxy) in front of it on every broker; Cluster.Proxy(i)
	// returns broker i's, whose faults only clients of the Proxied
	// listener see. The proxies' addresses do not change when a broker
	// restarts. Default false.
	FaultProxies bool
	// StartTimeout bounds how long Start and RestartBroker wait for brokers to
	// serve. Default 2 minutes.
	StartTimeout time.Duration
	// Logf receives the harness's progress lines. Default log.Printf.
	Logf func(format string, args ...any)
}

// SASLOptions configure the SASL listeners.
type SASLOptions struct {
	// Mechanisms enabled on the SASL listeners. Default AllMechanisms.
	Mechanisms []Mechanism
	// Users maps user names to passwords. Every user can log in with every
	// enabled mechanism: SCRAM credentials are written when storage is
	// formatted, PLAIN users are listed in the listener's JAAS config.
	// Names must match [A-Za-z][A-Za-z0-9_-]*, passwords [A-Za-z0-9._-]+.
	Users map[string]string
	// OAuth configures OAUTHBEARER; required when Mechanisms holds it.
	OAuth *OAuthOptions
	// Kerberos configures GSSAPI; required when Mechanisms holds it.
	Kerberos *KerberosOptions
}

// KerberosOptions configure GSSAPI on the SASL listeners: the brokers log in
// (Krb5LoginModule, in the listener's sasl.jaas.config) as Principal with
// the keys of Keytab, against the KDC that Krb5Conf names (the
// java.security.krb5.conf system property). Clients ask for a ticket to
// ServiceName/127.0.0.1, the host brokers advertise, so Principal is
// ServiceName/127.0.0.1@REALM. The KDC is the test's to run.
type KerberosOptions struct {
	Krb5Conf    string // path of krb5.conf
	Keytab      string // path of the brokers' keytab
	Principal   string // e.g. kafka/127.0.0.1@KMIRROR.TEST
	ServiceName string // sasl.kerberos.service.name; default "kafka"
}

// OAuthOptions configure how brokers validate OAUTHBEARER tokens: signed
// JWTs whose keys the broker reads from JWKSURL (allowed through the
// org.apache.kafka.sasl.oauthbearer.allowed.urls system property, which
// Kafka 4 requires). The token's "sub" claim is the principal (User:<sub>).
type OAuthOptions struct {
	JWKSURL string
	// Audience, when set, is the "aud" every token must carry.
	Audience string
	// Issuer, when set, is the "iss" every token must carry.
	Issuer string
}

// TLSOptions configure the SSL listeners. Certificates are generated when the
// cluster starts: a CA, one server certificate for 127.0.0.1 and localhost,
// and the client certificates named in ClientCerts.
type TLSOptions struct {
	// ClientAuth sets ssl.client.auth=required on the SSL listener.
	ClientAuth bool
	// ClientCerts names the client certificates to issue; the certificate
	// for "alice" has CN=alice and authenticates as User:alice.
	ClientCerts []string
}

var (
	nameRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)
	passwordRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// adminUser is the cluster's own super user on the INTERNAL and CONTROLLER
// listeners.
const adminUser = "kafkatest"

// ErrInvalidOptions is returned by Start for options it cannot run.
var ErrInvalidOptions = errors.New("kafkatest: invalid options")

// withDefaults returns a copy of o with defaults filled in, or an error
// wrapping ErrInvalidOptions.
func (o Options) withDefaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if o.Name == "" {
		o.Name = "kafka"
	}
	if !nameRE.MatchString(o.Name) {
		return bad("Name %q must match %s", o.Name, nameRE)
	}
	if o.Brokers == 0 {
		o.Brokers = 1
	}
	if o.Brokers != 1 && o.Brokers != 3 {
		return bad("Brokers is %d; use 1 or 3", o.Brokers)
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.SASL != nil {
		s := *o.SASL
		if len(s.Mechanisms) == 0 {
			s.Mechanisms = AllMechanisms
		}
		for _, m := range s.Mechanisms {
			if !slices.Contains(AllMechanisms, m) && m != OAuthBearer && m != GSSAPI {
				return bad("SASL mechanism %q is not one of %v, %s or %s", m, AllMechanisms, OAuthBearer, GSSAPI)
			}
		}
		if slices.Contains(s.Mechanisms, GSSAPI) != (s.Kerberos != nil) {
			return bad("SASL mechanism %s and SASLOptions.Kerberos go together", GSSAPI)
		}
		if k := s.Kerberos; k != nil {
			if k.Krb5Conf == "" || k.Keytab == "" || k.Principal == "" {
				return bad("SASLOptions.Kerberos needs Krb5Conf, Keytab and Principal")
			}
			kk := *k
			if kk.ServiceName == "" {
				kk.ServiceName = "kafka"
			}
			s.Kerberos = &kk
		}
		if slices.Contains(s.Mechanisms, OAuthBearer) != (s.OAuth != nil) {
			return bad("SASL mechanism %s and SASLOptions.OAuth go together", OAuthBearer)
		}
		if s.OAuth != nil && !strings.HasPrefix(s.OAuth.JWKSURL, "http") {
			return bad("SASLOptions.OAuth.JWKSURL %q is not an http(s) URL", s.OAuth.JWKSURL)
		}
		for u, p := range s.Users {
			if !nameRE.MatchString(u) {
				return bad("SASL user name %q must match %s", u, nameRE)
			}
			if u == adminUser {
				return bad("SASL user name %q is reserved for the harness's super user", u)
			}
			if !passwordRE.MatchString(p) {
				return bad("password of SASL user %q must match %s", u, passwordRE)
			}
		}
		o.SASL = &s
	}
	if o.TLS != nil {
		t := *o.TLS
		for _, n := range t.ClientCerts {
			if !nameRE.MatchString(n) {
				return bad("client certificate name %q must match %s", n, nameRE)
			}
		}
		o.TLS = &t
	}
	for _, su := range o.SuperUsers {
		if !strings.Contains(su, ":") || strings.Contains(su, ";") {
			return bad("super user %q must be a principal like User:alice", su)
		}
	}
	if len(o.SuperUsers) > 0 && !o.Authorizer {
		return bad("SuperUsers is set but Authorizer is not")
	}
	return o, nil
}

// listeners returns the client listeners the options ask for, in a fixed order.
func (o Options) listeners() []Listener {
	ls := []Listener{Plaintext}
	if o.SASL != nil {
		ls = append(ls, SASLPlaintext)
	}
	if o.TLS != nil {
		ls = append(ls, SSL)
	}
	if o.SASL != nil && o.TLS != nil {
		ls = append(ls, SASLSSL)
	}
	if o.FaultProxies {
		ls = append(ls, Proxied)
	}
	return ls
}
