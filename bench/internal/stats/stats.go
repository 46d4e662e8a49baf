// Package stats holds the bench's arithmetic: nearest-rank quantiles of latency
// samples, rates and ratios that are defined only when both figures are.
package stats

import (
	"math"
	"slices"
	"time"
)

// Quantiles returns the nearest-rank q-quantiles (0 < q <= 1) of samples:
// the smallest sample with at least q of all samples at or below it. It sorts
// samples in place. With no samples every quantile is 0.
func Quantiles(samples []time.Duration, qs ...float64) []time.Duration {
	out := make([]time.Duration, len(qs))
	if len(samples) == 0 {
		return out
	}
	slices.Sort(samples)
	n := len(samples)
	for i, q := range qs {
		rank := int(math.Ceil(q * float64(n)))
		rank = min(max(rank, 1), n)
		out[i] = samples[rank-1]
	}
	return out
}

// Rate returns amount per second over d, or 0 when d is not positive.
func Rate(amount float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return amount / d.Seconds()
}

// Ratio returns a/b and whether it is defined (both positive).
func Ratio(a, b float64) (float64, bool) {
	if a <= 0 || b <= 0 || math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return 0, false
	}
	return a / b, true
}
