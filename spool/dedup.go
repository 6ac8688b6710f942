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
// consecutive sequences it keeps per spool ID and topic (16 bytes each,
// so at most 1 MiB per spool ID and topic).
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
// default), so its copies are among the last records seen.
//
// A consumer that restarts must give the Deduper the records from before
// its committed offset again (or keep its state) to recognise duplicates
// of them.
//
// The zero value is ready to use with DefaultDedupWindow. A Deduper is
// safe for concurrent use.
type Deduper struct {
	// Window bounds the memory: the runs of consecutive sequences kept
	// per spool ID and topic (see above); zero means DefaultDedupWindow.
	Window uint64

	mu     sync.Mutex
	topics map[dedupKey]*seqRuns
}

type dedupKey struct {
	id    ID
	topic string
}

// seqRuns is a set of sequences: sorted, disjoint, non-adjacent runs.
type seqRuns struct {
	runs []seqRun
}

type seqRun struct{ lo, hi uint64 } // inclusive

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
	n := len(rs.runs)
	// The common case: above every run (records in sequence order).
	if n > 0 && seq > rs.runs[n-1].hi {
		if seq == rs.runs[n-1].hi+1 {
			rs.runs[n-1].hi = seq
			return false
		}
		rs.runs = append(rs.runs, seqRun{seq, seq})
		rs.trim(w)
		return false
	}
	// The first run ending at or above seq.
	i, _ := slices.BinarySearchFunc(rs.runs, seq, func(r seqRun, s uint64) int {
		if r.hi < s {
			return -1
		}
		return 1
	})
	if i < n && rs.runs[i].lo <= seq {
		return true
	}
	joinsPrev := i > 0 && rs.runs[i-1].hi+1 == seq
	joinsNext := i < n && seq+1 == rs.runs[i].lo
	switch {
	case joinsPrev && joinsNext:
		rs.runs[i-1].hi = rs.runs[i].hi
		rs.runs = slices.Delete(rs.runs, i, i+1)
	case joinsPrev:
		rs.runs[i-1].hi = seq
	case joinsNext:
		rs.runs[i].lo = seq
	default:
		rs.runs = slices.Insert(rs.runs, i, seqRun{seq, seq})
		rs.trim(w)
	}
	return false
}

// trim forgets the lowest runs beyond w.
func (rs *seqRuns) trim(w uint64) {
	if n := uint64(len(rs.runs)); n > w {
		// Resliced, not copied: append moves the live runs to a new
		// array when this one fills, so the memory stays within 2w.
		rs.runs = rs.runs[n-w:]
	}
}
