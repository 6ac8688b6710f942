package recordbatch

import (
	"fmt"
	"testing"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/testutil"
)

const benchBatchSize = 16384 // batch.size default

// BenchmarkAppend appends 100-byte records to 16 KiB batches whose buffers
// come from a bufferpool, as the accumulator does. One op is one record.
func BenchmarkAppend(b *testing.B) {
	value := make([]byte, 100)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	key := []byte("user-12345")
	body := AppendBody(nil, key, value, nil)
	cases := []struct {
		name   string
		append func(bl *Builder, ts int64) bool
	}{
		{"100B", func(bl *Builder, ts int64) bool { return bl.Append(ts, key, value, nil) }},
		{"100B-body", func(bl *Builder, ts int64) bool { return bl.AppendBody(ts, body) }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			pool, err := bufferpool.New(bufferpool.Options{Size: 1 << 20, PooledSize: benchBatchSize})
			if err != nil {
				b.Fatal(err)
			}
			var bl Builder
			buf := pool.TryAllocate(benchBatchSize)
			bl.Reset(buf)
			ts := int64(1_700_000_000_000)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := testutil.CPUSeconds()
			for i := 0; i < b.N; i++ {
				ts++
				for !tc.append(&bl, ts) {
					pool.Release(buf)
					buf = pool.TryAllocate(benchBatchSize)
					bl.Reset(buf)
				}
			}
			b.StopTimer()
			reportRate(b, float64(b.N), testutil.CPUSeconds()-cpu0)
			pool.Release(buf)
		})
	}
}

// benchBuilder returns an open builder holding a full 16 KiB batch of
// JSON-like records.
func benchBuilder(b *testing.B) Builder {
	var bl Builder
	bl.Reset(make([]byte, 0, benchBatchSize))
	for i := 0; ; i++ {
		key := fmt.Appendf(nil, "user-%d", i%50)
		value := fmt.Appendf(nil, `{"user":%d,"event":"page_view","path":"/products/%d","ts":%d,"ok":true}`, i%50, i%17, int64(1_700_000_000_000)+int64(i))
		if !bl.Append(1_700_000_000_000+int64(i), key, value, []Header{{Key: "trace", Value: fmt.Appendf(nil, "%08x", i)}}) {
			break
		}
	}
	return bl
}

func BenchmarkFinish(b *testing.B) {
	for _, ct := range allCodecs {
		b.Run(ct.String(), func(b *testing.B) { benchFinish(b, mustCompressor(b, ct), benchBuilder(b)) })
	}
}

// benchFinish finishes a copy of the open batch tmpl with c once per op,
// reporting cpu-ns/op (the process's CPU time per op) and the ratio of the
// finished batch's size to the open one's.
func benchFinish(b *testing.B, c *compression.Compressor, tmpl Builder) {
	work := make([]byte, 0, tmpl.Cap())
	var scratch []byte
	b.SetBytes(int64(tmpl.Len()))
	b.ReportAllocs()
	var out int
	cpu0 := testutil.CPUSeconds()
	for b.Loop() {
		bl := tmpl
		bl.buf = append(work[:0], tmpl.buf...)
		batch, s, err := bl.Finish(c, scratch)
		if err != nil {
			b.Fatal(err)
		}
		scratch, out = s, len(batch)
	}
	if cpu := testutil.CPUSeconds() - cpu0; cpu > 0 {
		b.ReportMetric(cpu*1e9/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(out)/float64(tmpl.Len()), "ratio")
}

// BenchmarkFinishW2c finishes lz4 batches of W2c's records (unkeyed,
// 100-byte JSON-like values of "word":number pairs out of 4096 distinct
// ones) at the sizes that linger 5 ms and batch.size 1 MiB give them, to
// weigh the codec path (frame, pool, copies) against the block compressor
// it runs: in a CPU profile of it, Finish's samples outside
// (*lz4Fast).compressBlock are the codec path (see compression/lz4.go).
func BenchmarkFinishW2c(b *testing.B) {
	words := []string{"user", "event", "click", "view", "session", "region", "eu-west", "status", "ok", "error",
		"amount", "currency", "EUR", "device", "mobile", "page", "home", "cart", "true", "null"}
	values := make([][]byte, 4096)
	for i := range values {
		var v []byte
		for j := i; len(v) < 100; j = j*1103515245 + 12345 {
			v = fmt.Appendf(v, "%q:%d,", words[uint(j>>8)%uint(len(words))], uint(j>>4)%100000)
		}
		values[i] = v[:100]
	}
	c := mustCompressor(b, compression.LZ4)
	for _, size := range []int{16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			var tmpl Builder
			tmpl.Reset(make([]byte, 0, size))
			for i := 0; tmpl.Append(1_700_000_000_000+int64(i/50), nil, values[i%len(values)], nil); i++ {
			}
			benchFinish(b, c, tmpl)
		})
	}
}

func BenchmarkStamp(b *testing.B) {
	bl := benchBuilder(b)
	batch, _, err := bl.Finish(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Stamp(batch, 1, 0, int32(i))
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, ct := range allCodecs {
		bl := benchBuilder(b)
		n := bl.NumRecords()
		size := bl.Len()
		batch, _, err := bl.Finish(mustCompressor(b, ct), nil)
		if err != nil {
			b.Fatal(err)
		}
		Stamp(batch, 1, 0, 0)
		for _, mode := range []string{"decode", "validate"} {
			b.Run(ct.String()+"/"+mode, func(b *testing.B) {
				var d Decoder
				b.SetBytes(int64(size))
				b.ReportAllocs()
				cpu0 := testutil.CPUSeconds()
				for i := 0; i < b.N; i++ {
					if mode == "decode" {
						_, _, err = d.Decode(batch, 1<<20)
					} else {
						_, err = d.Validate(batch, 1<<20)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				reportRate(b, float64(b.N)*float64(n), testutil.CPUSeconds()-cpu0)
			})
		}
	}
}

// reportRate reports records per second of wall time and, when measured, per
// second of process CPU time: the per-core rate, which a loaded machine
// does not distort (it is conservative: it includes GC and other threads).
func reportRate(b *testing.B, records, cpu float64) {
	b.ReportMetric(records/b.Elapsed().Seconds(), "records/s")
	if cpu > 0 {
		b.ReportMetric(records/cpu, "records/cpu-s")
	}
}

// BenchmarkAppendW3 appends the peer benchmark's W3 records (1 KiB values
// out of 4 MiB of distinct ones, 8 partitions, 1 MiB batches) with the
// batches held until memory-bytes of them are buffered, the oldest then
// released to be reused, as a full pool does while the encoder is the
// bottleneck: the larger the memory, the colder the buffer a record is
// copied into. The memory is touched once before timing, so page faults
// are left out. One op is one record.
func BenchmarkAppendW3(b *testing.B) {
	const (
		batchSize  = 1 << 20
		partitions = 8
		valueSize  = 1 << 10
	)
	values := make([]byte, 4<<20)
	for i := range values {
		values[i] = byte('a' + i%23)
	}
	key := []byte("key-0000")
	for _, memory := range []int{9 << 20, 16 << 20, 128 << 20} {
		b.Run(fmt.Sprintf("buffered-%dMiB", memory>>20), func(b *testing.B) {
			pool, err := bufferpool.New(bufferpool.Options{Size: int64(memory), PooledSize: batchSize})
			if err != nil {
				b.Fatal(err)
			}
			var open [partitions]Builder
			var bufs [partitions][]byte
			var full [][]byte // sealed batches, oldest first
			next := func(p int) {
				buf := pool.TryAllocate(batchSize)
				for buf == nil {
					pool.Release(full[0])
					full = full[1:]
					buf = pool.TryAllocate(batchSize)
				}
				bufs[p] = buf
				open[p].Reset(buf)
			}
			for p := range partitions {
				next(p)
			}
			ts := int64(1_700_000_000_000)
			appendOne := func(i int) {
				p := i % partitions
				v := values[(i*7919%4096)*valueSize:][:valueSize]
				for !open[p].Append(ts, key, v, nil) {
					full = append(full, bufs[p])
					next(p)
				}
			}
			for i := range memory / valueSize { // touch every page of the pool once
				appendOne(i)
			}
			b.SetBytes(valueSize)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := testutil.CPUSeconds()
			for i := range b.N {
				appendOne(i)
			}
			cpu := testutil.CPUSeconds() - cpu0
			b.StopTimer()
			if cpu > 0 {
				b.ReportMetric(cpu*1e9/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
