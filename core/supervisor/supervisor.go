// Package supervisor runs one mirror of the engine (core/mirror): it
// connects to the mirror's clusters, builds its data path
// (core/datapath), runs its metadata-sync lease and sync loops (topics,
// topic configs, groups, ACLs, read-only ACLs), and launches and owns one
// runner (core/runner) per partition. What it shares with the other
// mirrors (the state store, the partition state machine, the fetch budget,
// the throttle, the topic claims, the operator rules) it takes from the
// engine as Deps, never as a pointer back to the engine.
package supervisor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/aclsync"
	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/control"
	"github.com/kmirror/kmirror/core/datapath"
	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/groupsync"
	"github.com/kmirror/kmirror/core/kclient"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
	"github.com/kmirror/kmirror/core/syncloop"
	"github.com/kmirror/kmirror/core/topicsync"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// topicPartition names one partition of a topic.
type topicPartition struct {
	topic     string
	partition int32
}

// Mirror is one running mirror: its clients, data path, sync loops and
// runners.
type Mirror struct {
	d    Deps
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
	// srcHealth and dstHealth track whether the mirror can talk to its
	// source and destination clusters (dstHealth is the engine's for the
	// daemon's destination). They outlive the clients, so that a
	// reconnect keeps the history.
	srcHealth, dstHealth *kclient.Health
	// runtime is set for a mirror created at run time (a failback
	// mirror): it is not in the configuration, and a reload keeps it.
	runtime bool
	// reverseOf names the mirror a failback mirror reverses.
	reverseOf string

	mu      sync.Mutex
	src     *kgo.Client
	srcAdm  *kadm.Client
	dp      *datapath.Path
	runners map[topicPartition]*runner.Runner
	halts   map[topicPartition]halt // how to end each runner alone (an operator's reset)
	// srcEnds are the source's end offsets of the mirroring partitions as
	// the source-ends loop last read them (refreshSourceEnds).
	srcEnds map[topicPartition]int64
	errs    map[string]string // sync loop → why its last round failed
	groups  *groupsync.Syncer
	acls    *aclsync.Syncer
	topics  *topicsync.Syncer
	loops   []*syncloop.Loop
	lease   *syncloop.Lease // nil until connected
	warned  map[string]bool
	// cfgErrs are the topic configs the destination rejected in the last
	// config sync round.
	cfgErrs []admin.TopicConfigError
	// fails counts each failing sync loop's failures for the log (setErr).
	fails map[string]*loopFailures
	// now is the clock of setErr's log (time.Now; a test's).
	now func() time.Time
	// dead counts the mirror's goroutines that ended while it ran
	// (DeadThreads).
	dead atomic.Int64
}

// Deps are what a mirror takes from the engine that runs it: what every
// mirror of the daemon shares.
type Deps struct {
	Store   statestore.Store
	Metrics *metrics.Provider
	// Instruments are the engine's metrics (appended batches, mismatches,
	// failed sync rounds).
	Instruments *metrics.Engine
	// Machine keeps the partitions' states.
	Machine *partition.Machine
	// Budget and Throttle are the daemon-wide fetch budget and throttle.
	Budget   *fetcher.Budget
	Throttle fetcher.ThrottleFunc
	// Log is the engine's logger; the mirror logs with its name.
	Log hclog.Logger
	// Dest and DestAdmin are the daemon's destination cluster, which the
	// mirror writes unless it is a failback mirror (Reverse).
	Dest      *kgo.Client
	DestAdmin *kadm.Client
	// DestHealth tracks the daemon's destination (a hook of Dest).
	DestHealth *kclient.Health
	// Rules returns the mirror's operator rules.
	Rules func() *control.Holder
	// Claims are the engine's topic claims: which mirror writes each
	// destination topic.
	Claims Claims
	// NoReverse refuses to start runners whose topics the mirror in the
	// other direction still mirrors (control.Mirror.NoReverse).
	NoReverse func(m *Mirror, rs []*runner.Runner) error
	// Credentials gives the mirror's SASL clients their credentials.
	Credentials kclient.Credentials
	// Filters returns the filter plugin of a name in mirror.filter.plugins.
	Filters func(name string) (filter.Filter, error)
}

// Claims are the topic claims of every mirror of the engine: a topic two
// mirrors' include patterns match would get two writers; the first mirror
// to claim it keeps it.
type Claims interface {
	// Claim makes mirror the owner of each of topics (on the destination
	// cluster dstID) that no other mirror owns, releases its claim on
	// every topic not listed, and returns, for each listed topic another
	// mirror owns, that mirror's name.
	Claim(dstID, mirror string, topics []string) map[string]string
	// Owner returns the mirror that writes a topic of the destination
	// cluster dstID ("": none).
	Owner(dstID, topic string) string
}

// New returns mirror mc of the daemon configuration dcfg, writing the
// daemon's destination; nothing runs until Start.
func New(d Deps, dcfg *config.Config, mc config.Mirror) *Mirror {
	ctx, cancel := context.WithCancel(context.Background())
	return &Mirror{d: d, name: mc.Name, cfg: mc, dcfg: dcfg, log: d.Log.With("mirror", mc.Name), ctx: ctx, cancel: cancel,
		dst: d.Dest, dstAdm: d.DestAdmin, dstHealth: d.DestHealth,
		srcHealth: kclient.NewHealth(d.Log.With("mirror", mc.Name, "cluster", "source"), 0),
		runners:   map[topicPartition]*runner.Runner{}, halts: map[topicPartition]halt{}, errs: map[string]string{}, fails: map[string]*loopFailures{}, now: time.Now, warned: map[string]bool{}}
}

// MarkRuntime marks a mirror created at run time: it is not in the
// configuration, and a reload keeps it. Call it before Start.
func (m *Mirror) MarkRuntime() { m.runtime = true }

// Reverse makes m the failback mirror of mirror of: it writes of's source
// cluster, through a client of its own, and is a run-time mirror. Call it
// before Start.
func (m *Mirror) Reverse(of config.Mirror) {
	dst := of.Source
	m.dst, m.dstAdm, m.dstCfg, m.dstID, m.runtime, m.reverseOf = nil, nil, &dst, "mirror-source:"+of.Name, true, of.Name
	m.dstHealth = kclient.NewHealth(m.log.With("cluster", "destination"), 0)
}

// Name is the mirror's name.
func (m *Mirror) Name() string { return m.name }

// Runtime reports whether the mirror was created at run time.
func (m *Mirror) Runtime() bool { return m.runtime }

// ReverseOf names the mirror a failback mirror reverses ("": none).
func (m *Mirror) ReverseOf() string { return m.reverseOf }

// Logger is the mirror's logger.
func (m *Mirror) Logger() hclog.Logger { return m.log }

// Settings are the daemon configuration the mirror started with and its
// own.
func (m *Mirror) Settings() (*config.Config, config.Mirror) { return m.dcfg, m.cfg }

// Dest is the client of the cluster the mirror writes; nil for a failback
// mirror before it connected.
func (m *Mirror) Dest() *kgo.Client { return m.dst }

// Connected reports whether the mirror has connected to its clusters.
func (m *Mirror) Connected() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dp != nil
}

// Syncers are the mirror's group offset and ACL syncers; nil before it
// connected.
func (m *Mirror) Syncers() (*groupsync.Syncer, *aclsync.Syncer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.groups, m.acls
}

// Start launches the mirror's supervisor goroutine, owned by m.wg.
func (m *Mirror) Start() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.supervise()
	}()
}

// Stop cancels everything the mirror runs and waits for it, or for ctx.
func (m *Mirror) Stop(ctx context.Context) {
	m.cancel()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		m.log.Warn("mirror did not stop before the shutdown deadline")
		return
	}
	m.d.Claims.Claim(m.dstID, m.name, nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dp != nil {
		m.dp.Close()
	}
	if m.src != nil {
		m.src.Close()
	}
	if m.dstCfg != nil && m.dst != nil {
		m.dst.Close()
	}
}

// loopFailures counts a failing sync loop's failures for the log.
type loopFailures struct {
	total    int       // since the loop last succeeded
	repeats  int       // since the last line logged
	loggedAt time.Time // when the last line was logged
}

// setErr records the outcome of a sync loop's round: err nil clears the
// loop's error. The mirror's status shows every loop's error.
//
// The log gets a failure at once when its message is new, then, while the
// same failure repeats, at most one line per kclient.DefaultRepeatInterval
// with how many times it repeated, and a line when the loop recovers.
func (m *Mirror) setErr(loop string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.fails[loop]
	if err == nil {
		if f != nil {
			m.log.Info("sync loop recovered", "loop", loop, "failures", f.total)
		}
		delete(m.errs, loop)
		delete(m.fails, loop)
		return
	}
	now := m.now()
	if f == nil {
		f = &loopFailures{}
		m.fails[loop] = f
	}
	f.total++
	switch {
	case m.errs[loop] != err.Error():
		m.log.Error("sync loop failed; retrying", "loop", loop, "error", err)
		f.repeats, f.loggedAt = 0, now
	default:
		f.repeats++
		if now.Sub(f.loggedAt) >= kclient.DefaultRepeatInterval {
			m.log.Error("sync loop still failing; retrying", "loop", loop, "error", err, "repeated", f.repeats)
			f.repeats, f.loggedAt = 0, now
		}
	}
	m.errs[loop] = err.Error()
}

// supervise connects, then runs the mirror's metadata-sync lease and its
// sync loops (topics, topic configs, groups, ACLs, read-only ACLs) until the
// mirror is stopped, and then releases the lease. Each loop runs in its own
// goroutine, owned by supervise (itself owned by m.wg), so that one loop's
// failure does not hold up the others.
func (m *Mirror) supervise() {
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
	lease := syncloop.NewLease(m.d.Store, m.name, cfg.MetadataRefreshInterval, m.log, m.TriggerSync)
	m.mu.Lock()
	m.lease = lease
	m.mu.Unlock()
	if stop, err := syncloop.ObserveLease(m.d.Metrics, m.name, lease); err != nil {
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
		syncloop.NewLoop("read-only", cfg.MetadataRefreshInterval, m.SyncReadOnly, m.loopDone).Gated(lease.Held),
		// Every daemon, lease or not: its partitions' lag.
		syncloop.NewLoop("source-ends", cfg.MetadataRefreshInterval, m.refreshSourceEnds, m.sourceEndsDone),
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
			m.ended("a sync loop")
		}()
	}
	wg.Wait()
	// Stopped cleanly: release the lease so that another daemon takes over
	// at its next attempt rather than after the TTL.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease.Release(ctx)
}

// sourceDownSince returns since when the source cluster does not answer;
// zero while it does.
func sourceDownSince(cs []admin.ClusterStatus) time.Time {
	for _, c := range cs {
		if c.Cluster == "source" && !c.Reachable && !c.Since.IsZero() {
			return c.Since
		}
	}
	return time.Time{}
}

// withSourceView corrects a partition's status with what the mirror knows
// of the source besides the partition's fetches: a larger end offset read
// by the source-ends loop (the partition's own is stale while its appends
// stall), and, while the source does not answer, a lag that is unknown
// (-1), not the 0 it was when the source went away.
func withSourceView(st runner.Status, srcEnds map[topicPartition]int64, srcDown bool) runner.Status {
	if e, ok := srcEnds[topicPartition{st.Topic, st.Partition}]; ok && st.State == partition.Mirroring.String() && st.Lag >= 0 && e > st.SourceHighWatermark {
		st.Lag += e - st.SourceHighWatermark
		st.SourceHighWatermark = e
	}
	if srcDown && st.Lag >= 0 {
		st.Lag = -1
	}
	return st
}

// PartitionStatus is r's status as the mirror's Status shows it
// (withSourceView): what an operator's wait for catch-up must see.
func (m *Mirror) PartitionStatus(r *runner.Runner) runner.Status {
	m.mu.Lock()
	srcEnds := m.srcEnds
	m.mu.Unlock()
	return withSourceView(r.Status(), srcEnds, !sourceDownSince(m.Clusters()).IsZero())
}

// refreshSourceEnds reads the source's end offsets of the topics of the
// mirror's MIRRORING partitions (one ListOffsets per source broker). A
// partition learns its source's end from its fetches, but one whose
// appends stall (the destination cut, or full) stops fetching, and the end
// it knows goes stale: its lag would stay flat while the source moves on.
// Status takes the larger of the two ends.
func (m *Mirror) refreshSourceEnds(ctx context.Context) error {
	seen := map[string]bool{}
	var topics []string
	for _, r := range m.RunnersOf(func(string) bool { return true }) {
		if t := r.Topic(); !seen[t] && r.Record().State == partition.Mirroring {
			seen[t] = true
			topics = append(topics, t)
		}
	}
	m.mu.Lock()
	adm := m.srcAdm
	m.mu.Unlock()
	ends := map[topicPartition]int64{}
	if len(topics) > 0 && adm != nil {
		listed, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return fmt.Errorf("mirror %s: reading the source's end offsets: %w", m.name, err)
		}
		listed.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				ends[topicPartition{o.Topic, o.Partition}] = o.Offset
			}
		})
	}
	m.mu.Lock()
	m.srcEnds = ends
	m.mu.Unlock()
	return nil
}

// sourceEndsDone logs a failed source-ends round at debug level: the lag
// then stays what the partitions know, and an unreachable source is
// reported by the cluster's health, not as a sync loop error.
func (m *Mirror) sourceEndsDone(_ string, err error) {
	if err != nil {
		m.log.Debug("the source's end offsets were not read this round", "error", err)
	}
}

// loopDone records a sync round's outcome and counts its failure.
func (m *Mirror) loopDone(loop string, err error) {
	if err != nil {
		switch loop {
		case "topic-configs":
			m.d.Instruments.ConfigSyncError(m.name)
		case "topics":
			m.d.Instruments.MetadataRefreshError(m.name)
		}
		// The groups and acls loops count their errors themselves
		// (ConsumerGroupOffsetSyncError, AclSyncError).
	}
	m.setErr(loop, err)
}

// TriggerSync asks every sync loop for a round now (reload).
func (m *Mirror) TriggerSync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.loops {
		l.Trigger()
	}
}

// connect builds the source client (and a failback mirror's destination
// client) and the data path.
func (m *Mirror) connect(cfg *config.Config) error {
	if m.dstCfg != nil && m.dst == nil {
		opts, err := kclient.ClusterOpts(m.ctx, cfg, m.dstCfg, kclient.RoleDestination, m.name, m.d.Credentials)
		if err != nil {
			return fmt.Errorf("mirror %s: %w", m.name, err)
		}
		dst, err := kgo.NewClient(append(opts, kgo.ClientID(kclient.ClientID(m.dstCfg.ClientID, "destination-"+m.name)), m.dstHealth.Hook(), m.clientMetrics("destination"))...)
		if err != nil {
			return fmt.Errorf("mirror %s: destination cluster: %w", m.name, err)
		}
		m.mu.Lock()
		m.dst, m.dstAdm = dst, kadm.NewClient(dst)
		m.mu.Unlock()
	}
	opts, err := kclient.ClusterOpts(m.ctx, cfg, &m.cfg.Source, kclient.RoleSource, m.name, m.d.Credentials)
	if err != nil {
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	src, err := kgo.NewClient(append(opts, kgo.ClientID(kclient.ClientID(m.cfg.Source.ClientID, "source-"+m.name)), m.srcHealth.Hook(), m.clientMetrics("source"))...)
	if err != nil {
		return fmt.Errorf("mirror %s: source cluster: %w", m.name, err)
	}
	ts, err := m.newTopicSync(src)
	if err != nil {
		src.Close()
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	dp, err := datapath.New(datapath.Deps{Mirror: m.name, Source: src, Dest: m.dst, Config: cfg, Log: m.log,
		Metrics: m.d.Metrics, Throttle: m.d.Throttle, Budget: m.d.Budget, Topics: ts})
	if err != nil {
		src.Close()
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.src, m.srcAdm, m.dp, m.topics = src, kadm.NewClient(src), dp, ts
	m.mu.Unlock()
	gs, err := m.newGroupSync()
	if err != nil {
		dp.Close()
		src.Close()
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	as, err := m.newACLSync()
	if err != nil {
		dp.Close()
		src.Close()
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.groups, m.acls = gs, as
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		dp.Run(m.ctx)
		m.ended("data path")
	}()
	return nil
}

// ended counts a goroutine of the mirror that returned, if the mirror
// still runs: each runs until the mirror stops, so one that ends before
// is dead (KIP-1279 DeadThreadCount), which the log says once.
func (m *Mirror) ended(what string, args ...any) {
	if m.ctx.Err() != nil {
		return
	}
	m.dead.Add(1)
	m.log.Error(what+" ended while the mirror runs; restart the mirror or the daemon, and report it", args...)
}

// DeadThreads counts the mirror's goroutines (partition runners, its data
// path, its sync loops) that ended while the mirror still ran.
func (m *Mirror) DeadThreads() int64 { return m.dead.Load() }

// clientMetrics returns the hook that feeds the connection and request
// metrics of the mirror's client of cluster (source, or a failback
// mirror's destination); none when they cannot be created.
func (m *Mirror) clientMetrics(cluster string) kgo.Opt {
	c, err := m.d.Metrics.Client(cluster, m.name)
	if err != nil {
		m.warnOnce("client-metrics", "the cluster client metrics are not exported", "error", err)
	}
	return c.Hook()
}

// warnOnce logs msg the first time key is seen.
func (m *Mirror) warnOnce(key, msg string, args ...any) {
	m.mu.Lock()
	seen := m.warned[key]
	m.warned[key] = true
	m.mu.Unlock()
	if !seen {
		m.log.Warn(msg, args...)
	}
}

// launch registers r and starts its goroutine, owned by m.wg.
//
// Two paths may build a runner for the same partition at once (the topics
// round and an operator's start): the first one launched wins, and the
// other is dropped before it runs, so one goroutine owns the partition.
func (m *Mirror) launch(tp topicPartition, r *runner.Runner) {
	m.mu.Lock()
	if _, running := m.runners[tp]; running {
		m.mu.Unlock()
		return
	}
	rctx, cancel := context.WithCancel(m.ctx)
	h := halt{cancel: cancel, done: make(chan struct{})}
	m.runners[tp] = r
	m.halts[tp] = h
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(h.done)
		r.Run(rctx)
		if m.ctx.Err() == nil && rctx.Err() != nil {
			return // ended on purpose (removeRunner)
		}
		m.ended("partition runner", "topic", tp.topic, "partition", tp.partition)
	}()
}

// halt ends one runner's goroutine: cancel its context, then wait for done.
type halt struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// removeRunner ends the runner of tp, waits until its goroutine returned,
// lets forget act on it (the runner no longer runs), and only then removes
// it from the mirror's runners, so that no other runner of tp can be
// launched meanwhile. The runner stays registered if forget fails.
func (m *Mirror) removeRunner(ctx context.Context, tp topicPartition, forget func(*runner.Runner) error) error {
	m.mu.Lock()
	r, h := m.runners[tp], m.halts[tp]
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	h.cancel()
	select {
	case <-h.done:
	case <-ctx.Done():
		return fmt.Errorf("mirror %s: topic %s partition %d: waiting for its runner to end: %w", m.name, tp.topic, tp.partition, context.Cause(ctx))
	}
	if err := forget(r); err != nil {
		// Run it again as it was: the partition keeps its record.
		m.mu.Lock()
		delete(m.runners, tp)
		delete(m.halts, tp)
		m.mu.Unlock()
		m.launch(tp, r)
		return err
	}
	m.mu.Lock()
	delete(m.runners, tp)
	delete(m.halts, tp)
	m.mu.Unlock()
	return nil
}

// Status is the mirror's status: its sync loops' errors, groups, lease and
// partitions, sorted by topic and partition.
func (m *Mirror) Status() admin.MirrorStatus {
	m.mu.Lock()
	rs := make([]*runner.Runner, 0, len(m.runners))
	for _, r := range m.runners {
		rs = append(rs, r)
	}
	loops := make([]string, 0, len(m.errs))
	for loop := range m.errs {
		loops = append(loops, loop)
	}
	sort.Strings(loops)
	ms := admin.MirrorStatus{Name: m.name, TopicConfigErrors: append([]admin.TopicConfigError(nil), m.cfgErrs...)}
	for _, loop := range loops {
		ms.Errors = append(ms.Errors, admin.LoopError{Loop: loop, Message: Summarize(m.name, m.errs[loop]), Cause: m.errs[loop]})
	}
	if m.groups != nil {
		ms.Groups = m.groups.Status()
		ms.Notes = append(ms.Notes, m.groups.Notes()...)
	}
	if m.topics != nil {
		ms.Notes = append(ms.Notes, m.topics.Notes()...)
	}
	lease := m.lease
	m.mu.Unlock()
	ms.Clusters = m.Clusters()
	srcDown := sourceDownSince(ms.Clusters)
	if !srcDown.IsZero() {
		ms.Notes = append(ms.Notes, fmt.Sprintf("the source cluster has not answered since %s: lag is unknown (-1) until it does", srcDown.UTC().Format(time.RFC3339)))
	}
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
	var lines []string
	for _, e := range ms.Errors {
		lines = append(lines, e.Loop+": "+e.Message)
	}
	ms.Error = strings.Join(lines, "; ")
	m.mu.Lock()
	srcEnds := m.srcEnds
	m.mu.Unlock()
	for _, r := range rs {
		st := withSourceView(r.Status(), srcEnds, !srcDown.IsZero())
		ms.Partitions = append(ms.Partitions, st)
		if st.LastError != "" && (st.State == partition.Failed.String() || st.Retry != "") {
			ms.Errors = append(ms.Errors, admin.LoopError{Loop: fmt.Sprintf("partition %s/%d", st.Topic, st.Partition),
				Message: Summarize(m.name, st.LastError), Cause: st.LastError})
		}
	}
	return ms
}

// maxSummary is the length beyond which Summarize leaves out the middle
// layers of an error.
const maxSummary = 240

// Summarize makes one short line of a mirror's error message: without the
// mirror's name and the package prefixes that wrapping repeats, and, when
// it is still long, without its middle layers (what failed and the root
// cause are kept, the ": "-separated first and last two parts). The full
// message stays available as the cause.
func Summarize(mirror, msg string) string {
	for _, p := range []string{`mirror "` + mirror + `": `, "mirror " + mirror + ": ", "aclsync: ", "groupsync: ", "topicsync: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	parts := strings.Split(msg, ": ")
	kept := parts[:0]
	for _, p := range parts {
		if len(kept) == 0 || kept[len(kept)-1] != p {
			kept = append(kept, p)
		}
	}
	out := strings.Join(kept, ": ")
	if len(out) > maxSummary && len(kept) > 3 {
		out = kept[0] + ": …: " + strings.Join(kept[len(kept)-2:], ": ")
	}
	return out
}

// Clusters says whether the mirror can talk to its source and destination
// clusters now; the destination is left out while no tracker watches it
// (a mirror built without one, in tests).
func (m *Mirror) Clusters() []admin.ClusterStatus {
	out := []admin.ClusterStatus{clusterStatus("source", m.srcHealth)}
	if m.dstHealth != nil {
		out = append(out, clusterStatus("destination", m.dstHealth))
	}
	return out
}

func clusterStatus(name string, h *kclient.Health) admin.ClusterStatus {
	s := h.Snapshot()
	return admin.ClusterStatus{Cluster: name, Reachable: s.Reachable, Since: s.Since, LastError: s.LastError}
}
