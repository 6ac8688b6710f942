package producer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/samsa-go/samsa/internal/testbroker"
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
// the topic is created and everything is delivered. It reports p50, p99 and
// max Send latency.
func BenchmarkSendMetadataUnavailable(b *testing.B) {
	for b.Loop() {
		c := newCluster(b, testbroker.Config{})
		p := newProducer(b, c, Config{})
		ctx := context.Background()
		const n = 100000
		lat := make([]time.Duration, n)
		fs := make([]*Future, n)
		topic := fmt.Sprintf("late-%d", time.Now().UnixNano())
		for i := range fs {
			start := time.Now()
			fs[i] = p.Send(ctx, &Record{Topic: topic, Value: benchValue})
			lat[i] = time.Since(start)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := c.CreateTopic(topic, 6); err != nil {
				b.Error(err)
			}
		})
		wg.Wait()
		for _, f := range fs {
			if _, err := f.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[n/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[n*99/100].Nanoseconds()), "p99-ns")
		b.ReportMetric(float64(lat[n-1].Nanoseconds()), "max-ns")
		p.Close(ctx)
		c.Close()
	}
}
