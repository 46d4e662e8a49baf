package statestore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// FuzzParsePartitionKey feeds arbitrary keys (a state store lists whatever
// it holds) to ParsePartitionKey and ParseOffsetMapKey, and builds keys from
// arbitrary parts. A parse never panics; it fails with ErrInvalidKey or
// returns the parts that build exactly the key it was given; and parsing a
// key built from a mirror and topic without '/' and a partition >= 0 gives
// them back.
func FuzzParsePartitionKey(f *testing.F) {
	f.Add(statestore.PartitionKey("dc1", "orders.v2", 7), "dc1", "orders.v2", int32(7))
	f.Add(statestore.OffsetMapKey("m_1-b", "t_x-y", 0), "m_1-b", "t_x-y", int32(0))
	f.Add(statestore.OffsetMapSegmentKey("m", "t", 0, 42), "m", "t", int32(2147483647))
	f.Add(statestore.ControlKey("dc1"), "dc1", "", int32(-1))
	f.Add("mirrors/dc1/partitions/orders/007", "dc1", "a/b", int32(1))
	f.Add("mirrors/dc1/partitions/orders/+7", "", "t", int32(0))
	f.Add("mirrors/dc1/partitions/orders/2147483648", "dc1", "t", int32(-2147483648))
	f.Add("mirrors//partitions/orders/0", "é", "\x00", int32(3))
	f.Fuzz(func(t *testing.T, key, mirror, topic string, partition int32) {
		for _, kind := range []struct {
			name  string
			parse func(string) (string, string, int32, error)
			build func(string, string, int32) string
		}{
			{"partition", statestore.ParsePartitionKey, statestore.PartitionKey},
			{"offset map", statestore.ParseOffsetMapKey, statestore.OffsetMapKey},
		} {
			m, tp, p, err := kind.parse(key)
			if err != nil {
				if !errors.Is(err, statestore.ErrInvalidKey) {
					t.Fatalf("%s key %q: error %v does not wrap ErrInvalidKey", kind.name, key, err)
				}
				if m != "" || tp != "" || p != 0 {
					t.Fatalf("%s key %q: failed (%v) yet returned %q %q %d", kind.name, key, err, m, tp, p)
				}
			} else {
				if m == "" || tp == "" || p < 0 || strings.Contains(m+tp, "/") {
					t.Fatalf("%s key %q parsed as %q %q %d", kind.name, key, m, tp, p)
				}
				if back := kind.build(m, tp, p); back != key {
					t.Fatalf("%s key %q parsed as %q %q %d, which build %q", kind.name, key, m, tp, p, back)
				}
			}
			if mirror == "" || topic == "" || partition < 0 || strings.Contains(mirror+topic, "/") {
				continue
			}
			built := kind.build(mirror, topic, partition)
			if m, tp, p, err := kind.parse(built); err != nil || m != mirror || tp != topic || p != partition {
				t.Fatalf("%s key %q built from %q %q %d parses as %q %q %d, %v", kind.name, built, mirror, topic, partition, m, tp, p, err)
			}
		}
	})
}
