package compression_test

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/samsa-go/samsa/compression"
)

func TestTypeNamesRoundTrip(t *testing.T) {
	cases := []struct {
		in   string
		want compression.Type
	}{
		{"none", compression.None},
		{"gzip", compression.Gzip},
		{"snappy", compression.Snappy},
		{"lz4", compression.LZ4},
		{"zstd", compression.Zstd},
		{"ZSTD", compression.Zstd},
		{" Snappy ", compression.Snappy},
	}
	for _, tc := range cases {
		got, err := compression.ParseType(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseType(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if strings.TrimSpace(strings.ToLower(tc.in)) != got.String() {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

func TestParseTypeErrorNamesValueAndValidNames(t *testing.T) {
	_, err := compression.ParseType("brotli")
	if !errors.Is(err, compression.ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
	for _, want := range []string{`"brotli"`, "none", "gzip", "snappy", "lz4", "zstd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestTypeIDsAreKafkas(t *testing.T) {
	// Kafka's attribute bits 0-2; changing them corrupts every batch.
	for want, ty := range allTypes {
		if int(ty) != want {
			t.Errorf("%s = %d, want %d", ty, ty, want)
		}
	}
	if got := compression.Type(5).String(); got != "compression(5)" {
		t.Errorf("Type(5).String() = %q", got)
	}
}

func TestNewCompressorLevels(t *testing.T) {
	cases := []struct {
		t     compression.Type
		level int
		ok    bool
	}{
		{compression.None, 0, true},
		{compression.None, 1, false},
		{compression.Snappy, 0, true},
		{compression.Snappy, 3, false},
		{compression.Gzip, 0, true},
		{compression.Gzip, -1, true},
		{compression.Gzip, 1, true},
		{compression.Gzip, 9, true},
		{compression.Gzip, 10, false},
		{compression.Gzip, -2, false},
		{compression.LZ4, 0, true},
		{compression.LZ4, 1, true},
		{compression.LZ4, 9, true},
		{compression.LZ4, 17, true},
		{compression.LZ4, 18, false},
		{compression.LZ4, -1, false},
		{compression.Zstd, 0, true},
		{compression.Zstd, -131072, true},
		{compression.Zstd, -5, true},
		{compression.Zstd, 22, true},
		{compression.Zstd, 23, false},
		{compression.Zstd, -131073, false},
		{compression.Type(5), 0, false},
		{compression.Type(-1), 0, false},
	}
	for _, tc := range cases {
		c, err := compression.NewCompressor(tc.t, tc.level)
		if tc.ok {
			if err != nil {
				t.Errorf("NewCompressor(%s, %d): %v", tc.t, tc.level, err)
				continue
			}
			if c.Type() != tc.t || c.Level() != tc.level {
				t.Errorf("NewCompressor(%s, %d) made %s level %d", tc.t, tc.level, c.Type(), c.Level())
			}
			continue
		}
		if !errors.Is(err, compression.ErrUnsupported) {
			t.Errorf("NewCompressor(%s, %d) err = %v, want ErrUnsupported", tc.t, tc.level, err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	inputs := []struct {
		name string
		data []byte
	}{
		{"empty", []byte{}},
		{"tiny", []byte("k")},
		{"records-1MiB", records(1 << 20)},
		{"incompressible-1MiB", random(1 << 20)},
		{"incompressible-100KiB", random(100 << 10)}, // not a multiple of any block size
		{"letters", payloadBatch("letters", 1, 100)}, // gzip keeps its Huffman-only pass
		{"digits", payloadBatch("digits", 1, 100)},   // short matches only
	}
	levels := map[compression.Type][]int{
		compression.None:   {0},
		compression.Gzip:   {0, 1, 9},
		compression.Snappy: {0},
		compression.LZ4:    {0, 1, 9, 17},
		compression.Zstd:   {0, -5, 1, 6, 19},
	}
	for _, ty := range allTypes {
		for _, level := range levels[ty] {
			c := mustCompressor(t, ty, level)
			for _, in := range inputs {
				prefix := []byte("prefix") // both calls must append, not overwrite
				z, err := c.AppendCompress(bytes.Clone(prefix), in.data)
				if err != nil {
					t.Fatalf("%s/%d/%s: compress: %v", ty, level, in.name, err)
				}
				if !bytes.HasPrefix(z, prefix) {
					t.Fatalf("%s/%d/%s: compress overwrote dst", ty, level, in.name)
				}
				if ty != compression.None && len(z) == len(prefix) {
					t.Fatalf("%s/%d/%s: compressed to nothing", ty, level, in.name)
				}
				out, err := compression.AppendDecompress(ty, bytes.Clone(prefix), z[len(prefix):], len(in.data))
				if err != nil {
					t.Fatalf("%s/%d/%s: decompress: %v", ty, level, in.name, err)
				}
				if !bytes.Equal(out[len(prefix):], in.data) || !bytes.HasPrefix(out, prefix) {
					t.Fatalf("%s/%d/%s: round trip changed the data (%d bytes in, %d out)", ty, level, in.name, len(in.data), len(out)-len(prefix))
				}
			}
		}
	}
}

func TestCompressedRecordsAreSmaller(t *testing.T) {
	// A codec that silently stored data would pass the round trip.
	src := records(64 << 10)
	for _, ty := range allTypes[1:] {
		if z := mustCompress(t, ty, src); len(z) > len(src)/2 {
			t.Errorf("%s: 64 KiB of records compressed to %d bytes", ty, len(z))
		}
	}
}

func TestMaxSizeIsExact(t *testing.T) {
	src := records(300 << 10)
	for _, ty := range allTypes {
		z := mustCompress(t, ty, src)
		if _, err := compression.AppendDecompress(ty, nil, z, len(src)); err != nil {
			t.Errorf("%s: maxSize = output size: %v", ty, err)
		}
		// dst with room for exactly maxSize bytes, as a caller who knows the size allocates it.
		if out, err := compression.AppendDecompress(ty, make([]byte, 0, len(src)), z, len(src)); err != nil || !bytes.Equal(out, src) {
			t.Errorf("%s: dst sized exactly: err = %v", ty, err)
		}
		out, err := compression.AppendDecompress(ty, []byte("keep"), z, len(src)-1)
		if !errors.Is(err, compression.ErrTooLarge) {
			t.Errorf("%s: maxSize = output size - 1: err = %v, want ErrTooLarge", ty, err)
		}
		if string(out) != "keep" {
			t.Errorf("%s: on error dst = %q, want its original content", ty, out)
		}
	}
}

func TestCorruptInput(t *testing.T) {
	src := records(100 << 10)
	for _, ty := range allTypes[1:] {
		z := mustCompress(t, ty, src)
		cases := map[string][]byte{
			"empty":     {},
			"garbage":   []byte("this is not compressed data at all, not even a little"),
			"truncated": z[:len(z)/2],
		}
		if ty == compression.Gzip || ty == compression.Zstd { // the others carry no checksum: the batch CRC covers them
			flipped := bytes.Clone(z)
			flipped[len(flipped)/2] ^= 0x55
			cases["bit flip"] = flipped
		}
		for name, in := range cases {
			out, err := compression.AppendDecompress(ty, nil, in, 10<<20)
			if !errors.Is(err, compression.ErrCorrupt) {
				t.Errorf("%s/%s: err = %v (%d bytes out), want ErrCorrupt", ty, name, err, len(out))
			}
		}
	}
	if _, err := compression.AppendDecompress(compression.Type(7), nil, []byte{1}, 10); !errors.Is(err, compression.ErrUnsupported) {
		t.Errorf("unknown type: err = %v, want ErrUnsupported", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	// One Compressor per codec shared by all goroutines, as a producer does.
	inputs := [][]byte{records(1000), records(70 << 10), random(5000), {}}
	var comps []*compression.Compressor
	for _, ty := range allTypes {
		comps = append(comps, mustCompressor(t, ty, 0))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			var z, out []byte
			for i := range 40 {
				c := comps[(g+i)%len(comps)]
				in := inputs[i%len(inputs)]
				var err error
				if z, err = c.AppendCompress(z[:0], in); err != nil {
					errs <- err
					return
				}
				if out, err = compression.AppendDecompress(c.Type(), out[:0], z, len(in)); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(out, in) {
					errs <- errors.New(c.Type().String() + ": concurrent round trip changed the data")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSteadyStateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	src := records(64 << 10)
	for _, ty := range allTypes {
		c := mustCompressor(t, ty, 0)
		z := mustCompress(t, ty, src)
		dst := make([]byte, 0, 2*len(src))
		for range 2 * runtime.GOMAXPROCS(0) { // warm every pooled encoder
			_, _ = c.AppendCompress(dst[:0], src)
		}
		compressAllocs := testing.AllocsPerRun(50, func() {
			if _, err := c.AppendCompress(dst[:0], src); err != nil {
				t.Fatal(err)
			}
		})
		exact := make([]byte, 0, len(src)) // no spare byte: the overrun probe must not allocate either
		decompressAllocs := testing.AllocsPerRun(50, func() {
			if _, err := compression.AppendDecompress(ty, exact[:0], z, len(src)); err != nil {
				t.Fatal(err)
			}
		})
		// Pooled encoders and decoders: no per-call allocation once warm.
		if compressAllocs > 0 || decompressAllocs > 0 {
			t.Errorf("%s: %.1f allocs per compress, %.1f per decompress; want 0", ty, compressAllocs, decompressAllocs)
		}
	}
}

// TestZstdKeepsOneEncoderPerConcurrentCall protects memory: a zstd encoder
// at level 6 holds about 20 MiB, and one goroutine compressing in a loop
// must not leave one such encoder per CPU behind.
func TestZstdKeepsOneEncoderPerConcurrentCall(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	src := records(64 << 10)
	before := heapInUse()
	c := mustCompressor(t, compression.Zstd, 6)
	for range 32 {
		if _, err := c.AppendCompress(nil, src); err != nil {
			t.Fatal(err)
		}
	}
	if retained := heapInUse() - before; retained > 40<<20 {
		t.Errorf("one goroutine's zstd compressions retain %d MiB", retained>>20)
	}
	runtime.KeepAlive(c)
}

func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
