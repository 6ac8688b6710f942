package compression

import (
	"bytes"
	"io"
	"sync"

	"github.com/pierrec/lz4/v4"
)

func (c *Compressor) appendLZ4(dst, src []byte) ([]byte, error) {
	return c.appendStream(dst, src, func(w io.Writer) (streamWriter, error) {
		zw := lz4.NewWriter(w)
		// Like the Java client's KafkaLZ4BlockOutputStream: 64 KiB
		// independent blocks, no block checksums, no content checksum
		// (the batch's CRC-32C covers the data). One goroutine: blocks
		// are compressed inline.
		return zw, zw.Apply(
			lz4.BlockSizeOption(lz4.Block64Kb),
			lz4.BlockChecksumOption(false),
			lz4.ChecksumOption(false),
			lz4.ConcurrencyOption(1),
			lz4.CompressionLevelOption(c.lz4Level),
		)
	})
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
