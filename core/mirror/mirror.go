package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/aclsync"
	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/groupsync"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
	"github.com/kmirror/kmirror/core/syncloop"
)

// topicPartition names one partition of a topic.
type topicPartition struct {
	topic     string
	partition int32
}

// mirrorRun is one running mirror: its source client, data path and runners.
type mirrorRun struct {
	e    *Engine
	name string
	cfg  config.Mirror
	dcfg *config.Config // the daemon configuration the mirror started with
	log  hclog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the sync loop, the data path, the runners

	// dst is the cluster the mirror writes: the daemon's destination, or,
	// for a failback mirror, the source cluster of the mirror it reverses
	// (dstCfg set; the mirror owns that client). dstID names it in topic
	// claims ("" for the daemon's destination). Set before the mirror
	// starts (dstCfg: at connect), read-only afterwards.
	dst    *kgo.Client
	dstAdm *kadm.Client
	dstCfg *config.Cluster
	dstID  string
	// runtime is set for a mirror created at run time (a failback
	// mirror): it is not in the configuration, and a reload keeps it.
	runtime bool
	// reverseOf names the mirror a failback mirror reverses.
	reverseOf string

	mu        sync.Mutex
	src       *kgo.Client
	srcAdm    *kadm.Client
	dp        *dataPath
	runners   map[topicPartition]*runner.Runner
	errs      map[string]string // sync loop → why its last round failed
	groups    *groupsync.Syncer
	acls      *aclsync.Syncer
	notes     []string        // facts for describe
	protected map[string]bool // topics whose read-only ACL this run created
	loops     []*syncloop.Loop
	lease     *syncloop.Lease // nil until connected
	warned    map[string]bool
	// recreated are the source topics the last topics round found
	// recreated (new topic id): their configs are not synced either.
	recreated map[string]bool
	// cfgErrs are the topic configs the destination rejected in the last
	// config sync round.
	cfgErrs []TopicConfigError
	// writeChecked: this run has seen that kmirror may write a read-only
	// mirror topic; noAuthorizer: the destination has no authorizer.
	writeChecked, noAuthorizer bool
}

func newMirrorRun(e *Engine, dcfg *config.Config, mc config.Mirror) *mirrorRun {
	ctx, cancel := context.WithCancel(context.Background())
	return &mirrorRun{e: e, name: mc.Name, cfg: mc, dcfg: dcfg, log: e.log.With("mirror", mc.Name), ctx: ctx, cancel: cancel,
		dst: e.dst, dstAdm: e.dstAdm,
		runners: map[topicPartition]*runner.Runner{}, errs: map[string]string{}, protected: map[string]bool{}, warned: map[string]bool{}}
}

// start launches the mirror's supervisor goroutine, owned by m.wg.
func (m *mirrorRun) start() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.supervise()
	}()
}

// stop cancels everything the mirror runs and waits for it, or for ctx.
func (m *mirrorRun) stop(ctx context.Context) {
	m.cancel()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		m.log.Warn("mirror did not stop before the shutdown deadline")
		return
	}
	m.e.claimTopics(m.dstID, m.name, nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dp != nil {
		m.dp.close()
	}
	if m.src != nil {
		m.src.Close()
	}
	if m.dstCfg != nil && m.dst != nil {
		m.dst.Close()
	}
}

// setErr records the outcome of a sync loop's round: err nil clears the
// loop's error. The mirror's status shows every loop's error.
func (m *mirrorRun) setErr(loop string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.errs, loop)
		return
	}
	if m.errs[loop] != err.Error() {
		m.log.Error("sync loop failed; retrying", "loop", loop, "error", err)
	}
	m.errs[loop] = err.Error()
}

// supervise connects, then runs the mirror's metadata-sync lease and its
// sync loops (topics, topic configs, groups, ACLs, read-only ACLs) until the
// mirror is stopped, and then releases the lease. Each loop runs in its own
// goroutine, owned by supervise (itself owned by m.wg), so that one loop's
// failure does not hold up the others.
func (m *mirrorRun) supervise() {
	cfg := m.dcfg
	retry := backoff.Exponential(time.Second, 30*time.Second).Start()
	for {
		err := m.connect(cfg)
		if err == nil {
			break
		}
		m.setErr("connect", err)
		if retry.Sleep(m.ctx) != nil {
			return
		}
	}
	m.setErr("connect", nil)
	// Only the daemon holding the mirror's metadata-sync lease runs sync
	// rounds (core/syncloop.Lease). The first attempt is made before the loops start,
	// so that a daemon that takes the lease at once syncs at once.
	lease := syncloop.NewLease(m.e.opts.Store, m.name, cfg.MetadataRefreshInterval, m.log, m.triggerSync)
	m.mu.Lock()
	m.lease = lease
	m.mu.Unlock()
	if stop, err := syncloop.ObserveLease(m.e.opts.Metrics, m.name, lease); err != nil {
		m.log.Warn("the metadata-sync lease metric is not exported", "error", err)
	} else {
		defer stop()
	}
	lease.Attempt(m.ctx)
	loops := []*syncloop.Loop{
		syncloop.NewLoop("topics", cfg.MetadataRefreshInterval, m.syncTopics, m.loopDone).Gated(lease.Held),
		syncloop.NewLoop("topic-configs", cfg.MetadataRefreshInterval, m.syncTopicConfigs, m.loopDone).Gated(lease.Held),
		syncloop.NewLoop("groups", cfg.MetadataRefreshInterval, m.syncGroups, m.loopDone).Gated(lease.Held),
		syncloop.NewLoop("acls", cfg.MetadataRefreshInterval, m.syncACLs, m.loopDone).Gated(lease.Held),
		syncloop.NewLoop("read-only", cfg.MetadataRefreshInterval, m.syncReadOnly, m.loopDone).Gated(lease.Held),
	}
	m.mu.Lock()
	m.loops = loops
	m.mu.Unlock()
	var wg sync.WaitGroup // the lease and the loops; waited for before the release
	wg.Add(1)
	go func() {
		defer wg.Done()
		lease.Run(m.ctx)
	}()
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Run(m.ctx)
		}()
	}
	wg.Wait()
	// Stopped cleanly: release the lease so that another daemon takes over
	// at its next attempt rather than after the TTL.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease.Release(ctx)
}

// loopDone records a sync round's outcome and counts its failure.
func (m *mirrorRun) loopDone(loop string, err error) {
	if err != nil {
		switch loop {
		case "topic-configs":
			m.e.inst.configSyncError(m.name)
		case "topics":
			m.e.inst.metadataRefreshError(m.name)
		}
		// The groups and acls loops count their errors themselves
		// (ConsumerGroupOffsetSyncError, AclSyncError).
	}
	m.setErr(loop, err)
}

// triggerSync asks every sync loop for a round now (reload).
func (m *mirrorRun) triggerSync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.loops {
		l.Trigger()
	}
}

// connect builds the source client (and a failback mirror's destination
// client) and the data path.
func (m *mirrorRun) connect(cfg *config.Config) error {
	if m.dstCfg != nil && m.dst == nil {
		opts, err := clientOpts(cfg, m.dstCfg, "destination")
		if err != nil {
			return fmt.Errorf("mirror %s: %w", m.name, err)
		}
		dst, err := kgo.NewClient(append(opts, kgo.ClientID(clientID(m.dstCfg.ClientID, "destination-"+m.name)))...)
		if err != nil {
			return fmt.Errorf("mirror %s: destination cluster: %w", m.name, err)
		}
		m.mu.Lock()
		m.dst, m.dstAdm = dst, kadm.NewClient(dst)
		m.mu.Unlock()
	}
	opts, err := clientOpts(cfg, &m.cfg.Source, "source")
	if err != nil {
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	src, err := kgo.NewClient(append(opts, kgo.ClientID(clientID(m.cfg.Source.ClientID, "source-"+m.name)))...)
	if err != nil {
		return fmt.Errorf("mirror %s: source cluster: %w", m.name, err)
	}
	dp, err := newDataPath(m, cfg, src)
	if err != nil {
		src.Close()
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.src, m.srcAdm, m.dp = src, kadm.NewClient(src), dp
	m.mu.Unlock()
	gs, err := m.newGroupSync()
	if err != nil {
		dp.close()
		src.Close()
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	as, err := m.newACLSync()
	if err != nil {
		dp.close()
		src.Close()
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.groups, m.acls = gs, as
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		dp.run(m.ctx)
	}()
	return nil
}

// syncTopics is the topics loop's round. For every in-scope source topic
// this mirror may own (a topic claimed by another mirror is refused), it
// creates the destination topic with the source's partition count and
// configs, expands its partitions to the source's count, and starts a runner
// for each partition that has none. Partitions whose source topic was
// deleted, or left the mirror's scope, go through STOPPING to STOPPED; those
// whose source topic was recreated (new topic id) fail for good. It is
// idempotent: a round changes only what differs.
func (m *mirrorRun) syncTopics(ctx context.Context) error {
	topics, present, err := listSourceTopics(ctx, m.src, &m.cfg)
	if err != nil {
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	recreated := m.checkTopicIDs(present)
	m.mu.Lock()
	m.recreated = recreated
	m.mu.Unlock()
	// Topics an operator stopped (stop, failover) are neither created nor
	// expanded, and no new partition of theirs starts; their recorded
	// partitions get runners, which keep them STOPPED.
	if topics, err = m.withoutStopped(ctx, topics); err != nil {
		return err
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	// Claim every in-scope topic the source has, including one without a
	// leader this round, so that another mirror cannot take it meanwhile.
	var claim []string
	for name := range present {
		if inScope(&m.cfg, name) {
			claim = append(claim, name)
		}
	}
	conflicts := m.e.claimTopics(m.dstID, m.name, claim)
	var errs []error
	dstParts := map[string]int32{}
	if len(names) > 0 {
		details, err := m.dstAdm.ListTopics(ctx, names...)
		if err != nil {
			return fmt.Errorf("mirror %s: describing destination topics: %w", m.name, err)
		}
		for _, d := range details {
			if d.Err == nil {
				dstParts[d.Topic] = int32(len(d.Partitions))
			}
		}
	}
	var missing []string
	for _, t := range topics {
		if _, ok := dstParts[t.Name]; !ok && conflicts[t.Name] == "" {
			missing = append(missing, t.Name)
		}
	}
	srcConfigs, err := topicConfigs(ctx, m.srcAdm, missing...)
	if err != nil {
		return fmt.Errorf("mirror %s: describing source topic configs: %w", m.name, err)
	}
	blocked := false // kmirror may not write mirror topics: start nothing
	for _, t := range topics {
		if blocked {
			break
		}
		if other := conflicts[t.Name]; other != "" {
			errs = append(errs, fmt.Errorf("mirror %s: topic %s is claimed by mirror %s and mirror %s; two mirrors cannot write one destination topic, "+
				"so mirror %s does not start its partitions: narrow mirror.topics.include or mirror.topics.exclude of one of them", m.name, t.Name, other, m.name, m.name))
			continue
		}
		if recreated[t.Name] {
			continue // its partitions fail; a new partition of the new topic must not start mirroring into the old one
		}
		n, err := ensureDestinationTopic(ctx, m.dstAdm, t, dstParts[t.Name], srcConfigs[t.Name], m.cfg.TopicPropertiesExclude)
		if err != nil {
			errs = append(errs, fmt.Errorf("mirror %s: %w", m.name, err))
			if n == 0 {
				continue
			}
		}
		if n > t.Partitions {
			m.warnOnce("topic "+t.Name+" has more partitions on the destination", "the destination topic has more partitions than the source; the extra ones are not mirrored", "topic", t.Name, "source", t.Partitions, "destination", n)
		}
		for p := int32(0); p < min(n, t.Partitions); p++ {
			tp := topicPartition{t.Name, p}
			m.mu.Lock()
			_, running := m.runners[tp]
			m.mu.Unlock()
			if running {
				continue
			}
			r, err := newRunner(ctx, m, t, p)
			if err != nil {
				errs = append(errs, err)
				break
			}
			// The topic is read-only before any of its partitions mirrors.
			if r.Record().State != partition.Stopped {
				if err := m.protect(ctx, t.Name); err != nil {
					errs = append(errs, err)
					blocked = errors.Is(err, ErrCannotWrite)
					break
				}
			}
			m.launch(tp, r)
		}
	}
	if err := m.stopGone(ctx, present); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// warnOnce logs msg the first time key is seen.
// setNote adds a fact to the mirror's describe output, once.
func (m *mirrorRun) setNote(note string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.notes {
		if n == note {
			return
		}
	}
	m.notes = append(m.notes, note)
}

func (m *mirrorRun) warnOnce(key, msg string, args ...any) {
	m.mu.Lock()
	seen := m.warned[key]
	m.warned[key] = true
	m.mu.Unlock()
	if !seen {
		m.log.Warn(msg, args...)
	}
}

// checkTopicIDs compares the topic id each runner started with against the
// source's current one, fails the partitions of a recreated topic (same
// name, new id), and returns the names of recreated topics.
func (m *mirrorRun) checkTopicIDs(present map[string][16]byte) map[string]bool {
	out := map[string]bool{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for tp, r := range m.runners {
		id, ok := present[tp.topic]
		if !ok || r.TopicID() == ([16]byte{}) || id == ([16]byte{}) || id == r.TopicID() {
			continue
		}
		out[tp.topic] = true
		r.RequestRecreated(id)
	}
	return out
}

// launch registers r and starts its goroutine, owned by m.wg.
//
// Two paths may build a runner for the same partition at once (the topics
// round and an operator's start): the first one launched wins, and the
// other is dropped before it runs, so one goroutine owns the partition.
func (m *mirrorRun) launch(tp topicPartition, r *runner.Runner) {
	m.mu.Lock()
	if _, running := m.runners[tp]; running {
		m.mu.Unlock()
		return
	}
	m.runners[tp] = r
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		r.Run(m.ctx)
	}()
}

// stopGone takes every partition whose topic no longer matches the mirror's
// include/exclude patterns, or was deleted on the source (missing from
// present), through STOPPING to STOPPED: running ones, and ones a previous
// run (or configuration) left MIRRORING, PAUSED or FAILED in the state store.
// The destination topic is never deleted.
func (m *mirrorRun) stopGone(ctx context.Context, present map[string][16]byte) error {
	const outOfScope = "the topic no longer matches mirror.topics.include, or matches mirror.topics.exclude"
	const deleted = "the source topic was deleted; the destination topic is kept and is writable"
	parts, err := m.e.machine.LoadMirror(ctx, m.name)
	if err != nil && len(parts) == 0 {
		return fmt.Errorf("mirror %s: loading partition states: %w", m.name, err)
	}
	// A topic missing from the all-topics listing may only be hidden (an
	// authorizer omits topics the principal may not describe): ask for the
	// missing ones by name, and take as deleted only those the source
	// answers UNKNOWN_TOPIC_OR_PARTITION for.
	missing := map[string]bool{}
	m.mu.Lock()
	for tp := range m.runners {
		if _, ok := present[tp.topic]; !ok && inScope(&m.cfg, tp.topic) {
			missing[tp.topic] = true
		}
	}
	m.mu.Unlock()
	for _, p := range parts {
		if t := p.Record().Topic; inScope(&m.cfg, t) {
			if _, ok := present[t]; !ok {
				missing[t] = true
			}
		}
	}
	gone, err := confirmDeleted(ctx, m.src, missing)
	if err != nil {
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	reasonFor := func(topic string) string {
		if !inScope(&m.cfg, topic) {
			return outOfScope
		}
		if gone[topic] {
			return deleted
		}
		return ""
	}
	m.mu.Lock()
	for tp, r := range m.runners {
		if reason := reasonFor(tp.topic); reason != "" {
			r.RequestStop(reason)
		}
	}
	m.mu.Unlock()
	for _, p := range parts {
		rec := p.Record()
		reason := reasonFor(rec.Topic)
		if reason == "" {
			continue
		}
		switch rec.State {
		case partition.Mirroring, partition.Paused, partition.Failed, partition.Stopping:
		default:
			continue
		}
		tp := topicPartition{rec.Topic, rec.Partition}
		m.mu.Lock()
		_, running := m.runners[tp]
		m.mu.Unlock()
		if running {
			continue
		}
		r := runnerFor(m, sourceTopic{Name: rec.Topic}, p)
		r.RequestStop(reason)
		m.launch(tp, r)
	}
	return nil
}

func (m *mirrorRun) status() MirrorStatus {
	m.mu.Lock()
	rs := make([]*runner.Runner, 0, len(m.runners))
	for _, r := range m.runners {
		rs = append(rs, r)
	}
	var errs []string
	for _, e := range m.errs {
		errs = append(errs, e)
	}
	sort.Strings(errs)
	ms := MirrorStatus{Name: m.name, Error: strings.Join(errs, "; "), TopicConfigErrors: append([]TopicConfigError(nil), m.cfgErrs...)}
	if m.groups != nil {
		ms.Groups = m.groups.Status()
	}
	ms.Notes = append(ms.Notes, m.notes...)
	lease := m.lease
	m.mu.Unlock()
	if lease != nil {
		ms.SyncLeaseHeld, ms.SyncLeaseHolder = lease.Status()
		if !ms.SyncLeaseHeld {
			who := "no daemon (the lease is free or unreadable)"
			if ms.SyncLeaseHolder != "" {
				who = "daemon " + ms.SyncLeaseHolder
			}
			ms.Notes = append(ms.Notes, "metadata sync (topics, topic configs, groups, ACLs, read-only ACLs) is done by "+who+
				", which holds this mirror's sync lease; this daemon ("+lease.ID()+") skips sync rounds (and so starts no new partitions) until it takes the lease")
		}
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Topic() != rs[j].Topic() {
			return rs[i].Topic() < rs[j].Topic()
		}
		return rs[i].Partition() < rs[j].Partition()
	})
	for _, r := range rs {
		ms.Partitions = append(ms.Partitions, r.Status())
	}
	return ms
}
