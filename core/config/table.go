package config

import (
	"math"
	"strconv"
	"time"

	"github.com/kmirror/kmirror/core/aclrule"
	"github.com/kmirror/kmirror/core/config/security"

	"github.com/kmirror/kmirror/core/config/value"
)

// DefaultTopicPropertiesExclude is KIP-1279's default for
// mirror.topic.properties.exclude, verbatim.
const DefaultTopicPropertiesExclude = "follower.replication.throttled.replicas, leader.replication.throttled.replicas, message.timestamp.difference.max.ms, log.message.timestamp.before.max.ms, log.message.timestamp.after.max.ms, message.timestamp.type, unclean.leader.election.enable, min.insync.replicas, mirror.name"

const maxInt32 = math.MaxInt32

var maxLong = strconv.FormatInt(math.MaxInt64, 10)

// Field binders, one per scope struct.
func daemonKey[V any](k Key, f func(*Config) *V, c value.Codec[V]) Key {
	k.Scope = ScopeDaemon
	return declare(k, f, c)
}

func clusterKey[V any](k Key, f func(*Cluster) *V, c value.Codec[V]) Key {
	k.Scope = ScopeCluster
	return declare(k, f, c)
}

func mirrorKey[V any](k Key, f func(*Mirror) *V, c value.Codec[V]) Key {
	k.Scope = ScopeMirror
	return declare(k, f, c)
}

func stateKey[V any](k Key, f func(*State) *V, c value.Codec[V]) Key {
	k.Scope = ScopeState
	return declare(k, f, c)
}

func pluginKey[V any](k Key, f func(*Plugin) *V, c value.Codec[V]) Key {
	k.Scope = ScopePlugin
	return declare(k, f, c)
}

// def marks a key with a default value.
func def(k Key, value string) Key {
	k.Default, k.HasDefault = value, true
	return k
}

// Keys is the declaration table: every configuration key kmirror reads, in
// the order the reference lists them. Nothing else defines a key.
var Keys = []Key{
	// ---- Daemon: KIP-1279 broker-level keys --------------------------------
	daemonKey(def(Key{Name: "mirror.num.replica.fetchers", Origin: OriginKIP,
		Doc: "Number of fetcher threads per mirrored source broker. kmirror runs this many fetch sessions to each source broker of each mirror and spreads that broker's partitions over them."},
		"1"), func(c *Config) *int { return &c.NumReplicaFetchers }, value.Int(1, maxInt32)),
	daemonKey(def(Key{Name: "mirror.metadata.refresh.interval.ms", Origin: OriginKIP,
		Doc: "The interval in milliseconds at which source clusters are polled for metadata: new topics, partition counts, topic configs, group offsets and ACLs (one pass of every sync loop)."},
		"30000"), func(c *Config) *time.Duration { return &c.MetadataRefreshInterval }, value.Ms(1)),
	daemonKey(def(Key{Name: "mirror.replication.throttled.rate", Origin: OriginKafka,
		Doc: "Upper bound in bytes/s on replication traffic fetched from source clusters, for the whole daemon. The default, Long.MAX_VALUE (as for Kafka's other `*.replication.throttled.rate` keys), means unlimited. KIP-1279 suggests keeping a limit above 1 MB/s for accurate behaviour."},
		maxLong), func(c *Config) *int64 { return &c.ReplicationThrottledRate }, value.Long(1)),
	daemonKey(def(Key{Name: "request.timeout.ms", Origin: OriginKIP,
		Doc: "Request timeout for source cluster communication (kmirror applies it to destination requests too)."},
		"30000"), func(c *Config) *time.Duration { return &c.RequestTimeout }, value.Ms(1)),
	daemonKey(def(Key{Name: "socket.connection.setup.timeout.ms", Origin: OriginKIP,
		Doc: "Socket connection setup timeout."},
		"10000"), func(c *Config) *time.Duration { return &c.SocketConnectionSetupTimeout }, value.Ms(1)),
	daemonKey(def(Key{Name: "reconnect.backoff.ms", Origin: OriginKIP,
		Doc: "Backoff time before reconnection attempts."},
		"50"), func(c *Config) *time.Duration { return &c.ReconnectBackoff }, value.Ms(0)),
	daemonKey(def(Key{Name: "send.buffer.bytes", Origin: OriginKIP,
		Doc: "TCP send buffer size (SO_SNDBUF). -1 uses the OS default."},
		"131072"), func(c *Config) *int { return &c.SendBufferBytes }, value.Buffer()),
	daemonKey(def(Key{Name: "receive.buffer.bytes", Origin: OriginKIP,
		Doc: "TCP receive buffer size (SO_RCVBUF) for connections other than fetches. -1 uses the OS default."},
		"65536"), func(c *Config) *int { return &c.ReceiveBufferBytes }, value.Buffer()),
	daemonKey(def(Key{Name: "replica.fetch.backoff.ms", Origin: OriginKafka,
		Doc: "Time to wait before retrying fetch requests after failures (e.g., source leader change)."},
		"1000"), func(c *Config) *time.Duration { return &c.ReplicaFetchBackoff }, value.Ms(0)),
	daemonKey(def(Key{Name: "replica.fetch.max.bytes", Origin: OriginKafka,
		Doc: "Maximum bytes to fetch per partition in a single request to the source cluster. A record batch larger than this is still returned whole, so progress is always made."},
		"1048576"), func(c *Config) *int { return &c.ReplicaFetchMaxBytes }, value.Int(1, maxInt32)),
	daemonKey(def(Key{Name: "replica.fetch.min.bytes", Origin: OriginKafka,
		Doc: "Minimum bytes that must be available before the source cluster responds to fetch requests (helps reduce cross-datacenter request frequency for low-throughput topics)."},
		"1"), func(c *Config) *int { return &c.ReplicaFetchMinBytes }, value.Int(1, maxInt32)),
	daemonKey(def(Key{Name: "replica.fetch.response.max.bytes", Origin: OriginKafka,
		Doc: "Maximum total bytes across all partitions in a single fetch response from source cluster (important for WAN bandwidth management in cluster mirroring)."},
		"10485760"), func(c *Config) *int { return &c.ReplicaFetchResponseMaxBytes }, value.Int(1, maxInt32)),
	daemonKey(def(Key{Name: "replica.fetch.wait.max.ms", Origin: OriginKafka,
		Doc: "Maximum time the source cluster will wait to accumulate replica.fetch.min.bytes before responding (balances latency vs. efficiency for cross-cluster replication). Must not exceed replica.socket.timeout.ms."},
		"500"), func(c *Config) *time.Duration { return &c.ReplicaFetchWaitMax }, value.Ms(0)),
	daemonKey(def(Key{Name: "replica.socket.receive.buffer.bytes", Origin: OriginKafka,
		Doc: "TCP receive buffer size for connections to source cluster brokers (larger values can improve throughput over high-latency WAN links). -1 uses the OS default."},
		"65536"), func(c *Config) *int { return &c.ReplicaSocketReceiveBuffer }, value.Buffer()),
	daemonKey(def(Key{Name: "replica.socket.timeout.ms", Origin: OriginKafka,
		Doc: "Socket timeout for read operations from source cluster (should account for cross-datacenter network latency). Must be at least replica.fetch.wait.max.ms."},
		"30000"), func(c *Config) *time.Duration { return &c.ReplicaSocketTimeout }, value.Ms(1)),
	daemonKey(def(Key{Name: "mirror.failed.retry.initial.backoff.ms", Origin: OriginKIP,
		Doc: "First wait before a FAILED partition is retried (retryable failures only). Each further attempt doubles the wait, with full jitter, up to mirror.failed.retry.max.backoff.ms. The KIP prototype's value."},
		"1000"), func(c *Config) *time.Duration { return &c.FailedRetryInitialBackoff }, value.Ms(1)),
	daemonKey(def(Key{Name: "mirror.failed.retry.max.backoff.ms", Origin: OriginKIP,
		Doc: "Longest wait between retries of a FAILED partition. Must be at least mirror.failed.retry.initial.backoff.ms."},
		"300000"), func(c *Config) *time.Duration { return &c.FailedRetryMaxBackoff }, value.Ms(1)),
	daemonKey(def(Key{Name: "mirror.failed.retry.max.attempts", Origin: OriginKIP,
		Doc: "Automatic retries of a FAILED partition before it waits for an operator to restart it. The count is of consecutive failures: it starts again once the partition makes progress after a retry (a fetched delivery written to the destination), so faults far apart never use the budget up. **0 means no automatic retries**: every failure waits for an operator."},
		"10"), func(c *Config) *int { return &c.FailedRetryMaxAttempts }, value.Int(0, maxInt32)),

	// ---- Daemon: kmirror's own keys ----------------------------------------
	daemonKey(def(Key{Name: "mirror.offset.alignment.max.records", Origin: OriginKmirror,
		Doc: "Filler budget. When a source partition's log does not start at offset 0, kmirror appends up to this many filler records to the empty destination partition and then deletes them (DeleteRecords), so that offsets line up (`preserve` mode). A partition whose source log start offset exceeds the budget runs in `map` mode instead, and so does one whose destination topic refuses DeleteRecords (`cleanup.policy` without `delete`, e.g. `compact`), since its filler could never be removed. 0 disables filler: every such partition runs in `map` mode. One million small filler records cost roughly tens of MB of transient destination writes."},
		"1000000"), func(c *Config) *int64 { return &c.OffsetAlignmentMaxRecords }, value.Long(0)),
	daemonKey(def(Key{Name: "mirror.buffer.max.bytes", Origin: OriginKmirror,
		Doc: "Upper bound on the bytes fetched from source clusters and not yet appended to the destination, for the whole daemon (all mirrors share it; franz-go's MaxBufferedBytes is the model). A fetch is sent only when the response it may bring fits in what remains (a record batch larger than the whole budget is still fetched when nothing else is buffered), and each partition's fetch size is min(replica.fetch.max.bytes, this / mirrored partitions), at least 16 KiB, so fetch sizes shrink as partitions are added. Fetched data keeps at most about twice this in live memory (a small share of a fetch response is copied out so that it does not keep the whole response alive); the default is sized for kmirror's target of at most 256 MiB resident while catching up on 500 or 10,000 partitions (docs/design/datapath.md, Memory). Raise it for more throughput per partition when memory allows. Applied on reload without a restart."},
		"67108864"), func(c *Config) *int64 { return &c.BufferMaxBytes }, value.Long(1)),
	daemonKey(def(Key{Name: "memory.soft.limit.bytes", Origin: OriginKmirror, Constraint: "0 (none), or 1 and more",
		Doc: "The Go runtime's soft memory limit for the daemon (Go's `GOMEMLIMIT`, set at start): the collector starts earlier as the process's memory nears it, instead of letting the heap grow to twice what survived the last collection (`GOGC=100`). At 10,000 idle partitions most of the daemon's memory is long-lived and that headroom is mostly start-up's garbage, so 192 MiB (201326592) keeps an idle daemon at 10,000 partitions and its state-store plugin near kmirror's target of 256 MiB resident (docs/benchmarks.md; start-up's transient peak can pass it). Off by default: a limit near the live memory of a daemon catching up on many partitions makes the collector run more often, which costs CPU on the data path that has not been measured yet; set it (about three quarters of the memory the daemon may use) where resident memory matters more. It is not a cap: once a second the daemon reads the memory a collection cannot free (live heap, stacks, the runtime's own) and, while that is above 7/8 of the limit, sets the limit to twice it (logging a warning), so the collector never runs constantly; the configured limit applies again once the live memory falls back. The `GOMEMLIMIT` environment variable, when set, wins (the Kubernetes manifests set it from the container's limit). 0: no limit. Read at start; a change takes effect after a restart."},
		"0"), func(c *Config) *int64 { return &c.MemorySoftLimit }, value.Long(0)),
	daemonKey(def(Key{Name: "mirror.transaction.timeout.ms", Origin: OriginKmirror, Constraint: "0, or 1 to 2147483647",
		Doc: "Timeout of the destination transactions that replay source transactions. **0 uses the destination's `transaction.max.timeout.ms`** (read at start; Kafka's default is 15 minutes), so that a source transaction open for a long time, or a daemon restart, does not make the destination abort a replayed transaction. A destination transaction that times out anyway (kmirror was down for longer) is recovered: the partition continues in `map` mode and copies that transaction's records again (docs/design/datapath.md)."},
		"0"), func(c *Config) *time.Duration { return &c.TransactionTimeout }, value.Ms(0)),
	daemonKey(def(Key{Name: "mirror.transaction.writer.idle.ms", Origin: OriginKmirror,
		Doc: "How long a destination transactional writer (one per source producer and partition) with no open transaction is kept in memory. A forgotten writer is initialised again (InitProducerId, a new epoch recorded before use) at its source producer's next transaction. Lower it when sources have very many short-lived transactional producers."},
		"900000"), func(c *Config) *time.Duration { return &c.TransactionWriterIdle }, value.Ms(1)),
	daemonKey(def(Key{Name: "mirror.appends.in.flight.per.partition", Origin: OriginKmirror, Constraint: "1 to 5",
		Doc: "How many appends of one partition may be in flight to the destination at once (Kafka's `max.in.flight.requests.per.connection` for an idempotent producer). Consecutive batches of one producer are pipelined behind each other; the destination's sequence check refuses one that would overtake another, and each is still checked to land at its source offset (docs/design/datapath.md). At most 5: a broker recognises a retried duplicate among a producer's last 5 batches only. 1 sends each batch after the previous one was answered, which halves throughput or worse when the destination is far away."},
		"5"), func(c *Config) *int { return &c.AppendsInFlight }, value.Int(1, 5)),
	daemonKey(def(Key{Name: "mirror.produce.requests.in.flight.per.broker", Origin: OriginKmirror, Constraint: "1 to 100",
		Doc: "How many ProduceRequests a mirror keeps in flight to one destination broker (on its one produce connection). A request carries one batch of each partition that has one ready, so this also bounds a partition's appends in flight below `mirror.appends.in.flight.per.partition`. Raise it (e.g. 20) when the destination is far away and few partitions are mirrored: each partition then keeps its window full. Near the destination, more requests in flight leave with fewer partitions each and cost CPU on both sides (docs/benchmarks.md)."},
		"5"), func(c *Config) *int { return &c.ProduceRequestsInFlight }, value.Int(1, 100)),
	daemonKey(def(Key{Name: "log.level", Origin: OriginKmirror,
		Doc: "Lowest level that is logged."},
		"info"), func(c *Config) *string { return &c.LogLevel }, value.Enum([]string{"trace", "debug", "info", "warn", "error"}, nil)),
	daemonKey(def(Key{Name: "log.format", Origin: OriginKmirror,
		Doc: "Log line format: human-readable text, or one JSON object per line."},
		"text"), func(c *Config) *string { return &c.LogFormat }, value.Enum([]string{"text", "json"}, nil)),
	daemonKey(def(Key{Name: "http.address", Origin: OriginKmirror, Constraint: `host:port, or "" to disable`,
		Doc: "Listen address of the unauthenticated HTTP endpoints `/healthz`, `/readyz`, `/metrics` (Prometheus); the status page, `/v1/live` and `/v1/describe` when http.status.enable is on, and `/debug/pprof/` when http.pprof.enable is on. An empty host listens on all interfaces; `\"\"` disables the listener."},
		"127.0.0.1:9644"), func(c *Config) *string { return &c.HTTPAddress }, value.String("address", value.CheckListenAddress)),
	daemonKey(def(Key{Name: "http.pprof.enable", Origin: OriginKmirror,
		Doc: "Serve Go's profiling endpoints (`net/http/pprof`: CPU, heap, allocations, goroutines, mutex and block profiles, execution traces; not the command line, which may hold a secret) under `/debug/pprof/` on http.address, for `go tool pprof`. **Off by default**: the HTTP listener is unauthenticated, profiles show the code's internals (stack traces, allocation sites), and a CPU profile or trace costs CPU while it runs, so turn it on only on a listener that untrusted clients cannot reach. Applied on reload (SIGHUP): while it is false the paths answer 404."},
		"false"), func(c *Config) *bool { return &c.HTTPPprofEnable }, value.Bool()),
	daemonKey(def(Key{Name: "http.status.enable", Origin: OriginKmirror,
		Doc: "Serve the status page (`GET /`), its data (`GET /v1/live`, what `kmirror status` reads) and `GET /v1/describe` on http.address. **Off by default**: the HTTP listener is unauthenticated, so it serves only `/healthz`, `/readyz` and `/metrics` (and `/debug/pprof/` with http.pprof.enable) unless this is on; the status shows topic names, offsets, lags and error texts (never a secret). Turn it on where the listener is reachable only by those who may see that. The admin API (`kmirror describe`) needs no such switch: it is authenticated. Applied on reload (SIGHUP): while it is false the paths answer 404 saying how to turn them on."},
		"false"), func(c *Config) *bool { return &c.HTTPStatusEnable }, value.Bool()),
	daemonKey(def(Key{Name: "metrics.partition.series.enable", Origin: OriginKmirror,
		Doc: "Export the metric series that carry a `topic` and `partition` label: `kmirror_consumer_lag` (KIP-1279 ConsumerLag, one series per mirrored partition) and the topic and partition of `kmirror_destination_mismatches_total`. **On by default**, as Kafka exports ConsumerLag per partition. Turn it off when a daemon mirrors many partitions (thousands) and the scrape's size or the time series database's cardinality matters: every other metric is per mirror, cluster, broker, state or API, so a scrape stays bounded whatever the partition count (at 10,000 partitions, well under 1 MB; docs/metrics.md); `kmirror_max_lag` still shows each mirror's largest lag and `kmirror describe` each partition's. Applied on reload (SIGHUP)."},
		"true"), func(c *Config) *bool { return &c.MetricsPartitionSeries }, value.Bool()),
	daemonKey(def(Key{Name: "admin.address", Origin: OriginKmirror, Constraint: `host:port, or "" to disable`,
		Doc: "Listen address of the admin API (HTTP+JSON; `kmirror mirrors ...` and `kmirror failover` talk to it). Every call is authenticated (admin.token.file and/or mTLS) and logged with its caller. **Off by default on non-loopback addresses**: a host other than `localhost` or a loopback IP (an empty host listens on all interfaces) is refused unless admin.tls.client.ca.file or admin.token.file is set, and off loopback TLS (admin.tls.cert.file) is required: refused otherwise, so that a token never crosses the network in clear text. `\"\"` disables the admin API. Read at start; a change takes effect after a restart."},
		"127.0.0.1:9645"), func(c *Config) *string { return &c.AdminAddress }, value.String("address", value.CheckListenAddress)),
	daemonKey(def(Key{Name: "http.readyz.cluster.unreachable.ms", Origin: OriginKmirror, Constraint: "0 (off), or 1 and more",
		Doc: "`/readyz` answers 503, and `kmirror_ready` is 0, while a cluster (the destination, or a mirror's source) has been unreachable for longer than this: no broker of it answered kmirror's client since (`kmirror_cluster_up` is 0 at once; this is the grace before readiness follows). The body names the cluster, the mirror and the last error. **0, the default, turns the check off**: a Kubernetes readiness probe that fails only takes the pod out of a Service, which kmirror does not serve, so set it when something acts on readiness (an alert, a rollout that should wait). Applied on reload (SIGHUP)."},
		"0"), func(c *Config) *time.Duration { return &c.ReadyzClusterUnreachable }, value.Ms(0)),
	daemonKey(def(Key{Name: "http.readyz.failed.partitions.max", Origin: OriginKmirror, Constraint: "-1 (off), or 0 and more",
		Doc: "`/readyz` answers 503, and `kmirror_ready` is 0, while more than this many partitions (of every mirror together) are FAILED; 0 fails readiness at the first FAILED partition. The body says how many. **-1, the default, turns the check off** (as for http.readyz.cluster.unreachable.ms). Applied on reload (SIGHUP)."},
		"-1"), func(c *Config) *int { return &c.ReadyzFailedPartitionsMax }, value.Int(-1, math.MaxInt32)),
	daemonKey(Key{Name: "admin.token.file", Origin: OriginKmirror,
		Doc: "File holding the admin API's bearer token (surrounding white space is ignored). Callers send `Authorization: Bearer <token>`. When unset and no client CA is configured, the daemon uses `<state.dir>/admin.token`, creating it at start with a random 256-bit token (mode 0600) if it is missing, so that a local `kmirror` CLI with the same configuration works at once and the API is never unauthenticated. When admin.tls.client.ca.file is set too, callers need both the token and a client certificate. Read at start and again on reload (a rotated token takes effect on SIGHUP). The path is not secret; the file's content is, and never appears in logs or output."},
		func(c *Config) *string { return &c.AdminTokenFile }, value.String("path", nil)),
	daemonKey(Key{Name: "admin.tls.cert.file", Origin: OriginKmirror,
		Doc: "PEM file with the admin API's server certificate chain. With admin.tls.key.file the admin API serves HTTPS (TLS 1.2 or later). Re-read on reload."},
		func(c *Config) *string { return &c.AdminTLSCertFile }, value.String("path", nil)),
	daemonKey(Key{Name: "admin.tls.key.file", Origin: OriginKmirror,
		Doc: "PEM file with the unencrypted private key of admin.tls.cert.file. Protect it with file permissions."},
		func(c *Config) *string { return &c.AdminTLSKeyFile }, value.String("path", nil)),
	daemonKey(Key{Name: "admin.tls.client.ca.file", Origin: OriginKmirror,
		Doc: "PEM file of the CA certificates that sign admin clients' certificates. When set, every admin call needs a client certificate that verifies against it (mutual TLS); the caller is logged as the certificate's subject CN. Needs admin.tls.cert.file and admin.tls.key.file."},
		func(c *Config) *string { return &c.AdminTLSClientCAFile }, value.String("path", nil)),
	daemonKey(Key{Name: "admin.tls.client.subjects", Origin: OriginKmirror,
		Doc: "Which client certificates may call the admin API: RE2 regexes, each matched against the whole subject of the caller's certificate as Go prints it (`CN=ops,OU=platform,O=Example`) and against its CN alone. A certificate the CA signed whose subject matches none is refused with 403 and logged. Empty (the default): every certificate admin.tls.client.ca.file signs. Needs admin.tls.client.ca.file. Applied on reload."},
		func(c *Config) *RegexList { return &c.AdminTLSClientSubjects }, regexListCodec()),
	daemonKey(def(Key{Name: "shutdown.timeout.ms", Origin: OriginKmirror,
		Doc: "Deadline for the ordered shutdown after SIGTERM or SIGINT (stop fetchers, finish or abort in-flight appends, flush state). When it passes, the daemon exits anyway; the next start resumes from the destination, so no data is lost."},
		"30000"), func(c *Config) *time.Duration { return &c.ShutdownTimeout }, value.Ms(1)),
	daemonKey(Key{Name: "plugin.dir", Origin: OriginKmirror,
		Doc: "Directory of plugin binaries: a plugin's relative `path` is taken from here. Empty: `<state.dir>/plugins`. kmirror never writes to it and runs nothing from it that the configuration does not name with its SHA-256."},
		func(c *Config) *string { return &c.PluginDir }, value.String("path", nil)),
	daemonKey(def(Key{Name: "plugin.builtin.in.process", Origin: OriginKmirror,
		Doc: "Run built-in plugins (`builtin:` in a plugins entry) inside the daemon instead of as child processes. **Off by default**: each built-in runs out of process through the same RPC path as a third-party plugin (the kmirror binary re-executed as `kmirror plugin serve <kind> <name>`), so the path users rely on is the one tested and a crashing plugin cannot take the daemon down. On: no RPC cost per call, no restart on a crash. Read at start."},
		"false"), func(c *Config) *bool { return &c.PluginBuiltinInProcess }, value.Bool()),

	// ---- Cluster (client) keys: destination and every mirror's source -------
	clusterKey(Key{Name: "bootstrap.servers", Origin: OriginKIP, Required: true,
		Doc: "A list of host/port pairs to use for establishing the initial connection to the cluster (for a mirror: the source cluster)."},
		func(c *Cluster) *[]string { return &c.BootstrapServers }, value.StringList("host:port list", value.CheckHostPort)),
	clusterKey(def(Key{Name: "client.id", Origin: OriginKafka,
		Doc: "Client id sent with every request (used by brokers for logs and quotas)."},
		"kmirror"), func(c *Cluster) *string { return &c.ClientID }, value.String("string", nil)),
	clusterKey(def(Key{Name: "security.protocol", Origin: OriginKIP,
		Doc: "Protocol for cluster communication."},
		ProtocolPlaintext), func(c *Cluster) *string { return &c.SecurityProtocol },
		value.Enum([]string{ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL}, nil)),
	clusterKey(def(Key{Name: "sasl.mechanism", Origin: OriginKIP,
		Doc: "SASL mechanism, used when security.protocol is SASL_PLAINTEXT or SASL_SSL. GSSAPI (Kerberos) logs in with a keytab (sasl.kerberos.*)."},
		MechanismPlain), func(c *Cluster) *string { return &c.SASLMechanism },
		value.Enum([]string{MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512, MechanismOAuthBearer, MechanismGSSAPI}, nil)),
	clusterKey(Key{Name: "sasl.username", Origin: OriginKmirror,
		Doc: "User name for PLAIN and SCRAM. Alternative to sasl.jaas.config."},
		func(c *Cluster) *string { return &c.SASLUsername }, value.String("string", nil)),
	clusterKey(Key{Name: "sasl.password", Origin: OriginKmirror, Secret: true,
		Doc: "Password for PLAIN and SCRAM. Prefer the environment variable or sasl.password.file over writing it in the file."},
		func(c *Cluster) *Secret { return &c.SASLPassword }, value.Secret()),
	clusterKey(Key{Name: "sasl.password.file", Origin: OriginKmirror,
		Doc: "File holding the password for PLAIN and SCRAM (one trailing newline is ignored). Read at load time to validate it and again at every connection, so a rotated password is picked up without a restart."},
		func(c *Cluster) *string { return &c.SASLPasswordFile }, value.String("path", nil)),
	clusterKey(Key{Name: "sasl.jaas.config", Origin: OriginKIP, Secret: true,
		Doc: "JAAS login context parameters for authentication, in Java's form, e.g. `org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"p\";`. kmirror reads `username` and `password` from PlainLoginModule and ScramLoginModule, and `clientId`, `clientSecret` and `scope` from OAuthBearerLoginModule. Alternative to sasl.username/sasl.password."},
		func(c *Cluster) *Secret { return &c.SASLJAASConfig }, value.Secret()),
	clusterKey(Key{Name: "sasl.credentials.plugin", Origin: OriginKmirror, Constraint: "the name of an auth plugin in plugins",
		Doc: "Name of the auth plugin (in `plugins`) that supplies this cluster's SASL credentials for sasl.mechanism: a username and password for PLAIN and SCRAM, a token for OAUTHBEARER. With it, set none of sasl.username, sasl.password, sasl.password.file, sasl.jaas.config and sasl.oauthbearer.*. Without it, kmirror runs a built-in auth plugin for the cluster from those keys: `static` for PLAIN and SCRAM, `oauth` for OAUTHBEARER (docs/plugins.md, \"Credentials of a cluster\")."},
		func(c *Cluster) *string { return &c.SASLCredentialsPlugin }, value.String("plugin name", CheckPluginName)),
	clusterKey(Key{Name: "sasl.oauthbearer.token.endpoint.url", Origin: OriginKIP,
		Doc: "OAuth token endpoint URL (when using OAUTHBEARER); kmirror's auth plugin runs the client-credentials flow against it."},
		func(c *Cluster) *string { return &c.OAuthTokenEndpointURL }, value.String("URL", value.CheckURL)),
	clusterKey(Key{Name: "sasl.oauthbearer.client.id", Origin: OriginKmirror,
		Doc: "OAuth client id for the client-credentials flow."},
		func(c *Cluster) *string { return &c.OAuthClientID }, value.String("string", nil)),
	clusterKey(Key{Name: "sasl.oauthbearer.client.secret", Origin: OriginKmirror, Secret: true,
		Doc: "OAuth client secret for the client-credentials flow."},
		func(c *Cluster) *Secret { return &c.OAuthClientSecret }, value.Secret()),
	clusterKey(Key{Name: "sasl.oauthbearer.scope", Origin: OriginKafka,
		Doc: "OAuth scope requested with the token (optional)."},
		func(c *Cluster) *string { return &c.OAuthScope }, value.String("string", nil)),
	clusterKey(def(Key{Name: "sasl.kerberos.service.name", Origin: OriginKafka,
		Doc: "The Kerberos name the brokers run as: the first part of their principal (`kafka` for `kafka/broker1.example.com@EXAMPLE.COM`). kmirror asks the KDC for a ticket to `<this>/<broker host>`, the host as the broker advertises it. GSSAPI only. `serviceName` in a Krb5LoginModule sasl.jaas.config sets it too."},
		security.DefaultKerberosServiceName), func(c *Cluster) *string { return &c.KerberosServiceName }, value.String("string", nil)),
	clusterKey(Key{Name: "sasl.kerberos.principal", Origin: OriginKmirror, Constraint: "name[/instance][@REALM]",
		Doc: "The Kerberos principal kmirror logs in as (GSSAPI), e.g. `kmirror@EXAMPLE.COM`; without a realm, krb5.conf's default_realm. Kafka's equivalent is `principal` in a Krb5LoginModule sasl.jaas.config, which kmirror reads too. The brokers map it to a Kafka user with sasl.kerberos.principal.to.local.rules (by default `kmirror@EXAMPLE.COM` is `User:kmirror`)."},
		func(c *Cluster) *string { return &c.KerberosPrincipal }, value.String("principal", nil)),
	clusterKey(Key{Name: "sasl.kerberos.keytab", Origin: OriginKmirror,
		Doc: "Keytab file holding the keys of sasl.kerberos.principal (GSSAPI), made with kadmin's `ktadd -k <file> <principal>`. kmirror logs in with it (the KDC's AS exchange) and logs in again when the ticket nears its end; the file is read at every login, so a rotated keytab is used without a restart. Kafka's equivalent is `useKeyTab=true keyTab=\"<file>\"` in a Krb5LoginModule sasl.jaas.config, which kmirror reads too; a ticket cache (useTicketCache, kinit) is not supported. Its content never appears in logs or errors; protect it with file permissions."},
		func(c *Cluster) *string { return &c.KerberosKeytab }, value.String("path", nil)),
	clusterKey(def(Key{Name: "sasl.kerberos.krb5.conf", Origin: OriginKmirror,
		Doc: "The Kerberos configuration file (MIT krb5.conf format): the realms, their KDCs (`kdc = host:port`), default_realm and encryption types (GSSAPI). The Java client's equivalent is the java.security.krb5.conf system property. Read at every login."},
		"/etc/krb5.conf"), func(c *Cluster) *string { return &c.KerberosKrb5Conf }, value.String("path", nil)),
	clusterKey(Key{Name: "ssl.truststore.location", Origin: OriginKIP,
		Doc: "PEM file of CA certificates for verifying the cluster's broker certificates. Without it (and without ssl.truststore.certificates) the system roots are used."},
		func(c *Cluster) *string { return &c.TruststoreLocation }, value.String("path", nil)),
	clusterKey(def(Key{Name: "ssl.truststore.type", Origin: OriginKIP,
		Doc: "Truststore file format. Only PEM is supported (Kafka's default is JKS): convert a JKS or PKCS12 truststore to PEM, see docs/configuration.md."},
		"PEM"), func(c *Cluster) *string { return &c.TruststoreType }, value.Enum([]string{"PEM"}, storeTypeRejections)),
	clusterKey(Key{Name: "ssl.truststore.certificates", Origin: OriginKIP,
		Doc: "Trusted certificates in PEM format (alternative to ssl.truststore.location)."},
		func(c *Cluster) *string { return &c.TruststoreCertificates }, value.String("PEM", nil)),
	clusterKey(Key{Name: "ssl.keystore.location", Origin: OriginKIP,
		Doc: "PEM file holding the client certificate chain and its unencrypted private key, for mutual TLS."},
		func(c *Cluster) *string { return &c.KeystoreLocation }, value.String("path", nil)),
	clusterKey(def(Key{Name: "ssl.keystore.type", Origin: OriginKIP,
		Doc: "Keystore file format. Only PEM is supported."},
		"PEM"), func(c *Cluster) *string { return &c.KeystoreType }, value.Enum([]string{"PEM"}, storeTypeRejections)),
	clusterKey(Key{Name: "ssl.keystore.certificate.chain", Origin: OriginKIP,
		Doc: "Client certificate chain in PEM format (alternative to ssl.keystore.location; needs ssl.keystore.key)."},
		func(c *Cluster) *string { return &c.KeystoreCertificateChain }, value.String("PEM", nil)),
	clusterKey(Key{Name: "ssl.keystore.key", Origin: OriginKIP, Secret: true,
		Doc: "Client private key in PEM format (alternative to ssl.keystore.location; needs ssl.keystore.certificate.chain)."},
		func(c *Cluster) *Secret { return &c.KeystoreKey }, value.Secret()),
	clusterKey(Key{Name: "ssl.key.password", Origin: OriginKIP, Secret: true,
		Doc: "Password of an encrypted private key. kmirror does not support encrypted PEM keys (Go has no safe decoder for them), so setting this is an error that says how to decrypt the key; protect the key file with file permissions instead."},
		func(c *Cluster) *Secret { return &c.KeyPassword }, value.Secret()),
	clusterKey(def(Key{Name: "ssl.endpoint.identification.algorithm", Origin: OriginKIP,
		Doc: "Endpoint identification algorithm for hostname verification (https or empty to disable). With \"\" the certificate chain is still verified against the truststore; only the host name check is skipped."},
		"https"), func(c *Cluster) *string { return &c.EndpointIdentificationAlgorithm }, value.Enum([]string{"https", ""}, nil)),
	clusterKey(def(Key{Name: "ssl.enabled.protocols", Origin: OriginKafka,
		Doc: "List of enabled SSL/TLS protocol versions."},
		"TLSv1.2,TLSv1.3"), func(c *Cluster) *[]string { return &c.EnabledProtocols }, value.StringList("list", security.CheckTLSVersion)),

	// ---- Mirror keys --------------------------------------------------------
	mirrorKey(Key{Name: "name", Origin: OriginKmirror, Required: true, Constraint: "[A-Za-z0-9_-]+, unique",
		Doc: "Name of the mirror. It identifies the mirror in state, metrics, logs and the command line, so renaming a mirror starts it afresh."},
		func(m *Mirror) *string { return &m.Name }, value.String("string", CheckMirrorName)),
	mirrorKey(Key{Name: "mirror.topics.include", Origin: OriginKIP,
		Doc: "A comma-separated list of regex patterns for topic names to include in mirroring. Topics on the source cluster whose names match at least one of the patterns will be automatically discovered and mirrored. Empty: no topic is discovered automatically; only topics started explicitly are mirrored."},
		func(m *Mirror) *RegexList { return &m.TopicsInclude }, regexListCodec()),
	mirrorKey(def(Key{Name: "mirror.topics.exclude", Origin: OriginKIP,
		Doc: "A comma-separated list of regex patterns for topic names to exclude from mirroring. Topics matching the exclude pattern are not mirrored even if they match mirror.topics.include. Internal topics are always excluded. Exclude always wins over include. By default internal topics (starting with __ ) are excluded."},
		"__.*"), func(m *Mirror) *RegexList { return &m.TopicsExclude }, regexListCodec()),
	mirrorKey(def(Key{Name: "mirror.groups.include", Origin: OriginKIP,
		Doc: "A comma-separated list of regex patterns for consumer group IDs to include in offset synchronization. Only consumer groups whose IDs match at least one of the patterns will have their offsets replicated from the source cluster."},
		".*"), func(m *Mirror) *RegexList { return &m.GroupsInclude }, regexListCodec()),
	mirrorKey(Key{Name: "mirror.groups.exclude", Origin: OriginKIP,
		Doc: "A comma-separated list of regex patterns for consumer group IDs to exclude from offset synchronization. Groups matching the exclude pattern are not replicated even if they match mirror.groups.include."},
		func(m *Mirror) *RegexList { return &m.GroupsExclude }, regexListCodec()),
	mirrorKey(def(Key{Name: "mirror.acl.include", Origin: OriginKIP,
		Doc: "A comma-separated list of ACL include rules. Each rule uses semicolon-separated fields: resourceType;resourceName;operation;permissionType;principal. Use '*' as wildcard for any field. The resourceName and principal fields are regexes that must match the whole value. Trailing wildcard fields can be omitted. Examples: `TOPIC;orders.*`, `*;*;*;*;User:alice`, `TOPIC;*;READ;ALLOW`, `GROUP;consumer-.*;READ;ALLOW;User:bob`. Empty: no ACL is mirrored."},
		aclrule.Wildcard), func(m *Mirror) *aclrule.Rules { return &m.ACLInclude }, value.ACL()),
	mirrorKey(def(Key{Name: "mirror.topic.properties.exclude", Origin: OriginKIP,
		Doc: "A comma-separated list of topic config property names to exclude from synchronization. Properties in this list will not be replicated from the source cluster. The mirror.name property is always excluded regardless of this setting. Entries are regexes matched against the whole name (e.g. `.*throttled.*`). kmirror keeps each destination topic's max.message.bytes at least the source topic's effective limit (also where the source inherits it from its brokers' message.max.bytes); excluding max.message.bytes leaves the destination's limit to the operator, and a source batch above it fails its partition with both limits named."},
		DefaultTopicPropertiesExclude), func(m *Mirror) *RegexList { return &m.TopicPropertiesExclude }, regexListCodec()),
	mirrorKey(def(Key{Name: "mirror.destination.mismatch.action", Origin: OriginKmirror,
		Doc: "What a partition does when, before it continues (daemon start, start after a stop, resume, retry, failback), its destination log is found to differ from the source after the last checked point: a record of a foreign producer, an ABORT marker where the source committed (a stop with an open transaction, or a destination transaction timeout), anything beyond the source's end. `map`: the partition continues in `map` mode from the first differing offset and copies the source again from there, so that every committed source record is visible on the destination (docs/design/datapath.md, \"Proving the destination\"). `fail`: the partition goes FAILED with a reason naming the offsets; `kmirror mirrors start` retries it after the operator acted. Either way describe, the log and kmirror_destination_mismatches_total say what was found."},
		"map"), func(m *Mirror) *string { return &m.DestinationMismatchAction }, value.Enum([]string{"map", "fail"}, nil)),

	mirrorKey(Key{Name: "mirror.filter.plugins", Origin: OriginKmirror, Constraint: "names of filter plugins in plugins",
		Doc: "Filter plugins (names in `plugins`) that decide further which topics, groups and ACL bindings this mirror takes, in order, after mirror.topics.*, mirror.groups.* and mirror.acl.include: each sees only what the ones before it kept, and only the kinds it announces. A plugin that fails or is down makes that sync cycle change nothing for that kind (counted as a sync error); it never widens the mirror. Empty: the include/exclude keys decide alone."},
		func(m *Mirror) *[]string { return &m.FilterPlugins }, value.StringList("plugin name list", CheckPluginName)),

	// ---- State store --------------------------------------------------------
	stateKey(def(Key{Name: "type", Origin: OriginKmirror,
		Doc: "State store implementation. `file`: the built-in file store (one directory on local disk, state.dir), run as the built-in statestore plugin `file`. `plugin`: the statestore plugin named by state.plugin."},
		StateTypeFile), func(s *State) *string { return &s.Type }, value.Enum([]string{StateTypeFile, StateTypePlugin}, nil)),
	stateKey(Key{Name: "plugin", Origin: OriginKmirror, Constraint: "the name of a statestore plugin in plugins",
		Doc: "The statestore plugin (a name in `plugins`) that keeps the state, when state.type is plugin."},
		func(s *State) *string { return &s.Plugin }, value.String("plugin name", CheckPluginName)),
	stateKey(Key{Name: "dir", Origin: OriginKmirror,
		Doc: "Directory of the file state store (required when type is file). Created if missing; it must not be shared by two daemons."},
		func(s *State) *string { return &s.Dir }, value.String("path", nil)),

	// ---- Plugins ------------------------------------------------------------
	pluginKey(Key{Name: "kind", Origin: OriginKmirror, Required: true,
		Doc: "What the plugin supplies: `auth` (SASL credentials and OAUTHBEARER tokens), `statestore` (where partition state is kept) or `filter` (which topics, groups and ACLs a mirror takes)."},
		func(p *Plugin) *string { return &p.Kind }, value.Enum(pluginKinds(), nil)),
	pluginKey(Key{Name: "path", Origin: OriginKmirror, Constraint: "an executable file; set path or builtin",
		Doc: "The plugin's executable. A relative path is taken from plugin.dir. It must exist and match sha256 when the configuration is loaded, and again each time it is launched."},
		func(p *Plugin) *string { return &p.Path }, value.String("path", nil)),
	pluginKey(Key{Name: "builtin", Origin: OriginKmirror, Constraint: "[a-z0-9][a-z0-9_-]*; set path or builtin",
		Doc: "Name of a plugin shipped inside the kmirror binary (for example `static` for auth). It runs out of process like any other plugin, unless plugin.builtin.in.process is true. A built-in has no sha256: it is part of the binary."},
		func(p *Plugin) *string { return &p.Builtin }, value.String("name", checkBuiltinName)),
	pluginKey(Key{Name: "sha256", Origin: OriginKmirror, Constraint: "64 hex digits; required with path",
		Doc: "SHA-256 of the file at path, in hex (`sha256sum <file>`). A plugin whose file does not match is not started; the error names the file and both sums."},
		func(p *Plugin) *string { return &p.SHA256 }, value.String("hex", checkSHA256)),
	pluginKey(Key{Name: "config", Origin: OriginKmirror,
		Doc: "The plugin's own configuration, a map handed to it as is. The plugin declares which keys it accepts (its schema); the daemon checks the block against it when it starts the plugin, and an error names the key (`plugins.<name>.config.<key>`). Not overridable from the environment or --set, because only the plugin knows the types of its keys."},
		func(p *Plugin) *map[string]any { return &p.Config }, pluginConfigCodec()),
}

var storeTypeRejections = map[string]string{
	"JKS":    "kmirror reads PEM only; convert the store to PEM (keytool -importkeystore -srcstoretype JKS -deststoretype PKCS12, then openssl pkcs12 -nodes) and set the type to PEM",
	"PKCS12": "kmirror reads PEM only; convert it with `openssl pkcs12 -in store.p12 -nodes -out store.pem` and set the type to PEM",
}

// Unsupported lists keys of the KIP-1279 mirror tables (and Kafka's client
// configuration) that kmirror recognises but does not implement.
var Unsupported = []UnsupportedKey{
	{"mirror.topic.num.partitions", ScopeDaemon, "kmirror keeps mirror state in its state store (state.type), not in a __mirror_state topic; with the built-in kafka state store (a compacted topic) set it in that plugin's config block"},
	{"mirror.topic.replication.factor", ScopeDaemon, "kmirror keeps mirror state in its state store (state.type), not in a __mirror_state topic; with the built-in kafka state store (a compacted topic) set it in that plugin's config block"},
	{"mirror.state.topic.num.partitions", ScopeDaemon, "kmirror keeps mirror state in its state store (state.type), not in a __mirror_state topic"},
	{"mirror.state.topic.replication.factor", ScopeDaemon, "kmirror keeps mirror state in its state store (state.type), not in a __mirror_state topic"},
	{"sasl.client.callback.handler.class", ScopeCluster, "Java classes cannot be loaded; credentials come from the sasl.* keys or an auth plugin"},
	{"sasl.login.callback.handler.class", ScopeCluster, "Java classes cannot be loaded; credentials come from the sasl.* keys or an auth plugin"},
	{"sasl.login.class", ScopeCluster, "Java classes cannot be loaded; credentials come from the sasl.* keys or an auth plugin"},
	{"sasl.kerberos.ticket.renew.jitter", ScopeCluster, "kmirror logs in again from the keytab before its ticket expires; there is nothing to tune"},
	{"sasl.kerberos.ticket.renew.window.factor", ScopeCluster, "kmirror logs in again from the keytab before its ticket expires; there is nothing to tune"},
	{"sasl.kerberos.min.time.before.relogin", ScopeCluster, "kmirror logs in again from the keytab before its ticket expires; there is nothing to tune"},
	{"sasl.kerberos.kinit.cmd", ScopeCluster, "kmirror logs in with a keytab (sasl.kerberos.keytab) in process; it runs no kinit and reads no ticket cache"},
	{"sasl.login.refresh.window.factor", ScopeCluster, "the auth plugin refreshes OAUTHBEARER tokens before they expire; there is nothing to tune"},
	{"sasl.login.refresh.window.jitter", ScopeCluster, "the auth plugin refreshes OAUTHBEARER tokens before they expire; there is nothing to tune"},
	{"sasl.login.refresh.min.period.seconds", ScopeCluster, "the auth plugin refreshes OAUTHBEARER tokens before they expire; there is nothing to tune"},
	{"sasl.login.refresh.buffer.seconds", ScopeCluster, "the auth plugin refreshes OAUTHBEARER tokens before they expire; there is nothing to tune"},
	{"sasl.oauthbearer.scope.claim.name", ScopeCluster, "kmirror does not validate token claims; the broker does"},
	{"sasl.oauthbearer.sub.claim.name", ScopeCluster, "kmirror does not validate token claims; the broker does"},
	{"ssl.protocol", ScopeCluster, "use ssl.enabled.protocols to choose TLS versions"},
	{"ssl.provider", ScopeCluster, "Java security providers have no equivalent in Go's TLS stack"},
	{"ssl.cipher.suites", ScopeCluster, "Go's TLS stack chooses secure cipher suites itself (TLS 1.3 suites are not configurable)"},
	{"ssl.keymanager.algorithm", ScopeCluster, "Java security providers have no equivalent in Go's TLS stack"},
	{"ssl.trustmanager.algorithm", ScopeCluster, "Java security providers have no equivalent in Go's TLS stack"},
	{"ssl.secure.random.implementation", ScopeCluster, "Java security providers have no equivalent in Go's TLS stack"},
	{"ssl.engine.factory.class", ScopeCluster, "Java classes cannot be loaded"},
	{"ssl.keystore.password", ScopeCluster, "PEM keystores have no store password; convert the keystore to PEM (see docs/configuration.md)"},
	{"ssl.truststore.password", ScopeCluster, "PEM truststores have no password; convert the truststore to PEM (see docs/configuration.md)"},
}
