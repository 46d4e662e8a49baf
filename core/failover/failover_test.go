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

// A planned failover whose wait runs out says so with ErrNotCaughtUp (the
// admin API's 504 with "nothing was changed"), and stops nothing.
func TestPlannedRunThatRunsOutOfTimeIsErrNotCaughtUp(t *testing.T) {
	t.Parallel()
	m := Mirror{Name: "dc1", Log: hclog.NewNullLogger(),
		Wait: func(ctx context.Context, _ string, _ func(string) bool, _ func(runner.Status) bool) ([]runner.Status, error) {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		},
		Stop: func(context.Context, []string) ([]runner.Status, error) {
			t.Fatal("a failover that did not catch up stopped topics")
			return nil, nil
		},
	}
	_, err := Run(context.Background(), m, []string{".*"}, func(string) bool { return true }, 20*time.Millisecond)
	if !errors.Is(err, ErrNotCaughtUp) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want ErrNotCaughtUp", err)
	}
}

// CaughtUp is what a planned failover waits for and what the admin API's
// lag route counts.
func TestCaughtUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		st   runner.Status
		want bool
	}{
		{runner.Status{State: partition.Mirroring.String(), Lag: 0, SourceHighWatermark: 10}, true},
		{runner.Status{State: partition.Mirroring.String(), Lag: 0, SourceHighWatermark: -1}, false},
		{runner.Status{State: partition.Mirroring.String(), Lag: 1, SourceHighWatermark: 10}, false},
		{runner.Status{State: partition.Stopped.String()}, true},
		{runner.Status{State: partition.Paused.String()}, false},
		{runner.Status{State: partition.Failed.String()}, false},
	} {
		if got := CaughtUp(tc.st); got != tc.want {
			t.Errorf("CaughtUp(%s lag %d hw %d) = %v", tc.st.State, tc.st.Lag, tc.st.SourceHighWatermark, got)
		}
	}
}
