package zstdstudy

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// batchRecords encodes the records area of a record batch of about size
// bytes for W3 (records i, i+1, ... with the workload's keys and values),
// in the v2 record layout: length, attributes, timestamp and offset
// deltas, key, value, no headers.
func batchRecords(tb testing.TB, size int) []byte {
	tb.Helper()
	spec, err := workload.ByName("1KiB-zstd-keyed", 0)
	require.NoError(tb, err)
	p := workload.NewPayload(spec)
	var out, rec []byte
	for i, j := 0, 0; len(out) < size; j++ {
		// Record j goes to one of 8 partitions by its key, as in the peer
		// benchmark; this batch takes partition 0's records.
		if fnv32(p.Key(j))%8 != 0 {
			continue
		}
		rec = rec[:0]
		rec = append(rec, 0)                       // attributes
		rec = binary.AppendVarint(rec, int64(i%3)) // timestamp delta
		rec = binary.AppendVarint(rec, int64(i))   // offset delta
		k, v := p.Key(j), p.Value(j)
		rec = binary.AppendVarint(rec, int64(len(k))) // key
		rec = append(rec, k...)
		rec = binary.AppendVarint(rec, int64(len(v)))
		rec = append(rec, v...)
		rec = binary.AppendVarint(rec, 0) // headers
		out = binary.AppendVarint(out, int64(len(rec)))
		out = append(out, rec...)
		i++
	}
	return out
}

// fnv32 is FNV-1a, a stand-in for the partitioner's hash.
func fnv32(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

type variant struct {
	name  string
	opts  []zstd.EOption
	fresh bool // a new encoder for every batch instead of a reused one
}

func variants() []variant {
	base := []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true)}
	with := func(o ...zstd.EOption) []zstd.EOption { return append(append([]zstd.EOption(nil), base...), o...) }
	return []variant{
		{name: "samsa-today", opts: base},
		{name: "fresh-encoder", opts: base, fresh: true},
		{name: "no-crc", opts: with(zstd.WithEncoderCRC(false))},
		{name: "lower-mem", opts: with(zstd.WithLowerEncoderMem(true))},
		{name: "window-64KiB(kgo)", opts: with(zstd.WithWindowSize(64 << 10))},
		{name: "window-128KiB", opts: with(zstd.WithWindowSize(128 << 10))},
		{name: "window-256KiB", opts: with(zstd.WithWindowSize(256 << 10))},
		{name: "window-1MiB", opts: with(zstd.WithWindowSize(1 << 20))},
		{name: "window-1MiB-no-crc", opts: with(zstd.WithWindowSize(1<<20), zstd.WithEncoderCRC(false))},
		{name: "window-32KiB", opts: with(zstd.WithWindowSize(32 << 10))},
	}
}

func newEncoder(tb testing.TB, v variant) *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, v.opts...)
	require.NoError(tb, err)
	return enc
}

// BenchmarkEncode compresses one W3 batch per op for each variant and
// batch size (W3's batches are about 1 MiB: ~960 records).
func BenchmarkEncode(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, 1 << 20} {
		src := batchRecords(b, size)
		for _, v := range variants() {
			b.Run(fmt.Sprintf("%s/%dKiB", v.name, size>>10), func(b *testing.B) {
				enc := newEncoder(b, v)
				dst := enc.EncodeAll(src, nil)
				ratio := float64(len(src)) / float64(len(dst))
				retained := retainedBy(b, v, src)
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if v.fresh {
						enc = newEncoder(b, v)
					}
					dst = enc.EncodeAll(src, dst[:0])
				}
				b.ReportMetric(ratio, "ratio")
				b.ReportMetric(float64(retained), "B-retained")
			})
		}
	}
}

// retainedBy returns the live heap an encoder of v holds after encoding
// src once.
func retainedBy(tb testing.TB, v variant, src []byte) uint64 {
	tb.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	enc := newEncoder(tb, v)
	dst := enc.EncodeAll(src, nil)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(enc)
	runtime.KeepAlive(dst)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc - uint64(cap(dst))
}

// TestEveryVariantRoundTrips checks that each variant's output is one
// standard frame that decodes back to its input.
func TestEveryVariantRoundTrips(t *testing.T) {
	src := batchRecords(t, 1<<20)
	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer dec.Close()
	for _, v := range variants() {
		t.Run(v.name, func(t *testing.T) {
			out := newEncoder(t, v).EncodeAll(src, nil)
			var h zstd.Header
			require.NoError(t, h.Decode(out))
			require.True(t, h.HasFCS, "the frame declares its content size")
			require.EqualValues(t, len(src), h.FrameContentSize)
			got, err := dec.DecodeAll(out, nil)
			require.NoError(t, err)
			require.Equal(t, src, got)
		})
	}
}
