package runner

import (
	"testing"

	"github.com/kmirror/kmirror/core/logging"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/internal/testlog"
)

// TestLogLinesAboutThePartitionCarryItsFields: a runner and its writer given
// the daemon's root JSON logger (no fields of its own) log every line about
// the partition with mirror, topic and partition fields. PREPARING in map
// mode and with filler alignment both log about the partition.
func TestLogLinesAboutThePartitionCarryItsFields(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		budget int64
		want   string // a message the case must log
	}{
		{name: "filler", budget: 100, want: "aligning the destination log start with filler records"},
		{name: "map mode", budget: 10, want: "partition runs in map mode: the source log start cannot be aligned with filler"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf testlog.Buffer
			root, err := logging.New(&buf, "trace", logging.FormatJSON)
			if err != nil {
				t.Fatal(err)
			}
			r := newTestRunnerLogging(t, side{records: 50, batch: 10, logStart: 25}, side{}, tc.budget, kfaketest.NewCluster(t), root)
			if err := r.prepare(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(buf.Messages(tc.want)) == 0 {
				t.Fatalf("no line %q in the log:\n%s", tc.want, buf.String())
			}
			about, wrong := buf.AboutPartition("m", "t", 0)
			if len(about) == 0 || len(wrong) > 0 {
				t.Fatalf("%d lines about the partition; these lack its mirror, topic or partition field: %v", len(about), wrong)
			}
		})
	}
}
