package prove

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kafkalog"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner/destination"
	"github.com/kmirror/kmirror/core/runner/mapstore"
	"github.com/kmirror/kmirror/core/writer"
)

// Partition is one partition as proving its destination sees it: what it
// reads (the two logs, their bounds, the record, the offset map) and where
// it records what it decides (the record, the offset map, the destination
// writer's open transactions). The runner builds one; nothing in it points
// back at the runner.
type Partition struct {
	Mirror    string
	Topic     string
	Partition int32
	// State is the partition's state machine record; Maps its offset map's
	// durable copy; Writer its destination writer.
	State  *partition.Partition
	Maps   *mapstore.Store
	Writer *destination.Writer
	// Source and Dest are the clusters' clients the logs are read raw from.
	Source, Dest *kgo.Client
	// SourceLeaders and DestLeaders, when set, gather the leader lookups
	// of the mirror's partitions reading their logs at once (a stop of
	// 10,000 partitions); nil: one Metadata request per lookup.
	SourceLeaders, DestLeaders *kafkalog.LeaderBatcher
	// SourceBounds and DestBounds read the partition's log start and end
	// offsets on each cluster.
	SourceBounds, DestBounds func(ctx context.Context) (start, end int64, err error)
	// Action is mirror.destination.mismatch.action; Mismatch counts a
	// difference found and the action taken.
	Action   string
	Mismatch func(action string)
	Log      hclog.Logger

	// Checkpointed is when the partition's checkpoint was last recorded
	// (Checkpoint).
	Checkpointed time.Time
}

// Recopied is where a partition continues after a decision to copy again
// (map mode) was carried out: the offset map, the source offset the copy
// starts from, the destination's end where it lands, and the note for
// the partition's status.
type Recopied struct {
	Map        *offsetmap.Map
	SourceFrom int64
	DestEnd    int64
	Note       string
}

// errorf builds an error that names the mirror, topic and partition.
func (p *Partition) errorf(format string, args ...any) error {
	return fmt.Errorf("mirror %s: topic %s partition %d: %w", p.Mirror, p.Topic, p.Partition, fmt.Errorf(format, args...))
}

// ReadBounds reads the partition's log bounds on both clusters, the two at
// once.
func (p *Partition) ReadBounds(ctx context.Context) (Bounds, error) {
	var lb Bounds
	var srcErr error
	done := make(chan struct{})
	go func() { // owned by ReadBounds, which waits for it
		defer close(done)
		lb.SrcStart, lb.SrcEnd, srcErr = p.SourceBounds(ctx)
	}()
	var dstErr error
	lb.DstStart, lb.DstEnd, dstErr = p.DestBounds(ctx)
	<-done
	if srcErr != nil {
		return lb, p.errorf("reading source offsets: %w", srcErr)
	}
	if dstErr != nil {
		return lb, p.errorf("reading destination offsets: %w", dstErr)
	}
	return lb, nil
}

// Prove runs before the partition continues: it completes a recopy decided
// before a crash, or compares the destination with the source from the
// partition's checkpoint to the destination's end. It returns where the
// partition continues when it copies again (map mode); nil when the
// destination is proven and the caller resumes as usual.
//
// Writers the destination no longer holds as recorded (rep.Lost) are not
// taken as proof of a loss: a crash between InitProducerId and the record of
// its new epoch leaves the same trace. Only the log decides: an ABORT marker
// where the source has something else, or a record that is not the
// source's.
func (p *Partition) Prove(ctx context.Context, rep writer.ResumeReport, lb Bounds) (*Recopied, error) {
	rec := p.State.Record()
	if rec.Recopy != nil {
		rc := *rec.Recopy
		m, err := p.Maps.Load(ctx)
		if err != nil {
			return nil, err
		}
		m.TruncateDest(lb.DstEnd)
		if m.DestNext() <= rc.DestFrom {
			// Nothing appended since the decision: complete it.
			if err := p.DropLost(ctx, rep.Lost); err != nil {
				return nil, err
			}
			return p.applyRecopy(ctx, m, rc)
		}
		if err := p.State.Update(ctx, func(d *partition.Data) error { d.Recopy = nil; return nil }); err != nil {
			return nil, p.errorf("clearing the completed recovery: %w", err)
		}
		rec = p.State.Record()
	}
	diff, err := p.CheckTail(ctx, rec, lb)
	if err != nil {
		return nil, err
	}
	if diff == nil {
		if len(rep.Lost) > 0 {
			// The coordinator holds another epoch for these writers, but the
			// log shows nothing of theirs that differs from the source:
			// kmirror re-initialised them and stopped before recording the
			// new epoch. Nothing was lost; their next transaction
			// initialises them again.
			p.Log.Info("recorded transactional writers moved on without a trace in the log: nothing lost, they are initialised again",
				"writers", len(rep.Lost))
			if err := p.DropLost(ctx, rep.Lost); err != nil {
				return nil, err
			}
		}
		return nil, p.Checkpoint(ctx, StablePoint(rep, lb.DstEnd))
	}
	action := Action(p.Action)
	p.Mismatch(action)
	if action == config.MismatchFail {
		err := partition.NonRetryable(p.errorf("the destination is not the source's copy from destination offset %d on: %s; mirror.destination.mismatch.action is fail, so the partition waits. "+
			"To copy the source again in map mode after the destination's end (offset %d), set mirror.destination.mismatch.action: map and run `kmirror mirrors start --mirror %s --topics '%s'`; "+
			"or delete and recreate the destination topic", diff.At, diff.What, lb.DstEnd, p.Mirror, regexp.QuoteMeta(p.Topic)))
		p.Log.Error("destination differs from the source", "from", diff.At, "what", diff.What, "action", action)
		return nil, err
	}
	return p.recopy(ctx, rep, lb, diff)
}

// Checkpoint records the partition's checkpoint (no write when unchanged).
func (p *Partition) Checkpoint(ctx context.Context, dest int64) error {
	if v := p.State.Record().Verified; v != nil && v.Dest == dest {
		return nil
	}
	if err := p.State.Update(ctx, func(d *partition.Data) error { d.Verified = &partition.Checkpoint{Dest: dest}; return nil }); err != nil {
		return p.errorf("recording the checkpoint %d: %w", dest, err)
	}
	p.Checkpointed = time.Now()
	return nil
}

// MaybeCheckpoint records the checkpoint of a mirroring partition whose
// destination ends at dstNext when the last one is older than
// CheckpointEvery: the destination end, or the start of the earliest
// transaction the partition holds open. It runs after every delivery and
// writes to the state store at most once per CheckpointEvery; a checkpoint
// found unchanged (deliveries of watermarks only) waits CheckpointEvery too
// before it is looked at again.
func (p *Partition) MaybeCheckpoint(ctx context.Context, dstNext int64) error {
	if time.Since(p.Checkpointed) < CheckpointEvery {
		return nil
	}
	pw, err := p.Writer.Partition()
	if err != nil {
		return p.errorf("%w", err)
	}
	at := dstNext
	for _, t := range pw.OpenTransactions() {
		if t.StartOffset >= 0 && t.StartOffset < at {
			at = t.StartOffset
		}
	}
	if err := p.Checkpoint(ctx, at); err != nil {
		return err
	}
	p.Checkpointed = time.Now()
	return nil
}

// CheckTail compares the destination with the source from the checkpoint
// to the destination's end (Tail); nil when it is the source's copy.
func (p *Partition) CheckTail(ctx context.Context, rec partition.Record, lb Bounds) (*Difference, error) {
	if from, _ := CheckStart(rec, lb); from >= lb.DstEnd {
		return nil, nil
	}
	var m *offsetmap.Map
	if rec.Mode == partition.ModeMap {
		var err error
		if m, err = p.Maps.Load(ctx); err != nil {
			return nil, err
		}
		m.TruncateDest(lb.DstEnd)
	}
	diff, from, err := Tail(ctx, rec, lb, m, func(off int64) BatchReader {
		return kafkalog.NewReader(p.Source, p.Topic, p.Partition, off, lb.SrcEnd).WithLeaders(p.SourceLeaders)
	}, func(off int64) BatchReader {
		return kafkalog.NewReader(p.Dest, p.Topic, p.Partition, off, lb.DstEnd).WithLeaders(p.DestLeaders)
	})
	if err != nil {
		return nil, p.errorf("%w", err)
	}
	if diff != nil {
		p.Log.Warn("the destination is not the source's copy", "from", diff.At, "batch", diff.Batch, "what", diff.What, "checked_from", from)
	}
	return diff, nil
}

// recopy decides to copy the source again from the difference on (map
// mode, Recopy), records the decision, then applies it.
func (p *Partition) recopy(ctx context.Context, rep writer.ResumeReport, lb Bounds, diff *Difference) (*Recopied, error) {
	rec := p.State.Record()
	var m *offsetmap.Map
	if rec.Mode == partition.ModeMap {
		var err error
		if m, err = p.Maps.Load(ctx); err != nil {
			return nil, err
		}
	}
	m, rc, err := Recopy(rec.Mode, m, lb, rep, diff)
	if err != nil {
		return nil, p.errorf("%w", err)
	}
	if err := p.Maps.Save(ctx, m); err != nil {
		return nil, err
	}
	err = p.State.Update(ctx, func(d *partition.Data) error {
		d.Mode = partition.ModeMap
		ForgetLost(d, rep.Lost)
		d.Recopy = &rc
		return nil
	})
	if err != nil {
		return nil, p.errorf("recording the decision to copy again from destination offset %d: %w", rc.DestFrom, err)
	}
	return p.applyRecopy(ctx, m, rc)
}

// applyRecopy carries out a recorded decision: abort what is still open
// (idempotent), then continue after the destination's end.
func (p *Partition) applyRecopy(ctx context.Context, m *offsetmap.Map, rc partition.Recopy) (*Recopied, error) {
	if err := p.Writer.AbortAll(ctx); err != nil {
		return nil, err
	}
	_, end, err := p.DestBounds(ctx)
	if err != nil {
		return nil, p.errorf("reading destination offsets: %w", err)
	}
	// The first copy, from DestFrom to end, is never compared again.
	if err := p.Checkpoint(ctx, end); err != nil {
		return nil, err
	}
	reason, msg, why := RecopyNote(rc, end)
	p.Log.Warn(msg, "source_from", rc.SourceFrom, "destination_from", end, "earlier_copy_from", rc.DestFrom, "why", why)
	return &Recopied{Map: m, SourceFrom: rc.SourceFrom, DestEnd: end, Note: reason}, nil
}

// DropLost forgets lost writers whose transactions need no recovery.
func (p *Partition) DropLost(ctx context.Context, lost []writer.LostWriter) error {
	if len(lost) == 0 {
		return nil
	}
	if err := p.State.Update(ctx, func(d *partition.Data) error { ForgetLost(d, lost); return nil }); err != nil {
		return p.errorf("forgetting lost destination transactional writers: %w", err)
	}
	return nil
}

// Stop is where a stop leaves the partition, whose destination writer
// resumed with rep and whose bounds are lb (srcOK false: the source could
// not be read, and nothing is compared): the next source offset (from next,
// the runner's; -1 unknown) and the checkpoint (StopPoint). Lost writers are
// forgotten when the destination is the source's copy. sctx bounds what it
// asks of the source, which may be gone.
func (p *Partition) Stop(ctx, sctx context.Context, rep writer.ResumeReport, lb Bounds, srcOK bool, next int64) (int64, int64, error) {
	rec := p.State.Record()
	// Where did mirroring stop? Below any difference from the source (a
	// transaction the destination aborted on its own was not mirrored); the
	// start that follows decides what to do about the difference.
	var m *offsetmap.Map
	if rec.Mode == partition.ModeMap {
		var err error
		if m, err = p.Maps.Load(ctx); err != nil {
			return 0, 0, err
		}
		m.TruncateDest(lb.DstEnd)
	}
	stable := StablePoint(rep, lb.DstEnd)
	var diff *Difference
	if rec.Mode != partition.ModeUndecided && srcOK {
		var err error
		if diff, err = p.CheckTail(sctx, rec, lb); err != nil {
			p.Log.Warn("cannot compare the destination with the source while stopping", "error", err)
			diff = nil
		}
	}
	next, stable = StopPoint(next, m, lb.DstEnd, stable, diff)
	if diff == nil {
		if err := p.DropLost(ctx, rep.Lost); err != nil {
			return 0, 0, err
		}
	}
	return next, stable, nil
}
