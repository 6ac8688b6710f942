package compression_test

import (
	"fmt"
	"testing"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/testutil"
)

// The benchmarks compress and decompress 64 KiB of record-like JSON, a
// typical batch. SetBytes counts uncompressed bytes, so MB/s is
// comparable between codecs and directions.

var benchLevels = []struct {
	name  string
	t     compression.Type
	level int
}{
	{"none", compression.None, 0},
	{"gzip", compression.Gzip, 0},
	{"gzip-1", compression.Gzip, 1},
	{"snappy", compression.Snappy, 0},
	{"lz4", compression.LZ4, 0},
	{"lz4-9", compression.LZ4, 9},
	{"zstd", compression.Zstd, 0},
	{"zstd-1", compression.Zstd, 1},
}

func BenchmarkCompress(b *testing.B) {
	src := records(64 << 10)
	for _, bc := range benchLevels {
		b.Run(bc.name, func(b *testing.B) { benchCompress(b, mustCompressor(b, bc.t, bc.level), src) })
	}
}

func BenchmarkDecompress(b *testing.B) {
	src := records(64 << 10)
	for _, bc := range benchLevels {
		b.Run(bc.name, func(b *testing.B) {
			z, err := mustCompressor(b, bc.t, bc.level).AppendCompress(nil, src)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, 0, len(src))
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if dst, err = compression.AppendDecompress(bc.t, dst[:0], z, len(src)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecompressZstdStreamed decodes a frame without content size,
// as the Java client writes them, which takes the streaming path.
func BenchmarkDecompressZstdStreamed(b *testing.B) {
	z := readVector(b, "records.json.stream.zst")
	want := readVector(b, "records.json")
	dst := make([]byte, 0, len(want))
	b.SetBytes(int64(len(want)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = compression.AppendDecompress(compression.Zstd, dst[:0], z, len(want)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompressZstdBatch compresses zstd batches of the sizes a
// producer sends, up to max.request.size's default of 1 MiB and past it
// (the encoders with the level's default window).
func BenchmarkCompressZstdBatch(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, 1 << 20, 2 << 20} {
		src := records(size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchCompress(b, mustCompressor(b, compression.Zstd, 0), src) })
	}
}

// BenchmarkCompressLZ4Batch compresses records sections of W2 (unkeyed
// records of 100-byte text-like values) at the batch sizes a producer sends,
// from a few records under linger up to batch.size 1 MiB and past it.
func BenchmarkCompressLZ4Batch(b *testing.B) {
	for _, size := range []int{16 << 10, 64 << 10, 256 << 10, 1 << 20, 4<<20 + 1} {
		src := w2Batch(size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchCompress(b, mustCompressor(b, compression.LZ4, 0), src) })
	}
}

// BenchmarkCompressPayloads compresses a 16-record batch (16.5 KiB, about
// batch.size's default) of 1 KiB values of each payload of the comparison
// with the Java client, at each codec's default level: random letters
// (ProducerPerformance's), JSON events, log lines, digits and random bytes.
func BenchmarkCompressPayloads(b *testing.B) {
	for _, codec := range []compression.Type{compression.Gzip, compression.Snappy, compression.LZ4, compression.Zstd} {
		for _, payload := range []string{"letters", "json", "logs", "digits", "random"} {
			src := payloadBatch(payload, 1, 16)
			b.Run(codec.String()+"/"+payload, func(b *testing.B) { benchCompress(b, mustCompressor(b, codec, 0), src) })
		}
	}
}

// benchCompress compresses src with c once per op, reporting MB/s of
// uncompressed input, the ratio, and cpu-ns/op: the process's CPU time per
// op, which holds better than ns/op on a machine shared with other work
// (the loop allocates nothing, so it is the loop's own time).
func benchCompress(b *testing.B, c *compression.Compressor, src []byte) {
	dst, err := c.AppendCompress(nil, src)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	cpu0 := testutil.CPUSeconds()
	for b.Loop() {
		if dst, err = c.AppendCompress(dst[:0], src); err != nil {
			b.Fatal(err)
		}
	}
	if cpu := testutil.CPUSeconds() - cpu0; cpu > 0 {
		b.ReportMetric(cpu*1e9/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(len(src))/float64(len(dst)), "ratio")
}

// BenchmarkLZ4Block runs the fast LZ4 block compressor alone (no frame,
// no pool) on 1 MiB of JSON-like input cut into 64 KiB blocks, as the
// frame cuts it: "json" is records, "w2" the records section of W2's
// 100-byte values. The reference C implementation's speed on the same
// blocks is in the comment of lz4fast.go. The ratio is that of the frame
// these blocks make (a block that does not shrink is stored).
func BenchmarkLZ4Block(b *testing.B) {
	for _, in := range []struct {
		name string
		src  []byte
	}{{"json", records(1 << 20)}, {"w2", w2Batch(1 << 20)}} {
		b.Run(in.name, func(b *testing.B) {
			compress, bound := compression.LZ4FastBlock()
			const block = 64 << 10
			dst := make([]byte, bound(block))
			frame := 0
			b.SetBytes(int64(len(in.src)))
			b.ReportAllocs()
			cpu0 := testutil.CPUSeconds()
			for b.Loop() {
				frame = 7 + 4
				for at := 0; at < len(in.src); at += block {
					blk := in.src[at:min(at+block, len(in.src))]
					n := compress(dst, blk)
					if n == 0 || n >= len(blk) {
						n = len(blk)
					}
					frame += 4 + n
				}
			}
			if cpu := testutil.CPUSeconds() - cpu0; cpu > 0 {
				b.ReportMetric(cpu*1e9/float64(b.N), "cpu-ns/op")
			}
			b.ReportMetric(float64(len(in.src))/float64(frame), "ratio")
		})
	}
}
