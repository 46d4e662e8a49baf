package config

import (
	"errors"
	"time"

	"github.com/kmirror/kmirror/core/aclrule"
	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/core/config/value"
	"github.com/kmirror/kmirror/sdk/filter/kiprules"
)

// Security protocols accepted by security.protocol.
const (
	ProtocolPlaintext     = security.ProtocolPlaintext
	ProtocolSSL           = security.ProtocolSSL
	ProtocolSASLPlaintext = security.ProtocolSASLPlaintext
	ProtocolSASLSSL       = security.ProtocolSASLSSL
)

// SASL mechanisms accepted by sasl.mechanism.
const (
	MechanismPlain       = security.MechanismPlain
	MechanismSCRAMSHA256 = security.MechanismSCRAMSHA256
	MechanismSCRAMSHA512 = security.MechanismSCRAMSHA512
	MechanismOAuthBearer = security.MechanismOAuthBearer
	MechanismGSSAPI      = security.MechanismGSSAPI
)

// Values of state.type: the built-in file store, or a statestore plugin
// named by state.plugin.
const (
	StateTypeFile   = "file"
	StateTypePlugin = "plugin"
)

// Config is a loaded, validated configuration. Durations come from the *.ms
// keys; every field's key, default and constraints are in the declaration
// table (docs/config.md, rendered by core/config/reference).
type Config struct {
	// KIP-1279 broker-level keys, applied daemon-wide.
	NumReplicaFetchers           int           // mirror.num.replica.fetchers
	MetadataRefreshInterval      time.Duration // mirror.metadata.refresh.interval.ms
	ReplicationThrottledRate     int64         // mirror.replication.throttled.rate, bytes/s; math.MaxInt64 = unlimited
	RequestTimeout               time.Duration // request.timeout.ms
	SocketConnectionSetupTimeout time.Duration // socket.connection.setup.timeout.ms
	ReconnectBackoff             time.Duration // reconnect.backoff.ms
	SendBufferBytes              int           // send.buffer.bytes; -1 = OS default
	ReceiveBufferBytes           int           // receive.buffer.bytes; -1 = OS default
	ReplicaFetchBackoff          time.Duration // replica.fetch.backoff.ms
	ReplicaFetchMaxBytes         int           // replica.fetch.max.bytes
	ReplicaFetchMinBytes         int           // replica.fetch.min.bytes
	ReplicaFetchResponseMaxBytes int           // replica.fetch.response.max.bytes
	ReplicaFetchWaitMax          time.Duration // replica.fetch.wait.max.ms
	ReplicaSocketReceiveBuffer   int           // replica.socket.receive.buffer.bytes; -1 = OS default
	ReplicaSocketTimeout         time.Duration // replica.socket.timeout.ms
	FailedRetryInitialBackoff    time.Duration // mirror.failed.retry.initial.backoff.ms
	FailedRetryMaxBackoff        time.Duration // mirror.failed.retry.max.backoff.ms
	FailedRetryMaxAttempts       int           // mirror.failed.retry.max.attempts; 0 = no automatic retries

	// kmirror's own daemon keys.
	OffsetAlignmentMaxRecords int64         // mirror.offset.alignment.max.records
	BufferMaxBytes            int64         // mirror.buffer.max.bytes
	TransactionTimeout        time.Duration // mirror.transaction.timeout.ms (0: the destination's maximum)
	TransactionWriterIdle     time.Duration // mirror.transaction.writer.idle.ms
	AppendsInFlight           int           // mirror.appends.in.flight.per.partition
	ProduceRequestsInFlight   int           // mirror.produce.requests.in.flight.per.broker
	LogLevel                  string        // log.level, lower case
	LogFormat                 string        // log.format
	HTTPAddress               string        // http.address; "" = no HTTP listener
	HTTPPprofEnable           bool          // http.pprof.enable: /debug/pprof/ on http.address
	MemorySoftLimit           int64         // memory.soft.limit.bytes: the Go runtime's soft memory limit (0: none)
	HTTPStatusEnable          bool          // http.status.enable: the status page, /v1/live and /v1/describe on http.address
	MetricsPartitionSeries    bool          // metrics.partition.series.enable: per-partition metric series
	ReadyzClusterUnreachable  time.Duration // http.readyz.cluster.unreachable.ms; 0 = off
	ReadyzFailedPartitionsMax int           // http.readyz.failed.partitions.max; -1 = off
	ShutdownTimeout           time.Duration // shutdown.timeout.ms
	PluginDir                 string        // plugin.dir; "" = <state.dir>/plugins (see PluginDirectory)
	PluginBuiltinInProcess    bool          // plugin.builtin.in.process

	// Admin API (see AdminTokenPath, AdminServerTLS).
	AdminAddress         string // admin.address; "" = no admin API
	AdminTokenFile       string // admin.token.file; "" = <state.dir>/admin.token unless mTLS alone is configured
	AdminTLSCertFile     string // admin.tls.cert.file
	AdminTLSKeyFile      string // admin.tls.key.file
	AdminTLSClientCAFile string // admin.tls.client.ca.file (mTLS)
	// AdminTLSClientSubjects is admin.tls.client.subjects: the client
	// certificate subjects allowed to call the admin API (empty: any
	// certificate the CA signed).
	AdminTLSClientSubjects RegexList

	Destination Cluster
	State       State
	Mirrors     []Mirror
	// Plugins are the plugins entries, sorted by name.
	Plugins []Plugin
}

// Mirror returns the mirror with this name.
func (c *Config) Mirror(name string) (*Mirror, bool) {
	for i := range c.Mirrors {
		if c.Mirrors[i].Name == name {
			return &c.Mirrors[i], true
		}
	}
	return nil, false
}

// Cluster holds the client keys of one cluster: the destination, or the
// source of a mirror. Its security keys (security.protocol, sasl.*, ssl.*)
// are a security.Keys: use its TLS and SASL rather than reading the fields
// directly, they resolve files, JAAS and inline PEM (core/kclient turns
// them into franz-go client options).
type Cluster struct {
	BootstrapServers []string // bootstrap.servers, host:port each
	ClientID         string   // client.id
	security.Keys
}

// Mirror is one named mirror: a source cluster and what to take from it.
type Mirror struct {
	Name   string  // name
	Source Cluster // the source cluster's client keys

	TopicsInclude          RegexList     // mirror.topics.include
	TopicsExclude          RegexList     // mirror.topics.exclude
	GroupsInclude          RegexList     // mirror.groups.include
	GroupsExclude          RegexList     // mirror.groups.exclude
	ACLInclude             aclrule.Rules // mirror.acl.include
	TopicPropertiesExclude RegexList     // mirror.topic.properties.exclude
	// DestinationMismatchAction is MismatchMap or MismatchFail
	// (mirror.destination.mismatch.action).
	DestinationMismatchAction string
	// FilterPlugins are filter plugins' names, applied in order after the
	// include/exclude keys (mirror.filter.plugins).
	FilterPlugins []string
}

// Values of mirror.destination.mismatch.action.
const (
	MismatchMap  = "map"
	MismatchFail = "fail"
)

// State selects and configures the state store.
type State struct {
	Type   string // state.type
	Dir    string // state.dir (file store; also the default home of plugin.dir and the admin token)
	Plugin string // state.plugin (type plugin)
}

// RegexList is a list of regular expressions, each matched against a whole
// value (KIP-1279 compiles such lists as ^(p1|p2|…)$): a kiprules.List,
// the one implementation of those rules that the regex filter plugin uses
// too. The zero value is an empty list, which matches nothing.
type RegexList struct {
	l kiprules.List
}

// CompileRegexList compiles patterns into a RegexList. It reports every
// invalid pattern, quoting it, with Go's error (and a hint for Java
// syntax RE2 lacks), as a *value.ListError. It has no limit on the
// number of patterns (a failback lists every failed-over topic); the
// configuration's list keys are capped where they are parsed
// (value.MaxListEntries).
func CompileRegexList(patterns []string) (RegexList, error) {
	l, err := kiprules.Compile(patterns)
	if err != nil {
		pes := kiprules.PatternErrors(err)
		if len(pes) == 0 {
			return RegexList{}, err
		}
		le := &value.ListError{}
		for _, pe := range pes {
			le.Entries = append(le.Entries, &value.EntryError{Index: pe.Index, Err: &regexError{pattern: pe.Pattern, err: pe.Err}})
		}
		return RegexList{}, le
	}
	return RegexList{l: l}, nil
}

type regexError struct {
	pattern string
	err     error
}

func (e *regexError) Error() string {
	if errors.Is(e.err, kiprules.ErrEmptyPattern) {
		return e.err.Error()
	}
	return "invalid regex " + value.Quote(e.pattern) + ": " + e.err.Error() + value.RE2Hint(e.pattern)
}
func (e *regexError) Unwrap() error { return e.err }

// Match reports whether some pattern matches all of s.
func (l RegexList) Match(s string) bool { return l.l.Match(s) }

// List returns the compiled list, for kiprules.Rules.
func (l RegexList) List() kiprules.List { return l.l }

// Patterns returns the patterns as written.
func (l RegexList) Patterns() []string { return l.l.Patterns() }

// Len returns the number of patterns.
func (l RegexList) Len() int { return l.l.Len() }

// String joins the patterns with commas.
func (l RegexList) String() string { return l.l.String() }

// MarshalText encodes the list as its comma-joined patterns.
func (l RegexList) MarshalText() ([]byte, error) { return []byte(l.String()), nil }
