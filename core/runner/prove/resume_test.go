package prove

import (
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/partition"
)

// TestResumeAtDecidesFromTheModeAndTheLogs table-tests where a proven
// partition continues, against hand-built bounds and offset maps.
func TestResumeAtDecidesFromTheModeAndTheLogs(t *testing.T) {
	mapped := func(pairs ...[2]int64) *offsetmap.Map {
		m := &offsetmap.Map{}
		for _, p := range pairs {
			if err := m.Add(p[0], p[1]); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	cases := []struct {
		name    string
		mode    partition.Mode
		lb      Bounds
		dstEnd  int64
		m       *offsetmap.Map
		next    int64
		errSays string // "" none; a preserve-mode refusal is non-retryable
	}{
		{name: "preserve, behind the source", mode: partition.ModePreserve, lb: Bounds{SrcEnd: 30}, dstEnd: 20, next: 20},
		{name: "preserve, caught up", mode: partition.ModePreserve, lb: Bounds{SrcStart: 5, SrcEnd: 20}, dstEnd: 20, next: 20},
		{name: "preserve, an empty source and destination", mode: partition.ModePreserve, lb: Bounds{SrcStart: 7, SrcEnd: 7}, dstEnd: 0, next: 0},
		{name: "preserve, beyond the source's end", mode: partition.ModePreserve, lb: Bounds{SrcEnd: 10}, dstEnd: 20,
			errSays: "beyond the source's high watermark 10"},
		{name: "preserve, short of the source's log start", mode: partition.ModePreserve, lb: Bounds{SrcStart: 30, SrcEnd: 50}, dstEnd: 10,
			errSays: "records were deleted on the source before kmirror copied them"},
		{name: "map, nothing mapped", mode: partition.ModeMap, lb: Bounds{SrcStart: 12, SrcEnd: 50}, dstEnd: 0, m: mapped(), next: 12},
		{name: "map, after the last mapping", mode: partition.ModeMap, lb: Bounds{SrcEnd: 50}, dstEnd: 3, m: mapped([2]int64{0, 0}, [2]int64{2, 1}, [2]int64{3, 2}), next: 4},
		{name: "map, mappings beyond the destination's end are cut", mode: partition.ModeMap, lb: Bounds{SrcEnd: 50}, dstEnd: 2, m: mapped([2]int64{0, 0}, [2]int64{2, 1}, [2]int64{3, 2}), next: 3},
		{name: "an unknown mode", mode: partition.Mode("other"), errSays: "unknown mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, err := ResumeAt(tc.mode, tc.lb, tc.dstEnd, tc.m)
			if tc.errSays != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSays) || (tc.mode == partition.ModePreserve && partition.IsRetryable(err)) {
					t.Fatalf("ResumeAt: %v, want an error saying %q", err, tc.errSays)
				}
				return
			}
			if err != nil || next != tc.next {
				t.Fatalf("ResumeAt: %d, %v; want %d", next, err, tc.next)
			}
		})
	}
}
