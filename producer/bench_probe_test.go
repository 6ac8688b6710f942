package producer

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"runtime/trace"
	"slices"
	"strings"
	"testing"
	"time"
)

// threadCounters are the counters getrusage(RUSAGE_THREAD) keeps for one
// thread: voluntary context switches (the thread slept: it blocked in the
// kernel, on a futex for instance, or the Go scheduler parked it),
// involuntary ones (the OS ran something else on its core) and minor page
// faults. Its CPU time is left out: the kernel brings a thread's CPU time
// up to date only at a context switch or a scheduler tick (4 ms here), so
// over one Send it is off by up to a tick.
type threadCounters struct{ vcsw, ivcsw, minflt int64 }

// sendProbes is what BenchmarkSendMetadataUnavailable records around each
// Send besides its latency, to tell what a slow Send was doing: the
// sending thread's counters over the Send (read just outside the timed
// window, on a goroutine locked to its thread), and the GC's cycle and
// pause counts between Sends (runtime/metrics). Every slice is allocated
// and touched before the first Send.
type sendProbes struct {
	vcsw, ivcsw, minflt []int32 // the thread's counters' increase over Send i
	// cycles and pauses are the completed GC cycles and GC stop-the-world
	// pauses before Send i (index i) and after the last one (index n).
	cycles, pauses []uint64
	inGC           []bool // Send i ran while a GC cycle was marking
	samples        []metrics.Sample
}

func newSendProbes(n int) *sendProbes {
	p := &sendProbes{
		vcsw: make([]int32, n), ivcsw: make([]int32, n), minflt: make([]int32, n),
		cycles: make([]uint64, n+1), pauses: make([]uint64, n+1), inGC: make([]bool, n),
		samples: []metrics.Sample{
			{Name: "/gc/cycles/total:gc-cycles"},
			{Name: "/sched/pauses/total/gc:seconds"},
		},
	}
	for i := range p.vcsw {
		p.vcsw[i], p.ivcsw[i], p.minflt[i], p.inGC[i] = 1, 1, 1, true
	}
	for i := range p.cycles {
		p.cycles[i], p.pauses[i] = 1, 1
	}
	p.readGC(0) // the histogram's buckets are allocated here, once
	return p
}

// thread records the counters read before (c0) and after (c1) Send i.
func (p *sendProbes) thread(i int, c0, c1 *threadCounters) {
	p.vcsw[i] = int32(c1.vcsw - c0.vcsw)
	p.ivcsw[i] = int32(c1.ivcsw - c0.ivcsw)
	p.minflt[i] = int32(c1.minflt - c0.minflt)
}

// readGC reads the GC counts at boundary k (before Send k). It does not
// allocate once the pause histogram exists.
func (p *sendProbes) readGC(k int) {
	metrics.Read(p.samples)
	p.cycles[k] = p.samples[0].Value.Uint64()
	var n uint64
	for _, c := range p.samples[1].Value.Float64Histogram().Counts {
		n += c
	}
	p.pauses[k] = n
}

// markGC sets inGC from the GC counts. A cycle starts with a stop-the-world
// pause (sweep termination) and ends with another (mark termination), in
// which the cycle is counted; between the two it marks, and a Send then
// may have to assist it or be preempted to have its stack scanned. A Send
// is in a GC cycle if one was marking when it started, or a pause or a
// cycle's end fell within it. The runtime counts a pause once the world
// runs again, so a cycle's last pause may be counted a little after the
// cycle itself.
func (p *sendProbes) markGC() {
	idle := p.pauses[0] // the pause count while no cycle marks
	start := uint64(0)  // the pause count when the cycle marking was seen to start
	for i := range p.inGC {
		marking := p.pauses[i] > idle
		if marking && start == 0 {
			start = p.pauses[i]
		}
		ended := p.cycles[i+1] != p.cycles[i]
		p.inGC[i] = marking || ended || p.pauses[i+1] != p.pauses[i]
		if !ended {
			continue
		}
		if (start != 0 && p.pauses[i+1] > start) || (start == 0 && p.pauses[i+1] >= idle+2) {
			idle = p.pauses[i+1] // both of the cycle's pauses are counted
		} else {
			idle = p.pauses[i+1] + 1 // its last one is not yet
		}
		start = 0
	}
}

// sendAttribution sums, over a benchmark's iterations, the Sends over 1 ms
// by what happened to them, and the largest latency of the Sends that
// nothing happened to.
type sendAttribution struct {
	sends                           int
	over1ms, ivcsw, vcsw, gc, quiet int
	// quietMax is the slowest Send without a context switch of its
	// thread, quietNoGCMax the slowest of those outside GC cycles, gcMax
	// the slowest in a GC cycle.
	quietMax, quietNoGCMax, gcMax time.Duration
	quietNoGCAt                   string // which Send was quietNoGCMax, with its page faults
	maxFaults                     int32  // the most page faults in one Send
	// switchedI and switchedV count the Sends with an involuntary and
	// with a voluntary switch of their thread, slow or not.
	switchedI, switchedV int
	logged               int
	// wall is the Send loops' time; thread and others the CPU time of
	// the sending thread (its probes included) and of the process's other
	// threads meanwhile (the IO goroutine, the test broker, the GC).
	wall, thread, others time.Duration
	// blocks0 and where0 are sendBlocks before the first Send.
	blocks0 int64
	where0  map[string]int64
}

// profileBlocks has the block profile record every blocking event from now
// until the returned function runs. It costs only the goroutines that
// block; a Send that does not block runs as without it.
func (a *sendAttribution) profileBlocks() (stop func()) {
	runtime.SetBlockProfileRate(1)
	a.blocks0, a.where0 = sendBlocks()
	return func() { runtime.SetBlockProfileRate(0) }
}

// loop adds the times of one Send loop, from cpuTimes at its start; on the
// sending thread, as the loop ends.
func (a *sendAttribution) loop(proc0, thr0 time.Duration, wall0 time.Time) {
	proc, thr, now := cpuTimes()
	a.wall += now.Sub(wall0)
	a.thread += thr - thr0
	a.others += (proc - proc0) - (thr - thr0)
}

// slowSend is the latency from which a Send counts as slow (the issue's
// bound on the maximum).
const slowSend = time.Millisecond

// maxSlowLogged is how many slow Sends a run describes in its log: with
// the two summary lines, as many lines as go test prints of a benchmark's
// log without -v.
const maxSlowLogged = 8

// add attributes one iteration's Sends; lat and p are indexed alike.
func (a *sendAttribution) add(b *testing.B, iter int, lat []time.Duration, p *sendProbes) {
	p.markGC()
	a.sends += len(lat)
	for i, d := range lat {
		switched := p.vcsw[i] != 0 || p.ivcsw[i] != 0
		if p.ivcsw[i] != 0 {
			a.switchedI++
		}
		if p.vcsw[i] != 0 {
			a.switchedV++
		}
		if !switched {
			a.quietMax = max(a.quietMax, d)
			if !p.inGC[i] && d > a.quietNoGCMax {
				a.quietNoGCMax = d
				a.quietNoGCAt = fmt.Sprintf("Send %d of iteration %d, %d page faults", i, iter, p.minflt[i])
			}
		}
		if p.inGC[i] {
			a.gcMax = max(a.gcMax, d)
		}
		a.maxFaults = max(a.maxFaults, p.minflt[i])
		if d <= slowSend {
			continue
		}
		a.over1ms++
		if p.ivcsw[i] != 0 {
			a.ivcsw++
		}
		if p.vcsw[i] != 0 {
			a.vcsw++
		}
		if p.inGC[i] {
			a.gc++
		}
		if !switched && !p.inGC[i] {
			a.quiet++
		}
		if a.logged < maxSlowLogged {
			a.logged++
			gc := "no GC cycle"
			if p.inGC[i] {
				gc = "in a GC cycle"
			}
			b.Logf("slow Send %d of iteration %d: %v; thread switches: %d voluntary, %d involuntary; %d page faults; %s",
				i, iter, d, p.vcsw[i], p.ivcsw[i], p.minflt[i], gc)
		}
	}
}

// report reports the attribution, counts per 100 000 Sends. The thread
// counters exist only on Linux; elsewhere only the GC's share is
// reported.
func (a *sendAttribution) report(b *testing.B) {
	if a.sends == 0 {
		return
	}
	per := func(k int) float64 { return float64(k) * 100000 / float64(a.sends) }
	b.ReportMetric(per(a.over1ms), "over1ms/100k")
	b.ReportMetric(per(a.gc), "over1ms-gc/100k")
	b.ReportMetric(float64(a.gcMax.Nanoseconds()), "gc-max-ns")
	blocks, where := sendBlocks()
	b.ReportMetric(per(int(blocks-a.blocks0)), "send-blocks/100k")
	for fn, k := range where {
		if k -= a.where0[fn]; k > 0 {
			b.Logf("Sends blocked %d times in %s", k, fn)
		}
	}
	if !threadCountersOK {
		return
	}
	b.Logf("slowest Send without a context switch or a GC cycle: %v, %s", a.quietNoGCMax, a.quietNoGCAt)
	b.Logf("Send loops: %v; on CPU meanwhile: the sending thread %v (its probes included), the process's other threads %v; Sends switched out: %d involuntarily, %d voluntarily",
		a.wall.Round(time.Millisecond), a.thread.Round(time.Millisecond), a.others.Round(time.Millisecond), a.switchedI, a.switchedV)
	b.ReportMetric(per(a.ivcsw), "over1ms-ivcsw/100k")
	b.ReportMetric(per(a.vcsw), "over1ms-vcsw/100k")
	b.ReportMetric(per(a.quiet), "over1ms-quiet/100k")
	b.ReportMetric(float64(a.quietMax.Nanoseconds()), "quiet-max-ns")
	b.ReportMetric(float64(a.quietNoGCMax.Nanoseconds()), "quiet-nogc-max-ns")
	b.ReportMetric(float64(a.maxFaults), "max-faults")
}

// probedSends sends a record of benchValue to topic per element of lat and
// fs, on a goroutine locked to its thread: it times each Send into lat,
// keeps its future in fs, and probes around it, outside the timed window,
// into probes and a. before, if not nil, runs before Send i, outside its
// window too. With go test -trace, a Send slower than slowSend is marked
// by a "slow-send" log event once it has returned.
func probedSends(p *Producer, topic string, lat []time.Duration, fs []*Future, probes *sendProbes, a *sendAttribution, before func(i int)) {
	ctx := context.Background()
	onLockedThread(func() {
		var c0, c1 threadCounters
		probes.readGC(0)
		proc0, thr0, wall0 := cpuTimes()
		for i := range fs {
			if before != nil {
				before(i)
			}
			readThreadCounters(&c0)
			start := time.Now()
			f := p.Send(ctx, &Record{Topic: topic, Value: benchValue})
			lat[i] = time.Since(start)
			readThreadCounters(&c1)
			fs[i] = f
			probes.thread(i, &c0, &c1)
			probes.readGC(i + 1)
			if lat[i] > slowSend && trace.IsEnabled() {
				trace.Logf(ctx, "slow-send", "Send %d took %v", i, lat[i])
			}
		}
		a.loop(proc0, thr0, wall0)
	})
}

// onLockedThread runs f on a goroutine locked to its OS thread, so that
// the thread's counters are the goroutine's, and waits for it.
func onLockedThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		f()
	}()
	<-done
}

// TestSendProbesMarkGC checks which Sends markGC puts in a GC cycle, from
// the counts between Sends.
func TestSendProbesMarkGC(t *testing.T) {
	for _, tc := range []struct {
		name           string
		cycles, pauses []uint64 // at the boundaries: one more than Sends
		want           []bool
	}{
		{"none", []uint64{3, 3, 3}, []uint64{6, 6, 6}, []bool{false, false}},
		{"mark across Sends", []uint64{0, 0, 0, 0, 1, 1}, []uint64{0, 1, 1, 1, 2, 2},
			[]bool{true, true, true, true, false}},
		{"end pause counted late", []uint64{0, 0, 1, 1, 1}, []uint64{0, 1, 1, 2, 2},
			[]bool{true, true, true, false}},
		{"cycle within one Send", []uint64{0, 1, 1}, []uint64{0, 2, 2}, []bool{true, false}},
		{"late pause of a cycle within one Send", []uint64{0, 1, 1, 1}, []uint64{0, 1, 2, 2},
			[]bool{true, true, false}},
		{"two cycles", []uint64{0, 0, 1, 1, 1, 2, 2}, []uint64{0, 1, 2, 2, 3, 4, 4},
			[]bool{true, true, false, true, true, false}},
		{"mark termination restarted", []uint64{0, 0, 0, 1, 1}, []uint64{0, 1, 2, 3, 3},
			[]bool{true, true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &sendProbes{cycles: tc.cycles, pauses: tc.pauses, inGC: make([]bool, len(tc.want))}
			p.markGC()
			if !slices.Equal(p.inGC, tc.want) {
				t.Errorf("in GC %v, want %v", p.inGC, tc.want)
			}
		})
	}
}

// sendBlocks counts, from the block profile, the times a goroutine blocked
// (on a sync.Mutex, a channel, a select) with Producer.send on its stack,
// and returns the innermost samsa function of each such stack: a Send
// that waited for one of samsa's locks, or the pool's memory, shows here.
// Blocking in the runtime (its own locks, the scheduler, the GC) does not.
func sendBlocks() (n int64, where map[string]int64) {
	var recs []runtime.BlockProfileRecord
	for {
		k, ok := runtime.BlockProfile(recs)
		if ok {
			recs = recs[:k]
			break
		}
		recs = make([]runtime.BlockProfileRecord, k+16)
	}
	where = make(map[string]int64)
	for i := range recs {
		frames := runtime.CallersFrames(recs[i].Stack())
		inner, send := "", false
		for {
			f, more := frames.Next()
			if inner == "" && strings.HasPrefix(f.Function, "github.com/samsa-go/samsa/") {
				inner = strings.TrimPrefix(f.Function, "github.com/samsa-go/samsa/")
			}
			if strings.HasSuffix(f.Function, "producer.(*Producer).send") {
				send = true
			}
			if !more {
				break
			}
		}
		if send {
			n += recs[i].Count
			where[inner] += recs[i].Count
		}
	}
	return n, where
}
