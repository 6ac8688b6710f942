package compression_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/samsa-go/samsa/compression"
)

const (
	gib        = 1 << 30
	bombLimit  = 1 << 20  // maxSize passed to AppendDecompress
	bombBudget = 16 << 20 // what one bomb may allocate in all
)

// bombs returns inputs that claim or expand to 1 GiB or more, made without
// ever holding 1 GiB: repeated chunks, members or frames of zeros.
func bombs(t *testing.T) map[string]struct {
	t   compression.Type
	src []byte
} {
	zeros := make([]byte, 1<<20)
	out := map[string]struct {
		t   compression.Type
		src []byte
	}{}
	add := func(name string, ty compression.Type, src []byte) {
		out[name] = struct {
			t   compression.Type
			src []byte
		}{ty, src}
	}

	// gzip: 1024 members of 1 MiB of zeros (about 1 KiB each).
	member := mustCompress(t, compression.Gzip, zeros)
	add("gzip members", compression.Gzip, bytes.Repeat(member, gib/len(zeros)))

	// lz4: one frame whose single 64 KiB block of zeros is repeated 16384
	// times. Our frames have a 7-byte header, blocks of a 4-byte length and
	// data, and a 4-byte end mark.
	frame := mustCompress(t, compression.LZ4, zeros[:64<<10])
	blockLen := int(binary.LittleEndian.Uint32(frame[7:]) &^ (1 << 31))
	block := frame[7 : 7+4+blockLen]
	if !bytes.Equal(frame[7+4+blockLen:], []byte{0, 0, 0, 0}) {
		t.Fatalf("unexpected lz4 frame layout % x", frame)
	}
	lz := append(bytes.Clone(frame[:7]), bytes.Repeat(block, gib/(64<<10))...)
	add("lz4 blocks", compression.LZ4, append(lz, 0, 0, 0, 0))

	// zstd: frames that declare their content size, and a streamed frame
	// that does not (it declares a window instead), each repeated.
	withFCS := mustCompress(t, compression.Zstd, zeros)
	add("zstd frames with size", compression.Zstd, bytes.Repeat(withFCS, gib/len(zeros)))
	var streamed bytes.Buffer
	enc, err := zstd.NewWriter(&streamed, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	for range 64 { // 64 MiB in one frame without content size
		_, _ = enc.Write(zeros)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	add("zstd stream frames", compression.Zstd, bytes.Repeat(streamed.Bytes(), 16))
	// A single frame header that claims 1 TiB.
	add("zstd claimed size", compression.Zstd, []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0})

	// snappy: xerial chunks of 32 KiB of zeros (snappy expands at most
	// about 21:1, so this is 64 MiB from 3 MiB), and a raw block that
	// claims 4 GiB.
	chunk := mustCompress(t, compression.Snappy, zeros[:32<<10])[16:]
	header := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	add("snappy xerial chunks", compression.Snappy, append(header, bytes.Repeat(chunk, 2048)...))
	add("snappy claimed size", compression.Snappy, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0})

	// none: just too long.
	add("none", compression.None, make([]byte, bombLimit+1))
	return out
}

func TestBombsStopAtMaxSize(t *testing.T) {
	for name, b := range bombs(t) {
		before := totalAlloc()
		out, err := compression.AppendDecompress(b.t, nil, b.src, bombLimit)
		allocated := totalAlloc() - before
		if !errors.Is(err, compression.ErrTooLarge) {
			t.Errorf("%s: err = %v (%d bytes out), want ErrTooLarge", name, err, len(out))
		}
		if allocated > bombBudget {
			t.Errorf("%s: allocated %d MiB to refuse a bomb with maxSize 1 MiB", name, allocated>>20)
		}
		t.Logf("%s: %d KiB in, %d KiB allocated", name, len(b.src)>>10, allocated>>10)
	}
}

func TestLargeLimitStillStopsEarly(t *testing.T) {
	// With a 64 MiB limit, a 1 GiB bomb must cost about 64 MiB, not 1 GiB.
	if testing.Short() {
		t.Skip("allocates 64 MiB per codec")
	}
	all := bombs(t)
	for _, name := range []string{"gzip members", "lz4 blocks", "zstd frames with size", "zstd stream frames"} {
		b := all[name]
		before := totalAlloc()
		_, err := compression.AppendDecompress(b.t, nil, b.src, 64<<20)
		if allocated := totalAlloc() - before; !errors.Is(err, compression.ErrTooLarge) || allocated > 3*64<<20 {
			t.Errorf("%s: err = %v after allocating %d MiB", name, err, allocated>>20)
		}
	}
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestZstdDecoderReusableAfterStoppedStream protects against a hang: a
// pooled zstd decoder whose stream was cut short at maxSize used to keep
// its only block decoder, so the next DecodeAll on it waited forever.
func TestZstdDecoderReusableAfterStoppedStream(t *testing.T) {
	const maxSize = 16 << 20                       // the same limit for every call keeps the decoder's options as they are
	streamed := bombs(t)["zstd stream frames"].src // no content size: stream path, cut at maxSize
	sized := readVector(t, "records.json.zst")     // content size: DecodeAll path
	want := readVector(t, "records.json")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 5 {
			if _, err := compression.AppendDecompress(compression.Zstd, nil, streamed, maxSize); !errors.Is(err, compression.ErrTooLarge) {
				t.Errorf("stream bomb: err = %v, want ErrTooLarge", err)
			}
			out, err := compression.AppendDecompress(compression.Zstd, nil, sized, maxSize)
			if err != nil || !bytes.Equal(out, want) {
				t.Errorf("sized frame after a stopped stream: err = %v", err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("zstd decoding hung")
	}
}
