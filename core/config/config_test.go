package config

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testpki"
)

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, minimal+`
mirrors:
  - name: m1
    bootstrap.servers: src:9092
`, nil, nil)
	daemon := []struct {
		name      string
		got, want any
	}{
		{"mirror.num.replica.fetchers", cfg.NumReplicaFetchers, 1},
		{"mirror.metadata.refresh.interval.ms", cfg.MetadataRefreshInterval, 30 * time.Second},
		{"mirror.replication.throttled.rate", cfg.ReplicationThrottledRate, int64(math.MaxInt64)},
		{"request.timeout.ms", cfg.RequestTimeout, 30 * time.Second},
		{"socket.connection.setup.timeout.ms", cfg.SocketConnectionSetupTimeout, 10 * time.Second},
		{"reconnect.backoff.ms", cfg.ReconnectBackoff, 50 * time.Millisecond},
		{"send.buffer.bytes", cfg.SendBufferBytes, 131072},
		{"receive.buffer.bytes", cfg.ReceiveBufferBytes, 65536},
		{"replica.fetch.backoff.ms", cfg.ReplicaFetchBackoff, time.Second},
		{"replica.fetch.max.bytes", cfg.ReplicaFetchMaxBytes, 1048576},
		{"replica.fetch.min.bytes", cfg.ReplicaFetchMinBytes, 1},
		{"replica.fetch.response.max.bytes", cfg.ReplicaFetchResponseMaxBytes, 10485760},
		{"replica.fetch.wait.max.ms", cfg.ReplicaFetchWaitMax, 500 * time.Millisecond},
		{"replica.socket.receive.buffer.bytes", cfg.ReplicaSocketReceiveBuffer, 65536},
		{"replica.socket.timeout.ms", cfg.ReplicaSocketTimeout, 30 * time.Second},
		{"mirror.failed.retry.initial.backoff.ms", cfg.FailedRetryInitialBackoff, time.Second},
		{"mirror.failed.retry.max.backoff.ms", cfg.FailedRetryMaxBackoff, 300 * time.Second},
		{"mirror.failed.retry.max.attempts", cfg.FailedRetryMaxAttempts, 10},
		{"mirror.offset.alignment.max.records", cfg.OffsetAlignmentMaxRecords, int64(1000000)},
		{"mirror.buffer.max.bytes", cfg.BufferMaxBytes, int64(64 << 20)},
		{"log.level", cfg.LogLevel, "info"},
		{"log.format", cfg.LogFormat, "text"},
		{"http.address", cfg.HTTPAddress, "127.0.0.1:9644"},
		{"shutdown.timeout.ms", cfg.ShutdownTimeout, 30 * time.Second},
		{"state.type", cfg.State.Type, "file"},
		{"destination.security.protocol", cfg.Destination.SecurityProtocol, "PLAINTEXT"},
		{"destination.sasl.mechanism", cfg.Destination.SASLMechanism, "PLAIN"},
		{"destination.client.id", cfg.Destination.ClientID, "kmirror"},
		{"destination.ssl.truststore.type", cfg.Destination.TruststoreType, "PEM"},
		{"destination.ssl.endpoint.identification.algorithm", cfg.Destination.EndpointIdentificationAlgorithm, "https"},
		{"destination.ssl.enabled.protocols", cfg.Destination.EnabledProtocols, []string{"TLSv1.2", "TLSv1.3"}},
	}
	for _, d := range daemon {
		if !reflect.DeepEqual(d.got, d.want) {
			t.Errorf("%s = %v, want default %v", d.name, d.got, d.want)
		}
	}

	m := cfg.Mirrors[0]
	if m.TopicsInclude.Len() != 0 || m.TopicsInclude.Match("orders") {
		t.Errorf("mirror.topics.include default = %q, want empty (nothing discovered)", m.TopicsInclude)
	}
	if m.TopicsExclude.String() != "__.*" || !m.TopicsExclude.Match("__consumer_offsets") || m.TopicsExclude.Match("orders") {
		t.Errorf("mirror.topics.exclude default = %q, want __.*", m.TopicsExclude)
	}
	if m.GroupsInclude.String() != ".*" || !m.GroupsInclude.Match("any-group") {
		t.Errorf("mirror.groups.include default = %q, want .*", m.GroupsInclude)
	}
	if m.GroupsExclude.Len() != 0 {
		t.Errorf("mirror.groups.exclude default = %q, want empty", m.GroupsExclude)
	}
	if m.ACLInclude.String() != "*" {
		t.Errorf("mirror.acl.include default = %q, want *", m.ACLInclude)
	}
	wantProps := []string{"follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
		"message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
		"message.timestamp.type", "unclean.leader.election.enable", "min.insync.replicas", "mirror.name"}
	if got := m.TopicPropertiesExclude.Patterns(); !reflect.DeepEqual(got, wantProps) {
		t.Errorf("mirror.topic.properties.exclude default = %q, want the KIP list %q", got, wantProps)
	}
	if m.TopicPropertiesExclude.Match("retention.ms") || !m.TopicPropertiesExclude.Match("min.insync.replicas") {
		t.Error("mirror.topic.properties.exclude default matches the wrong configs")
	}
	if m.Source.SecurityProtocol != ProtocolPlaintext || m.Source.ClientID != "kmirror" {
		t.Errorf("mirror source defaults = %q/%q", m.Source.SecurityProtocol, m.Source.ClientID)
	}
}

func TestNoMirrorsIsValid(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, minimal, nil, nil)
	if len(cfg.Mirrors) != 0 {
		t.Errorf("got %d mirrors, want 0", len(cfg.Mirrors))
	}
}

func TestValues(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, `
mirror.num.replica.fetchers: 4
mirror.replication.throttled.rate: 1048576
send.buffer.bytes: -1
mirror.failed.retry.max.attempts: 0
log.level: DEBUG
http.address: ""
destination:
  bootstrap.servers: [ "d1:9092", "[::1]:9093" ]
state: {dir: /tmp/s}
mirrors:
  - name: dc1-to-dc2
    bootstrap.servers: s1:9092, s2:9092
    mirror.topics.include: " orders.* , payments "
    mirror.groups.include: [ "a{1,3}", "b" ]
    mirror.acl.include: ["TOPIC;orders.*", "GROUP;g{1,2};READ"]
`, nil, nil)
	if cfg.NumReplicaFetchers != 4 || cfg.ReplicationThrottledRate != 1048576 || cfg.SendBufferBytes != -1 || cfg.FailedRetryMaxAttempts != 0 {
		t.Errorf("daemon values not applied: %+v", cfg)
	}
	if cfg.LogLevel != "debug" {
		t.Errorf("log.level = %q, want canonical debug", cfg.LogLevel)
	}
	if cfg.HTTPAddress != "" {
		t.Errorf("http.address = %q, want empty (disabled)", cfg.HTTPAddress)
	}
	if !reflect.DeepEqual(cfg.Destination.BootstrapServers, []string{"d1:9092", "[::1]:9093"}) {
		t.Errorf("destination servers = %q", cfg.Destination.BootstrapServers)
	}
	m, ok := cfg.Mirror("dc1-to-dc2")
	if !ok {
		t.Fatal("mirror dc1-to-dc2 not found")
	}
	if !reflect.DeepEqual(m.Source.BootstrapServers, []string{"s1:9092", "s2:9092"}) {
		t.Errorf("source servers = %q", m.Source.BootstrapServers)
	}
	if !reflect.DeepEqual(m.TopicsInclude.Patterns(), []string{"orders.*", "payments"}) || !m.TopicsInclude.Match("payments") || m.TopicsInclude.Match("payments2") {
		t.Errorf("topics include = %q", m.TopicsInclude.Patterns())
	}
	// A YAML list keeps each item whole, so a regex may contain a comma.
	if !m.GroupsInclude.Match("aaa") || m.GroupsInclude.Match("aaaa") {
		t.Errorf("groups include %q: a{1,3} was split", m.GroupsInclude.Patterns())
	}
	if len(m.ACLInclude) != 2 || m.ACLInclude[1].ResourceName != "g{1,2}" {
		t.Errorf("acl include = %v", m.ACLInclude)
	}
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "kmirror test CA")
	client := p.IssueClient(t, "kmirror")
	notPEM := writeFile(t, p.Dir, "not.pem", "hello, not a certificate\n")
	certOnly := writeFile(t, p.Dir, "cert-only.pem", string(client.LeafPEM))
	encrypted := writeFile(t, p.Dir, "enc.pem", string(client.LeafPEM)+"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")
	mismatched := writeFile(t, p.Dir, "mismatch.pem", string(client.LeafPEM)+string(p.Server.KeyPEM))
	stateFile := writeFile(t, p.Dir, "state-file", "x")

	dst := func(lines string) string {
		return "state: {dir: /tmp/s}\ndestination:\n  bootstrap.servers: d:9092\n" + lines
	}
	mirror := func(lines string) string {
		return minimal + "mirrors:\n  - name: m1\n    bootstrap.servers: s:9092\n" + lines
	}
	cases := []struct {
		name   string
		yaml   string
		path   string
		reason string
	}{
		{"unknown daemon key", minimal + "mirror.num.replica.fetcher: 2\n", "mirror.num.replica.fetcher", "unknown key; did you mean mirror.num.replica.fetchers?"},
		{"unknown client key", dst("  sasl.pasword: x\n"), "destination.sasl.pasword", "unknown key; did you mean sasl.password?"},
		{"unknown mirror key", mirror("    mirror.topic.include: x\n"), "mirrors[m1].mirror.topic.include", "did you mean mirror.topics.include?"},
		{"unknown key far from any", minimal + "colour: blue\n", "colour", "unknown key"},
		{"misspelt section", minimal + "mirror:\n  - name: x\n", "mirror", "did you mean mirrors?"},
		{"misspelt section map", minimal + "destinaton:\n  bootstrap.servers: x:1\n", "destinaton.bootstrap.servers", "did you mean destination.bootstrap.servers?"},
		{"mirror key under destination", dst("  mirror.topics.include: x\n"), "destination.mirror.topics.include", "is a per-mirror key; set it in a mirrors entry"},
		{"client key at top level", minimal + "bootstrap.servers: x:1\n", "bootstrap.servers", "is a client key; set it under destination or in a mirrors entry"},
		{"daemon key in mirror", mirror("    log.level: debug\n"), "mirrors[m1].log.level", "is a daemon-wide key"},
		{"unsupported key", dst("  ssl.truststore.password: x\n"), "destination.ssl.truststore.password", "not supported: PEM truststores have no password"},
		{"unsupported daemon key", minimal + "mirror.topic.num.partitions: 50\n", "mirror.topic.num.partitions", "not supported: kmirror keeps mirror state in its state store"},
		{"dotted and nested twice", minimal + "mirror.num.replica.fetchers: 1\nmirror:\n  num.replica.fetchers: 2\n", "mirror.num.replica.fetchers", "given twice"},
		{"integer from text", minimal + "mirror.num.replica.fetchers: abc\n", "mirror.num.replica.fetchers", `expected an integer, got "abc"`},
		{"integer from boolean", minimal + "request.timeout.ms: true\n", "request.timeout.ms", "expected an integer, got true (a boolean)"},
		{"integer from fraction", minimal + "mirror.num.replica.fetchers: 1.5\n", "mirror.num.replica.fetchers", "expected an integer, got 1.5 (a number)"},
		{"integer from list", minimal + "mirror.num.replica.fetchers: [1]\n", "mirror.num.replica.fetchers", "expected an integer, got a list"},
		{"int out of range", minimal + "replica.fetch.max.bytes: 3000000000\n", "replica.fetch.max.bytes", "3000000000 is out of range"},
		{"string from number", dst("  client.id: 123\n"), "destination.client.id", "expected a string, got 123 (a number) (quote the value in the file)"},
		{"zero interval", minimal + "mirror.metadata.refresh.interval.ms: 0\n", "mirror.metadata.refresh.interval.ms", "0 is out of range: must be ≥ 1 (must be positive)"},
		{"negative timeout", minimal + "request.timeout.ms: -1\n", "request.timeout.ms", "-1 is out of range"},
		{"negative size", minimal + "replica.fetch.max.bytes: -5\n", "replica.fetch.max.bytes", "-5 is out of range: must be ≥ 1"},
		{"zero fetchers", minimal + "mirror.num.replica.fetchers: 0\n", "mirror.num.replica.fetchers", "0 is out of range"},
		{"zero buffer", minimal + "send.buffer.bytes: 0\n", "send.buffer.bytes", "must be -1 (OS default) or 1"},
		{"zero throttle", minimal + "mirror.replication.throttled.rate: 0\n", "mirror.replication.throttled.rate", "0 is out of range"},
		{"zero buffer budget", minimal + "mirror.buffer.max.bytes: 0\n", "mirror.buffer.max.bytes", "0 is out of range"},
		{"negative attempts", minimal + "mirror.failed.retry.max.attempts: -1\n", "mirror.failed.retry.max.attempts", "-1 is out of range"},
		{"socket timeout below fetch wait", minimal + "replica.socket.timeout.ms: 100\nreplica.fetch.wait.max.ms: 500\n", "replica.socket.timeout.ms", "less than replica.fetch.wait.max.ms"},
		{"max backoff below initial", minimal + "mirror.failed.retry.max.backoff.ms: 10\n", "mirror.failed.retry.max.backoff.ms", "less than mirror.failed.retry.initial.backoff.ms (1000)"},
		{"transaction timeout beyond int32", minimal + "mirror.transaction.timeout.ms: 3000000000\n", "mirror.transaction.timeout.ms", "3000000000 is out of range: Kafka transaction timeouts are at most 2147483647 ms"},
		{"negative transaction timeout", minimal + "mirror.transaction.timeout.ms: -1\n", "mirror.transaction.timeout.ms", "-1 is out of range"},
		{"invalid regex", mirror("    mirror.topics.include: \"orders.(\"\n"), "mirrors[m1].mirror.topics.include[0]", `invalid regex "orders.(": error parsing regexp: missing closing )`},
		{"invalid regex in list", mirror("    mirror.groups.exclude: [ok, \"[z-a]\"]\n"), "mirrors[m1].mirror.groups.exclude[1]", `invalid regex "[z-a]": error parsing regexp: invalid character class range`},
		{"empty regex entry", mirror("    mirror.topics.include: \"a,,b\"\n"), "mirrors[m1].mirror.topics.include[1]", "empty (remove the extra comma)"},
		{"invalid ACL rule", mirror("    mirror.acl.include: \"TOPIC;x,TOPIC;y;REED\"\n"), "mirrors[m1].mirror.acl.include[1]", `"TOPIC;y;REED": operation: unknown value "REED"`},
		{"invalid ACL rule in list", mirror("    mirror.acl.include: [\"*\", \"TOPIK\"]\n"), "mirrors[m1].mirror.acl.include[1]", `"TOPIK": resourceType: unknown value "TOPIK"`},
		{"unknown protocol", dst("  security.protocol: TLS\n"), "destination.security.protocol", `unknown value "TLS"; valid values: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL`},
		{"unknown mechanism", dst("  security.protocol: SASL_PLAINTEXT\n  sasl.mechanism: SCRAM\n"), "destination.sasl.mechanism", `unknown value "SCRAM"; valid values: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI`},
		{"GSSAPI without a principal", mirror("    security.protocol: SASL_SSL\n    sasl.mechanism: GSSAPI\n"), "mirrors[m1].sasl.kerberos.principal", "required for GSSAPI"},
		{"GSSAPI without a keytab", mirror("    security.protocol: SASL_SSL\n    sasl.mechanism: GSSAPI\n    sasl.kerberos.principal: kmirror@EXAMPLE.COM\n"), "mirrors[m1].sasl.kerberos.keytab", "required for GSSAPI"},
		{"keytab with PLAIN", mirror("    security.protocol: SASL_SSL\n    sasl.username: u\n    sasl.password: p\n    sasl.kerberos.keytab: /etc/krb5.keytab\n"), "mirrors[m1].sasl.kerberos.keytab", "applies to GSSAPI only, but sasl.mechanism is PLAIN"},
		{"no destination", "state: {dir: /tmp/s}\n", "destination", "required"},
		{"destination without servers", "state: {dir: /tmp/s}\ndestination:\n  client.id: x\n", "destination.bootstrap.servers", "required"},
		{"mirror without servers", minimal + "mirrors:\n  - name: m1\n", "mirrors[m1].bootstrap.servers", "required"},
		{"server without port", dst("  client.id: x\nmirrors:\n  - name: m1\n    bootstrap.servers: kafka1\n"), "mirrors[m1].bootstrap.servers[0]", `server "kafka1" is not host:port`},
		{"server with protocol", minimal + "mirrors:\n  - name: m1\n    bootstrap.servers: PLAINTEXT://k:9092\n", "mirrors[m1].bootstrap.servers[0]", `remove the "PLAINTEXT://" prefix`},
		{"server bad port", minimal + "mirrors:\n  - name: m1\n    bootstrap.servers: k:99999\n", "mirrors[m1].bootstrap.servers[0]", `port "99999" is not a number in 1 … 65535`},
		{"duplicate mirror names", minimal + "mirrors:\n  - {name: m1, bootstrap.servers: 'a:1'}\n  - {name: m1, bootstrap.servers: 'b:1'}\n", "mirrors[1].name", `duplicate mirror name "m1" (also mirrors[0])`},
		{"mirror without name", minimal + "mirrors:\n  - {name: m1, bootstrap.servers: 'a:1'}\n  - {bootstrap.servers: 'b:1'}\n", "mirrors[1].name", "required"},
		{"mirror name with dot", minimal + "mirrors:\n  - {name: a.b, bootstrap.servers: 'a:1'}\n", "mirrors[0].name", `invalid mirror name "a.b"`},
		{"mirrors not a list", minimal + "mirrors: {name: x}\n", "mirrors", "expected a list of mirrors, got a map"},
		{"mirror not a map", minimal + "mirrors: [x]\n", "mirrors[0]", "expected a map of keys, got a string"},
		{"SASL without credentials", mirror("    security.protocol: SASL_PLAINTEXT\n"), "mirrors[m1].sasl.username", "SASL PLAIN needs credentials: set sasl.username with sasl.password or sasl.password.file, or sasl.jaas.config"},
		{"SCRAM user without password", mirror("    security.protocol: SASL_SSL\n    sasl.mechanism: SCRAM-SHA-256\n    sasl.username: u\n"), "mirrors[m1].sasl.password", "required with sasl.username"},
		{"password without user", dst("  security.protocol: SASL_PLAINTEXT\n  sasl.password: p\n"), "destination.sasl.username", "required with sasl.password"},
		{"password and password file", dst("  security.protocol: SASL_PLAINTEXT\n  sasl.username: u\n  sasl.password: p\n  sasl.password.file: /x\n"), "destination.sasl.password.file", "set either sasl.password or sasl.password.file, not both"},
		{"unreadable password file", dst("  security.protocol: SASL_PLAINTEXT\n  sasl.username: u\n  sasl.password.file: /nonexistent/pw\n"), "destination.sasl.password.file", "cannot read the password file: open /nonexistent/pw: no such file or directory"},
		{"jaas and username", dst("  security.protocol: SASL_PLAINTEXT\n  sasl.username: u\n  sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";'\n"), "destination.sasl.jaas.config", "not both"},
		{"jaas module mismatch", dst("  security.protocol: SASL_PLAINTEXT\n  sasl.jaas.config: 'org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"p\";'\n"), "destination.sasl.jaas.config", "login module ScramLoginModule does not match sasl.mechanism PLAIN; use PlainLoginModule"},
		{"jaas without semicolon", dst("  security.protocol: SASL_PLAINTEXT\n  sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\"'\n"), "destination.sasl.jaas.config", "missing the terminating ';'"},
		{"jaas without password", dst("  security.protocol: SASL_PLAINTEXT\n  sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\";'\n"), "destination.sasl.jaas.config", "has no password option"},
		{"OAUTHBEARER without endpoint", mirror("    security.protocol: SASL_SSL\n    sasl.mechanism: OAUTHBEARER\n    sasl.oauthbearer.client.id: c\n    sasl.oauthbearer.client.secret: s\n"), "mirrors[m1].sasl.oauthbearer.token.endpoint.url", "required for OAUTHBEARER"},
		{"OAUTHBEARER without client id", mirror("    security.protocol: SASL_SSL\n    sasl.mechanism: OAUTHBEARER\n    sasl.oauthbearer.token.endpoint.url: https://idp/token\n    sasl.oauthbearer.client.secret: s\n"), "mirrors[m1].sasl.oauthbearer.client.id", "required for OAUTHBEARER"},
		{"OAUTHBEARER without secret", mirror("    security.protocol: SASL_SSL\n    sasl.mechanism: OAUTHBEARER\n    sasl.oauthbearer.token.endpoint.url: https://idp/token\n    sasl.oauthbearer.client.id: c\n"), "mirrors[m1].sasl.oauthbearer.client.secret", "required for OAUTHBEARER"},
		{"OAUTHBEARER bad URL", mirror("    security.protocol: SASL_SSL\n    sasl.mechanism: OAUTHBEARER\n    sasl.oauthbearer.token.endpoint.url: idp/token\n"), "mirrors[m1].sasl.oauthbearer.token.endpoint.url", `"idp/token" is not an http(s) URL with a host`},
		{"OAUTHBEARER with password", mirror("    security.protocol: SASL_SSL\n    sasl.mechanism: OAUTHBEARER\n    sasl.oauthbearer.token.endpoint.url: https://idp/token\n    sasl.oauthbearer.client.id: c\n    sasl.oauthbearer.client.secret: s\n    sasl.password: p\n"), "mirrors[m1].sasl.password", "applies to PLAIN and SCRAM only"},
		{"oauth keys with PLAIN", dst("  security.protocol: SASL_PLAINTEXT\n  sasl.username: u\n  sasl.password: p\n  sasl.oauthbearer.client.id: c\n"), "destination.sasl.oauthbearer.client.id", "applies to OAUTHBEARER only"},
		{"sasl with SSL protocol", dst("  security.protocol: SSL\n  sasl.mechanism: PLAIN\n  sasl.username: u\n"), "destination.sasl.mechanism", "sasl.* set but security.protocol is SSL; set security.protocol to SASL_PLAINTEXT or SASL_SSL, or remove sasl.mechanism, sasl.username"},
		{"sasl with default protocol", mirror("    sasl.username: u\n    sasl.password: p\n"), "mirrors[m1].sasl.password", "sasl.* set but security.protocol is PLAINTEXT"},
		{"ssl with PLAINTEXT", dst("  ssl.truststore.location: /x.pem\n"), "destination.ssl.truststore.location", "ssl.* set but security.protocol is PLAINTEXT; set security.protocol to SSL or SASL_SSL"},
		{"unreadable truststore", dst("  security.protocol: SSL\n  ssl.truststore.location: /nonexistent/ca.pem\n"), "destination.ssl.truststore.location", "cannot read the truststore: open /nonexistent/ca.pem: no such file or directory"},
		{"truststore without PEM", dst("  security.protocol: SSL\n  ssl.truststore.location: " + notPEM + "\n"), "destination.ssl.truststore.location", "file " + notPEM + " holds no PEM certificate"},
		{"inline truststore without PEM", dst("  security.protocol: SSL\n  ssl.truststore.certificates: nope\n"), "destination.ssl.truststore.certificates", "the value holds no PEM certificate"},
		{"truststore file and inline", dst("  security.protocol: SSL\n  ssl.truststore.location: " + p.CAFile + "\n  ssl.truststore.certificates: x\n"), "destination.ssl.truststore.certificates", "set either ssl.truststore.location or ssl.truststore.certificates, not both"},
		{"truststore JKS", dst("  security.protocol: SSL\n  ssl.truststore.type: JKS\n"), "destination.ssl.truststore.type", `"JKS" is not supported: kmirror reads PEM only; convert the store to PEM`},
		{"keystore PKCS12", dst("  security.protocol: SSL\n  ssl.keystore.type: pkcs12\n"), "destination.ssl.keystore.type", `"pkcs12" is not supported: kmirror reads PEM only; convert it with`},
		{"unreadable keystore", dst("  security.protocol: SSL\n  ssl.keystore.location: /nonexistent/k.pem\n"), "destination.ssl.keystore.location", "cannot read the keystore: open /nonexistent/k.pem: no such file or directory"},
		{"keystore without key", dst("  security.protocol: SSL\n  ssl.keystore.location: " + certOnly + "\n"), "destination.ssl.keystore.location", "file " + certOnly + " holds no PEM private key"},
		{"keystore without certificate", dst("  security.protocol: SSL\n  ssl.keystore.location: " + notPEM + "\n"), "destination.ssl.keystore.location", "holds no PEM certificate"},
		{"keystore encrypted key", dst("  security.protocol: SSL\n  ssl.keystore.location: " + encrypted + "\n"), "destination.ssl.keystore.location", "holds an encrypted private key, which is not supported"},
		{"keystore mismatched key", dst("  security.protocol: SSL\n  ssl.keystore.location: " + mismatched + "\n"), "destination.ssl.keystore.location", "certificate and private key do not form a pair"},
		{"inline chain without key", dst("  security.protocol: SSL\n  ssl.keystore.certificate.chain: x\n"), "destination.ssl.keystore.key", "required with ssl.keystore.certificate.chain"},
		{"key password", dst("  security.protocol: SSL\n  ssl.key.password: x\n"), "destination.ssl.key.password", "encrypted private keys are not supported"},
		{"old TLS version", dst("  security.protocol: SSL\n  ssl.enabled.protocols: TLSv1.1,TLSv1.2\n"), "destination.ssl.enabled.protocols[0]", `"TLSv1.1" is not supported: it is insecure`},
		{"endpoint identification", dst("  security.protocol: SSL\n  ssl.endpoint.identification.algorithm: http\n"), "destination.ssl.endpoint.identification.algorithm", `unknown value "http"; valid values: https, "" (empty)`},
		{"log level", minimal + "log.level: verbose\n", "log.level", `unknown value "verbose"; valid values: trace, debug, info, warn, error`},
		{"log format", minimal + "log.format: xml\n", "log.format", `unknown value "xml"; valid values: text, json`},
		{"pprof switch", minimal + "http.pprof.enable: yes please\n", "http.pprof.enable", `expected true or false, got "yes please"`},
		{"http address without port", minimal + "http.address: localhost\n", "http.address", `"localhost" is not host:port`},
		{"http address bad host", minimal + "http.address: 'bad host:80'\n", "http.address", "is neither an IP address nor a host name"},
		{"state type", "destination: {bootstrap.servers: 'd:1'}\nstate:\n  type: etcd\n  dir: /x\n", "state.type", `unknown value "etcd"; valid values: file`},
		{"state dir missing", "destination: {bootstrap.servers: 'd:1'}\n", "state.dir", "required when state.type is file"},
		{"state dir is a file", "destination: {bootstrap.servers: 'd:1'}\nstate: {dir: " + stateFile + "}\n", "state.dir", "exists and is not a directory"},
		{"state unknown key", "destination: {bootstrap.servers: 'd:1'}\nstate: {dir: /x, dirr: /y}\n", "state.dirr", "did you mean dir?"},
		{"syntax error", "destination: [\n", "configuration", "cannot parse YAML"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := parseErrs(t, c.yaml, nil, nil)
			if !errs.Has(c.path, c.reason) {
				t.Errorf("want an error at %q containing %q; got:\n%s", c.path, c.reason, indent(errs.Error()))
			}
		})
	}
}

func TestCollectsAllErrors(t *testing.T) {
	t.Parallel()
	errs := parseErrs(t, `
mirror.num.replica.fetchers: many
log.level: loud
destination:
  security.protocol: TLS
state:
  type: file
mirrors:
  - name: a
    bootstrap.servers: s:1
    mirror.topics.include: "("
  - name: a
    bootstrap.servers: s:2
  - bootstrap.servers: s:3
    mirror.acl.include: "NOPE"
`, nil, nil)
	want := map[string]string{
		"mirror.num.replica.fetchers":         "expected an integer",
		"log.level":                           "unknown value",
		"destination.security.protocol":       "unknown value",
		"destination.bootstrap.servers":       "required",
		"state.dir":                           "required",
		"mirrors[a].mirror.topics.include[0]": "invalid regex",
		"mirrors[1].name":                     "duplicate mirror name",
		"mirrors[2].name":                     "required",
		"mirrors[2].mirror.acl.include[0]":    "unknown value \"NOPE\"",
	}
	for path, reason := range want {
		if !errs.Has(path, reason) {
			t.Errorf("missing error %s: %s", path, reason)
		}
	}
	if lines := strings.Split(errs.Error(), "\n"); len(lines) != len(errs.List) || len(lines) < len(want) {
		t.Errorf("Error() has %d lines for %d errors; want one per error:\n%s", len(lines), len(errs.List), errs.Error())
	}
}

const overrideBase = `
mirror.num.replica.fetchers: 2
destination:
  bootstrap.servers: file-dst:9092
state:
  dir: /file/state
mirrors:
  - name: dc1-to-dc2
    bootstrap.servers: file-src:9092
    security.protocol: SASL_PLAINTEXT
    sasl.username: mirror
    sasl.password: from-file
  - name: other_one
    bootstrap.servers: other:9092
`

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	env := []string{
		"PATH=/usr/bin", // not ours: ignored
		"KMIRROR_MIRROR_NUM_REPLICA_FETCHERS=3",
		"KMIRROR_MIRROR_METADATA_REFRESH_INTERVAL_MS=60000",
		"KMIRROR_DESTINATION__BOOTSTRAP_SERVERS=env-a:9092,env-b:9092",
		"KMIRROR_STATE__DIR=/env/state",
		"KMIRROR_MIRRORS__DC1_TO_DC2__SASL_PASSWORD=from-env",
		"KMIRROR_MIRRORS__OTHER_ONE__MIRROR_TOPICS_INCLUDE=orders.*,payments",
		"KMIRROR_HTTP_ADDRESS=",
	}
	cfg := mustParse(t, overrideBase, env, nil)
	if cfg.NumReplicaFetchers != 3 || cfg.MetadataRefreshInterval != time.Minute {
		t.Errorf("daemon env overrides not applied: fetchers %d, refresh %s", cfg.NumReplicaFetchers, cfg.MetadataRefreshInterval)
	}
	if !reflect.DeepEqual(cfg.Destination.BootstrapServers, []string{"env-a:9092", "env-b:9092"}) {
		t.Errorf("destination servers = %q", cfg.Destination.BootstrapServers)
	}
	if cfg.State.Dir != "/env/state" {
		t.Errorf("state.dir = %q", cfg.State.Dir)
	}
	if cfg.HTTPAddress != "" {
		t.Errorf("http.address = %q, want empty from KMIRROR_HTTP_ADDRESS=", cfg.HTTPAddress)
	}
	m, _ := cfg.Mirror("dc1-to-dc2")
	if m.Source.SASLPassword.Reveal() != "from-env" {
		t.Errorf("mirror password = %q, want from-env", m.Source.SASLPassword.Reveal())
	}
	o, _ := cfg.Mirror("other_one")
	if !o.TopicsInclude.Match("payments") {
		t.Errorf("other_one topics include = %q", o.TopicsInclude)
	}
}

func TestSetOverrides(t *testing.T) {
	t.Parallel()
	sets := []string{
		"mirror.num.replica.fetchers=5",
		"destination.bootstrap.servers=set-dst:9092",
		"state.dir=/set/state",
		"mirrors.dc1-to-dc2.sasl.password=from-set=with-equals",
		"mirrors.other_one.mirror.acl.include=TOPIC;orders.*",
	}
	cfg := mustParse(t, overrideBase, nil, sets)
	if cfg.NumReplicaFetchers != 5 || cfg.Destination.BootstrapServers[0] != "set-dst:9092" || cfg.State.Dir != "/set/state" {
		t.Errorf("sets not applied: fetchers %d, dst %q, dir %q", cfg.NumReplicaFetchers, cfg.Destination.BootstrapServers, cfg.State.Dir)
	}
	m, _ := cfg.Mirror("dc1-to-dc2")
	if m.Source.SASLPassword.Reveal() != "from-set=with-equals" {
		t.Errorf("password = %q; the value is everything after the first '='", m.Source.SASLPassword.Reveal())
	}
	o, _ := cfg.Mirror("other_one")
	if o.ACLInclude.String() != "TOPIC;orders.*" {
		t.Errorf("acl include = %q", o.ACLInclude)
	}
}

func TestOverrideOrder(t *testing.T) {
	t.Parallel()
	env := []string{"KMIRROR_MIRROR_NUM_REPLICA_FETCHERS=3", "KMIRROR_MIRRORS__DC1_TO_DC2__SASL_PASSWORD=from-env"}
	sets := []string{"mirror.num.replica.fetchers=4"}
	cfg := mustParse(t, overrideBase, env, sets)
	if cfg.NumReplicaFetchers != 4 {
		t.Errorf("fetchers = %d: --set must win over the environment and the file", cfg.NumReplicaFetchers)
	}
	m, _ := cfg.Mirror("dc1-to-dc2")
	if m.Source.SASLPassword.Reveal() != "from-env" {
		t.Errorf("password = %q: the environment must win over the file", m.Source.SASLPassword.Reveal())
	}
	cfg = mustParse(t, overrideBase, nil, nil)
	if cfg.NumReplicaFetchers != 2 {
		t.Errorf("fetchers = %d from the file alone, want 2", cfg.NumReplicaFetchers)
	}
}

func TestOverrideErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		env, sets  []string
		path, want string
	}{
		{"unknown variable", []string{"KMIRROR_FOO=1"}, nil, "KMIRROR_FOO", "unknown environment variable"},
		{"misspelt variable", []string{"KMIRROR_MIRROR_NUM_REPLICA_FETCHER=1"}, nil, "KMIRROR_MIRROR_NUM_REPLICA_FETCHER", "did you mean KMIRROR_MIRROR_NUM_REPLICA_FETCHERS?"},
		{"misspelt destination variable", []string{"KMIRROR_DESTINATION__BOOTSTRAP_SERVER=x:1"}, nil, "KMIRROR_DESTINATION__BOOTSTRAP_SERVER", "did you mean KMIRROR_DESTINATION__BOOTSTRAP_SERVERS?"},
		{"single underscore section", []string{"KMIRROR_DESTINATION_BOOTSTRAP_SERVERS=x:1"}, nil, "KMIRROR_DESTINATION_BOOTSTRAP_SERVERS", "unknown environment variable"},
		{"variable for unknown mirror", []string{"KMIRROR_MIRRORS__NOPE__SASL_PASSWORD=x"}, nil, "KMIRROR_MIRRORS__NOPE__SASL_PASSWORD", "no mirror matches NOPE; the mirrors are dc1-to-dc2, other_one"},
		{"variable renaming a mirror", []string{"KMIRROR_MIRRORS__OTHER_ONE__NAME=x"}, nil, "KMIRROR_MIRRORS__OTHER_ONE__NAME", "cannot be renamed"},
		{"mirror key in daemon variable", []string{"KMIRROR_MIRROR_TOPICS_INCLUDE=x"}, nil, "KMIRROR_MIRROR_TOPICS_INCLUDE", "unknown environment variable"},
		{"bad value from variable", []string{"KMIRROR_REPLICA_FETCH_MIN_BYTES=lots"}, nil, "replica.fetch.min.bytes", `expected an integer, got "lots" (from KMIRROR_REPLICA_FETCH_MIN_BYTES)`},
		{"unsupported key from variable", []string{"KMIRROR_DESTINATION__SSL_PROVIDER=SunJSSE"}, nil, "destination.ssl.provider", "not supported"},
		{"set without equals", nil, []string{"mirror.num.replica.fetchers"}, "--set", "flag 1: expected key=value"},
		{"set unknown key", nil, []string{"mirror.num.replica.fetcher=2"}, "mirror.num.replica.fetcher", "did you mean mirror.num.replica.fetchers? (from --set)"},
		{"set unknown mirror", nil, []string{"mirrors.nope.sasl.password=x"}, "--set", `no mirror named "nope"`},
		{"set mirror without key", nil, []string{"mirrors.dc1-to-dc2=x"}, "--set", "expected mirrors.<name>.<key>=value"},
		{"set bad value", nil, []string{"mirrors.other_one.mirror.topics.include=("}, "mirrors[other_one].mirror.topics.include[0]", "invalid regex \"(\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := parseErrs(t, overrideBase, c.env, c.sets)
			if !errs.Has(c.path, c.want) {
				t.Errorf("want an error at %q containing %q; got:\n%s", c.path, c.want, indent(errs.Error()))
			}
		})
	}
}

func TestAmbiguousMirrorVariable(t *testing.T) {
	t.Parallel()
	errs := parseErrs(t, minimal+`
mirrors:
  - {name: a-b, bootstrap.servers: "x:1"}
  - {name: a_b, bootstrap.servers: "y:1"}
`, []string{"KMIRROR_MIRRORS__A_B__CLIENT_ID=z"}, nil)
	if !errs.Has("KMIRROR_MIRRORS__A_B__CLIENT_ID", "matches several mirrors (a-b, a_b)") {
		t.Errorf("got:\n%s", errs.Error())
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeFile(t, dir, "kmirror.yml", overrideBase)
	cfg, err := Load(Source{Path: path, Env: []string{"KMIRROR_CONFIG=" + path, "KMIRROR_STATE__DIR=/env"}, Reserved: []string{"KMIRROR_CONFIG"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.State.Dir != "/env" {
		t.Errorf("state.dir = %q", cfg.State.Dir)
	}

	_, err = Load(Source{Path: filepath.Join(dir, "missing.yaml")})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: got %v, want a wrapped fs.ErrNotExist naming the file", err)
	}
	if errors.Is(err, ErrInvalid) {
		t.Error("an unreadable file is not an invalid configuration")
	}

	_, err = Load(Source{Path: writeFile(t, dir, "kmirror.json", "{}")})
	if err == nil || !strings.Contains(err.Error(), "use .yaml, .yml or .toml") {
		t.Errorf("unknown extension: got %v", err)
	}

	// Without a file the configuration can come from the environment alone.
	cfg, err = Load(Source{Env: []string{"KMIRROR_DESTINATION__BOOTSTRAP_SERVERS=d:9092", "KMIRROR_STATE__DIR=/s"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Destination.BootstrapServers[0] != "d:9092" {
		t.Errorf("destination from env = %q", cfg.Destination.BootstrapServers)
	}
}

const equivYAML = `
mirror.num.replica.fetchers: 2
mirror.metadata.refresh.interval.ms: 60000
mirror.replication.throttled.rate: 52428800
log.format: json
destination:
  bootstrap.servers: d1:9092,d2:9092
  security.protocol: SASL_PLAINTEXT
  sasl.mechanism: SCRAM-SHA-256
  sasl.username: kmirror
  sasl.password: pw
state:
  dir: /var/lib/kmirror
mirrors:
  - name: dc1
    bootstrap.servers: s1:9092
    mirror.topics.include: [ "orders.*", "a{1,3}" ]
    mirror.groups.exclude: ".*-test"
    mirror.acl.include: "TOPIC;orders.*,*;*;*;*;User:alice"
  - name: dc2
    bootstrap.servers: s2:9092
    client.id: kmirror-dc2
`

// TOML makes dotted keys nested tables unless quoted; both spellings must
// mean the same as YAML.
const equivTOML = `
"mirror.num.replica.fetchers" = 2
mirror.metadata.refresh.interval.ms = 60000
"mirror.replication.throttled.rate" = 52428800
log.format = "json"

[destination]
"bootstrap.servers" = "d1:9092,d2:9092"
security.protocol = "SASL_PLAINTEXT"
"sasl.mechanism" = "SCRAM-SHA-256"
sasl.username = "kmirror"
sasl.password = "pw"

[state]
dir = "/var/lib/kmirror"

[[mirrors]]
name = "dc1"
bootstrap.servers = "s1:9092"
"mirror.topics.include" = ["orders.*", "a{1,3}"]
mirror.groups.exclude = ".*-test"
"mirror.acl.include" = "TOPIC;orders.*,*;*;*;*;User:alice"

[[mirrors]]
name = "dc2"
"bootstrap.servers" = "s2:9092"
client.id = "kmirror-dc2"
`

func TestTOMLEquivalentToYAML(t *testing.T) {
	t.Parallel()
	fromYAML := mustParse(t, equivYAML, nil, nil)
	fromTOML, err := Parse([]byte(equivTOML), "toml", nil, nil)
	if err != nil {
		t.Fatalf("TOML: %v", err)
	}
	if !reflect.DeepEqual(fromYAML.Effective(), fromTOML.Effective()) {
		t.Errorf("TOML and YAML differ:\nYAML: %v\nTOML: %v", fromYAML.Effective(), fromTOML.Effective())
	}
	// Secrets are redacted in Effective; compare them directly.
	if fromTOML.Destination.SASLPassword.Reveal() != "pw" {
		t.Errorf("TOML password = %q", fromTOML.Destination.SASLPassword.Reveal())
	}
	if fromTOML.NumReplicaFetchers != 2 || fromTOML.MetadataRefreshInterval != time.Minute || len(fromTOML.Mirrors) != 2 {
		t.Errorf("TOML values wrong: %s", fromTOML.Summary())
	}

	// Load picks TOML from the extension.
	path := writeFile(t, t.TempDir(), "kmirror.toml", equivTOML)
	loaded, err := Load(Source{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(loaded.Effective(), fromYAML.Effective()) {
		t.Error("Load of a .toml file differs from the YAML configuration")
	}

	_, err = Parse([]byte("[destination\n"), "toml", nil, nil)
	var errs *Errors
	if !errors.As(err, &errs) || !errs.Has("configuration", "cannot parse TOML") {
		t.Errorf("TOML syntax error: got %v", err)
	}
}

func TestEffective(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, equivYAML, nil, nil)
	got := map[string]string{}
	for _, s := range cfg.Effective() {
		got[s.Path] = s.Value
	}
	want := map[string]string{
		"mirror.num.replica.fetchers":                        "2",
		"mirror.metadata.refresh.interval.ms":                "60000",
		"destination.bootstrap.servers":                      "d1:9092,d2:9092",
		"destination.sasl.password":                          Redacted,
		"destination.ssl.keystore.key":                       "",
		"state.dir":                                          "/var/lib/kmirror",
		"mirrors[dc1].mirror.topics.include":                 "orders.*,a{1,3}",
		"mirrors[dc1].mirror.acl.include":                    "TOPIC;orders.*,*;*;*;*;User:alice",
		"mirrors[dc2].client.id":                             "kmirror-dc2",
		"mirrors[dc2].mirror.topics.exclude":                 "__.*",
		"mirrors[dc2].name":                                  "dc2",
		"mirror.replication.throttled.rate":                  "52428800",
		"mirrors[dc1].mirror.groups.exclude":                 ".*-test",
		"mirrors[dc1].ssl.endpoint.identification.algorithm": "https",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Effective()[%s] = %q, want %q", k, got[k], v)
		}
	}
}

func TestEnvNamesAreUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, k := range Keys {
		n := EnvName(k.Scope, k.Name, "<NAME>")
		if prev, dup := seen[n]; dup {
			t.Errorf("keys %s and %s share the environment variable %s", prev, k.Name, n)
		}
		seen[n] = k.Name
	}
	if got := EnvName(ScopeCluster, "sasl.password", "dc1-to-dc2"); got != "KMIRROR_MIRRORS__DC1_TO_DC2__SASL_PASSWORD" {
		t.Errorf("EnvName = %s", got)
	}
	if got := EnvName(ScopeCluster, "bootstrap.servers", ""); got != "KMIRROR_DESTINATION__BOOTSTRAP_SERVERS" {
		t.Errorf("EnvName = %s", got)
	}
}

func TestDeclarations(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, k := range Keys {
		id := k.Scope.String() + "/" + k.Name
		if names[id] {
			t.Errorf("key %s declared twice", id)
		}
		names[id] = true
		if k.Doc == "" || k.Type == "" || k.Origin == 0 || k.decode == nil || k.encode == nil {
			t.Errorf("key %s is missing doc, type, origin or codec", id)
		}
		if k.Required && k.HasDefault {
			t.Errorf("key %s is required and has a default", id)
		}
		if strings.HasSuffix(k.Name, ".ms") && k.Type != "long (ms)" {
			t.Errorf("key %s ends in .ms but is not a duration", id)
		}
	}
	for _, u := range Unsupported {
		if names[u.Scope.String()+"/"+u.Name] {
			t.Errorf("key %s is both declared and unsupported", u.Name)
		}
	}
	// The KIP's mirror keys and defaults, verbatim.
	kip := map[string]string{
		"mirror.topics.exclude":               "__.*",
		"mirror.groups.include":               ".*",
		"mirror.acl.include":                  "*",
		"mirror.topic.properties.exclude":     "follower.replication.throttled.replicas, leader.replication.throttled.replicas, message.timestamp.difference.max.ms, log.message.timestamp.before.max.ms, log.message.timestamp.after.max.ms, message.timestamp.type, unclean.leader.election.enable, min.insync.replicas, mirror.name",
		"mirror.num.replica.fetchers":         "1",
		"mirror.metadata.refresh.interval.ms": "30000",
	}
	for name, def := range kip {
		found := false
		for _, k := range Keys {
			if k.Name == name {
				found = true
				if k.Default != def || k.Origin != OriginKIP {
					t.Errorf("%s default %q origin %s, want KIP default %q", name, k.Default, k.Origin, def)
				}
			}
		}
		if !found {
			t.Errorf("KIP key %s is not declared", name)
		}
	}
}

func TestFileOrderIndependent(t *testing.T) {
	t.Parallel()
	// Errors come out in the same order every time (maps are unordered).
	bad := minimal + "zz: 1\naa: 2\nmm: 3\nlog.level: x\n"
	first := parseErrs(t, bad, nil, nil).Error()
	for i := 0; i < 20; i++ {
		if got := parseErrs(t, bad, nil, nil).Error(); got != first {
			t.Fatalf("error order changed:\n%s\nvs\n%s", first, got)
		}
	}
}

func TestStateDirMayNotExistYet(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "not", "yet")
	cfg := mustParse(t, "destination: {bootstrap.servers: 'd:1'}\nstate: {dir: "+dir+"}\n", nil, nil)
	if cfg.State.Dir != dir {
		t.Errorf("state.dir = %q", cfg.State.Dir)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Error("loading a configuration must not create the state directory")
	}
}

func TestPprofSwitch(t *testing.T) {
	t.Parallel()
	if cfg := mustParse(t, minimal, nil, nil); cfg.HTTPPprofEnable {
		t.Error("http.pprof.enable is on by default, want off")
	}
	if cfg := mustParse(t, minimal+"http.pprof.enable: true\n", nil, nil); !cfg.HTTPPprofEnable {
		t.Error("http.pprof.enable: true in the file not applied")
	}
	if cfg := mustParse(t, minimal, []string{"KMIRROR_HTTP_PPROF_ENABLE=TRUE"}, nil); !cfg.HTTPPprofEnable {
		t.Error("KMIRROR_HTTP_PPROF_ENABLE=TRUE not applied")
	}
	if cfg := mustParse(t, minimal+"http.pprof.enable: true\n", []string{"KMIRROR_HTTP_PPROF_ENABLE=false"}, nil); cfg.HTTPPprofEnable {
		t.Error("KMIRROR_HTTP_PPROF_ENABLE=false does not override the file")
	}
}
