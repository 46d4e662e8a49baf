package partition

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeRecord feeds arbitrary stored values and keys to the decoder
// the state machine loads every partition record with. It never panics; it
// fails with ErrInvalidRecord, or returns a record that holds every
// invariant (validate), belongs under its key, is of the current schema,
// and survives encode → decode unchanged (extensions compared as compact
// JSON, which is how they are written, and no writers as nil).
func FuzzDecodeRecord(f *testing.F) {
	epoch := int32(5)
	full := Record{
		Schema: schemaVersion, Mirror: "dc1", Topic: "orders.v2", Partition: 3,
		State: Failed, PreviousState: Mirroring, Reason: "append: NOT_LEADER", Retryable: true, Attempts: 2,
		RetryAt:   time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC),
		UpdatedAt: time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("", 3600)),
		Data: Data{
			Mode: ModeMap, LastMirroredOffset: 41, SourceTopicID: "e0a923c6-cd57-19d7-ae43-62c7646896da", SourceEpoch: &epoch,
			TxnWriters: []TxnWriter{{SourceProducerID: 7, TransactionalID: "kmirror-dc1:orders.v2:3:7", ProducerID: 9, Epoch: 1}},
			Alignment:  &Alignment{FillTo: 10, DeleteTo: 4}, Recopy: &Recopy{SourceFrom: 3, DestFrom: 2, Why: "differs"},
			Diverged:  &Diverged{From: 40, To: 50, SideTopic: "orders.v2.diverged", SideStart: 0, Records: 9},
			Recreated: true, Verified: &Checkpoint{Dest: 40},
			Extensions: map[string]json.RawMessage{"open_txns": json.RawMessage(`{"a": [1, 2]}`)},
		},
	}
	for _, r := range []Record{
		full,
		{Schema: schemaVersion, Mirror: "m", Topic: "t", State: Preparing, Data: Data{LastMirroredOffset: -1}},
	} {
		b, err := r.encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(r.Key(), b)
	}
	// Schema 1 records as an older kmirror wrote them (the migration test's
	// fixture): the JSON between the key and the checksum.
	files, _ := filepath.Glob(filepath.Join("testdata", "schema1-state", "data", "*"))
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		start, end := bytes.IndexByte(raw, '{'), bytes.LastIndexByte(raw, '}')
		key, _ := filepath.Rel(filepath.Join("testdata", "schema1-state", "data"), name)
		key = unescapeFileName(key)
		f.Add(key, raw[start:end+1])
	}
	f.Add("mirrors/m/partitions/t/0", []byte(`{"schema":1,"mirror":"m","topic":"t","state":"PAUSED","extensions":{"source_epoch":null,"recopy":{"source_from":"x"}}}`))
	f.Add("mirrors/m/partitions/t/0", []byte(`{"schema":3,"mirror":"m","topic":"t","state":"STOPPED"}`))
	f.Add("mirrors/m/partitions/t/0", []byte(`{"schema":2,"mirror":"m","topic":"t","state":"FAILED","previous_state":"STOPPED","updated_at":"0000-01-01T00:00:00+01:00"}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		r, err := decodeRecord(key, value)
		if err != nil {
			if !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("error %v does not wrap ErrInvalidRecord", err)
			}
			return
		}
		if err := r.validate(); err != nil {
			t.Fatalf("decoded an invalid record %+v: %v", r, err)
		}
		if r.Key() != key || r.Schema != schemaVersion {
			t.Fatalf("record %+v decoded from key %q", r, key)
		}
		enc, err := r.encode()
		if err != nil {
			t.Fatalf("decoded record %+v does not encode: %v", r, err)
		}
		back, err := decodeRecord(key, enc)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", enc, err)
		}
		normalize(t, &r)
		normalize(t, &back)
		if !reflect.DeepEqual(r, back) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", r, back)
		}
	})
}

// normalize makes equal what the encoding does not tell apart: an empty
// and a nil list of writers, and extensions with and without blanks.
func normalize(t *testing.T, r *Record) {
	if len(r.TxnWriters) == 0 {
		r.TxnWriters = nil
	}
	for name, raw := range r.Extensions {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			t.Fatalf("extension %q: %v", name, err)
		}
		r.Extensions[name] = b.Bytes()
	}
}

// unescapeFileName undoes the file store's %XX escaping of a key.
func unescapeFileName(name string) string {
	var b []byte
	for i := 0; i < len(name); i++ {
		if name[i] == '%' && i+2 < len(name) {
			var c byte
			for _, h := range name[i+1 : i+3] {
				c <<= 4
				switch {
				case '0' <= h && h <= '9':
					c |= byte(h - '0')
				default:
					c |= byte(h-'A') + 10
				}
			}
			b = append(b, c)
			i += 2
			continue
		}
		b = append(b, name[i])
	}
	return string(b)
}
