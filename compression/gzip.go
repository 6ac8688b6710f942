package compression

import (
	"bytes"
	"encoding/binary"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
)

func (c *Compressor) appendGzip(dst, src []byte) ([]byte, error) {
	return c.appendStream(dst, src, func(w io.Writer) (streamWriter, error) {
		return gzip.NewWriterLevel(w, c.gzipLevel)
	})
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
