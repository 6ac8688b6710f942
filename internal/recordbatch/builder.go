package recordbatch

import (
	"encoding/binary"
	"errors"
	"math"
)

// Builder state.
const (
	stateUnusable = iota // zero Builder, or Reset with a buffer too small for a header
	stateOpen            // accepting records
	stateFinished        // Finish succeeded; Reset to reuse
)

// Builder builds one record batch in a caller-provided buffer, record by
// record, without ever re-encoding a record already appended.
//
// The buffer comes from Reset and is never grown: its capacity is the hard
// limit. Append and AppendBody write a record only if it fits whole, and
// report false otherwise, leaving the builder unchanged and usable. They
// allocate nothing. The lifecycle is Reset → Append* → Finish → Stamp; after
// Finish, Reset starts a new batch.
//
// The zero Builder is unusable (every Append fails) until Reset. A Builder is
// not safe for concurrent use.
type Builder struct {
	buf    []byte // header (reserved) + records so far; never grown
	baseTS int64  // first record's timestamp
	maxTS  int64
	n      int32 // records so far
	state  uint8
}

// Reset starts a new batch in buf. Its length is ignored and its capacity is
// the limit for the whole batch, header included. The first HeaderSize bytes
// are reserved for the header, which Finish writes. If cap(buf) < HeaderSize
// every Append fails. The builder keeps buf until the next Reset.
func (b *Builder) Reset(buf []byte) {
	*b = Builder{}
	if cap(buf) < HeaderSize {
		b.buf = buf[:0]
		return
	}
	b.buf = buf[:HeaderSize]
	b.state = stateOpen
}

// NumRecords returns the number of records appended since Reset.
func (b *Builder) NumRecords() int { return int(b.n) }

// Len returns the batch size so far in bytes, header included, before any
// compression. After Finish it is the final batch size.
func (b *Builder) Len() int { return len(b.buf) }

// Cap returns the size limit given to Reset (or Grow).
func (b *Builder) Cap() int { return cap(b.buf) }

// Grow moves an open batch into buf, a larger buffer, so that more records
// fit: the bytes so far are copied and appending continues there. It returns
// the buffer the batch used before, for the caller to release. It panics if
// buf is not larger or the builder is not open.
func (b *Builder) Grow(buf []byte) (old []byte) {
	if b.state != stateOpen || cap(buf) <= cap(b.buf) {
		panic("recordbatch: Grow needs an open builder and a larger buffer")
	}
	old = b.buf
	b.buf = append(buf[:0], b.buf...)
	return old[:0]
}

// RecordSize returns exactly how many bytes the next record would add to the
// batch (its length varint included), given its timestamp in milliseconds
// and the size of its body (see BodySize). It depends on the batch so far:
// the timestamp is stored as a delta from the first record's, and the offset
// delta grows with each record.
func (b *Builder) RecordSize(ts int64, bodySize int) int {
	base := ts
	if b.n > 0 {
		base = b.baseTS
	}
	return recordSize(ts-base, b.n, bodySize)
}

// Append encodes a record with timestamp ts (Unix milliseconds) and appends
// it to the batch. It returns false, writing nothing, if the record does not
// fit in the buffer's capacity or if the builder is not open (not Reset, or
// already finished). A nil key or value is a null one.
func (b *Builder) Append(ts int64, key, value []byte, headers []Header) bool {
	body := BodySize(key, value, headers)
	if !b.begin(ts, body) {
		return false
	}
	b.buf = AppendBody(b.buf, key, value, headers)
	return true
}

// AppendBody appends a record whose body was encoded earlier by the
// package-level AppendBody (or taken from a decoded Record's Body). It
// copies body; it returns false, writing nothing, like Append.
func (b *Builder) AppendBody(ts int64, body []byte) bool {
	if !b.begin(ts, len(body)) {
		return false
	}
	b.buf = append(b.buf, body...)
	return true
}

// begin checks that a record fits and writes everything before its body:
// length, attributes, timestamp delta and offset delta.
func (b *Builder) begin(ts int64, bodySize int) bool {
	if b.state != stateOpen || b.n == math.MaxInt32 {
		return false
	}
	if b.n == 0 {
		b.baseTS, b.maxTS = ts, ts
	}
	tsDelta := ts - b.baseTS
	l := 1 + varintLen(tsDelta) + varintLen(int64(b.n)) + bodySize
	if varintLen(int64(l))+l > cap(b.buf)-len(b.buf) || l > math.MaxInt32 {
		return false
	}
	buf := appendVarint(b.buf, int64(l))
	buf = append(buf, 0) // record attributes: unused
	buf = appendVarint(buf, tsDelta)
	b.buf = appendVarint(buf, int64(b.n))
	b.n++
	if ts > b.maxTS {
		b.maxTS = ts
	}
	return true
}

// ErrEmptyBatch is returned by Finish when no record was appended: Kafka
// rejects empty batches.
var ErrEmptyBatch = errors.New("recordbatch: batch has no records")

// ErrNotOpen is returned by Finish on a builder that was never Reset (or
// Reset with a buffer smaller than HeaderSize) or that is already finished.
var ErrNotOpen = errors.New("recordbatch: builder is not open")

// writeHeader fills every header field except the CRC, with codec bits attrs.
// Producer id, epoch and base sequence are written as -1 (not idempotent) so
// that the header is complete; Stamp overwrites them.
func (b *Builder) writeHeader(attrs uint16) {
	be := binary.BigEndian
	h := b.buf[:HeaderSize]
	be.PutUint64(h[offBaseOffset:], 0)
	be.PutUint32(h[offLength:], uint32(len(b.buf)-lengthOverhead))
	be.PutUint32(h[offLeaderEpoch:], math.MaxUint32) // -1: set by the broker
	h[offMagic] = Magic
	be.PutUint32(h[offCRC:], 0)
	be.PutUint16(h[offAttributes:], attrs)
	be.PutUint32(h[offLastOffsetDelta:], uint32(b.n-1))
	be.PutUint64(h[offBaseTimestamp:], uint64(b.baseTS))
	be.PutUint64(h[offMaxTimestamp:], uint64(b.maxTS))
	be.PutUint64(h[offProducerID:], math.MaxUint64)
	be.PutUint16(h[offProducerEpoch:], math.MaxUint16)
	be.PutUint32(h[offBaseSequence:], math.MaxUint32)
	be.PutUint32(h[offNumRecords:], uint32(b.n))
}
