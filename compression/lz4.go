package compression

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// The LZ4 frame samsa writes (LZ4 frame format 1.6):
//
//	magic 04 22 4d 18 | FLG 0x60 | BD | HC | blocks... | end mark 00 00 00 00
//
// FLG 0x60 is version 01 with independent blocks and nothing else: no
// block checksums, no content size, no content checksum, no dictionary.
// The batch's CRC-32C already covers the data, and Kafka's
// Lz4BlockInputStream checks a content checksum as the XOR of per-block
// hashes, which matches the standard checksum only for one-block frames,
// so writing none is both cheaper and safer. Dependent blocks are out:
// Kafka's reader rejects them.
//
// BD names the smallest block size of 64 KiB, 256 KiB, 1 MiB and 4 MiB
// that holds the whole input, so that a batch up to 4 MiB is one block:
// every match can reach back the full 64 KiB window, where the Java
// client's 64 KiB blocks each start with no history (on W2's records one
// block comes out 1.5 % smaller at the fast level), and a reader still
// sizes its buffer to the batch rather than to 4 MiB. Larger input is cut
// into 4 MiB blocks. Kafka's reader accepts block sizes 64 KiB to 4 MiB
// (BD 4 to 7), as does every LZ4 frame reader. HC, the descriptor
// checksum, is the second byte of xxHash32 of FLG and BD; lz4BD has it for
// the four BD values.
//
// A block that would not come out shorter than its input is stored as is,
// with the size's high bit set, as the format allows.
//
// The blocks are compressed straight into dst, with no intermediate
// buffer: at the fast level (the default) by lz4Table.compress, at levels
// 2 and up by pierrec/lz4's HC compressor. pierrec/lz4 still decodes (see
// appendUnlz4).
const (
	lz4Magic      = 0x184D2204
	lz4FLG        = 0x60
	lz4MaxBlock   = 4 << 20
	lz4HeaderSize = 7
	lz4EndMark    = 4
	lz4Raw        = 1 << 31 // block size flag: stored uncompressed
)

// lz4BD returns the BD byte and HC of a frame whose blocks hold up to n
// bytes of input.
func lz4BD(n int) (bd, hc byte) {
	switch {
	case n <= 64<<10:
		return 0x40, 0x82
	case n <= 256<<10:
		return 0x50, 0xfb
	case n <= 1<<20:
		return 0x60, 0x51
	default:
		return 0x70, 0x73
	}
}

// lz4Encoder is the per-call state of the lz4 compressor, pooled per
// Compressor: the fast compressor's hash table (32 KiB) or, for levels 2
// and up, pierrec/lz4's HC compressor (256 KiB of tables for blocks up to
// 64 KiB, 512 KiB more for larger ones).
type lz4Encoder struct {
	table lz4Table
	hc    *lz4.CompressorHC // nil at the fast level
}

func (c *Compressor) appendLZ4(dst, src []byte) ([]byte, error) {
	e, _ := c.pool.Get().(*lz4Encoder)
	if e == nil {
		e = new(lz4Encoder)
		if c.lz4Level != lz4.Fast {
			e.hc = &lz4.CompressorHC{Level: c.lz4Level}
		}
	}
	blocks := max(1, (len(src)+lz4MaxBlock-1)/lz4MaxBlock)
	// Room for the header, every block stored as is, the end mark, and
	// the slack lz4Table.compress writes past its output.
	dst = slices.Grow(dst, lz4HeaderSize+4*blocks+len(src)+lz4EndMark+lz4Slack)
	bd, hc := lz4BD(len(src))
	dst = binary.LittleEndian.AppendUint32(dst, lz4Magic)
	dst = append(dst, lz4FLG, bd, hc)
	for rest := src; len(rest) > 0; {
		block := rest[:min(len(rest), lz4MaxBlock)]
		rest = rest[len(block):]
		at := len(dst)
		size := dst[at : at+4] // within the capacity grown above
		out := dst[at+4 : at+4+len(block)+lz4Slack]
		var n int
		if e.hc == nil {
			n = e.table.compress(out, block)
		} else {
			// 0 when it does not fit in len(block) bytes; an error
			// only means the same.
			n, _ = e.hc.CompressBlock(block, out[:len(block)])
		}
		if n > 0 && n < len(block) {
			binary.LittleEndian.PutUint32(size, uint32(n))
		} else {
			n = copy(out, block)
			binary.LittleEndian.PutUint32(size, uint32(n)|lz4Raw)
		}
		dst = dst[:at+4+n]
	}
	dst = append(dst, 0, 0, 0, 0)
	c.pool.Put(e)
	return dst, nil
}

// LZ4 block format constants (lz4_Block_format.md).
const (
	lz4MinMatch  = 4
	lz4LastLits  = 5  // a block ends with at least 5 literals
	lz4MFLimit   = 12 // the last match starts at least 12 bytes before the end
	lz4MaxOffset = 65535
	lz4Slack     = 16 // bytes compress may write past its output's end
	lz4Window    = 64 << 10
	lz4HashLog   = 13
	lz4SkipLog   = 6 // after 2^6 bytes without a match, step by 2, then 3...
)

// lz4Table is the fast compressor's hash table: for the hash of the 6
// bytes at a position, the last position seen with that hash, plus base.
// 8192 entries (32 KiB) fit in L1 cache; on W2's records that is as fast
// as pierrec/lz4's 64 Ki-entry table, with about 2 % smaller output than
// 64 KiB blocks (see BenchmarkCompressLZ4Batch).
//
// Each block's positions are stored offset by base, which moves past the
// block (and a window) afterwards, so that the entries of earlier blocks
// read as positions outside the window and the table needs no clearing.
type lz4Table struct {
	pos  [1 << lz4HashLog]uint32
	base uint32
}

func lz4Hash(u uint64) uint32 {
	const prime6 = 227718039650203 // a 48-bit prime, as LZ4's 6-byte hash uses
	return uint32(((u << 16) * prime6) >> (64 - lz4HashLog))
}

// compress writes the LZ4 block of src into dst and returns its length, or
// 0 when it would not be shorter than src, which is then better stored as
// is. dst must have room for len(src)+lz4Slack bytes; compress may write
// anywhere in them. src must be at most 4 MiB.
//
// It is the greedy search of LZ4's fast mode: at each position look up the
// last one with the same 6-byte hash, take the match if its first 4 bytes
// agree and it lies within 64 KiB, extend it both ways, and skip faster
// through data that does not match. The output depends on src alone.
func (t *lz4Table) compress(dst, src []byte) int {
	if len(src) <= lz4MFLimit {
		return 0 // too short to hold a match: literals only, longer than src
	}
	// An entry e stands for position e-base (mod 2^32). Entries of earlier
	// blocks, and zero entries, come out at or past len(src)+64 KiB:
	// never a match. base starts at 64 KiB for that, and starts over
	// before it would wrap.
	if t.base == 0 || uint64(t.base)+uint64(len(src))+2*lz4Window > 1<<32 {
		t.pos, t.base = [1 << lz4HashLog]uint32{}, lz4Window
	}
	base := t.base
	t.base += uint32(len(src)) + lz4Window
	limit := len(src) // output this long or longer is no better than src
	dst = dst[:len(src)+lz4Slack]
	sLimit := len(src) - lz4MFLimit // matches start before sLimit
	mLimit := len(src) - lz4LastLits
	var s, anchor, di int
	for {
		// Find a match at s or after.
		var cand int
		for {
			if s >= sLimit {
				return lz4Last(dst, src, anchor, di, limit)
			}
			cv := binary.LittleEndian.Uint64(src[s:])
			h := lz4Hash(cv)
			cand = int(t.pos[h] - base)
			t.pos[h] = uint32(s) + base
			if uint(s-cand-1) < lz4MaxOffset && uint32(cv) == binary.LittleEndian.Uint32(src[cand:]) {
				break
			}
			s += 1 + (s-anchor)>>lz4SkipLog
		}
		// Extend it backwards over the pending literals.
		for s > anchor && cand > 0 && src[s-1] == src[cand-1] {
			s--
			cand--
		}
		offset := s - cand
		// And forwards, 8 bytes at a time, up to mLimit.
		end := s + lz4MinMatch
		for m := cand + lz4MinMatch; ; {
			if end+8 > mLimit {
				for end < mLimit && src[end] == src[m] {
					end++
					m++
				}
				break
			}
			if x := binary.LittleEndian.Uint64(src[end:]) ^ binary.LittleEndian.Uint64(src[m:]); x != 0 {
				end += bits.TrailingZeros64(x) >> 3
				break
			}
			end += 8
			m += 8
		}

		lits, mlen := s-anchor, end-s-lz4MinMatch
		if di+lits+lits/255+mlen/255+5 >= limit {
			return 0
		}
		di = lz4Sequence(dst, di, src, anchor, s, mlen)
		dst[di] = byte(offset)
		dst[di+1] = byte(offset >> 8)
		di += 2
		if mlen >= 15 {
			di = lz4Length(dst, di, mlen-15)
		}
		s, anchor = end, end
		if s >= sLimit {
			return lz4Last(dst, src, anchor, di, limit)
		}
		// Index a position inside the match, for the matches to come.
		t.pos[lz4Hash(binary.LittleEndian.Uint64(src[s-2:]))] = uint32(s-2) + base
	}
}

// lz4Last writes the final literals src[anchor:] and returns the block's
// length, or 0 if it would reach limit.
func lz4Last(dst, src []byte, anchor, di, limit int) int {
	lits := len(src) - anchor
	if di+lits+lits/255+2 >= limit {
		return 0
	}
	return lz4Sequence(dst, di, src, anchor, len(src), 0)
}

// lz4Sequence writes a sequence's token, literal length and the literals
// src[from:to] at dst[di:] and returns the index after them. mlen is the
// match length minus 4; the caller writes the offset and the rest of mlen.
func lz4Sequence(dst []byte, di int, src []byte, from, to, mlen int) int {
	n := to - from
	tok := byte(min(mlen, 15))
	if n < 15 {
		dst[di] = tok | byte(n)<<4
		di++
	} else {
		dst[di] = tok | 0xF0
		di = lz4Length(dst, di+1, n-15)
	}
	if n <= 16 && from+16 <= len(src) && di+16 <= len(dst) {
		// A short run: two 8-byte moves, cheaper than a copy call. The
		// bytes past n are overwritten by what follows or left in the
		// slack.
		binary.LittleEndian.PutUint64(dst[di:], binary.LittleEndian.Uint64(src[from:]))
		binary.LittleEndian.PutUint64(dst[di+8:], binary.LittleEndian.Uint64(src[from+8:]))
		return di + n
	}
	return di + copy(dst[di:], src[from:to])
}

// lz4Length writes the rest n of a length of 15 or more: bytes of 255 and
// a last byte under 255.
func lz4Length(dst []byte, di, n int) int {
	for ; n >= 255; n -= 255 {
		dst[di] = 255
		di++
	}
	dst[di] = byte(n)
	return di + 1
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
