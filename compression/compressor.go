package compression

import (
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// A Compressor compresses record batches with one codec at one level.
//
// It is safe for concurrent use and meant to live as long as the producer:
// gzip stream encoders and lz4 block compressors are kept in pools and
// reused, zstd keeps one encoder per concurrent caller (see appendZstd), and
// snappy needs no state. In steady state AppendCompress allocates nothing but the
// growth of dst and starts no goroutine. A Compressor holds no goroutine
// either, so it has no Close.
type Compressor struct {
	t     Type
	level int

	gzipLevel  int
	lz4Level   lz4.CompressionLevel
	pool       sync.Pool // *streamEncoder (gzip) or *lz4Encoder (lz4)
	huffPool   sync.Pool // *streamEncoder: gzip's Huffman-only second pass
	zstdLevel  zstd.EncoderLevel
	zstdAllLit bool      // entropy-code literals of blocks without matches (levels 1 and up)
	zstdSmall  zstdClass // encoders for input up to zstdSmallWindow
	zstdLarge  zstdClass // encoders with the level's default window, for larger input
}

// NewCompressor returns a Compressor for codec t at the given level. Level 0
// selects the codec's default; the other accepted values follow Kafka's
// compression.<codec>.level settings (KIP-390):
//
//   - None and Snappy have no levels: only 0 is accepted.
//   - Gzip: 1 (fastest) to 9 (smallest); 0 or -1 (Kafka's default) mean 6,
//     the Deflater default that Kafka uses.
//   - LZ4: 1 to 17 as in Kafka. The default (0) and 9, Kafka's default, are
//     LZ4's fast compressor, as in the Java client: Kafka 4.x runs
//     lz4-java's fast compressor at its default level and the
//     high-compression one at every other level. The fast compressor here
//     is the reference implementation's algorithm (lz4fast.go), so a batch
//     comes out byte for byte as the Java client compresses it. Levels 1 to
//     8 map to pierrec/lz4's high-compression Level1 to Level8, and 10 to 17
//     to Level9.
//   - Zstd: -131072 to 22 as in Kafka; 0 means 3, Kafka's default. The
//     pure-Go encoder has four speeds, chosen as zstd.EncoderLevelFromZstd
//     does: below 3 fastest, 3-5 default, 6-9 better, 10 and up best.
//
// An unknown Type or a level outside these ranges fails with an error
// wrapping ErrUnsupported.
func NewCompressor(t Type, level int) (*Compressor, error) {
	c := &Compressor{t: t, level: level}
	badLevel := func(valid string) error {
		return fmt.Errorf("compression: %w %s level %d (valid: %s)", ErrUnsupported, t, level, valid)
	}
	switch t {
	case None, Snappy:
		if level != 0 {
			return nil, badLevel("0, " + t.String() + " has no levels")
		}
	case Gzip:
		switch {
		case level == 0 || level == -1:
			// Not gzip.DefaultCompression, which klauspost maps to its
			// level 5.
			c.gzipLevel = 6
		case level >= gzip.BestSpeed && level <= gzip.BestCompression:
			c.gzipLevel = level
		default:
			return nil, badLevel("1 to 9, or 0 or -1 for the default 6")
		}
	case LZ4:
		switch {
		case level == 0 || level == 9:
			c.lz4Level = lz4.Fast
		case level >= 1 && level <= 17:
			c.lz4Level = lz4.Level1 << (min(level, 9) - 1)
		default:
			return nil, badLevel("1 to 17, or 0 for the default 9 (fast)")
		}
	case Zstd:
		const minZstdLevel, maxZstdLevel = -131072, 22
		if level < minZstdLevel || level > maxZstdLevel {
			return nil, badLevel("-131072 to 22, or 0 for the default 3")
		}
		zl := level
		if zl == 0 {
			zl = 3
		}
		c.zstdLevel = zstd.EncoderLevelFromZstd(zl)
		// Negative levels trade ratio for speed: the reference zstd does
		// not entropy-code their literals either.
		c.zstdAllLit = zl >= 1
		c.zstdSmall = zstdClass{window: zstdSmallWindow, free: make(chan *zstd.Encoder, runtime.GOMAXPROCS(0))}
		c.zstdLarge = zstdClass{free: make(chan *zstd.Encoder, runtime.GOMAXPROCS(0))}
		enc, err := c.newZstdEncoder(zstdSmallWindow)
		if err != nil {
			return nil, fmt.Errorf("compression: zstd encoder: %w", err)
		}
		c.zstdSmall.free <- enc
	default:
		return nil, fmt.Errorf("compression: %w type %s", ErrUnsupported, t)
	}
	return c, nil
}

// Type returns the codec c compresses with.
func (c *Compressor) Type() Type { return c.t }

// Level returns the level c was created with, as passed to NewCompressor
// (0 for the codec's default).
func (c *Compressor) Level() int { return c.level }

// AppendCompress appends the compressed form of src to dst and returns the
// extended slice, in the wire format Kafka expects for c's codec (for None,
// src itself). dst and src must not overlap. An error comes only from the
// underlying encoder, which does not fail on in-memory data in practice;
// on error dst is returned with its original length.
func (c *Compressor) AppendCompress(dst, src []byte) ([]byte, error) {
	switch c.t {
	case None:
		return append(dst, src...), nil
	case Gzip:
		return c.appendGzip(dst, src)
	case Snappy:
		return appendSnappy(dst, src), nil
	case LZ4:
		return c.appendLZ4(dst, src)
	case Zstd:
		return c.appendZstd(dst, src)
	}
	return dst, fmt.Errorf("compression: %w type %s", ErrUnsupported, c.t)
}

// streamWriter is a stream encoder (gzip.Writer, lz4.Writer) that can be
// reset onto a new output and reused.
type streamWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// streamEncoder is a pooled stream encoder with the appendWriter it writes
// to.
type streamEncoder struct {
	out appendWriter
	zw  streamWriter
}

// appendStream compresses src into dst with a stream encoder from pool,
// made by newWriter the first time. Errors name c's codec.
func (c *Compressor) appendStream(pool *sync.Pool, dst, src []byte, newWriter func(io.Writer) (streamWriter, error)) ([]byte, error) {
	e, _ := pool.Get().(*streamEncoder)
	if e == nil {
		e = &streamEncoder{}
		zw, err := newWriter(&e.out)
		if err != nil {
			return dst, fmt.Errorf("compression: %s writer: %w", c.t, err)
		}
		e.zw = zw
	}
	e.out.b = dst
	e.zw.Reset(&e.out)
	_, err := e.zw.Write(src)
	if err == nil {
		err = e.zw.Close()
	}
	out := e.out.b
	e.out.b = nil // the pool must not keep the caller's memory alive
	pool.Put(e)
	if err != nil {
		return dst, fmt.Errorf("compression: %s: %w", c.t, err)
	}
	return out, nil
}

// appendWriter is an io.Writer that appends to a slice, so that stream
// encoders write straight into the caller's dst.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
