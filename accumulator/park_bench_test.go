package accumulator

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/testutil"
)

// benchCompletion is as large as the producer's completion (7 words) and,
// like it, holds pointers for the GC to scan.
type benchCompletion struct {
	fut, cb, ch, rec *int
	ts               int64
	obs              *int
	epoch            uint8
}

// BenchmarkParkLatency measures Topic.Park alone: 100 000 records of 100
// bytes parked for a topic without partitions, on a new accumulator and
// pool per iteration configured as the producer's defaults (chunks from
// 512 bytes up to 16 KiB, bookkeeping charged). It reports p50, p99, p999
// and max over every Park of every iteration. Without the broker, the
// producer's goroutines and the futures' memory of
// producer.BenchmarkSendMetadataUnavailable, the parking queue's own tail
// shows.
func BenchmarkParkLatency(b *testing.B) {
	const n = 100000
	value := make([]byte, 100)
	var x int
	c := benchCompletion{fut: &x, cb: &x, ch: &x, rec: &x}
	lat := make([]time.Duration, n)
	for i := range lat {
		lat[i] = 0
	}
	var all []time.Duration
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		pool, err := bufferpool.New(bufferpool.Options{Size: 32 << 20, PooledSize: 512, MaxPooledSize: 16384})
		if err != nil {
			b.Fatal(err)
		}
		a := New[benchCompletion, struct{}, struct{}](Config{
			BatchSize: 16384, InitialBatchSize: 512, MaxBatchSize: 1 << 20,
			Pool: pool, MaxBlock: time.Second, ChargeBookkeeping: true,
		})
		topic := a.NewTopic("late")
		for i := range lat {
			start := time.Now()
			parked, err := topic.Park(ctx, int64(i), nil, value, nil, -1, c, true)
			lat[i] = time.Since(start)
			if !parked || err != nil {
				b.Fatal(parked, err)
			}
		}
		topic.FailParked(func(benchCompletion) {})
		all = append(all, lat...)
	}
	testutil.ReportLatencies(b, all)
}
