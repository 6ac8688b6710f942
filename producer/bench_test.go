package producer

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/spool"
)

var benchValue = []byte("0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789")

// BenchmarkSend measures Send throughput for 100-byte records against the
// test broker in sink mode: with a future per record, and with a callback.
func BenchmarkSend(b *testing.B) {
	for _, mode := range []string{"future", "callback"} {
		b.Run(mode, func(b *testing.B) {
			c := newCluster(b, testbroker.Config{Sink: true})
			if err := c.CreateTopic("bench", 12); err != nil {
				b.Fatal(err)
			}
			p := newProducer(b, c, Config{})
			ctx := context.Background()
			p.Send(ctx, &Record{Topic: "bench", Value: benchValue}).Wait(ctx)
			noop := func(RecordMetadata, error) {}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := testutil.CPUSeconds()
			for b.Loop() {
				// A Record per Send, as users write it: it does not escape.
				if mode == "future" {
					p.Send(ctx, &Record{Topic: "bench", Value: benchValue})
				} else {
					p.SendCallback(ctx, &Record{Topic: "bench", Value: benchValue}, noop)
				}
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			// The process's CPU per record (Send, the IO and completion
			// goroutines, the test broker): unlike ns/op, it holds on a
			// shared, loaded machine.
			b.ReportMetric((testutil.CPUSeconds()-cpu0)*1e9/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkSendCancellableContext is BenchmarkSend's callback mode with a
// ctx that can end (and ends only once the record is complete): what
// watching Send's ctx until the write costs per record, against
// BenchmarkSend/callback's context.Background(), which costs nothing.
// shared: one ctx for every Send (a server's), whose group (cancel.go) the
// records share; per-send: a ctx per Send, cancelled by its callback, each
// with its group and context.AfterFunc (and the benchmark's own
// context.WithCancel and callback closure).
func BenchmarkSendCancellableContext(b *testing.B) {
	for _, mode := range []string{"shared", "per-send"} {
		b.Run(mode, func(b *testing.B) {
			c := newCluster(b, testbroker.Config{Sink: true})
			if err := c.CreateTopic("bench", 12); err != nil {
				b.Fatal(err)
			}
			p := newProducer(b, c, Config{})
			shared, cancel := context.WithCancel(context.Background())
			defer cancel()
			p.Send(shared, &Record{Topic: "bench", Value: benchValue}).Wait(shared)
			noop := func(RecordMetadata, error) {}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := testutil.CPUSeconds()
			for b.Loop() {
				if mode == "shared" {
					p.SendCallback(shared, &Record{Topic: "bench", Value: benchValue}, noop)
					continue
				}
				ctx, cancel := context.WithCancel(shared)
				p.SendCallback(ctx, &Record{Topic: "bench", Value: benchValue}, func(RecordMetadata, error) { cancel() })
			}
			if err := p.Flush(shared); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric((testutil.CPUSeconds()-cpu0)*1e9/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkSendParallel measures how Send scales with 8 sending goroutines
// (no producer-wide lock on the Send path).
func BenchmarkSendParallel(b *testing.B) {
	c := newCluster(b, testbroker.Config{Sink: true})
	if err := c.CreateTopic("bench", 12); err != nil {
		b.Fatal(err)
	}
	p := newProducer(b, c, Config{})
	ctx := context.Background()
	p.Send(ctx, &Record{Topic: "bench", Value: benchValue}).Wait(ctx)
	noop := func(RecordMetadata, error) {}
	b.SetParallelism(4) // 8 goroutines on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		key := make([]byte, 8)
		rec := &Record{Topic: "bench", Key: key, Value: benchValue}
		for pb.Next() {
			i++
			key[0], key[1] = byte(i), byte(i>>8)
			p.SendCallback(ctx, rec, noop)
		}
	})
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkSendMetadataUnavailable measures the latency of Send while the
// topic does not exist yet (KIP-286): 100 000 Sends park their records, then
// the topic is created and everything is delivered. It reports p50, p99,
// p999 and max Send latency over the Sends of every iteration (not only the
// last one's), how many Sends in 100 000 took over 10 µs, and the GC cycles
// that ran during an iteration's Sends (a cycle's pauses and assists are in
// the tail).
//
// It also tells what the slow Sends were doing (bench_probe_test.go). The
// Sends run on a goroutine locked to its OS thread, and around each one,
// outside its timed window, the benchmark reads the thread's context
// switches and page faults (getrusage RUSAGE_THREAD, Linux only) and the
// GC's cycle and pause counts (runtime/metrics). It reports, per
// 100 000 Sends, the Sends over 1 ms (over1ms), those among them with an
// involuntary switch of their thread (over1ms-ivcsw: the OS ran something
// else on its core), a voluntary one (over1ms-vcsw: the thread slept,
// parked by the Go scheduler or blocked on a lock), during a GC cycle
// (over1ms-gc) and with none of these (over1ms-quiet); the slowest Send
// without a context switch (quiet-max-ns), of those the slowest outside GC
// cycles (quiet-nogc-max-ns), the slowest during one (gc-max-ns) and the
// most page faults of a Send (max-faults). send-blocks counts, from the
// block profile (on during the benchmark), the times a Send blocked on a
// lock or channel: a wait of samsa's making, where the thread's voluntary
// switches also count the Go scheduler's preemptions and the GC's. The log
// describes the first 8 slow Sends, the slowest Send without a context
// switch or GC cycle, where Sends blocked, the CPU time of the sending
// thread and of the process's other threads during the Sends, and how
// many Sends were switched out; with go test -trace each slow Send is
// marked by a "slow-send" log event on the sending goroutine, after it
// returns. The probes cost about 1.5 µs per Send, outside its window: the
// loop takes about twice as long, with the quantiles as without them
// (within the noise of the shared machine). A locked goroutine that the Go
// scheduler preempts (sysmon after 10 ms of running, the GC to scan its
// stack) resumes only once its own thread is woken, which on busy cores
// can take longer than for an unlocked one.
//
// It leaves out latency of its own making: the latency and future slices
// are allocated and touched once, before the first iteration (a page fault
// on them would land in a Send's time); a Send's future is stored after the
// clock is read; and each iteration starts after a GC, so that the previous
// one's cluster and producer are not collected during its Sends. What
// remains is Send's: page faults on the fresh memory a cold topic's records
// take (their futures, bodies and parked entries), the GC of that memory,
// and, on a shared machine, the scheduler.
func BenchmarkSendMetadataUnavailable(b *testing.B) {
	const n = 100000
	lat := make([]time.Duration, n)
	fs := make([]*Future, n)
	probes := newSendProbes(n)
	var attr sendAttribution
	defer attr.profileBlocks()()
	iter := 0
	var all []time.Duration
	var gcs uint32
	var ms runtime.MemStats
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		c := newCluster(b, testbroker.Config{})
		p := newProducer(b, c, Config{})
		ctx := context.Background()
		topic := fmt.Sprintf("late-%d", time.Now().UnixNano())
		runtime.ReadMemStats(&ms)
		gc0 := ms.NumGC
		probedSends(p, topic, lat, fs, probes, &attr, nil)
		runtime.ReadMemStats(&ms)
		gcs += ms.NumGC - gc0
		attr.add(b, iter, lat, probes)
		iter++
		if err := c.CreateTopic(topic, 6); err != nil {
			b.Fatal(err)
		}
		awaitAll(b, ctx, fs)
		all = append(all, lat...)
		p.Close(ctx)
		c.Close()
	}
	testutil.ReportLatencies(b, all)
	slow, _ := slices.BinarySearch(all, 10*time.Microsecond+1) // sorted by ReportLatencies
	b.ReportMetric(float64(len(all)-slow)*n/float64(len(all)), "over10us/100k")
	b.ReportMetric(float64(gcs)/float64(b.N), "gcs/op")
	attr.report(b)
}

// BenchmarkSendWhileParkedMove measures the latency of Send while the
// records parked before it move (KIP-286): 200 000 Sends to a topic that
// is created after the first 50 000, so that the IO goroutine moves the
// parked records into batches (MoveParked, taking the topic's lock twice
// per record) while Sends keep parking behind them. It reports p50, p99,
// p999 and max over the Sends from the topic's creation on, and over all
// Sends the attribution of BenchmarkSendMetadataUnavailable, whose
// send-blocks counts the Sends that slept waiting for the topic's lock.
func BenchmarkSendWhileParkedMove(b *testing.B) {
	const n, createAt = 200000, 50000
	lat := make([]time.Duration, n)
	fs := make([]*Future, n)
	probes := newSendProbes(n)
	var attr sendAttribution
	defer attr.profileBlocks()()
	iter := 0
	var moving []time.Duration
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		c := newCluster(b, testbroker.Config{Sink: true})
		p := newProducer(b, c, Config{})
		ctx := context.Background()
		topic := fmt.Sprintf("late-%d", time.Now().UnixNano())
		var wg sync.WaitGroup
		probedSends(p, topic, lat, fs, probes, &attr, func(i int) {
			if i == createAt {
				wg.Go(func() {
					if err := c.CreateTopic(topic, 6); err != nil {
						b.Error(err)
					}
				})
			}
		})
		wg.Wait()
		awaitAll(b, ctx, fs)
		attr.add(b, iter, lat, probes)
		iter++
		moving = append(moving, lat[createAt:]...)
		p.Close(ctx)
		c.Close()
	}
	testutil.ReportLatencies(b, moving)
	attr.report(b)
}

// awaitAll waits for every future of fs to succeed, then clears fs.
func awaitAll(b *testing.B, ctx context.Context, fs []*Future) {
	b.Helper()
	for _, f := range fs {
		if _, err := f.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	clear(fs)
}

// BenchmarkTransaction measures transactions of 1 and 100 records of 100
// bytes, each begun, sent and committed in turn, against a three-broker
// test broker at transaction versions 1 and 2 (KIP-890 part 2: no
// AddPartitionsToTxn round trip before a partition's first Produce, and an
// epoch bump per commit). It reports transactions and records per second.
func BenchmarkTransaction(b *testing.B) {
	for _, level := range []int16{1, 2} {
		for _, size := range []int{1, 100} {
			b.Run(fmt.Sprintf("version=%d/records=%d", level, size), func(b *testing.B) {
				c := newCluster(b, testbroker.Config{Sink: true, TransactionVersion: level})
				if err := c.CreateTopic("bench", 12); err != nil {
					b.Fatal(err)
				}
				p := newProducer(b, c, Config{TransactionalID: "bench", Linger: time.Millisecond})
				ctx := context.Background()
				noop := func(RecordMetadata, error) {}
				txn := func() {
					if err := p.BeginTransaction(); err != nil {
						b.Fatal(err)
					}
					for range size {
						p.SendCallback(ctx, &Record{Topic: "bench", Value: benchValue}, noop)
					}
					if err := p.CommitTransaction(ctx); err != nil {
						b.Fatal(err)
					}
				}
				txn() // the producer id and the connections
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					txn()
				}
				s := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N)/s, "txn/s")
				b.ReportMetric(float64(b.N*size)/s, "records/s")
			})
		}
	}
}

// BenchmarkSendSpool is BenchmarkSend's future case with 1 KiB records,
// without a spool and with a write-ahead spool under each sync policy
// (on the test's temporary directory's disk): records/s, the process's
// CPU per record and, under always, fsyncs/s.
func BenchmarkSendSpool(b *testing.B) {
	value := make([]byte, 1<<10)
	// The -paced cases Flush every 512 records (512 KiB, far below
	// BufferMemory): the cluster keeps up, which is when overflow must
	// cost no more than no spool (issue 34: within 5 % of CPU per
	// record). Unpaced, Send outruns the cluster and overflow spills.
	for _, mode := range []string{"none-spool", "none-spool-paced", "overflow", "overflow-paced", "sync-none", "sync-interval", "sync-always"} {
		paced := strings.HasSuffix(mode, "-paced")
		b.Run(mode, func(b *testing.B) {
			c := newCluster(b, testbroker.Config{Sink: true})
			if err := c.CreateTopic("bench", 12); err != nil {
				b.Fatal(err)
			}
			cfg := Config{}
			switch strings.TrimSuffix(mode, "-paced") {
			case "none-spool":
			case "overflow": // to disk only when memory is full or the cluster away
				cfg.Spool = &SpoolConfig{Dir: b.TempDir(), Mode: SpoolOverflow}
			default:
				pol, _ := spool.ParseSyncPolicy(mode[len("sync-"):])
				cfg.Spool = &SpoolConfig{Dir: b.TempDir(), Sync: pol}
			}
			p := newProducer(b, c, cfg)
			ctx := context.Background()
			p.Send(ctx, &Record{Topic: "bench", Value: value}).Wait(ctx)
			var fsyncs0, appended0 uint64
			if p.spool != nil {
				fsyncs0, appended0 = p.spool.Metrics().Fsyncs, p.spool.Metrics().Appended
			}
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := testutil.CPUSeconds()
			n := 0
			for b.Loop() {
				p.Send(ctx, &Record{Topic: "bench", Value: value})
				if n++; paced && n%512 == 0 {
					if err := p.Flush(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric((testutil.CPUSeconds()-cpu0)*1e9/float64(b.N), "cpu-ns/op")
			if p.spool != nil {
				b.ReportMetric(float64(p.spool.Metrics().Fsyncs-fsyncs0)/b.Elapsed().Seconds(), "fsyncs/s")
				// The share of records written to the spool: 1 in
				// write-ahead, the spilled ones in overflow.
				b.ReportMetric(float64(p.spool.Metrics().Appended-appended0)/float64(b.N), "spooled/op")
			}
		})
	}
}
