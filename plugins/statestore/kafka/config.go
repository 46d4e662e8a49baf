package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/sdk/auth"
)

// ErrInvalidConfig: Open was given an invalid Config. The error names the
// configuration key.
var ErrInvalidConfig = errors.New("kafka state store: invalid configuration")

// Defaults of Config.
const (
	// DefaultTopic is the state topic's name: it starts with "__", so the
	// default mirror.topics.exclude (__.*) never mirrors it.
	DefaultTopic = "__kmirror_state"
	// DefaultPartitions is mirror.topic.num.partitions' default.
	DefaultPartitions = 50
	// DefaultReplicationFactor is mirror.topic.replication.factor's
	// default.
	DefaultReplicationFactor = 3
	// DefaultMaxMessageBytes is the largest record the store writes (a
	// value plus its key and a few bytes), and the topic's
	// max.message.bytes when the store creates it: 8 MiB.
	DefaultMaxMessageBytes = 8 << 20
)

// Config is the configuration of a Kafka state store. Start from
// DefaultConfig and set Brokers.
type Config struct {
	// Brokers are the bootstrap servers (host:port) of the cluster that
	// holds the state topic, normally the destination cluster. Required.
	Brokers []string
	// Topic is the compacted topic holding the state. Default
	// DefaultTopic.
	Topic string
	// Partitions is the topic's partition count when the store creates
	// it, and the count an existing topic must have (a key's partition is
	// a hash of the key modulo the count, so the count never changes).
	// Default 50.
	Partitions int
	// ReplicationFactor is the topic's replication factor when the store
	// creates it, and the least an existing topic must have. The store
	// refuses to create the topic with more replicas than the cluster has
	// brokers rather than silently lowering it. Default 3.
	ReplicationFactor int
	// TransactionalID is the transactional.id every client of the store
	// writes under; the store's compare-and-set rests on it (see the
	// package documentation). Every daemon sharing the topic must use the
	// same. Default "kmirror-state-" + Topic.
	TransactionalID string
	// MaxMessageBytes bounds the size of a record (so of a value), and is
	// the topic's max.message.bytes when the store creates it. Default 8
	// MiB.
	MaxMessageBytes int

	// TLS is on when any of CAFile, CertFile or KeyFile is set, or
	// SecurityProtocol says SSL/SASL_SSL. Empty CAFile with TLS on: the
	// system's roots.
	SecurityProtocol  string // PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
	CAFile            string
	CertFile, KeyFile string
	ServerName        string
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with
	// SASLUsername and either SASLPassword or SASLPasswordFile (read once
	// by Open; one trailing newline removed).
	SASLMechanism    string
	SASLUsername     string
	SASLPassword     auth.Secret
	SASLPasswordFile string

	// RequestTimeout bounds each operation's requests to Kafka, within
	// the caller's context, and Open's first contact. Default 10s.
	RequestTimeout time.Duration
	// TransactionTimeout is the transaction.timeout.ms of the store's
	// writes: how long a transaction left open by a client that died is
	// kept before the broker aborts it (a new writer aborts it at once).
	// Default 30s.
	TransactionTimeout time.Duration

	// dial replaces the network dialer (tests cut connections with it).
	dial func(ctx context.Context, network, host string) (net.Conn, error)
	// afterProduce, when set, runs after a write's record is produced
	// and before it is checked and committed (tests pause or cut a
	// writer there); beforeCommit right before the commit is sent.
	afterProduce, beforeCommit func()
}

// DefaultConfig returns the defaults of every field but Brokers.
func DefaultConfig() Config {
	return Config{
		Topic:              DefaultTopic,
		Partitions:         DefaultPartitions,
		ReplicationFactor:  DefaultReplicationFactor,
		MaxMessageBytes:    DefaultMaxMessageBytes,
		SecurityProtocol:   "PLAINTEXT",
		RequestTimeout:     10 * time.Second,
		TransactionTimeout: 30 * time.Second,
	}
}

// fieldError is a problem with one field of Config, named by its
// configuration key.
type fieldError struct {
	key    string
	reason string
}

func (e *fieldError) Error() string { return e.key + ": " + e.reason }

func bad(key, format string, args ...any) error {
	return &fieldError{key: key, reason: fmt.Sprintf(format, args...)}
}

// topicRE is what Kafka accepts as a topic name.
var topicRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

var (
	protocols  = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
	mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
)

// transactionalID is TransactionalID or its default.
func (c *Config) transactionalID() string {
	if c.TransactionalID != "" {
		return c.TransactionalID
	}
	return "kmirror-state-" + c.Topic
}

func (c *Config) sasl() bool { return strings.HasPrefix(c.SecurityProtocol, "SASL_") }

func (c *Config) tlsOn() bool {
	return strings.HasSuffix(c.SecurityProtocol, "SSL") || c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
}

// validate checks c; the error is a *fieldError and never holds the
// password.
func (c *Config) validate() error {
	if len(c.Brokers) == 0 {
		return bad(KeyBrokers, "at least one broker (host:port) is required")
	}
	for i, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return bad(KeyBrokers, "[%d] %q is not host:port", i, b)
		}
	}
	switch {
	case !topicRE.MatchString(c.Topic) || c.Topic == "." || c.Topic == "..":
		return bad(KeyTopic, "%q is not a valid Kafka topic name", c.Topic)
	case c.Partitions < 1 || c.Partitions > 10000:
		return bad(KeyPartitions, "%d: between 1 and 10000", c.Partitions)
	case c.ReplicationFactor < 1 || c.ReplicationFactor > 32767:
		return bad(KeyReplicationFactor, "%d: at least 1", c.ReplicationFactor)
	case c.TransactionalID != "" && strings.TrimSpace(c.TransactionalID) != c.TransactionalID:
		return bad(KeyTransactionalID, "%q has leading or trailing spaces", c.TransactionalID)
	case c.MaxMessageBytes < 1<<20 || c.MaxMessageBytes > 1<<30:
		return bad(KeyMaxMessageBytes, "%d: between 1 MiB and 1 GiB", c.MaxMessageBytes)
	case !slices.Contains(protocols, c.SecurityProtocol):
		return bad(KeySecurityProtocol, "%q: one of %s", c.SecurityProtocol, strings.Join(protocols, ", "))
	case (c.CertFile == "") != (c.KeyFile == ""):
		return bad(KeySSLKeyFile, "set ssl.cert_file and ssl.key_file both or neither")
	case c.tlsOn() && !strings.HasSuffix(c.SecurityProtocol, "SSL"):
		return bad(KeySecurityProtocol, "%s while ssl.* files are set; use SSL or SASL_SSL", c.SecurityProtocol)
	case c.RequestTimeout <= 0:
		return bad(KeyRequestTimeout, "%s: must be positive", c.RequestTimeout)
	case c.TransactionTimeout < time.Second:
		return bad(KeyTransactionTimeout, "%s: at least 1s", c.TransactionTimeout)
	}
	if c.sasl() {
		switch {
		case !slices.Contains(mechanisms, c.SASLMechanism):
			return bad(KeySASLMechanism, "%q: one of %s", c.SASLMechanism, strings.Join(mechanisms, ", "))
		case c.SASLUsername == "":
			return bad(KeySASLUsername, "required with %s", c.SecurityProtocol)
		case c.SASLPassword.IsSet() && c.SASLPasswordFile != "":
			return bad(KeySASLPasswordFile, "set one of sasl.password and sasl.password_file")
		case !c.SASLPassword.IsSet() && c.SASLPasswordFile == "":
			return bad(KeySASLPassword, "required with %s (or sasl.password_file)", c.SecurityProtocol)
		}
	} else if c.SASLMechanism != "" || c.SASLUsername != "" || c.SASLPassword.IsSet() || c.SASLPasswordFile != "" {
		return bad(KeySecurityProtocol, "%s while sasl.* keys are set; use SASL_PLAINTEXT or SASL_SSL", c.SecurityProtocol)
	}
	return nil
}

// clientOpts are the connection options every client of the store uses.
func (c *Config) clientOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID("kmirror-state"),
		kgo.RetryTimeout(c.RequestTimeout),
	}
	if c.dial != nil {
		opts = append(opts, kgo.Dialer(c.dial))
	}
	if c.tlsOn() {
		tc, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		if c.dial != nil {
			return nil, errors.New("a test dialer and TLS together are not supported")
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.sasl() {
		m, err := c.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (c *Config) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, &fieldError{key: KeySSLCAFile, reason: err.Error()}
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, bad(KeySSLCAFile, "%s holds no PEM certificate", c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, bad(KeySSLCertFile, "%s with ssl.key_file %s: %v", c.CertFile, c.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func (c *Config) password() (string, error) {
	if c.SASLPasswordFile == "" {
		return c.SASLPassword.Reveal(), nil
	}
	b, err := os.ReadFile(c.SASLPasswordFile)
	if err != nil {
		// os errors name the file, never its content.
		return "", &fieldError{key: KeySASLPasswordFile, reason: err.Error()}
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", bad(KeySASLPasswordFile, "%s is empty", c.SASLPasswordFile)
	}
	return pw, nil
}

func (c *Config) mechanism() (sasl.Mechanism, error) {
	pw, err := c.password()
	if err != nil {
		return nil, err
	}
	switch c.SASLMechanism {
	case "PLAIN":
		return plain.Auth{User: c.SASLUsername, Pass: pw}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.SASLUsername, Pass: pw}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: c.SASLUsername, Pass: pw}.AsSha512Mechanism(), nil
	}
}

// minInsyncReplicas is the topic's min.insync.replicas when the store
// creates it: 2 with three replicas or more (a write survives the loss of
// any one broker, and one broker may be down without stopping writes), 1
// below.
func minInsyncReplicas(rf int) int {
	if rf >= 3 {
		return 2
	}
	return 1
}
