package runner

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/kafkalog"
	"github.com/kmirror/kmirror/core/logging"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner/destination"
	"github.com/kmirror/kmirror/core/runner/filler"
	"github.com/kmirror/kmirror/core/runner/mapstore"
	"github.com/kmirror/kmirror/core/runner/prove"
	"github.com/kmirror/kmirror/core/writer"
)

// runner drives one partition: it owns the partition's state machine record
// and moves its batches from the fetcher to the writer.
type Runner struct {
	d         Deps
	topic     string
	topicID   [16]byte
	partition int32
	log       hclog.Logger
	// state is the partition's state machine handle (its persisted record).
	state *partition.Partition

	// Only the runner goroutine touches these.
	mode     partition.Mode
	omap     *offsetmap.Map
	deleteTo int64 // pending DeleteRecords target after alignment; 0: none
	prepared bool  // prepare just set the resume point: mirror need not resume
	epoch    int32 // source leader epoch of the last batch forwarded; -1 unknown
	// retry paces retries of failed steps (backoff); nil until the first.
	retry *backoff.Retry

	maps  *mapstore.Store     // omap's durable copy; group sync reads omap there
	dest  *destination.Writer // the partition's destination writer
	proof *prove.Partition    // proving its destination (prove.go)

	// ctl is poked (buffered, never blocks) when an operator action may
	// concern the partition: it re-reads the mirror's control record.
	ctl     chan struct{}
	dstNext int64 // next destination offset (== next in preserve mode)
	// run holds the batches forwardAll hands the writer together (reused);
	// sent the batches handed to the writer (Send) and not reported landed
	// yet, oldest first; sendNext the source offset after the last batch
	// sent (-1: none in flight, r.Next() applies). Runner goroutine only.
	run      []batch.Batch
	sent     []batch.Batch
	sendNext int64
	undone   []undoneDelivery // deliveries whose batches are still in flight, oldest first
	landedFn func(batch.Batch, writer.Result)

	// fatalReq is closed when the partition must fail for good whatever it
	// is doing: its source topic was found recreated (same name, new topic
	// id), or its destination topic was deleted under it. fatalErr is the
	// non-retryable failure to record, fatalWhy the reason of the
	// PREPARING step a STOPPED or retryable FAILED partition takes on the
	// way. fatalDone (runner goroutine only) is set once it is recorded.
	fatalReq  chan struct{}
	fatalOnce sync.Once
	fatalErr  error
	fatalWhy  string
	fatalDone bool

	mu sync.Mutex // guards the stop request and the status fields below
	// stopReq is closed when the partition must stop (its topic left the
	// mirror's scope, or an operator stopped it); stopReason says why. A
	// start by an operator replaces it with an open channel.
	stopReq     chan struct{}
	stopClosed  bool
	stopReason  string
	startWanted bool // an operator asked a STOPPED partition to start again
	// cancelMirror ends the context of the current MIRRORING step (nil
	// outside it), so that a fatal request also ends an append that is
	// retrying against a deleted destination topic.
	cancelMirror context.CancelCauseFunc

	next   int64 // next source offset to mirror; -1 unknown
	srcHW  int64
	srcLS  int64
	dstEnd int64
	notes  []string
	// waitErr is the error the destination appends are being retried on
	// ("" when none), since waitSince: a full disk, a leader gone (the
	// writer's OnRetry hook, retrying).
	waitErr   string
	waitSince time.Time
}

// New returns the runner of the partition d.Partition holds. It does not
// run until Run.
func New(d Deps) *Runner {
	p := d.Partition.Record().Partition
	r := &Runner{d: d, topic: d.Topic, topicID: d.TopicID, partition: p, state: d.Partition, next: -1, srcHW: -1, srcLS: -1, dstEnd: -1,
		log: logging.WithFields(d.Log, "mirror", d.Mirror, "topic", d.Topic, "partition", p), stopReq: make(chan struct{}), fatalReq: make(chan struct{}), ctl: make(chan struct{}, 1), epoch: -1,
		sendNext: -1}
	r.landedFn = r.landed
	r.maps = mapstore.New(d.Store, d.Mirror, d.Topic, p, d.DestAdmin, r.log)
	r.dest = destination.New(d.Path, d.Partition, d.Mirror, d.Topic, p, r.log)
	r.dest.OnRetry(r.retrying)
	r.proof = r.newProof()
	return r
}

// errorf builds an error that names the mirror, topic and partition.
func (r *Runner) errorf(format string, args ...any) error {
	return fmt.Errorf("mirror %s: topic %s partition %d: %w", r.d.Mirror, r.topic, r.partition, fmt.Errorf(format, args...))
}

// requestStop asks the runner to take the partition through STOPPING to
// STOPPED (its topic left the mirror's scope).
func (r *Runner) RequestStop(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopClosed {
		r.stopReason, r.stopClosed, r.startWanted = reason, true, false
		close(r.stopReq)
	}
}

// requestStart asks the runner to take a STOPPED partition back through
// PREPARING (an operator's start); it clears a pending stop request.
func (r *Runner) RequestStart() {
	r.mu.Lock()
	if r.stopClosed {
		r.stopReq, r.stopClosed, r.stopReason = make(chan struct{}), false, ""
	}
	r.startWanted = true
	r.mu.Unlock()
	r.Poke()
}

// poke wakes the runner to re-read the mirror's control record.
func (r *Runner) Poke() {
	select {
	case r.ctl <- struct{}{}:
	default:
	}
}

// stopChan returns the current stop request channel.
func (r *Runner) stopChan() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopReq
}

func (r *Runner) stopWhy() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopReason
}

// RequestRecreated asks the runner to fail the partition for good: the
// source topic now has id newID, not the one mirrored. The runner may be
// mid-fetch (the fetcher reports ErrTopicIDChanged too) or STOPPED (the
// topic was deleted first); either way the partition ends FAILED with a
// reason that names both ids.
func (r *Runner) RequestRecreated(newID [16]byte) {
	r.requestFatal(partition.NonRetryable(r.errorf("source topic %s was deleted and recreated (topic id %s → %s); kmirror does not merge a new topic into the mirrored one: "+
		"delete the destination topic, then reset the partitions (kmirror mirrors reset %s --topics %s)", r.topic, TopicIDString(r.topicID), TopicIDString(newID), r.d.Mirror, regexp.QuoteMeta(r.topic))),
		"the source topic was recreated")
}

// RequestDestinationDeleted asks the runner to fail the partition for
// good: the destination topic that held its copies was deleted (the topics
// round found it missing and does not create it again). An append retrying
// against the missing topic ends at once.
func (r *Runner) RequestDestinationDeleted() {
	r.requestFatal(partition.NonRetryable(r.errorf("the destination topic %s was deleted while the mirror had copied records into it; kmirror does not create it again, "+
		"because the appends in flight would land at other offsets than the source's: reset the partitions to mirror the topic again from the source's log start "+
		"(kmirror mirrors reset %s --topics %s)", r.topic, r.d.Mirror, regexp.QuoteMeta(r.topic))),
		"the destination topic was deleted")
}

// requestFatal records the first fatal request and wakes the runner.
func (r *Runner) requestFatal(err error, why string) {
	r.fatalOnce.Do(func() {
		r.fatalErr, r.fatalWhy = err, why
		close(r.fatalReq)
		r.mu.Lock()
		if r.cancelMirror != nil {
			r.cancelMirror(err)
		}
		r.mu.Unlock()
	})
}

// fatalRequested reports whether a fatal request was made.
func (r *Runner) fatalRequested() bool {
	select {
	case <-r.fatalReq:
		return true
	default:
		return false
	}
}

// pendingFatal returns the channel that signals a fatal request, or nil
// once the failure is recorded (a nil channel never fires).
func (r *Runner) pendingFatal() chan struct{} {
	if r.fatalDone {
		return nil
	}
	return r.fatalReq
}

// pendingStop returns the stop request channel, or nil once the partition
// failed for good (a fatal request): that failure waits for an operator.
func (r *Runner) pendingStop() chan struct{} {
	if r.fatalDone {
		return nil
	}
	return r.stopChan()
}

// handleFatal records the failure a fatal request asked for; it returns
// false when there is nothing (more) to do in the current state. STOPPED
// (the topic was deleted, then recreated) and FAILED go through PREPARING,
// the restart state, which can fail; STOPPING finishes first.
func (r *Runner) handleFatal(ctx context.Context, st partition.State) bool {
	select {
	case <-r.pendingFatal():
	default:
		return false
	}
	switch st {
	case partition.Preparing, partition.Mirroring:
		if err := r.state.Fail(ctx, r.fatalErr); err != nil {
			r.log.Error("cannot record the failure", "failure", r.fatalErr, "error", err)
			r.backoff(ctx)
			return true
		}
		r.fatalDone = true
		return true
	case partition.Failed:
		if r.state.Record().NeedsOperator() {
			// Already failed for good (the fetcher saw the new topic id
			// first, or another non-retryable cause): nothing to add.
			r.fatalDone = true
			return true
		}
		fallthrough
	case partition.Stopped:
		if err := r.state.Transition(ctx, partition.Preparing, r.fatalWhy); err != nil {
			r.log.Error("cannot record the transition to PREPARING", "error", err)
			r.backoff(ctx)
		}
		return true
	}
	return false
}

func (r *Runner) stopRequested() bool {
	select {
	case <-r.stopChan():
		return true
	default:
		return false
	}
}

// run loops over the partition's states until ctx is done.
func (r *Runner) Run(ctx context.Context) {
	last := partition.State(-1)
	for ctx.Err() == nil {
		var err error
		st := r.state.State()
		if st != last && r.retry != nil {
			r.retry.Reset() // progress: the next failed step waits from the start again
		}
		last = st
		if r.handleFatal(ctx, st) {
			continue
		}
		if r.stopRequested() && !r.fatalDone && (st == partition.Mirroring || st == partition.Paused || st == partition.Failed) {
			r.enterStopping(ctx)
			continue
		}
		if handled, err := r.applyControl(ctx, st); handled || err != nil {
			if err != nil && ctx.Err() == nil {
				r.log.Error("cannot apply the operator's request; retrying", "error", err)
				r.backoff(ctx)
			}
			continue
		}
		switch st {
		case partition.Preparing:
			err = r.prepareStep(ctx)
		case partition.Mirroring:
			err = r.mirror(ctx)
		case partition.Failed:
			r.waitRetry(ctx)
		case partition.Stopping:
			if err := r.stopPartition(ctx); err != nil && ctx.Err() == nil {
				r.log.Error("stopping the partition failed; retrying", "error", err)
				r.backoff(ctx)
			}
		default: // PAUSED, STOPPED: nothing runs until an operator acts.
			r.waitOperator(ctx, st)
		}
		if err != nil && ctx.Err() == nil && !r.fatalRequested() {
			r.fail(ctx, err) // (after a fatal request, handleFatal records its reason instead)
		}
	}
}

// enterStopping records a requested stop (STOPPING).
func (r *Runner) enterStopping(ctx context.Context) {
	if err := r.state.Transition(ctx, partition.Stopping, r.stopWhy()); err != nil {
		r.log.Error("cannot record the transition to STOPPING", "error", err)
		r.backoff(ctx)
	}
}

// prepareStep prepares a PREPARING partition and records MIRRORING; the
// error is a failed preparation (the caller records FAILED).
func (r *Runner) prepareStep(ctx context.Context) error {
	if r.stopRequested() {
		// Nothing was mirrored under this preparation; PREPARING has no
		// way to STOPPING, so the partition waits for its topic to come
		// back into scope (or to be found recreated).
		select {
		case <-ctx.Done():
		case <-r.pendingFatal():
		}
		return nil
	}
	if err := r.prepare(ctx); err != nil {
		return err
	}
	err := r.state.TransitionWith(ctx, partition.Mirroring, fmt.Sprintf("prepared: %s mode from source offset %d", r.mode, r.Next()), func(d *partition.Data) error {
		d.Mode = r.mode
		return nil
	})
	if err != nil {
		r.log.Error("cannot record the transition to MIRRORING", "error", err)
		r.backoff(ctx)
	}
	return nil
}

// waitOperator waits in PAUSED or STOPPED for an operator's request (or,
// when STOPPED, a recreated topic; when PAUSED, a stop request). A PAUSED
// partition reads the source's end every Settings.LagRefresh meanwhile:
// it fetches nothing, and its lag must still show the source moving on.
func (r *Runner) waitOperator(ctx context.Context, st partition.State) {
	recreated, stop := r.pendingFatal(), r.stopChan()
	if st != partition.Stopped {
		recreated = nil
	} else {
		stop = nil
	}
	var refresh <-chan time.Time
	if st == partition.Paused && r.d.Settings.LagRefresh > 0 {
		r.refreshSourceEnd(ctx)
		t := time.NewTimer(r.d.Settings.LagRefresh)
		defer t.Stop()
		refresh = t.C
	}
	select {
	case <-ctx.Done():
	case <-recreated:
	case <-stop:
	case <-r.ctl:
	case <-refresh: // Run calls again: the source's end is read again
	}
}

// refreshSourceEnd reads the source partition's log start and end for the
// status (lag) of a partition that does not fetch; a failure leaves them
// unknown.
func (r *Runner) refreshSourceEnd(ctx context.Context) {
	start, end, err := r.offsets(ctx, true)
	if err != nil {
		start, end = -1, -1
	}
	r.mu.Lock()
	r.srcLS, r.srcHW = start, end
	r.mu.Unlock()
}

func (r *Runner) fail(ctx context.Context, cause error) {
	r.retrying(nil) // the failure's reason replaces what the appends waited for (when not cleared yet)
	if err := r.state.Fail(ctx, cause); err != nil {
		r.log.Error("cannot record the failure", "failure", cause, "error", err)
		r.backoff(ctx)
	}
}

// waitRetry waits until a FAILED partition's retry is due and retries it;
// a partition that needs an operator waits for ctx.
func (r *Runner) waitRetry(ctx context.Context) {
	rec := r.state.Record()
	if rec.NeedsOperator() {
		select {
		case <-ctx.Done():
		case <-r.pendingStop():
		case <-r.pendingFatal():
		case <-r.ctl: // an operator's start (applyControl)
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
		case <-r.pendingFatal():
			return
		case <-t.C:
		}
	}
	r.forgetSourceHW()
	if err := r.state.Retry(ctx); err != nil {
		r.log.Error("retry failed", "error", err)
		r.backoff(ctx)
	}
}

// offsets returns the partition's log start and end offsets on the source
// (or the destination), through the mirror's batcher when it has one: the
// partitions preparing together share its requests, and the answer is
// never older than the call.
func (r *Runner) offsets(ctx context.Context, source bool) (start, end int64, err error) {
	cl, b := r.d.Dest, r.d.DestBounds
	if source {
		cl, b = r.d.Source, r.d.SourceBounds
	}
	if b != nil {
		return b.Bounds(ctx, r.topic, r.partition)
	}
	return kafkalog.Bounds(ctx, cl, r.topic, r.partition)
}

// prepare decides the mode of a new partition (aligning its log start with
// filler when needed), or restores the resume point of a known one.
func (r *Runner) prepare(ctx context.Context) error {
	rec := r.state.Record()
	lb, err := r.proof.ReadBounds(ctx)
	if err != nil {
		return err
	}
	srcStart, srcEnd, dstStart, dstEnd := lb.SrcStart, lb.SrcEnd, lb.DstStart, lb.DstEnd
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
	base, err := kafkalog.FirstBatchAt(ctx, r.d.Source, r.topic, r.partition, srcStart, srcEnd)
	if err != nil {
		return r.errorf("finding the source batch at log start %d: %w", srcStart, err)
	}
	budget := r.d.Settings.AlignmentBudget
	why := ""
	if base > budget {
		why = fmt.Sprintf("the source log starts at offset %d, beyond mirror.offset.alignment.max.records (%d)", base, budget)
	} else if ok, err := filler.Deletable(ctx, r.d.DestAdmin, r.topic); err != nil {
		return r.errorf("%w", err)
	} else if !ok {
		why = fmt.Sprintf("the source log starts at offset %d and the destination topic refuses DeleteRecords (cleanup.policy without delete), so filler could never be removed", srcStart)
	}
	if why != "" {
		// Copy from the log start itself, which may fall inside the batch
		// at base: brokers refuse fetches below the log start, and records
		// before it are deleted on the source.
		r.mode, r.omap = partition.ModeMap, &offsetmap.Map{}
		r.setNext(srcStart)
		r.dstNext = 0
		r.note("map mode: " + why)
		r.log.Warn("partition runs in map mode: the source log start cannot be aligned with filler", "reason", why, "log_start", srcStart, "budget", budget)
		return r.maps.Save(ctx, r.omap)
	}
	align := partition.Alignment{FillTo: base, DeleteTo: srcStart}
	if err := r.state.Update(ctx, func(d *partition.Data) error {
		d.Mode = partition.ModePreserve
		d.Alignment = &align
		return nil
	}); err != nil {
		return r.errorf("recording the alignment: %w", err)
	}
	r.mode = partition.ModePreserve
	return r.align(ctx, align, 0)
}

// align writes filler up to align.FillTo from the destination end offset
// dstEnd, deletes it, and sets the resume point.
func (r *Runner) align(ctx context.Context, align partition.Alignment, dstEnd int64) error {
	if dstEnd < align.FillTo {
		r.log.Info("aligning the destination log start with filler records", "from", dstEnd, "to", align.FillTo)
		if err := filler.Write(r.d.Mirror, dstEnd, align.FillTo, func(b batch.Batch, off int64) error { return r.dest.Append(ctx, b, off) }); err != nil {
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

func (r *Runner) deleteRecords(ctx context.Context, before int64) error {
	if err := filler.Delete(ctx, r.d.DestAdmin, r.topic, r.partition, before); err != nil {
		return r.errorf("%w", err)
	}
	return nil
}

// resume restores the resume point of a partition whose mode is decided,
// from the destination's end offset (and the offset map in map mode), and
// resumes the destination transactions the partition holds open.
func (r *Runner) resume(ctx context.Context) error {
	rep, err := r.resumeWriters(ctx)
	if err != nil {
		return err
	}
	lb, err := r.proof.ReadBounds(ctx)
	if err != nil {
		return err
	}
	srcStart, srcEnd, dstEnd := lb.SrcStart, lb.SrcEnd, lb.DstEnd
	r.setOffsets(srcStart, srcEnd, dstEnd)
	if handled, err := r.proveDestination(ctx, rep, lb); handled || err != nil {
		return err
	}
	rec := r.state.Record()
	r.mode = rec.Mode
	r.epoch = -1
	if rec.SourceEpoch != nil {
		r.epoch = *rec.SourceEpoch
	}
	if align := rec.Alignment; align != nil && r.mode == partition.ModePreserve && dstEnd <= align.FillTo {
		if err := r.align(ctx, *align, dstEnd); err != nil {
			return err
		}
		dstEnd = align.FillTo
	}
	var m *offsetmap.Map
	if r.mode == partition.ModeMap {
		if m, err = r.maps.Load(ctx); err != nil {
			return err
		}
		r.omap = m
	}
	next, err := prove.ResumeAt(r.mode, lb, dstEnd, m)
	if err != nil {
		return r.errorf("%w", err)
	}
	r.setNext(next)
	r.dstNext = dstEnd
	return nil
}

// mirror runs the fetch → append loop until ctx is done or an error.
func (r *Runner) mirror(parent context.Context) error {
	// A fatal request ends this step's context: an append retrying against
	// a deleted destination topic must not wait for the topic to come back.
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	r.mu.Lock()
	r.cancelMirror = cancel
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.cancelMirror = nil
		r.mu.Unlock()
	}()
	if r.fatalRequested() {
		return nil // (made before cancelMirror was set)
	}
	// The resume point comes from the destination every time mirroring
	// (re)starts, never from memory: a failed append may have landed.
	if !r.prepared {
		// Until resume reads the source's end again, the one known is
		// from before (a pause, a failure): a lag computed from it could
		// say caught up when the source moved on (a planned failover
		// waits for lag 0).
		r.mu.Lock()
		r.srcHW = -1
		r.mu.Unlock()
		if err := r.resume(ctx); err != nil {
			return err
		}
	}
	r.prepared = false
	r.dropSent()
	// After alignment the next offset is the base of the source batch that
	// holds the source log start; brokers refuse fetches below the log
	// start, so fetch from the log start: the answer starts with that batch.
	epoch := r.epoch
	if r.Next() == 0 || r.deleteTo > 0 {
		epoch = -1 // nothing fetched yet (or fetched from the log start): no epoch to check
	}
	q, err := r.subscribe(max(r.Next(), r.deleteTo), epoch)
	if err != nil {
		return err
	}
	defer r.unsubscribe()
	err = r.forwardLoop(ctx, q)
	if ferr := r.flush(ctx); err == nil {
		err = ferr
	}
	// Not fetching any more: the source's end is unknown until the next
	// resume reads it (see above).
	r.mu.Lock()
	r.srcHW = -1
	r.mu.Unlock()
	return err
}

// forwardLoop forwards the queue's deliveries until a stop request, a
// recreated source topic, an operator's pause, ctx's end (nil) or an error.
// Appends may still be in flight when it returns (flush).
//
// An idle partition spends its life parked in waitDelivery below this
// frame, so the loop keeps nothing of a delivery in its own frame
// (forwardNext does): with the frames under it, the parked stack stays
// small enough for the runtime to shrink it to its smallest size, which
// is most of what an idle partition costs at 10,000 partitions
// (BenchmarkIdlePartitionMemory in core/mirror).
func (r *Runner) forwardLoop(ctx context.Context, q *fetcher.Queue) error {
	healthy := healthyAfter(r)
	stop := r.stopChan()
	for {
		// A stop request, a recreated source topic or an operator's pause
		// is taken between two deliveries even when they keep coming.
		select {
		case <-stop:
			return nil
		case <-r.fatalReq:
			return nil
		case <-r.ctl:
			if paused, _ := r.d.Control.Paused(ctx, r.topic); paused {
				return nil
			}
		default:
		}
		forwarded, err := r.forwardNext(ctx, q, healthy)
		if err != nil {
			return err
		}
		if forwarded {
			continue
		}
		// Nothing to forward now: let the appends in flight land before
		// waiting.
		if err := r.flush(ctx); err != nil {
			return err
		}
		if r.waitDelivery(ctx, q, stop) {
			return nil
		}
	}
}

// waitDelivery waits for the queue to have a delivery (false), or for a
// stop request, a recreated source topic, an operator's pause or ctx's end
// (true); an operator's request that is not a pause ends the wait too.
func (r *Runner) waitDelivery(ctx context.Context, q *fetcher.Queue, stop <-chan struct{}) (done bool) {
	select {
	case <-ctx.Done():
		return true
	case <-stop:
		return true
	case <-r.fatalReq:
		return true
	case <-r.ctl:
		paused, _ := r.d.Control.Paused(ctx, r.topic)
		return paused
	case <-q.Ready():
		return false
	}
}

// forwardNext forwards the queue's next delivery, if it has one. It is
// never inlined: it keeps a delivery out of forwardLoop's frame (see there).
//
//go:noinline
func (r *Runner) forwardNext(ctx context.Context, q *fetcher.Queue, healthy *healthyCheck) (forwarded bool, err error) {
	f, ok := q.TryNext()
	if !ok {
		return false, nil
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
		return false, r.classify(f.Err)
	}
	if err := r.forwardAll(ctx, f.Batches); err != nil {
		return false, err
	}
	r.delivered(f)
	if err := r.proof.MaybeCheckpoint(ctx, r.dstNext); err != nil {
		return false, err
	}
	healthy.check(ctx)
	return true, nil
}

// forwardAll appends a delivery's source batches to the destination in
// order. In preserve mode, batches that continue what was sent before them
// (dense, same source leader epoch) go to the writer together, which keeps
// several appends in flight (writer.Partition.Send), also across
// deliveries; any other batch waits for the appends in flight (flush) and
// goes through admit first.
func (r *Runner) forwardAll(ctx context.Context, bs []batch.Batch) error {
	run := r.run[:0]
	// Every slot is cleared, not only those in use: a batch holds the whole
	// fetch response it came in alive.
	defer func() { clear(run[:cap(run)]); r.run = run[:0] }()
	for _, b := range bs {
		if r.mode == partition.ModePreserve && r.sendNext >= 0 && b.BaseOffset() == r.sendNext && b.Dense() && b.PartitionLeaderEpoch() == r.epoch {
			run, r.sendNext = append(run, b), b.NextOffset()
			continue
		}
		if err := r.send(ctx, run); err != nil {
			return err
		}
		clear(run)
		run = run[:0]
		if err := r.flush(ctx); err != nil {
			return err
		}
		plain, err := r.admit(ctx, b)
		switch {
		case err != nil:
			return err
		case plain:
			run, r.sendNext = append(run, b), b.NextOffset()
		case r.mode == partition.ModeMap && b.NextOffset() > r.Next():
			if err := r.forwardMapped(ctx, b); err != nil {
				return err
			}
		}
	}
	return r.send(ctx, run)
}

// admit runs a source batch's checks before it is appended: it skips a
// batch already mirrored, records a new source leader epoch, and switches a
// preserve-mode partition to map mode when the batch cannot keep its
// offsets. plain says the batch is to be appended as it is at its own
// offsets (preserve mode).
func (r *Runner) admit(ctx context.Context, b batch.Batch) (plain bool, err error) {
	next := r.Next()
	if b.NextOffset() <= next {
		return false, nil // already mirrored (the first batch of a fetch may start before the fetch offset)
	}
	if b.BaseOffset() < next && r.mode != partition.ModeMap {
		return false, partition.NonRetryable(r.errorf("source batch at offsets %d to %d straddles the resume offset %d: the source log changed under the mirror", b.BaseOffset(), b.LastOffset(), next))
	}
	if e := b.PartitionLeaderEpoch(); e != r.epoch {
		if err := r.state.Update(ctx, func(d *partition.Data) error { d.SourceEpoch = &e; return nil }); err != nil {
			return false, r.errorf("recording source leader epoch %d: %w", e, err)
		}
		r.epoch = e
	}
	if r.mode == partition.ModePreserve && (b.BaseOffset() != next || !b.Dense()) {
		if err := r.switchToMap(ctx, next, b); err != nil {
			return false, err
		}
	}
	return r.mode == partition.ModePreserve, nil
}

// send hands batches that continue what was sent before them (preserve
// mode) to the writer, pipelined: the last ones may still be in flight when
// it returns. The partition advances as each lands (landed).
func (r *Runner) send(ctx context.Context, run []batch.Batch) error {
	if len(run) == 0 {
		return nil
	}
	pw, err := r.dest.Partition()
	if err != nil {
		return r.errorf("%w", err)
	}
	r.sent = append(r.sent, run...)
	return r.sendDone(ctx, pw, pw.Send(ctx, run, r.landedFn))
}

// flush waits for the appends in flight to land. When ctx ended they are
// left to the writer (the next resume reads the destination).
func (r *Runner) flush(ctx context.Context) error {
	if len(r.sent) == 0 {
		return nil
	}
	if ctx.Err() != nil {
		r.dropSent()
		return nil
	}
	pw := r.dest.Current()
	return r.sendDone(ctx, pw, pw.Flush(ctx, r.landedFn))
}

// sendDone handles the outcome of a Send or Flush. On error nothing is in
// flight any more and r.sent[0] is the batch that failed: a batch refused
// for its size gets its one more try (destination.Writer.Failed), and the batches sent
// after it, which were not appended, are sent again.
func (r *Runner) sendDone(ctx context.Context, pw *writer.Partition, err error) error {
	if err == nil {
		return r.maybeDeleteAligned(ctx)
	}
	if len(r.sent) == 0 { // not about a batch (the partition writer was closed)
		return r.errorf("%w", err)
	}
	var dup *writer.DuplicateMarkerError
	if errors.As(err, &dup) {
		// The marker (r.sent[0]), or the batches that landed after late
		// copies of one (dup.Shifted: the first ones of r.sent), are on
		// the destination; the partition is in map mode now, and the
		// batches after them go that way.
		n := max(min(len(dup.Shifted), len(r.sent)), 1)
		landed, rest := slices.Clone(r.sent[:n]), slices.Clone(r.sent[n:])
		r.dropSent()
		if len(dup.Shifted) > 0 {
			err = r.markerCopiedLate(ctx, landed, dup)
		} else {
			err = r.markerDuplicated(ctx, landed[0], dup)
		}
		if err != nil {
			return err
		}
		for _, b := range rest {
			if err := r.forwardMapped(ctx, b); err != nil {
				return err
			}
		}
		return nil
	}
	failed, rest := r.sent[0], slices.Clone(r.sent[1:])
	r.dropSent()
	if err := r.dest.Failed(ctx, pw, failed, failed.BaseOffset(), err); err != nil {
		return err
	}
	r.appended(failed)
	r.sendNext = failed.NextOffset()
	if len(rest) > 0 {
		r.sendNext = rest[len(rest)-1].NextOffset()
	}
	return r.send(ctx, rest)
}

// markerDuplicated handles marker b that the destination wrote more than
// once (its transaction coordinator failed over while writing it): b is on
// the destination at its offset and the copies after it move every later
// offset. What mirror.destination.mismatch.action says of a destination
// that differs from its source applies: fail stops the partition; map (the
// default) goes on in map mode after the copies, which keeps every source
// record, and records the mapping.
func (r *Runner) markerDuplicated(ctx context.Context, b batch.Batch, dup *writer.DuplicateMarkerError) error {
	copies := dup.End - dup.Marker
	if err := r.duplicateAction(dup); err != nil {
		return err
	}
	r.advance(b.NextOffset(), dup.End)
	r.d.Events.Appended(b, 1)
	if r.mode == partition.ModeMap {
		reason := fmt.Sprintf("the destination wrote the transaction marker of source offset %d %d times (destination offset %d on; its transaction coordinator failed over): later offsets move by %d more",
			b.BaseOffset(), copies, dup.Marker, copies-1)
		r.note(reason)
		r.log.Warn("destination wrote a transaction marker more than once", "reason", reason)
		return nil
	}
	return r.enterMap(ctx, b.NextOffset(), fmt.Sprintf("map mode from source offset %d: the destination wrote the transaction marker at offset %d %d times "+
		"(its transaction coordinator failed over while writing it), so later offsets move by %d", b.NextOffset(), dup.Marker, copies, copies-1))
}

// duplicateAction counts a marker the destination wrote more than once as a
// mismatch and applies mirror.destination.mismatch.action: for fail, the
// non-retryable error that stops the partition, naming the marker and what
// to do; for map, nil (the caller goes on in map mode).
func (r *Runner) duplicateAction(dup *writer.DuplicateMarkerError) error {
	action := prove.Action(r.d.Settings.MismatchAction)
	r.d.Events.Mismatch(r.topic, r.partition, action)
	if action != config.MismatchFail {
		return nil
	}
	r.log.Error("destination wrote a transaction marker more than once", "marker_offset", dup.Marker, "destination_end", dup.End, "action", action)
	return partition.NonRetryable(r.errorf("%w; mirror.destination.mismatch.action is fail, so the partition waits: set it to map and run "+
		"`kmirror mirrors start --mirror %s --topics '%s'` to go on in map mode", dup, r.d.Mirror, regexp.QuoteMeta(r.topic)))
}

// markerCopiedLate handles batches bs, sent in preserve mode, that landed
// after copies of a replayed marker the destination wrote once the marker's
// append had returned (its transaction coordinator failed over): bs[i] is
// on the destination, once, where dup.Shifted[i] says. The marker and
// everything before it are at their own offsets. fail stops the partition
// (the batches stay where they landed); map (the default) goes on in map
// mode from bs[0], with each source offset of bs mapped to where it landed.
func (r *Runner) markerCopiedLate(ctx context.Context, bs []batch.Batch, dup *writer.DuplicateMarkerError) error {
	if err := r.duplicateAction(dup); err != nil {
		return err
	}
	copies := dup.Shifted[0].BaseOffset - dup.Expected
	from := bs[0].BaseOffset()
	runs := make([]offsetmap.Range, len(bs))
	for i, b := range bs {
		runs[i] = offsetmap.Range{Source: b.BaseOffset(), Dest: dup.Shifted[i].BaseOffset, Len: b.NextOffset() - b.BaseOffset()}
	}
	if err := r.enterMap(ctx, from, fmt.Sprintf("map mode from source offset %d: the destination wrote the transaction marker at offset %d again %d time(s) "+
		"after it was replayed (its transaction coordinator failed over), so later offsets move by %d", from, dup.Marker, copies, copies), runs...); err != nil {
		return err
	}
	for _, b := range bs {
		r.d.Events.Appended(b, b.NextOffset()-b.BaseOffset())
	}
	r.advance(bs[len(bs)-1].NextOffset(), dup.End)
	return nil
}

// landed is the writer's report of a sent batch on the destination: the
// oldest of r.sent. The deliveries it completes are acknowledged.
func (r *Runner) landed(b batch.Batch, _ writer.Result) {
	if len(r.sent) > 0 {
		r.sent[0] = nil
		r.sent = r.sent[1:]
	}
	r.appended(b)
	for len(r.undone) > 0 && b.NextOffset() >= r.undone[0].end {
		r.d.Path.Done(r.topic, r.partition, r.undone[0].bytes)
		r.undone = r.undone[1:]
	}
}

// undoneDelivery is a delivery forwarded with appends still in flight: its
// bytes stay in the fetcher's buffer (and the daemon's budget) until the
// batches sent up to end have landed, for they alias the fetch response.
type undoneDelivery struct {
	end   int64
	bytes int
}

// delivered acknowledges delivery f to the fetcher once every batch of it is
// on the destination: at once when nothing is in flight, else when the last
// batch sent so far lands (landed).
func (r *Runner) delivered(f fetcher.Fetched) {
	if len(r.sent) == 0 {
		r.done(f)
		return
	}
	r.undone = append(r.undone, undoneDelivery{end: r.sendNext, bytes: f.Bytes()})
}

// dropSent forgets the batches sent and not reported landed, and
// acknowledges the deliveries waiting for them (the partition reads the
// destination again before it goes on).
func (r *Runner) dropSent() {
	clear(r.sent)
	r.sent = r.sent[:0]
	r.sendNext = -1
	for _, u := range r.undone {
		r.d.Path.Done(r.topic, r.partition, u.bytes)
	}
	r.undone = r.undone[:0]
}

// appended advances the partition past b, appended at its own offsets.
func (r *Runner) appended(b batch.Batch) {
	r.advance(b.NextOffset(), b.NextOffset())
	r.d.Events.Appended(b, b.NextOffset()-b.BaseOffset())
}

func (r *Runner) maybeDeleteAligned(ctx context.Context) error {
	if r.deleteTo == 0 || r.Next() < r.deleteTo {
		return nil
	}
	if err := r.deleteRecords(ctx, r.deleteTo); err != nil {
		return err
	}
	r.deleteTo = 0
	return r.state.Update(ctx, func(d *partition.Data) error {
		d.Alignment = nil
		return nil
	})
}

// switchToMap moves a preserve-mode partition to map mode at source offset
// next (== destination offset next), because batch b cannot land at its own
// offsets (a compaction gap).
func (r *Runner) switchToMap(ctx context.Context, next int64, b batch.Batch) error {
	return r.enterMap(ctx, next, fmt.Sprintf("map mode from source offset %d: the source batch at %d–%d has gaps (compaction), so offsets cannot be kept", next, b.BaseOffset(), b.LastOffset()))
}

// enterMap moves a preserve-mode partition to map mode at source offset
// next: source offsets before it are at their own offsets on the
// destination; reason says why the next ones cannot be. landed maps source
// offsets from next on that are on the destination already.
func (r *Runner) enterMap(ctx context.Context, next int64, reason string, landed ...offsetmap.Range) error {
	m := &offsetmap.Map{}
	if start := r.getLogStart(); next > start && start >= 0 {
		if err := m.AddRun(start, start, next-start); err != nil {
			return r.errorf("building the offset map: %w", err)
		}
	}
	for _, l := range landed {
		if err := m.AddRun(l.Source, l.Dest, l.Len); err != nil {
			return r.errorf("building the offset map: %w", err)
		}
	}
	r.omap, r.mode = m, partition.ModeMap
	if err := r.maps.Save(ctx, r.omap); err != nil {
		return err
	}
	if err := r.state.Update(ctx, func(d *partition.Data) error { d.Mode = partition.ModeMap; return nil }); err != nil {
		return r.errorf("recording map mode: %w", err)
	}
	r.note(reason)
	r.log.Warn("partition switches to map mode", "reason", reason)
	return nil
}

// forwardMapped appends b in map mode: dense batches as they are, batches
// with gaps re-encoded with consecutive offsets (records unchanged); the
// mapping is saved before the append (mapstore.Store.Append: O(1) amortised).
func (r *Runner) forwardMapped(ctx context.Context, b batch.Batch) error {
	out := b
	var recs []batch.Record // the data records appended (their mapping written ahead)
	if b.IsControl() {
		if _, err := batch.ControlRecord(b); errors.Is(err, batch.ErrNoControlRecord) {
			r.advance(b.NextOffset(), r.dstNext)
			return nil // compaction removed the marker's record: nothing to replay
		}
		if err := r.omap.Add(b.BaseOffset(), r.dstNext); err != nil {
			return r.errorf("offset map: %w", err)
		}
	} else {
		var err error
		recs, err = r.d.Path.MapRecords(ctx, r.topic, b)
		if err != nil {
			return r.errorf("%w", err) // a decoding bound's refusal stays non-retryable
		}
		// A batch holding the resume offset (a log start inside it, or a
		// copy restarting there): only the records from it on.
		if next := r.Next(); b.BaseOffset() < next {
			i := 0
			for i < len(recs) && recs[i].Offset < next {
				i++
			}
			recs = recs[i:]
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
		if !b.Dense() || b.BaseOffset() != recs[0].Offset || int64(len(recs)) != int64(b.LastOffsetDelta())+1 {
			out, err = reencode(b, recs, r.dstNext)
			if err != nil {
				return r.errorf("re-encoding source batch at %d: %w", b.BaseOffset(), err)
			}
		}
	}
	if err := r.maps.Append(ctx, r.omap); err != nil {
		return err
	}
	if err := r.dest.Append(ctx, out, r.dstNext); err != nil {
		var dup *writer.DuplicateMarkerError
		switch {
		case !errors.As(err, &dup):
			return err
		case len(dup.Shifted) > 0:
			return r.mappedAfterLateCopies(ctx, b, out, recs, dup)
		default:
			return r.markerDuplicated(ctx, b, dup)
		}
	}
	n := out.NextOffset() - out.BaseOffset()
	r.advance(b.NextOffset(), r.dstNext+n)
	r.d.Events.Appended(out, n)
	return nil
}

// mappedAfterLateCopies handles batch b of a map-mode partition, appended as
// out with the mapping of recs (or of the marker b) written ahead from
// dup.Expected, that landed later, after copies of a replayed marker the
// destination wrote once the marker's append had returned (dup.Shifted[0]).
// The mapping is corrected first (the records are on the destination,
// there); then fail stops the partition, and map goes on after them.
func (r *Runner) mappedAfterLateCopies(ctx context.Context, b, out batch.Batch, recs []batch.Record, dup *writer.DuplicateMarkerError) error {
	at := dup.Shifted[0].BaseOffset
	r.omap.TruncateDest(dup.Expected)
	if b.IsControl() { // a marker after the copies
		if err := r.omap.Add(b.BaseOffset(), at); err != nil {
			return r.errorf("offset map: %w", err)
		}
	}
	for i, rec := range recs {
		if err := r.omap.Add(rec.Offset, at+int64(i)); err != nil {
			return r.errorf("offset map: %w", err)
		}
	}
	if err := r.maps.Append(ctx, r.omap); err != nil {
		return err
	}
	if err := r.duplicateAction(dup); err != nil {
		return err
	}
	copies := at - dup.Expected
	reason := fmt.Sprintf("the destination wrote the transaction marker at offset %d again %d time(s) after it was replayed (its transaction coordinator failed over): "+
		"source offset %d on lands at destination offset %d, later offsets move by %d more", dup.Marker, copies, b.BaseOffset(), at, copies)
	r.note(reason)
	r.log.Warn("destination wrote a transaction marker again after it was replayed", "reason", reason)
	r.advance(b.NextOffset(), dup.End)
	r.d.Events.Appended(out, out.NextOffset()-out.BaseOffset())
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
// source log is no longer the one mirrored, and source batches in a message
// format kmirror cannot forward (v0/v1, which an old source can still hold),
// wait for an operator: no retry changes what the source log holds.
func (r *Runner) classify(err error) error {
	if isSourceLogChanged(err) {
		return partition.NonRetryable(r.errorf("%w", err))
	}
	if errors.Is(err, batch.ErrUnsupportedMagic) {
		return partition.NonRetryable(r.errorf("fetching from the source: %w; the source partition holds batches in message format v0/v1 "+
			"(written by Kafka before 0.11, or under the topic's message.format.version before 0.11), which kmirror does not convert and "+
			"Kafka 4 destinations cannot store: exclude the topic (mirror.topics.exclude) or rewrite it into a topic in format v2", err))
	}
	return r.errorf("fetching from the source: %w", err)
}

// stopPartition runs STOPPING: remove the fetcher, abort the destination
// transactions the partition holds open, record the last mirrored offset,
// then STOPPED.
// stopSourceTimeout bounds what STOPPING asks of the source, which may be
// gone (an unplanned failover): STOPPING must finish.
const stopSourceTimeout = 15 * time.Second

func (r *Runner) stopPartition(ctx context.Context) error {
	r.unsubscribe()
	// The writer learns the open transactions from the destination (after a
	// restart it knows none by itself), then aborts them.
	rep, err := r.resumeWriters(ctx)
	if err != nil {
		return err
	}
	var lb prove.Bounds
	if lb.DstStart, lb.DstEnd, err = r.offsets(ctx, false); err != nil {
		return r.errorf("reading the destination end offset: %w", err)
	}
	// The source may be gone (its topic deleted, or the cluster lost at an
	// unplanned failover): then nothing can be compared.
	sctx, cancel := context.WithTimeout(ctx, stopSourceTimeout)
	defer cancel()
	srcStart, srcEnd, srcErr := r.offsets(sctx, true)
	lb.SrcStart, lb.SrcEnd = srcStart, srcEnd
	next, stable, err := r.proof.Stop(ctx, sctx, rep, lb, srcErr == nil, r.Next())
	if err != nil {
		return err
	}
	r.setNext(next)
	if err := r.dest.AbortAll(ctx); err != nil {
		return err
	}
	_, dstEnd, err := r.offsets(ctx, false)
	if err != nil {
		return r.errorf("reading the destination end offset: %w", err)
	}
	last := next - 1
	// The checkpoint stays below the transactions just aborted: a start
	// compares them with what the source did.
	err = r.state.TransitionWith(ctx, partition.Stopped, fmt.Sprintf("stopped; last mirrored source offset %d, destination end %d", last, dstEnd), func(d *partition.Data) error {
		d.LastMirroredOffset = last
		d.Verified = &partition.Checkpoint{Dest: stable}
		return nil
	})
	if err == nil {
		r.d.Events.Stopped() // the read-only loop makes the topic writable once all its partitions stopped
	}
	return err
}

// advance records that the source is mirrored up to next (exclusive) and the
// destination up to dstNext.
func (r *Runner) advance(next, dstNext int64) {
	r.dstNext = dstNext
	r.mu.Lock()
	r.next, r.dstEnd = next, dstNext
	r.mu.Unlock()
}

func (r *Runner) setNext(next int64) {
	r.mu.Lock()
	r.next = next
	r.mu.Unlock()
}

func (r *Runner) Next() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

func (r *Runner) getLogStart() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srcLS
}

func (r *Runner) setOffsets(srcStart, srcEnd, dstEnd int64) {
	r.mu.Lock()
	r.srcLS, r.srcHW, r.dstEnd = srcStart, srcEnd, dstEnd
	r.mu.Unlock()
}

func (r *Runner) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.notes {
		if n == s {
			return
		}
	}
	r.notes = append(r.notes, s)
}

// Status returns the partition's status for describe and the admin API.
func (r *Runner) Status() Status {
	rec := r.state.Record()
	r.mu.Lock()
	defer r.mu.Unlock()
	st := Status{
		Mirror: r.d.Mirror, Topic: r.topic, Partition: r.partition, State: rec.State.String(), Mode: string(rec.Mode),
		SourceHighWatermark: r.srcHW, SourceLogStart: r.srcLS, DestinationEndOffset: r.dstEnd, Lag: -1,
		LastMirroredOffset: rec.LastMirroredOffset, UpdatedAt: rec.UpdatedAt, Notes: append([]string(nil), r.notes...),
	}
	if r.next >= 0 {
		st.LastMirroredOffset = r.next - 1
		if r.srcHW >= 0 {
			st.Lag = max(r.srcHW-r.next, 0)
		}
	}
	if r.waitErr != "" && (rec.State == partition.Mirroring || rec.State == partition.Preparing) {
		st.LastError = fmt.Sprintf("destination appends retrying since %s: %s", r.waitSince.UTC().Format(time.RFC3339), r.waitErr)
	}
	if rec.State == partition.Failed {
		st.LastError = rec.Reason
		if rec.NeedsOperator() {
			st.Retry = "NonRetryable"
		} else {
			st.Retry = fmt.Sprintf("%d/%d", rec.Attempts, r.d.Settings.MaxAttempts)
		}
	}
	return st
}

// retrying is the destination writer's OnRetry hook: it keeps the error the
// partition's appends are retried on, shown by Status until the retried
// append ends (err nil: landed, gave up, cancelled) or the partition fails.
func (r *Runner) retrying(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.waitErr = ""
	case r.waitErr == "":
		r.waitErr, r.waitSince = err.Error(), time.Now()
	default:
		r.waitErr = err.Error()
	}
}

// retryPolicy paces the runner's retries of its own steps (a state store
// write or an operator request that failed): from one second, doubling up
// to thirty, with full jitter, so that many partitions failing together on
// one store do not retry in step.
var retryPolicy = backoff.Exponential(time.Second, 30*time.Second)

// backoff waits before the runner retries a step that failed; the wait
// grows while failures follow each other (Run resets it on progress).
func (r *Runner) backoff(ctx context.Context) {
	if r.retry == nil {
		r.retry = retryPolicy.Start()
	}
	_ = r.retry.Sleep(ctx)
}

// TopicIDString prints a topic id as a UUID, as the fetcher's errors do.
func TopicIDString(id [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}

// Topic returns the source topic's name.
func (r *Runner) Topic() string { return r.topic }

// Partition returns the partition number.
func (r *Runner) Partition() int32 { return r.partition }

// Record returns the partition's state record as last persisted.
func (r *Runner) Record() partition.Record { return r.state.Record() }

// OffsetMap returns the offset map the runner loaded or wrote last (map
// mode), nil when it has none in this process. A Map is safe for
// concurrent reads.
func (r *Runner) OffsetMap() *offsetmap.Map { return r.maps.Current() }

// DestinationEnd returns the destination's end offset as last appended or
// read; -1 when unknown.
func (r *Runner) DestinationEnd() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dstEnd
}

// Forget deletes what the state store holds of a FAILED partition, for an
// operator's reset: its offset map, then its record, so that the mirror
// starts it again as a new partition (from the source's log start, into an
// empty destination partition). Call it only once Run has returned: the
// runner is done with the partition.
func (r *Runner) Forget(ctx context.Context) error {
	if st := r.state.State(); st != partition.Failed {
		return r.errorf("reset in state %v: only FAILED partitions are reset", st)
	}
	if pw := r.dest.Take(); pw != nil {
		r.dropSent()
		pw.Close() // the partition's next runner opens its own
	}
	r.unsubscribe()
	if err := offsetmap.Delete(ctx, r.d.Store, r.d.Mirror, r.topic, r.partition); err != nil {
		return r.errorf("reset: %w", err)
	}
	if err := r.state.Delete(ctx); err != nil {
		return r.errorf("reset: %w", err)
	}
	return nil
}

// TopicID returns the id of the source topic the partition mirrors.
func (r *Runner) TopicID() [16]byte { return r.topicID }
