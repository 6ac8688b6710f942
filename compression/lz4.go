package compression

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// The LZ4 frame samsa writes (LZ4 frame format 1.6), the one Kafka's Java
// client writes:
//
//	magic 04 22 4d 18 | FLG 0x60 | BD 0x40 | HC 0x82 | blocks... | end mark 00 00 00 00
//
// FLG 0x60 is version 01 with independent blocks and nothing else: no
// block checksums, no content size, no content checksum, no dictionary.
// The batch's CRC-32C already covers the data, and Kafka's
// Lz4BlockInputStream checks a content checksum as the XOR of per-block
// hashes, which matches the standard checksum only for one-block frames,
// so writing none is both cheaper and safer. Kafka's reader rejects
// dependent blocks. BD 0x40 is 64 KiB blocks, as the Java client writes;
// HC is the second byte of xxHash32 of FLG and BD.
//
// Each block is a little-endian size and the block's data, compressed
// straight into dst (no block buffer, no copy) by the fast compressor of
// lz4fast.go or pierrec/lz4's high-compression one; a block that would not
// come out shorter than its input is stored as is, with the size's high
// bit set. At the default level the frame is byte for byte the Java
// client's (TestLZ4AsTheJavaClientWritesIt). Everything around the block
// compressor, the frame, the pool and recordbatch.Builder.Finish's copy of
// the compressed records back into the batch, costs about 1 % of the
// compressor's own time on W2's records from 16 KiB to 1 MiB batches (a
// CPU profile of internal/recordbatch's BenchmarkFinishW2c).
//
// Why 64 KiB blocks, when franz-go writes one block per batch (4 MiB
// blocks)? They are the Java client's, so the same compressor gives the
// same bytes, and every reader's buffer stays small. One block per 1 MiB
// batch would find slightly more matches (a position could reach back 64
// KiB from the middle of the batch, not only from the middle of a block)
// at the cost of more CPU, since on record data the cost follows the
// number of matches (see BenchmarkCompressLZ4Batch).
const (
	lz4Magic = 0x184D2204
	lz4FLG   = 0x60
	lz4BD    = 0x40 // 64 KiB blocks
	lz4HC    = 0x82 // descriptor checksum of lz4FLG, lz4BD
	lz4Block = 64 << 10
	lz4Raw   = 1 << 31 // block size flag: stored uncompressed
)

// lz4Encoder is the pooled per-call state of a Compressor's lz4 encoding:
// the fast compressor of lz4fast.go (16 KiB) or, at the levels where Kafka
// uses LZ4's high-compression one, pierrec/lz4's HC compressor (256 KiB).
type lz4Encoder struct {
	fast *lz4Fast
	hc   *lz4.CompressorHC
}

func (c *Compressor) appendLZ4(dst, src []byte) ([]byte, error) {
	e, _ := c.pool.Get().(*lz4Encoder)
	if e == nil {
		e = new(lz4Encoder)
		if c.lz4Level == lz4.Fast {
			e.fast = new(lz4Fast)
		} else {
			e.hc = &lz4.CompressorHC{Level: c.lz4Level}
		}
	}
	dst = binary.LittleEndian.AppendUint32(dst, lz4Magic)
	dst = append(dst, lz4FLG, lz4BD, lz4HC)
	for rest := src; len(rest) > 0; {
		block := rest[:min(len(rest), lz4Block)]
		rest = rest[len(block):]
		// Room for the block's size, the most the compressor can
		// write (a little more than the block itself) and the end
		// mark: dst grows to about the compressed size plus one block,
		// not to the input's size.
		at := len(dst)
		dst = slices.Grow(dst, 4+lz4BlockBound(len(block))+4)
		out := dst[at+4 : at+4+lz4BlockBound(len(block))]
		var n int
		var err error
		if e.fast != nil {
			n = e.fast.compressBlock(out, block)
		} else {
			// Given no more room than the block itself, the HC
			// compressor returns 0 (or an error) for a block that
			// does not shrink.
			n, err = e.hc.CompressBlock(block, out[:len(block)])
		}
		if err == nil && n > 0 && n < len(block) {
			binary.LittleEndian.PutUint32(dst[at:at+4], uint32(n))
		} else {
			n = copy(out, block)
			binary.LittleEndian.PutUint32(dst[at:at+4], uint32(n)|lz4Raw)
		}
		dst = dst[:at+4+n]
	}
	dst = append(dst, 0, 0, 0, 0)
	c.pool.Put(e)
	return dst, nil
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
