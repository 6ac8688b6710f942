package testbroker

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactional side of a partition log (KIP-98): which producers have
// a transaction open on the partition and from which offset, the aborted
// transactions a read_committed Fetch reports, the last stable offset, and
// the control batches (commit and abort markers) the coordinator writes.
//
// The last stable offset (LSO) is the first offset of the earliest
// transaction still open on the partition, or the high watermark when none
// is. A read_committed Fetch returns batches that start below it, and the
// aborted transactions (producer id and first offset) that overlap the
// returned range, so that the consumer drops their records; it skips the
// control batches itself.

// Control batch layout (Kafka's EndTransactionMarker): attributes
// transactional and control, one record whose key is version 0 and the
// control type (0 abort, 1 commit) and whose value is version 0 and the
// coordinator epoch.
const (
	attrTransactional = 0x10
	attrControl       = 0x20

	controlTypeAbort  int16 = 0
	controlTypeCommit int16 = 1
)

// abortedTxn is one aborted transaction of a partition: its producer, its
// first offset and the offset of its abort marker.
type abortedTxn struct {
	producerID              int64
	firstOffset, lastOffset int64
}

// txnLogState is the transaction state of one partition; the log's mutex
// guards it.
type txnLogState struct {
	// ongoing maps a producer id to the first offset of its open
	// transaction on this partition.
	ongoing map[int64]int64
	// aborted lists the aborted transactions in marker order.
	aborted []abortedTxn
}

// begin notes a transactional batch of pid at offset: the first one opens
// the producer's transaction on the partition.
func (s *txnLogState) begin(pid int64, offset int64) {
	if _, ok := s.ongoing[pid]; ok {
		return
	}
	if s.ongoing == nil {
		s.ongoing = make(map[int64]int64)
	}
	s.ongoing[pid] = offset
}

// lastStable returns the LSO given the high watermark hw.
func (s *txnLogState) lastStable(hw int64) int64 {
	lso := hw
	for _, first := range s.ongoing {
		lso = min(lso, first)
	}
	return lso
}

// abortedIn returns the aborted transactions that overlap [from, to).
func (s *txnLogState) abortedIn(from, to int64) []abortedTxn {
	var out []abortedTxn
	for _, a := range s.aborted {
		if a.lastOffset >= from && a.firstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

// truncate forgets the aborted transactions whose marker is below
// logStart: no fetch can reach them any more.
func (s *txnLogState) truncate(logStart int64) {
	n := 0
	for _, a := range s.aborted {
		if a.lastOffset >= logStart {
			s.aborted[n] = a
			n++
		}
	}
	s.aborted = s.aborted[:n]
}

// lastStableOffset returns the partition's LSO.
func (l *partitionLog) lastStableOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.txn.lastStable(l.next)
}

// committedFetch is one read_committed read of a partition.
type committedFetch struct {
	batches           [][]byte
	hw, lso, logStart int64
	aborted           []abortedTxn
	errCode           int16
}

// fetchCommitted is fetch at isolation level read_committed: only batches
// starting below the LSO, and the aborted transactions overlapping them.
// An offset between the LSO and the high watermark returns nothing, as in
// Kafka.
func (l *partitionLog) fetchCommitted(offset int64, maxBytes int32) committedFetch {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := committedFetch{hw: l.next, logStart: l.logStart, lso: l.txn.lastStable(l.next)}
	if offset < r.logStart || offset > r.hw {
		r.errCode = codeOffsetOutOfRange
		return r
	}
	r.batches = l.batchesLocked(offset, maxBytes, r.lso)
	if len(r.batches) > 0 {
		lastRaw := r.batches[len(r.batches)-1]
		end := int64(binary.BigEndian.Uint64(lastRaw[bOffBaseOffset:])) +
			int64(binary.BigEndian.Uint32(lastRaw[bOffLastOffsetDelta:])) + 1
		r.aborted = l.txn.abortedIn(offset, end)
	}
	return r
}

// bOffLastOffsetDelta is the offset of LastOffsetDelta in a batch header.
const bOffLastOffsetDelta = 23

// writeMarker appends a commit or abort marker of producer pid at epoch,
// closing its transaction on the partition (a partition added to a
// transaction but never written to gets a marker too, as in Kafka). The
// producer's epoch on the partition moves up to epoch, so that batches of
// a fenced epoch get INVALID_PRODUCER_EPOCH. It returns the marker's
// offset.
func (l *partitionLog) writeMarker(pid int64, epoch int16, commit bool, coordinatorEpoch int32, now time.Time) int64 {
	raw := controlBatch(pid, epoch, commit, coordinatorEpoch, now.UnixMilli())
	l.mu.Lock()
	defer l.mu.Unlock()
	off := l.next
	l.next++
	binary.BigEndian.PutUint64(raw[bOffBaseOffset:], uint64(off))
	binary.BigEndian.PutUint32(raw[bOffLeaderEpoch:], uint32(l.leaderEpoch))
	if !l.cfg.Sink {
		l.batches = append(l.batches, storedBatch{baseOffset: off, lastOffset: off, raw: raw})
		l.size += int64(len(raw))
	} else {
		l.appended++
	}
	if first, ok := l.txn.ongoing[pid]; ok {
		delete(l.txn.ongoing, pid)
		if !commit {
			l.txn.aborted = append(l.txn.aborted, abortedTxn{producerID: pid, firstOffset: first, lastOffset: off})
		}
	}
	l.producers.fence(pid, epoch)
	return off
}

// controlBatch encodes a marker batch with base offset 0.
func controlBatch(pid int64, epoch int16, commit bool, coordinatorEpoch int32, ts int64) []byte {
	typ := controlTypeAbort
	if commit {
		typ = controlTypeCommit
	}
	be := binary.BigEndian
	var rec []byte
	rec = append(rec, 0)              // record attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	rec = binary.AppendVarint(rec, 4) // key length
	rec = be.AppendUint16(rec, 0)     // key version
	rec = be.AppendUint16(rec, uint16(typ))
	rec = binary.AppendVarint(rec, 6) // value length
	rec = be.AppendUint16(rec, 0)     // value version
	rec = be.AppendUint32(rec, uint32(coordinatorEpoch))
	rec = binary.AppendVarint(rec, 0) // headers

	b := make([]byte, 0, 61+binary.MaxVarintLen32+len(rec))
	b = be.AppendUint64(b, 0) // base offset
	b = be.AppendUint32(b, 0) // length, below
	b = be.AppendUint32(b, 0) // partition leader epoch
	b = append(b, 2)          // magic
	b = be.AppendUint32(b, 0) // CRC, below
	b = be.AppendUint16(b, attrTransactional|attrControl)
	b = be.AppendUint32(b, 0)          // last offset delta
	b = be.AppendUint64(b, uint64(ts)) // base timestamp
	b = be.AppendUint64(b, uint64(ts)) // max timestamp
	b = be.AppendUint64(b, uint64(pid))
	b = be.AppendUint16(b, uint16(epoch))
	b = be.AppendUint32(b, 0xffffffff) // base sequence -1
	b = be.AppendUint32(b, 1)          // records
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	be.PutUint32(b[8:], uint32(len(b)-batchLogOverhead))
	be.PutUint32(b[bOffCRC:], crc32.Checksum(b[bOffAttributes:], castagnoliTable))
	return b
}

// isolationReadCommitted is Fetch's and ListOffsets' IsolationLevel 1.
const isolationReadCommitted int8 = 1

// abortedTransactions converts the log's aborted transactions for a Fetch
// response: an empty, not null, list when there are none, as Kafka sends
// at read_committed.
func abortedTransactions(as []abortedTxn) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(as))
	for _, a := range as {
		t := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		t.ProducerID, t.FirstOffset = a.producerID, a.firstOffset
		out = append(out, t)
	}
	return out
}
