package kafka

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// The configuration keys of the Kafka store as a plugin (Schema), one per
// Config field. The partition count and replication factor carry the names
// KIP-1279 gives the mirror state topic's.
const (
	KeyBrokers            = "bootstrap.servers"
	KeyTopic              = "topic"
	KeyPartitions         = "mirror.topic.num.partitions"
	KeyReplicationFactor  = "mirror.topic.replication.factor"
	KeyTransactionalID    = "transactional.id"
	KeyMaxMessageBytes    = "max.message.bytes"
	KeySecurityProtocol   = "security.protocol"
	KeySSLCAFile          = "ssl.ca_file"
	KeySSLCertFile        = "ssl.cert_file"
	KeySSLKeyFile         = "ssl.key_file"
	KeySSLServerName      = "ssl.server_name"
	KeySASLMechanism      = "sasl.mechanism"
	KeySASLUsername       = "sasl.username"
	KeySASLPassword       = "sasl.password"
	KeySASLPasswordFile   = "sasl.password_file"
	KeyRequestTimeout     = "request.timeout"
	KeyTransactionTimeout = "transaction.timeout"
)

// Schema declares the Kafka store's configuration as a plugin.
var Schema = plugin.Schema{
	{Name: KeyBrokers, Type: plugin.FieldStringList, Required: true, Description: "bootstrap servers (host:port) of the cluster holding the state topic, normally the destination cluster"},
	{Name: KeyTopic, Type: plugin.FieldString, Default: DefaultTopic, Description: "the compacted state topic; created if missing"},
	{Name: KeyPartitions, Type: plugin.FieldInt, Default: strconv.Itoa(DefaultPartitions), Description: "partitions of the state topic when created; an existing topic must have exactly this many"},
	{Name: KeyReplicationFactor, Type: plugin.FieldInt, Default: strconv.Itoa(DefaultReplicationFactor), Description: "replication factor of the state topic when created (refused if the cluster has fewer brokers); an existing topic must have at least this many replicas"},
	{Name: KeyTransactionalID, Type: plugin.FieldString, Default: "kmirror-state-<topic>", Description: "transactional.id of the store's writes; the same for every daemon sharing the topic"},
	{Name: KeyMaxMessageBytes, Type: plugin.FieldInt, Default: strconv.Itoa(DefaultMaxMessageBytes), Description: "largest record (value) the store writes; the topic's max.message.bytes when created"},
	{Name: KeySecurityProtocol, Type: plugin.FieldString, Default: "PLAINTEXT", Description: "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"},
	{Name: KeySSLCAFile, Type: plugin.FieldString, Description: "PEM file of the CAs that sign the brokers' certificates (default: the system's roots)"},
	{Name: KeySSLCertFile, Type: plugin.FieldString, Description: "PEM client certificate (mutual TLS); with ssl.key_file"},
	{Name: KeySSLKeyFile, Type: plugin.FieldString, Description: "PEM private key of ssl.cert_file"},
	{Name: KeySSLServerName, Type: plugin.FieldString, Description: "name checked in the brokers' certificates; default: the broker's host"},
	{Name: KeySASLMechanism, Type: plugin.FieldString, Description: "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with SASL_* protocols"},
	{Name: KeySASLUsername, Type: plugin.FieldString, Description: "SASL user"},
	{Name: KeySASLPassword, Type: plugin.FieldString, Secret: true, Description: "the SASL user's password; or sasl.password_file"},
	{Name: KeySASLPasswordFile, Type: plugin.FieldString, Description: "a file holding the SASL password (one trailing newline removed), read at start"},
	{Name: KeyRequestTimeout, Type: plugin.FieldDuration, Default: "10s", Description: "bound on each operation's requests to Kafka, and on the first contact at start"},
	{Name: KeyTransactionTimeout, Type: plugin.FieldDuration, Default: "30s", Description: "transaction.timeout.ms of the store's writes: how long the brokers keep a dead writer's open transaction (a new writer aborts it at once)"},
}

// NewFromConfig opens the store from a plugin configuration block (the
// keys of Schema); it is the constructor of
// plugin.ServeConfig.NewStateStore. An invalid block is refused with a
// *plugin.ConfigError naming each key, which never holds the password;
// Open's own errors (cluster unreachable, topic of the wrong shape) come
// back as they are.
func NewFromConfig(ctx context.Context, _ string, cfg plugin.Config) (statestore.Store, error) {
	c, err := ConfigFromPlugin(cfg)
	if err != nil {
		return nil, err
	}
	return Open(ctx, c)
}

// ConfigFromPlugin decodes and checks a plugin configuration block into a
// Config (DefaultConfig for absent keys). Errors are *plugin.ConfigError
// values naming the key.
func ConfigFromPlugin(cfg plugin.Config) (Config, error) {
	if err := Schema.Validate(cfg); err != nil {
		return Config{}, err
	}
	var raw struct {
		Brokers            []string `json:"bootstrap.servers"`
		Topic              *string  `json:"topic"`
		Partitions         *int     `json:"mirror.topic.num.partitions"`
		ReplicationFactor  *int     `json:"mirror.topic.replication.factor"`
		TransactionalID    string   `json:"transactional.id"`
		MaxMessageBytes    *int     `json:"max.message.bytes"`
		SecurityProtocol   *string  `json:"security.protocol"`
		CAFile             string   `json:"ssl.ca_file"`
		CertFile           string   `json:"ssl.cert_file"`
		KeyFile            string   `json:"ssl.key_file"`
		ServerName         string   `json:"ssl.server_name"`
		SASLMechanism      string   `json:"sasl.mechanism"`
		SASLUsername       string   `json:"sasl.username"`
		SASLPassword       *string  `json:"sasl.password"`
		SASLPasswordFile   string   `json:"sasl.password_file"`
		RequestTimeout     string   `json:"request.timeout"`
		TransactionTimeout string   `json:"transaction.timeout"`
	}
	if err := cfg.Decode(&raw); err != nil {
		return Config{}, err
	}
	c := DefaultConfig()
	c.Brokers, c.TransactionalID = raw.Brokers, raw.TransactionalID
	c.CAFile, c.CertFile, c.KeyFile, c.ServerName = raw.CAFile, raw.CertFile, raw.KeyFile, raw.ServerName
	c.SASLMechanism, c.SASLUsername, c.SASLPasswordFile = raw.SASLMechanism, raw.SASLUsername, raw.SASLPasswordFile
	if raw.Topic != nil {
		c.Topic = *raw.Topic
	}
	if raw.Partitions != nil {
		c.Partitions = *raw.Partitions
	}
	if raw.ReplicationFactor != nil {
		c.ReplicationFactor = *raw.ReplicationFactor
	}
	if raw.MaxMessageBytes != nil {
		c.MaxMessageBytes = *raw.MaxMessageBytes
	}
	if raw.SecurityProtocol != nil {
		c.SecurityProtocol = *raw.SecurityProtocol
	}
	if raw.SASLPassword != nil {
		c.SASLPassword = auth.NewSecret(*raw.SASLPassword)
	}
	if raw.RequestTimeout != "" {
		c.RequestTimeout, _ = time.ParseDuration(raw.RequestTimeout) // checked by Schema.Validate
	}
	if raw.TransactionTimeout != "" {
		c.TransactionTimeout, _ = time.ParseDuration(raw.TransactionTimeout)
	}
	err := c.validate()
	if err == nil && c.tlsOn() {
		_, err = c.tlsConfig()
	}
	if err == nil && c.sasl() {
		_, err = c.password()
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return Config{}, &plugin.ConfigError{Problems: []plugin.Problem{{Key: fe.key, Reason: fe.reason}}}
	}
	if err != nil {
		return Config{}, err
	}
	return c, nil
}
