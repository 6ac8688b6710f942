package compression_test

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/samsa-go/samsa/compression"
)

// TestZstdWindowClassesGiveTheSameBytes checks that compressing with the
// small-window encoders (input up to 1 MiB) and the default-window ones
// (larger input) gives exactly what an encoder with the level's default
// window gives: the window choice saves memory and changes no byte.
func TestZstdWindowClassesGiveTheSameBytes(t *testing.T) {
	src := records(3 << 20)
	sizes := []int{0, 1, 100, 4 << 10, 64 << 10, 128<<10 + 7, 300 << 10, 1<<20 - 1, 1 << 20, 1<<20 + 1, 3 << 20}
	if testing.Short() {
		sizes = []int{0, 100, 128<<10 + 7, 1 << 20, 1<<20 + 1}
	}
	for _, level := range []int{-5, 0, 3, 6, 10} {
		zl := level
		if zl == 0 {
			zl = 3
		}
		ref, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(zl)),
			zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true), zstd.WithAllLitEntropyCompression(zl >= 1))
		if err != nil {
			t.Fatal(err)
		}
		c := mustCompressor(t, compression.Zstd, level)
		for _, n := range sizes {
			t.Run(fmt.Sprintf("level%d/%dB", level, n), func(t *testing.T) {
				want := ref.EncodeAll(src[:n], nil)
				got, err := c.AppendCompress(nil, src[:n])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%d bytes compress to %d bytes, %d with the default window", n, len(got), len(want))
				}
			})
		}
	}
}

// TestZstdEncoderOfAOneMiBBatchStaysSmall protects the memory an encoder
// keeps after a batch of max.request.size's default, 1 MiB: about 4 MiB
// with the 1 MiB window, against 18 MiB with the default 8 MiB one.
func TestZstdEncoderOfAOneMiBBatchStaysSmall(t *testing.T) {
	src := records(1 << 20)
	before := heapInUse()
	c := mustCompressor(t, compression.Zstd, 0)
	dst, err := c.AppendCompress(nil, src)
	if err != nil {
		t.Fatal(err)
	}
	retained := heapInUse() - before - int64(cap(dst))
	runtime.KeepAlive(c)
	t.Logf("the Compressor keeps %.1f MiB", float64(retained)/(1<<20))
	if retained > 8<<20 {
		t.Errorf("a zstd Compressor keeps %.1f MiB after one 1 MiB batch; want at most 8", float64(retained)/(1<<20))
	}
}
