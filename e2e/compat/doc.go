// Package compat is kmirror's source compatibility matrix: end-to-end tests
// that mirror from a source cluster of each listed Apache Kafka version
// (2.8 in ZooKeeper mode, 3.x and 4.x in KRaft mode) to a destination of the
// harness's default version, with plain and transactional traffic and a
// classic consumer group, and compare both clusters record by record.
//
// KMIRROR_COMPAT_VERSIONS lists the source versions (comma-separated); the
// default is the whole matrix (DefaultVersions), which `make test` runs as
// part of ./e2e/... and `make compat` runs alone. See docs/compatibility.md.
package compat
