package kafka

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/testpki"
	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

func TestSchemaIsValid(t *testing.T) {
	t.Parallel()
	if err := Schema.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigFromPlugin(t *testing.T) {
	t.Parallel()
	pw := testpki.WriteFile(t, t.TempDir(), "pw", "from-file\n")
	got, err := ConfigFromPlugin(plugin.Config{
		"bootstrap.servers":               []any{"a:9092", "b:9092"},
		"topic":                           "kmirror.state",
		"mirror.topic.num.partitions":     float64(12),
		"mirror.topic.replication.factor": float64(1),
		"transactional.id":                "kmirror-prod-state",
		"max.message.bytes":               float64(2 << 20),
		"security.protocol":               "SASL_PLAINTEXT",
		"sasl.mechanism":                  "SCRAM-SHA-512",
		"sasl.username":                   "kmirror",
		"sasl.password_file":              pw,
		"request.timeout":                 "3s",
		"transaction.timeout":             "20s",
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Brokers, ",") != "a:9092,b:9092" || got.Topic != "kmirror.state" || got.Partitions != 12 ||
		got.ReplicationFactor != 1 || got.transactionalID() != "kmirror-prod-state" || got.MaxMessageBytes != 2<<20 ||
		got.SecurityProtocol != "SASL_PLAINTEXT" || got.SASLMechanism != "SCRAM-SHA-512" || got.SASLUsername != "kmirror" ||
		got.SASLPasswordFile != pw || got.RequestTimeout != 3*time.Second || got.TransactionTimeout != 20*time.Second {
		t.Fatalf("ConfigFromPlugin = %+v", got)
	}

	defaults, err := ConfigFromPlugin(plugin.Config{"bootstrap.servers": []any{"h:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if defaults.Topic != DefaultTopic || defaults.Partitions != 50 || defaults.ReplicationFactor != 3 ||
		defaults.transactionalID() != "kmirror-state-__kmirror_state" || defaults.SecurityProtocol != "PLAINTEXT" {
		t.Fatalf("absent keys: %+v, want the defaults (50 partitions, replication factor 3)", defaults)
	}
	secret, err := ConfigFromPlugin(plugin.Config{"bootstrap.servers": []any{"h:1"}, "security.protocol": "SASL_PLAINTEXT",
		"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "pw-in-config"})
	if err != nil || secret.SASLPassword != auth.NewSecret("pw-in-config") {
		t.Fatalf("password in the config: %+v, %v", secret, err)
	}
}

func TestConfigFromPluginRefusesNamingTheKey(t *testing.T) {
	t.Parallel()
	const secret = "pw-never-printed"
	h := []any{"h:1"}
	for _, c := range []struct {
		cfg plugin.Config
		key string
	}{
		{plugin.Config{}, KeyBrokers},
		{plugin.Config{"bootstrap.servers": []any{}}, KeyBrokers},
		{plugin.Config{"bootstrap.servers": []any{"no-port"}}, KeyBrokers},
		{plugin.Config{"bootstrap.servers": h, "topic": "a/b"}, KeyTopic},
		{plugin.Config{"bootstrap.servers": h, "mirror.topic.num.partitions": float64(0)}, KeyPartitions},
		{plugin.Config{"bootstrap.servers": h, "mirror.topic.replication.factor": float64(0)}, KeyReplicationFactor},
		{plugin.Config{"bootstrap.servers": h, "max.message.bytes": float64(10)}, KeyMaxMessageBytes},
		{plugin.Config{"bootstrap.servers": h, "security.protocol": "TLS"}, KeySecurityProtocol},
		{plugin.Config{"bootstrap.servers": h, "sasl.password": secret}, KeySecurityProtocol},
		{plugin.Config{"bootstrap.servers": h, "security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": secret}, KeySASLMechanism},
		{plugin.Config{"bootstrap.servers": h, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.password": secret}, KeySASLUsername},
		{plugin.Config{"bootstrap.servers": h, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u"}, KeySASLPassword},
		{plugin.Config{"bootstrap.servers": h, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": secret, "sasl.password_file": "/pw"}, KeySASLPasswordFile},
		{plugin.Config{"bootstrap.servers": h, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password_file": "/nonexistent/pw"}, KeySASLPasswordFile},
		{plugin.Config{"bootstrap.servers": h, "security.protocol": "SSL", "ssl.cert_file": "/c"}, KeySSLKeyFile},
		{plugin.Config{"bootstrap.servers": h, "security.protocol": "SSL", "ssl.ca_file": "/nonexistent/ca.pem"}, KeySSLCAFile},
		{plugin.Config{"bootstrap.servers": h, "ssl.ca_file": "/ca.pem"}, KeySecurityProtocol},
		{plugin.Config{"bootstrap.servers": h, "request.timeout": "soon"}, KeyRequestTimeout},
		{plugin.Config{"bootstrap.servers": h, "transaction.timeout": "10ms"}, KeyTransactionTimeout},
		{plugin.Config{"bootstrap.servers": h, "bogus": "x"}, "bogus"},
	} {
		_, err := ConfigFromPlugin(c.cfg)
		var ce *plugin.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, plugin.ErrInvalidConfig) || len(ce.Problems) == 0 || ce.Problems[0].Key != c.key {
			t.Errorf("ConfigFromPlugin(%v) = %v; want a ConfigError naming %s", c.cfg, err, c.key)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("ConfigFromPlugin(%v): the password is in the error: %v", c.cfg, err)
		}
	}
}

// TestNewFromConfig: the plugin constructor opens a working store, with
// the partition count and replication factor the config names.
func TestNewFromConfig(t *testing.T) {
	t.Parallel()
	topic := config(t).Topic
	s, err := NewFromConfig(t.Context(), "kafka", plugin.Config{
		"bootstrap.servers":               cluster.Bootstrap(kafkatest.Plaintext),
		"topic":                           topic,
		"mirror.topic.num.partitions":     float64(2),
		"mirror.topic.replication.factor": float64(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.Put(t.Context(), "k", []byte("v"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Get(t.Context(), "k"); err != nil || e.Version != v {
		t.Fatalf("Get = %+v, %v", e, err)
	}
	details, err := admin(t).ListTopics(t.Context(), topic)
	if err != nil || len(details[topic].Partitions) != 2 {
		t.Fatalf("topic %s: %+v, %v; want 2 partitions", topic, details[topic], err)
	}
}
