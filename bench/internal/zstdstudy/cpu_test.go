package zstdstudy

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testutil"
)

// coldBytes is how much distinct batch memory the cold cases cycle
// through: the peer benchmark's BufferMemory, which samsa's pool fills
// while the encoder is the bottleneck, so that each batch is compressed
// long after Send wrote it.
const coldBytes = 128 << 20

// BenchmarkEncodeCPU compresses W3's 1 MiB batches the way a producer
// meets them and reports the CPU time per batch (cpu-ns/op, the process's
// user + system time over the run, which holds on a loaded machine where
// ns/op does not), for samsa's window and kgo's, with the batch warm (the
// same buffer every time) or cold (a new one each time from coldBytes of
// them), on one encoder or on two at once (samsa compresses a request's
// batches on several goroutines; kgo on one at a time).
func BenchmarkEncodeCPU(b *testing.B) {
	src := batchRecords(b, 1<<20)
	cold := make([][]byte, coldBytes/len(src))
	for i := range cold {
		cold[i] = append([]byte(nil), src...)
	}
	windows := []struct {
		name string
		size int
	}{{"1MiB(samsa)", 1 << 20}, {"64KiB(kgo)", 64 << 10}}
	inputs := []struct {
		name string
		ring [][]byte
	}{{"warm", [][]byte{src}}, {"cold", cold}}
	for _, w := range windows {
		for _, in := range inputs {
			for _, par := range []int{1, 2} {
				b.Run(fmt.Sprintf("window-%s/%s/encoders-%d", w.name, in.name, par), func(b *testing.B) {
					encs := make([]*zstd.Encoder, par)
					dsts := make([][]byte, par)
					for g := range encs {
						encs[g] = newEncoder(b, variant{opts: []zstd.EOption{
							zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
							zstd.WithZeroFrames(true), zstd.WithWindowSize(w.size),
						}})
						dsts[g] = encs[g].EncodeAll(src, nil)
					}
					ratio := float64(len(src)) / float64(len(dsts[0]))
					b.SetBytes(int64(len(src)))
					b.ReportAllocs()
					var next atomic.Int64
					var wg sync.WaitGroup
					b.ResetTimer()
					cpu0 := testutil.CPUSeconds()
					for g := range par {
						wg.Go(func() {
							for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
								dsts[g] = encs[g].EncodeAll(in.ring[i%int64(len(in.ring))], dsts[g][:0])
							}
						})
					}
					wg.Wait()
					cpu := testutil.CPUSeconds() - cpu0
					b.StopTimer()
					if cpu > 0 {
						b.ReportMetric(cpu*1e9/float64(b.N), "cpu-ns/op")
					}
					b.ReportMetric(ratio, "ratio")
					require.Len(b, dsts[0], len(encs[0].EncodeAll(src, nil)), "every batch compresses alike")
				})
			}
		}
	}
}
