package testbroker

import (
	"fmt"
	"math"
)

// Idempotent producer state, per partition, modelled on Kafka's
// ProducerStateManager / ProducerAppendInfo (KIP-98, KIP-360).
//
// For every producer id that wrote to the partition the broker keeps the
// producer's current epoch and the metadata of its last five batches (first
// and last sequence, first and last offset). With that it:
//
//   - answers a batch whose epoch and sequence range equal one of the five
//     cached batches as a duplicate: success with the original base offset,
//     and no second append;
//   - rejects an epoch older than the current one with
//     INVALID_PRODUCER_EPOCH (since Kafka 2.7 the produce path answers a
//     fenced epoch with this code; PRODUCER_FENCED is for the coordinator);
//   - accepts a newer epoch only if its first sequence is 0, else
//     OUT_OF_ORDER_SEQUENCE_NUMBER; a new epoch drops the cached batches;
//   - with the same epoch, requires firstSeq == lastSeq+1 (wrapping from
//     MaxInt32 to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER.
//
// A producer id the partition has no state for (never seen, or its state was
// dropped with the records below the log start, see [producerStates.truncate])
// is where Kafka versions differ. Brokers before 2.5 answered a first
// sequence other than 0 with UNKNOWN_PRODUCER_ID; current brokers (the
// "no current producer epoch, accept writes with any sequence number" branch
// of ProducerAppendInfo.checkSequence) accept any sequence and start tracking
// from it. The test broker does what current Kafka does unless
// logConfig.UnknownProducerIDErrors is set, which restores the old answer so
// that a producer's KIP-360 handling of UNKNOWN_PRODUCER_ID can be tested.
//
// Producer id -1 (RecordBatch.NO_PRODUCER_ID) skips every check.

// producerBatchesRetained is how many batches per producer and partition the
// broker remembers for duplicate detection, like Kafka's
// ProducerStateEntry.NUM_BATCHES_TO_RETAIN. It is why an idempotent producer
// keeps at most 5 requests in flight per connection.
const producerBatchesRetained = 5

// Kafka error codes the partition log answers with.
const (
	codeNone                   int16 = 0
	codeOffsetOutOfRange       int16 = 1
	codeCorruptMessage         int16 = 2
	codeMessageTooLarge        int16 = 10
	codeOutOfOrderSequence     int16 = 45
	codeInvalidProducerEpoch   int16 = 47
	codeUnknownProducerID      int16 = 59
	codeUnsupportedCompression int16 = 76
	codeInvalidRecord          int16 = 87
)

// batchMeta is what the broker remembers of one appended batch.
type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerEntry is one producer's state on one partition.
type producerEntry struct {
	epoch int16
	// batches is a ring of the last n batches; batches[(head+n-1)%5] is the newest.
	batches [producerBatchesRetained]batchMeta
	head, n int
}

func (e *producerEntry) newest() *batchMeta {
	return &e.batches[(e.head+e.n-1)%producerBatchesRetained]
}

func (e *producerEntry) add(m batchMeta) {
	if e.n < producerBatchesRetained {
		e.batches[(e.head+e.n)%producerBatchesRetained] = m
		e.n++
		return
	}
	e.batches[e.head] = m
	e.head = (e.head + 1) % producerBatchesRetained
}

// producerStates is the idempotence state of one partition. It is not safe
// for concurrent use: the partition log's mutex guards it.
type producerStates struct {
	byID map[int64]*producerEntry
	// unknownIDErrors answers UNKNOWN_PRODUCER_ID like Kafka < 2.5 (see above).
	unknownIDErrors bool
}

func newProducerStates(unknownIDErrors bool) *producerStates {
	return &producerStates{byID: make(map[int64]*producerEntry), unknownIDErrors: unknownIDErrors}
}

// seqResult is the verdict on one batch.
type seqResult struct {
	code int16
	msg  string
	// duplicate is set when the batch was already appended; dup is its
	// original metadata and the append must not happen again.
	duplicate bool
	dup       batchMeta
}

// lastSequence is the sequence of the last record of a batch whose first
// record has sequence first and which has lastOffsetDelta+1 records.
// Sequences wrap from MaxInt32 to 0, like Kafka's
// DefaultRecordBatch.incrementSequence.
func lastSequence(first, lastOffsetDelta int32) int32 {
	if first < 0 {
		return -1
	}
	return int32((int64(first) + int64(lastOffsetDelta)) % (math.MaxInt32 + 1))
}

// inSequence reports whether next directly follows last.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// check validates a batch of producer pid against the partition's state
// without changing it. firstSeq and lastSeq are the batch's first and last
// sequence. The caller appends the batch only if the result has code 0 and
// no duplicate, and then calls record.
func (s *producerStates) check(pid int64, epoch int16, firstSeq, lastSeq int32) seqResult {
	if pid < 0 {
		return seqResult{}
	}
	e := s.byID[pid]
	if e == nil {
		if firstSeq != 0 && s.unknownIDErrors {
			return seqResult{code: codeUnknownProducerID, msg: fmt.Sprintf(
				"found no record of producer id %d on this partition (sequence %d, expected 0)", pid, firstSeq)}
		}
		return seqResult{}
	}
	// Duplicates first, as Kafka's UnifiedLog does before validating: only
	// batches of the same epoch with exactly the same sequence range match.
	if epoch == e.epoch {
		for i := 0; i < e.n; i++ {
			m := e.batches[(e.head+i)%producerBatchesRetained]
			if m.firstSeq == firstSeq && m.lastSeq == lastSeq {
				return seqResult{duplicate: true, dup: m}
			}
		}
	}
	switch {
	case epoch < e.epoch:
		return seqResult{code: codeInvalidProducerEpoch, msg: fmt.Sprintf(
			"epoch %d of producer id %d is older than the last seen epoch %d", epoch, pid, e.epoch)}
	case epoch > e.epoch:
		if firstSeq != 0 {
			return seqResult{code: codeOutOfOrderSequence, msg: fmt.Sprintf(
				"invalid sequence %d for new epoch %d of producer id %d (current epoch %d): a new epoch starts at 0",
				firstSeq, epoch, pid, e.epoch)}
		}
		return seqResult{}
	}
	if e.n == 0 {
		// Same epoch but no batch cached: only possible after an epoch-only
		// entry; accept like Kafka does for a producer with no sequence yet.
		return seqResult{}
	}
	last := e.newest().lastSeq
	if !inSequence(last, firstSeq) {
		return seqResult{code: codeOutOfOrderSequence, msg: fmt.Sprintf(
			"out of order sequence %d for producer id %d epoch %d: expected %d",
			firstSeq, pid, epoch, int32((int64(last)+1)%(math.MaxInt32+1)))}
	}
	return seqResult{}
}

// record remembers an appended batch. A new epoch drops the cached batches
// of the old one, like ProducerStateEntry.addBatch.
func (s *producerStates) record(pid int64, epoch int16, m batchMeta) {
	if pid < 0 {
		return
	}
	e := s.byID[pid]
	if e == nil {
		e = &producerEntry{epoch: epoch}
		s.byID[pid] = e
	}
	if e.epoch != epoch {
		*e = producerEntry{epoch: epoch}
	}
	e.add(m)
}

// truncate forgets producers whose last batch ends below logStart, as Kafka
// does when the log start offset moves past a producer's last write
// (retention or DeleteRecords).
func (s *producerStates) truncate(logStart int64) {
	for pid, e := range s.byID {
		if e.n == 0 || e.newest().lastOffset < logStart {
			delete(s.byID, pid)
		}
	}
}

// epochOf returns the current epoch of pid on this partition, and false if
// the partition has no state for pid. For tests and debugging.
func (s *producerStates) epochOf(pid int64) (int16, bool) {
	e := s.byID[pid]
	if e == nil {
		return 0, false
	}
	return e.epoch, true
}

// fence moves pid's epoch on this partition up to epoch, as a transaction
// marker does (Kafka's appendEndTxnMarker): a newer epoch drops the cached
// batches, so the producer's next batch of that epoch starts a new
// sequence, and batches of older epochs get INVALID_PRODUCER_EPOCH.
func (s *producerStates) fence(pid int64, epoch int16) {
	e := s.byID[pid]
	switch {
	case e == nil:
		s.byID[pid] = &producerEntry{epoch: epoch}
	case epoch > e.epoch:
		*e = producerEntry{epoch: epoch}
	}
}
