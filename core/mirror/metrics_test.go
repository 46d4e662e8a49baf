package mirror

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// Appended batches are counted per mirror on /metrics, summed over the
// mirror's runners, and a runner created again (a restart) adds to the same
// counts.
func TestAppendedCountsPerMirror(t *testing.T) {
	mp, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Store: memstore.New(), Logger: hclog.NewNullLogger(), Metrics: mp})
	if err != nil {
		t.Fatal(err)
	}
	a, b := &mirrorRun{e: e, name: "a"}, &mirrorRun{e: e, name: "b"}
	newMirrorEvents(a).Appended(100, 10)
	newMirrorEvents(a).Appended(50, 1)
	newMirrorEvents(b).Appended(7, 3)
	newMirrorEvents(a).Appended(1, 1) // a runner built again
	for _, c := range []struct {
		name, mirror string
		want         float64
	}{
		{"kmirror_mirrored_bytes_total", "a", 151},
		{"kmirror_mirrored_batches_total", "a", 3},
		{"kmirror_mirrored_offsets_total", "a", 12},
		{"kmirror_mirrored_bytes_total", "b", 7},
		{"kmirror_mirrored_batches_total", "b", 1},
		{"kmirror_mirrored_offsets_total", "b", 3},
	} {
		v, ok, err := mp.Value(c.name, map[string]string{"mirror": c.mirror})
		if err != nil || !ok || v != c.want {
			t.Errorf("%s{mirror=%q} = %v (found %v, err %v), want %v", c.name, c.mirror, v, ok, err, c.want)
		}
	}
}
