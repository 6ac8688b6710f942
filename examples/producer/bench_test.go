package main

import (
	"context"
	"testing"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/producer"
)

// BenchmarkSendLoop measures the example's hot loop (SendCallback with a
// tracking slot, 100-byte keyed values, lz4) against brokers in sink mode,
// in the same process. allocs/op counts the whole process per record: the
// loop itself allocates nothing (TestPendingCallbackDoesNotAllocate), the
// rest is per batch and per request, in the producer and the brokers.
func BenchmarkSendLoop(b *testing.B) {
	c, err := testbroker.New(testbroker.Config{Sink: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	o, err := parseOptions(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.CreateTopic(o.topic, int32(o.partitions)); err != nil {
		b.Fatal(err)
	}
	p, err := producer.New(o.config(c.Addrs()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	defer p.Close(ctx)
	keys := makeKeys(o.keys)

	o.records = 1000 // warm up: metadata, connections, pools
	sendAll(ctx, p, o, keys, newTracker(o.records, len(keys)), 0, o.records)
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}

	o.records = int64(b.N)
	t := newTracker(o.records, len(keys))
	b.ReportAllocs()
	b.ResetTimer()
	sendAll(ctx, p, o, keys, t, 0, o.records)
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if t.acked.Load() != o.records {
		b.Fatalf("%d of %d records acknowledged", t.acked.Load(), o.records)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.SetBytes(int64(o.recordSize))
}
