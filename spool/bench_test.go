package spool

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAppend: 1 KiB records per sync policy, one appender and 16
// concurrent ones (group commit under always), on the disk of the test's
// temporary directory. It reports records/s and, for always, fsyncs/s.
//
//	go test -run '^$' -bench BenchmarkAppend -benchtime 3s ./spool/
func BenchmarkAppend(b *testing.B) {
	for _, policy := range []SyncPolicy{SyncNone, SyncInterval, SyncAlways} {
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/appenders=%d", policy, par), func(b *testing.B) {
				s, err := Open(Options{Dir: b.TempDir(), Sync: policy, MaxBytes: 64 << 30, SegmentBytes: 64 << 20})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				r := &Record{Topic: "bench", Partition: 3, Timestamp: time.Now(), Key: []byte("key-0001"), Value: make([]byte, 1024)}
				b.SetBytes(int64(len(r.Value)))
				b.ReportAllocs()
				start := time.Now()
				if par == 1 {
					for b.Loop() {
						seq, err := s.Append(context.Background(), r)
						if err != nil {
							b.Fatal(err)
						}
						s.Ack(seq)
					}
				} else {
					b.SetParallelism(par)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							seq, err := s.Append(context.Background(), r)
							if err != nil {
								b.Error(err)
								return
							}
							s.Ack(seq)
						}
					})
				}
				el := time.Since(start).Seconds()
				m := s.Metrics()
				b.ReportMetric(float64(m.Appended)/el, "records/s")
				b.ReportMetric(float64(m.Fsyncs)/el, "fsyncs/s")
			})
		}
	}
}
