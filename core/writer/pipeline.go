package writer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/failpoint"
	"github.com/kmirror/kmirror/core/writer/internal/produce"
	"github.com/kmirror/kmirror/core/writer/internal/txn"
)

// confirmTTL is how recently a producer's last append on the partition must
// have been answered for the next ones to be pipelined. The broker refuses an
// append that overtakes another (OUT_OF_ORDER_SEQUENCE_NUMBER) only while it
// keeps the producer's state for the partition: a producer it does not know
// may start at any sequence. So the first append of a new producer, or of one
// idle for longer than this (state expiry is producer.id.expiration.ms, one
// day by default), goes alone.
const confirmTTL = time.Minute

// pending is an append of a partition's pipeline: sent, not yet answered.
type pending struct {
	i      int // index in AppendAll's batches
	op     *produce.Op
	s      *produce.Sink // the sink op was queued on
	b      batch.Batch
	src    int64 // source base offset, restored into b once answered
	expect int64
	tw     *txn.Writer // nil: the idempotent producer
	seq    int32       // base sequence stamped
	closed bool        // answered (or abandoned): no longer counted in flight
}

// answered takes pd out of the Writer's count of appends in flight.
func (p *Partition) answered(pd *pending) {
	if !pd.closed {
		pd.closed = true
		p.w.inflight.Add(-1)
	}
}

// AppendAll writes source batches bs in order, each at the destination
// offset it has on the source (preserve mode), as AppendAt would one by one,
// but with up to MaxInflightPerPartition appends of one producer in flight,
// and returns once all are answered: Send, then Flush. done, when not nil,
// is called for each batch once it is on the destination, in order, with
// its index in bs and where it landed.
//
// It returns how many of bs are on the destination (done was called for
// them). On error, bs[n] is the batch that failed and none after it was
// appended, unless the error is an offset mismatch: appends sent after
// bs[n] may then have landed too. A *DuplicateMarkerError with Shifted says
// that bs[n] and the len(Shifted)-1 batches after it landed after copies of
// a marker, where Shifted says. As after an AppendAt error, the caller
// must read the resume point again.
func (p *Partition) AppendAll(ctx context.Context, bs []batch.Batch, done func(i int, res Result)) (int, error) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	if err := p.checkOpen(); err != nil {
		return 0, err
	}
	if len(p.pipe) > 0 {
		return 0, p.errorf("AppendAll", ErrNotFlushed)
	}
	n := 0
	landed := func(pd *pending, res Result) {
		n = pd.i + 1
		if done != nil {
			done(pd.i, res)
		}
	}
	if err := p.sendAll(ctx, bs, landed); err != nil {
		return n, err
	}
	return n, p.drain(ctx, landed)
}

// Send writes source batches bs in order, each at the destination offset it
// has on the source (preserve mode), keeping up to MaxInflightPerPartition
// appends of one producer in flight: it returns once every batch of bs is
// sent, and the last ones may still be in flight. done is called, in order,
// for each batch that lands on the destination during the call — also
// batches of earlier Send calls. Flush waits for the rest; call it before
// any other operation on the partition (they refuse with ErrNotFlushed
// while appends are in flight) and before relying on the destination.
//
// Consecutive data batches of one producer (the idempotent producer, or the
// transactional writer of one source producer with its transaction open on
// the partition) are pipelined once the producer's previous append on the
// partition was answered: the destination's sequence check then refuses an
// append that would overtake one not yet written. Every other batch — a
// marker, the first batch of a transaction or of a new producer, a batch
// after an error — waits for the pipeline to empty and goes alone. Each
// answer is checked against the expected offset as AppendAt does.
//
// A retriable failure (a leader change, a lost connection) waits for the
// appends in flight, then sends the failed append and those after it again,
// one at a time with their sequences: the destination writes each once
// (a duplicate is answered with where the first copy landed).
//
// On error nothing is in flight any more: the batch that failed is the
// first one sent for which done was not called, and none sent after it was
// appended, unless the error is an offset mismatch (appends sent after it
// may then have landed too; a *DuplicateMarkerError with Shifted says that
// the first len(Shifted) of them landed after copies of a marker, where
// Shifted says, and the others did not). Every batch not reported by done has its
// source base offset back, unless ctx ended while it was in flight (see the
// package doc). As after an AppendAt error, the caller must read the resume
// point again.
func (p *Partition) Send(ctx context.Context, bs []batch.Batch, done func(b batch.Batch, res Result)) error {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	if err := p.checkOpen(); err != nil {
		return err
	}
	return p.sendAll(ctx, bs, byBatch(done))
}

// Flush waits for the appends Send left in flight, calling done for each as
// it lands, in order. Errors are as Send's.
func (p *Partition) Flush(ctx context.Context, done func(b batch.Batch, res Result)) error {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	return p.drain(ctx, byBatch(done))
}

// Inflight returns how many appends Send left in flight on the partition.
func (p *Partition) Inflight() int {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	return len(p.pipe)
}

func byBatch(done func(batch.Batch, Result)) landedFunc {
	return func(pd *pending, res Result) {
		if done != nil {
			done(pd.b, res)
		}
	}
}

// landedFunc is told of each append on the destination, in order.
type landedFunc func(pd *pending, res Result)

// sendAll is Send under the operation lock.
func (p *Partition) sendAll(ctx context.Context, bs []batch.Batch, landed landedFunc) error {
	p.maybeSweep()
	for i, b := range bs {
		if p.canPipeline(b) {
			if len(p.pipe) >= p.w.cfg.maxInflightPartition {
				if err := p.completeOldest(ctx, landed); err != nil {
					return err
				}
			}
			if p.canPipeline(b) { // the answer may have changed what the writer knows
				if err := p.send(i, b); err != nil {
					return errors.Join(err, p.drain(ctx, landed))
				}
				continue
			}
		}
		if err := p.drain(ctx, landed); err != nil {
			return err
		}
		res, err := p.appendOne(ctx, b, b.BaseOffset())
		if err != nil {
			return err
		}
		landed(&pending{i: i, b: b}, res)
	}
	return nil
}

// canPipeline says whether b can be sent behind the appends in flight.
func (p *Partition) canPipeline(b batch.Batch) bool {
	if p.w.cfg.maxInflightPartition < 2 || b.IsControl() || !b.Dense() || p.route.Leader < 0 || p.next < 0 || p.next != b.BaseOffset() {
		return false
	}
	var head *txn.Writer
	if len(p.pipe) > 0 {
		head = p.pipe[0].tw
	}
	if !b.IsTransactional() {
		st := p.idem
		return head == nil && (len(p.pipe) > 0 || (st.PID >= 0 && !st.Stale && time.Since(st.Confirmed) < confirmTTL))
	}
	tw := p.txns.Get(b.ProducerID())
	if tw == nil || !tw.Open || tw.Stale || tw.NeedInit {
		return false
	}
	if len(p.pipe) > 0 {
		return head == tw
	}
	return time.Since(tw.Confirmed) < confirmTTL
}

// send stamps b with its producer's next sequence and hands it to the
// leader's sink, behind the appends in flight.
func (p *Partition) send(i int, b batch.Batch) error {
	pd := &pending{i: i, b: b, src: b.BaseOffset(), expect: b.BaseOffset()}
	var (
		pid   int64
		epoch int16
		txnID string
	)
	if b.IsTransactional() {
		pd.tw = p.txns.Get(b.ProducerID())
		pid, epoch, pd.seq, txnID = pd.tw.Info.ProducerID, pd.tw.Info.Epoch, pd.tw.Seq, pd.tw.Info.TransactionalID
	} else {
		pid, epoch, pd.seq = p.idem.PID, p.idem.Epoch, p.idem.Seq
	}
	s, err := p.route.Sink()
	if err != nil {
		return p.errorf("produce", err)
	}
	b.SetBaseOffset(0)
	b.Restamp(pid, epoch, pd.seq)
	pd.op = p.route.Take()
	pd.op.Records, pd.op.TxnID, pd.s = b, txnID, s
	if err := s.Enqueue(pd.op); err != nil {
		b.SetBaseOffset(pd.src)
		p.route.Put(pd.op)
		return p.errorf("produce", err)
	}
	next := batch.IncrementSequence(pd.seq, b.LastOffsetDelta()+1)
	if pd.tw != nil {
		pd.tw.Seq = next
	} else {
		p.idem.Seq = next
	}
	p.next = pd.expect + int64(b.LastOffsetDelta()) + 1
	p.pipe = append(p.pipe, pd)
	p.w.inflight.Add(1)
	return nil
}

// drain completes every append in flight, in order.
func (p *Partition) drain(ctx context.Context, landed landedFunc) error {
	for len(p.pipe) > 0 {
		if err := p.completeOldest(ctx, landed); err != nil {
			return err
		}
	}
	return nil
}

// completeOldest waits for the answer to the oldest append in flight and
// handles it: a success is checked against the expected offset; a
// retriable failure sends that append and the ones after it again, one at a
// time; anything else fails the pipeline.
func (p *Partition) completeOldest(ctx context.Context, landed landedFunc) error {
	pd := p.pipe[0]
	select {
	case <-pd.op.Done:
		p.answered(pd)
	case <-ctx.Done():
		p.abandon()
		return p.errorf("produce", context.Cause(ctx))
	}
	retry, err := p.route.Answer(pd.op)
	if err == nil {
		p.popPipe()
		pd.b.SetBaseOffset(pd.src)
		p.route.Put(pd.op)
		res, err := p.landed(pd.tw, pd.seq, pd.b, pd.op, pd.expect)
		if err != nil {
			p.unconfirm(pd.tw)
			if derr := p.waitAll(ctx); derr != nil {
				return errors.Join(err, derr)
			}
			if dup := p.lateCopies(ctx, pd.expect, res); dup != nil {
				return p.shifted(pd.tw, dup)
			}
			p.restoreAll()
			p.next = -1
			return err
		}
		landed(pd, res)
		return nil
	}
	// The oldest append failed: the ones after it were sent behind it and
	// the destination refuses them (they would overtake it) or they failed
	// the same way. Wait for all of them before sending anything again.
	if derr := p.waitAll(ctx); derr != nil {
		p.unconfirm(pd.tw)
		return errors.Join(err, derr)
	}
	if !retry {
		p.unconfirm(pd.tw)
		p.staleProducer(pd.tw)
		p.next = -1
		p.restoreAll()
		return err
	}
	var okAfter bool
	for _, q := range p.pipe[1:] {
		if _, e := p.route.Answer(q.op); e == nil {
			okAfter = true
		}
	}
	if okAfter {
		// A later append landed while an earlier one did not: the
		// destination no longer guarantees their order. Read the
		// resume point again.
		p.unconfirm(pd.tw)
		p.staleProducer(pd.tw)
		p.next = -1
		p.restoreAll()
		return p.errorf(fmt.Sprintf("append batch at source offset %d", pd.src),
			fmt.Errorf("an append sent after it was written while it failed (%w): the destination must be read again", err))
	}
	// Send them again, one at a time, with the sequences they carry.
	p.log.Debug("resending pipelined appends", "count", len(p.pipe), "error", err)
	for len(p.pipe) > 0 {
		pd := p.popPipe()
		op, inFlight, err := p.route.Produce(ctx, pd.b, pd.op.TxnID)
		p.route.Put(pd.op)
		if !inFlight {
			pd.b.SetBaseOffset(pd.src)
		}
		if err != nil {
			p.unconfirm(pd.tw)
			p.staleProducer(pd.tw)
			p.next = -1
			p.restoreAll()
			return err
		}
		res, err := p.landed(pd.tw, pd.seq, pd.b, op, pd.expect)
		p.route.Put(op)
		if err != nil {
			p.unconfirm(pd.tw)
			if len(p.pipe) > 0 {
				// Not sent again, not appended: the sequences they
				// carry are spent.
				p.staleProducer(pd.tw)
			}
			p.restoreAll()
			if dup := p.lateCopies(ctx, pd.expect, res); dup != nil {
				return dup
			}
			p.next = -1
			return err
		}
		landed(pd, res)
	}
	return nil
}

// shifted finishes a pipeline whose oldest append (taken out of it, by
// producer tw) landed after copies of the last marker (dup): the appends
// behind it were sent behind it and land as many offsets later. Each that
// did is added to dup.Shifted, in order, up to the first that did not
// (failed, or landed elsewhere): that one and those after it are not
// reported, their producer's sequence is no longer known, and the
// destination's end offset is read again before the next append, so that
// anything else written there is an offset mismatch then.
func (p *Partition) shifted(tw *txn.Writer, dup *DuplicateMarkerError) error {
	shift := dup.Shifted[0].BaseOffset - dup.Expected
	complete := true
	for _, q := range p.pipe {
		q.b.SetBaseOffset(q.src)
		if _, err := p.route.Answer(q.op); err != nil {
			complete = false
			break
		}
		res, err := p.landed(q.tw, q.seq, q.b, q.op, q.expect+shift)
		if err != nil {
			complete = false
			break
		}
		dup.Shifted = append(dup.Shifted, res)
		dup.End = res.NextOffset
	}
	p.restoreAll()
	p.unconfirm(tw)
	p.next = dup.End
	if !complete {
		p.staleProducer(tw)
		p.next = -1
	}
	return dup
}

// waitAll waits for the answers of every append in flight (they stay in
// the pipeline).
func (p *Partition) waitAll(ctx context.Context) error {
	for _, q := range p.pipe {
		if q.closed {
			continue
		}
		select {
		case <-q.op.Done:
			p.answered(q)
		case <-ctx.Done():
			p.abandon()
			return p.errorf("produce", context.Cause(ctx))
		}
	}
	return nil
}

// popPipe takes the oldest append out of the pipeline. Its slot is cleared:
// a pending holds its batch, which holds the whole fetch response it came in
// alive, and the slots before the slice's start stay in its array until
// the array is replaced.
func (p *Partition) popPipe() *pending {
	pd := p.pipe[0]
	p.pipe[0] = nil
	p.pipe = p.pipe[1:]
	return pd
}

// restoreAll gives the batches of the finished pipeline back their source
// base offsets and empties it.
func (p *Partition) restoreAll() {
	for _, q := range p.pipe {
		q.b.SetBaseOffset(q.src)
		p.route.Put(q.op)
	}
	clear(p.pipe)
	p.pipe = p.pipe[:0]
}

// abandon gives up the pipeline (the caller's context ended): appends not
// sent yet are taken back; those in flight stay with the sink (their batches
// must not be reused, see the package doc) and their producers' sequences
// are unknown.
func (p *Partition) abandon() {
	for _, q := range p.pipe {
		p.answered(q)
		if q.s.Remove(q.op) {
			q.b.SetBaseOffset(q.src)
			p.route.Put(q.op)
		}
		p.staleProducer(q.tw)
		p.unconfirm(q.tw)
	}
	clear(p.pipe)
	p.pipe = p.pipe[:0]
	p.next = -1
}

// landed records that b, stamped with base sequence seq by tw (nil: the
// idempotent producer), was written as op says, and checks it landed at
// expect.
func (p *Partition) landed(tw *txn.Writer, seq int32, b batch.Batch, op *produce.Op, expect int64) (Result, error) {
	delta := b.LastOffsetDelta()
	now := time.Now()
	if tw != nil {
		failpoint.Reach("writer-txn-appended")
		tw.LastUsed, tw.Confirmed = now, now
		if tw.StartOffset < 0 {
			p.txns.Locked(func() { tw.StartOffset = op.BaseOffset })
		}
	} else {
		p.idem.Confirmed = now
	}
	res := Result{
		BaseOffset:    op.BaseOffset,
		NextOffset:    op.BaseOffset + int64(delta) + 1,
		LogAppendTime: op.LogAppendTime,
	}
	if len(p.pipe) == 0 {
		p.next = res.NextOffset
	}
	if op.BaseOffset != expect {
		p.next = res.NextOffset
		return res, p.mismatch(expect, op.BaseOffset, "batch appended at another offset")
	}
	return res, nil
}

// staleProducer marks the producer of a failed append: its sequence can no
// longer be trusted.
func (p *Partition) staleProducer(tw *txn.Writer) {
	if tw != nil {
		tw.Stale = true
	} else {
		p.idem.Stale = true
	}
}

// unconfirm makes the producer's next append go alone.
func (p *Partition) unconfirm(tw *txn.Writer) {
	if tw != nil {
		tw.Confirmed = time.Time{}
	} else {
		p.idem.Confirmed = time.Time{}
	}
}
