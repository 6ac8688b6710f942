package compression

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// lz4Fast is LZ4's fast block compressor, written after the algorithm of
// the reference C implementation's LZ4_compress_fast at acceleration 1,
// which the Java client runs (lz4-java's fastCompressor, through JNI) at
// Kafka's default level. For a block of up to 64 KiB:
//
//   - a table of 2^13 16-bit positions, indexed by a multiplicative hash
//     of the 4 bytes at each position, cleared for every block;
//   - a search that probes every position, then, after every 64 probes
//     without a match, steps one byte further;
//   - a match extended backwards over the pending literals and forwards
//     up to 5 bytes before the block's end;
//   - after each match, the position two bytes back put in the table and
//     the current one tried at once for the next match.
//
// The output is the reference's byte for byte, hence the Java client's
// and the lz4 CLI's (TestLZ4AsTheReferenceCLIWritesIt). pierrec/lz4's fast
// compressor hashes 6 bytes and skips faster: it misses the 4- and 5-byte
// matches of log lines, CSV, digits or small alphabets and stored 6 to
// 27 % more than the Java client on them (it found more long matches on
// JSON-like text, up to 13 % fewer bytes, but took 12 to 46 % more CPU
// than this compressor on BenchmarkLZ4Block's blocks).
//
// Speed: on BenchmarkLZ4Block's 64 KiB blocks of JSON-like records this
// compressor takes 1.06 to 1.07 times the CPU time of the reference C
// implementation (liblz4 1.9.4 as Debian builds it,
// LZ4_compress_fast_extState on the same blocks), about 970 MB/s on
// "json" and 510 MB/s on "w2" on the machine it was measured on. It gets
// there by reading and writing without bounds checks (see compressBlock),
// copying literals 8 bytes at a time, comparing 8 bytes at a time, and
// searching in a function of its own, whose loop keeps its variables in
// registers. What remains is the algorithm's own chains: a hash, a table
// load, a load at the match and an unpredictable branch per probe and per
// sequence, as in C.
type lz4Fast struct {
	table [1 << lz4HashLog]uint16 // 16 KiB
}

const (
	lz4HashLog     = 13
	lz4HashMask    = 1<<lz4HashLog - 1
	lz4MinMatch    = 4
	lz4MFLimit     = 12 // a match starts at least 12 bytes before the block's end
	lz4LastLits    = 5  // and ends at least 5 bytes before it
	lz4SkipTrigger = 6  // probes without a match before the step grows
)

// lz4BlockBound is the most an LZ4 block of n input bytes takes
// (LZ4_compressBound): all literals, with their length's extension bytes.
func lz4BlockBound(n int) int { return n + n/255 + 16 }

func lz4Hash(seq uint32) uint32 { return (seq * 2654435761) >> (32 - lz4HashLog) }

// compressBlock compresses src, at most lz4Block bytes, into dst as one
// LZ4 block and returns its length, which can exceed len(src) if src does
// not compress. dst must have room for lz4BlockBound(len(src)) bytes, the
// most a block takes; given less, compressBlock returns 0.
//
// It reads and writes through unsafe pointers, without bounds checks
// (lz4Ld32 and the other accessors at the end of this file):
// every position it reads is below len(src) (a match starts at most 12
// bytes and ends at most 5 bytes before the end, and an 8-byte load
// starts at most 8 bytes before a limit that is itself within src), and
// it writes below lz4BlockBound(len(src)) (the literals are copied 8
// bytes at a time, at most 7 bytes past their end, where an offset, the
// last literals' token and at least 5 last literals follow).
// FuzzLZ4FastBlock checks it against lz4RefBlock.
func (e *lz4Fast) compressBlock(dst, src []byte) int {
	if len(src) > lz4Block {
		panic("compression: lz4 block larger than 64 KiB")
	}
	if len(dst) < lz4BlockBound(len(src)) {
		return 0
	}
	sp := unsafe.Pointer(unsafe.SliceData(src))
	dp := unsafe.Pointer(unsafe.SliceData(dst))
	var d, anchor int
	if len(src) > lz4MFLimit {
		clear(e.table[:])
		last := len(src) - lz4MFLimit + 1 // a match starts before, ends 6 bytes after
		e.table[lz4Hash(lz4Ld32(sp, 0))&lz4HashMask] = 0
		ip := 1
		for {
			var match int
			ip, match = e.find(sp, ip, last)
			if ip < 0 {
				break
			}
			for ip > anchor && match > 0 && lz4Ld8(sp, ip-1) == lz4Ld8(sp, match-1) {
				ip--
				match--
			}
			// Token, literal length, literals.
			lit := ip - anchor
			tok := d
			d++
			var token byte
			if lit >= 15 {
				token = 15 << 4
				d = lz4PutLen(dp, d, lit-15)
			} else {
				token = byte(lit << 4)
			}
			for i := 0; ; {
				lz4St64(dp, d+i, lz4Ld64(sp, anchor+i))
				if i += 8; i >= lit {
					break
				}
			}
			d += lit
			for {
				// Offset, match length.
				lz4St16(dp, d, uint16(ip-match))
				d += 2
				var n int
				if a, b := ip+lz4MinMatch, match+lz4MinMatch; a < last-1 {
					if x := lz4Ld64(sp, a) ^ lz4Ld64(sp, b); x != 0 {
						n = bits.TrailingZeros64(x) >> 3
					} else {
						n = 8 + lz4Count(sp, a+8, b+8, last+6)
					}
				} else {
					n = lz4Count(sp, a, b, last+6)
				}
				ip += lz4MinMatch + n
				if n >= 15 {
					lz4St8(dp, tok, token|15)
					d = lz4PutLen(dp, d, n-15)
				} else {
					lz4St8(dp, tok, token|byte(n))
				}
				anchor = ip
				if ip >= last {
					break
				}
				e.table[lz4Hash(lz4Ld32(sp, ip-2))&lz4HashMask] = uint16(ip - 2)
				h := lz4Hash(lz4Ld32(sp, ip)) & lz4HashMask
				match = int(e.table[h])
				e.table[h] = uint16(ip)
				if lz4Ld32(sp, match) != lz4Ld32(sp, ip) {
					break
				}
				// A match right here: a sequence without literals.
				tok, token = d, 0
				d++
			}
			if ip >= last {
				break
			}
			ip++
		}
	}
	lit := len(src) - anchor
	if lit >= 15 {
		lz4St8(dp, d, 15<<4)
		d = lz4PutLen(dp, d+1, lit-15)
	} else {
		lz4St8(dp, d, byte(lit<<4))
		d++
	}
	return d + copy(dst[d:], src[anchor:])
}

// find probes the positions from ip on for a match, each put in the
// table, further apart the longer none is found, and returns the first
// found and the earlier position it matches, or -1 when the next probe
// would pass last. It is a function of its own so that the compiler keeps
// its loop's few variables in registers.
//
//go:noinline
func (e *lz4Fast) find(sp unsafe.Pointer, ip, last int) (int, int) {
	t := &e.table
	seq := lz4Ld32(sp, ip)
	step, probes := 1, 1<<lz4SkipTrigger
	for {
		next := ip + step
		if next > last {
			return -1, 0
		}
		step = probes >> lz4SkipTrigger
		probes++
		h := lz4Hash(seq) & lz4HashMask
		nextSeq := lz4Ld32(sp, next)
		match := int(t[h])
		t[h] = uint16(ip)
		if lz4Ld32(sp, match) == seq {
			return ip, match
		}
		ip, seq = next, nextSeq
	}
}

// lz4PutLen writes the extension bytes of a literal or match length of
// n+15 at d and returns the position after them.
func lz4PutLen(dp unsafe.Pointer, d, n int) int {
	for ; n >= 255; n -= 255 {
		lz4St8(dp, d, 255)
		d++
	}
	lz4St8(dp, d, byte(n))
	return d + 1
}

// lz4Count returns how many bytes from a equal those from b, b < a,
// stopping at limit.
func lz4Count(sp unsafe.Pointer, a, b, limit int) int {
	start := a
	for a < limit-7 {
		if x := lz4Ld64(sp, a) ^ lz4Ld64(sp, b); x != 0 {
			return a - start + bits.TrailingZeros64(x)>>3
		}
		a += 8
		b += 8
	}
	for a < limit && lz4Ld8(sp, a) == lz4Ld8(sp, b) {
		a++
		b++
	}
	return a - start
}

// Loads and stores at p+i, little-endian on every architecture, through
// byte arrays: the compiler makes each one a single unaligned load or
// store where the architecture has them, and byte accesses elsewhere.

func lz4Ld8(p unsafe.Pointer, i int) byte { return *(*byte)(unsafe.Add(p, i)) }

func lz4Ld32(p unsafe.Pointer, i int) uint32 {
	return binary.LittleEndian.Uint32((*[4]byte)(unsafe.Add(p, i))[:])
}

func lz4Ld64(p unsafe.Pointer, i int) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(p, i))[:])
}

func lz4St8(p unsafe.Pointer, i int, v byte) { *(*byte)(unsafe.Add(p, i)) = v }

func lz4St16(p unsafe.Pointer, i int, v uint16) {
	binary.LittleEndian.PutUint16((*[2]byte)(unsafe.Add(p, i))[:], v)
}

func lz4St64(p unsafe.Pointer, i int, v uint64) {
	binary.LittleEndian.PutUint64((*[8]byte)(unsafe.Add(p, i))[:], v)
}
