package stats

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestQuantilesUseNearestRank(t *testing.T) {
	var samples []time.Duration
	for i := 1000; i >= 1; i-- { // 1..1000 ms, in reverse order
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	rand.Shuffle(len(samples), func(i, j int) { samples[i], samples[j] = samples[j], samples[i] })
	got := Quantiles(samples, 0.5, 0.99, 0.999, 1)
	want := []time.Duration{500 * time.Millisecond, 990 * time.Millisecond, 999 * time.Millisecond, 1000 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("quantile %d = %s, want %s", i, got[i], want[i])
		}
	}
}

func TestQuantilesOfFewOrNoSamples(t *testing.T) {
	if got := Quantiles(nil, 0.5, 0.99); got[0] != 0 || got[1] != 0 {
		t.Errorf("quantiles of nothing = %v, want zeros", got)
	}
	one := []time.Duration{7 * time.Millisecond}
	if got := Quantiles(one, 0.001, 0.999); got[0] != 7*time.Millisecond || got[1] != 7*time.Millisecond {
		t.Errorf("quantiles of one sample = %v, want it for both", got)
	}
	// With 10 samples, p99.9 is the largest, p50 the 5th.
	ten := []time.Duration{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	if got := Quantiles(ten, 0.5, 0.999); got[0] != 5 || got[1] != 10 {
		t.Errorf("quantiles of ten = %v, want [5 10]", got)
	}
}

func TestRateAndRatio(t *testing.T) {
	if got := Rate(100, 4*time.Second); got != 25 {
		t.Errorf("rate = %v, want 25", got)
	}
	if got := Rate(100, 0); got != 0 {
		t.Errorf("rate over no time = %v, want 0", got)
	}
	if r, ok := Ratio(3, 2); !ok || r != 1.5 {
		t.Errorf("ratio(3, 2) = %v %v", r, ok)
	}
	for _, c := range [][2]float64{{0, 1}, {1, 0}, {math.NaN(), 1}, {1, math.Inf(1)}} {
		if _, ok := Ratio(c[0], c[1]); ok {
			t.Errorf("ratio(%v, %v) is defined", c[0], c[1])
		}
	}
}
