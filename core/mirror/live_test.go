package mirror

import (
	"fmt"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/livestatus"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// TestLiveShowsStatesRatesAndHistory: while a mirror copies a backlog, the
// status page's data counts its partitions per state, shows the bytes and
// records per second it measured from the engine's own append counters,
// and ends caught up (lag 0, every partition's estimate 0) with a history
// of samples.
func TestLiveShowsStatesRatesAndHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "live", 3)
	f.produce(t, "live", 300, "live-txn")
	e := startEngineWith(t, f.config(t, "live"), memstore.New(), func(o *Options) { o.LiveInterval = 20 * time.Millisecond })
	var sawRate bool
	kfaketest.WaitFor(t, "the page's data caught up, with a measured rate", func() (bool, string) {
		l := e.Live().(livestatus.Live)
		if len(l.Mirrors) != 1 {
			return false, fmt.Sprintf("%d mirrors", len(l.Mirrors))
		}
		m := l.Mirrors[0]
		for _, p := range m.History {
			if p.RecordsPerSecond > 0 && p.BytesPerSecond > 0 {
				sawRate = true
			}
		}
		done := m.Partitions == 3 && m.States["MIRRORING"] == 3 && m.LagTotal == 0 && len(m.CatchingUp) == 0 && sawRate
		for _, p := range m.List {
			done = done && p.Lag == 0 && p.ETASeconds == 0 && p.Progress == 1
		}
		return done, fmt.Sprintf("%d partitions, states %v, lag %d, rate seen %v, history %d", m.Partitions, m.States, m.LagTotal, sawRate, len(m.History))
	})
	l := e.Live().(livestatus.Live)
	if l.IntervalSeconds != 0.02 || l.SampledAt.IsZero() || len(l.Mirrors[0].History) < 2 {
		t.Errorf("interval %v, sampled at %v, %d samples", l.IntervalSeconds, l.SampledAt, len(l.Mirrors[0].History))
	}
}
