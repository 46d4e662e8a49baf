package mirror

import (
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/partition"
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
	})
}

// metricSamples returns every mirror's partitions for the gauges.
func (e *Engine) metricSamples() []metrics.MirrorSample {
	st := e.Status()
	out := make([]metrics.MirrorSample, 0, len(st.Mirrors))
	for _, ms := range st.Mirrors {
		s := metrics.MirrorSample{Mirror: ms.Name, Partitions: make([]metrics.PartitionSample, 0, len(ms.Partitions))}
		for _, p := range ms.Partitions {
			s.Partitions = append(s.Partitions, metrics.PartitionSample{Topic: p.Topic, Partition: p.Partition, State: p.State, Lag: p.Lag})
		}
		for _, c := range ms.Clusters {
			s.Clusters = append(s.Clusters, metrics.ClusterSample{Cluster: c.Cluster, Up: c.Reachable})
		}
		out = append(out, s)
	}
	return out
}
