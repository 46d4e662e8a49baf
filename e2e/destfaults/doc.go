// Package destfaults holds kmirror's end-to-end tests of destination faults
// that need a cluster of their own (issue #17, item 2): a three-broker
// destination (replication factor 3 for mirrored and internal topics) whose
// partition leadership moves while kmirror replays a transaction, and a
// destination broker whose log directory is a small tmpfs volume that fills
// up. Each scenario ends with the record-by-record check: offsets, records,
// transaction markers and transactional visibility identical on both
// clusters.
//
// TestMain starts a one-broker source and the three-broker destination;
// broker 2 of the destination keeps its partitions on a tmpfs mounted by
// TestMain (root only: without root the disk-full test is skipped). `make
// test` runs the package with the rest of ./e2e/... (docs/testing.md).
package destfaults
