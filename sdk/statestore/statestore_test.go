package statestore_test

import (
	"errors"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore"
)

func TestKeyLayout(t *testing.T) {
	cases := []struct{ got, want string }{
		{statestore.MirrorPrefix("m1"), "mirrors/m1/"},
		{statestore.PartitionsPrefix("m1"), "mirrors/m1/partitions/"},
		{statestore.TopicPartitionsPrefix("m1", "orders.v2"), "mirrors/m1/partitions/orders.v2/"},
		{statestore.PartitionKey("m1", "orders.v2", 7), "mirrors/m1/partitions/orders.v2/7"},
		{statestore.OffsetMapsPrefix("m_1-b"), "mirrors/m_1-b/offsetmaps/"},
		{statestore.OffsetMapKey("m_1-b", "t_x-y", 0), "mirrors/m_1-b/offsetmaps/t_x-y/0"},
		{statestore.OffsetMapSegmentsPrefix("m_1-b", "t_x-y", 0), "mirrors/m_1-b/offsetmaps/t_x-y/0/segments/"},
		{statestore.OffsetMapSegmentKey("m_1-b", "t_x-y", 0, 42), "mirrors/m_1-b/offsetmaps/t_x-y/0/segments/00000000000000000042"},
		{statestore.LeaseKey("m_1-b", "metadata-sync"), "mirrors/m_1-b/leases/metadata-sync"},
		{statestore.ControlKey("m_1-b"), "mirrors/m_1-b/control"},
		{statestore.GroupHistoryKey("m_1-b"), "mirrors/m_1-b/groups/history"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestParseKeysRoundTrip(t *testing.T) {
	for _, p := range []int32{0, 1, 42, 2147483647} {
		k := statestore.PartitionKey("mir-ror_1", "my.topic-name_x", p)
		m, topic, part, err := statestore.ParsePartitionKey(k)
		if err != nil || m != "mir-ror_1" || topic != "my.topic-name_x" || part != p {
			t.Errorf("ParsePartitionKey(%q) = %q, %q, %d, %v", k, m, topic, part, err)
		}
		k = statestore.OffsetMapKey("m", "t", p)
		m, topic, part, err = statestore.ParseOffsetMapKey(k)
		if err != nil || m != "m" || topic != "t" || part != p {
			t.Errorf("ParseOffsetMapKey(%q) = %q, %q, %d, %v", k, m, topic, part, err)
		}
	}
}

func TestParsePartitionKeyRejects(t *testing.T) {
	bad := []string{
		"", "mirrors/m/partitions/t", "mirrors/m/partitions/t/", "mirrors/m/partitions/t/-1",
		"mirrors/m/partitions/t/01", "mirrors/m/partitions/t/+1", "mirrors/m/partitions/t/2147483648",
		"mirrors/m/partitions/t/x", "mirrors//partitions/t/0", "mirrors/m/partitions//0",
		"mirrors/m/offsetmaps/t/0", "other/m/partitions/t/0", "mirrors/m/partitions/t/0/extra",
		"mirrors/m/leases/metadata-sync",
	}
	for _, k := range bad {
		if _, _, _, err := statestore.ParsePartitionKey(k); !errors.Is(err, statestore.ErrInvalidKey) {
			t.Errorf("ParsePartitionKey(%q): err %v, want ErrInvalidKey", k, err)
		}
	}
}

func TestCheckVersion(t *testing.T) {
	ok := []struct{ current, expect int64 }{{0, 0}, {0, -1}, {5, -1}, {5, 5}}
	for _, c := range ok {
		if err := statestore.CheckVersion("k", c.current, c.expect); err != nil {
			t.Errorf("CheckVersion(current %d, expect %d) = %v, want nil", c.current, c.expect, err)
		}
	}
	bad := []struct{ current, expect int64 }{{5, 0}, {0, 5}, {5, 4}, {4, 5}}
	for _, c := range bad {
		if err := statestore.CheckVersion("k", c.current, c.expect); !errors.Is(err, statestore.ErrVersionMismatch) {
			t.Errorf("CheckVersion(current %d, expect %d) = %v, want ErrVersionMismatch", c.current, c.expect, err)
		}
	}
}

func TestValidateVersions(t *testing.T) {
	for _, v := range []int64{-1, 0, 1, 99} {
		if err := statestore.ValidatePutVersion(v); err != nil {
			t.Errorf("ValidatePutVersion(%d) = %v", v, err)
		}
	}
	if err := statestore.ValidatePutVersion(-2); !errors.Is(err, statestore.ErrInvalidVersion) {
		t.Errorf("ValidatePutVersion(-2) = %v", err)
	}
	for _, v := range []int64{-1, 1} {
		if err := statestore.ValidateDeleteVersion(v); err != nil {
			t.Errorf("ValidateDeleteVersion(%d) = %v", v, err)
		}
	}
	for _, v := range []int64{0, -2} {
		if err := statestore.ValidateDeleteVersion(v); !errors.Is(err, statestore.ErrInvalidVersion) {
			t.Errorf("ValidateDeleteVersion(%d) = %v", v, err)
		}
	}
}
