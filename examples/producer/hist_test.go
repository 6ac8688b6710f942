package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistIndexRoundTrip(t *testing.T) {
	// Every value lands in a bucket whose middle is within 1% of it, and
	// buckets are ordered like the values.
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 255, 256, 257, 511, 512, 1000, 1e6, 1e9, 1e12, 1 << 62, 1<<63 - 1, 1<<64 - 1} {
		i := histIndex(v)
		if i < prev {
			t.Errorf("histIndex(%d) = %d, below the previous value's %d", v, i, prev)
		}
		prev = i
		if i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d, out of %d buckets", v, i, histBuckets)
		}
		mid := histValue(i)
		if diff := float64(mid) - float64(v); diff > 0.01*float64(v)+0.5 || -diff > 0.01*float64(v)+0.5 {
			t.Errorf("value %d: bucket %d has middle %d, more than 1%% away", v, i, mid)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	cases := []struct {
		name    string
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{42}, 0.99, 42},
		{"median of small", []time.Duration{1, 2, 3, 4, 5}, 0.5, 3},
		{"max is exact", []time.Duration{10, 20, 30, 1234567}, 1, 1234567},
		{"negative is zero", []time.Duration{-5}, 0.5, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h histogram
			for _, s := range tc.samples {
				h.record(s)
			}
			if got := h.quantile(tc.q); got != tc.want {
				t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestHistogramMatchesSortedSamples(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h histogram
	samples := make([]time.Duration, 100000)
	for i := range samples {
		// Log-uniform from 100ns to 100ms, like latencies.
		samples[i] = time.Duration(100 * math.Exp2(r.Float64()*20))
		h.record(samples[i])
	}
	slices.Sort(samples)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		want := samples[max(int(q*float64(len(samples))+0.5), 1)-1]
		got := h.quantile(q)
		if d := float64(got-want) / float64(want); d > 0.01 || d < -0.01 {
			t.Errorf("quantile(%v) = %v, sorted samples say %v", q, got, want)
		}
	}
	if h.count() != uint64(len(samples)) {
		t.Errorf("count = %d, want %d", h.count(), len(samples))
	}
}

func TestHistogramRecordDoesNotAllocate(t *testing.T) {
	var h histogram
	if n := testing.AllocsPerRun(100, func() { h.record(123456) }); n != 0 {
		t.Errorf("record allocates %v times", n)
	}
}
