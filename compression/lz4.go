package compression

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// The LZ4 frame samsa writes (LZ4 frame format 1.6), byte for byte what
// pierrec/lz4's Writer writes with the options below, and what Kafka's
// Java client writes but for the compressor's choice of matches:
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
// Each block is a little-endian size and the block's data, compressed by
// pierrec/lz4 straight into dst (no block buffer, no copy); a block that
// would not come out shorter than its input is stored as is, with the
// size's high bit set.
//
// Why 64 KiB blocks, when franz-go writes one block per batch (4 MiB
// blocks)? The fast compressor finds more matches when it can reach back
// 64 KiB from every position, not only from the middle of a block: on the
// benchmarks' W2 records one block per 1 MiB batch comes out 3.5 %
// smaller, but costs about 12 % more CPU, because on such data (a short
// match every ~10 bytes) the cost follows the number of matches. 64 KiB
// blocks keep the CPU down and every reader's buffer small. (A
// hand-written greedy compressor with an L1-sized hash table was no faster
// than pierrec/lz4 at the same ratio, and the reference C implementation,
// lz4 -b1, is only about 1.3x faster on this data, with 6 % larger output;
// see BenchmarkCompressLZ4Batch.)
const (
	lz4Magic = 0x184D2204
	lz4FLG   = 0x60
	lz4BD    = 0x40 // 64 KiB blocks
	lz4HC    = 0x82 // descriptor checksum of lz4FLG, lz4BD
	lz4Block = 64 << 10
	lz4Raw   = 1 << 31 // block size flag: stored uncompressed
)

// lz4Encoder is the pooled per-call state of a Compressor's lz4 encoding:
// pierrec/lz4's fast compressor (136 KiB) or, for levels 2 and up, its HC
// compressor (256 KiB).
type lz4Encoder struct {
	fast lz4.Compressor
	hc   *lz4.CompressorHC // nil at the fast level
}

func (c *Compressor) appendLZ4(dst, src []byte) ([]byte, error) {
	e, _ := c.pool.Get().(*lz4Encoder)
	if e == nil {
		e = new(lz4Encoder)
		if c.lz4Level != lz4.Fast {
			e.hc = &lz4.CompressorHC{Level: c.lz4Level}
		}
	}
	dst = binary.LittleEndian.AppendUint32(dst, lz4Magic)
	dst = append(dst, lz4FLG, lz4BD, lz4HC)
	for rest := src; len(rest) > 0; {
		block := rest[:min(len(rest), lz4Block)]
		rest = rest[len(block):]
		// Room for this block stored as is, the most it takes, and the
		// end mark: dst grows to about the compressed size plus one
		// block, not to the input's size.
		at := len(dst)
		dst = slices.Grow(dst, 4+len(block)+4)
		dst = dst[:at+4+len(block)]
		out := dst[at+4:]
		// Given no more room than the block itself, both compressors
		// return 0 (or an error) for a block that does not shrink.
		var n int
		var err error
		if e.hc == nil {
			n, err = e.fast.CompressBlock(block, out)
		} else {
			n, err = e.hc.CompressBlock(block, out)
		}
		if err == nil && n > 0 && n < len(block) {
			binary.LittleEndian.PutUint32(dst[at:], uint32(n))
		} else {
			n = copy(out, block)
			binary.LittleEndian.PutUint32(dst[at:], uint32(n)|lz4Raw)
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
