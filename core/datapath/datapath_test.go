package datapath

import (
	"testing"

	"github.com/kmirror/kmirror/core/batch"
)

func TestMapDecodeBoundIs64TimesTheDestinationLimitWithinFloorAndCeiling(t *testing.T) {
	for _, c := range []struct {
		limit int64
		want  int
	}{
		{0, 64 * 1048588},                      // unknown: Kafka's default
		{100000, 16 << 20},                     // the floor
		{1048588, 64 * 1048588},                // Kafka's default
		{5 << 20, 320 << 20},                   // a raised limit
		{32 << 20, batch.MaxDecompressedBytes}, // the ceiling
		{1 << 40, batch.MaxDecompressedBytes},
	} {
		if got := mapDecodeBound(c.limit); got != c.want {
			t.Errorf("mapDecodeBound(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
}
