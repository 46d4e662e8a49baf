// Package writer owns the destination side of kmirror's offset-preserving
// data path: the connection-level batching of appends to destination brokers
// and the per-partition writers that reproduce a source partition's batches,
// transactions and markers at the same offsets (docs/design/datapath.md).
//
// One [Writer] serves one mirror on one destination cluster. It owns a sink
// per destination broker: the sink gathers the appends of many partitions
// into one ProduceRequest (one batch per partition per request, acks=-1) and
// keeps several requests in flight per broker. A [Partition] writes one
// destination partition; its Append blocks until the batch is on the
// destination. [Partition.AppendAll] writes consecutive batches with up to
// MaxInflightPerPartition appends of one producer in flight, kept in order
// by the sink's ticketed sends and the destination's sequence check
// (docs/design/datapath.md, "Pipelined appends").
//
// # What Append does with a source batch
//
//   - A data batch outside a transaction is re-stamped with the mirror's
//     idempotent producer (one InitProducerId without transactional id per
//     Writer, a sequence per partition) and sent.
//   - A data batch of a source transaction of producer X goes through the
//     destination transactional writer for (partition, X), transactional id
//     kmirror-<mirror>:<topic>:<partition>:<X> (unambiguous: neither a mirror
//     nor a topic name holds ':'; see [TxnWriterInfo]). The first use initialises
//     it (InitProducerId), hands its producer id and epoch to the
//     partition's OnTxnWriter hook, which persists them, and only then
//     opens a transaction (AddPartitionsToTxn) and appends.
//   - A control batch (COMMIT/ABORT) of X becomes EndTxn on X's writer,
//     opening a marker-only transaction first when none is open. Append
//     returns once the destination's end offset is the marker's offset+1:
//     real brokers write markers after EndTxn returns.
//
// After each append the destination offset is checked against the expected
// one (the source offset in preserve mode); a difference is an
// [*OffsetMismatchError] (errors.Is [ErrOffsetMismatch]). When the writer
// already knows the destination's end offset differs from the expected
// offset, it reports the mismatch without writing. Copies of a marker the
// destination wrote again (its transaction coordinator failed over) are
// not foreign data: when only copies of the marker the writer replayed —
// or, found later in the way of the next append, of the last marker it
// wrote on the partition — lie where a batch was expected, the append
// reports a [*DuplicateMarkerError], which says where the batch (and the
// appends pipelined behind it) landed.
//
// # Invariants
//
//   - A transactional id is recorded (OnTxnWriter) before any transaction
//     is opened with it, so every open destination transaction can be found
//     after a crash.
//   - InitProducerId is never sent for a transactional id whose transaction
//     may be open: it would abort it and put an ABORT marker where the source
//     will have something else. Writers of a partition written before are
//     resumed with [Partition.Resume], which learns their state from
//     DescribeTransactions and DescribeProducers; a writer created without
//     Resume first checks the coordinator and refuses to take over an open
//     transaction ([ErrUnresumedTransaction]).
//   - Request versions are pinned to transaction protocol v1 (Produce v11,
//     InitProducerId v4, AddPartitionsToTxn v3, EndTxn v4): a destination
//     producer keeps its epoch across transactions, and markers go only to
//     partitions added with AddPartitionsToTxn, which is what lets a
//     marker-only transaction place a marker at a chosen offset.
//   - A sequence number whose fate is unknown (a request sent but not
//     answered before the caller gave up) is never reused blindly: the
//     partition's idempotent producer gets a fresh producer id, and a
//     transactional writer re-reads its state from the destination before
//     its next append.
//
// # Where the code is
//
// This package holds the public API and a partition's appends (producer
// and sequence, the pipeline, offset checks, markers). The Partition uses
// three internal packages through concrete types: internal/produce (the
// sink per broker, and a partition's Route to its leader's sink),
// internal/txn (a partition's transactional writers: created, recorded,
// resumed) and internal/cluster (what is asked of the destination besides
// Produce, gathered per topic, with the retry policy).
//
// Append modifies the batch it is given: the producer id, epoch, base
// sequence and CRC are re-stamped in place (records stay byte-identical);
// the base offset is sent as 0 and restored before Append returns, unless
// Append gave up (its context ended) while a request carrying the batch was
// still in flight: then the batch is still being read and must not be
// reused until the Writer is closed or the bytes are dropped.
package writer
