package spool

import (
	"cmp"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/bits"
	"slices"
)

// ackSet is the acknowledged sequences: every sequence below below; the
// bits of those acknowledged one by one above it (acks arrive out of
// order across partitions), 64 to a word, keyed by seq/64; and skips,
// ranges acknowledged in bulk (the sequences Open finds absent from the
// log: a jump after a crash, records lost to damage). A word is dropped
// once below passes it, so the memory is a bit (plus the map's overhead)
// per sequence between the contiguous position and the newest
// acknowledged one, and a pair per skip: a 1 GiB backlog of 1 KiB records
// costs well under 1 MiB.
type ackSet struct {
	below uint64
	words map[uint64]uint64
	skips [][2]uint64 // sorted, disjoint, each above below
}

// skipMin is the shortest range addRange keeps as a skip.
const skipMin = 128

func newAckSet(below uint64) ackSet {
	return ackSet{below: below, words: make(map[uint64]uint64)}
}

func (a *ackSet) has(seq uint64) bool {
	if seq < a.below || a.words[seq/64]&(1<<(seq%64)) != 0 {
		return true
	}
	// The last skip starting at or below seq.
	i, _ := slices.BinarySearchFunc(a.skips, seq+1, func(r [2]uint64, q uint64) int { return cmp.Compare(r[0], q) })
	return i > 0 && seq < a.skips[i-1][1]
}

// add marks seq acknowledged and reports whether it was not already.
func (a *ackSet) add(seq uint64) bool {
	if a.has(seq) {
		return false
	}
	a.words[seq/64] |= 1 << (seq % 64)
	a.advance()
	return true
}

// addRange marks [lo, hi) acknowledged.
func (a *ackSet) addRange(lo, hi uint64) {
	lo = max(lo, a.below)
	if lo >= hi {
		return
	}
	if hi-lo < skipMin {
		for q := lo; q < hi; q++ {
			if !a.has(q) {
				a.words[q/64] |= 1 << (q % 64)
			}
		}
		a.advance()
		return
	}
	// Clear the bits the skip covers, so that counts stay exact.
	for k, w := range a.words {
		wlo, whi := k*64, k*64+64
		if whi <= lo || wlo >= hi {
			continue
		}
		from, to := max(lo, wlo)-wlo, min(hi, whi)-wlo
		mask := ^uint64(0)
		if to < 64 {
			mask = 1<<to - 1
		}
		mask &^= 1<<from - 1
		if w &^= mask; w == 0 {
			delete(a.words, k)
		} else {
			a.words[k] = w
		}
	}
	// Merge with the skips it touches.
	var out [][2]uint64
	for _, r := range a.skips {
		if r[1] < lo || r[0] > hi {
			out = append(out, r)
			continue
		}
		lo, hi = min(lo, r[0]), max(hi, r[1])
	}
	out = append(out, [2]uint64{lo, hi})
	slices.SortFunc(out, func(x, y [2]uint64) int { return cmp.Compare(x[0], y[0]) })
	a.skips = out
	a.advance()
}

// advance moves below over the acknowledged sequences at it, dropping the
// words and skips left behind.
func (a *ackSet) advance() {
	for {
		if len(a.skips) > 0 && a.skips[0][0] <= a.below {
			old := a.below
			a.below = max(a.below, a.skips[0][1])
			a.skips = a.skips[1:]
			if a.below/64 != old/64 {
				delete(a.words, old/64)
			}
			continue
		}
		k := a.below / 64
		w, ok := a.words[k]
		if !ok {
			return
		}
		off := a.below % 64
		run := uint64(bits.TrailingZeros64(^(w >> off)))
		if off+run > 64 {
			run = 64 - off
		}
		if run == 0 {
			return
		}
		a.below += run
		if a.below/64 != k {
			delete(a.words, k)
		}
	}
}

// count is the number of sequences acknowledged above below.
func (a *ackSet) count() int {
	n := 0
	for k, w := range a.words {
		if k == a.below/64 {
			w &^= 1<<(a.below%64) - 1
		}
		n += bits.OnesCount64(w)
	}
	for _, r := range a.skips {
		n += int(r[1] - r[0])
	}
	return n
}

// snapshot copies what the position file holds: the skips, and the
// words above below (the bits below it cleared), unsorted. Its caller
// holds the spool's mu; the encoding (encodePosition) is done without it.
func (a *ackSet) snapshot() (skips, words [][2]uint64) {
	skips = slices.Clone(a.skips)
	words = make([][2]uint64, 0, len(a.words))
	for k, w := range a.words {
		if k < a.below/64 {
			continue
		}
		if k == a.below/64 {
			w &^= 1<<(a.below%64) - 1
		}
		if w != 0 {
			words = append(words, [2]uint64{k, w})
		}
	}
	return skips, words
}

// The position file:
//
//	magic    "SPOS"
//	version  uint8 2
//	below    uint64  every sequence below it is acknowledged
//	reserved uint64  no sequence at or above it has been given out
//	nskips   uvarint ranges acknowledged in bulk above below
//	skips    nskips × (uvarint gap from the previous skip's end, uvarint length)
//	nwords   uvarint words of the acknowledged bits above below
//	words    nwords × (uvarint gap from the previous word's index + 1, uint64 bits)
//	crc      uint32  CRC32C of everything before it
//
// The bits are written as they are kept (a word of 64 sequences, bit i
// for sequence 64×index+i), so the file is about 9 bytes per 64
// sequences between below and the newest ack, whatever the pattern of
// the acks (runs would cost a few bytes per unacknowledged record when
// acks alternate).
const (
	positionMagic   = "SPOS"
	positionVersion = 2
)

var errBadPosition = errors.New("spool: position file damaged")

// encodePosition encodes a snapshot (words in any order; it sorts them).
func encodePosition(below, reserved uint64, skips, words [][2]uint64) []byte {
	slices.SortFunc(words, func(x, y [2]uint64) int { return cmp.Compare(x[0], y[0]) })
	b := make([]byte, 0, 4+1+8+8+2*binary.MaxVarintLen64+len(skips)*6+len(words)*10+4)
	b = append(b, positionMagic...)
	b = append(b, positionVersion)
	b = binary.BigEndian.AppendUint64(b, below)
	b = binary.BigEndian.AppendUint64(b, reserved)
	b = binary.AppendUvarint(b, uint64(len(skips)))
	prev := below
	for _, r := range skips {
		b = binary.AppendUvarint(b, r[0]-prev)
		b = binary.AppendUvarint(b, r[1]-r[0])
		prev = r[1]
	}
	b = binary.AppendUvarint(b, uint64(len(words)))
	next := below / 64
	for _, w := range words {
		b = binary.AppendUvarint(b, w[0]-next)
		b = binary.BigEndian.AppendUint64(b, w[1])
		next = w[0] + 1
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodePosition returns the acknowledged set and the reserved sequence a
// position file holds. maxRuns bounds its skips and its words: each holds
// an acknowledged sequence above below, in the log or next to a record
// of it, so a file naming more than the log can hold records is damaged
// (a crafted file must not make Open loop or allocate without bound).
func decodePosition(b []byte, maxRuns uint64) (ackSet, uint64, error) {
	if len(b) < 4+1+8+8+1+1+4 || string(b[:4]) != positionMagic || b[4] != positionVersion {
		return ackSet{}, 0, errBadPosition
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return ackSet{}, 0, errBadPosition
	}
	below := binary.BigEndian.Uint64(body[5:])
	reserved := binary.BigEndian.Uint64(body[13:])
	if below > seqLimit || reserved > seqLimit {
		return ackSet{}, 0, errBadPosition
	}
	a := newAckSet(below)
	d := decoder{b: body[21:]}
	n := d.uvarint()
	if n > maxRuns {
		return ackSet{}, 0, errBadPosition
	}
	prev := below
	for range n {
		gap, l := d.uvarint(), d.uvarint()
		lo := prev + gap
		hi := lo + l
		if d.err || lo < prev || hi < lo || l == 0 || hi > seqLimit {
			return ackSet{}, 0, errBadPosition
		}
		a.skips = append(a.skips, [2]uint64{lo, hi})
		prev = hi
	}
	n = d.uvarint()
	if n > maxRuns {
		return ackSet{}, 0, errBadPosition
	}
	next := below / 64
	for range n {
		gap := d.uvarint()
		wb := d.take(8)
		k := next + gap
		if d.err || k < next || k > seqLimit/64 {
			return ackSet{}, 0, errBadPosition
		}
		w := binary.BigEndian.Uint64(wb)
		if w == 0 {
			return ackSet{}, 0, errBadPosition
		}
		a.words[k] = w
		next = k + 1
	}
	if d.err || len(d.b) != 0 {
		return ackSet{}, 0, errBadPosition
	}
	a.advance()
	return a, reserved, nil
}
