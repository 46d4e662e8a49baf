package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/logging"
	"github.com/kmirror/kmirror/core/writer/internal/cluster"
	"github.com/kmirror/kmirror/core/writer/internal/produce"
	"github.com/kmirror/kmirror/core/writer/internal/txn"
)

// TxnWriterInfo identifies a destination transactional writer: the
// destination producer that replays the transactions of one source producer
// on one partition (source producer id, transactional id
// kmirror-<mirror>:<topic>:<partition>:<source producer id>, producer id and
// epoch). The runner persists it (OnTxnWriter) before the writer opens a
// transaction, and hands the recorded ones to Partition.Resume after a
// restart. Its fields are documented on txn.Info.
type TxnWriterInfo = txn.Info

// Result says where an appended batch landed.
type Result struct {
	// BaseOffset is the destination offset of the batch's first record, or
	// of the marker for a control batch.
	BaseOffset int64
	// NextOffset is the destination end offset after the batch: BaseOffset
	// plus the batch's offset count.
	NextOffset int64
	// Control is set for a transaction marker.
	Control bool
	// LogAppendTime is the broker's append time when the destination topic
	// uses message.timestamp.type=LogAppendTime (record timestamps were then
	// replaced), -1 otherwise.
	LogAppendTime int64
}

// OpenTransaction is a destination transaction the partition holds open:
// its writer, and the destination offset of its first batch on the
// partition (-1 while it holds no data).
type OpenTransaction = txn.OpenTransaction

// Partition writes one destination partition. Append, AppendAt, AbortAll
// and Resume run one at a time (a call waits for the one in progress);
// OpenTransactions, TxnWriters and EndOffset may be called at any time.
type Partition struct {
	w         *Writer
	dest      *cluster.Client // w.dest
	topic     string
	partition int32
	log       hclog.Logger

	// txns are the partition's transactional writers.
	txns *txn.Set

	opMu sync.Mutex // one operation at a time; guards the fields below
	// route is the way to the partition's leader: its sink, the
	// partition's produce ops, the answers' handling.
	route *produce.Route
	// next is the destination end offset as this writer knows it, -1 when
	// it must be read (first use, after a failure or a marker).
	next      int64
	idem      *cluster.Idempotent
	pipe      []*pending // appends in flight, oldest first (AppendAll)
	lastSweep time.Time
	// last is the last transaction marker this writer wrote on the
	// partition (producer id -1: none). The destination may write a copy
	// of it after the marker's append returned; such a copy moves the next
	// append, which lateCopies tells from foreign data.
	last writtenMarker

	mu     sync.Mutex // guards closed
	closed bool
}

func newPartition(w *Writer, topic string, partition int32, hook func(context.Context, TxnWriterInfo) error, idem *cluster.Idempotent) *Partition {
	log := logging.WithFields(w.log, "topic", topic, "partition", partition)
	where := cluster.Where{Mirror: w.cfg.mirror, Topic: topic, Partition: partition}
	return &Partition{
		w:         w,
		dest:      w.dest,
		topic:     topic,
		partition: partition,
		log:       log,
		route:     produce.NewRoute(w.sinks, w.dest, where, log),
		next:      -1,
		last:      writtenMarker{pid: -1},
		idem:      idem,
		lastSweep: time.Now(),
		txns: txn.NewSet(txn.Config{
			Dest: w.dest, Mirror: w.cfg.mirror, Topic: topic, Partition: partition, OnTxnWriter: hook, Log: log,
		}),
	}
}

// TransactionalID returns the destination transactional id of the writer
// replaying source producer sourceProducerID on this partition:
// kmirror-<mirror>:<topic>:<partition>:<source producer id> (see
// TxnWriterInfo.TransactionalID).
func (p *Partition) TransactionalID(sourceProducerID int64) string {
	return p.txns.ID(sourceProducerID)
}

// TransactionalID returns the destination transactional id of mirror's
// writer replaying source producer sourceProducerID on topic/partition:
// kmirror-<mirror>:<topic>:<partition>:<source producer id>. Neither a
// mirror name nor a topic name can hold ':', so the id names one (mirror,
// topic, partition, producer) and no other.
func TransactionalID(mirror, topic string, partition int32, sourceProducerID int64) string {
	return txn.ID(mirror, topic, partition, sourceProducerID)
}

// OnRetry sets fn to be told of each retriable error an append of the
// partition meets before it is sent again (a leader change, a broker gone,
// KAFKA_STORAGE_ERROR from a full disk), and of nil once an append that was
// retried ends (it landed, gave up or was cancelled): what the partition is
// waiting for, while it waits. Set it
// before the partition's first use; fn runs on the appending goroutine and
// must not block. Default none.
func (p *Partition) OnRetry(fn func(err error)) { p.route.OnRetry = fn }

// Close releases the partition in its Writer. Open destination transactions
// stay open (AbortAll first to end them); a later Partition for the same
// destination partition must Resume them.
func (p *Partition) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.w.release(p)
}

func (p *Partition) checkOpen() error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return p.errorf("use", ErrClosed)
	}
	return nil
}

// errorf wraps err with the mirror, the destination partition and what
// failed.
func (p *Partition) errorf(what string, err error) error {
	return cluster.Where{Mirror: p.w.cfg.mirror, Topic: p.topic, Partition: p.partition}.Errorf(what, err)
}

func (p *Partition) mismatch(expected, got int64, what string) error {
	return &OffsetMismatchError{Mirror: p.w.cfg.mirror, Topic: p.topic, Partition: p.partition, Expected: expected, Got: got, What: what}
}

// Append writes source batch b at the destination offset it has on the
// source (preserve mode): AppendAt(ctx, b, b.BaseOffset()).
func (p *Partition) Append(ctx context.Context, b batch.Batch) (Result, error) {
	return p.AppendAt(ctx, b, b.BaseOffset())
}

// AppendAt writes source batch b so that it lands at destination offset
// expect (map mode passes the mapped offset) and returns where it landed.
// It blocks until the batch is on the destination (acks=all) or, for a
// control batch, until the marker is visible at the end of the destination
// partition. It re-stamps b in place (see the package doc).
//
// A batch or marker that landed elsewhere, or would have (nothing is
// written then), is an *OffsetMismatchError; but a batch that landed after
// copies of the last marker the writer wrote on the partition, and nothing
// else, is a *DuplicateMarkerError whose Shifted says where it is (it is on
// the destination, once), as is a marker the destination wrote more than
// once. Retriable Kafka errors are
// retried for up to RetryTimeout; other errors name the mirror, the
// destination partition and the Kafka error (errors.Is works on kerr
// errors). After an error, the caller must read the resume point again
// (EndOffset) before appending more.
func (p *Partition) AppendAt(ctx context.Context, b batch.Batch, expect int64) (Result, error) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	if err := p.checkOpen(); err != nil {
		return Result{}, err
	}
	if len(p.pipe) > 0 {
		return Result{}, p.errorf("AppendAt", ErrNotFlushed)
	}
	p.maybeSweep()
	return p.appendOne(ctx, b, expect)
}

// appendOne is AppendAt under the operation lock, with nothing in flight.
func (p *Partition) appendOne(ctx context.Context, b batch.Batch, expect int64) (Result, error) {
	var (
		res Result
		err error
	)
	if b.IsControl() {
		res, err = p.appendMarker(ctx, b, expect)
	} else {
		res, err = p.appendData(ctx, b, expect)
	}
	if err != nil && !errors.Is(err, ErrOffsetMismatch) {
		// A failed request may still have taken effect (a marker written
		// after an EndTxn whose answer was lost): read the end offset
		// again before the next write.
		p.next = -1
	}
	return res, err
}

func (p *Partition) appendData(ctx context.Context, b batch.Batch, expect int64) (Result, error) {
	if !b.Dense() {
		return Result{}, p.errorf(fmt.Sprintf("append batch at source offset %d", b.BaseOffset()),
			fmt.Errorf("%w: %d records over %d offsets", ErrNotDense, b.RecordCount(), int64(b.LastOffsetDelta())+1))
	}
	if err := p.checkNext(ctx, expect); err != nil {
		return Result{}, err
	}
	var (
		tw    *txn.Writer
		pid   int64
		epoch int16
		seq   int32
	)
	if b.IsTransactional() {
		var err error
		if tw, err = p.txns.WriterFor(ctx, b.ProducerID()); err != nil {
			return Result{}, err
		}
		if !tw.Open {
			if err := p.txns.AddPartition(ctx, tw); err != nil {
				return Result{}, err
			}
		}
		pid, epoch, seq = tw.Info.ProducerID, tw.Info.Epoch, tw.Seq
	} else {
		if err := p.readyIdempotent(ctx); err != nil {
			return Result{}, err
		}
		pid, epoch, seq = p.idem.PID, p.idem.Epoch, p.idem.Seq
	}

	srcOffset := b.BaseOffset()
	// Producers send 0 and the broker assigns the offset; Kafka refuses a
	// client batch whose base offset is not 0 (INVALID_RECORD).
	b.SetBaseOffset(0)
	b.Restamp(pid, epoch, seq)
	txnID := ""
	if tw != nil {
		txnID = tw.Info.TransactionalID
	}
	op, inFlight, err := p.route.Produce(ctx, b, txnID)
	if !inFlight {
		b.SetBaseOffset(srcOffset)
	}
	if err != nil {
		// The batch may or may not be on the destination: its sequence
		// cannot be reused blindly.
		p.staleProducer(tw)
		p.unconfirm(tw)
		p.next = -1
		return Result{}, err
	}
	next := batch.IncrementSequence(seq, b.LastOffsetDelta()+1)
	if tw != nil {
		tw.Seq = next
	} else {
		p.idem.Seq = next
	}
	res, err := p.landed(tw, seq, b, op, expect)
	p.route.Put(op)
	if err != nil {
		p.unconfirm(tw)
		if dup := p.lateCopies(ctx, expect, res); dup != nil {
			return res, dup
		}
	}
	return res, err
}

func (p *Partition) appendMarker(ctx context.Context, b batch.Batch, expect int64) (Result, error) {
	what := fmt.Sprintf("replay marker at source offset %d", b.BaseOffset())
	ct, err := batch.ControlRecord(b)
	if err != nil {
		return Result{}, p.errorf(what, err)
	}
	if ct != batch.ControlCommit && ct != batch.ControlAbort {
		return Result{}, p.errorf(what, fmt.Errorf("%w: type %d", ErrUnsupportedControl, ct))
	}
	if err := p.checkNext(ctx, expect); err != nil {
		return Result{}, err
	}
	tw, err := p.txns.WriterFor(ctx, b.ProducerID())
	if err != nil {
		return Result{}, err
	}
	if !tw.Open {
		// A marker whose data lies before the mirrored range (or an
		// empty source transaction): a marker-only transaction.
		if err := p.txns.AddPartition(ctx, tw); err != nil {
			return Result{}, err
		}
	}
	if err := p.txns.EndTxn(ctx, tw, ct == batch.ControlCommit); err != nil {
		return Result{}, err
	}
	p.next = -1
	if err := p.waitMarker(ctx, tw, ct, expect); err != nil {
		var dup *DuplicateMarkerError
		if errors.As(err, &dup) {
			at := expect
			if len(dup.Shifted) > 0 {
				at = dup.Shifted[0].BaseOffset
			}
			p.last = writtenMarker{offset: at, pid: tw.Info.ProducerID, ct: ct}
		}
		return Result{}, err
	}
	p.next = expect + 1
	p.last = writtenMarker{offset: expect, pid: tw.Info.ProducerID, ct: ct}
	return Result{BaseOffset: expect, NextOffset: expect + 1, Control: true, LogAppendTime: -1}, nil
}

// checkNext verifies, before writing, that the destination's end offset is
// where the next batch is expected.
func (p *Partition) checkNext(ctx context.Context, expect int64) error {
	if p.next < 0 {
		end, err := p.endOffset(ctx)
		if err != nil {
			return err
		}
		p.next = end
	}
	if p.next != expect {
		return p.mismatch(expect, p.next, "destination end offset is not the expected offset (nothing written)")
	}
	return nil
}

// waitMarker waits until the destination's end offset is marker+1: the
// marker of type ct written after EndTxn returned.
func (p *Partition) waitMarker(ctx context.Context, tw *txn.Writer, ct batch.ControlType, marker int64) error {
	r := p.dest.NewRetrier()
	for {
		end, err := p.listEnd(ctx)
		if err == nil {
			switch {
			case end == marker+1:
				return nil
			case end > marker+1:
				if p.dest.DuplicateMarkers(ctx, p.topic, p.partition, tw.Info.ProducerID, marker, end) {
					p.next = end
					return &DuplicateMarkerError{Mirror: p.w.cfg.mirror, Topic: p.topic, Partition: p.partition, Marker: marker, End: end}
				}
				if dup := p.markerAfterLateCopies(ctx, tw, ct, marker, end); dup != nil {
					p.next = end
					return dup
				}
				return p.mismatch(marker, end-1, "destination end offset passed the marker (last offset shown as got)")
			}
			err = fmt.Errorf("marker expected at offset %d not visible yet, destination end offset %d", marker, end)
		} else if !cluster.IsRetriable(err) {
			return p.errorf("wait for the marker", err)
		}
		if err := r.Backoff(ctx, err); err != nil {
			return p.errorf("wait for the marker", err)
		}
	}
}

// writtenMarker is a transaction marker the writer wrote: its destination offset,
// the destination producer id and its type.
type writtenMarker struct {
	offset int64
	pid    int64
	ct     batch.ControlType
}

// lateCopies checks a batch expected at destination offset expect that
// landed later, at res: when only copies of the last marker the writer
// wrote lie between (the destination's transaction coordinator wrote it
// again after the marker's append returned), it returns the
// *DuplicateMarkerError that says so and where the batch is. Anything else
// there is foreign data (nil: the offset mismatch stands).
func (p *Partition) lateCopies(ctx context.Context, expect int64, res Result) *DuplicateMarkerError {
	m := p.last
	if m.pid < 0 || expect <= m.offset || res.BaseOffset <= expect {
		return nil
	}
	if !p.dest.MarkerCopies(ctx, p.topic, p.partition, m.pid, m.ct, expect, res.BaseOffset) {
		return nil
	}
	p.log.Warn("the destination wrote a transaction marker again after it was replayed; the batches after it land later",
		"marker_offset", m.offset, "expected_offset", expect, "landed_offset", res.BaseOffset)
	return &DuplicateMarkerError{Mirror: p.w.cfg.mirror, Topic: p.topic, Partition: p.partition,
		Marker: m.offset, End: res.NextOffset, Expected: expect, Shifted: []Result{res}}
}

// markerAfterLateCopies checks a marker of tw of type ct expected at
// destination offset expect when the destination ends at end, past
// expect+1: when the offsets from expect on hold copies of the last marker
// the writer wrote (written again after its append returned), then the
// marker (and maybe copies of it), and nothing else, it returns the
// *DuplicateMarkerError that says where the marker landed; nil otherwise.
func (p *Partition) markerAfterLateCopies(ctx context.Context, tw *txn.Writer, ct batch.ControlType, expect, end int64) *DuplicateMarkerError {
	m := p.last
	if m.pid < 0 || expect <= m.offset {
		return nil
	}
	ms, ok := p.dest.Markers(ctx, p.topic, p.partition, expect, end)
	if !ok {
		return nil
	}
	i := 0
	for i < len(ms) && ms[i].ProducerID == m.pid && ms[i].Type == m.ct {
		i++
	}
	if i == 0 || !cluster.Copies(ms[i:], tw.Info.ProducerID, ct) {
		return nil
	}
	at := ms[i].Offset
	p.log.Warn("the destination wrote a transaction marker again after it was replayed; the next marker lands later",
		"marker_offset", m.offset, "expected_offset", expect, "landed_offset", at)
	return &DuplicateMarkerError{Mirror: p.w.cfg.mirror, Topic: p.topic, Partition: p.partition, Marker: m.offset, End: end, Expected: expect,
		Shifted: []Result{{BaseOffset: at, NextOffset: at + 1, Control: true, LogAppendTime: -1}}}
}

// EndOffset returns the destination partition's end offset (high
// watermark, read_uncommitted): the resume point in preserve mode.
func (p *Partition) EndOffset(ctx context.Context) (int64, error) {
	return p.endOffset(ctx)
}

func (p *Partition) endOffset(ctx context.Context) (int64, error) {
	end, err := p.dest.EndOffset(ctx, p.topic, p.partition)
	if err != nil {
		return -1, p.errorf("read the end offset", err)
	}
	return end, nil
}

// listEnd asks the partition leader for the end offset once (with the
// partitions of the topic asking at the same time: cluster.Client.ListEnd).
func (p *Partition) listEnd(ctx context.Context) (int64, error) {
	return p.dest.ListEnd(ctx, p.topic, p.partition)
}

// readyIdempotent makes the partition's idempotent producer usable
// (cluster.Client.ReadyIdempotent).
func (p *Partition) readyIdempotent(ctx context.Context) error {
	if st := p.idem; st.PID >= 0 && !st.Stale {
		return nil
	}
	if err := p.dest.ReadyIdempotent(ctx, p.idem, p.log); err != nil {
		return p.errorf("initialise the idempotent producer", err)
	}
	return nil
}

// maybeSweep forgets transactional writers that have had no open
// transaction for IdleWriterTimeout.
func (p *Partition) maybeSweep() {
	idle := p.w.cfg.idleWriter
	now := time.Now()
	if now.Sub(p.lastSweep) < min(idle, time.Minute) {
		return
	}
	p.lastSweep = now
	p.txns.Sweep(idle, now)
}

// OpenTransactions lists the destination transactions this partition holds
// open, by start offset.
func (p *Partition) OpenTransactions() []OpenTransaction { return p.txns.OpenTransactions() }

// TxnWriters lists the transactional writers the partition keeps in memory
// (open or idle), by source producer id. A recorded writer missing from it
// was forgotten after IdleWriterTimeout and can be dropped from the state
// record.
func (p *Partition) TxnWriters() []TxnWriterInfo { return p.txns.Infos() }

// ResumeReport says what Partition.Resume found on the destination for each
// recorded transactional writer: Resumed (an open transaction continued),
// Idle (kept for reuse), Expired (transactional id unknown to the
// destination), Lost (fenced, or its transaction aborted by the
// destination: the caller compares the partition with the source), and
// Foreign producers with an open transaction no recorded writer owns. Its
// fields are documented on txn.ResumeReport.
type ResumeReport = txn.ResumeReport

// ResumedWriter is a writer whose open transaction Resume continued, with
// its next sequence and the destination offset of its transaction's first
// batch (-1 when it holds none yet).
type ResumedWriter = txn.ResumedWriter

// LostWriter is a recorded writer the destination no longer holds as it
// was recorded, with the producer id, epoch and state the destination's
// coordinator holds for its transactional id now.
type LostWriter = txn.LostWriter

// ForeignProducer is a producer with an open transaction on the
// destination partition that is not one of the recorded writers.
type ForeignProducer = txn.ForeignProducer

// Resume takes over the recorded transactional writers of the partition
// after a restart (or a new Partition for a partition written before). Call
// it before the partition's first Append, with every writer recorded
// through OnTxnWriter that was not dropped since; then read the resume point
// with EndOffset.
//
// For each writer, DescribeTransactions (on its coordinator) says whether
// the destination still knows its producer id and epoch and has a
// transaction open with the partition, and DescribeProducers (on the
// partition's leader) gives its last sequence. Transactions still
// completing (PREPARE_COMMIT/PREPARE_ABORT) are waited for, so their markers
// are in the end offset read afterwards.
func (p *Partition) Resume(ctx context.Context, recorded []TxnWriterInfo) (ResumeReport, error) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	if err := p.checkOpen(); err != nil {
		return ResumeReport{}, err
	}
	if len(p.pipe) > 0 {
		return ResumeReport{}, p.errorf("Resume", ErrNotFlushed)
	}
	report, err := p.txns.Resume(ctx, recorded)
	if err != nil {
		return ResumeReport{}, err
	}
	p.next = -1
	return report, nil
}

// AbortAll aborts every destination transaction the partition holds open
// and waits until each ABORT marker is visible, so read_committed consumers
// of the destination are not blocked (the stop procedure). It tries every
// transaction and returns the errors of those it could not abort.
func (p *Partition) AbortAll(ctx context.Context) error {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	if err := p.checkOpen(); err != nil {
		return err
	}
	if len(p.pipe) > 0 {
		return p.errorf("AbortAll", ErrNotFlushed)
	}
	tws := p.txns.All()

	var errs []error
	for _, tw := range tws {
		if tw.Stale {
			if err := p.txns.Resync(ctx, tw); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if !tw.Open {
			continue
		}
		if p.next < 0 {
			end, err := p.endOffset(ctx)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			p.next = end
		}
		marker := p.next
		if err := p.txns.EndTxn(ctx, tw, false); err != nil {
			errs = append(errs, err)
			continue
		}
		p.next = -1
		if err := p.waitMarker(ctx, tw, batch.ControlAbort, marker); err != nil {
			errs = append(errs, err)
			continue
		}
		p.next = marker + 1
		p.last = writtenMarker{offset: marker, pid: tw.Info.ProducerID, ct: batch.ControlAbort}
		p.log.Info("destination transaction aborted", "transactional_id", tw.Info.TransactionalID, "marker_offset", marker)
	}
	return errors.Join(errs...)
}
