package compression

import (
	"encoding/binary"
	"math/bits"
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
// The output is the reference's byte for byte, hence the Java client's.
// pierrec/lz4's fast compressor hashes 6 bytes and skips faster: it misses
// the 4- and 5-byte matches of log lines, CSV, digits or small alphabets
// and stored 6 to 27 % more than the Java client on them (it found more
// long matches on JSON-like text: up to 13 % fewer bytes, for 10 to 20 %
// less CPU; see BenchmarkCompress).
type lz4Fast struct {
	table [1 << lz4HashLog]uint16 // 16 KiB
}

const (
	lz4HashLog     = 13
	lz4MinMatch    = 4
	lz4MFLimit     = 12 // a match starts at least 12 bytes before the block's end
	lz4LastLits    = 5  // and ends at least 5 bytes before it
	lz4SkipTrigger = 6  // probes without a match before the step grows
)

func lz4Hash(seq uint32) uint32 { return (seq * 2654435761) >> (32 - lz4HashLog) }

func lz4Load(src []byte, i int) uint32 { return binary.LittleEndian.Uint32(src[i:]) }

// compressBlock compresses src, at most lz4Block bytes, into dst as one
// LZ4 block and returns its length, or 0 if it does not fit in dst (the
// caller then stores the block as is).
func (e *lz4Fast) compressBlock(dst, src []byte) int {
	if len(src) > lz4Block {
		panic("compression: lz4 block larger than 64 KiB")
	}
	clear(e.table[:])
	t := &e.table
	var d, anchor int
	if len(src) > lz4MFLimit {
		mfLimitPlusOne := len(src) - lz4MFLimit + 1
		matchLimit := len(src) - lz4LastLits
		t[lz4Hash(lz4Load(src, 0))] = 0
		ip := 1
		forwardH := lz4Hash(lz4Load(src, ip))
	search:
		for {
			// Find a match, probing further apart the longer none is
			// found.
			var match int
			forward, step, probes := ip, 1, 1<<lz4SkipTrigger
			for {
				h := forwardH
				ip = forward
				forward += step
				step = probes >> lz4SkipTrigger
				probes++
				if forward > mfLimitPlusOne {
					break search
				}
				match = int(t[h])
				forwardH = lz4Hash(lz4Load(src, forward))
				t[h] = uint16(ip)
				if lz4Load(src, match) == lz4Load(src, ip) {
					break
				}
			}
			for ip > anchor && match > 0 && src[ip-1] == src[match-1] {
				ip--
				match--
			}
			lit := ip - anchor
			// Token, literal length, literals, offset.
			if d+1+lit/255+1+lit+2 > len(dst) {
				return 0
			}
			tok := d
			d++
			if lit >= 15 {
				dst[tok] = 15 << 4
				d = lz4PutLen(dst, d, lit-15)
			} else {
				dst[tok] = byte(lit << 4)
			}
			d += copy(dst[d:], src[anchor:ip])
			for {
				binary.LittleEndian.PutUint16(dst[d:], uint16(ip-match))
				d += 2
				n := lz4Count(src, ip+lz4MinMatch, match+lz4MinMatch, matchLimit)
				ip += lz4MinMatch + n
				if d+n/255+1 > len(dst) {
					return 0
				}
				if n >= 15 {
					dst[tok] |= 15
					d = lz4PutLen(dst, d, n-15)
				} else {
					dst[tok] |= byte(n)
				}
				anchor = ip
				if ip >= mfLimitPlusOne {
					break search
				}
				t[lz4Hash(lz4Load(src, ip-2))] = uint16(ip - 2)
				h := lz4Hash(lz4Load(src, ip))
				match = int(t[h])
				t[h] = uint16(ip)
				if lz4Load(src, match) != lz4Load(src, ip) {
					break
				}
				// A match right here: a sequence without literals.
				if d+1+2 > len(dst) {
					return 0
				}
				tok = d
				dst[tok] = 0
				d++
			}
			ip++
			forwardH = lz4Hash(lz4Load(src, ip))
		}
	}
	lit := len(src) - anchor
	if d+1+lit/255+1+lit > len(dst) {
		return 0
	}
	if lit >= 15 {
		dst[d] = 15 << 4
		d = lz4PutLen(dst, d+1, lit-15)
	} else {
		dst[d] = byte(lit << 4)
		d++
	}
	return d + copy(dst[d:], src[anchor:])
}

// lz4PutLen writes the extension bytes of a literal or match length of
// n+15 at dst[d:] and returns the position after them.
func lz4PutLen(dst []byte, d, n int) int {
	for ; n >= 255; n -= 255 {
		dst[d] = 255
		d++
	}
	dst[d] = byte(n)
	return d + 1
}

// lz4Count returns how many bytes from src[a:] equal those from src[b:],
// b < a, stopping at limit.
func lz4Count(src []byte, a, b, limit int) int {
	start := a
	for a+8 <= limit {
		if x := binary.LittleEndian.Uint64(src[a:]) ^ binary.LittleEndian.Uint64(src[b:]); x != 0 {
			return a - start + bits.TrailingZeros64(x)>>3
		}
		a += 8
		b += 8
	}
	for a < limit && src[a] == src[b] {
		a++
		b++
	}
	return a - start
}
