package cluster

import (
	"testing"

	"github.com/kmirror/kmirror/core/batch"
)

func TestOnlyMarkers(t *testing.T) {
	t.Parallel()
	ctl := func(off, pid int64, ct batch.ControlType) []byte {
		b, err := batch.EncodeControl(batch.EncodeOptions{BaseOffset: off, ProducerID: pid, ProducerEpoch: 1}, ct, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	data := func(off int64) []byte {
		b, err := batch.Encode(batch.EncodeOptions{BaseOffset: off, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 0}, []batch.Record{{Offset: off}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		records []byte
		end     int64
		want    bool
	}{
		{"one copy", cat(ctl(5, 7, batch.ControlCommit), ctl(6, 7, batch.ControlCommit)), 7, true},
		{"two copies", cat(ctl(5, 7, batch.ControlAbort), ctl(6, 7, batch.ControlAbort), ctl(7, 7, batch.ControlAbort)), 8, true},
		{"fetched from before the marker", cat(data(4), ctl(5, 7, batch.ControlCommit), ctl(6, 7, batch.ControlCommit)), 7, true},
		{"other type", cat(ctl(5, 7, batch.ControlCommit), ctl(6, 7, batch.ControlAbort)), 7, false},
		{"other producer", cat(ctl(5, 7, batch.ControlCommit), ctl(6, 8, batch.ControlCommit)), 7, false},
		{"data after", cat(ctl(5, 7, batch.ControlCommit), data(6)), 7, false},
		{"marker of another producer first", cat(ctl(5, 8, batch.ControlCommit), ctl(6, 7, batch.ControlCommit)), 7, false},
		{"fewer than the end", cat(ctl(5, 7, batch.ControlCommit), ctl(6, 7, batch.ControlCommit)), 8, false},
		{"nothing", nil, 7, false},
	} {
		if got := onlyMarkers(tc.records, 7, 5, tc.end); got != tc.want {
			t.Errorf("%s: onlyMarkers = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Copies found later, of a marker of known type: every one must be
	// of that type, the first too.
	commits := cat(ctl(5, 7, batch.ControlCommit), ctl(6, 7, batch.ControlCommit))
	if !onlyMarkersOf(commits, 7, batch.ControlCommit, 5, 7) {
		t.Error("onlyMarkersOf(COMMIT) refuses two COMMIT copies")
	}
	if onlyMarkersOf(commits, 7, batch.ControlAbort, 5, 7) {
		t.Error("onlyMarkersOf(ABORT) takes COMMIT markers for copies")
	}
}
