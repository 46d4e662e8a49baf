// Package failback decides, per partition, how a reverse mirror (a
// failback) continues after a failover: at the last mirrored offset, after
// keeping the old source's diverged committed records in a side topic, or
// from scratch once the topic is recreated on the old source. It also
// finds the failed-over topics a failback takes back and builds the
// reverse mirror's configuration. core/mirror runs the reverse mirror;
// docs/design/failover.md has the rules.
//
// After a failover of mirror M (source A → destination B), B is
// the primary and takes writes. Failback starts the reverse mirror
// "<M>-failback" from B to A for M's failed-over topics, so that A catches
// up with what was written to B, offsets preserved, and can become the
// primary again (fail the reverse mirror over, then start M's topics).
//
// Per partition, with L the last source offset M mirrored:
//   - A ends at L+1: the reverse mirror continues from there (preserve
//     mode), copying only what B got after the failover;
//   - A holds records beyond L+1 (written to A but never mirrored, as in an
//     unplanned failover): the committed ones are first copied to a side
//     topic on A (<topic>.kmirror-diverged by default) so nothing is lost;
//     then, with AllowRecreate, the topic is deleted on A and mirrored back
//     from B from scratch (offsets preserved); without it, the partition is
//     FAILED with a reason that says so;
//   - A ends before L+1 (it lost records), or M ran the partition in map
//     mode (offsets differ between the clusters): like divergence, only
//     AllowRecreate realigns it.
//
// The reverse mirror is a run-time mirror (core/runtimemirror): it is recorded in the state
// store (no secret: its clusters are the daemon's destination and M's
// source, read from the configuration at start) and survives restarts.
package failback

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/kafkalog"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Topic is what failback did with one topic.
type Topic struct {
	Topic      string      `json:"topic"`
	Recreated  bool        `json:"recreated,omitempty"`
	Partitions []Partition `json:"partitions"`
}

// Failback actions of a partition.
const (
	Continue  = "continue"  // the old source ends at the last mirrored offset: copying resumes there
	Recreated = "recreated" // the topic was recreated on the old source: copied from scratch
	Failed    = "failed"    // needs --allow-recreate (see Reason)
)

// Partition is what failback did with one partition.
type Partition struct {
	Partition int32  `json:"partition"`
	Action    string `json:"action"`
	// From is the offset the reverse mirror continues from (continue).
	From int64 `json:"from"`
	// Diverged counts the committed records of the old source beyond the
	// last mirrored offset, copied to SideTopic.
	Diverged  int64  `json:"diverged"`
	SideTopic string `json:"side_topic,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// divergedState is the copy of the old source's diverged records to the
// side topic, kept in a reverse mirror's partition record.
type divergedState = partition.Diverged

// Stopped is a failed-over partition and where its mirror stopped.
type Stopped struct {
	Partition int32
	// Last is the last source offset the forward mirror copied.
	Last int64
	Mode partition.Mode
}

// Params are what a topic's failback needs.
type Params struct {
	Machine *partition.Machine // the reverse mirror's partition records
	Mirror  string             // the mirror failed back (the forward one)
	Reverse string             // the reverse mirror
	// NewPrimary is the forward mirror's destination: the reverse mirror's
	// source.
	NewPrimary *kgo.Client
	// Old and OldAdmin are the old source: the reverse mirror's
	// destination.
	Old           *kgo.Client
	OldAdmin      *kadm.Client
	SideSuffix    string // names the side topics of diverged records
	AllowRecreate bool   // recreate a topic that cannot continue
	// DryRun decides without acting: no partition record is created or
	// changed, no side topic is created or written, no topic is deleted.
	// The decisions are those a real run would take now: a side copy not
	// made yet counts the committed records it would copy.
	DryRun bool
}

// DecideTopic decides (or completes) the reverse mirror's partitions of one
// topic: continue at the last mirrored offset, keep diverged records in a
// side topic and fail, or recreate the topic on the old source.
func DecideTopic(ctx context.Context, pr Params, topic string, parts []Stopped) (Topic, error) {
	tf := Topic{Topic: topic}
	ends, err := pr.OldAdmin.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return tf, fmt.Errorf("mirror %s: reading the end offsets of %s on the old source: %w", pr.Mirror, topic, err)
	}
	recreate := false
	decisions := make([]Partition, 0, len(parts))
	records := make([]*partition.Partition, 0, len(parts))
	for _, sp := range parts {
		pf := Partition{Partition: sp.Partition, From: -1}
		rp, created, err := loadReverse(ctx, pr, topic, sp.Partition)
		if err != nil {
			return tf, fmt.Errorf("mirror %s: topic %s partition %d: %w", pr.Reverse, topic, sp.Partition, err)
		}
		records = append(records, rp)
		var rec partition.Record
		if rp != nil {
			rec = rp.Record()
		} else {
			rec.State = partition.Preparing // what a real run creates
		}
		if rec.Recreated && rec.State != partition.Failed {
			pf.Action = Recreated
			decisions = append(decisions, pf)
			continue
		}
		if !created && rec.State != partition.Failed && rec.State != partition.Preparing {
			// Decided and running (or done) before: keep it.
			pf.Action = Continue
			if rec.Mode == partition.ModeUndecided {
				pf.Action = Recreated
			}
			decisions = append(decisions, pf)
			continue
		}
		o, _ := ends.Lookup(topic, sp.Partition)
		endA := o.Offset
		var ds divergedState
		hadDiverged := rec.Diverged != nil
		if hadDiverged {
			ds = *rec.Diverged
		}
		switch {
		case hadDiverged && ds.Copied:
			pf.Diverged, pf.SideTopic = ds.Records, ds.SideTopic
			pf.Action, pf.Reason = Failed, divergedReason(pr.Mirror, topic, sp.Partition, ds)
		case sp.Mode == partition.ModeMap:
			pf.Action, pf.Reason = Failed, fmt.Sprintf("mirror %s ran %s/%d in map mode, so offsets differ between the clusters and cannot continue offset for offset; "+
				"kmirror failback --allow-recreate rebuilds the topic on the old source from the new primary", pr.Mirror, topic, sp.Partition)
		case endA == sp.Last+1:
			pf.Action, pf.From = Continue, endA
		case endA < sp.Last+1:
			pf.Action, pf.Reason = Failed, fmt.Sprintf("the old source's %s/%d ends at offset %d, before the last mirrored offset %d: it lost records; "+
				"kmirror failback --allow-recreate rebuilds the topic on the old source from the new primary", topic, sp.Partition, endA, sp.Last)
		case abortsOnly(ctx, pr.Old, topic, sp.Partition, sp.Last+1, endA) && abortsOnly(ctx, pr.NewPrimary, topic, sp.Partition, sp.Last+1, endA):
			// Both logs hold only ABORT markers from the last mirrored offset
			// to the old source's end: the transactions open at the
			// failover, aborted on the new primary by the failover and on the
			// old source by its coordinator. The logs agree, offset for
			// offset and in what a read_committed consumer sees.
			pf.Action, pf.From = Continue, endA
		case pr.DryRun: // diverged: a real run copies A's extra records to the side topic
			recs, err := committedRecords(ctx, pr.Old, topic, sp.Partition, sp.Last+1, endA)
			if err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: reading the old source's records beyond the last mirrored offset: %w", pr.Reverse, topic, sp.Partition, err)
			}
			ds = divergedState{From: sp.Last + 1, To: endA, SideTopic: topic + pr.SideSuffix, Records: int64(len(recs))}
			pf.Diverged, pf.SideTopic = ds.Records, ds.SideTopic
			pf.Action, pf.Reason = Failed, divergedReason(pr.Mirror, topic, sp.Partition, ds)
		default: // diverged: keep A's extra records in the side topic first
			ds, err = copyDiverged(ctx, pr, rp, topic, sp.Partition, sp.Last+1, endA, topic+pr.SideSuffix)
			if err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: copying the old source's records beyond the last mirrored offset to %s: %w", pr.Reverse, topic, sp.Partition, topic+pr.SideSuffix, err)
			}
			pf.Diverged, pf.SideTopic = ds.Records, ds.SideTopic
			pf.Action, pf.Reason = Failed, divergedReason(pr.Mirror, topic, sp.Partition, ds)
		}
		if pf.Action == Failed {
			recreate = true
		}
		decisions = append(decisions, pf)
	}
	if pr.DryRun {
		if recreate && pr.AllowRecreate {
			tf.Recreated = true
			for i := range decisions {
				decisions[i].Action, decisions[i].Reason, decisions[i].From = Recreated, "", 0
			}
		}
		tf.Partitions = decisions
		return tf, nil
	}
	if recreate && pr.AllowRecreate {
		if err := recreateOnOldSource(ctx, pr.OldAdmin, topic); err != nil {
			return tf, fmt.Errorf("mirror %s: recreating %s on the old source: %w", pr.Reverse, topic, err)
		}
		tf.Recreated = true
		for i, rp := range records {
			if err := resetForCopy(ctx, rp); err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: %w", pr.Reverse, topic, rp.Record().Partition, err)
			}
			decisions[i].Action, decisions[i].Reason, decisions[i].From = Recreated, "", 0
		}
		tf.Partitions = decisions
		return tf, nil
	}
	for i, rp := range records {
		pf := decisions[i]
		rec := rp.Record()
		if pf.Action == Continue && rec.State == partition.Failed {
			// Failed earlier (for example by a transaction left open on
			// the old source); the old source now ends where it should.
			if err := rp.Reset(ctx, "failback repeated: the old source ends at the last mirrored offset"); err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: %w", pr.Reverse, topic, pf.Partition, err)
			}
			rec = rp.Record()
		}
		switch {
		case pf.Action == Continue && rec.State == partition.Preparing && rec.Mode != partition.ModePreserve:
			if err := rp.Update(ctx, func(d *partition.Data) error {
				d.Mode = partition.ModePreserve
				d.LastMirroredOffset = pf.From - 1
				// The reverse mirror proves the old source from the forward
				// mirror's last mirrored offset on before it continues.
				d.Verified = &partition.Checkpoint{Dest: min(parts[i].Last+1, pf.From)}
				return nil
			}); err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: recording the resume point: %w", pr.Reverse, topic, pf.Partition, err)
			}
		case pf.Action == Failed && rec.State != partition.Failed:
			if err := rp.Fail(ctx, partition.NonRetryable(errors.New(pf.Reason))); err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: %w", pr.Reverse, topic, pf.Partition, err)
			}
		}
	}
	tf.Partitions = decisions
	return tf, nil
}

// loadReverse loads the reverse mirror's partition, or creates it (in a
// dry run: reports it missing, rp nil and created true).
func loadReverse(ctx context.Context, pr Params, topic string, p int32) (rp *partition.Partition, created bool, err error) {
	if !pr.DryRun {
		return pr.Machine.LoadOrCreate(ctx, pr.Reverse, topic, p, "failback of mirror "+pr.Mirror)
	}
	rp, err = pr.Machine.Load(ctx, pr.Reverse, topic, p)
	if errors.Is(err, statestore.ErrNotFound) {
		return nil, true, nil
	}
	return rp, false, err
}

// abortsOnly reports whether topic/p on the cluster behind cl holds only
// ABORT markers in [from, to) (false on any error: then the partition is
// taken as diverged, which loses nothing).
func abortsOnly(ctx context.Context, cl *kgo.Client, topic string, p int32, from, to int64) bool {
	only := true
	err := kafkalog.Scan(ctx, cl, topic, p, from, to, func(b batch.Batch) error {
		if !b.IsControl() {
			only = false
			return nil
		}
		if t, err := batch.ControlRecord(b); err != nil || t != batch.ControlAbort {
			only = false
		}
		return nil
	})
	return err == nil && only
}

func divergedReason(mirror, topic string, p int32, ds divergedState) string {
	return fmt.Sprintf("the old source's %s/%d holds offsets %d to %d beyond the last mirrored offset (written there but never mirrored); "+
		"its %d committed records were copied to %s partition %d; run kmirror failback --mirror %s --allow-recreate to recreate %s on the old source and mirror it back with offsets preserved",
		topic, p, ds.From, ds.To-1, ds.Records, ds.SideTopic, p, mirror, topic)
}

// copyDiverged copies the committed records of topic/p on the old source
// in [from, to) to the same partition of side, once: the copy is recorded
// in the reverse partition's record, and a copy interrupted by a crash is
// recognised by the side partition's end offset.
func copyDiverged(ctx context.Context, pr Params, rp *partition.Partition, topic string, p int32, from, to int64, side string) (divergedState, error) {
	var ds divergedState
	ok := rp.Record().Diverged != nil
	if ok {
		ds = *rp.Record().Diverged
	}
	if ok && ds.Copied {
		return ds, nil
	}
	recs, err := committedRecords(ctx, pr.Old, topic, p, from, to)
	if err != nil {
		return ds, err
	}
	details, err := pr.OldAdmin.ListTopics(ctx, topic)
	if err != nil {
		return ds, err
	}
	partitions := int32(len(details[topic].Partitions))
	if _, err := pr.OldAdmin.CreateTopic(ctx, partitions, -1, nil, side); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return ds, fmt.Errorf("creating side topic %s: %w", side, err)
	}
	sideEnd, err := waitEndOffset(ctx, pr.OldAdmin, side, p)
	if err != nil {
		return ds, err
	}
	if !ok {
		ds = divergedState{From: from, To: to, SideTopic: side, SideStart: sideEnd, Records: int64(len(recs))}
		if err := rp.Update(ctx, func(d *partition.Data) error { d.Diverged = &ds; return nil }); err != nil {
			return ds, err
		}
	}
	// A previous copy that committed before a crash left its records (and
	// its COMMIT marker) in the side partition.
	if sideEnd < ds.SideStart+ds.Records+1 && len(recs) > 0 {
		if err := produceSide(ctx, pr.Old, side, p, recs, rp.Record().Mirror); err != nil {
			return ds, err
		}
	}
	ds.Copied = true
	if err := rp.Update(ctx, func(d *partition.Data) error { d.Diverged = &ds; return nil }); err != nil {
		return ds, err
	}
	return ds, nil
}

// committedRecords returns the records of topic/p in [from, to) that a
// read_committed consumer sees (plain records, and transactional ones whose
// COMMIT marker lies in the range), each with its offset in a header.
func committedRecords(ctx context.Context, cl *kgo.Client, topic string, p int32, from, to int64) ([]*kgo.Record, error) {
	type entry struct {
		rec     *kgo.Record
		visible bool
	}
	var all []*entry
	open := map[int64][]*entry{}
	err := kafkalog.Scan(ctx, cl, topic, p, from, to, func(b batch.Batch) error {
		if b.IsControl() {
			t, err := batch.ControlRecord(b)
			if err != nil {
				return err
			}
			for _, en := range open[b.ProducerID()] {
				en.visible = t == batch.ControlCommit
			}
			delete(open, b.ProducerID())
			return nil
		}
		recs, err := b.Records()
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.Offset < from || r.Offset >= to {
				continue
			}
			kr := &kgo.Record{Topic: "", Partition: p, Key: r.Key, Value: r.Value, Timestamp: time.UnixMilli(r.Timestamp)}
			for _, h := range r.Headers {
				kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: "kmirror.diverged.offset", Value: fmt.Appendf(nil, "%d", r.Offset)})
			en := &entry{rec: kr, visible: !b.IsTransactional()}
			if b.IsTransactional() {
				open[b.ProducerID()] = append(open[b.ProducerID()], en)
			}
			all = append(all, en)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []*kgo.Record
	for _, en := range all {
		if en.visible {
			out = append(out, en.rec)
		}
	}
	return out, nil
}

// produceSide writes recs to side/p in one transaction.
func produceSide(ctx context.Context, old *kgo.Client, side string, p int32, recs []*kgo.Record, mirror string) error {
	opts := old.Opts()
	opts = append(opts, kgo.TransactionalID(fmt.Sprintf("kmirror-%s-side-%s-%d", mirror, side, p)), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(side))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for _, r := range recs {
		r.Topic, r.Partition = side, p
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		_ = cl.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort)
		return err
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}

func waitEndOffset(ctx context.Context, adm *kadm.Client, topic string, p int32) (int64, error) {
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			if o, ok := ends.Lookup(topic, p); ok && o.Err == nil {
				return o.Offset, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("reading the end offset of %s/%d: %w", topic, p, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// recreateOnOldSource deletes topic on the old source and waits until it is
// gone; the reverse mirror's topic sync creates it again with the new
// primary's partition count and configs.
func recreateOnOldSource(ctx context.Context, adm *kadm.Client, topic string) error {
	resp, err := adm.DeleteTopics(ctx, topic)
	if err == nil {
		if r, ok := resp[topic]; ok && r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			err = r.Err
		}
	}
	if err != nil {
		return err
	}
	for {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil && !details.Has(topic) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the deletion of %s: %w", topic, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// resetForCopy makes a reverse partition copy its topic from scratch.
func resetForCopy(ctx context.Context, rp *partition.Partition) error {
	rec := rp.Record()
	if rec.State == partition.Failed || rec.State == partition.Stopped {
		if err := rp.Reset(ctx, "the topic was recreated on the old source (failback --allow-recreate)"); err != nil {
			return err
		}
	}
	return rp.Update(ctx, func(d *partition.Data) error {
		// Everything but the diverged copy (kept for the record) starts
		// afresh.
		*d = partition.Data{LastMirroredOffset: -1, Diverged: d.Diverged, Recreated: true}
		return nil
	})
}
