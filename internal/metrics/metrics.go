package metrics

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// Counter is a monotonic count. The zero value is ready; it must not be
// copied after first use.
type Counter struct{ v atomic.Uint64 }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Load returns the count.
func (c *Counter) Load() uint64 { return c.v.Load() }

// Gauge is a value that goes up and down. The zero value is ready; it must
// not be copied after first use.
type Gauge struct{ v atomic.Int64 }

// Set replaces the value.
func (g *Gauge) Set(v int64) { g.v.Store(v) }

// Add adds d, which may be negative.
func (g *Gauge) Add(d int64) { g.v.Add(d) }

// Load returns the value.
func (g *Gauge) Load() int64 { return g.v.Load() }

// Max keeps the largest value stored into it. The zero value is ready (its
// value is 0); it must not be copied after first use.
type Max struct{ v atomic.Uint64 }

// Observe raises the maximum to v if v is larger. It costs one atomic load
// when v is not a new maximum, the common case.
func (m *Max) Observe(v uint64) {
	for {
		cur := m.v.Load()
		if v <= cur || m.v.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Load returns the maximum.
func (m *Max) Load() uint64 { return m.v.Load() }

const (
	subBits  = 3            // each power of two is split into 1<<subBits buckets
	subCount = 1 << subBits // 8
	// NumBuckets is the number of buckets of a Histogram: subCount exact
	// buckets for 0..7, then subCount per power of two up to 2^64.
	NumBuckets = (64 - subBits + 1) * subCount
)

// RelativeError bounds the error of Snapshot.Quantile relative to the true
// value of that rank: a bucket is at most 1/8 of its lower bound wide, and
// the estimate is its middle.
const RelativeError = 1.0 / (2 * subCount)

// bucketOf returns the index of the bucket holding v.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(v) - 1 // v's highest set bit, ≥ subBits
	sub := int(v>>(e-subBits)) & (subCount - 1)
	return (e-subBits+1)*subCount + sub
}

// BucketBounds returns the smallest value of bucket i and the bucket's
// width: it holds lo..lo+width-1.
func BucketBounds(i int) (lo, width uint64) {
	if i < subCount {
		return uint64(i), 1
	}
	e := i/subCount + subBits - 1
	sub := uint64(i % subCount)
	width = 1 << (e - subBits)
	return 1<<e + sub*width, width
}

// Histogram counts observations in NumBuckets fixed buckets (about 4 KiB)
// and keeps their sum and maximum (the count is the buckets' total, so an
// observation costs three atomic adds and, unless it is a new maximum, one
// atomic load). Observe takes no lock and does
// not allocate; it is safe from any number of goroutines. The zero value is
// ready; it must not be copied after first use.
type Histogram struct {
	sum     atomic.Uint64
	max     Max
	buckets [NumBuckets]atomic.Uint64
}

// Observe records v (a latency in nanoseconds, a size in bytes). The sum
// wraps around past 2^64.
func (h *Histogram) Observe(v uint64) {
	h.buckets[bucketOf(v)].Add(1)
	h.sum.Add(v)
	h.max.Observe(v)
}

// Snapshot returns the histogram's current state.
func (h *Histogram) Snapshot() HistogramSnapshot {
	var s HistogramSnapshot
	h.SnapshotInto(&s)
	return s
}

// SnapshotInto writes the histogram's current state into s, without
// allocating.
func (h *Histogram) SnapshotInto(s *HistogramSnapshot) {
	s.Count = 0
	for i := range h.buckets {
		c := h.buckets[i].Load()
		s.Buckets[i] = c
		s.Count += c
	}
	s.Sum = h.sum.Load()
	s.Max = h.max.Load()
}

// HistogramSnapshot is a copy of a Histogram's state.
type HistogramSnapshot struct {
	// Count is the number of observations, Sum their total and Max the
	// largest.
	Count, Sum, Max uint64
	// Buckets holds the count of each bucket; see BucketBounds.
	Buckets [NumBuckets]uint64
}

// Mean returns Sum/Count, or 0 without observations.
func (s *HistogramSnapshot) Mean() float64 {
	if s.Count == 0 {
		return 0
	}
	return float64(s.Sum) / float64(s.Count)
}

// Quantile estimates the value of rank ceil(q·n) among the n observations
// (q in [0, 1]; q ≤ 0 gives the smallest, q ≥ 1 the largest): the middle of
// the bucket holding it, at most Max. The estimate is within RelativeError
// of the true value. It returns 0 without observations.
func (s *HistogramSnapshot) Quantile(q float64) float64 {
	n := s.Count
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	var seen uint64
	for i, c := range s.Buckets {
		seen += c
		if seen < rank {
			continue
		}
		lo, width := BucketBounds(i)
		est := float64(lo) + float64(width-1)/2
		if m := float64(s.Max); s.Max >= lo && est > m {
			est = m
		}
		return est
	}
	return float64(s.Max) // unreachable: rank ≤ n
}

// Merge adds o's observations to s.
func (s *HistogramSnapshot) Merge(o *HistogramSnapshot) {
	s.Count += o.Count
	s.Sum += o.Sum
	s.Max = max(s.Max, o.Max)
	for i, c := range o.Buckets {
		s.Buckets[i] += c
	}
}
