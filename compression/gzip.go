package compression

import (
	"bytes"
	"encoding/binary"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// appendGzip compresses src as one gzip member at c's level, then, if that
// did not halve it, also with Huffman coding alone, and keeps the smaller.
//
// Why a second pass: klauspost's deflate at levels 1 to 6 stores a 64 KiB
// window as is when its matcher finds no match in it, and spends a
// dynamic Huffman block only on windows with matches. zlib (the Java
// client's java.util.zip.Deflater) always Huffman-codes the literals.
// Data with a skewed byte distribution but few repeats, such as random
// letters (the Java ProducerPerformance payload) or hex digits, then came
// out 1.3 to 1.5 times the size the Java client stores. Huffman alone
// (gzip.HuffmanOnly) codes it to its entropy, about 0.6 of its size for
// letters; on data that halves under LZ77 it cannot win, so it is tried
// only above that. On incompressible data it costs a byte histogram
// before it stores the window.
func (c *Compressor) appendGzip(dst, src []byte) ([]byte, error) {
	out, err := c.appendStream(&c.pool, dst, src, func(w io.Writer) (streamWriter, error) {
		return gzip.NewWriterLevel(w, c.gzipLevel)
	})
	if err != nil || len(out)-len(dst) <= len(src)/2 {
		return out, err
	}
	huff, err := c.appendStream(&c.huffPool, out, src, func(w io.Writer) (streamWriter, error) {
		return gzip.NewWriterLevel(w, gzip.HuffmanOnly)
	})
	if err != nil {
		return out, nil // the first member is complete and valid
	}
	// huff holds both members (out may have moved with it): keep the
	// smaller, right after dst.
	first, second := len(out)-len(dst), len(huff)-len(out)
	if second < first {
		copy(huff[len(dst):], huff[len(out):])
		return huff[:len(dst)+second], nil
	}
	return huff[:len(out)], nil
}

// gzipDecoder is a pooled gzip reader with the bytes.Reader it reads from.
type gzipDecoder struct {
	src   bytes.Reader
	zr    gzip.Reader
	probe [1]byte
}

var gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}

func appendGunzip(dst, src []byte, maxSize int) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer func() {
		d.src.Reset(nil)
		gzipDecoders.Put(d)
	}()
	d.src.Reset(src)
	if err := d.zr.Reset(&d.src); err != nil {
		return dst, corrupt(Gzip, err)
	}
	// The trailer's ISIZE is the size of the last member mod 2^32: a good
	// first guess for a single-member stream, never trusted beyond maxSize.
	// Deflate expands at most about 1032:1, so a larger claim is a lie.
	hint := 0
	if len(src) >= 4 {
		hint = int(min(binary.LittleEndian.Uint32(src[len(src)-4:]), uint32(min(len(src), 1<<22))*1032))
	}
	return readCapped(dst, &d.zr, Gzip, maxSize, hint, d.probe[:])
}
