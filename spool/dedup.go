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

// DefaultDedupWindow is a Deduper's default Window: the sequences
// remembered below each partition's highest (1 << 20, 128 KiB per spool
// ID, topic and partition; see Deduper).
const DefaultDedupWindow = 1 << 20

// Deduper drops the duplicates a spool's at-least-once replay makes, on
// the consumer's side. Feed it the records of every partition of a topic
// (one Deduper for all of them); it answers whether a record is a copy of
// one it has seen, on any partition.
//
// Per spool ID, topic and partition it keeps the highest sequence seen
// and a ring bitmap of the Window sequences ending at it (the highest and
// the Window-1 below), exact inside it. A record is new on its partition
// when its sequence is above that partition's highest (the ring advances,
// forgetting the sequences it passes), when it is inside the window and
// its bit is clear, or when it is below the window. It is a duplicate when
// its bit is set in the ring of its partition or of any other partition
// of the topic: a record written while its topic's partitions were
// unknown goes through the partitioner again at the replay and can land
// on another partition, so every record tests one bit per partition of
// the topic the Deduper has seen (O(partitions) per record).
//
// Hence a record parked at a crash and replayed after many later records
// is new, however far below its partition's highest it is, as long as it
// was not seen: a record the Deduper has not seen is never dropped. A
// copy more than Window sequences below the highest of the partition
// where the first copy was passes as new (a duplicate the consumer
// sees). A replay re-sends what was acknowledged after the spool's last
// position write (SyncInterval, 100 ms by default): the records in
// flight at the crash, far fewer than Window sequences, so its copies
// fall inside the window. The spool numbers its records across all
// topics, so the Window covers Window sequences of the spool, not Window
// records of one partition.
//
// Memory is Window/8 bytes per spool ID, topic and partition seen
// (128 KiB with the default; 4 partitions: 512 KiB), allocated at a
// partition's first record, plus the map's entries. A spool ID is never
// forgotten by itself (a producer's directory keeps its ID across
// restarts, a new directory makes a new one); Forget drops one.
//
// A consumer that restarts must give the Deduper the records from before
// its committed offset again (or keep its state) to recognise duplicates
// of them.
//
// The zero value is ready to use with DefaultDedupWindow. A Deduper is
// safe for concurrent use (one mutex: it serialises the callers).
type Deduper struct {
	// Window is how many sequences each partition remembers, ending at
	// its highest: a copy further below is taken for new. Zero means
	// DefaultDedupWindow (1 << 20 sequences, 128 KiB per spool ID, topic
	// and partition); otherwise it is rounded up to a multiple of 64.
	// Set it before the first Duplicate: a partition keeps the window it
	// started with.
	Window uint64

	mu     sync.Mutex
	topics map[dedupKey]*topicRings
}

type dedupKey struct {
	id    ID
	topic string
}

// topicRings holds the rings of one spool ID and topic, one per
// partition seen, in the order first seen.
type topicRings struct {
	parts []partRing
}

// partRing is one partition's memory: its highest sequence and the bits
// of the w = 64*len(bits) sequences (high-w, high], sequence s at bit
// s mod w.
type partRing struct {
	partition int32
	high      uint64
	bits      []uint64
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
		tr.parts = append(tr.parts, partRing{partition: partition, high: seq, bits: make([]uint64, windowWords(d.Window))})
		own = len(tr.parts) - 1
	}
	// A copy is remembered on its partition too: the ring says what was
	// seen there.
	tr.parts[own].add(seq)
	return dup, nil
}

// windowWords is the words of a ring of window w (0: the default).
func windowWords(w uint64) int {
	if w == 0 {
		w = DefaultDedupWindow
	}
	return int((w + 63) / 64)
}

// has reports whether seq is inside the window and its bit set.
func (r *partRing) has(seq uint64) bool {
	w := uint64(len(r.bits)) * 64
	if seq > r.high || r.high-seq >= w {
		return false
	}
	pos := seq % w
	return r.bits[pos/64]&(1<<(pos%64)) != 0
}

// add sets seq's bit: above the highest, the ring first advances to it,
// clearing the bits of the sequences it passes (they held the sequences
// Window below); below the window, nothing is kept.
func (r *partRing) add(seq uint64) {
	w := uint64(len(r.bits)) * 64
	if seq > r.high {
		if n := seq - r.high; n >= w {
			clear(r.bits)
		} else {
			r.clearFrom((r.high+1)%w, n)
		}
		r.high = seq
	} else if r.high-seq >= w {
		return
	}
	pos := seq % w
	r.bits[pos/64] |= 1 << (pos % 64)
}

// clearFrom clears n < w bits from position pos on, wrapping at w (a
// multiple of 64, so that a word never straddles the wrap): a word at a
// time.
func (r *partRing) clearFrom(pos, n uint64) {
	w := uint64(len(r.bits)) * 64
	for n > 0 {
		off := pos % 64
		k := min(64-off, n)
		mask := ^uint64(0)
		if k < 64 {
			mask = (1<<k - 1) << off
		}
		r.bits[pos/64] &^= mask
		pos = (pos + k) % w
		n -= k
	}
}
