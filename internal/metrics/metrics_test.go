package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// TestBucketsTileTheRange: every value falls in exactly one bucket whose
// bounds hold it, buckets are contiguous, and a bucket is at most 1/8 of its
// lower bound wide (the basis of RelativeError).
func TestBucketsTileTheRange(t *testing.T) {
	next := uint64(0)
	for i := range NumBuckets {
		lo, w := BucketBounds(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		if lo >= subCount && w*subCount > lo {
			t.Fatalf("bucket %d: width %d over 1/8 of %d", i, w, lo)
		}
		for _, v := range []uint64{lo, lo + w/2, lo + w - 1} {
			if got := bucketOf(v); got != i {
				t.Fatalf("bucketOf(%d) = %d, want %d", v, got, i)
			}
		}
		next = lo + w
	}
	if next != 0 { // the last bucket ends at 2^64, which wraps to 0
		t.Fatalf("buckets end at %d, want 2^64", next)
	}
	if got := bucketOf(math.MaxUint64); got != NumBuckets-1 {
		t.Fatalf("bucketOf(max) = %d", got)
	}
}

func TestHistogramCountSumMax(t *testing.T) {
	cases := []struct {
		name     string
		values   []uint64
		mean     float64
		max, p50 float64
	}{
		{"empty", nil, 0, 0, 0},
		{"one", []uint64{5}, 5, 5, 5},
		{"exact small", []uint64{1, 2, 3, 4, 5}, 3, 5, 3},
		{"zero", []uint64{0, 0}, 0, 0, 0},
		{"clamped to max", []uint64{961}, 961, 961, 961},
		{"bucket middle", []uint64{1000}, 1000, 1000, 991.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h Histogram
			for _, v := range tc.values {
				h.Observe(v)
			}
			s := h.Snapshot()
			if s.Count != uint64(len(tc.values)) || s.Mean() != tc.mean || float64(s.Max) != tc.max {
				t.Fatalf("count %d mean %v max %d, want %d %v %v", s.Count, s.Mean(), s.Max, len(tc.values), tc.mean, tc.max)
			}
			if got := s.Quantile(0.5); got != tc.p50 {
				t.Fatalf("p50 = %v, want %v", got, tc.p50)
			}
		})
	}
}

// TestQuantileWithinRelativeError is the property the histogram promises:
// for any sample, the estimate of a rank is within RelativeError of the
// sample's true value of that rank (nearest-rank definition).
func TestQuantileWithinRelativeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := []struct {
		name string
		gen  func() uint64
	}{
		{"uniform small", func() uint64 { return rng.Uint64N(100) }},
		{"uniform wide", func() uint64 { return rng.Uint64N(1 << 40) }},
		{"log-uniform", func() uint64 { return uint64(math.Exp2(rng.Float64() * 62)) }},
		{"latency-like", func() uint64 { return uint64(math.Exp(rng.NormFloat64()*1.5 + 13)) }},
	}
	qs := []float64{0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1}
	for _, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			for trial := range 50 {
				n := 1 + rng.IntN(2000)
				vals := make([]uint64, n)
				var h Histogram
				for i := range vals {
					vals[i] = d.gen()
					h.Observe(vals[i])
				}
				slices.Sort(vals)
				s := h.Snapshot()
				for _, q := range qs {
					rank := max(int(math.Ceil(q*float64(n))), 1)
					want := float64(vals[rank-1])
					got := s.Quantile(q)
					if math.Abs(got-want) > want*RelativeError {
						t.Fatalf("trial %d n=%d q=%v: estimate %v, true %v (error %.4f > %.4f)",
							trial, n, q, got, want, math.Abs(got-want)/want, RelativeError)
					}
				}
			}
		})
	}
}

func TestHistogramConcurrentObserve(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	const workers, per = 8, 10000
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				h.Observe(uint64(w*per + i))
			}
		})
	}
	wg.Wait()
	s := h.Snapshot()
	const n = workers * per
	if s.Count != n || s.Sum != n*(n-1)/2 || s.Max != n-1 {
		t.Fatalf("count %d sum %d max %d", s.Count, s.Sum, s.Max)
	}
	var total uint64
	for _, c := range s.Buckets {
		total += c
	}
	if total != n {
		t.Fatalf("buckets hold %d, want %d", total, n)
	}
}

func TestMergeAndPrimitives(t *testing.T) {
	var a, b Histogram
	a.Observe(10)
	b.Observe(1000)
	b.Observe(3)
	sa, sb := a.Snapshot(), b.Snapshot()
	sa.Merge(&sb)
	if sa.Count != 3 || sa.Sum != 1013 || sa.Max != 1000 || sa.Quantile(0) != 3 {
		t.Fatalf("merged %d %d %d p0 %v", sa.Count, sa.Sum, sa.Max, sa.Quantile(0))
	}

	var c Counter
	c.Inc()
	c.Add(4)
	var g Gauge
	g.Set(7)
	g.Add(-9)
	var m Max
	m.Observe(3)
	m.Observe(1)
	if c.Load() != 5 || g.Load() != -2 || m.Load() != 3 {
		t.Fatalf("counter %d gauge %d max %d", c.Load(), g.Load(), m.Load())
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	var h Histogram
	var s HistogramSnapshot
	if n := testing.AllocsPerRun(100, func() {
		h.Observe(12345)
		h.SnapshotInto(&s)
	}); n != 0 {
		t.Fatalf("%v allocations per observation", n)
	}
}

func BenchmarkHistogramObserve(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	v := uint64(1)
	for b.Loop() {
		h.Observe(v)
		v = v*6364136223846793005 + 1442695040888963407
	}
}

// BenchmarkHistogramObserveParallel: every goroutine observes into one
// histogram, as Sends on many goroutines would.
func BenchmarkHistogramObserveParallel(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		v := uint64(1)
		for pb.Next() {
			h.Observe(v >> 40)
			v = v*6364136223846793005 + 1442695040888963407
		}
	})
}

func BenchmarkCounterAddParallel(b *testing.B) {
	var c Counter
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}

func BenchmarkSnapshotQuantile(b *testing.B) {
	var h Histogram
	for i := range 100000 {
		h.Observe(uint64(i))
	}
	var s HistogramSnapshot
	b.ReportAllocs()
	for b.Loop() {
		h.SnapshotInto(&s)
		_ = s.Quantile(0.99)
	}
}
