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

// DefaultDedupWindow is a Deduper's default window, in sequences (8 KiB
// of bitmap per spool and partition). Sequences are the spool's, shared
// by all partitions: a partition's records are as many sequences apart as
// records of other partitions were appended between them.
const DefaultDedupWindow = 1 << 16

// Deduper drops the duplicates a spool's at-least-once replay makes, on
// the consumer's side. Feed it every record of a partition in offset
// order; it answers whether the record is a copy of one it has seen.
//
// Per spool ID and partition it keeps the highest sequence seen and a
// window of the sequences below it (a bitmap of Window bits). A record
// is new when its sequence is above the highest, or inside the window
// and not seen; it is a duplicate when seen, or below the window.
//
// Why this is right: the spool gives sequences in Append order across all
// partitions, so a partition's sequences grow with gaps (other
// partitions' records), and a consumer cannot wait for a gap to fill.
// With idempotence (samsa's default), a partition's records reach the log
// in sequence order, and a replay after a crash re-sends, in order, a
// range starting at or below the first record whose delivery was unknown:
// its records at or below the highest already seen are copies, those above
// are new. The window only matters without idempotence, where a retry can
// put a record after a later one: a late record within Window sequences of
// the highest is still recognised as new; one later than that is taken
// for a duplicate (dropped). A consumer that restarts must give the
// Deduper the records from before its committed offset again (or keep its
// state) to recognise duplicates of them.
//
// A replayed record can also land on another partition than its first
// copy (a record written while its topic's partitions were unknown goes
// through the partitioner again at the replay). Sequences are unique per
// spool ID, so the Deduper also keeps, per spool ID and topic, a window of
// the sequences seen on any partition: a record whose sequence is within
// Window of the highest seen for its spool ID and topic, and was seen on
// another partition, is a duplicate too. To catch those copies a consumer
// must feed the records of all partitions of the topic to one Deduper; a
// copy further than Window sequences behind (across all partitions) is
// judged by its partition's state alone.
//
// The zero value is ready to use with DefaultDedupWindow. A Deduper is
// safe for concurrent use.
type Deduper struct {
	// Window is the reordering the Deduper tolerates, in sequences;
	// zero means DefaultDedupWindow.
	Window uint64

	mu    sync.Mutex
	parts map[dedupKey]*dedupState
	// topics is the window of sequences seen on any partition, per spool
	// ID and topic (partition -1 in the key).
	topics map[dedupKey]*dedupState
}

type dedupKey struct {
	id        ID
	topic     string
	partition int32
}

type dedupState struct {
	high uint64
	// seen has bit i set when high-i was seen (bit 0 is high itself).
	seen []uint64
}

// Duplicate reports whether the record in topic/partition whose HeaderKey
// value is header is a copy of one already seen, and remembers it. A
// record without the header (header nil) is never a duplicate; a
// malformed one returns ErrBadHeader.
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
	w := d.Window
	if w == 0 {
		w = DefaultDedupWindow
	}
	if d.parts == nil {
		d.parts = make(map[dedupKey]*dedupState)
		d.topics = make(map[dedupKey]*dedupState)
	}
	// Any partition: seen already (sequences are unique per spool ID)?
	// Marked in both windows whatever the verdict.
	tk := dedupKey{id: id, topic: topic, partition: -1}
	seenElsewhere := d.topics[tk].mark(seq, w, d.topics, tk)
	k := dedupKey{id: id, topic: topic, partition: partition}
	dupHere := d.parts[k].judge(seq, w, d.parts, k)
	return dupHere || seenElsewhere, nil
}

// mark records seq in a window and reports whether it was seen (inside
// the window) before; a sequence below the window is not known.
func (st *dedupState) mark(seq, w uint64, m map[dedupKey]*dedupState, k dedupKey) bool {
	seen, below := st.see(seq, w, m, k)
	return seen && !below
}

// judge is the per-partition verdict: seen before, or below the window.
func (st *dedupState) judge(seq, w uint64, m map[dedupKey]*dedupState, k dedupKey) bool {
	seen, below := st.see(seq, w, m, k)
	return seen || below
}

// see records seq in the window (st nil: a new one, stored in m at k),
// reporting whether it was already set, or below the window.
func (st *dedupState) see(seq, w uint64, m map[dedupKey]*dedupState, k dedupKey) (seen, below bool) {
	if st == nil {
		st = &dedupState{high: seq, seen: make([]uint64, (w+63)/64)}
		st.seen[0] = 1
		m[k] = st
		return false, false
	}
	if seq > st.high {
		st.shift(seq - st.high)
		st.high = seq
		st.seen[0] |= 1
		return false, false
	}
	back := st.high - seq
	if back >= w {
		return false, true
	}
	word, bit := back/64, back%64
	if st.seen[word]&(1<<bit) != 0 {
		return true, false
	}
	st.seen[word] |= 1 << bit
	return false, false
}

// shift moves the window up by n sequences.
func (st *dedupState) shift(n uint64) {
	words := uint64(len(st.seen))
	if n >= words*64 {
		clear(st.seen)
		return
	}
	ws, bs := n/64, n%64
	for i := words; i > 0; i-- {
		dst := i - 1
		var v uint64
		if dst >= ws {
			v = st.seen[dst-ws] << bs
			if bs > 0 && dst >= ws+1 {
				v |= st.seen[dst-ws-1] >> (64 - bs)
			}
		}
		st.seen[dst] = v
	}
}
