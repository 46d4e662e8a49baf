package config

import "testing"

// metrics.partition.series.enable is on by default (Kafka exports
// ConsumerLag per partition), and the file, the environment and --set turn
// it off.
func TestMetricsPartitionSeriesSwitch(t *testing.T) {
	t.Parallel()
	if cfg := mustParse(t, minimal, nil, nil); !cfg.MetricsPartitionSeries {
		t.Error("metrics.partition.series.enable is off by default, want on")
	}
	if cfg := mustParse(t, minimal+"metrics.partition.series.enable: false\n", nil, nil); cfg.MetricsPartitionSeries {
		t.Error("metrics.partition.series.enable: false in the file not applied")
	}
	if cfg := mustParse(t, minimal, []string{"KMIRROR_METRICS_PARTITION_SERIES_ENABLE=false"}, nil); cfg.MetricsPartitionSeries {
		t.Error("KMIRROR_METRICS_PARTITION_SERIES_ENABLE=false not applied")
	}
	if cfg := mustParse(t, minimal, nil, []string{"metrics.partition.series.enable=false"}); cfg.MetricsPartitionSeries {
		t.Error("--set metrics.partition.series.enable=false not applied")
	}
}
