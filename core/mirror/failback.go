package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kafkalog"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Failback: after a failover of mirror M (source A → destination B), B is
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
// The reverse mirror is a run-time mirror: it is recorded in the state
// store (no secret: its clusters are the daemon's destination and M's
// source, read from the configuration at start) and survives restarts.

// FailbackRequest asks to fail a failed-over mirror back.
type FailbackRequest struct {
	Mirror string `json:"mirror"`
	// AllowRecreate lets failback delete and recreate, on the old source,
	// a topic whose partitions cannot continue offset for offset.
	AllowRecreate bool `json:"allow_recreate"`
	// SideTopicSuffix names the side topics that keep records the old
	// source holds beyond the last mirrored offset; default
	// ".kmirror-diverged".
	SideTopicSuffix string `json:"side_topic_suffix,omitempty"`
}

// FailbackResult says what failback did per partition.
type FailbackResult struct {
	// Mirror is the reverse mirror's name.
	Mirror string `json:"mirror"`
	// Of is the mirror it reverses.
	Of     string          `json:"of"`
	Topics []TopicFailback `json:"topics"`
}

// TopicFailback is one topic of a failback.
type TopicFailback struct {
	Topic      string              `json:"topic"`
	Recreated  bool                `json:"recreated,omitempty"`
	Partitions []PartitionFailback `json:"partitions"`
}

// Failback actions of a partition.
const (
	FailbackContinue  = "continue"  // the old source ends at the last mirrored offset: copying resumes there
	FailbackRecreated = "recreated" // the topic was recreated on the old source: copied from scratch
	FailbackFailed    = "failed"    // needs --allow-recreate (see Reason)
)

// PartitionFailback is what failback did with one partition.
type PartitionFailback struct {
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

// runtimeSpec is a mirror created at run time, kept in the state store:
// either a failback mirror (FailbackOf, Topics) or one an operator created
// (Config). It never holds a secret.
type runtimeSpec struct {
	// FailbackOf names the mirror this one reverses.
	FailbackOf string `json:"failback_of,omitempty"`
	// Topics are the topics it mirrors back (exact names).
	Topics []string `json:"topics,omitempty"`
	// Config holds an operator-created mirror's settings (YAML, the keys
	// of one entry of mirrors:, secrets only as file references).
	Config string `json:"config,omitempty"`
}

// divergedState is the copy of the old source's diverged records to the
// side topic, kept in a reverse mirror's partition record.
type divergedState = partition.Diverged

const defaultSideSuffix = ".kmirror-diverged"

func failbackName(m string) string { return m + "-failback" }

func specKey(mirror string) string { return statestore.MirrorPrefix(mirror) + "spec" }

// reverseConfig builds the reverse mirror's configuration from the mirror
// it reverses: source = the daemon's destination, destination = its source.
func reverseConfig(dcfg *config.Config, of config.Mirror, name string, topics []string) (config.Mirror, error) {
	quoted := make([]string, len(topics))
	for i, t := range topics {
		quoted[i] = regexp.QuoteMeta(t)
	}
	include, err := config.CompileRegexList(quoted)
	if err != nil {
		return config.Mirror{}, err
	}
	return config.Mirror{
		Name: name, Source: dcfg.Destination,
		TopicsInclude: include, GroupsInclude: of.GroupsInclude, GroupsExclude: of.GroupsExclude,
		ACLInclude: of.ACLInclude, TopicPropertiesExclude: of.TopicPropertiesExclude,
	}, nil
}

// startRuntime starts a recorded run-time mirror; e.mu must be held.
func (e *Engine) startRuntime(name string, spec runtimeSpec) error {
	if spec.FailbackOf == "" {
		mc, err := config.ParseMirror([]byte(spec.Config), name)
		if err != nil {
			return err
		}
		if _, clash := e.cfg.Mirror(name); clash {
			return fmt.Errorf("the configuration now declares a mirror named %s, like the run-time mirror of that name; delete one of them", name)
		}
		m := newMirrorRun(e, e.cfg, mc)
		m.runtime = true
		e.mirrors[name] = m
		m.start()
		return nil
	}
	of, ok := e.cfg.Mirror(spec.FailbackOf)
	if !ok {
		return fmt.Errorf("failback mirror %s reverses mirror %s, which is no longer in the configuration; restore it, or delete %s", name, spec.FailbackOf, name)
	}
	if _, clash := e.cfg.Mirror(name); clash {
		return fmt.Errorf("the configuration has a mirror named %s, the name of mirror %s's failback mirror; rename it", name, spec.FailbackOf)
	}
	mc, err := reverseConfig(e.cfg, *of, name, spec.Topics)
	if err != nil {
		return err
	}
	m := newMirrorRun(e, e.cfg, mc)
	dst := of.Source
	m.dst, m.dstAdm, m.dstCfg, m.dstID, m.runtime, m.reverseOf = nil, nil, &dst, "mirror-source:"+of.Name, true, of.Name
	e.mirrors[name] = m
	m.start()
	return nil
}

// startRecordedRuntime starts every run-time mirror recorded in the state
// store; e.mu must be held. A mirror that cannot start is logged and left
// recorded.
func (e *Engine) startRecordedRuntime(ctx context.Context) {
	root := strings.TrimSuffix(statestore.MirrorPrefix(""), "/") // "mirrors/"
	entries, err := e.opts.Store.List(ctx, root)
	if err != nil {
		e.log.Error("cannot list run-time mirrors in the state store; they start at the next reload", "error", err)
		return
	}
	for _, ent := range entries {
		name, ok := strings.CutSuffix(strings.TrimPrefix(ent.Key, root), "/spec")
		if !ok || strings.Contains(name, "/") || e.mirrors[name] != nil {
			continue
		}
		var spec runtimeSpec
		if err := json.Unmarshal(ent.Value, &spec); err != nil {
			e.log.Error("unreadable run-time mirror record; not started", "mirror", name, "error", err)
			continue
		}
		if err := e.startRuntime(name, spec); err != nil {
			e.log.Error("run-time mirror not started", "mirror", name, "error", err)
		}
	}
}

// Failback starts (or completes) the reverse mirror of a failed-over
// mirror; see the comment at the top of this file. It is idempotent: a
// repeated request keeps what was decided and done, and a request with
// AllowRecreate realigns the partitions a previous one left FAILED.
func (e *Engine) Failback(ctx context.Context, req FailbackRequest) (FailbackResult, error) {
	m, err := e.runningMirror(req.Mirror)
	if err != nil {
		return FailbackResult{}, err
	}
	if m.runtime {
		return FailbackResult{}, fmt.Errorf("%w: %s is itself a failback mirror; to make the old source primary again, fail it over, then start mirror %s's topics",
			ErrInvalidRequest, m.name, strings.TrimSuffix(m.name, "-failback"))
	}
	suffix := req.SideTopicSuffix
	if suffix == "" {
		suffix = defaultSideSuffix
	}
	name := failbackName(m.name)
	out := FailbackResult{Mirror: name, Of: m.name}

	// The failed-over partitions and where M stopped.
	parts, err := e.machine.LoadMirror(ctx, m.name)
	if err != nil && len(parts) == 0 {
		return out, fmt.Errorf("mirror %s: loading partition states: %w", m.name, err)
	}
	ctl := e.controlOf(m.name)
	byTopic := map[string][]stoppedPart{}
	var topics []string
	for _, p := range parts {
		rec := p.Record()
		s, err := ctl.Stopped(ctx, rec.Topic)
		if err != nil {
			return out, err
		}
		if !s {
			continue
		}
		if rec.State != partition.Stopped {
			return out, fmt.Errorf("%w: mirror %s: %s/%d is %s, not STOPPED: wait until the failover completes (kmirror failover --mirror %s shows it)",
				ErrConflict, m.name, rec.Topic, rec.Partition, rec.State, m.name)
		}
		if _, ok := byTopic[rec.Topic]; !ok {
			topics = append(topics, rec.Topic)
		}
		byTopic[rec.Topic] = append(byTopic[rec.Topic], stoppedPart{rec.Partition, rec.LastMirroredOffset, rec.Mode})
	}
	if len(topics) == 0 {
		return out, fmt.Errorf("%w: mirror %s has no failed-over topic: run kmirror failover --mirror %s first", ErrConflict, m.name, m.name)
	}
	slices.Sort(topics)

	// The reverse mirror must not run while its partitions are decided.
	e.mu.Lock()
	if rm := e.mirrors[name]; rm != nil {
		delete(e.mirrors, name)
		e.mu.Unlock()
		rm.stop(ctx)
	} else {
		e.mu.Unlock()
	}

	// A client of the old source (the reverse mirror's destination).
	opts, err := clientOpts(m.dcfg, &m.cfg.Source, "destination")
	if err != nil {
		return out, err
	}
	old, err := kgo.NewClient(append(opts, kgo.ClientID(clientID(m.cfg.Source.ClientID, "failback-"+m.name)))...)
	if err != nil {
		return out, fmt.Errorf("mirror %s: old source cluster: %w", m.name, err)
	}
	defer old.Close()
	oldAdm := kadm.NewClient(old)

	for _, t := range topics {
		tf, err := e.failbackTopic(ctx, m, name, t, byTopic[t], old, oldAdm, suffix, req.AllowRecreate)
		if err != nil {
			return out, err
		}
		out.Topics = append(out.Topics, tf)
	}

	// Record and start the reverse mirror.
	b, err := json.Marshal(runtimeSpec{FailbackOf: m.name, Topics: topics})
	if err != nil {
		return out, err
	}
	if _, err := e.opts.Store.Put(ctx, specKey(name), b, statestore.AnyVersion); err != nil {
		return out, fmt.Errorf("recording failback mirror %s: %w", name, err)
	}
	e.mu.Lock()
	err = e.startRuntime(name, runtimeSpec{FailbackOf: m.name, Topics: topics})
	e.mu.Unlock()
	if err != nil {
		return out, err
	}
	m.log.Info("failback mirror started", "failback_mirror", name, "topics", topics)
	return out, nil
}

// stoppedPart is a failed-over partition and where its mirror stopped.
type stoppedPart struct {
	p    int32
	last int64
	mode partition.Mode
}

// failbackTopic decides (or completes) the reverse mirror's partitions of
// one topic.
func (e *Engine) failbackTopic(ctx context.Context, m *mirrorRun, name, topic string, parts []stoppedPart, old *kgo.Client, oldAdm *kadm.Client, suffix string, allowRecreate bool,
) (TopicFailback, error) {
	tf := TopicFailback{Topic: topic}
	ends, err := oldAdm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return tf, fmt.Errorf("mirror %s: reading the end offsets of %s on the old source: %w", m.name, topic, err)
	}
	recreate := false
	decisions := make([]PartitionFailback, 0, len(parts))
	records := make([]*partition.Partition, 0, len(parts))
	for _, sp := range parts {
		pf := PartitionFailback{Partition: sp.p, From: -1}
		rp, created, err := e.machine.LoadOrCreate(ctx, name, topic, sp.p, "failback of mirror "+m.name)
		if err != nil {
			return tf, fmt.Errorf("mirror %s: topic %s partition %d: %w", name, topic, sp.p, err)
		}
		records = append(records, rp)
		rec := rp.Record()
		if rec.Recreated && rec.State != partition.Failed {
			pf.Action = FailbackRecreated
			decisions = append(decisions, pf)
			continue
		}
		if !created && rec.State != partition.Failed && rec.State != partition.Preparing {
			// Decided and running (or done) before: keep it.
			pf.Action = FailbackContinue
			if rec.Mode == partition.ModeUndecided {
				pf.Action = FailbackRecreated
			}
			decisions = append(decisions, pf)
			continue
		}
		o, _ := ends.Lookup(topic, sp.p)
		endA := o.Offset
		var ds divergedState
		hadDiverged := rec.Diverged != nil
		if hadDiverged {
			ds = *rec.Diverged
		}
		switch {
		case hadDiverged && ds.Copied:
			pf.Diverged, pf.SideTopic = ds.Records, ds.SideTopic
			pf.Action, pf.Reason = FailbackFailed, divergedReason(m.name, topic, sp.p, ds)
		case sp.mode == partition.ModeMap:
			pf.Action, pf.Reason = FailbackFailed, fmt.Sprintf("mirror %s ran %s/%d in map mode, so offsets differ between the clusters and cannot continue offset for offset; "+
				"kmirror failback --allow-recreate rebuilds the topic on the old source from the new primary", m.name, topic, sp.p)
		case endA == sp.last+1:
			pf.Action, pf.From = FailbackContinue, endA
		case endA < sp.last+1:
			pf.Action, pf.Reason = FailbackFailed, fmt.Sprintf("the old source's %s/%d ends at offset %d, before the last mirrored offset %d: it lost records; "+
				"kmirror failback --allow-recreate rebuilds the topic on the old source from the new primary", topic, sp.p, endA, sp.last)
		case abortsOnly(ctx, old, topic, sp.p, sp.last+1, endA) && abortsOnly(ctx, m.dst, topic, sp.p, sp.last+1, endA):
			// Both logs hold only ABORT markers from the last mirrored offset
			// to the old source's end: the transactions open at the
			// failover, aborted on the new primary by the failover and on the
			// old source by its coordinator. The logs agree, offset for
			// offset and in what a read_committed consumer sees.
			pf.Action, pf.From = FailbackContinue, endA
		default: // diverged: keep A's extra records in the side topic first
			ds, err = e.copyDiverged(ctx, rp, old, oldAdm, topic, sp.p, sp.last+1, endA, topic+suffix)
			if err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: copying the old source's records beyond the last mirrored offset to %s: %w", name, topic, sp.p, topic+suffix, err)
			}
			pf.Diverged, pf.SideTopic = ds.Records, ds.SideTopic
			pf.Action, pf.Reason = FailbackFailed, divergedReason(m.name, topic, sp.p, ds)
		}
		if pf.Action == FailbackFailed {
			recreate = true
		}
		decisions = append(decisions, pf)
	}
	if recreate && allowRecreate {
		if err := recreateOnOldSource(ctx, oldAdm, topic); err != nil {
			return tf, fmt.Errorf("mirror %s: recreating %s on the old source: %w", name, topic, err)
		}
		tf.Recreated = true
		for i, rp := range records {
			if err := resetForCopy(ctx, rp); err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: %w", name, topic, rp.Record().Partition, err)
			}
			decisions[i].Action, decisions[i].Reason, decisions[i].From = FailbackRecreated, "", 0
		}
		tf.Partitions = decisions
		return tf, nil
	}
	for i, rp := range records {
		pf := decisions[i]
		rec := rp.Record()
		if pf.Action == FailbackContinue && rec.State == partition.Failed {
			// Failed earlier (for example by a transaction left open on
			// the old source); the old source now ends where it should.
			if err := rp.Reset(ctx, "failback repeated: the old source ends at the last mirrored offset"); err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: %w", name, topic, pf.Partition, err)
			}
			rec = rp.Record()
		}
		switch {
		case pf.Action == FailbackContinue && rec.State == partition.Preparing && rec.Mode != partition.ModePreserve:
			if err := rp.Update(ctx, func(d *partition.Data) error {
				d.Mode = partition.ModePreserve
				d.LastMirroredOffset = pf.From - 1
				// The reverse mirror proves the old source from the forward
				// mirror's last mirrored offset on before it continues.
				d.Verified = &partition.Checkpoint{Dest: min(parts[i].last+1, pf.From)}
				return nil
			}); err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: recording the resume point: %w", name, topic, pf.Partition, err)
			}
		case pf.Action == FailbackFailed && rec.State != partition.Failed:
			if err := rp.Fail(ctx, partition.NonRetryable(errors.New(pf.Reason))); err != nil {
				return tf, fmt.Errorf("mirror %s: topic %s partition %d: %w", name, topic, pf.Partition, err)
			}
		}
	}
	tf.Partitions = decisions
	return tf, nil
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
func (e *Engine) copyDiverged(ctx context.Context, rp *partition.Partition, old *kgo.Client, oldAdm *kadm.Client, topic string, p int32, from, to int64, side string) (divergedState, error) {
	var ds divergedState
	ok := rp.Record().Diverged != nil
	if ok {
		ds = *rp.Record().Diverged
	}
	if ok && ds.Copied {
		return ds, nil
	}
	recs, err := committedRecords(ctx, old, topic, p, from, to)
	if err != nil {
		return ds, err
	}
	details, err := oldAdm.ListTopics(ctx, topic)
	if err != nil {
		return ds, err
	}
	partitions := int32(len(details[topic].Partitions))
	if _, err := oldAdm.CreateTopic(ctx, partitions, -1, nil, side); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return ds, fmt.Errorf("creating side topic %s: %w", side, err)
	}
	sideEnd, err := waitEndOffset(ctx, oldAdm, side, p)
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
		if err := produceSide(ctx, old, side, p, recs, rp.Record().Mirror); err != nil {
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
