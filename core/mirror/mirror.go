package mirror

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/partition"
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

	mu      sync.Mutex
	src     *kgo.Client
	srcAdm  *kadm.Client
	dp      *dataPath
	runners map[topicPartition]*runner
	err     string // why the mirror as a whole cannot run, if it cannot
}

func newMirrorRun(e *Engine, dcfg *config.Config, mc config.Mirror) *mirrorRun {
	ctx, cancel := context.WithCancel(context.Background())
	return &mirrorRun{e: e, name: mc.Name, cfg: mc, dcfg: dcfg, log: e.log.With("mirror", mc.Name), ctx: ctx, cancel: cancel, runners: map[topicPartition]*runner{}}
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dp != nil {
		m.dp.close()
	}
	if m.src != nil {
		m.src.Close()
	}
}

func (m *mirrorRun) setErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.err = ""
		return
	}
	if m.err != err.Error() {
		m.log.Error("mirror cannot run; retrying", "error", err)
	}
	m.err = err.Error()
}

// supervise connects, then runs the topic sync every refresh interval until
// the mirror is stopped.
func (m *mirrorRun) supervise() {
	cfg := m.dcfg
	backoff := time.Second
	for {
		err := m.connect(cfg)
		if err == nil {
			break
		}
		m.setErr(err)
		if !sleepCtx(m.ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 30*time.Second)
	}
	ticker := time.NewTicker(cfg.MetadataRefreshInterval)
	defer ticker.Stop()
	for {
		if err := m.syncTopics(m.ctx); err != nil && m.ctx.Err() == nil {
			m.setErr(err)
		} else {
			m.setErr(nil)
		}
		select {
		case <-m.ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// connect builds the source client and the data path.
func (m *mirrorRun) connect(cfg *config.Config) error {
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
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		dp.run(m.ctx)
	}()
	return nil
}

// syncTopics starts a runner for every partition of every in-scope topic
// that has none yet, creating destination topics as needed.
func (m *mirrorRun) syncTopics(ctx context.Context) error {
	topics, err := listSourceTopics(ctx, m.srcAdm, &m.cfg)
	if err != nil {
		return fmt.Errorf("mirror %s: %w", m.name, err)
	}
	for _, t := range topics {
		dstParts, err := ensureDestinationTopic(ctx, m.e.dstAdm, t)
		if err != nil {
			return fmt.Errorf("mirror %s: %w", m.name, err)
		}
		n := min(t.Partitions, dstParts)
		if dstParts < t.Partitions {
			m.log.Warn("destination topic has fewer partitions than the source; the extra source partitions are not mirrored yet", "topic", t.Name, "source", t.Partitions, "destination", dstParts)
		}
		for p := int32(0); p < n; p++ {
			tp := topicPartition{t.Name, p}
			m.mu.Lock()
			_, running := m.runners[tp]
			m.mu.Unlock()
			if running {
				continue
			}
			r, err := newRunner(ctx, m, t, p)
			if err != nil {
				return err
			}
			m.launch(tp, r)
		}
	}
	return m.stopOutOfScope(ctx)
}

// launch registers r and starts its goroutine, owned by m.wg.
func (m *mirrorRun) launch(tp topicPartition, r *runner) {
	m.mu.Lock()
	m.runners[tp] = r
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		r.run(m.ctx)
	}()
}

// stopOutOfScope takes every partition whose topic no longer matches the
// mirror's include/exclude patterns through STOPPING to STOPPED: running
// ones, and ones a previous run (or configuration) left MIRRORING, PAUSED or
// FAILED in the state store.
func (m *mirrorRun) stopOutOfScope(ctx context.Context) error {
	const reason = "the topic no longer matches mirror.topics.include, or matches mirror.topics.exclude"
	m.mu.Lock()
	for tp, r := range m.runners {
		if !inScope(&m.cfg, tp.topic) {
			r.requestStop(reason)
		}
	}
	m.mu.Unlock()
	parts, err := m.e.machine.LoadMirror(ctx, m.name)
	if err != nil && len(parts) == 0 {
		return fmt.Errorf("mirror %s: loading partition states: %w", m.name, err)
	}
	for _, p := range parts {
		rec := p.Record()
		if inScope(&m.cfg, rec.Topic) {
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
		r.requestStop(reason)
		m.launch(tp, r)
	}
	return nil
}

func (m *mirrorRun) status() MirrorStatus {
	m.mu.Lock()
	rs := make([]*runner, 0, len(m.runners))
	for _, r := range m.runners {
		rs = append(rs, r)
	}
	ms := MirrorStatus{Name: m.name, Error: m.err}
	m.mu.Unlock()
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].topic != rs[j].topic {
			return rs[i].topic < rs[j].topic
		}
		return rs[i].partition < rs[j].partition
	})
	for _, r := range rs {
		ms.Partitions = append(ms.Partitions, r.status())
	}
	return ms
}

// sleepCtx sleeps for d; it returns false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
