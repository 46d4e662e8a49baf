// Package core is the root of kmirror's engine. It holds no code of its own; its
// subpackages own one concern each:
//
//   - config:    declaration, loading and validation of every configuration key
//   - aclrule:   the mirror.acl.include rule grammar and matcher
//   - batch:     zero-copy views over Kafka v2 record batches (re-stamp, CRC)
//   - backoff:   the one retry policy (doubling waits, cap, full jitter, deadline)
//   - partition: the per-partition state machine and its persistence
//   - topicsync: the topic sync of one mirror (create, expand, configs, deleted/recreated topics, read-only ACLs)
//   - daemon:    process life cycle (HTTP endpoints, reload, ordered shutdown)
//   - metrics:   the OpenTelemetry meter provider exported to Prometheus
//   - logging:   hclog construction from configuration
//   - version:   build information
//
// Layering (guarded by layering_test.go): core never imports plugins/ or cmd/;
// plugins import only sdk; sdk imports nothing of ours.
package core
