package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Extension names under which the runner keeps its own facts in the
// partition record (partition.Data.Extensions).
const (
	extAlignment  = "alignment"       // alignmentState while filler is being written
	extTxnWriters = "txn_writers"     // []txnWriterRecord: destination transactional writers
	extEpoch      = "source_epoch"    // sourceEpoch: leader epoch of the last batch forwarded
	extTopicID    = "source_topic_id" // string: the source topic id the partition mirrors
)

// sourceEpoch is the source partition leader epoch of the batches being
// forwarded. It is recorded before the first batch of a new epoch is
// appended, so that after a restart the fetcher can send it as
// LastFetchedEpoch and the source reports a divergence (an unclean leader
// election that replaced records the mirror already copied).
type sourceEpoch struct {
	Epoch int32 `json:"epoch"`
}

// alignmentState records a filler alignment in progress, so that a crash in
// the middle resumes it rather than mistaking the filler for foreign data.
type alignmentState struct {
	// FillTo is the destination offset the filler reaches (the base offset of
	// the first source batch to mirror).
	FillTo int64 `json:"fill_to"`
	// DeleteTo is the source log start offset, which the destination's log
	// start is moved to once the mirror has passed it.
	DeleteTo int64 `json:"delete_to"`
}

// runner drives one partition: it owns the partition's state machine record
// and moves its batches from the fetcher to the writer.
type runner struct {
	m         *mirrorRun
	topic     string
	topicID   [16]byte
	partition int32
	log       hclog.Logger
	p         *partition.Partition

	// Only the runner goroutine touches these.
	mode     partition.Mode
	omap     *offsetmap.Map
	deleteTo int64 // pending DeleteRecords target after alignment; 0: none
	prepared bool  // prepare just set the resume point: mirror need not resume
	epoch    int32 // source leader epoch of the last batch forwarded; -1 unknown

	// ctl is poked (buffered, never blocks) when an operator action may
	// concern the partition: it re-reads the mirror's control record.
	ctl     chan struct{}
	dstNext int64 // next destination offset (== next in preserve mode)

	// recreateReq is closed when the source topic was found recreated (same
	// name, new topic id); recreateErr is the non-retryable failure to
	// record. recreateDone (runner goroutine only) is set once it is.
	recreateReq  chan struct{}
	recreateOnce sync.Once
	recreateErr  error
	recreateDone bool

	mu sync.Mutex // guards the stop request and the status fields below
	// stopReq is closed when the partition must stop (its topic left the
	// mirror's scope, or an operator stopped it); stopReason says why. A
	// start by an operator replaces it with an open channel.
	stopReq     chan struct{}
	stopClosed  bool
	stopReason  string
	startWanted bool // an operator asked a STOPPED partition to start again

	next   int64 // next source offset to mirror; -1 unknown
	srcHW  int64
	srcLS  int64
	dstEnd int64
	notes  []string
}

// newRunner loads or creates the partition's record. The source topic id
// is recorded on first use; when the record holds another id, the source
// topic was recreated while kmirror was not looking, and the runner fails
// the partition as soon as it runs.
func newRunner(ctx context.Context, m *mirrorRun, t sourceTopic, p int32) (*runner, error) {
	part, _, err := m.e.machine.LoadOrCreate(ctx, m.name, t.Name, p, "topic in scope of the mirror")
	if err != nil {
		return nil, fmt.Errorf("mirror %s: topic %s partition %d: loading its state: %w", m.name, t.Name, p, err)
	}
	var recorded string
	ok, _ := part.Record().Extension(extTopicID, &recorded)
	if !ok && t.ID != ([16]byte{}) {
		if err := part.Update(ctx, func(d *partition.Data) error { return d.SetExtension(extTopicID, topicIDString(t.ID)) }); err != nil {
			return nil, fmt.Errorf("mirror %s: topic %s partition %d: recording the source topic id: %w", m.name, t.Name, p, err)
		}
	}
	r := runnerFor(m, t, part)
	if ok && recorded != topicIDString(t.ID) && t.ID != ([16]byte{}) {
		if old, ok := parseTopicID(recorded); ok {
			r.topicID = old
		}
		r.requestRecreated(t.ID)
	}
	return r, nil
}

// runnerFor returns a runner for an already loaded partition.
func runnerFor(m *mirrorRun, t sourceTopic, part *partition.Partition) *runner {
	p := part.Record().Partition
	return &runner{m: m, topic: t.Name, topicID: t.ID, partition: p, p: part, next: -1, srcHW: -1, srcLS: -1, dstEnd: -1,
		log: m.log.With("topic", t.Name, "partition", p), stopReq: make(chan struct{}), recreateReq: make(chan struct{}), ctl: make(chan struct{}, 1), epoch: -1}
}

// errorf builds an error that names the mirror, topic and partition.
func (r *runner) errorf(format string, args ...any) error {
	return fmt.Errorf("mirror %s: topic %s partition %d: %w", r.m.name, r.topic, r.partition, fmt.Errorf(format, args...))
}

// requestStop asks the runner to take the partition through STOPPING to
// STOPPED (its topic left the mirror's scope).
func (r *runner) requestStop(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopClosed {
		r.stopReason, r.stopClosed, r.startWanted = reason, true, false
		close(r.stopReq)
	}
}

// requestStart asks the runner to take a STOPPED partition back through
// PREPARING (an operator's start); it clears a pending stop request.
func (r *runner) requestStart() {
	r.mu.Lock()
	if r.stopClosed {
		r.stopReq, r.stopClosed, r.stopReason = make(chan struct{}), false, ""
	}
	r.startWanted = true
	r.mu.Unlock()
	r.poke()
}

// poke wakes the runner to re-read the mirror's control record.
func (r *runner) poke() {
	select {
	case r.ctl <- struct{}{}:
	default:
	}
}

// stopChan returns the current stop request channel.
func (r *runner) stopChan() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopReq
}

func (r *runner) stopWhy() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopReason
}

// requestRecreated asks the runner to fail the partition for good: the
// source topic now has id newID, not the one mirrored. The runner may be
// mid-fetch (the fetcher reports ErrTopicIDChanged too) or STOPPED (the
// topic was deleted first); either way the partition ends FAILED with a
// reason that names both ids.
func (r *runner) requestRecreated(newID [16]byte) {
	r.recreateOnce.Do(func() {
		r.recreateErr = partition.NonRetryable(r.errorf("source topic %s was deleted and recreated (topic id %s → %s); kmirror does not merge a new topic into the mirrored one: "+
			"delete the destination topic or reset the partitions", r.topic, topicIDString(r.topicID), topicIDString(newID)))
		close(r.recreateReq)
	})
}

// pendingRecreate returns the channel that signals a recreated source
// topic, or nil once the failure is recorded (a nil channel never fires).
func (r *runner) pendingRecreate() chan struct{} {
	if r.recreateDone {
		return nil
	}
	return r.recreateReq
}

// pendingStop returns the stop request channel, or nil once the partition
// failed for a recreated topic: that failure waits for an operator.
func (r *runner) pendingStop() chan struct{} {
	if r.recreateDone {
		return nil
	}
	return r.stopChan()
}

// handleRecreated records the failure of a recreated source topic; it
// returns false when there is nothing (more) to do in the current state.
// STOPPED (the topic was deleted, then recreated) and FAILED go through
// PREPARING, the restart state, which can fail; STOPPING finishes first.
func (r *runner) handleRecreated(ctx context.Context, st partition.State) bool {
	select {
	case <-r.pendingRecreate():
	default:
		return false
	}
	switch st {
	case partition.Preparing, partition.Mirroring:
		if err := r.p.Fail(ctx, r.recreateErr); err != nil {
			r.log.Error("cannot record the failure", "failure", r.recreateErr, "error", err)
			sleepCtx(ctx, time.Second)
			return true
		}
		r.recreateDone = true
		return true
	case partition.Failed:
		if r.p.Record().NeedsOperator() {
			// Already failed for good (the fetcher saw the new topic id
			// first, or another non-retryable cause): nothing to add.
			r.recreateDone = true
			return true
		}
		fallthrough
	case partition.Stopped:
		if err := r.p.Transition(ctx, partition.Preparing, "the source topic was recreated"); err != nil {
			r.log.Error("cannot record the transition to PREPARING", "error", err)
			sleepCtx(ctx, time.Second)
		}
		return true
	}
	return false
}

func (r *runner) stopRequested() bool {
	select {
	case <-r.stopChan():
		return true
	default:
		return false
	}
}

// run loops over the partition's states until ctx is done.
func (r *runner) run(ctx context.Context) {
	for ctx.Err() == nil {
		var err error
		st := r.p.State()
		if r.handleRecreated(ctx, st) {
			continue
		}
		if r.stopRequested() && !r.recreateDone && (st == partition.Mirroring || st == partition.Paused || st == partition.Failed) {
			if err := r.p.Transition(ctx, partition.Stopping, r.stopWhy()); err != nil {
				r.log.Error("cannot record the transition to STOPPING", "error", err)
				sleepCtx(ctx, time.Second)
			}
			continue
		}
		if handled, err := r.applyControl(ctx, st); handled || err != nil {
			if err != nil && ctx.Err() == nil {
				r.log.Error("cannot apply the operator's request; retrying", "error", err)
				sleepCtx(ctx, time.Second)
			}
			continue
		}
		switch st {
		case partition.Preparing:
			if r.stopRequested() {
				// Nothing was mirrored under this preparation; PREPARING has no
				// way to STOPPING, so the partition waits for its topic to
				// come back into scope (or to be found recreated).
				select {
				case <-ctx.Done():
					return
				case <-r.pendingRecreate():
					continue
				}
			}
			if err = r.prepare(ctx); err == nil {
				err = r.p.TransitionWith(ctx, partition.Mirroring, fmt.Sprintf("prepared: %s mode from source offset %d", r.mode, r.getNext()), func(d *partition.Data) error {
					d.Mode = r.mode
					return nil
				})
				if err != nil {
					r.log.Error("cannot record the transition to MIRRORING", "error", err)
					sleepCtx(ctx, time.Second)
				}
				continue
			}
		case partition.Mirroring:
			err = r.mirror(ctx)
		case partition.Failed:
			r.waitRetry(ctx)
			continue
		case partition.Stopping:
			if err := r.stopPartition(ctx); err != nil && ctx.Err() == nil {
				r.log.Error("stopping the partition failed; retrying", "error", err)
				sleepCtx(ctx, time.Second)
			}
			continue
		default: // PAUSED, STOPPED: nothing runs until an operator acts.
			recreated, stop := r.pendingRecreate(), r.stopChan()
			if st != partition.Stopped {
				recreated = nil
			} else {
				stop = nil
			}
			select {
			case <-ctx.Done():
				return
			case <-recreated:
			case <-stop:
			case <-r.ctl:
			}
			continue
		}
		if err != nil && ctx.Err() == nil {
			r.fail(ctx, err)
		}
	}
}

func (r *runner) fail(ctx context.Context, cause error) {
	if err := r.p.Fail(ctx, cause); err != nil {
		r.log.Error("cannot record the failure", "failure", cause, "error", err)
		sleepCtx(ctx, time.Second)
	}
}

// waitRetry waits until a FAILED partition's retry is due and retries it;
// a partition that needs an operator waits for ctx.
func (r *runner) waitRetry(ctx context.Context) {
	rec := r.p.Record()
	if rec.NeedsOperator() {
		select {
		case <-ctx.Done():
		case <-r.pendingStop():
		case <-r.pendingRecreate():
		}
		return
	}
	if d := time.Until(rec.RetryAt); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-r.pendingStop():
			return
		case <-r.pendingRecreate():
			return
		case <-t.C:
		}
	}
	if err := r.p.Retry(ctx); err != nil {
		r.log.Error("retry failed", "error", err)
		sleepCtx(ctx, time.Second)
	}
}

// offsets returns a partition's log start and end offsets on one cluster.
func offsets(ctx context.Context, adm *kadm.Client, topic string, p int32) (start, end int64, err error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, 0, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, 0, err
	}
	so, ok1 := starts.Lookup(topic, p)
	eo, ok2 := ends.Lookup(topic, p)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("partition %d of %s not found", p, topic)
	}
	if so.Err != nil {
		return 0, 0, so.Err
	}
	if eo.Err != nil {
		return 0, 0, eo.Err
	}
	return so.Offset, eo.Offset, nil
}

// prepare decides the mode of a new partition (aligning its log start with
// filler when needed), or restores the resume point of a known one.
func (r *runner) prepare(ctx context.Context) error {
	rec := r.p.Record()
	srcStart, srcEnd, err := offsets(ctx, r.m.srcAdm, r.topic, r.partition)
	if err != nil {
		return r.errorf("reading source offsets: %w", err)
	}
	dstStart, dstEnd, err := offsets(ctx, r.m.dstAdm, r.topic, r.partition)
	if err != nil {
		return r.errorf("reading destination offsets: %w", err)
	}
	r.setOffsets(srcStart, srcEnd, dstEnd)
	r.prepared = true
	if rec.Mode != partition.ModeUndecided {
		return r.resume(ctx)
	}
	if dstEnd > 0 {
		return partition.NonRetryable(r.errorf("the destination partition already holds offsets %d to %d that this mirror did not write; "+
			"kmirror never merges into foreign data: delete and recreate the destination topic, or exclude it from mirror.topics.include", dstStart, dstEnd-1))
	}
	if srcStart == 0 || srcStart == srcEnd && srcEnd == 0 {
		r.mode, r.next, r.dstNext = partition.ModePreserve, 0, 0
		return nil
	}
	base, err := r.m.dp.firstBatchBase(ctx, r.topic, r.topicID, r.partition, srcStart, srcEnd)
	if err != nil {
		return r.errorf("finding the source batch at log start %d: %w", srcStart, err)
	}
	budget := r.m.dcfg.OffsetAlignmentMaxRecords
	why := ""
	if base > budget {
		why = fmt.Sprintf("the source log starts at offset %d, beyond mirror.offset.alignment.max.records (%d)", base, budget)
	} else if ok, err := r.m.dp.deletesRecords(ctx, r.topic); err != nil {
		return r.errorf("%w", err)
	} else if !ok {
		why = fmt.Sprintf("the source log starts at offset %d and the destination topic refuses DeleteRecords (cleanup.policy without delete), so filler could never be removed", srcStart)
	}
	if why != "" {
		r.mode, r.omap = partition.ModeMap, &offsetmap.Map{}
		r.setNext(srcStart) // brokers refuse fetches below the log start
		r.dstNext = 0
		r.note("map mode: " + why)
		r.log.Warn("partition runs in map mode: the source log start cannot be aligned with filler", "reason", why, "log_start", srcStart, "budget", budget)
		return r.saveMap(ctx)
	}
	align := alignmentState{FillTo: base, DeleteTo: srcStart}
	if err := r.p.Update(ctx, func(d *partition.Data) error {
		d.Mode = partition.ModePreserve
		return d.SetExtension(extAlignment, align)
	}); err != nil {
		return r.errorf("recording the alignment: %w", err)
	}
	r.mode = partition.ModePreserve
	return r.align(ctx, align, 0)
}

// align writes filler up to align.FillTo from the destination end offset
// dstEnd, deletes it, and sets the resume point.
func (r *runner) align(ctx context.Context, align alignmentState, dstEnd int64) error {
	if dstEnd < align.FillTo {
		r.log.Info("aligning the destination log start with filler records", "from", dstEnd, "to", align.FillTo)
		if err := r.m.dp.writeFiller(ctx, r, dstEnd, align.FillTo); err != nil {
			return r.errorf("writing filler records up to offset %d: %w", align.FillTo, err)
		}
	}
	if err := r.deleteRecords(ctx, align.FillTo); err != nil {
		return err
	}
	r.setNext(align.FillTo)
	r.dstNext = align.FillTo
	if align.DeleteTo > align.FillTo {
		r.deleteTo = align.DeleteTo
	}
	r.note(fmt.Sprintf("aligned: destination log start moved to %d with filler", align.DeleteTo))
	return nil
}

func (r *runner) deleteRecords(ctx context.Context, before int64) error {
	if before <= 0 {
		return nil
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: r.topic, Partition: r.partition, At: before})
	resp, err := r.m.dstAdm.DeleteRecords(ctx, os)
	if err == nil {
		if d, ok := resp.Lookup(r.topic, r.partition); ok {
			err = d.Err
		}
	}
	if err != nil {
		return r.errorf("moving the destination log start to %d (DeleteRecords): %w", before, err)
	}
	return nil
}

// resume restores the resume point of a partition whose mode is decided,
// from the destination's end offset (and the offset map in map mode), and
// resumes the destination transactions the partition holds open.
func (r *runner) resume(ctx context.Context) error {
	rep, err := r.m.dp.resumeWriters(ctx, r)
	if err != nil {
		return err
	}
	srcStart, srcEnd, err := offsets(ctx, r.m.srcAdm, r.topic, r.partition)
	if err != nil {
		return r.errorf("reading source offsets: %w", err)
	}
	dstStart, dstEnd, err := offsets(ctx, r.m.dstAdm, r.topic, r.partition)
	if err != nil {
		return r.errorf("reading destination offsets: %w", err)
	}
	r.setOffsets(srcStart, srcEnd, dstEnd)
	if handled, err := r.recoverLost(ctx, rep, dstStart, dstEnd); handled || err != nil {
		return err
	}
	rec := r.p.Record()
	r.mode = rec.Mode
	r.epoch = -1
	var se sourceEpoch
	if ok, _ := rec.Extension(extEpoch, &se); ok {
		r.epoch = se.Epoch
	}
	var align alignmentState
	if ok, _ := rec.Extension(extAlignment, &align); ok && r.mode == partition.ModePreserve && dstEnd <= align.FillTo {
		if err := r.align(ctx, align, dstEnd); err != nil {
			return err
		}
		dstEnd = align.FillTo
	}
	switch r.mode {
	case partition.ModePreserve:
		if dstEnd > srcEnd {
			return partition.NonRetryable(r.errorf("the destination ends at offset %d, beyond the source's high watermark %d: the source lost records it had "+
				"(unclean leader election, or the topic was recreated); the logs diverge", dstEnd, srcEnd))
		}
		if dstEnd < srcStart && !(dstEnd == 0 && srcStart == srcEnd) {
			return partition.NonRetryable(r.errorf("the source log now starts at offset %d, beyond what was mirrored (destination end %d): "+
				"records were deleted on the source before kmirror copied them", srcStart, dstEnd))
		}
		r.setNext(dstEnd)
		r.dstNext = dstEnd
	case partition.ModeMap:
		m, err := r.loadMap(ctx)
		if err != nil {
			return err
		}
		m.TruncateDest(dstEnd)
		if m.DestNext() != dstEnd && !m.Empty() {
			return partition.NonRetryable(r.errorf("the destination ends at offset %d but the offset map ends at %d: someone else wrote to the destination partition", dstEnd, m.DestNext()))
		}
		r.omap = m
		if m.Empty() {
			r.setNext(max(r.getNext(), srcStart))
		} else {
			r.setNext(m.SourceNext())
		}
		r.dstNext = dstEnd
	default:
		return r.errorf("unknown mode %q in the state store", r.mode)
	}
	return nil
}

func (r *runner) loadMap(ctx context.Context) (*offsetmap.Map, error) {
	e, err := r.m.e.opts.Store.Get(ctx, statestore.OffsetMapKey(r.m.name, r.topic, r.partition))
	m := &offsetmap.Map{}
	if errors.Is(err, statestore.ErrNotFound) {
		return m, nil
	}
	if err != nil {
		return nil, r.errorf("loading the offset map: %w", err)
	}
	if err := m.UnmarshalBinary(e.Value); err != nil {
		return nil, partition.NonRetryable(r.errorf("the offset map in the state store is unreadable: %w", err))
	}
	return m, nil
}

// saveMap writes the offset map (write-ahead: before the batches it maps are
// appended).
func (r *runner) saveMap(ctx context.Context) error {
	b, err := r.omap.MarshalBinary()
	if err != nil {
		return err
	}
	if _, err := r.m.e.opts.Store.Put(ctx, statestore.OffsetMapKey(r.m.name, r.topic, r.partition), b, statestore.AnyVersion); err != nil {
		return r.errorf("saving the offset map: %w", err)
	}
	return nil
}

// mirror runs the fetch → append loop until ctx is done or an error.
func (r *runner) mirror(ctx context.Context) error {
	// The resume point comes from the destination every time mirroring
	// (re)starts, never from memory: a failed append may have landed.
	if !r.prepared {
		if err := r.resume(ctx); err != nil {
			return err
		}
	}
	r.prepared = false
	// After alignment the next offset is the base of the source batch that
	// holds the source log start; brokers refuse fetches below the log
	// start, so fetch from the log start: the answer starts with that batch.
	epoch := r.epoch
	if r.getNext() == 0 || r.deleteTo > 0 {
		epoch = -1 // nothing fetched yet (or fetched from the log start): no epoch to check
	}
	q, err := r.m.dp.subscribe(r, max(r.getNext(), r.deleteTo), epoch)
	if err != nil {
		return err
	}
	defer r.m.dp.unsubscribe(r)
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := r.stopChan()
	go func() { // owned by mirror(): ends when it returns (cancel), on a stop request or a pause.
		for {
			select {
			case <-stop:
				cancel()
				return
			case <-r.recreateReq:
				cancel()
				return
			case <-r.ctl:
				if paused, _ := r.m.e.controlOf(r.m.name).pausedTopic(qctx, r.topic); paused {
					cancel()
					return
				}
			case <-qctx.Done():
				return
			}
		}
	}()
	for {
		f, err := q.Next(qctx)
		if err != nil {
			return nil // ctx done or stop requested
		}
		r.mu.Lock()
		if f.HighWatermark >= 0 {
			r.srcHW = f.HighWatermark
		}
		if f.LogStartOffset >= 0 {
			r.srcLS = f.LogStartOffset
		}
		r.mu.Unlock()
		if f.Err != nil {
			return r.classify(f.Err)
		}
		for _, b := range f.Batches {
			if err := r.forward(ctx, b); err != nil {
				return err
			}
		}
		r.m.dp.done(r, f)
	}
}

// forward appends one source batch to the destination.
func (r *runner) forward(ctx context.Context, b batch.Batch) error {
	next := r.getNext()
	if b.NextOffset() <= next {
		return nil // already mirrored (the first batch of a fetch may start before the fetch offset)
	}
	if b.BaseOffset() < next && !(r.mode == partition.ModeMap && r.omap.Empty()) { // map mode starts at a log start that may fall inside a batch
		return partition.NonRetryable(r.errorf("source batch at offsets %d to %d straddles the resume offset %d: the source log changed under the mirror", b.BaseOffset(), b.LastOffset(), next))
	}
	if e := b.PartitionLeaderEpoch(); e != r.epoch {
		if err := r.p.Update(ctx, func(d *partition.Data) error { return d.SetExtension(extEpoch, sourceEpoch{Epoch: e}) }); err != nil {
			return r.errorf("recording source leader epoch %d: %w", e, err)
		}
		r.epoch = e
	}
	if r.mode == partition.ModePreserve && (b.BaseOffset() != next || !b.Dense()) {
		if err := r.switchToMap(ctx, next, b); err != nil {
			return err
		}
	}
	if r.mode == partition.ModeMap {
		return r.forwardMapped(ctx, b)
	}
	if err := r.m.dp.append(ctx, r, b, b.BaseOffset()); err != nil {
		return err
	}
	r.advance(b.NextOffset(), b.NextOffset())
	r.m.e.inst.appended(r.m.name, int64(len(b)), b.NextOffset()-b.BaseOffset())
	return r.maybeDeleteAligned(ctx)
}

func (r *runner) maybeDeleteAligned(ctx context.Context) error {
	if r.deleteTo == 0 || r.getNext() < r.deleteTo {
		return nil
	}
	if err := r.deleteRecords(ctx, r.deleteTo); err != nil {
		return err
	}
	r.deleteTo = 0
	return r.p.Update(ctx, func(d *partition.Data) error {
		delete(d.Extensions, extAlignment)
		return nil
	})
}

// switchToMap moves a preserve-mode partition to map mode at source offset
// next (== destination offset next), because batch b cannot land at its own
// offsets (a compaction gap).
func (r *runner) switchToMap(ctx context.Context, next int64, b batch.Batch) error {
	m := &offsetmap.Map{}
	if start := r.getLogStart(); next > start && start >= 0 {
		if err := m.AddRun(start, start, next-start); err != nil {
			return r.errorf("building the offset map: %w", err)
		}
	}
	r.omap, r.mode = m, partition.ModeMap
	if err := r.saveMap(ctx); err != nil {
		return err
	}
	reason := fmt.Sprintf("map mode from source offset %d: the source batch at %d–%d has gaps (compaction), so offsets cannot be kept", next, b.BaseOffset(), b.LastOffset())
	if err := r.p.Update(ctx, func(d *partition.Data) error { d.Mode = partition.ModeMap; return nil }); err != nil {
		return r.errorf("recording map mode: %w", err)
	}
	r.note(reason)
	r.log.Warn("partition switches to map mode", "reason", reason)
	return nil
}

// forwardMapped appends b in map mode: dense batches as they are, batches
// with gaps re-encoded with consecutive offsets (records unchanged); the
// mapping is saved before the append.
func (r *runner) forwardMapped(ctx context.Context, b batch.Batch) error {
	out := b
	if b.IsControl() {
		if _, err := batch.ControlRecord(b); errors.Is(err, batch.ErrNoControlRecord) {
			r.advance(b.NextOffset(), r.dstNext)
			return nil // compaction removed the marker's record: nothing to replay
		}
		if err := r.omap.Add(b.BaseOffset(), r.dstNext); err != nil {
			return r.errorf("offset map: %w", err)
		}
	} else {
		recs, err := b.Records()
		if err != nil {
			return r.errorf("decoding source batch at %d: %w", b.BaseOffset(), err)
		}
		for len(recs) > 0 && recs[0].Offset < r.getNext() {
			recs = recs[1:] // below the source log start: the source no longer serves them
		}
		if len(recs) == 0 {
			r.advance(b.NextOffset(), r.dstNext)
			return nil
		}
		for i, rec := range recs {
			if err := r.omap.Add(rec.Offset, r.dstNext+int64(i)); err != nil {
				return r.errorf("offset map: %w", err)
			}
		}
		if !b.Dense() || b.BaseOffset() != recs[0].Offset {
			out, err = reencode(b, recs, r.dstNext)
			if err != nil {
				return r.errorf("re-encoding source batch at %d: %w", b.BaseOffset(), err)
			}
		}
	}
	if err := r.saveMap(ctx); err != nil {
		return err
	}
	if err := r.m.dp.append(ctx, r, out, r.dstNext); err != nil {
		return err
	}
	n := out.NextOffset() - out.BaseOffset()
	r.advance(b.NextOffset(), r.dstNext+n)
	r.m.e.inst.appended(r.m.name, int64(len(out)), n)
	return nil
}

// reencode builds a batch holding recs with consecutive offsets from base,
// keeping every batch-level attribute that consumers see.
func reencode(b batch.Batch, recs []batch.Record, base int64) (batch.Batch, error) {
	shifted := make([]batch.Record, len(recs))
	for i, rec := range recs {
		rec.Offset = base + int64(i)
		shifted[i] = rec
	}
	opts := batch.EncodeOptions{
		BaseOffset:           base,
		PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
		Compression:          b.Compression(),
		Transactional:        b.IsTransactional(),
		ProducerID:           b.ProducerID(),
		ProducerEpoch:        b.ProducerEpoch(),
		BaseSequence:         b.BaseSequence(),
	}
	if b.TimestampType() == batch.LogAppendTime {
		opts.LogAppendTime = b.MaxTimestamp()
	}
	return batch.Encode(opts, shifted)
}

// classify turns a fetch error into a partition failure: errors that mean the
// source log is no longer the one mirrored wait for an operator.
func (r *runner) classify(err error) error {
	if isSourceLogChanged(err) {
		return partition.NonRetryable(r.errorf("%w", err))
	}
	return r.errorf("fetching from the source: %w", err)
}

// stopPartition runs STOPPING: remove the fetcher, abort the destination
// transactions the partition holds open, record the last mirrored offset,
// then STOPPED.
func (r *runner) stopPartition(ctx context.Context) error {
	r.m.dp.unsubscribe(r)
	// The writer learns the open transactions from the destination (after a
	// restart it knows none by itself), then aborts them.
	rep, err := r.m.dp.resumeWriters(ctx, r)
	if err != nil {
		return err
	}
	dstStart, dstEnd, err := offsets(ctx, r.m.dstAdm, r.topic, r.partition)
	if err != nil {
		return r.errorf("reading the destination end offset: %w", err)
	}
	// A transaction the destination aborted on its own was not mirrored:
	// the last mirrored offset is before it.
	handled, err := r.recoverLost(ctx, rep, dstStart, dstEnd)
	if err != nil {
		return err
	}
	if !handled && r.getNext() < 0 { // not mirrored by this process: where did mirroring stop?
		next := dstEnd
		if r.p.Record().Mode == partition.ModeMap {
			m, err := r.loadMap(ctx)
			if err != nil {
				return err
			}
			m.TruncateDest(dstEnd)
			next = m.SourceNext()
		}
		r.setNext(next)
	}
	if err := r.m.dp.abortAll(ctx, r); err != nil {
		return err
	}
	if _, dstEnd, err = offsets(ctx, r.m.dstAdm, r.topic, r.partition); err != nil {
		return r.errorf("reading the destination end offset: %w", err)
	}
	last := r.getNext() - 1
	err = r.p.TransitionWith(ctx, partition.Stopped, fmt.Sprintf("stopped; last mirrored source offset %d, destination end %d", last, dstEnd), func(d *partition.Data) error {
		d.LastMirroredOffset = last
		return nil
	})
	if err == nil {
		r.m.triggerSync() // the read-only loop makes the topic writable once all its partitions stopped
	}
	return err
}

// advance records that the source is mirrored up to next (exclusive) and the
// destination up to dstNext.
func (r *runner) advance(next, dstNext int64) {
	r.dstNext = dstNext
	r.mu.Lock()
	r.next, r.dstEnd = next, dstNext
	r.mu.Unlock()
}

func (r *runner) setNext(next int64) {
	r.mu.Lock()
	r.next = next
	r.mu.Unlock()
}

func (r *runner) getNext() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

func (r *runner) getLogStart() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srcLS
}

func (r *runner) setOffsets(srcStart, srcEnd, dstEnd int64) {
	r.mu.Lock()
	r.srcLS, r.srcHW, r.dstEnd = srcStart, srcEnd, dstEnd
	r.mu.Unlock()
}

func (r *runner) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.notes {
		if n == s {
			return
		}
	}
	r.notes = append(r.notes, s)
}

func (r *runner) status() PartitionStatus {
	rec := r.p.Record()
	r.mu.Lock()
	defer r.mu.Unlock()
	st := PartitionStatus{
		Mirror: r.m.name, Topic: r.topic, Partition: r.partition, State: rec.State.String(), Mode: string(rec.Mode),
		SourceHighWatermark: r.srcHW, SourceLogStart: r.srcLS, DestinationEndOffset: r.dstEnd, Lag: -1,
		LastMirroredOffset: rec.LastMirroredOffset, UpdatedAt: rec.UpdatedAt, Notes: append([]string(nil), r.notes...),
	}
	if r.next >= 0 {
		st.LastMirroredOffset = r.next - 1
		if r.srcHW >= 0 {
			st.Lag = max(r.srcHW-r.next, 0)
		}
	}
	if rec.State == partition.Failed {
		st.LastError = rec.Reason
		if rec.NeedsOperator() {
			st.Retry = "NonRetryable"
		} else {
			st.Retry = fmt.Sprintf("%d/%d", rec.Attempts, r.m.e.machine.Backoff().MaxAttempts)
		}
	}
	return st
}
