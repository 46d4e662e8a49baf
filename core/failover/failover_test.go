package failover

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
)

// An unplanned failover with nothing to sync stops the topics, removes
// their read-only ACLs, and says where each STOPPED partition stopped,
// grouped by topic.
func TestRunStopsTheTopicsAndSaysWhereEachPartitionStopped(t *testing.T) {
	var stopped []string
	readOnly := false
	m := Mirror{Name: "dc1", Log: hclog.NewNullLogger(),
		Wait: func(context.Context, string, func(string) bool, func(runner.Status) bool) ([]runner.Status, error) {
			t.Fatal("an unplanned failover waits for nothing")
			return nil, nil
		},
		Stop: func(_ context.Context, topics []string) ([]runner.Status, error) {
			stopped = topics
			return []runner.Status{
				{Topic: "orders", Partition: 0, State: partition.Stopped.String(), LastMirroredOffset: 41},
				{Topic: "orders", Partition: 1, State: partition.Preparing.String()},
				{Topic: "payments", Partition: 0, State: partition.Stopped.String(), LastMirroredOffset: -1},
			}, nil
		},
		SyncReadOnly: func(context.Context) error { readOnly = true; return nil },
	}
	res, err := Run(context.Background(), m, []string{".*"}, func(string) bool { return true }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(stopped) != 1 || stopped[0] != ".*" || !readOnly {
		t.Fatalf("stopped %v, read-only ACLs synced %v", stopped, readOnly)
	}
	if res.Mirror != "dc1" || len(res.Topics) != 2 || len(res.Topics[0].Partitions) != 1 || res.Topics[0].Partitions[0].LastMirroredOffset != 41 ||
		res.Topics[1].Topic != "payments" || res.Topics[1].Partitions[0].LastMirroredOffset != -1 {
		t.Fatalf("result %+v", res)
	}
}

// A planned failover whose partitions do not catch up in time changes
// nothing.
func TestPlannedRunThatDoesNotCatchUpChangesNothing(t *testing.T) {
	errLate := errors.New("not caught up")
	m := Mirror{Name: "dc1", Log: hclog.NewNullLogger(),
		Wait: func(_ context.Context, _ string, _ func(string) bool, done func(runner.Status) bool) ([]runner.Status, error) {
			if done(runner.Status{State: partition.Mirroring.String(), Lag: 3, SourceHighWatermark: 10}) {
				t.Error("a partition with lag counts as caught up")
			}
			if !done(runner.Status{State: partition.Mirroring.String(), Lag: 0, SourceHighWatermark: 10}) {
				t.Error("a partition with no lag does not count as caught up")
			}
			return nil, errLate
		},
		Stop: func(context.Context, []string) ([]runner.Status, error) {
			t.Fatal("a failover that did not catch up stopped topics")
			return nil, nil
		},
	}
	if _, err := Run(context.Background(), m, []string{".*"}, func(string) bool { return true }, time.Second); !errors.Is(err, errLate) {
		t.Fatalf("err %v, want %v", err, errLate)
	}
}
