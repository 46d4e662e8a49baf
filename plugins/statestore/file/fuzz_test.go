package file

import (
	"bytes"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// FuzzDecodeEntry feeds arbitrary key-file content to the decoder Open and
// Get read every file with. It never panics; what it accepts is exactly
// what encodeEntry writes for the decoded entry (the format has one
// encoding per entry), with a positive version; and encodeEntry's output
// for any key, value and version decodes back to them.
func FuzzDecodeEntry(f *testing.F) {
	for _, e := range []statestore.Entry{
		{Key: statestore.PartitionKey("dc1", "orders", 3), Value: []byte(`{"schema":2,"mirror":"dc1","topic":"orders","partition":3,"state":"MIRRORING"}`), Version: 7},
		{Key: statestore.ControlKey("dc1"), Value: []byte(`{"paused":[{"topics":["orders.*"],"on":true}]}`), Version: 1},
		{Key: statestore.OffsetMapKey("dc1", "orders", 0), Value: []byte{1, 0, 0, 0}, Version: 1 << 40},
		{Key: "k", Value: nil, Version: 1},
	} {
		f.Add(encodeEntry(e.Key, e.Value, e.Version))
	}
	f.Add([]byte{})
	f.Add(magic[:])
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeEntry(data)
		if err != nil {
			if e.Key != "" || e.Value != nil || e.Version != 0 {
				t.Fatalf("decodeEntry failed (%v) yet returned %+v", err, e)
			}
			// Whatever the file holds, the same bytes wrapped as a value
			// round-trip.
			e = statestore.Entry{Key: "fuzz/key", Value: data, Version: 1}
			back, err := decodeEntry(encodeEntry(e.Key, e.Value, e.Version))
			if err != nil || back.Key != e.Key || !bytes.Equal(back.Value, e.Value) || back.Version != e.Version {
				t.Fatalf("encode/decode of %+v: %+v, %v", e, back, err)
			}
			return
		}
		if e.Version <= 0 {
			t.Fatalf("accepted version %d", e.Version)
		}
		if again := encodeEntry(e.Key, e.Value, e.Version); !bytes.Equal(again, data) {
			t.Fatalf("decoded %+v from %x, which encodes as %x", e, data, again)
		}
		if n := len(e.Value); n > 0 {
			// The value is a copy: the caller may keep it. Its last byte
			// sits just before the CRC.
			before := e.Value[n-1]
			data[len(data)-5] ^= 0xff
			if e.Value[n-1] != before {
				t.Fatal("the decoded value aliases the file's content")
			}
		}
	})
}
