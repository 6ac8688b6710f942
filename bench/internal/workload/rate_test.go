package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// ShouldThrottle is Java's: records so far over the seconds since start,
// in float, strictly above the target; never at the start itself, never
// with a negative target.
func TestThrottlerShouldThrottleAsJava(t *testing.T) {
	cases := []struct {
		name         string
		target       int64
		amount, ms   int64
		wantThrottle bool
	}{
		{"at the start", 1000, 5, 0, false},
		{"exactly at the rate", 1000, 10, 10, false},
		{"one record ahead", 1000, 11, 10, true},
		{"behind", 1000, 9, 10, false},
		{"negative target never throttles", -1, 1_000_000, 1, false},
		{"float rounding: 50 000/s, 50 001 records in 1 s", 50_000, 50_001, 1000, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			th := NewThrottler(tc.target, 0)
			if got := th.ShouldThrottle(tc.amount, tc.ms); got != tc.wantThrottle {
				t.Errorf("ShouldThrottle(%d, %d) with target %d = %v, want %v", tc.amount, tc.ms, tc.target, got, tc.wantThrottle)
			}
		})
	}
}

// A send loop paced by the throttle as ProducerPerformance's runs at the
// target rate, sleeping only once 2 ms of deficit have accumulated, even
// when every sleep oversleeps (here by 80 µs) and sends cost time.
func TestThrottlerPacesTheLoopAtTheRate(t *testing.T) {
	for _, rate := range []int64{5_000, 20_000, 50_000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			var now int64 // fake clock, ns; wall ms is now/1e6
			var sleeps []int64
			th := NewThrottler(rate, 0)
			th.nanotime = func() int64 { return now }
			th.wait = func(ms, ns int64) {
				if ns > 0 {
					ms++ // Object.wait(ms, ns) rounds up
				}
				d := ms*nsPerMs + 80_000
				sleeps = append(sleeps, d)
				now += d
			}
			const seconds = 3
			n := rate * seconds
			throttles := 0
			for i := range n {
				sendStartMs := now / nsPerMs
				now += 2_000 // the send
				if th.ShouldThrottle(i, sendStartMs) {
					throttles++
					deficit := th.sleepDeficitNs + th.sleepTimeNs
					before := len(sleeps)
					th.Throttle()
					if len(sleeps) > before && deficit < minSleepNs {
						t.Fatalf("slept with a deficit of %d ns, below Java's 2 ms", deficit)
					}
				}
			}
			got := float64(n) / (float64(now) / 1e9)
			if math.Abs(got-float64(rate))/float64(rate) > 0.02 {
				t.Errorf("rate %d: the loop ran at %.0f records/s (%d throttles, %d sleeps)", rate, got, throttles, len(sleeps))
			}
			if len(sleeps) == 0 {
				t.Errorf("rate %d: never slept", rate)
			}
			// Each sleep is one wait of the 2 ms deficit (1e9/rate ns a
			// record divides 2 ms here), then the deficit is forgotten.
			for _, d := range sleeps {
				if d != 2*nsPerMs+80_000 {
					t.Fatalf("rate %d: a wait of %v, want 2ms (+ the 80µs oversleep)", rate, time.Duration(d))
				}
			}
		})
	}
}

// Every value falls in the bucket whose bounds Quantile reads, and each
// bucket is at most 1/128 of its lower bound wide.
func TestHistogramBuckets(t *testing.T) {
	vals := []int64{0, 1, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<20 + 12345, 3_000_000, 1 << 40, math.MaxInt64}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		vals = append(vals, r.Int64N(1<<uint(r.IntN(62)+1)))
	}
	for _, v := range vals {
		i := histBucket(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("histBucket(%d) = %d, outside [0, %d)", v, i, histBuckets)
		}
		lo, w := histBounds(i)
		if v < lo || v-lo >= w {
			t.Fatalf("value %d in bucket %d = [%d, %d+%d)", v, i, lo, lo, w)
		}
		if w > 1 && float64(w)/float64(lo) > 1.0/128 {
			t.Fatalf("bucket %d [%d, +%d) is wider than 1/128 of its lower bound", i, lo, w)
		}
	}
}

// The quantiles the table shows are within 1 % of the exact ones
// (nearest rank) over latencies from microseconds to seconds.
func TestHistogramQuantilesWithinOnePercent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h Histogram
	var exact []int64
	for range 200_000 {
		v := int64(math.Exp(r.Float64()*math.Log(1e10/1e3)) * 1e3) // 1 µs … 10 s, log-uniform
		exact = append(exact, v)
		h.Record(v)
	}
	slices.Sort(exact)
	buckets := h.Buckets()
	qs := slices.Clone(LatencyQuantiles)
	for q := 0.01; q < 1; q += 0.01 {
		qs = append(qs, q)
	}
	for _, q := range qs {
		got := Quantile(buckets, q)
		want := float64(exact[int(math.Ceil(q*float64(len(exact))))-1])
		if rel := math.Abs(got-want) / want; rel > 0.01 {
			t.Errorf("q %v: %v ns, exact %v ns: %.2f%% off", q, got, want, 100*rel)
		}
	}
	if got := Quantiles(buckets); len(got) != len(LatencyQuantiles) || got[0] != Quantile(buckets, 0.5) {
		t.Errorf("Quantiles = %v, want the LatencyQuantiles", got)
	}
	if q := Quantile(nil, 0.5); q != -1 {
		t.Errorf("Quantile of nothing = %v, want -1", q)
	}
}

// A fixed-rate run measures the steady phase only: the warm-up records
// complete and count as acknowledged, but only the records after it are
// in the histogram, each with its own latency, and the slots are freed.
func TestRateRunMeasuresTheSteadyPhaseOnly(t *testing.T) {
	spec := Spec{Name: "1KiB", Records: 300, Rate: 1000, RateWarmup: 100}
	var cnt Counter
	r := newRateRun(spec, &cnt)
	done := make(chan struct{})
	r.LoopSlots(context.Background(), func(i, slot int) {
		// A send costs 50 µs: Java's throttle lets through everything
		// sent in the first millisecond (no time has passed yet).
		for t0 := time.Now(); time.Since(t0) < 50*time.Microsecond; {
		}
		d := 20 * time.Millisecond // the warm-up's records are slow
		if i >= spec.RateWarmup {
			d = 2 * time.Millisecond
		}
		var err error
		if i == spec.Records-1 {
			err = errors.New("the last one fails")
		}
		go func() {
			time.Sleep(d)
			r.CompleteSlot(slot, err)
			if i == spec.Records-1 {
				close(done)
			}
		}()
	})
	<-done
	for cnt.Done() < int64(spec.Records) {
		time.Sleep(time.Millisecond)
	}
	r.finish()
	var res Result
	r.report(&res)
	if res.SteadyRecords != 200 {
		t.Errorf("SteadyRecords = %d, want 200", res.SteadyRecords)
	}
	var n int64
	for _, b := range res.LatencyBuckets {
		n += b[1]
	}
	if n != 200 {
		t.Errorf("the histogram holds %d latencies, want the 200 of the steady phase", n)
	}
	q := Quantiles(res.LatencyBuckets)
	if q[0] < 2e6 || q[3] >= 20e6 {
		t.Errorf("p50 %v ns, p99.9 %v ns: want the steady phase's 2 ms, none of the warm-up's 20 ms", q[0], q[3])
	}
	if cnt.acked.Load() != 299 || cnt.failed.Load() != 1 {
		t.Errorf("acked %d failed %d, want 299 and 1", cnt.acked.Load(), cnt.failed.Load())
	}
	// 200 records at 1 000/s: about 0.2 s of sending.
	if res.SteadySendNanos < int64(150*time.Millisecond) || res.SteadySendNanos > int64(time.Second) {
		t.Errorf("steady phase sent in %v, want about 200ms at 1 000/s", time.Duration(res.SteadySendNanos))
	}
	if res.ProduceCPUNanos <= 0 || res.WallNanos < res.SteadySendNanos {
		t.Errorf("CPU %d ns, wall %d ns, send %d ns", res.ProduceCPUNanos, res.WallNanos, res.SteadySendNanos)
	}
	for slot := range spec.Records {
		if r.busy[slot].Load() {
			t.Fatalf("slot %d still busy", slot)
		}
	}
}

func TestParseLinger(t *testing.T) {
	cases := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", 0, false},
		{"default", LingerClientDefault, false},
		{"1ms", time.Millisecond, false},
		{"0s", 0, true},
		{"-1ms", 0, true},
		{"soon", 0, true},
	}
	for _, tc := range cases {
		got, err := ParseLinger(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseLinger(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
