package spool

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/bits"
)

// ackSet is the acknowledged sequences: every sequence below below, and a
// bitmap of those acknowledged above it (acks arrive out of order across
// partitions). The bitmap covers [base, base+64*len(words)), base a
// multiple of 64 not above below; it holds one bit per sequence between
// the contiguous position and the newest acknowledged one, so 1 GiB of
// 1 KiB records costs at most 128 KiB.
type ackSet struct {
	below uint64
	base  uint64
	words []uint64
	// above counts the bits set.
	above int
}

func newAckSet(below uint64) ackSet {
	return ackSet{below: below, base: below &^ 63}
}

func (a *ackSet) has(seq uint64) bool {
	if seq < a.below {
		return true
	}
	i := (seq - a.base) / 64
	return i < uint64(len(a.words)) && a.words[i]&(1<<((seq-a.base)%64)) != 0
}

// add marks seq acknowledged and reports whether it was not already.
func (a *ackSet) add(seq uint64) bool {
	if a.has(seq) {
		return false
	}
	i := (seq - a.base) / 64
	for uint64(len(a.words)) <= i {
		a.words = append(a.words, 0)
	}
	a.words[i] |= 1 << ((seq - a.base) % 64)
	a.above++
	a.advance()
	return true
}

// addRange marks [lo, hi) acknowledged: the sequences Open finds absent
// from the log (given out but lost to damage or a crash, or never used
// after a jump), which no ack will ever come for.
func (a *ackSet) addRange(lo, hi uint64) {
	lo = max(lo, a.below)
	if lo >= hi {
		return
	}
	last := (hi - 1 - a.base) / 64
	for uint64(len(a.words)) <= last {
		a.words = append(a.words, 0)
	}
	for i := (lo - a.base) / 64; i <= last; i++ {
		wlo, whi := a.base+i*64, a.base+i*64+64
		from, to := max(lo, wlo)-wlo, min(hi, whi)-wlo
		mask := ^uint64(0)
		if to < 64 {
			mask = 1<<to - 1
		}
		mask &^= 1<<from - 1
		a.above += bits.OnesCount64(mask &^ a.words[i])
		a.words[i] |= mask
	}
	a.advance()
}

// advance moves below over the acknowledged sequences at it, dropping the
// words left behind.
func (a *ackSet) advance() {
	for len(a.words) > 0 {
		off := a.below - a.base
		w := a.words[0] >> off
		run := uint64(bits.TrailingZeros64(^w))
		if off+run > 64 {
			run = 64 - off
		}
		a.below += run
		a.above -= int(run)
		if a.below-a.base < 64 {
			return
		}
		a.words = a.words[1:]
		a.base += 64
	}
}

// ranges returns the acknowledged runs above below as [lo, hi) pairs.
func (a *ackSet) ranges() [][2]uint64 {
	var out [][2]uint64
	var lo uint64
	in := false
	for i, w := range a.words {
		for b := range 64 {
			seq := a.base + uint64(i*64+b)
			if seq < a.below {
				continue
			}
			set := w&(1<<b) != 0
			if set && !in {
				lo, in = seq, true
			} else if !set && in {
				out = append(out, [2]uint64{lo, seq})
				in = false
			}
		}
	}
	if in {
		out = append(out, [2]uint64{lo, a.base + uint64(len(a.words)*64)})
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
// position file holds. limit bounds the sequences its runs may name (a
// crafted file must not make it loop or allocate without bound).
func decodePosition(b []byte, limit uint64) (ackSet, uint64, error) {
	if len(b) < 4+1+8+8+1+4 || string(b[:4]) != positionMagic || b[4] != 1 {
		return ackSet{}, 0, errBadPosition
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return ackSet{}, 0, errBadPosition
	}
	below := binary.BigEndian.Uint64(body[5:])
	reserved := binary.BigEndian.Uint64(body[13:])
	limit = max(limit, below)
	a := newAckSet(below)
	d := decoder{b: body[21:]}
	n := d.uvarint()
	prev := below
	for range n {
		gap, l := d.uvarint(), d.uvarint()
		if d.err || gap > limit || l > limit || prev+gap+l > limit || prev+gap < prev {
			return ackSet{}, 0, errBadPosition
		}
		for s := prev + gap; s < prev+gap+l; s++ {
			a.add(s)
		}
		prev += gap + l
	}
	if d.err || len(d.b) != 0 {
		return ackSet{}, 0, errBadPosition
	}
	return a, reserved, nil
}
