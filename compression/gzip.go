package compression

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzipEncoder is a pooled gzip writer with the appendWriter it writes to.
type gzipEncoder struct {
	out appendWriter
	zw  *gzip.Writer
}

func (c *Compressor) appendGzip(dst, src []byte) ([]byte, error) {
	e, _ := c.pool.Get().(*gzipEncoder)
	if e == nil {
		e = &gzipEncoder{}
		zw, err := gzip.NewWriterLevel(&e.out, c.gzipLevel)
		if err != nil {
			return dst, fmt.Errorf("compression: gzip writer: %w", err)
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
	c.pool.Put(e)
	if err != nil {
		return dst, fmt.Errorf("compression: gzip: %w", err)
	}
	return out, nil
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
