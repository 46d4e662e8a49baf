package mirror

import (
	"sort"

	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/supervisor"
)

// newInstruments creates the engine's metrics (core/metrics.Engine), whose
// gauges read the engine's status, fetch budget and throttle.
func newInstruments(p *metrics.Provider, e *Engine) (*metrics.Engine, error) {
	states := make([]string, 0, len(partition.States()))
	for _, s := range partition.States() {
		states = append(states, s.String())
	}
	return metrics.NewEngine(p, metrics.EngineSource{
		Mirrors: e.metricSamples, States: states, Failed: partition.Failed.String(),
		BudgetMax: e.budget.Max, BudgetReserved: e.budget.Reserved, ThrottleRate: e.limiter.Rate,
		PartitionSeries: e.partitionSeries,
	})
}

// partitionSeries reads metrics.partition.series.enable in force (on
// before the engine started).
func (e *Engine) partitionSeries() bool { return !e.noPartitionSeries.Load() }

// metricSamples returns every mirror's partitions for the gauges.
func (e *Engine) metricSamples() []metrics.MirrorSample {
	e.mu.Lock()
	ms := make([]*supervisor.Mirror, 0, len(e.mirrors))
	for _, m := range e.mirrors {
		ms = append(ms, m)
	}
	e.mu.Unlock()
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name() < ms[j].Name() })
	out := make([]metrics.MirrorSample, 0, len(ms))
	for _, m := range ms {
		st := m.Status()
		s := metrics.MirrorSample{Mirror: st.Name, Partitions: make([]metrics.PartitionSample, 0, len(st.Partitions)), DeadThreads: m.DeadThreads()}
		for _, p := range st.Partitions {
			s.Partitions = append(s.Partitions, metrics.PartitionSample{Topic: p.Topic, Partition: p.Partition, State: p.State, Lag: p.Lag})
		}
		for _, c := range st.Clusters {
			s.Clusters = append(s.Clusters, metrics.ClusterSample{Cluster: c.Cluster, Up: c.Reachable})
		}
		out = append(out, s)
	}
	return out
}
