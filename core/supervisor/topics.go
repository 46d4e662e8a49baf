package supervisor

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
	"github.com/kmirror/kmirror/core/scope"
	"github.com/kmirror/kmirror/core/topicsync"
	"github.com/kmirror/kmirror/sdk/filter"
)

// scopeFilter returns the filter that decides the mirror's scope (topics,
// groups, ACL bindings): the built-in include/exclude rules of its
// configuration (core/scope), then the filter plugins of
// mirror.filter.plugins in order (filter.Chain). A plugin the engine
// cannot find fails every call, which makes the sync cycle change nothing
// for that kind: a missing plugin never widens the mirror.
func (m *Mirror) scopeFilter() filter.Filter {
	builtin := scope.New(&m.cfg)
	if len(m.cfg.FilterPlugins) == 0 {
		return builtin
	}
	chain := []filter.Filter{builtin}
	for _, name := range m.cfg.FilterPlugins {
		var f filter.Filter
		var err error
		if m.d.Filters == nil {
			err = fmt.Errorf("this engine has no filter plugins")
		} else {
			f, err = m.d.Filters(name)
		}
		if err != nil {
			f = failingFilter{name: name, err: fmt.Errorf("mirror %s: filter plugin %q: %w", m.name, name, err)}
		}
		chain = append(chain, strictFilter{Filter: f, name: name})
	}
	return filter.Chain(chain...)
}

// strictFilter is a filter plugin in a mirror's chain. A plugin whose Info
// is not known (it never started) is asked about every kind, so that its
// failure stops the cycle instead of letting everything through.
type strictFilter struct {
	filter.Filter
	name string
}

func (f strictFilter) Info() filter.Info {
	if i := f.Filter.Info(); len(i.Kinds) > 0 {
		return i
	}
	return filter.Info{Name: f.name, ProtocolMajor: filter.ProtocolMajor, ProtocolMinor: filter.ProtocolMinor, Kinds: filter.AllKinds()}
}

// failingFilter stands for a filter plugin that cannot be found.
type failingFilter struct {
	name string
	err  error
}

func (f failingFilter) Info() filter.Info {
	return filter.Info{Name: f.name, ProtocolMajor: filter.ProtocolMajor, ProtocolMinor: filter.ProtocolMinor, Kinds: filter.AllKinds()}
}

func (f failingFilter) FilterTopics(context.Context, string, []filter.Topic) ([]filter.Topic, error) {
	return nil, f.err
}

func (f failingFilter) FilterGroups(context.Context, string, []filter.Group) ([]filter.Group, error) {
	return nil, f.err
}

func (f failingFilter) FilterACLs(context.Context, string, []filter.ACLBinding) ([]filter.ACLBinding, error) {
	return nil, f.err
}

// inScope reports whether a source topic is mirrored by the built-in rules:
// it matches some mirror.topics.include pattern and no mirror.topics.exclude
// pattern (exclude always wins), and it is not internal (internal topics
// never mirror). It serves the checks of a single name; the topics round
// filters every source topic at once (scopeFilter).
func inScope(m *config.Mirror, topic string) bool {
	return scope.New(m).Topic(filter.Topic{Name: topic})
}

// sourceTopic is what the mirror needs to know of a source topic.
type sourceTopic = topicsync.Topic

// topicIDString prints a topic id as a UUID, as the fetcher's errors do.
func topicIDString(id [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}

// parseTopicID reads what topicIDString wrote.
func parseTopicID(s string) ([16]byte, bool) {
	var id [16]byte
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		return id, false
	}
	return [16]byte(b), true
}

// newTopicSync builds the mirror's topic syncer (topics, topic configs,
// the destination's max.message.bytes, read-only ACLs).
func (m *Mirror) newTopicSync(src *kgo.Client) (*topicsync.Syncer, error) {
	dc := &m.dcfg.Destination
	if m.dstCfg != nil {
		dc = m.dstCfg
	}
	var user string
	if s, err := dc.SASL(); err == nil {
		user = s.Username
	}
	return topicsync.New(topicsync.Options{
		Mirror:            m.name,
		Source:            src,
		Destination:       m.dst,
		Filter:            m.scopeFilter(),
		InScope:           func(topic string) bool { return inScope(&m.cfg, topic) },
		PropertiesExclude: m.cfg.TopicPropertiesExclude,
		Engine:            topicsEngine{m},
		DestinationUser:   user,
		LimitTTL:          m.dcfg.MetadataRefreshInterval,
		Logger:            m.d.Log,
	})
}

// topicSync returns the mirror's topic syncer; nil before it connected.
func (m *Mirror) topicSync() *topicsync.Syncer {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.topics
}

// syncTopics is the topics loop's round (topicsync.Syncer.Sync): it creates
// and expands destination topics and starts, stops and fails the mirror's
// partitions through topicsEngine.
func (m *Mirror) syncTopics(ctx context.Context) error {
	ts := m.topicSync()
	if ts == nil {
		return nil
	}
	_, err := ts.Sync(ctx)
	return err
}

// syncTopicConfigs is the topic-configs loop's round
// (topicsync.Syncer.SyncConfigs). Each key the destination rejects is
// counted in kmirror_topic_config_metadata_sync_error_total and, with an
// excluded destination max.message.bytes below the source's, listed in the
// mirror's status until a round no longer finds it.
func (m *Mirror) syncTopicConfigs(ctx context.Context) error {
	ts := m.topicSync()
	if ts == nil {
		return nil
	}
	rep, err := ts.SyncConfigs(ctx)
	for range rep.Rejected {
		m.d.Instruments.ConfigSyncError(m.name)
	}
	if err != nil || ctx.Err() != nil {
		return err // stopping: the status keeps the last complete round's
	}
	errs := make([]admin.TopicConfigError, len(rep.Errors))
	for i, e := range rep.Errors {
		errs[i] = admin.TopicConfigError{Topic: e.Topic, Key: e.Key, Error: e.Error}
	}
	m.mu.Lock()
	m.cfgErrs = errs
	m.mu.Unlock()
	return nil
}

// SyncReadOnly is the read-only loop's round: the DENY WRITE ACL on every
// topic some of whose partitions are not STOPPED, none on the others.
func (m *Mirror) SyncReadOnly(ctx context.Context) error {
	ts := m.topicSync()
	if ts == nil {
		return nil
	}
	protect, release := m.readOnlyTopics()
	return ts.SyncReadOnly(ctx, protect, release)
}

// readOnlyTopics returns the topics whose partitions the mirror runs, split
// into those that must be read-only (some partition not STOPPED) and those
// that must be writable (every partition STOPPED).
func (m *Mirror) readOnlyTopics() (protect, release []string) {
	m.mu.Lock()
	running := map[string]bool{}
	for tp, r := range m.runners {
		st := r.Record().State
		if _, seen := running[tp.topic]; !seen {
			running[tp.topic] = false
		}
		if st != partition.Stopped {
			running[tp.topic] = true
		}
	}
	m.mu.Unlock()
	for t, on := range running {
		if on {
			protect = append(protect, t)
		} else {
			release = append(release, t)
		}
	}
	sort.Strings(protect)
	sort.Strings(release)
	return protect, release
}

// isReadOnlyTopic reports whether topic is one the mirror keeps read-only
// (for ACL sync's Managed filter).
func (m *Mirror) isReadOnlyTopic(topic string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for tp := range m.runners {
		if tp.topic == topic {
			return true
		}
	}
	return false
}

// topicsEngine is the mirror as its topic syncer sees it
// (topicsync.Engine): its runners, its partition records, the engine's
// topic claims and the operator's rules.
type topicsEngine struct{ m *Mirror }

func (v topicsEngine) Running() []topicsync.Running {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	out := make([]topicsync.Running, 0, len(v.m.runners))
	for tp, r := range v.m.runners {
		out = append(out, topicsync.Running{Topic: tp.topic, Partition: tp.partition, TopicID: r.TopicID()})
	}
	return out
}

func (v topicsEngine) Known(ctx context.Context) ([]string, error) {
	m := v.m
	parts, err := m.d.Machine.LoadMirror(ctx, m.name)
	if err != nil && len(parts) == 0 {
		return nil, fmt.Errorf("mirror %s: loading partition states: %w", m.name, err)
	}
	seen := map[string]bool{}
	var out []string
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	m.mu.Lock()
	for tp := range m.runners {
		add(tp.topic)
	}
	m.mu.Unlock()
	for _, p := range parts {
		add(p.Record().Topic)
	}
	sort.Strings(out)
	return out, nil
}

func (v topicsEngine) WithoutStopped(ctx context.Context, topics []topicsync.Topic) ([]topicsync.Topic, error) {
	return v.m.withoutStopped(ctx, topics)
}

func (v topicsEngine) Claim(topics []string) map[string]string {
	return v.m.d.Claims.Claim(v.m.dstID, v.m.name, topics)
}

func (v topicsEngine) Owns(topic string) bool {
	return v.m.d.Claims.Owner(v.m.dstID, topic) == v.m.name
}

// Start starts a runner for each of the first n partitions of t that has
// none. The topic is read-only before any of its partitions mirrors.
//
// The partitions' records are loaded (or created) startParallel at a
// time, and their runners launched together, a chunk of startChunkSize
// partitions after another: the state store's writes overlap, and the
// runners of a chunk prepare together, sharing their requests to the
// clusters (one ListOffsets per topic and broker, not one per partition).
func (v topicsEngine) Start(ctx context.Context, t topicsync.Topic, n int32) error {
	m := v.m
	var todo []int32
	for p := int32(0); p < n; p++ {
		m.mu.Lock()
		_, running := m.runners[topicPartition{t.Name, p}]
		m.mu.Unlock()
		if !running {
			todo = append(todo, p)
		}
	}
	for len(todo) > 0 {
		chunk := todo[:min(len(todo), startChunkSize)]
		todo = todo[len(chunk):]
		if err := m.startChunk(ctx, t, chunk); err != nil {
			return err
		}
	}
	return nil
}

const (
	// startParallel is how many partition records a mirror loads or
	// creates at once when it starts partitions.
	startParallel = 16
	// startChunk is how many partitions' runners a mirror launches
	// together.
	startChunkSize = 1024
)

// startChunk loads or creates the records of parts of t (startParallel at
// a time), protects the topic, then launches their runners. On an error it
// still launches the runners whose records loaded, as a sequential start
// would have, and returns the first error.
func (m *Mirror) startChunk(ctx context.Context, t topicsync.Topic, parts []int32) error {
	runners := make([]*runner.Runner, len(parts))
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(startParallel, len(parts)) {
		wg.Add(1)
		go func() { // owned by startChunk, which waits for it
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(parts) || lctx.Err() != nil {
					return
				}
				r, err := newRunner(lctx, m, t, parts[i])
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
					return
				}
				runners[i] = r
			}
		}()
	}
	wg.Wait()
	protected := false
	for i, r := range runners {
		if r == nil {
			continue
		}
		if !protected && r.Record().State != partition.Stopped {
			if err := m.topicSync().Protect(ctx, t.Name); err != nil {
				return err
			}
			protected = true
		}
		m.launch(topicPartition{t.Name, parts[i]}, r)
	}
	return firstErr
}

func (v topicsEngine) Recreated(topic string, p int32, id [16]byte) {
	v.m.mu.Lock()
	r := v.m.runners[topicPartition{topic, p}]
	v.m.mu.Unlock()
	if r != nil {
		r.RequestRecreated(id)
	}
}

// Written reports whether a partition of topic has copied records to the
// destination: a runner that knows a destination end above zero, or a
// record with a mirrored offset, a checkpoint above zero or a
// transactional writer.
func (v topicsEngine) Written(ctx context.Context, topic string) (bool, error) {
	m := v.m
	for _, r := range m.RunnersOf(func(t string) bool { return t == topic }) {
		if r.DestinationEnd() > 0 {
			return true, nil
		}
	}
	parts, err := m.d.Machine.LoadMirror(ctx, m.name)
	if err != nil && len(parts) == 0 {
		return false, fmt.Errorf("mirror %s: loading partition states: %w", m.name, err)
	}
	for _, p := range parts {
		rec := p.Record()
		if rec.Topic == topic && (rec.LastMirroredOffset > 0 || rec.Verified != nil && rec.Verified.Dest > 0 || len(rec.TxnWriters) > 0) {
			return true, nil
		}
	}
	return false, nil
}

// DestinationDeleted fails every partition of topic for good: runners are
// launched for its recorded partitions that have none, and each is asked
// to fail (an append retrying against the missing topic ends at once).
func (v topicsEngine) DestinationDeleted(ctx context.Context, topic string) error {
	m := v.m
	match := func(t string) bool { return t == topic }
	if err := m.launchRecorded(ctx, match); err != nil {
		return err
	}
	for _, r := range m.RunnersOf(match) {
		r.RequestDestinationDeleted()
	}
	return nil
}

// Stop takes the partitions of each topic in reasons through STOPPING to
// STOPPED: running ones, and ones a previous run (or configuration) left
// MIRRORING, PAUSED, FAILED or STOPPING in the state store.
func (v topicsEngine) Stop(ctx context.Context, reasons map[string]string) error {
	m := v.m
	m.mu.Lock()
	for tp, r := range m.runners {
		if reason := reasons[tp.topic]; reason != "" {
			r.RequestStop(reason)
		}
	}
	m.mu.Unlock()
	parts, err := m.d.Machine.LoadMirror(ctx, m.name)
	if err != nil && len(parts) == 0 {
		return fmt.Errorf("mirror %s: loading partition states: %w", m.name, err)
	}
	for _, p := range parts {
		rec := p.Record()
		reason := reasons[rec.Topic]
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
