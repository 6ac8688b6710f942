package compression

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// lz4Encoder is a pooled LZ4 frame writer with the appendWriter it writes to.
type lz4Encoder struct {
	out appendWriter
	zw  *lz4.Writer
}

func (c *Compressor) appendLZ4(dst, src []byte) ([]byte, error) {
	e, _ := c.pool.Get().(*lz4Encoder)
	if e == nil {
		e = &lz4Encoder{}
		e.zw = lz4.NewWriter(&e.out)
		// Like the Java client's KafkaLZ4BlockOutputStream: 64 KiB
		// independent blocks, no block checksums, no content checksum
		// (the batch's CRC-32C covers the data). One goroutine: blocks
		// are compressed inline.
		err := e.zw.Apply(
			lz4.BlockSizeOption(lz4.Block64Kb),
			lz4.BlockChecksumOption(false),
			lz4.ChecksumOption(false),
			lz4.ConcurrencyOption(1),
			lz4.CompressionLevelOption(c.lz4Level),
		)
		if err != nil {
			return dst, fmt.Errorf("compression: lz4 writer: %w", err)
		}
	}
	e.out.b = dst
	e.zw.Reset(&e.out)
	_, err := e.zw.Write(src)
	if err == nil {
		err = e.zw.Close()
	}
	out := e.out.b
	e.out.b = nil
	c.pool.Put(e)
	if err != nil {
		return dst, fmt.Errorf("compression: lz4: %w", err)
	}
	return out, nil
}

// lz4Decoder is a pooled LZ4 frame reader with the bytes.Reader it reads
// from. Reading blocks one at a time, it holds at most one block (up to
// 4 MiB, from pierrec/lz4's own pool) besides the output.
type lz4Decoder struct {
	src   bytes.Reader
	zr    *lz4.Reader
	probe [1]byte
}

var lz4Decoders = sync.Pool{New: func() any {
	d := new(lz4Decoder)
	d.zr = lz4.NewReader(&d.src)
	_ = d.zr.Apply(lz4.ConcurrencyOption(1)) // decode inline, no goroutines
	return d
}}

func appendUnlz4(dst, src []byte, maxSize int) ([]byte, error) {
	d := lz4Decoders.Get().(*lz4Decoder)
	d.src.Reset(src)
	d.zr.Reset(&d.src)
	out, err := readCapped(dst, d.zr, LZ4, maxSize, 0, d.probe[:])
	d.zr.Reset(nil) // returns the block buffer to pierrec/lz4's pool
	d.src.Reset(nil)
	lz4Decoders.Put(d)
	return out, err
}
