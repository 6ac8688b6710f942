package spool

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
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

// TestLargeBacklog measures Open and a full replay over a large backlog;
// it runs only with SAMSA_SPOOL_BACKLOG_MIB set (1024 for the issue's
// 1 GiB): SAMSA_SPOOL_BACKLOG_MIB=1024 go test -run TestLargeBacklog -v ./spool/
func TestLargeBacklog(t *testing.T) {
	mib, err := strconv.Atoi(os.Getenv("SAMSA_SPOOL_BACKLOG_MIB"))
	if err != nil || mib <= 0 {
		t.Skip("set SAMSA_SPOOL_BACKLOG_MIB")
	}
	dir := t.TempDir()
	o := Options{Dir: dir, MaxBytes: int64(mib+64) << 20}
	s := mustOpen(t, o)
	r := &Record{Topic: "bench", Partition: 3, Key: []byte("key-0001"), Value: make([]byte, 1024)}
	start := time.Now()
	n := 0
	for s.Metrics().Bytes < int64(mib)<<20 {
		for range 1000 {
			if _, err := s.Append(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		n += 1000
	}
	wrote := time.Since(start)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapAlloc
	start = time.Now()
	s = mustOpen(t, o)
	defer s.Close()
	opened := time.Since(start)
	start = time.Now()
	got := 0
	var peak uint64
	for e, err := range s.Unacked() {
		if err != nil {
			t.Fatal(err)
		}
		s.Ack(e.Seq)
		if got++; got%100000 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	drained := time.Since(start)
	if got != n {
		t.Fatalf("replayed %d of %d", got, n)
	}
	t.Logf("%d MiB, %d records of 1 KiB: written in %v, Open in %v, replayed (and acknowledged) in %v; heap %d MiB before Open, peak %d MiB while replaying",
		mib, n, wrote, opened, drained, heapBefore>>20, peak>>20)
}
