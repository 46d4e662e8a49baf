package mirror

import (
	"fmt"
	"testing"

	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// TestAPausedPartitionsLagKeepsRising: a PAUSED partition fetches nothing,
// yet its lag follows the source (read again every
// mirror.metadata.refresh.interval.ms), so MaxLag and describe show how far
// behind a pause leaves the destination; resumed, the lag falls to 0.
func TestAPausedPartitionsLagKeepsRising(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "lagging", 2)
	f.produce(t, "lagging", 20, "tx-lag1")
	e := startEngine(t, f.config(t, "lagging"), memstore.New())
	f.waitMirrored(t, e, "lagging", 2)
	if _, err := e.Pause(kfaketest.Context(t), "test", []string{"lagging"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, e, "lagging", 0, "PAUSED")
	waitState(t, e, "lagging", 1, "PAUSED")
	f.produce(t, "lagging", 30, "tx-lag2")
	kfaketest.WaitFor(t, "the paused partitions' lag to reach the source's end", func() (bool, string) {
		done, state := true, ""
		for p := int32(0); p < 2; p++ {
			ps, _ := partitionStatus(e, "lagging", p)
			end := endOffset(t, f.srcCl, "lagging", p)
			want := end - (ps.LastMirroredOffset + 1)
			done = done && ps.State == "PAUSED" && want > 0 && ps.Lag == want && ps.SourceHighWatermark == end
			state += fmt.Sprintf("%d: %s lag %d, source end %d, mirrored to %d; ", p, ps.State, ps.Lag, end, ps.LastMirroredOffset)
		}
		return done, state
	})
	if _, err := e.Resume(kfaketest.Context(t), "test", []string{"lagging"}); err != nil {
		t.Fatal(err)
	}
	f.waitMirrored(t, e, "lagging", 2)
	for p := int32(0); p < 2; p++ {
		waitLag(t, e, "lagging", p, 0)
	}
}

// waitLag waits until topic/p shows lag want.
func waitLag(t *testing.T, e *Engine, topic string, p int32, want int64) {
	t.Helper()
	kfaketest.WaitFor(t, fmt.Sprintf("%s[%d] lag %d", topic, p, want), func() (bool, string) {
		ps, _ := partitionStatus(e, topic, p)
		return ps.Lag == want, fmt.Sprintf("%+v", ps)
	})
}
