package testbroker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/recordbatch"
)

// The partition log: one partition's records in memory, validated on append
// the way a Kafka broker validates a produced batch (UnifiedLog.append,
// LogValidator and ProduceRequest.validateRecords), in this order:
//
//  1. framing: an empty record set, or one that does not hold exactly one
//     whole batch, gets INVALID_RECORD (more than one batch) or
//     CORRUPT_MESSAGE (truncated, or a length too small for a header);
//  2. magic 2, as Produce v3+ requires: INVALID_RECORD otherwise (since
//     KIP-467 Kafka maps its InvalidRecordException to INVALID_RECORD, 87);
//  3. base offset 0, as clients must send it: INVALID_RECORD;
//  4. size: 12+Length above MaxMessageBytes gets MESSAGE_TOO_LARGE;
//  5. CRC-32C over attributes..end: CORRUPT_MESSAGE on a mismatch;
//  6. codec bits above zstd: UNSUPPORTED_COMPRESSION_TYPE;
//  7. header consistency (LogValidator.validateBatch): RecordsCount must
//     be positive and equal LastOffsetDelta+1, no control batch, and an
//     idempotent batch (producer id >= 0) needs BaseSequence >= 0; all
//     INVALID_RECORD;
//  8. unless in sink mode, the records themselves: decompressed with
//     compression/ (corrupt data or a bomb: CORRUPT_MESSAGE), then every
//     record decoded with offset deltas 0..n-1 (INVALID_RECORD otherwise);
//  9. idempotence (see idempotence.go): duplicates answer the original base
//     offset and are not appended again.
//
// Sink mode keeps no records and skips step 8, so that validating a batch
// costs one CRC pass: that is what lets a benchmark push hundreds of MB/s
// through the broker.

// logConfig configures a partition log.
type logConfig struct {
	// Sink validates (header, framing, CRC, sequences) and acknowledges,
	// but keeps no records. Offsets still advance.
	Sink bool
	// MaxMessageBytes is the largest batch accepted, in bytes including
	// its 12-byte offset and length prefix, like Kafka's
	// message.max.bytes / max.message.bytes. <= 0 means 1 MiB, Kafka's
	// default (1048588).
	MaxMessageBytes int32
	// MaxUncompressedBytes caps the decompressed size of one batch's
	// records; a larger one is treated as a compression bomb
	// (CORRUPT_MESSAGE). <= 0 means 64 MiB.
	MaxUncompressedBytes int
	// LogAppendTime makes the log stamp batches with the append time, like a
	// topic with message.timestamp.type=LogAppendTime: the stored batch gets
	// the LogAppendTime attribute and MaxTimestamp = now (its CRC is
	// rewritten), and appendResult.LogAppendTime is set. Default CreateTime.
	LogAppendTime bool
	// UnknownProducerIDErrors answers UNKNOWN_PRODUCER_ID to a producer id
	// the partition has no state for when its first sequence is not 0, as
	// Kafka brokers before 2.5 did. Current Kafka accepts such a batch; see
	// idempotence.go.
	UnknownProducerIDErrors bool
}

// defaultMaxMessageBytes is Kafka's message.max.bytes default:
// 1 MiB + the 12-byte log overhead.
const defaultMaxMessageBytes = 1024*1024 + 12

const defaultMaxUncompressedBytes = 64 << 20

// Byte offsets in a record batch v2 header of the fields the log checks or
// rewrites in place (see KAFKA-FACTS.md); recordbatch.ParseHeader reads the
// rest.
const (
	bOffBaseOffset   = 0
	bOffLeaderEpoch  = 12
	bOffCRC          = 17
	bOffAttributes   = 21 // the CRC covers everything from here on
	bOffMaxTimestamp = 35
	batchLogOverhead = 12 // BaseOffset + Length

	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
)

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// appendResult is the outcome of appendBatch, ready for a Produce
// response partition.
type appendResult struct {
	// ErrorCode is 0 on success (duplicates included), else a Kafka error
	// code; ErrorMessage then says why.
	ErrorCode    int16
	ErrorMessage string
	// BaseOffset is the offset given to the batch's first record, or the
	// original one for a duplicate; -1 on error.
	BaseOffset int64
	// LogAppendTime is the broker's append time in ms for a LogAppendTime
	// log, else -1.
	LogAppendTime int64
	// LogStartOffset is the log start offset after the append.
	LogStartOffset int64
	// Duplicate is set when the batch repeated one of the producer's last
	// five batches and was not appended again.
	Duplicate bool
	// NumRecords is the number of records in the batch.
	NumRecords int32
}

// storedBatch is one appended batch (never mutated once stored, so fetch can
// hand out raw without copying).
type storedBatch struct {
	baseOffset, lastOffset int64
	raw                    []byte
	// timestamps are the records' timestamps in offset order, for
	// ListOffsets by timestamp.
	timestamps []int64
}

// logSettings are the topic configs a log enforces (see topicconfig.go).
// IncrementalAlterConfigs changes them at any time, so an append reads them
// once, atomically.
type logSettings struct {
	// maxMessageBytes is max.message.bytes: the largest batch accepted,
	// its 12-byte offset and length prefix included.
	maxMessageBytes int32
	// logAppendTime is message.timestamp.type=LogAppendTime.
	logAppendTime bool
	// retentionBytes is retention.bytes: after an append, the oldest
	// batches are dropped (the log start moves up) while the stored
	// batches exceed it, always keeping the newest one, as Kafka keeps the
	// active segment. Negative: unbounded. Sink mode stores nothing.
	retentionBytes int64
}

// partitionLog is one partition's in-memory log. It is safe for concurrent
// use; its mutex is never held across I/O.
type partitionLog struct {
	cfg      logConfig
	settings atomic.Pointer[logSettings]

	mu          sync.Mutex
	logStart    int64 // first offset still readable
	next        int64 // log end offset == high watermark (no replication)
	leaderEpoch int32
	batches     []storedBatch // sorted by offset; empty in sink mode
	size        int64         // bytes of the stored batches
	appended    int           // batches appended in sink mode
	producers   *producerStates
	txn         txnLogState // ongoing and aborted transactions (txnlog.go)
}

func newPartitionLog(cfg logConfig) *partitionLog {
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = defaultMaxMessageBytes
	}
	if cfg.MaxUncompressedBytes <= 0 {
		cfg.MaxUncompressedBytes = defaultMaxUncompressedBytes
	}
	l := &partitionLog{cfg: cfg, producers: newProducerStates(cfg.UnknownProducerIDErrors)}
	l.settings.Store(&logSettings{maxMessageBytes: cfg.MaxMessageBytes, logAppendTime: cfg.LogAppendTime, retentionBytes: -1})
	return l
}

// setSettings applies changed topic configs to the appends from now on.
func (l *partitionLog) setSettings(s logSettings) {
	l.settings.Store(&s)
}

func failed(code int16, format string, args ...any) appendResult {
	return appendResult{ErrorCode: code, ErrorMessage: fmt.Sprintf(format, args...), BaseOffset: -1, LogAppendTime: -1}
}

// appendBatch validates one produced record set (the Records field of a
// Produce request partition: exactly one batch for Produce v3+) and appends
// it. raw is not retained: the log copies what it keeps, so the caller may
// release raw to its pool afterwards. now is the append time.
func (l *partitionLog) appendBatch(raw []byte, now time.Time) appendResult {
	set := l.settings.Load()
	h, res, ok := l.validateFrame(raw, set.maxMessageBytes)
	if !ok {
		l.mu.Lock()
		res.LogStartOffset = l.logStart
		l.mu.Unlock()
		return res
	}
	var timestamps []int64
	if !l.cfg.Sink {
		var err error
		timestamps, err = l.validateRecords(raw)
		if err != nil {
			res := failed(codeInvalidRecord, "%v", err)
			if errors.Is(err, compression.ErrCorrupt) || errors.Is(err, compression.ErrTooLarge) {
				res.ErrorCode = codeCorruptMessage
			} else if errors.Is(err, compression.ErrUnsupported) {
				res.ErrorCode = codeUnsupportedCompression
			}
			l.mu.Lock()
			res.LogStartOffset = l.logStart
			l.mu.Unlock()
			return res
		}
	}

	firstSeq := h.BaseSequence
	lastSeq := lastSequence(firstSeq, h.LastOffsetDelta)
	appendTime := int64(-1)
	if set.logAppendTime {
		appendTime = now.UnixMilli()
	}

	var stored []byte
	if !l.cfg.Sink {
		// Copy outside the lock: raw belongs to the caller's pool.
		stored = make([]byte, len(raw))
		copy(stored, raw)
		if set.logAppendTime {
			be := binary.BigEndian
			attrs := be.Uint16(stored[bOffAttributes:]) | attrLogAppendTime
			be.PutUint16(stored[bOffAttributes:], attrs)
			be.PutUint64(stored[bOffMaxTimestamp:], uint64(appendTime))
			be.PutUint32(stored[bOffCRC:], crc32.Checksum(stored[bOffAttributes:], castagnoliTable))
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	seq := l.producers.check(h.ProducerID, h.ProducerEpoch, firstSeq, lastSeq)
	if seq.duplicate {
		return appendResult{BaseOffset: seq.dup.firstOffset, LogAppendTime: appendTime,
			LogStartOffset: l.logStart, Duplicate: true, NumRecords: h.NumRecords}
	}
	if seq.code != codeNone {
		res := failed(seq.code, "%s", seq.msg)
		res.LogStartOffset = l.logStart
		return res
	}
	base := l.next
	last := base + int64(h.LastOffsetDelta)
	l.next = last + 1
	if h.Transactional() {
		l.txn.begin(h.ProducerID, base)
	}
	l.producers.record(h.ProducerID, h.ProducerEpoch, batchMeta{firstSeq: firstSeq, lastSeq: lastSeq, firstOffset: base, lastOffset: last})
	if l.cfg.Sink {
		l.appended++
	} else {
		// BaseOffset and PartitionLeaderEpoch are outside the CRC.
		binary.BigEndian.PutUint64(stored[bOffBaseOffset:], uint64(base))
		binary.BigEndian.PutUint32(stored[bOffLeaderEpoch:], uint32(l.leaderEpoch))
		if set.logAppendTime {
			for i := range timestamps {
				timestamps[i] = appendTime
			}
		}
		l.batches = append(l.batches, storedBatch{baseOffset: base, lastOffset: last, raw: stored, timestamps: timestamps})
		l.size += int64(len(stored))
		if set.retentionBytes >= 0 {
			l.retainLocked(set.retentionBytes)
		}
	}
	return appendResult{BaseOffset: base, LogAppendTime: appendTime, LogStartOffset: l.logStart, NumRecords: h.NumRecords}
}

// validateFrame runs steps 1 to 7 (see the top of the file). It allocates
// nothing on success.
func (l *partitionLog) validateFrame(raw []byte, maxMessageBytes int32) (recordbatch.BatchHeader, appendResult, bool) {
	if len(raw) == 0 {
		return recordbatch.BatchHeader{}, failed(codeInvalidRecord, "produce requests v3+ must hold one record batch per partition; got none"), false
	}
	h, err := recordbatch.ParseHeader(raw)
	switch {
	case errors.Is(err, recordbatch.ErrBadMagic):
		return h, failed(codeInvalidRecord, "produce requests v3+ may only hold record batches with magic 2; got magic %d", h.Magic), false
	case err != nil: // too short, Length too small for a header, or truncated
		return h, failed(codeCorruptMessage, "%v", err), false
	}
	if size := int64(h.Length) + batchLogOverhead; size < int64(len(raw)) {
		return h, failed(codeInvalidRecord, "produce requests v3+ may hold exactly one record batch per partition; %d bytes follow the first batch", int64(len(raw))-size), false
	}
	if h.BaseOffset != 0 {
		return h, failed(codeInvalidRecord, "the base offset of a produced batch must be 0, got %d", h.BaseOffset), false
	}
	if size := len(raw); size > int(maxMessageBytes) {
		return h, failed(codeMessageTooLarge, "batch of %d bytes is larger than max.message.bytes %d", size, maxMessageBytes), false
	}
	if got := crc32.Checksum(raw[bOffAttributes:], castagnoliTable); got != h.CRC {
		return h, failed(codeCorruptMessage, "record batch CRC-32C mismatch: header says %#08x, bytes give %#08x", h.CRC, got), false
	}
	if codec := h.Attributes & attrCodecMask; codec > int16(compression.Zstd) {
		return h, failed(codeUnsupportedCompression, "unknown compression codec %d", codec), false
	}
	if h.LastOffsetDelta < 0 {
		return h, failed(codeInvalidRecord, "batch has an invalid offset range: last offset delta %d", h.LastOffsetDelta), false
	}
	if h.NumRecords <= 0 {
		return h, failed(codeInvalidRecord, "invalid record count %d", h.NumRecords), false
	}
	if int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return h, failed(codeInvalidRecord, "record count %d does not match the offset range [0, %d]", h.NumRecords, h.LastOffsetDelta), false
	}
	if h.Control() {
		return h, failed(codeInvalidRecord, "clients may not write control batches"), false
	}
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return h, failed(codeInvalidRecord, "idempotent batch of producer id %d has invalid base sequence %d", h.ProducerID, h.BaseSequence), false
	}
	return h, appendResult{}, true
}

// decoders are reused across appends so that validating records allocates
// only the timestamps slice the log keeps.
var decoders = sync.Pool{New: func() any { return new(recordbatch.Decoder) }}

// validateRecords is step 8: it decodes every record (decompressing first)
// and returns the records' timestamps in offset order.
func (l *partitionLog) validateRecords(raw []byte) ([]int64, error) {
	d := decoders.Get().(*recordbatch.Decoder)
	defer decoders.Put(d)
	_, recs, err := d.Decode(raw, l.cfg.MaxUncompressedBytes)
	if err != nil {
		return nil, err
	}
	ts := make([]int64, len(recs))
	for i := range recs {
		if recs[i].OffsetDelta != int32(i) {
			return nil, fmt.Errorf("record %d has offset delta %d", i, recs[i].OffsetDelta)
		}
		ts[i] = recs[i].Timestamp
	}
	return ts, nil
}

// decodeStored decodes a stored batch into Records with absolute offsets.
// Keys, values and header values are copied, so callers may keep or modify
// them.
func decodeStored(raw []byte, maxUncompressed int) ([]Record, error) {
	b, err := recordbatch.Decode(raw, maxUncompressed)
	if err != nil {
		return nil, err
	}
	h := b.Header
	out := make([]Record, len(b.Records))
	for i, r := range b.Records {
		rec := Record{
			Offset:          h.BaseOffset + int64(r.OffsetDelta),
			Timestamp:       r.Timestamp,
			Key:             cloneBytes(r.Key),
			Value:           cloneBytes(r.Value),
			ProducerID:      h.ProducerID,
			ProducerEpoch:   h.ProducerEpoch,
			Sequence:        -1,
			Compression:     int8(h.Attributes & attrCodecMask),
			BatchBaseOffset: h.BaseOffset,
			Transactional:   h.Transactional(),
			Control:         h.Control(),
		}
		if h.LogAppendTime() {
			rec.Timestamp = h.MaxTimestamp
		}
		if h.ProducerID >= 0 && h.BaseSequence >= 0 {
			rec.Sequence = lastSequence(h.BaseSequence, r.OffsetDelta)
		}
		if len(r.Headers) > 0 {
			rec.Headers = make([]Header, len(r.Headers))
			for j, hd := range r.Headers {
				rec.Headers[j] = Header{Key: hd.Key, Value: cloneBytes(hd.Value)}
			}
		}
		out[i] = rec
	}
	return out, nil
}

// cloneBytes copies b, keeping nil as nil and empty as empty.
func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// setLeaderEpoch sets the leader epoch stamped into batches appended from now
// on (PartitionLeaderEpoch, outside the CRC). The cluster calls it when the
// partition's leadership moves.
func (l *partitionLog) setLeaderEpoch(epoch int32) {
	l.mu.Lock()
	l.leaderEpoch = epoch
	l.mu.Unlock()
}

// highWatermark is the offset the next appended record gets (the log end
// offset; with no replication it is also the high watermark).
func (l *partitionLog) highWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// logStartOffset is the first offset still in the log.
func (l *partitionLog) logStartOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logStart
}

// numBatches is the number of batches in the log: those stored, or in sink
// mode every batch appended (duplicates excluded).
func (l *partitionLog) numBatches() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.Sink {
		return l.appended
	}
	return len(l.batches)
}

// batchIndex returns the index of the first stored batch whose last offset
// is >= offset. The caller holds l.mu.
func (l *partitionLog) batchIndex(offset int64) int {
	return sort.Search(len(l.batches), func(i int) bool { return l.batches[i].lastOffset >= offset })
}

// fetch returns whole stored batches, starting with the one that contains
// offset, while their total size stays within maxBytes; the first batch is
// returned even when it alone is larger (KIP-74), so a consumer always makes
// progress. Each batch carries its assigned base offset. The slices are
// shared and must not be modified.
//
// errCode is OFFSET_OUT_OF_RANGE when offset is below the log start or above
// the high watermark; offset == high watermark returns no batches and no
// error. In sink mode there is nothing to read: every in-range fetch is empty.
func (l *partitionLog) fetch(offset int64, maxBytes int32) (batches [][]byte, hw, logStart int64, errCode int16) {
	l.mu.Lock()
	defer l.mu.Unlock()
	hw, logStart = l.next, l.logStart
	if offset < logStart || offset > hw {
		return nil, hw, logStart, codeOffsetOutOfRange
	}
	return l.batchesLocked(offset, maxBytes, hw), hw, logStart, codeNone
}

// batchesLocked returns the stored batches from the one holding offset on,
// stopping before the first that starts at or after end, within maxBytes
// (the first batch always). The caller holds l.mu.
func (l *partitionLog) batchesLocked(offset int64, maxBytes int32, end int64) (batches [][]byte) {
	total := int64(0)
	for i := l.batchIndex(offset); i < len(l.batches) && l.batches[i].baseOffset < end; i++ {
		n := int64(len(l.batches[i].raw))
		if len(batches) > 0 && total+n > int64(maxBytes) {
			break
		}
		batches = append(batches, l.batches[i].raw)
		total += n
	}
	return batches
}

// ListOffsets special timestamps.
const (
	listOffsetsLatest       = -1
	listOffsetsEarliest     = -2
	listOffsetsMaxTimestamp = -3 // KIP-734, ListOffsets v7+
)

// offsetForTimestamp answers ListOffsets. ts -1 gives the high watermark and
// -2 the log start offset, both with timestamp -1; -3 gives the offset and
// timestamp of the record with the largest timestamp (the first such record).
// Any other ts gives the first offset whose record timestamp is >= ts, and
// that timestamp; when no record qualifies (or in sink mode, which keeps no
// timestamps) the answer is -1, -1, as Kafka answers.
func (l *partitionLog) offsetForTimestamp(ts int64) (offset int64, timestamp int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ts {
	case listOffsetsLatest:
		return l.next, -1
	case listOffsetsEarliest:
		return l.logStart, -1
	case listOffsetsMaxTimestamp:
		offset, timestamp = -1, -1
		for _, b := range l.batches {
			for i, t := range b.timestamps {
				o := b.baseOffset + int64(i)
				if o >= l.logStart && (offset < 0 || t > timestamp) {
					offset, timestamp = o, t
				}
			}
		}
		return offset, timestamp
	}
	for _, b := range l.batches {
		for i, t := range b.timestamps {
			o := b.baseOffset + int64(i)
			if o >= l.logStart && t >= ts {
				return o, t
			}
		}
	}
	return -1, -1
}

// deleteRecordsBefore moves the log start offset up to offset (capped at the
// high watermark; a lower offset than the current start does nothing), drops
// the batches that end below it, and forgets the idempotent producers whose
// last write is gone, like Kafka's DeleteRecords and retention. Data-loss
// tests use it.
func (l *partitionLog) deleteRecordsBefore(offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset > l.next {
		offset = l.next
	}
	if offset <= l.logStart {
		return
	}
	l.logStart = offset
	l.dropBatchesLocked(l.batchIndex(offset))
	l.producers.truncate(offset)
	l.txn.truncate(offset)
}

// dropBatchesLocked drops the first n stored batches.
func (l *partitionLog) dropBatchesLocked(n int) {
	for _, b := range l.batches[:n] {
		l.size -= int64(len(b.raw))
	}
	// Copy rather than reslice so that dropped batches can be collected.
	l.batches = append([]storedBatch(nil), l.batches[n:]...)
}

// retainLocked applies retention.bytes: the oldest batches go while the
// stored batches exceed limit, the newest always stays.
func (l *partitionLog) retainLocked(limit int64) {
	n, size := 0, l.size
	for n < len(l.batches)-1 && size > limit {
		size -= int64(len(l.batches[n].raw))
		n++
	}
	if n == 0 {
		return
	}
	l.dropBatchesLocked(n)
	l.logStart = l.batches[0].baseOffset
	l.producers.truncate(l.logStart)
	l.txn.truncate(l.logStart)
}

// records decodes every stored record at or above the log start, in offset
// order. In sink mode it returns none.
func (l *partitionLog) records() ([]Record, error) {
	l.mu.Lock()
	batches := l.batches
	logStart := l.logStart
	l.mu.Unlock()
	var out []Record
	for _, b := range batches {
		recs, err := decodeStored(b.raw, l.cfg.MaxUncompressedBytes)
		if err != nil {
			return nil, fmt.Errorf("testbroker: decoding stored batch at offset %d: %w", b.baseOffset, err)
		}
		for _, r := range recs {
			if r.Offset >= logStart {
				out = append(out, r)
			}
		}
	}
	return out, nil
}
