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

// ranges returns the acknowledged runs above below as sorted, disjoint,
// non-adjacent [lo, hi) pairs.
func (a *ackSet) ranges() [][2]uint64 {
	keys := make([]uint64, 0, len(a.words))
	for k := range a.words {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	runs := slices.Clone(a.skips)
	for _, k := range keys {
		w := a.words[k]
		for b := uint64(0); b < 64; {
			seq := k*64 + b
			if w&(1<<b) == 0 || seq < a.below {
				b++
				continue
			}
			e := b
			for e < 64 && w&(1<<e) != 0 {
				e++
			}
			runs = append(runs, [2]uint64{seq, k*64 + e})
			b = e
		}
	}
	slices.SortFunc(runs, func(x, y [2]uint64) int { return cmp.Compare(x[0], y[0]) })
	var out [][2]uint64
	for _, r := range runs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// The position file:
//
//	magic    "SPOS"
//	version  uint8 1
//	below    uint64  every sequence below it is acknowledged
//	reserved uint64  no sequence at or above it has been given out
//	count    uvarint runs acknowledged above below
//	runs     count × (uvarint gap from the previous run's end, uvarint length)
//	crc      uint32  CRC32C of everything before it
const positionMagic = "SPOS"

var errBadPosition = errors.New("spool: position file damaged")

func encodePosition(below, reserved uint64, runs [][2]uint64) []byte {
	b := append([]byte(positionMagic), 1)
	b = binary.BigEndian.AppendUint64(b, below)
	b = binary.BigEndian.AppendUint64(b, reserved)
	b = binary.AppendUvarint(b, uint64(len(runs)))
	prev := below
	for _, r := range runs {
		b = binary.AppendUvarint(b, r[0]-prev)
		b = binary.AppendUvarint(b, r[1]-r[0])
		prev = r[1]
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodePosition returns the acknowledged set and the reserved sequence a
// position file holds. maxRuns bounds its runs: each run is followed by
// an unacknowledged record, which must be in the log, so a file naming
// more runs than the log can hold records is damaged (a crafted file must
// not make Open loop or allocate without bound).
func decodePosition(b []byte, maxRuns uint64) (ackSet, uint64, error) {
	if len(b) < 4+1+8+8+1+4 || string(b[:4]) != positionMagic || b[4] != 1 {
		return ackSet{}, 0, errBadPosition
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return ackSet{}, 0, errBadPosition
	}
	below := binary.BigEndian.Uint64(body[5:])
	reserved := binary.BigEndian.Uint64(body[13:])
	a := newAckSet(below)
	d := decoder{b: body[21:]}
	n := d.uvarint()
	if n > maxRuns {
		return ackSet{}, 0, errBadPosition
	}
	// The runs are sorted and disjoint: short ones become bits, long ones
	// skips, directly (addRange would look through the map for each).
	prev := below
	for range n {
		gap, l := d.uvarint(), d.uvarint()
		lo := prev + gap
		hi := lo + l
		if d.err || lo < prev || hi < lo || l == 0 {
			return ackSet{}, 0, errBadPosition
		}
		if l < skipMin {
			for q := lo; q < hi; q++ {
				a.words[q/64] |= 1 << (q % 64)
			}
		} else {
			a.skips = append(a.skips, [2]uint64{lo, hi})
		}
		prev = hi
	}
	a.advance()
	if d.err || len(d.b) != 0 {
		return ackSet{}, 0, errBadPosition
	}
	return a, reserved, nil
}
