package spool

import (
	"encoding/binary"
	"errors"
	"sync"
)

// HeaderKey is the name of the header a spooled record carries (unless
// the producer is told not to): the spool's ID and the record's sequence,
// as EncodeHeader writes them.
const HeaderKey = "samsa-spool"

// headerLen is the header value's size: the 16-byte ID, the 8-byte
// sequence (big-endian).
const headerLen = 16 + 8

// ErrBadHeader is returned by DecodeHeader (and Deduper.Duplicate) for a
// value that is not 24 bytes.
var ErrBadHeader = errors.New("spool: bad " + HeaderKey + " header")

// EncodeHeader returns the HeaderKey header's value for sequence seq of
// spool id.
func EncodeHeader(id ID, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, headerLen), id[:]...), seq)
}

// DecodeHeader reads a HeaderKey header's value.
func DecodeHeader(v []byte) (ID, uint64, error) {
	var id ID
	if len(v) != headerLen {
		return id, 0, ErrBadHeader
	}
	copy(id[:], v)
	return id, binary.BigEndian.Uint64(v[16:]), nil
}

// DefaultDedupWindow is a Deduper's default Window: the span of
// sequences remembered below each partition's highest (1 << 20, about
// 144 KiB per spool ID, topic and partition; see Deduper).
const DefaultDedupWindow = 1 << 20

// Deduper drops the duplicates a spool's at-least-once replay makes, on
// the consumer's side. Feed it the records of every partition of a topic
// (one Deduper for all of them); it answers whether a record is a copy of
// one it has seen, on any partition.
//
// Per spool ID, topic and partition it keeps a bitmap of the sequences
// seen, exact, in blocks of 512 consecutive sequences: the highest
// Window/512 + 1 blocks that hold a record of the partition (a ring of
// blocks; a block is 72 bytes). Blocks without a record cost nothing, so
// the sequences a crash skips (the spool reserves 2^20 sequences ahead
// and jumps to the reservation after a crash) do not push the records
// before the crash out: their copies, replayed after one or two crashes,
// are still caught. Without such gaps the blocks cover at least the
// Window sequences below the partition's highest.
//
// A record is a duplicate when its bit is set in the blocks of its
// partition or of any other partition of the topic: a record written
// while its topic's partitions were unknown goes through the partitioner
// again at the replay and can land on another partition, so every record
// is looked up in every partition of the topic the Deduper has seen
// (O(partitions × log blocks) per record). It is new otherwise: a record
// parked at a crash and replayed after many later records is new,
// however far below its partition's highest it is, as long as it was not
// seen; a record the Deduper has not seen is never dropped. Reading one
// partition after another costs nothing (each record's neighbours in
// sequence being on other partitions).
//
// A copy passes as new (a duplicate the consumer sees) only when the
// first copy's block is no longer kept: more than Window sequences
// below its partition's highest, gaps not counted. A replay re-sends
// what was acknowledged after the spool's last position write
// (SyncInterval, 100 ms by default): the records in flight at the crash,
// far fewer. The spool numbers its records across all topics, so the
// window spans Window sequences of the spool, not Window records of one
// partition.
//
// A record that falls between kept blocks in a block of its own (a
// parked record replayed into a gap) shifts the blocks above it: O(blocks)
// copies, about 150 KB with the default Window, for such a record.
//
// Memory is about (Window/512 + 1) × 72 bytes (Window/8 + Window/64) per
// spool ID, topic and partition seen: about 144 KiB with the default
// (4 partitions: 576 KiB), allocated at a partition's first record, plus
// the map's entries. A spool ID is never forgotten by itself (a
// producer's directory keeps its ID across restarts, a new directory
// makes a new one); Forget drops one.
//
// A consumer that restarts must give the Deduper the records from before
// its committed offset again (or keep its state) to recognise duplicates
// of them.
//
// The zero value is ready to use with DefaultDedupWindow. A Deduper is
// safe for concurrent use (one mutex: it serialises the callers).
type Deduper struct {
	// Window is the span of sequences each partition remembers below its
	// highest, gaps without its records not counted: a copy further below
	// is taken for new. Zero means DefaultDedupWindow (1 << 20 sequences,
	// about 144 KiB per spool ID, topic and partition); otherwise it is
	// rounded up to a multiple of 512. Set it before the first Duplicate:
	// a partition keeps the window it started with.
	Window uint64

	mu     sync.Mutex
	topics map[dedupKey]*topicRings
}

type dedupKey struct {
	id    ID
	topic string
}

// topicRings holds the blocks of one spool ID and topic, one ring per
// partition seen, in the order first seen.
type topicRings struct {
	parts []partRing
}

// dedupBlockBits is the sequences of a block.
const dedupBlockBits = 512

// seqBlock is the bits of sequences idx*512 to idx*512+511.
type seqBlock struct {
	idx  uint64
	bits [dedupBlockBits / 64]uint64
}

// partRing is one partition's memory: a ring of blocks (len(ring) of
// them at most), n of them in use from head on, sorted by idx.
type partRing struct {
	partition int32
	ring      []seqBlock
	head, n   int
}

// Forget drops what the Deduper remembers of spool id, on every topic and
// partition, and frees its memory: a copy of one of its records is taken
// for new afterwards. Use it for a spool that will send nothing again
// (its directory deleted). Forget costs a pass over the spool IDs and
// topics remembered.
func (d *Deduper) Forget(id ID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.topics {
		if k.id == id {
			delete(d.topics, k)
		}
	}
}

// Duplicate reports whether the record in topic/partition whose HeaderKey
// value is header is a copy of one already seen (on any partition of the
// topic, within the Window), and remembers it. A record without the
// header (header nil) is never a duplicate; a malformed one returns
// ErrBadHeader (and is not remembered).
func (d *Deduper) Duplicate(topic string, partition int32, header []byte) (bool, error) {
	if header == nil {
		return false, nil
	}
	id, seq, err := DecodeHeader(header)
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.topics == nil {
		d.topics = make(map[dedupKey]*topicRings)
	}
	k := dedupKey{id: id, topic: topic}
	tr := d.topics[k]
	if tr == nil {
		tr = &topicRings{}
		d.topics[k] = tr
	}
	dup := false
	own := -1
	for i := range tr.parts {
		r := &tr.parts[i]
		if r.partition == partition {
			own = i
		}
		if !dup && r.has(seq) {
			dup = true
		}
	}
	if own < 0 {
		tr.parts = append(tr.parts, partRing{partition: partition, ring: make([]seqBlock, dedupBlocks(d.Window))})
		own = len(tr.parts) - 1
	}
	// A copy is remembered on its partition too: the blocks say what was
	// seen there.
	tr.parts[own].add(seq)
	return dup, nil
}

// dedupBlocks is the blocks of a ring for window w (0: the default).
func dedupBlocks(w uint64) int {
	if w == 0 {
		w = DefaultDedupWindow
	}
	return int((w+dedupBlockBits-1)/dedupBlockBits) + 1
}

// at is the i-th block in use, from the lowest.
func (r *partRing) at(i int) *seqBlock {
	return &r.ring[(r.head+i)%len(r.ring)]
}

// search is the first block in use whose idx is at least idx (n if none).
func (r *partRing) search(idx uint64) int {
	lo, hi := 0, r.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.at(m).idx >= idx {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// has reports whether seq's bit is set in a kept block.
func (r *partRing) has(seq uint64) bool {
	idx, bit := seq/dedupBlockBits, seq%dedupBlockBits
	if r.n == 0 {
		return false
	}
	if top := r.at(r.n - 1); idx >= top.idx { // the common case: in the highest block, or above
		return idx == top.idx && top.bits[bit/64]&(1<<(bit%64)) != 0
	}
	i := r.search(idx)
	if i == r.n {
		return false
	}
	b := r.at(i)
	return b.idx == idx && b.bits[bit/64]&(1<<(bit%64)) != 0
}

// add sets seq's bit, adding its block if it is not kept: above the
// highest (the common case) or between kept blocks, the lowest block
// forgotten when the ring is full; below every kept block with the ring
// full, nothing is kept (that block would be the one forgotten).
func (r *partRing) add(seq uint64) {
	idx, bit := seq/dedupBlockBits, seq%dedupBlockBits
	var b *seqBlock
	switch i := 0; {
	case r.n > 0 && r.at(r.n-1).idx == idx: // the common case
		b = r.at(r.n - 1)
	case r.n == 0 || idx > r.at(r.n-1).idx:
		if r.n == len(r.ring) {
			r.head = (r.head + 1) % len(r.ring)
			r.n--
		}
		r.n++
		b = r.at(r.n - 1)
		*b = seqBlock{idx: idx}
	default:
		i = r.search(idx)
		if r.at(i).idx == idx {
			b = r.at(i)
			break
		}
		if r.n == len(r.ring) {
			if i == 0 {
				return
			}
			r.head = (r.head + 1) % len(r.ring)
			r.n--
			i--
		}
		for j := r.n; j > i; j-- {
			*r.at(j) = *r.at(j - 1)
		}
		r.n++
		b = r.at(i)
		*b = seqBlock{idx: idx}
	}
	b.bits[bit/64] |= 1 << (bit % 64)
}
