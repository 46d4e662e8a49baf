// Package livestatus keeps what the status page and `kmirror status` show
// beyond a single describe: each mirror's throughput and lag over the last
// minutes, and for the partitions still catching up their progress and an
// estimate of when they will be done. A Tracker is fed samples (the
// engine's status and its append counters) at a fixed interval by its
// owner; it runs nothing itself.
package livestatus

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/kmirror/kmirror/core/admin"
)

// Defaults of the engine's sampling: every 5 s, the last 10 minutes kept.
const (
	DefaultInterval = 5 * time.Second
	DefaultKeep     = 120
	// MaxPartitions is the most partitions a Live lists (failed ones
	// first, then those catching up, by lag): the page stays small at
	// 10,000 partitions. Counts and totals cover every partition.
	MaxPartitions = 1000
	// MaxCatchingUp is the most partitions listed as catching up.
	MaxCatchingUp = 20
)

// Counters is what a mirror has appended since the daemon started: bytes
// of batches and source offsets (records and markers).
type Counters struct{ Bytes, Offsets int64 }

// Tracker keeps each mirror's recent samples and each partition's rate.
// It is safe for concurrent use.
type Tracker struct {
	keep int

	mu      sync.Mutex
	mirrors map[string]*history
	parts   map[partKey]*partRate
	last    time.Time
}

type partKey struct {
	mirror, topic string
	partition     int32
}

// partRate is a partition's last mirrored offset and its smoothed rate.
type partRate struct {
	offset int64
	at     time.Time
	rate   float64 // offsets/s, exponentially smoothed
	seen   bool    // seen in the last sample (others are dropped)
}

// history is one mirror's samples, oldest first.
type history struct {
	points []Point
	prev   Counters
	prevAt time.Time
	seen   bool
}

// Point is one sample of a mirror.
type Point struct {
	At time.Time `json:"at"`
	// Lag is the sum of the partitions' known lags.
	Lag int64 `json:"lag"`
	// BytesPerSecond and RecordsPerSecond are the rates since the
	// previous sample (records: source offsets, markers included).
	BytesPerSecond   float64 `json:"bytes_per_second"`
	RecordsPerSecond float64 `json:"records_per_second"`
}

// New returns a Tracker keeping keep samples per mirror (at least 2).
func New(keep int) *Tracker {
	return &Tracker{keep: max(keep, 2), mirrors: map[string]*history{}, parts: map[partKey]*partRate{}}
}

// smoothing is the weight of the newest rate in a partition's smoothed
// rate.
const smoothing = 0.5

// Sample records st, the engine's status at now, and each mirror's
// counters (counters(name)). Mirrors and partitions no longer in st are
// forgotten.
func (t *Tracker) Sample(now time.Time, st admin.Status, counters func(mirror string) Counters) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range t.mirrors {
		h.seen = false
	}
	for _, r := range t.parts {
		r.seen = false
	}
	for _, m := range st.Mirrors {
		h := t.mirrors[m.Name]
		if h == nil {
			h = &history{}
			t.mirrors[m.Name] = h
		}
		h.seen = true
		c := counters(m.Name)
		p := Point{At: now, Lag: totalLag(m.Partitions)}
		if !h.prevAt.IsZero() {
			if secs := now.Sub(h.prevAt).Seconds(); secs > 0 {
				p.BytesPerSecond = max(0, float64(c.Bytes-h.prev.Bytes)/secs)
				p.RecordsPerSecond = max(0, float64(c.Offsets-h.prev.Offsets)/secs)
			}
		}
		h.prev, h.prevAt = c, now
		h.points = append(h.points, p)
		if n := len(h.points) - t.keep; n > 0 {
			h.points = slices.Delete(h.points, 0, n)
		}
		for _, ps := range m.Partitions {
			k := partKey{m.Name, ps.Topic, ps.Partition}
			r := t.parts[k]
			if r == nil {
				t.parts[k] = &partRate{offset: ps.LastMirroredOffset, at: now, seen: true}
				continue
			}
			if secs := now.Sub(r.at).Seconds(); secs > 0 {
				rate := max(0, float64(ps.LastMirroredOffset-r.offset)/secs)
				r.rate = smoothing*rate + (1-smoothing)*r.rate
			}
			r.offset, r.at, r.seen = ps.LastMirroredOffset, now, true
		}
	}
	for name, h := range t.mirrors {
		if !h.seen {
			delete(t.mirrors, name)
		}
	}
	for k, r := range t.parts {
		if !r.seen {
			delete(t.parts, k)
		}
	}
	t.last = now
}

func totalLag(ps []admin.PartitionStatus) int64 {
	var n int64
	for _, p := range ps {
		if p.Lag > 0 {
			n += p.Lag
		}
	}
	return n
}

// Live is what the status page shows: the status of every mirror as of
// now, with its recent history.
type Live struct {
	GeneratedAt time.Time `json:"generated_at"`
	// SampledAt is the last sample's time (zero before the first); the
	// rates and history are as of then, states and lags as of now.
	SampledAt       time.Time    `json:"sampled_at"`
	IntervalSeconds float64      `json:"interval_seconds"`
	Mirrors         []LiveMirror `json:"mirrors"`
}

// LiveMirror is one mirror on the status page.
type LiveMirror struct {
	Name     string                `json:"name"`
	Error    string                `json:"error,omitempty"`
	Clusters []admin.ClusterStatus `json:"clusters"`
	// States counts the partitions per state.
	States     map[string]int `json:"states"`
	Partitions int            `json:"partitions"`
	LagTotal   int64          `json:"lag_total"`
	LagMax     int64          `json:"lag_max"`
	// BytesPerSecond and RecordsPerSecond are the last sample's rates.
	BytesPerSecond   float64 `json:"bytes_per_second"`
	RecordsPerSecond float64 `json:"records_per_second"`
	History          []Point `json:"history"`
	// Failed are the FAILED partitions with their reasons.
	Failed []LivePartition `json:"failed"`
	// CatchingUp are the partitions with the largest lags (at most
	// MaxCatchingUp), with their progress and an estimate.
	CatchingUp []LivePartition `json:"catching_up"`
	// List is every partition, failed first, then by lag (at most
	// MaxPartitions; Partitions counts them all).
	List []LivePartition `json:"list"`
}

// LivePartition is one partition on the status page.
type LivePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	State     string `json:"state"`
	Mode      string `json:"mode"`
	Lag       int64  `json:"lag"`
	// Mirrored is the last mirrored source offset (-1: none) and
	// HighWatermark the source's end (-1: unknown).
	Mirrored      int64 `json:"last_mirrored_offset"`
	HighWatermark int64 `json:"source_high_watermark"`
	// Progress is the share of the source's log (log start to high
	// watermark) mirrored, 0 to 1; -1 when unknown.
	Progress float64 `json:"progress"`
	// RecordsPerSecond is the partition's smoothed rate; ETASeconds the
	// time its lag takes at that rate (-1: unknown, for example while it
	// does not move).
	RecordsPerSecond float64 `json:"records_per_second"`
	ETASeconds       float64 `json:"eta_seconds"`
	Reason           string  `json:"reason,omitempty"`
	Retry            string  `json:"retry,omitempty"`
}

// Live is st, the engine's status at now, with the recent history kept.
func (t *Tracker) Live(now time.Time, st admin.Status, interval time.Duration) Live {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := Live{GeneratedAt: now, SampledAt: t.last, IntervalSeconds: interval.Seconds(), Mirrors: []LiveMirror{}}
	for _, m := range st.Mirrors {
		lm := LiveMirror{Name: m.Name, Error: m.Error, Clusters: m.Clusters, States: map[string]int{}, Partitions: len(m.Partitions),
			History: []Point{}, Failed: []LivePartition{}, CatchingUp: []LivePartition{}, List: []LivePartition{}}
		if lm.Clusters == nil {
			lm.Clusters = []admin.ClusterStatus{}
		}
		if h := t.mirrors[m.Name]; h != nil && len(h.points) > 0 {
			lm.History = slices.Clone(h.points)
			last := h.points[len(h.points)-1]
			lm.BytesPerSecond, lm.RecordsPerSecond = last.BytesPerSecond, last.RecordsPerSecond
		}
		all := make([]LivePartition, 0, len(m.Partitions))
		for _, ps := range m.Partitions {
			lm.States[ps.State]++
			if ps.Lag > 0 {
				lm.LagTotal += ps.Lag
				lm.LagMax = max(lm.LagMax, ps.Lag)
			}
			lp := t.partition(m.Name, ps)
			all = append(all, lp)
			if ps.State == "FAILED" {
				lm.Failed = append(lm.Failed, lp)
			}
		}
		slices.SortStableFunc(all, func(a, b LivePartition) int {
			if fa, fb := a.State == "FAILED", b.State == "FAILED"; fa != fb {
				if fa {
					return -1
				}
				return 1
			}
			return cmp.Compare(b.Lag, a.Lag)
		})
		for _, lp := range all {
			if len(lm.CatchingUp) == MaxCatchingUp {
				break
			}
			if lp.Lag > 0 && (lp.State == "MIRRORING" || lp.State == "PREPARING") {
				lm.CatchingUp = append(lm.CatchingUp, lp)
			}
		}
		slices.SortStableFunc(lm.CatchingUp, func(a, b LivePartition) int { return cmp.Compare(b.Lag, a.Lag) })
		lm.List = all[:min(len(all), MaxPartitions)]
		out.Mirrors = append(out.Mirrors, lm)
	}
	return out
}

// partition is ps with its progress, rate and estimate.
func (t *Tracker) partition(mirror string, ps admin.PartitionStatus) LivePartition {
	lp := LivePartition{Topic: ps.Topic, Partition: ps.Partition, State: ps.State, Mode: ps.Mode, Lag: ps.Lag,
		Mirrored: ps.LastMirroredOffset, HighWatermark: ps.SourceHighWatermark, Progress: -1, ETASeconds: -1, Retry: ps.Retry}
	// FAILED: why; MIRRORING or PREPARING: what its retried appends wait
	// for (a cut or full destination), when they do.
	lp.Reason = ps.LastError
	if hw, start := ps.SourceHighWatermark, max(ps.SourceLogStart, 0); hw >= 0 && ps.Lag >= 0 {
		if span := hw - start; span > 0 {
			lp.Progress = min(1, max(0, float64(span-ps.Lag)/float64(span)))
		} else {
			lp.Progress = 1
		}
	}
	if r := t.parts[partKey{mirror, ps.Topic, ps.Partition}]; r != nil {
		lp.RecordsPerSecond = r.rate
		switch {
		case ps.Lag == 0:
			lp.ETASeconds = 0
		case ps.Lag > 0 && r.rate > 0:
			lp.ETASeconds = float64(ps.Lag) / r.rate
		}
	} else if ps.Lag == 0 {
		lp.ETASeconds = 0
	}
	return lp
}
