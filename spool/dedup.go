package spool

import (
	"encoding/binary"
	"errors"
	"slices"
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

// DefaultDedupWindow is a Deduper's default Window: how many runs of
// consecutive sequences it keeps per spool ID and topic (at most about
// 2 MiB per spool ID and topic; see Deduper).
const DefaultDedupWindow = 1 << 16

// Deduper drops the duplicates a spool's at-least-once replay makes, on
// the consumer's side. Feed it the records of every partition of a topic
// (one Deduper for all of them); it answers whether a record is a copy of
// one it has seen, on any partition.
//
// Per spool ID and topic it keeps the set of sequences seen, as sorted
// runs of consecutive sequences. A record is a duplicate when its
// sequence is in the set, wherever the copy was (a record written while
// its topic's partitions were unknown goes through the partitioner again
// at the replay, and can land on another partition); it is new otherwise,
// however far below the highest sequence seen it is: a record parked at
// the crash and replayed after many later records is not dropped.
//
// Memory is bounded by Window runs per spool ID and topic. The spool
// gives sequences in Append order across all topics and partitions, so a
// topic's sequences form few runs: one while a single topic is written
// and every partition is read, and a run per stretch of the topic's
// records between other topics' records otherwise (or between records
// the consumer has not read yet). Past Window runs the lowest run is
// forgotten: a copy of a record that old is then taken for new (a
// duplicate the consumer sees), never the reverse; a record the Deduper
// has not seen is never dropped. A replay re-sends what was acknowledged
// after the spool's last position write (SyncInterval, 100 ms by
// default), so its copies are among the last records seen. At worst
// (one record per run: topics or partitions interleaved record by
// record) only the last Window records of a spool ID and topic are
// remembered.
//
// The runs are kept in blocks of at most 128 (16 bytes a run, each block
// 2 KiB, every block but the last at least half full), so a record costs
// O(log Window) comparisons and a shift within one block, and the memory
// is at most about 2 × 16 × Window bytes per spool ID and topic: 2 MiB
// with the default, about half that when runs come in sequence order.
// That is multiplied by the spool IDs and topics seen: a spool ID is
// never forgotten by itself (a producer's directory keeps its ID across
// restarts, a new directory makes a new one); Forget drops one.
//
// A consumer that restarts must give the Deduper the records from before
// its committed offset again (or keep its state) to recognise duplicates
// of them.
//
// The zero value is ready to use with DefaultDedupWindow. A Deduper is
// safe for concurrent use.
type Deduper struct {
	// Window bounds the memory: the runs of consecutive sequences kept
	// per spool ID and topic (see above); zero means DefaultDedupWindow
	// (65 536 runs).
	Window uint64

	mu     sync.Mutex
	topics map[dedupKey]*seqRuns
}

type dedupKey struct {
	id    ID
	topic string
}

// seqRuns is a set of sequences: sorted, disjoint, non-adjacent runs,
// kept in sorted blocks of at most blockRuns runs (each block's array
// has room for blockRuns+1, never grown), so that adding a run or
// joining two shifts at most one block: O(log w + blockRuns) per record
// where a single sorted slice shifted O(w). Every block but the last
// holds at least blockRuns/2 runs, which bounds the memory.
type seqRuns struct {
	blocks [][]seqRun // non-empty blocks, in order
	n      int        // runs in all the blocks
}

type seqRun struct{ lo, hi uint64 } // inclusive

// blockRuns is the most runs a block holds (16 bytes each: 2 KiB).
const blockRuns = 128

// Forget drops what the Deduper remembers of spool id, on every topic,
// and frees its memory: a copy of one of its records is taken for new
// afterwards. Use it for a spool that will send nothing again (its
// directory deleted). Forget costs a pass over the spool IDs and topics
// remembered.
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
// topic), and remembers it. A record without the header (header nil) is
// never a duplicate; a malformed one returns ErrBadHeader.
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
	if d.topics == nil {
		d.topics = make(map[dedupKey]*seqRuns)
	}
	k := dedupKey{id: id, topic: topic}
	rs := d.topics[k]
	if rs == nil {
		rs = &seqRuns{}
		d.topics[k] = rs
	}
	return rs.see(seq, w), nil
}

// see adds seq to the set, reporting whether it was there, and forgets
// the lowest runs past w.
func (rs *seqRuns) see(seq, w uint64) bool {
	nb := len(rs.blocks)
	if nb == 0 {
		blk := make([]seqRun, 1, blockRuns+1)
		blk[0] = seqRun{seq, seq}
		rs.blocks = append(rs.blocks, blk)
		rs.n = 1
		return false
	}
	// The common case: above every run (records in sequence order).
	last := rs.blocks[nb-1]
	if top := &last[len(last)-1]; seq > top.hi {
		if seq == top.hi+1 {
			top.hi = seq
			return false
		}
		rs.insert(nb-1, len(last), seq)
		rs.trim(w)
		return false
	}
	// Below every run.
	if bottom := &rs.blocks[0][0]; seq < bottom.lo {
		if seq+1 == bottom.lo {
			bottom.lo = seq
			return false
		}
		if uint64(rs.n) >= w {
			// It would be the lowest run, forgotten at once.
			return false
		}
		rs.insert(0, 0, seq)
		return false
	}
	// The first block, and the first run in it, ending at or above seq:
	// there is one (seq is not above every run).
	b := searchRuns(nb, func(j int) bool { blk := rs.blocks[j]; return blk[len(blk)-1].hi >= seq })
	blk := rs.blocks[b]
	i := searchRuns(len(blk), func(j int) bool { return blk[j].hi >= seq })
	next := &blk[i]
	if next.lo <= seq {
		return true
	}
	// The run before seq: there is one (seq is not below every run).
	var prev *seqRun
	if i > 0 {
		prev = &blk[i-1]
	} else {
		pb := rs.blocks[b-1]
		prev = &pb[len(pb)-1]
	}
	joinsPrev := prev.hi+1 == seq
	joinsNext := seq+1 == next.lo
	switch {
	case joinsPrev && joinsNext:
		prev.hi = next.hi
		rs.remove(b, i)
	case joinsPrev:
		prev.hi = seq
	case joinsNext:
		next.lo = seq
	default:
		rs.insert(b, i, seq)
		rs.trim(w)
	}
	return false
}

// searchRuns is sort.Search: the first j in [0, n) for which f is true.
func searchRuns(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if f(m) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// insert adds the run {seq, seq} at index i of block b, splitting the
// block when it overflows: in two halves, or, for an append at the end
// of the last block (sequence order), into a full block and a new one.
func (rs *seqRuns) insert(b, i int, seq uint64) {
	blk := slices.Insert(rs.blocks[b], i, seqRun{seq, seq}) // within its capacity
	rs.n++
	if len(blk) <= blockRuns {
		rs.blocks[b] = blk
		return
	}
	h := len(blk) / 2
	if b == len(rs.blocks)-1 && i == len(blk)-1 {
		h = blockRuns
	}
	right := append(make([]seqRun, 0, blockRuns+1), blk[h:]...)
	rs.blocks[b] = blk[:h]
	rs.blocks = slices.Insert(rs.blocks, b+1, right)
}

// remove deletes the run at index i of block b, and keeps every block
// but the last at least half full: an emptied block goes, and one below
// half is merged with the next (or shares the next's runs with it).
func (rs *seqRuns) remove(b, i int) {
	blk := slices.Delete(rs.blocks[b], i, i+1)
	rs.n--
	rs.blocks[b] = blk
	switch {
	case len(blk) == 0:
		rs.blocks = slices.Delete(rs.blocks, b, b+1)
	case b == len(rs.blocks)-1 || len(blk) >= blockRuns/2:
	default:
		nx := rs.blocks[b+1]
		if len(blk)+len(nx) <= blockRuns {
			rs.blocks[b] = append(blk, nx...)
			rs.blocks = slices.Delete(rs.blocks, b+1, b+2)
			return
		}
		k := (len(blk)+len(nx))/2 - len(blk)
		rs.blocks[b] = append(blk, nx[:k]...)
		rs.blocks[b+1] = nx[:copy(nx, nx[k:])]
	}
}

// trim forgets the lowest runs beyond w.
func (rs *seqRuns) trim(w uint64) {
	for uint64(rs.n) > w {
		rs.remove(0, 0)
	}
}
