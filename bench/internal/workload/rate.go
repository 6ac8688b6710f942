package workload

import (
	"context"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"
)

// The fixed-rate mode (issue 35): a client sends Spec.Records records at
// Spec.Rate records a second, paced by Java's ProducerPerformance
// throttle (Throttler), the first Spec.RateWarmup of them a warm-up, and
// reports the latency of every steady-phase record, from just before its
// send to its callback, in a Histogram, with the process's CPU over the
// steady phase.

// LingerClientDefault in Spec.Linger leaves the linger unset: each
// client's own default (samsa 5 ms, kgo 10 ms, Java's linger.ms 5 ms).
const LingerClientDefault time.Duration = -1

// The constants of Java's ThroughputThrottler (org.apache.kafka.tools).
const (
	nsPerMs    = int64(time.Millisecond)
	nsPerSec   = int64(time.Second)
	minSleepNs = 2 * nsPerMs
)

// Throttler paces a send loop as Java's ProducerPerformance does with
// --throughput: its ThroughputThrottler, logic for logic. The loop reads
// the wall clock in milliseconds before each send (sendStartMs) and,
// after the send, calls Throttle when ShouldThrottle(i, sendStartMs) says
// the records so far are ahead of the rate since startMs. Throttle adds
// one record's share of a second (1e9/rate ns) to a sleep deficit and,
// once the deficit reaches 2 ms, sleeps it off in Object.wait(ms, ns)
// steps (which wait ms+1 milliseconds when ns > 0) until the deficit's
// time has passed, then forgets the deficit (an oversleep is not paid
// back). A rate of 0, which Java's throttler turns into a wait for
// wakeup, is not supported: NewThrottler's callers refuse it.
type Throttler struct {
	startMs        int64
	sleepTimeNs    int64
	target         int64
	sleepDeficitNs int64

	// nanotime and wait are System.nanoTime and Object.wait(ms, ns);
	// tests replace them.
	nanotime func() int64
	wait     func(ms, ns int64)
}

var monoBase = time.Now()

// NewThrottler returns Java's ThroughputThrottler(targetThroughput,
// startMs): a negative target never throttles.
func NewThrottler(targetThroughput, startMs int64) *Throttler {
	t := &Throttler{
		startMs:  startMs,
		target:   targetThroughput,
		nanotime: func() int64 { return int64(time.Since(monoBase)) },
		wait:     objectWait,
	}
	if targetThroughput > 0 {
		t.sleepTimeNs = nsPerSec / targetThroughput
	} else {
		t.sleepTimeNs = 1<<63 - 1
	}
	return t
}

// objectWait sleeps as Java 17's Object.wait(timeoutMillis, nanos) with no
// notify: a non-zero nanos adds a millisecond.
func objectWait(ms, ns int64) {
	if ns > 0 {
		ms++
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
}

// ShouldThrottle reports whether amountSoFar records sent by sendStartMs
// (wall clock, ms) are ahead of the target rate since startMs. Java
// computes it in float: elapsed seconds as a float, amountSoFar divided
// by it, compared with the target.
func (t *Throttler) ShouldThrottle(amountSoFar, sendStartMs int64) bool {
	if t.target < 0 {
		return false
	}
	elapsedSec := float32(sendStartMs-t.startMs) / 1000
	return elapsedSec > 0 && float32(amountSoFar)/elapsedSec > float32(t.target)
}

// Throttle adds one record's share of a second to the sleep deficit and
// sleeps it off once it reaches 2 ms (Java's MIN_SLEEP_NS).
func (t *Throttler) Throttle() {
	t.sleepDeficitNs += t.sleepTimeNs
	if t.sleepDeficitNs < minSleepNs {
		return
	}
	sleepStartNs := t.nanotime()
	remaining := t.sleepDeficitNs
	for remaining > 0 {
		sleepMs := remaining / nsPerMs
		sleepNs := remaining - sleepMs*nsPerMs
		t.wait(sleepMs, sleepNs)
		elapsed := t.nanotime() - sleepStartNs
		remaining = t.sleepDeficitNs - elapsed
	}
	t.sleepDeficitNs = 0
}

// Histogram counts latencies in nanoseconds in log-linear buckets: exact
// below 256 ns, then 128 buckets per power of two, so that a bucket's
// width is at most 1/128 of its lower bound and its midpoint, which
// Quantile reports, is within 0.4 % of every value in it. Record is safe
// for concurrent use. The Java client (clients/java) buckets the same
// way and reports its counts, so that one function reads every client's
// quantiles.
type Histogram struct {
	counts [histBuckets]atomic.Int64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // buckets per power of two
	// histBuckets covers every non-negative int64: 2*histSub exact
	// values, then histSub buckets for each exponent 1 … 63-histSubBits-1.
	histBuckets = 2*histSub + (63-histSubBits-1)*histSub
)

// histBucket returns the bucket of v ≥ 0.
func histBucket(v int64) int {
	if v < 2*histSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - (histSubBits + 1) // v>>e in [histSub, 2*histSub)
	return 2*histSub + (e-1)*histSub + int(v>>e) - histSub
}

// histBounds returns the smallest value of bucket i and the bucket's width.
func histBounds(i int) (lo, width int64) {
	if i < 2*histSub {
		return int64(i), 1
	}
	e := (i-2*histSub)/histSub + 1
	m := int64(histSub + (i-2*histSub)%histSub)
	return m << e, 1 << e
}

// Record counts one latency of ns nanoseconds (a negative one as 0).
func (h *Histogram) Record(ns int64) { h.counts[histBucket(ns)].Add(1) }

// Buckets returns the non-empty buckets as [bucket, count] pairs in
// bucket order: what a client reports (Result.LatencyBuckets).
func (h *Histogram) Buckets() [][2]int64 {
	var out [][2]int64
	for i := range h.counts {
		if n := h.counts[i].Load(); n > 0 {
			out = append(out, [2]int64{int64(i), n})
		}
	}
	return out
}

// Quantile returns the q-quantile (0 < q ≤ 1) of the latencies counted in
// buckets (Histogram.Buckets, bucket order) in nanoseconds: the midpoint
// of the bucket holding the value of rank ⌈q·n⌉, within 0.4 % of that
// value. -1 when buckets is empty.
func Quantile(buckets [][2]int64, q float64) float64 {
	var n int64
	for _, b := range buckets {
		n += b[1]
	}
	if n == 0 {
		return -1
	}
	rank := int64(q * float64(n))
	if float64(rank) < q*float64(n) {
		rank++
	}
	rank = min(max(rank, 1), n)
	var seen int64
	for _, b := range buckets {
		if seen += b[1]; seen >= rank {
			lo, w := histBounds(int(b[0]))
			if w == 1 {
				return float64(lo)
			}
			return float64(lo) + float64(w)/2
		}
	}
	return -1 // not reached
}

// rateSlots is how many records a RateRun tracks at once by slot: more
// than a client can buffer of 1 KiB records in the default 64 MiB, so
// that a slot is free again long before the loop comes back to it.
const rateSlots = 1 << 17

// RateRun is one fixed-rate run of a client: the send loop (LoopSlots),
// the completions (CompleteSlot) and what the steady phase measured. The
// client's ProduceRate drives it.
type RateRun struct {
	spec Spec
	cnt  *Counter
	base time.Time

	hist Histogram
	// starts holds each slot's send time in ns since base; busy says the
	// slot's record has not completed yet.
	starts []int64
	busy   []atomic.Bool
	// steadyNs is when the steady phase began, in ns since base
	// (math.MaxInt64 before): a record sent at or after it is measured.
	steadyNs  atomic.Int64
	steadyAt  time.Time
	sendEnd   time.Time
	end       time.Time
	cpu0      time.Duration
	cpu1      time.Duration
	slotWaits int64
}

func newRateRun(spec Spec, cnt *Counter) *RateRun {
	r := &RateRun{spec: spec, cnt: cnt, base: time.Now()}
	r.steadyNs.Store(1<<63 - 1)
	return r
}

// Records is how many records the run sends, the warm-up included.
func (r *RateRun) Records() int { return r.spec.Records }

// LoopSlots sends the run's records at its rate. No client's callback
// is told which send it answers with a clock finer than a millisecond
// (samsa's and Java's get the partition, offset and a millisecond
// timestamp; kgo truncates the record's Timestamp to the millisecond),
// so the run has Slots slots and a client one callback per slot, made
// before the loop: send(i, slot) must send record i with slot's callback,
// which calls CompleteSlot(slot, err) once. A slot is used again only
// once its record has completed (the loop waits, counted in SlotWaits).
// Record i's send time is taken just before send(i, slot), from the same
// clock read as the throttle's sendStartMs.
func (r *RateRun) LoopSlots(ctx context.Context, send func(i, slot int)) {
	r.starts = make([]int64, rateSlots)
	r.busy = make([]atomic.Bool, rateSlots)
	th := NewThrottler(r.spec.Rate, time.Now().UnixMilli())
	for i := range r.spec.Records {
		if ctx.Err() != nil {
			r.cnt.Fail(r.spec.Records-i, ctx.Err())
			break
		}
		slot := i % rateSlots
		for r.busy[slot].Load() {
			r.slotWaits++
			time.Sleep(100 * time.Microsecond)
		}
		if i == r.spec.RateWarmup {
			r.cpu0 = processCPU()
			r.steadyAt = time.Now()
			r.steadyNs.Store(int64(r.steadyAt.Sub(r.base)))
		}
		start := time.Now()
		sendStartMs := start.UnixMilli()
		r.starts[slot] = int64(start.Sub(r.base))
		r.busy[slot].Store(true)
		send(i, slot)
		if th.ShouldThrottle(int64(i), sendStartMs) {
			th.Throttle()
		}
	}
	r.sendEnd = time.Now()
}

// Slots is the number of slots of LoopSlots: a client makes one callback
// for each, before the loop.
func Slots() int { return rateSlots }

// CompleteSlot counts the outcome of the record sent with slot's
// callback and frees the slot: a steady-phase record's latency, from just
// before its send to now, goes into the histogram (a failed record's
// too: it completed then).
func (r *RateRun) CompleteSlot(slot int, err error) {
	s := r.starts[slot]
	r.complete(s, int64(time.Since(r.base))-s, err)
	r.busy[slot].Store(false)
}

func (r *RateRun) complete(startNs, latency int64, err error) {
	if startNs >= r.steadyNs.Load() {
		r.hist.Record(latency)
	}
	if err != nil {
		r.cnt.Fail(1, err)
		return
	}
	r.cnt.Ack()
}

// finish takes the steady phase's end: call it once every record has
// completed (the client's ProduceRate has returned).
func (r *RateRun) finish() {
	r.end = time.Now()
	r.cpu1 = processCPU()
}

// report fills res with the steady phase's figures.
func (r *RateRun) report(res *Result) {
	res.Rate = r.spec.Rate
	res.SteadyRecords = r.spec.Records - min(r.spec.RateWarmup, r.spec.Records)
	res.LatencyBuckets = r.hist.Buckets()
	res.SlotWaits = r.slotWaits
	res.WallNanos, res.SteadySendNanos, res.ProduceCPUNanos = 0, 0, 0
	if r.steadyAt.IsZero() {
		return
	}
	res.WallNanos = int64(r.end.Sub(r.steadyAt))
	res.SteadySendNanos = int64(r.sendEnd.Sub(r.steadyAt))
	if r.cpu0 >= 0 && r.cpu1 >= 0 {
		res.ProduceCPUNanos = int64(r.cpu1 - r.cpu0)
	}
}

// RateClient is a Client that runs the fixed-rate mode (Spec.Rate > 0).
type RateClient interface {
	Client
	// ProduceRate sends r.Records() records through r.LoopSlots, each
	// completing through r.CompleteSlot, then flushes; it returns once
	// every record has completed.
	ProduceRate(ctx context.Context, r *RateRun)
}

// LatencyQuantiles are the quantiles the fixed-rate table shows.
var LatencyQuantiles = []float64{0.50, 0.95, 0.99, 0.999}

// sortedBuckets returns b sorted by bucket, for Quantile.
func sortedBuckets(b [][2]int64) [][2]int64 {
	b = slices.Clone(b)
	slices.SortFunc(b, func(x, y [2]int64) int { return int(x[0] - y[0]) })
	return b
}

// Quantiles returns the LatencyQuantiles of a client's reported buckets
// in nanoseconds (-1 each when there are none).
func Quantiles(buckets [][2]int64) []float64 {
	b := sortedBuckets(buckets)
	out := make([]float64, len(LatencyQuantiles))
	for i, q := range LatencyQuantiles {
		out[i] = Quantile(b, q)
	}
	return out
}

// Fail counts a failure of the run outside any record (a Flush that
// failed): the records not completed yet count as failed.
func (r *RateRun) Fail(err error) {
	r.cnt.Fail(r.spec.Records-int(r.cnt.Done()), err)
}
