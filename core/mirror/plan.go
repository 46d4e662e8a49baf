package mirror

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/control"
	"github.com/kmirror/kmirror/core/failback"
	"github.com/kmirror/kmirror/core/kclient"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
	"github.com/kmirror/kmirror/core/supervisor"
)

// Plan answers a dry run of stop, delete, failover or failback: what the
// operation would do now, per topic and partition. It reads the same
// records and runs the same checks as the operation, in the same order, so
// that what it refuses the operation would refuse; it writes nothing,
// starts and stops nothing, and creates or deletes no topic.
func (e *Engine) Plan(ctx context.Context, req admin.PlanOrder) (admin.Plan, error) {
	switch req.Op {
	case admin.OpStop, admin.OpFailover:
		return e.planStop(ctx, req)
	case admin.OpReset:
		return e.planReset(ctx, req)
	case admin.OpDelete:
		return e.planDelete(ctx, req.Mirror)
	case admin.OpFailback:
		return e.planFailback(ctx, req)
	}
	return admin.Plan{}, fmt.Errorf("%w: no dry run for operation %q (stop, reset, delete, failover, failback)", admin.ErrInvalidRequest, req.Op)
}

// planReset plans a reset (control.Reset): which partitions are FAILED
// and would be forgotten, which are left alone. Like the reset, it refuses
// when none is FAILED.
func (e *Engine) planReset(ctx context.Context, req admin.PlanOrder) (admin.Plan, error) {
	out := admin.Plan{Mirror: req.Mirror, Op: req.Op}
	sc, err := e.planScope(ctx, req, req.Op == admin.OpReset)
	if err != nil {
		return out, err
	}
	m, pats, match, parts, live := sc.m, sc.pats, sc.match, sc.parts, sc.live
	var byTopic topicPlans
	var left []string
	failed := 0
	for _, p := range parts {
		rec := p.Record()
		if !match(rec.Topic) {
			continue
		}
		pp := admin.PartitionPlan{Partition: rec.Partition, State: rec.State.String(), LastMirroredOffset: rec.LastMirroredOffset, Lag: -1}
		reason := rec.Reason
		if st, ok := live[fmt.Sprintf("%s/%d", rec.Topic, rec.Partition)]; ok {
			pp.State, pp.Lag, pp.LastMirroredOffset = st.State, st.Lag, st.LastMirroredOffset
			if st.LastError != "" {
				reason = st.LastError
			}
		}
		if pp.State == partition.Failed.String() {
			failed++
			pp.Action = admin.PlanReset
			pp.Detail = fmt.Sprintf("FAILED (%s): its record and offset map are deleted; it starts again as a new partition from the source's log start", reason)
		} else {
			pp.Action, pp.Detail = admin.PlanNone, pp.State+": reset forgets only FAILED partitions"
			left = append(left, fmt.Sprintf("%s/%d (%s)", rec.Topic, rec.Partition, pp.State))
		}
		byTopic.add(rec.Topic, pp)
	}
	if failed == 0 {
		return out, fmt.Errorf("%w: mirror %s: no partition of the topics matching %s is FAILED (%s); reset forgets only FAILED partitions, nothing was changed",
			admin.ErrConflict, m.Name(), strings.Join(pats, ", "), strings.Join(left, ", "))
	}
	out.Topics = byTopic.topics
	out.Steps = []string{
		"end the runner of each partition marked \"reset\"; delete its offset map, then its record, from the state store",
		"ask for a topics round: it creates a missing destination topic and starts each reset partition as a new one, from the source's log start",
		"a destination partition that still holds records makes its partition fail again (\"already holds offsets\"): kmirror never merges into them; delete the destination topic first when it holds anything",
	}
	return out, nil
}

// planScope is what a stop, failover or reset plan reads first, with the
// operation's checks: the running mirror, the topic patterns and their
// matcher, the recorded partitions and the live status of the matching
// runners (by "topic/partition").
type planScope struct {
	m     *supervisor.Mirror
	pats  []string
	match func(string) bool
	parts []*partition.Partition
	live  map[string]runner.Status
}

// planScope reads a plan's scope; topicsRequired refuses a request that
// names no topic, as stop and reset do.
func (e *Engine) planScope(ctx context.Context, req admin.PlanOrder, topicsRequired bool) (planScope, error) {
	m, err := e.runningMirror(req.Mirror)
	if err != nil {
		return planScope{}, err
	}
	if topicsRequired && len(req.Topics) == 0 {
		return planScope{}, fmt.Errorf("%w: name the topics to %s (regexes; \".*\" for all)", admin.ErrInvalidRequest, req.Op)
	}
	pats, res, err := control.Patterns(req.Topics)
	if err != nil {
		return planScope{}, err
	}
	cm := m.Operated()
	if err := control.CheckMatches(ctx, cm, req.Topics); err != nil {
		return planScope{}, err
	}
	match := func(t string) bool { return control.MatchAny(res, t) }
	parts, err := e.machine.LoadMirror(ctx, m.Name())
	if err != nil && len(parts) == 0 {
		return planScope{}, fmt.Errorf("%w: mirror %s: loading partition states: %v", admin.ErrUnavailable, m.Name(), err)
	}
	live := map[string]runner.Status{}
	for _, r := range cm.Runners(match) {
		st := r.Status()
		live[fmt.Sprintf("%s/%d", st.Topic, st.Partition)] = st
	}
	return planScope{m: m, pats: pats, match: match, parts: parts, live: live}, nil
}

// planStop plans a stop, or a failover (a stop after the last syncs).
func (e *Engine) planStop(ctx context.Context, req admin.PlanOrder) (admin.Plan, error) {
	out := admin.Plan{Mirror: req.Mirror, Op: req.Op}
	sc, err := e.planScope(ctx, req, req.Op == admin.OpStop)
	if err != nil {
		return out, err
	}
	m, pats, match, parts, live := sc.m, sc.pats, sc.match, sc.parts, sc.live
	planned := req.Op == admin.OpFailover && req.WaitForCatchUp > 0
	var totalLag int64
	var byTopic topicPlans
	for _, p := range parts {
		rec := p.Record()
		if !match(rec.Topic) {
			continue
		}
		pp := admin.PartitionPlan{Partition: rec.Partition, State: rec.State.String(), LastMirroredOffset: rec.LastMirroredOffset}
		if st, ok := live[fmt.Sprintf("%s/%d", rec.Topic, rec.Partition)]; ok {
			pp.State, pp.Lag, pp.LastMirroredOffset = st.State, st.Lag, st.LastMirroredOffset
		}
		switch pp.State {
		case partition.Stopped.String():
			pp.Action, pp.Detail = admin.PlanNone, fmt.Sprintf("already STOPPED at last mirrored offset %d", pp.LastMirroredOffset)
		case partition.Preparing.String():
			pp.Action, pp.Detail = admin.PlanNone, "PREPARING: nothing mirrored yet; it stays PREPARING until its topic is started again"
		default:
			pp.Action = admin.PlanStop
			pp.Detail = fmt.Sprintf("%s → STOPPING → STOPPED: fetching ends, open destination transactions are aborted, the last mirrored offset (%d now) is recorded", pp.State, pp.LastMirroredOffset)
			if planned {
				pp.Detail = fmt.Sprintf("first waits for lag 0 (lag %d now); then ", max(pp.Lag, 0)) + pp.Detail
			}
		}
		if pp.Lag > 0 {
			totalLag += pp.Lag
		}
		byTopic.add(rec.Topic, pp)
	}
	out.Topics = byTopic.topics

	rule := fmt.Sprintf("record a stop rule for topics matching %s (topics that match later are not mirrored either)", strings.Join(pats, ", "))
	stop := "stop the partitions marked \"stop\" and wait until each is STOPPED; their destination topics become writable (read-only ACLs removed)"
	if req.Op == admin.OpStop {
		out.Steps = []string{rule, stop}
		return out, nil
	}
	if planned {
		out.Steps = append(out.Steps, fmt.Sprintf("wait up to %v until every partition below has lag 0 (total lag now %d); if they do not, stop with nothing changed", req.WaitForCatchUp, totalLag))
	}
	gs, as := m.Syncers()
	last := "on failure the failover goes on and reports it in warnings (unplanned)"
	if planned {
		last = "on failure the failover stops there with nothing changed (planned)"
	}
	if gs != nil {
		var groups []string
		for _, g := range gs.Status() {
			groups = append(groups, g.Group)
		}
		what := "no group synced so far"
		if len(groups) > 0 {
			what = "groups " + strings.Join(groups, ", ")
		}
		out.Steps = append(out.Steps, fmt.Sprintf("a last consumer group offset sync (%s); %s", what, last))
	}
	if as != nil {
		out.Steps = append(out.Steps, "a last ACL sync; "+last)
	}
	out.Steps = append(out.Steps, rule, stop)
	for _, c := range m.Clusters() {
		if !c.Reachable && !c.Since.IsZero() {
			w := fmt.Sprintf("the %s cluster is unreachable now (%s)", c.Cluster, c.LastError)
			if c.Cluster == "source" && planned {
				w += ": the last syncs would fail and the planned failover would not start"
			}
			out.Warnings = append(out.Warnings, w)
		}
	}
	return out, nil
}

// planDelete plans a run-time mirror's deletion, with DeleteMirror's
// checks.
func (e *Engine) planDelete(ctx context.Context, name string) (admin.Plan, error) {
	out := admin.Plan{Mirror: name, Op: admin.OpDelete}
	m, parts, err := e.deletable(ctx, name)
	if err != nil {
		return out, err
	}
	if m != nil {
		out.Steps = append(out.Steps, "stop the mirror "+name+" (its topics are STOPPED already)")
	}
	out.Steps = append(out.Steps,
		fmt.Sprintf("delete its records in the state store: %d partition records, offset maps, the operator record, then its settings", len(parts)),
		"keep its destination topics and their data")
	var byTopic topicPlans
	for _, p := range parts {
		rec := p.Record()
		byTopic.add(rec.Topic, admin.PartitionPlan{
			Partition: rec.Partition, State: rec.State.String(), LastMirroredOffset: rec.LastMirroredOffset,
			Action: admin.PlanDelete, Detail: "its record is deleted; the destination partition is kept",
		})
	}
	out.Topics = byTopic.topics
	return out, nil
}

// topicPlans gathers partition plans by topic, topics in the order they
// come (partition records are sorted by topic and partition).
type topicPlans struct {
	topics []admin.TopicPlan
	index  map[string]int
}

func (t *topicPlans) add(topic string, pp admin.PartitionPlan) {
	i, ok := t.index[topic]
	if !ok {
		if t.index == nil {
			t.index = map[string]int{}
		}
		i = len(t.topics)
		t.index[topic] = i
		t.topics = append(t.topics, admin.TopicPlan{Topic: topic})
	}
	t.topics[i].Partitions = append(t.topics[i].Partitions, pp)
}

// planFailback plans a failback: the decisions failback.Decide would take
// now, per partition, read from both clusters without writing.
func (e *Engine) planFailback(ctx context.Context, req admin.PlanOrder) (admin.Plan, error) {
	out := admin.Plan{Mirror: req.Mirror, Op: admin.OpFailback}
	m, err := e.failbackable(req.Mirror)
	if err != nil {
		return out, err
	}
	suffix := req.SideTopicSuffix
	if suffix == "" {
		suffix = failback.DefaultSideSuffix
	}
	name := failback.Name(m.Name())
	topics, byTopic, err := failback.FailedOver(ctx, e.machine, e.controlOf(m.Name()).Stopped, m.Name())
	if err != nil {
		return out, err
	}
	old, err := e.oldSourceClient(ctx, m.Name())
	if err != nil {
		return out, err
	}
	defer old.Close()
	decided, err := failback.Decide(ctx, failback.Params{
		Machine: e.machine, Mirror: m.Name(), Reverse: name, NewPrimary: m.Dest(),
		Old: old, OldAdmin: kadm.NewClient(old), SideSuffix: suffix, AllowRecreate: req.AllowRecreate, DryRun: true,
	}, topics, byTopic)
	if err != nil {
		return out, err
	}
	e.mu.Lock()
	running := e.mirrors[name] != nil
	e.mu.Unlock()
	if running {
		out.Steps = append(out.Steps, "stop the running failback mirror "+name+" while its partitions are decided")
	}
	out.Steps = append(out.Steps, fmt.Sprintf("decide each partition of the failed-over topics %s (below)", strings.Join(topics, ", ")))
	for _, t := range decided {
		tp := admin.TopicPlan{Topic: t.Topic}
		last := map[int32]int64{}
		for _, sp := range byTopic[t.Topic] {
			last[sp.Partition] = sp.Last
		}
		side := false
		for _, pf := range t.Partitions {
			pp := admin.PartitionPlan{Partition: pf.Partition, LastMirroredOffset: last[pf.Partition], Lag: -1, Action: pf.Action}
			if rp, err := e.machine.Load(ctx, name, t.Topic, pf.Partition); err == nil {
				pp.State = rp.Record().State.String()
			}
			switch pf.Action {
			case failback.Continue:
				pp.Detail = fmt.Sprintf("the reverse mirror copies from offset %d of the new primary", pf.From)
			case failback.Recreated:
				pp.Detail = "copied from scratch into the topic recreated on the old source, offsets preserved"
			case failback.Failed:
				pp.Detail = pf.Reason
			}
			if pf.Diverged > 0 || pf.SideTopic != "" {
				side = true
			}
			fb := pf
			pp.Failback = &fb
			tp.Partitions = append(tp.Partitions, pp)
		}
		if side {
			out.CreateOnOldSource = append(out.CreateOnOldSource, t.Topic+suffix)
		}
		if t.Recreated {
			out.DeleteOnOldSource = append(out.DeleteOnOldSource, t.Topic)
		}
		out.Topics = append(out.Topics, tp)
	}
	if len(out.CreateOnOldSource) > 0 {
		out.Steps = append(out.Steps, "create on the old source the side topics "+strings.Join(out.CreateOnOldSource, ", ")+" and copy there its committed records beyond the last mirrored offsets")
	}
	if len(out.DeleteOnOldSource) > 0 {
		out.Steps = append(out.Steps, "DELETE on the old source the topics "+strings.Join(out.DeleteOnOldSource, ", ")+" (allow_recreate) and mirror them back from the new primary from scratch")
	}
	out.Steps = append(out.Steps, "record and start the failback mirror "+name+" from the destination to the old source")
	return out, nil
}

// oldSourceClient is a client of mirror name's source cluster, which a
// failback writes (its reverse mirror's destination).
func (e *Engine) oldSourceClient(ctx context.Context, name string) (*kgo.Client, error) {
	m, err := e.runningMirror(name)
	if err != nil {
		return nil, err
	}
	dcfg, mc := m.Settings()
	opts, err := kclient.ClusterOpts(ctx, dcfg, &mc.Source, kclient.RoleDestination, m.Name(), e.opts.Credentials)
	if err != nil {
		return nil, err
	}
	old, err := kgo.NewClient(append(opts, kgo.ClientID(kclient.ClientID(mc.Source.ClientID, "failback-"+m.Name())))...)
	if err != nil {
		return nil, fmt.Errorf("mirror %s: old source cluster: %w", m.Name(), err)
	}
	return old, nil
}
