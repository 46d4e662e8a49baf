// Package core is the root of kmirror's engine. It holds no code of its own; its
// subpackages own one concern each:
//
//   - aclrule:          the mirror.acl.include rule grammar and matcher
//   - aclsync:          the ACL sync loop of one mirror (source ACLs in scope copied, stale ones deleted)
//   - admin:            the operator API (HTTP+JSON on admin.address) behind `kmirror mirrors` and `kmirror failover`, with its status and wire types
//   - admin/admintest:  test helpers for the admin API: a fake controller
//   - backoff:          the one retry policy (doubling waits, cap, full jitter, deadline)
//   - batch:            zero-copy views over Kafka v2 record batches (split, re-stamp, CRC, bounded decoding)
//   - config:           declaration, decoding and validation of every configuration key, and Load
//   - config/raw:       a configuration read into untyped sections: the YAML or TOML file, then KMIRROR_* variables and --set flags over it
//   - config/gen:       the command that writes docs/config.md and the sample from the declarations
//   - config/reference: the configuration reference rendered from the declarations, and the embedded sample
//   - config/security:  what the security keys name, resolved and checked: SASL credentials and JAAS, PEM trust and key material, the admin token
//   - config/value:     the values of configuration keys parsed, checked and rendered back (one codec per type); files read with limits
//   - control:          the operators' run-time rules of a mirror (pause, stop, start), last matching rule wins, and the actions that apply them
//   - daemon:           process life cycle (HTTP endpoints, reload, ordered shutdown)
//   - datapath:         one mirror's data path: its fetcher and writer shared by its runners, their metrics, the map-mode decoding bound
//   - failback:         a reverse mirror after a failover: its topics and configuration, and per partition whether it continues, keeps a side topic, or is recreated
//   - failover:         a mirror's failover: wait for catch-up, last group and ACL sync, stop the topics, where each stopped
//   - failpoint:        named crash points the end-to-end tests stop a process at
//   - fetcher:          the source side of the data path: raw record batches fetched per source broker
//   - fetcher/delivery: what the fetcher delivers to a partition's consumer (Fetched and its fatal errors), the Sink, and the Queue a runner reads from
//   - fetcher/internal/budget: the daemon-wide bound on bytes buffered between fetch and append, and the per-partition fetch size it implies
//   - fetcher/internal/session: the fetch sessions (one goroutine per source leader and fetcher id: long poll, release fetches, KIP-227) and the partitions' cursors they move
//   - fetcher/internal/wire: the fetcher's Kafka requests and responses without its state (version-capped Fetch, batches cut from a response, ListOffsets, Metadata, retriable errors, Kafka's fetcher id)
//   - groupsync:        the consumer-group and share-group offset sync loop of one mirror
//   - internal/coalesce: concurrent requests of one topic gathered into one call, never answered from an older one
//   - kafkalog:         a partition's log read raw: bounds, leader, batches in bounded memory, entries
//   - kclient:          a cluster's configuration turned into franz-go client options (TLS, SASL from an auth provider, sockets, dialer, per-role timeouts and retries), the built-in credential provider its sasl.* keys describe, and Health (a cluster's reachability from its client's hooks)
//   - kclient/kclienttest: a kclient.Credentials for tests: credentials straight from a cluster's sasl.* keys, no plugin host
//   - livestatus:       the status page (GET /, one self-contained HTML file) and its data: each mirror's recent throughput and lag, and the progress and estimate of the partitions catching up
//   - logging:          hclog construction from configuration, and WithFields (a child logger that holds only its fields)
//   - membership:       several daemons sharing work items through a Kafka group on the destination (protocol type kmirror): the member (join, sync, heartbeat, leave, cooperative handover) and the sticky assignor
//   - memlimit:         the Go runtime's soft memory limit of a kmirror process (memory.soft.limit.bytes) and the guard that raises it when live memory nears it
//   - metrics:          the OpenTelemetry meter provider exported to Prometheus, and the instruments of the engine, the data paths, the cluster clients (franz-go hooks) and the admin API
//   - mirror:           the mirroring engine: wiring, reload, topic claims, the operator API's entry points, status
//   - offsetmap:        the exact source→destination offset map of a partition in map mode
//   - partition:        the per-partition state machine and its persistence
//   - pluginhost:       the plugins configured under plugins: verified by SHA-256, launched over go-plugin gRPC, configured, supervised and restarted; a stable handle per kind
//   - runner:           one mirrored partition: prepare, prove the destination, forward, map mode, stop
//   - runner/destination: a runner's writer of its destination partition (transactional writers recorded, resumed, appends, abort)
//   - runner/filler:    the filler that aligns a new destination partition's log start with its source's (written, deletable, deleted)
//   - runner/mapstore:  a map-mode partition's offset map kept durable: its journal in the state store and the map group sync reads
//   - runner/prove:     whether a destination is its source's copy when a partition continues, and what a difference leads to
//   - runtimemirror:    the state store records of mirrors created at run time (failback mirrors, the admin API's create)
//   - statemigrate:     copies a stopped daemon's state into another state store and reads every key back (`kmirror state migrate`)
//   - scope:            a mirror's scope, its built-in include/exclude filter of topics, groups and ACLs, as an SDK filter
//   - supervisor:       one running mirror: its clients, data path, sync loops and one runner per partition
//   - syncloop:         the sync-loop template and the metadata-sync lease of a mirror
//   - throttle:         the daemon-wide replication throttle (mirror.replication.throttled.rate)
//   - topicsync:        the topic sync of one mirror (create, expand, configs, deleted/recreated topics, read-only ACLs)
//   - verify:           record-by-record comparison of a destination log with its source log
//   - version:          build information
//   - writer:           the destination side of the data path: ordered appends that keep offsets
//   - writer/internal/cluster: what a writer asks of the destination besides Produce (leaders, end offsets, producer states, coordinators), with its retries
//   - writer/internal/produce: the per-broker produce sinks that gather partitions' appends into requests, and a partition's route to its leader's sink
//   - writer/internal/txn: the destination transactional writers of a partition: created, recorded, opened and ended, resumed after a restart
//
// Layering (guarded by layering_test.go): sdk imports nothing of ours;
// plugins import only sdk; core never imports plugins or cmd, and cmd wires
// everything (cmd/kmirror's command packages under internal/ never import
// the engine: only its main package, run and demo, builds one). Inside core the data path's layers import one way: batch
// imports nothing of ours, fetcher's sub-packages import only batch,
// backoff and each other, and fetcher, writer and runner (with their
// sub-packages) never import mirror, admin or cmd. config/value, config/security and config/raw sit below config,
// which calls them while it loads, and never import it; kclient imports
// only config and what config imports. pluginhost reaches plugins through
// the sdk's protocols only: it never imports plugins, runner or mirror.
// membership imports only backoff (it knows work items as strings, not
// the engine).
package core
