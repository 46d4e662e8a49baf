package mirror

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// TestFillerRecordsHaveAKeyAndANullValue: compacted topics refuse records
// without a key, so every filler record carries the key and header
// "kmirror.filler" (a tombstone: null value).
func TestFillerRecordsHaveAKeyAndANullValue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var (
		mu     sync.Mutex
		filler []batch.Record
	)
	f.dst.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				bs, _, err := batch.Split(rp.Records)
				if err != nil {
					t.Errorf("produce request: %v", err)
				}
				for _, b := range bs {
					recs, err := b.Records()
					if err != nil {
						t.Errorf("produce request: %v", err)
					}
					for _, r := range recs {
						if len(r.Headers) > 0 && r.Headers[0].Key == "kmirror.filler" {
							mu.Lock()
							filler = append(filler, r)
							mu.Unlock()
						}
					}
				}
			}
		}
		return nil, nil, false
	})
	f.trimmedTopic(t, "trimmed", map[string]*string{"cleanup.policy": kadm.StringPtr("compact,delete")}, 120)
	e := startEngine(t, f.config(t, "trimmed"), memstore.New())
	f.waitMirrored(t, e, "trimmed", 1)
	f.verify(t, "trimmed", 1)
	if p := e.Status().Mirrors[0].Partitions[0]; p.Mode != "preserve" {
		t.Fatalf("mode %q, want preserve (aligned with filler)", p.Mode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(filler) != 100 { // up to the base offset of the batch holding 120
		t.Fatalf("%d filler records, want 100", len(filler))
	}
	for _, r := range filler {
		if string(r.Key) != "kmirror.filler" || r.Value != nil || len(r.Headers) != 1 || string(r.Headers[0].Value) != "test" {
			t.Fatalf("filler record at %d: key %q, value %q, headers %v; want key kmirror.filler, null value, header kmirror.filler=test", r.Offset, r.Key, r.Value, r.Headers)
		}
	}
}

// TestCompactDestinationTopicWithASourceLogStartRunsInMapMode: the
// destination topic's cleanup.policy is compact, so DeleteRecords would
// never remove filler: the partition runs in map mode and says why, and
// copies the source's records from its log start, which falls inside a batch.
func TestCompactDestinationTopicWithASourceLogStartRunsInMapMode(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.trimmedTopic(t, "table", map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, 120) // inside a batch
	e := startEngine(t, f.config(t, "table"), memstore.New())
	f.waitMirrored(t, e, "table", 1)
	p := e.Status().Mirrors[0].Partitions[0]
	if p.Mode != "map" || !strings.Contains(strings.Join(p.Notes, "; "), "the source log starts at offset 120 and the destination topic refuses DeleteRecords") {
		t.Fatalf("mode %q, notes %v; want map mode saying the destination refuses DeleteRecords", p.Mode, p.Notes)
	}
	ends, err := kadm.NewClient(f.dstCl).ListEndOffsets(context.Background(), "table")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("table", 0); o.Offset != 380 {
		t.Fatalf("destination end offset %d, want 380: the source's records from its log start 120, and no filler", o.Offset)
	}
}

// TestSourceLogStartBeyondTheFillerBudgetRunsInMapModeFromTheLogStart: with
// no filler budget, a source log start inside a batch puts the partition in
// map mode, fetching from the log start (brokers refuse fetches below it)
// and copying only the records from it on.
func TestSourceLogStartBeyondTheFillerBudgetRunsInMapModeFromTheLogStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.trimmedTopic(t, "trimmed", nil, 120)
	cfg := f.config(t, "trimmed")
	cfg.OffsetAlignmentMaxRecords = 0
	e := startEngine(t, cfg, memstore.New())
	f.waitMirrored(t, e, "trimmed", 1)
	p := e.Status().Mirrors[0].Partitions[0]
	if p.Mode != "map" || !strings.Contains(strings.Join(p.Notes, "; "), "beyond mirror.offset.alignment.max.records (0)") {
		t.Fatalf("mode %q, notes %v; want map mode beyond the filler budget", p.Mode, p.Notes)
	}
	src, err := verify.ReadLog(context.Background(), f.srcCl, "trimmed", 0)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := verify.ReadLog(context.Background(), f.dstCl, "trimmed", 0)
	if err != nil {
		t.Fatal(err)
	}
	shift := func(o int64) (int64, bool) { return o - 120, o >= 120 }
	if len(dst.Entries) != len(src.Entries) || dst.Entries[0].Offset != 0 {
		t.Fatalf("destination holds %d records from offset %d, want the source's %d from 0", len(dst.Entries), dst.Entries[0].Offset, len(src.Entries))
	}
	if diff := verify.DiffMapped(src, dst, shift); diff != "" {
		t.Fatal(diff)
	}
}
