package partition

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/plugins/statestore/file"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// copyDir copies the state directory fixture, so the test never writes to
// testdata.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// TestASchema1StateDirectoryIsMigrated reads a file state store written by
// the kmirror before typed crash-resume state (testdata/schema1-state: a
// mirror "test" with an aligned partition and one with an open replayed
// transaction) and finds its facts in the typed fields; the next write
// stores schema 2 without the old extensions.
func TestASchema1StateDirectoryIsMigrated(t *testing.T) {
	t.Parallel()
	store, err := file.Open(copyDir(t, "testdata/schema1-state"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err := NewMachine(store)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := m.LoadMirror(t.Context(), "test")
	if err != nil || len(parts) != 2 {
		t.Fatalf("LoadMirror: %d partitions, %v", len(parts), err)
	}
	for _, p := range parts {
		r := p.Record()
		if r.Schema != schemaVersion || len(r.Extensions) != 0 || r.SourceTopicID == "" || r.SourceEpoch == nil || *r.SourceEpoch != 0 || r.State != Mirroring {
			t.Fatalf("%s: migrated record %+v", r.Topic, r)
		}
		if r.Topic == "txn" {
			if len(r.TxnWriters) != 1 || !strings.HasPrefix(r.TxnWriters[0].TransactionalID, "kmirror-test:txn:0:") || r.TxnWriters[0].ProducerID == 0 {
				t.Fatalf("txn writers %+v", r.TxnWriters)
			}
		}
	}
	p := parts[0]
	if err := p.Update(t.Context(), func(d *Data) error { d.Recreated = true; return nil }); err != nil {
		t.Fatal(err)
	}
	ent, err := store.Get(t.Context(), p.Record().Key())
	if err != nil {
		t.Fatal(err)
	}
	if s := string(ent.Value); !strings.Contains(s, `"schema":2`) || strings.Contains(s, `"extensions"`) || !strings.Contains(s, `"source_topic_id":"`) {
		t.Fatalf("record written after the migration: %s", s)
	}
}

// TestSchema1ExtensionsBecomeTypedFields covers every extension schema 1
// kept, including those a state directory rarely holds at rest.
func TestSchema1ExtensionsBecomeTypedFields(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	key := "mirrors/dc1/partitions/orders/0"
	v1 := `{"schema":1,"mirror":"dc1","topic":"orders","partition":0,"state":"PREPARING","mode":"preserve","last_mirrored_offset":-1,` +
		`"extensions":{"alignment":{"fill_to":250,"delete_to":275},"recopy":{"source_from":7,"dest_from":9},` +
		`"diverged":{"from":5,"to":8,"side_topic":"orders.kmirror-diverged","side_start":0,"records":3,"copied":true},"failback_recreated":true,` +
		`"source_epoch":{"epoch":4},"source_topic_id":"x","txn_writers":[{"source_producer_id":1,"transactional_id":"kmirror-dc1-orders-0-1","producer_id":2,"epoch":3}],` +
		`"future_feature":{"kept":true}}}`
	if _, err := store.Put(t.Context(), key, []byte(v1), 0); err != nil {
		t.Fatal(err)
	}
	m, err := NewMachine(store)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := m.LoadMirror(t.Context(), "dc1")
	if err != nil || len(parts) != 1 {
		t.Fatalf("LoadMirror: %v", err)
	}
	d := parts[0].Record().Data
	switch {
	case d.Alignment == nil || *d.Alignment != (Alignment{FillTo: 250, DeleteTo: 275}),
		d.Recopy == nil || *d.Recopy != (Recopy{SourceFrom: 7, DestFrom: 9}),
		d.Diverged == nil || d.Diverged.Records != 3 || !d.Diverged.Copied || d.Diverged.SideTopic != "orders.kmirror-diverged",
		!d.Recreated, d.SourceEpoch == nil || *d.SourceEpoch != 4, d.SourceTopicID != "x",
		len(d.TxnWriters) != 1 || d.TxnWriters[0] != (TxnWriter{SourceProducerID: 1, TransactionalID: "kmirror-dc1-orders-0-1", ProducerID: 2, Epoch: 3}):
		t.Fatalf("migrated data %+v", d)
	}
	if _, ok := d.Extensions["future_feature"]; !ok || len(d.Extensions) != 1 {
		t.Fatalf("extensions after the migration %v: want only the unknown one kept", d.Extensions)
	}
}
