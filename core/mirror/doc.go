// Package mirror owns the mirroring engine: it runs every configured mirror
// (and those created at run time, core/runtimemirror), each as a
// core/supervisor.Mirror, which connects to the source cluster, has its
// topic syncer (core/topicsync) select the topics in scope and make sure
// the destination topics exist, and runs one runner per partition that
// drives the partition's state machine (core/partition) through PREPARING,
// MIRRORING and STOPPING, moving record batches from the fetcher
// (core/fetcher) to the writer (core/writer) with offsets preserved.
//
// The engine itself holds the wiring of the mirrors' shared parts (the
// destination client, the partition state machine, the throttle, the fetch
// budget, the metrics), reload, the topic claims between mirrors, the
// operator API's entry points (core/admin.Controller; their jobs are
// core/control, core/failover and core/failback) and the status.
//
// Ownership: Engine owns the mirrors; a mirror owns its source client, its
// fetcher manager, its writer and its runners; each runner owns one partition.
// Every goroutine is started through an owner's errgroup-like WaitGroup and
// stops when that owner's context is cancelled. Stop order: runners first (they
// finish their current append), then the fetcher, then the writer, then the
// clients.
//
// See docs/design/datapath.md for the data path and its invariants.
package mirror
