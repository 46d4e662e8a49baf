package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/control"
	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/kclient"
	"github.com/kmirror/kmirror/core/livestatus"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/supervisor"
	"github.com/kmirror/kmirror/core/throttle"
	"github.com/kmirror/kmirror/core/topicsync"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// ErrCannotWrite means kmirror's destination principal may not write to a
// read-only mirror topic: it is not a super user of the destination
// (topicsync.ErrCannotWrite).
var ErrCannotWrite = topicsync.ErrCannotWrite

// Options configure an Engine.
type Options struct {
	// Store keeps partition states, offset maps and transaction writers.
	// Required. The engine does not close it.
	Store statestore.Store
	// Logger is the parent logger; the engine logs as "mirror". Required.
	Logger hclog.Logger
	// Metrics receives the engine's instruments. Required.
	Metrics *metrics.Provider
	// Credentials gives every SASL client its credentials, through the
	// plugin host (kclient.Credentials). Required when a cluster uses SASL.
	Credentials kclient.Credentials
	// Filters returns the filter plugin of a name in mirror.filter.plugins.
	Filters func(name string) (filter.Filter, error)
	// LiveInterval is how often the status page's history is sampled
	// (0: livestatus.DefaultInterval, 5 s).
	LiveInterval time.Duration
}

// Engine runs every configured mirror. It implements the daemon's
// Component, Describer and StatusPage interfaces.
type Engine struct {
	opts    Options
	log     hclog.Logger
	inst    *metrics.Engine
	limiter *throttle.Limiter
	// budget bounds the bytes fetched and not yet appended, shared by
	// every mirror's fetcher (mirror.buffer.max.bytes).
	budget *fetcher.Budget

	mu      sync.Mutex
	cfg     *config.Config
	machine *partition.Machine
	dst     *kgo.Client
	dstAdm  *kadm.Client
	// dstHealth tracks the destination's reachability (a hook of dst).
	dstHealth *kclient.Health
	mirrors   map[string]*supervisor.Mirror

	// noPartitionSeries is metrics.partition.series.enable in force,
	// negated (so that it is on before Start); read by every scrape, so
	// not under mu, which a reload holds while it restarts mirrors.
	noPartitionSeries atomic.Bool

	claimMu sync.Mutex
	claims  map[string]string // destination cluster id + NUL + topic → the mirror that writes it

	ctlMu    sync.Mutex
	controls map[string]*control.Holder // mirror → what operators asked of it

	// live keeps the status page's history, sampled every liveEvery by
	// a goroutine of the engine's (liveStop ends it, liveDone says it
	// ended).
	live      *livestatus.Tracker
	liveEvery time.Duration
	liveStop  context.CancelFunc
	liveDone  chan struct{}
}

// New validates opts and returns an Engine; nothing runs until Start.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil || opts.Logger == nil || opts.Metrics == nil {
		return nil, errors.New("mirror: Options.Store, Logger and Metrics are required")
	}
	e := &Engine{opts: opts, log: opts.Logger.Named("mirror"), limiter: throttle.New(throttle.Unlimited), budget: fetcher.NewBudget(fetcher.DefaultBudgetBytes), mirrors: map[string]*supervisor.Mirror{}, claims: map[string]string{}, controls: map[string]*control.Holder{}}
	inst, err := newInstruments(opts.Metrics, e)
	if err != nil {
		return nil, err
	}
	e.inst = inst
	return e, nil
}

// Name implements daemon.Component.
func (e *Engine) Name() string { return "mirrors" }

// Start connects to the destination and starts every mirror. A mirror whose
// source cannot be reached does not stop the others: its partitions keep
// their states and the mirror retries.
func (e *Engine) Start(ctx context.Context, cfg *config.Config) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	machine, err := partition.NewMachine(e.opts.Store,
		partition.WithBackoff(partition.Backoff{Initial: cfg.FailedRetryInitialBackoff, Max: cfg.FailedRetryMaxBackoff, MaxAttempts: cfg.FailedRetryMaxAttempts}),
		partition.WithObserver(e.observe))
	if err != nil {
		return err
	}
	opts, err := kclient.ClusterOpts(ctx, cfg, &cfg.Destination, kclient.RoleDestination, "", e.opts.Credentials)
	if err != nil {
		return err
	}
	e.dstHealth = kclient.NewHealth(e.log.With("cluster", "destination"), 0)
	// The destination client's connection and request metrics: every
	// mirror shares the client, so they have no mirror ("").
	dstMetrics, err := e.opts.Metrics.Client("destination", "")
	if err != nil {
		return fmt.Errorf("destination cluster: its client metrics: %w", err)
	}
	dst, err := kgo.NewClient(append(opts, kgo.ClientID(kclient.ClientID(cfg.Destination.ClientID, "destination")), e.dstHealth.Hook(), dstMetrics.Hook())...)
	if err != nil {
		return fmt.Errorf("destination cluster: %w", err)
	}
	e.cfg, e.machine, e.dst, e.dstAdm = cfg, machine, dst, kadm.NewClient(dst)
	e.limiter.SetRate(cfg.ReplicationThrottledRate)
	e.setBudget(cfg)
	e.noPartitionSeries.Store(!cfg.MetricsPartitionSeries)
	for i := range cfg.Mirrors {
		e.startMirror(cfg.Mirrors[i])
	}
	e.startRecordedRuntime(ctx)
	e.startLive()
	return nil
}

// startLive starts sampling the status page's history; e.mu must be held.
func (e *Engine) startLive() {
	if e.liveStop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.live, e.liveStop, e.liveDone = livestatus.New(livestatus.DefaultKeep), cancel, make(chan struct{})
	if e.liveEvery = e.opts.LiveInterval; e.liveEvery <= 0 {
		e.liveEvery = livestatus.DefaultInterval
	}
	live, every, done := e.live, e.liveEvery, e.liveDone
	go func() { // owned by the engine: Stop cancels it and waits for done.
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			live.Sample(time.Now(), e.Status(), e.mirrored)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// mirrored is mirror's append counters, for the status page.
func (e *Engine) mirrored(mirror string) livestatus.Counters {
	b, o := e.inst.Mirrored(mirror)
	return livestatus.Counters{Bytes: b, Offsets: o}
}

// Live is the status page's data (daemon.StatusPage): the status now,
// with each mirror's recent history.
func (e *Engine) Live() any {
	e.mu.Lock()
	live, every := e.live, e.liveEvery
	e.mu.Unlock()
	if live == nil {
		live = livestatus.New(livestatus.DefaultKeep)
	}
	return live.Live(time.Now(), e.Status(), every)
}

// newMirror returns mirror mc of the running configuration; e.mu must be
// held.
func (e *Engine) newMirror(mc config.Mirror) *supervisor.Mirror {
	name := mc.Name
	return supervisor.New(supervisor.Deps{
		Store: e.opts.Store, Metrics: e.opts.Metrics, Instruments: e.inst, Machine: e.machine,
		Budget: e.budget, Throttle: e.limiter.Wait, Log: e.log, Dest: e.dst, DestAdmin: e.dstAdm, DestHealth: e.dstHealth,
		Rules:       func() *control.Holder { return e.controlOf(name) },
		Claims:      claims{e},
		NoReverse:   e.checkNoReverse,
		Credentials: e.opts.Credentials,
		Filters:     e.opts.Filters,
	}, e.cfg, mc)
}

// startMirror starts one mirror; e.mu must be held.
func (e *Engine) startMirror(mc config.Mirror) {
	m := e.newMirror(mc)
	e.mirrors[mc.Name] = m
	m.Start()
}

// Reload applies a new configuration: the throttle rate at once, mirrors
// added or removed, and mirrors whose settings changed restarted. A changed
// destination or state store needs a restart and is rejected.
func (e *Engine) Reload(ctx context.Context, cfg *config.Config) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if settingsChanged(e.cfg, cfg, "destination.") {
		return errors.New("the destination cluster's settings changed; they take effect after a restart (the running configuration stays)")
	}
	if settingsChanged(e.cfg, cfg, "state.") {
		return errors.New("the state store's settings changed; they take effect after a restart (the running configuration stays)")
	}
	e.limiter.SetRate(cfg.ReplicationThrottledRate)
	e.setBudget(cfg)
	e.noPartitionSeries.Store(!cfg.MetricsPartitionSeries)
	old := e.cfg
	e.cfg = cfg
	for name, m := range e.mirrors {
		if m.Runtime() {
			// A failback mirror is built from the mirror it reverses (and
			// the destination's settings): restart it when those change.
			if daemonSettingsChanged(old, cfg) || m.ReverseOf() != "" && mirrorChanged(old, cfg, m.ReverseOf()) {
				m.Stop(ctx)
				delete(e.mirrors, name)
			}
			continue
		}
		nm, ok := cfg.Mirror(name)
		if !ok || mirrorChanged(old, cfg, name) || daemonSettingsChanged(old, cfg) {
			m.Stop(ctx)
			delete(e.mirrors, name)
			if ok {
				e.log.Info("mirror settings changed; restarting it", "mirror", name)
				e.startMirror(*nm)
			} else {
				e.log.Info("mirror removed from the configuration; its partitions keep their state", "mirror", name)
			}
		}
	}
	for _, m := range e.mirrors {
		m.TriggerSync() // a reload syncs at once, even when nothing changed
	}
	for i := range cfg.Mirrors {
		if _, ok := e.mirrors[cfg.Mirrors[i].Name]; !ok {
			e.log.Info("mirror added", "mirror", cfg.Mirrors[i].Name)
			e.startMirror(cfg.Mirrors[i])
		}
	}
	e.startRecordedRuntime(ctx)
	return nil
}

// settingsOf returns the effective settings whose key starts with prefix.
func settingsOf(cfg *config.Config, prefix string) []config.Setting {
	var out []config.Setting
	for _, s := range cfg.Effective() {
		if strings.HasPrefix(s.Path, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// settingsChanged reports whether a and b differ in a key whose path starts
// with prefix ("destination.", "state.", "mirrors[dc1]."): one more or one
// fewer key, or one effective value (defaults included) that differs. The
// settings are compared key by key, path and value, as config.Effective
// lists them, so a set secret compares as config.Redacted: changing only a
// secret's value restarts nothing (a secret named by a file is read again
// at every connection).
func settingsChanged(a, b *config.Config, prefix string) bool {
	return !slices.Equal(settingsOf(a, prefix), settingsOf(b, prefix))
}

// mirrorChanged reports whether mirror name's own keys (its scope, sync and
// data keys and its source cluster's client keys) differ in a and b; a
// mirror missing from one of them has no keys there.
func mirrorChanged(a, b *config.Config, name string) bool {
	return settingsChanged(a, b, "mirrors["+name+"].")
}

// daemonSettingsChanged reports whether a daemon-wide key that the data path
// reads at start (fetch sizes, timeouts) changed; the throttle rate and the
// log level apply without a restart.
func daemonSettingsChanged(a, b *config.Config) bool {
	return a.NumReplicaFetchers != b.NumReplicaFetchers || a.ReplicaFetchMaxBytes != b.ReplicaFetchMaxBytes ||
		a.ReplicaFetchMinBytes != b.ReplicaFetchMinBytes || a.ReplicaFetchResponseMaxBytes != b.ReplicaFetchResponseMaxBytes ||
		a.ReplicaFetchWaitMax != b.ReplicaFetchWaitMax || a.ReplicaFetchBackoff != b.ReplicaFetchBackoff ||
		a.RequestTimeout != b.RequestTimeout || a.MetadataRefreshInterval != b.MetadataRefreshInterval ||
		a.OffsetAlignmentMaxRecords != b.OffsetAlignmentMaxRecords
}

// claims are the engine's topic claims as its mirrors see them
// (supervisor.Claims).
type claims struct{ e *Engine }

func (c claims) Claim(dstID, mirror string, topics []string) map[string]string {
	return c.e.claimTopics(dstID, mirror, topics)
}

func (c claims) Owner(dstID, topic string) string { return c.e.topicOwner(dstID, topic) }

// claimTopics makes mirror the owner of each of topics (on the destination
// cluster dstID) that no other mirror owns, releases its claim on every
// topic not listed, and returns, for each listed topic another mirror owns,
// that mirror's name. A topic two mirrors' include patterns match would get
// two writers; the first mirror to claim it keeps it.
func (e *Engine) claimTopics(dstID, mirror string, topics []string) map[string]string {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	want := make(map[string]bool, len(topics))
	for _, t := range topics {
		want[dstID+"\x00"+t] = true
	}
	for k, owner := range e.claims {
		if owner == mirror && !want[k] {
			delete(e.claims, k)
		}
	}
	conflicts := map[string]string{}
	for _, t := range topics {
		k := dstID + "\x00" + t
		switch owner, ok := e.claims[k]; {
		case !ok:
			e.claims[k] = mirror
		case owner != mirror:
			conflicts[t] = owner
		}
	}
	return conflicts
}

// topicOwner returns the mirror that writes a topic of the destination
// cluster dstID ("": none).
func (e *Engine) topicOwner(dstID, topic string) string {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	return e.claims[dstID+"\x00"+topic]
}

// Stop stops every mirror (runners, fetchers, writers) and closes the
// destination client. Partitions keep their persisted states; open
// destination transactions stay open so that the next start resumes them.
func (e *Engine) Stop(ctx context.Context) error {
	// The sampler reads the status (e.mu): it ends before e.mu is held.
	e.mu.Lock()
	stopLive, liveDone := e.liveStop, e.liveDone
	e.liveStop = nil
	e.mu.Unlock()
	if stopLive != nil {
		stopLive()
		<-liveDone
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range e.mirrors {
		wg.Add(1)
		go func() { defer wg.Done(); m.Stop(ctx) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stopping mirrors: %w", context.Cause(ctx))
	}
	e.mirrors = map[string]*supervisor.Mirror{}
	if e.dst != nil {
		e.dst.Close()
	}
	return nil
}

// Describe implements daemon.Describer.
func (e *Engine) Describe() any { return e.Status() }

// Status returns the status of every mirror and partition.
func (e *Engine) Status() admin.Status {
	e.mu.Lock()
	ms := make([]*supervisor.Mirror, 0, len(e.mirrors))
	for _, m := range e.mirrors {
		ms = append(ms, m)
	}
	e.mu.Unlock()
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name() < ms[j].Name() })
	var st admin.Status
	for _, m := range ms {
		st.Mirrors = append(st.Mirrors, m.Status())
	}
	return st
}

// setBudget applies mirror.buffer.max.bytes; a configuration built without
// the key (0) keeps the default.
func (e *Engine) setBudget(cfg *config.Config) {
	if cfg.BufferMaxBytes > 0 {
		e.budget.SetMax(cfg.BufferMaxBytes)
	}
}

// observe logs every state transition once and counts it.
func (e *Engine) observe(ev partition.Event) {
	r := ev.Record
	args := []any{"mirror", r.Mirror, "topic", r.Topic, "partition", r.Partition, "from", ev.From.String(), "to", ev.To.String()}
	if ev.Reason != "" {
		args = append(args, "reason", ev.Reason)
	}
	if ev.To == partition.Failed {
		e.log.Warn("partition state change", args...)
	} else {
		e.log.Info("partition state change", args...)
	}
	e.inst.Transition(r.Mirror, ev.From.String(), ev.To.String())
}
