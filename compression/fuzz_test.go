package compression_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samsa-go/samsa/compression"
)

// fuzzDecompress checks the decoder's contract on arbitrary input: no
// panic, output within maxSize, and only ErrCorrupt or ErrTooLarge as
// errors, with dst given back unchanged.
func fuzzDecompress(f *testing.F, ty compression.Type, ext string) {
	// Seeds: the reference vectors of this codec and our own output.
	vectors, _ := filepath.Glob(filepath.Join("testdata", "vectors", "*"))
	for _, path := range vectors {
		if strings.Contains(filepath.Base(path), ext) {
			b, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, uint32(1<<20))
		}
	}
	for _, in := range [][]byte{{}, []byte("a"), records(3000), random(300)} {
		z := mustCompress(f, ty, in)
		f.Add(z, uint32(len(in)))
		f.Add(z, uint32(len(in)/2))
	}
	f.Fuzz(func(t *testing.T, src []byte, limit uint32) {
		maxSize := int(limit % (4 << 20))
		prefix := []byte("dst")
		out, err := compression.AppendDecompress(ty, bytes.Clone(prefix), src, maxSize)
		if err != nil {
			if !errors.Is(err, compression.ErrCorrupt) && !errors.Is(err, compression.ErrTooLarge) {
				t.Fatalf("error wraps neither ErrCorrupt nor ErrTooLarge: %v", err)
			}
			if !bytes.Equal(out, prefix) {
				t.Fatalf("on error dst is %q, want %q", out, prefix)
			}
			return
		}
		if !bytes.HasPrefix(out, prefix) {
			t.Fatalf("dst prefix overwritten")
		}
		if n := len(out) - len(prefix); n > maxSize {
			t.Fatalf("decoded %d bytes with maxSize %d", n, maxSize)
		}
	})
}

func FuzzDecompressGzip(f *testing.F)   { fuzzDecompress(f, compression.Gzip, ".gz") }
func FuzzDecompressSnappy(f *testing.F) { fuzzDecompress(f, compression.Snappy, ".snappy") }
func FuzzDecompressXerial(f *testing.F) { fuzzDecompress(f, compression.Snappy, ".xerial") }
func FuzzDecompressLZ4(f *testing.F)    { fuzzDecompress(f, compression.LZ4, ".lz4") }
func FuzzDecompressZstd(f *testing.F)   { fuzzDecompress(f, compression.Zstd, ".zst") }

// FuzzRoundTrip checks that every codec gives back what it was given.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add([]byte("hello, kafka"), uint8(1))
	f.Add(records(5000), uint8(4))
	f.Add(random(70000), uint8(3))
	f.Add(payloadBatch("digits", 1, 70), uint8(3)) // short matches, two lz4 blocks
	f.Add(make([]byte, 70000), uint8(3))           // long matches
	comps := map[compression.Type]*compression.Compressor{}
	for _, ty := range allTypes {
		comps[ty] = mustCompressor(f, ty, 0)
	}
	f.Fuzz(func(t *testing.T, src []byte, which uint8) {
		c := comps[allTypes[int(which)%len(allTypes)]]
		z, err := c.AppendCompress(nil, src)
		if err != nil {
			t.Fatalf("%s: compress: %v", c.Type(), err)
		}
		out, err := compression.AppendDecompress(c.Type(), nil, z, len(src))
		if err != nil || !bytes.Equal(out, src) {
			t.Fatalf("%s: round trip: err %v, equal %v", c.Type(), err, bytes.Equal(out, src))
		}
	})
}
