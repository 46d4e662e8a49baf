package metrics

import dto "github.com/prometheus/client_model/go"

// MetricFamily aliases the Prometheus data-model type so that callers of Gather
// need not import client_model themselves.
type MetricFamily = dto.MetricFamily

// Value returns the value of the sample of family name (full name, with the
// kmirror_ prefix and any _total suffix) whose labels include all of labels.
// Counters, gauges and untyped samples are supported; ok is false when no sample
// matches.
func (p *Provider) Value(name string, labels map[string]string) (v float64, ok bool, err error) {
	fams, err := p.registry.Gather()
	if err != nil {
		return 0, false, err
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true, nil
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true, nil
			case m.GetUntyped() != nil:
				return m.GetUntyped().GetValue(), true, nil
			}
		}
	}
	return 0, false, nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
