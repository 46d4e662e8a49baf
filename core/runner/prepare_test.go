package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/fetcher"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/writer"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// writerPath is a DataPath with a real writer on the destination and no
// fetcher: enough for prepare and resume, which never fetch.
type writerPath struct{ w *writer.Writer }

func (p writerPath) Subscribe(fetcher.PartitionSpec, *fetcher.Queue) error { return nil }
func (p writerPath) Unsubscribe(string, int32)                             {}
func (p writerPath) Done(string, int32, int)                               {}
func (p writerPath) NewWriter(topic string, partition int32, hook func(context.Context, writer.TxnWriterInfo) error) (*writer.Partition, error) {
	return p.w.Partition(topic, partition, hook)
}
func (p writerPath) Refused(context.Context, string, batch.Batch, int64, error) (bool, error) {
	return false, fmt.Errorf("refused")
}
func (p writerPath) MapRecords(_ context.Context, _ string, b batch.Batch) ([]batch.Record, error) {
	return b.Records()
}

type noControl struct{}

func (noControl) Paused(context.Context, string) (bool, error)  { return false, nil }
func (noControl) Stopped(context.Context, string) (bool, error) { return false, nil }

type noEvents struct{}

func (noEvents) Appended(batch.Batch, int64)    {}
func (noEvents) Mismatch(string, int32, string) {}
func (noEvents) Stopped()                       {}

// side is one cluster of a prepare case: its topic's configs, its records
// (one batch per ProduceSync of size batch) and a log start to move to.
type side struct {
	configs  map[string]*string
	records  int
	batch    int
	logStart int64
}

func (s side) build(t *testing.T, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	cl := kfaketest.NewClient(t, c, kgo.DefaultProduceTopic("t"), kgo.ProducerLinger(20*time.Millisecond))
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, s.configs, "t"); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < s.records; n += max(s.batch, 1) {
		var recs []*kgo.Record
		for i := n; i < min(n+max(s.batch, 1), s.records); i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if s.logStart > 0 {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "t", Partition: 0, At: s.logStart})
		if _, err := kadm.NewClient(cl).DeleteRecords(ctx, os); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

func compact() map[string]*string {
	v := "compact"
	return map[string]*string{"cleanup.policy": &v}
}

// TestPrepareDecidesTheModeAndTheResumePoint table-tests the decisions of
// PREPARING for a new partition against hand-built source and destination
// logs, with a runner built from its Deps alone (no engine).
func TestPrepareDecidesTheModeAndTheResumePoint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		src, dst  side
		budget    int64
		mode      partition.Mode
		next      int64 // the source offset mirroring starts from
		dstNext   int64
		errSays   string
		retryable bool
	}{
		{name: "an empty source", mode: partition.ModePreserve, next: 0},
		{name: "a source from offset 0", src: side{records: 30, batch: 10}, mode: partition.ModePreserve, next: 0},
		{name: "a destination that holds data", src: side{records: 3, batch: 1}, dst: side{records: 2, batch: 1},
			errSays: "already holds offsets 0 to 1 that this mirror did not write"},
		{name: "a log start inside a batch, within the filler budget", src: side{records: 50, batch: 10, logStart: 25}, budget: 100,
			mode: partition.ModePreserve, next: 20, dstNext: 20},
		{name: "a log start beyond the filler budget", src: side{records: 50, batch: 10, logStart: 25}, budget: 10,
			mode: partition.ModeMap, next: 25, dstNext: 0},
		{name: "a compact destination cannot delete filler", src: side{records: 50, batch: 10, logStart: 25}, dst: side{configs: compact()}, budget: 100,
			mode: partition.ModeMap, next: 25, dstNext: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newTestRunner(t, tc.src, tc.dst, tc.budget)
			err := r.prepare(t.Context())
			if tc.errSays != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSays) || partition.IsRetryable(err) != tc.retryable {
					t.Fatalf("prepare: %v (retryable %v), want an error saying %q (retryable %v)", err, partition.IsRetryable(err), tc.errSays, tc.retryable)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.mode != tc.mode || r.Next() != tc.next || r.dstNext != tc.dstNext {
				t.Fatalf("mode %q next %d destination next %d; want %q, %d, %d", r.mode, r.Next(), r.dstNext, tc.mode, tc.next, tc.dstNext)
			}
		})
	}
}

// newTestRunner builds a runner of topic t/0 from Deps alone: kfake
// source and destination clusters filled as src and dst say, a memory
// store, the real writer.
func newTestRunner(t *testing.T, src, dst side, budget int64) *Runner {
	t.Helper()
	return newTestRunnerOn(t, src, dst, budget, kfaketest.NewCluster(t))
}

// newTestRunnerOn is newTestRunner with the destination cluster given.
func newTestRunnerOn(t *testing.T, src, dst side, budget int64, dc *kfake.Cluster) *Runner {
	t.Helper()
	return newTestRunnerLogging(t, src, dst, budget, dc, hclog.NewNullLogger())
}

// newTestRunnerLogging is newTestRunnerOn with the runner and its writer
// logging to log.
func newTestRunnerLogging(t *testing.T, src, dst side, budget int64, dc *kfake.Cluster, log hclog.Logger) *Runner {
	t.Helper()
	srcCl := src.build(t, kfaketest.NewCluster(t))
	dstCl := dst.build(t, dc)
	store := memstore.New()
	m, err := partition.NewMachine(store)
	if err != nil {
		t.Fatal(err)
	}
	part, _, err := m.LoadOrCreate(t.Context(), "m", "t", 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	w, err := writer.New(dstCl, writer.MirrorName("m"), writer.Logger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return New(Deps{
		Mirror: "m", Topic: "t", Partition: part, Store: store, Log: log,
		Source: srcCl, Dest: dstCl, DestAdmin: kadm.NewClient(dstCl),
		Path: writerPath{w}, Control: noControl{}, Events: noEvents{},
		Settings: Settings{AlignmentBudget: budget, MaxAttempts: 10},
	})
}

// TestResumeDecidesFromTheRecordAndTheDestination table-tests the decisions
// of a partition whose mode is decided (daemon start, start, retry),
// against hand-built logs: where mirroring continues, and when it must not.
func TestResumeDecidesFromTheRecordAndTheDestination(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		src, dst side
		checked  int64 // the checkpoint: the destination is proven below it
		action   string
		mode     partition.Mode
		next     int64
		dstNext  int64
		errSays  string
	}{
		{name: "behind the source", src: side{records: 30, batch: 10}, dst: side{records: 20, batch: 10}, checked: 20,
			mode: partition.ModePreserve, next: 20, dstNext: 20},
		{name: "beyond the source's end below the checkpoint", src: side{records: 10, batch: 10}, dst: side{records: 20, batch: 10}, checked: 20,
			errSays: "beyond the source's high watermark 10"},
		{name: "a source that deleted what was not copied", src: side{records: 50, batch: 10, logStart: 30}, dst: side{records: 10, batch: 10}, checked: 10,
			errSays: "records were deleted on the source before kmirror copied them"},
		{name: "a record that is not the source's, action map", src: side{records: 3, batch: 1}, dst: side{records: 1, batch: 1}, checked: 0,
			action: "map", mode: partition.ModeMap, next: 0, dstNext: 1},
		{name: "a record that is not the source's, action fail", src: side{records: 3, batch: 1}, dst: side{records: 1, batch: 1}, checked: 0,
			action: "fail", errSays: "mirror.destination.mismatch.action is fail"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newTestRunner(t, tc.src, tc.dst, 0)
			r.d.Settings.MismatchAction = tc.action
			if err := r.state.Update(t.Context(), func(d *partition.Data) error {
				d.Mode, d.Verified = partition.ModePreserve, &partition.Checkpoint{Dest: tc.checked}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			err := r.prepare(t.Context())
			if tc.errSays != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSays) || partition.IsRetryable(err) {
					t.Fatalf("resume: %v, want a non-retryable error saying %q", err, tc.errSays)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.mode != tc.mode || r.Next() != tc.next || r.dstNext != tc.dstNext {
				t.Fatalf("mode %q next %d destination next %d; want %q, %d, %d", r.mode, r.Next(), r.dstNext, tc.mode, tc.next, tc.dstNext)
			}
		})
	}
}
