package recordbatch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the size of a record batch v2 header: every field from
// BaseOffset through RecordsCount.
const HeaderSize = 61

// Byte offsets of the header fields.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21 // the CRC covers everything from here on
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// lengthOverhead is what the Length field does not count: BaseOffset
	// and Length itself.
	lengthOverhead = 12
)

// Attribute bits.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// Magic is the record batch format version this package reads and writes.
const Magic = 2

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader holds the fields of a record batch v2 header, as ParseHeader
// reads them; the package documentation describes each one. Attributes
// hold the raw bits; Compression, Transactional, Control and LogAppendTime
// read them.
type BatchHeader struct {
	BaseOffset           int64
	Length               int32 // bytes after the Length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Transactional reports whether the batch is part of a transaction
// (attribute bit 4).
func (h BatchHeader) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports whether the batch holds control records (attribute bit 5).
// Only brokers write control batches.
func (h BatchHeader) Control() bool { return h.Attributes&attrControl != 0 }

// LogAppendTime reports whether the timestamp type is LogAppendTime
// (attribute bit 3) rather than CreateTime.
func (h BatchHeader) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// ParseHeader reads the header of the record batch at the start of b. It is
// cheap: it checks neither the CRC nor the records. b may continue after the
// batch (further batches, as in a fetch response); the batch is
// b[:12+Length].
//
// It fails with an error wrapping ErrCorrupt if b is shorter than the header
// or than the length the header declares, or if Length is too small to hold
// a header, and with ErrBadMagic (which also wraps ErrCorrupt) if the magic
// byte is not 2; in that last case the returned header still holds what was
// read.
func ParseHeader(b []byte) (BatchHeader, error) {
	if len(b) < HeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, shorter than a %d-byte batch header", ErrCorrupt, len(b), HeaderSize)
	}
	be := binary.BigEndian
	h := BatchHeader{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		Length:               int32(be.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(be.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[offNumRecords:])),
	}
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: magic %d", ErrBadMagic, h.Magic)
	}
	if h.Length < HeaderSize-lengthOverhead {
		return h, fmt.Errorf("%w: batch length %d is shorter than the header", ErrCorrupt, h.Length)
	}
	if int64(h.Length)+lengthOverhead > int64(len(b)) {
		return h, fmt.Errorf("%w: batch length %d but only %d bytes follow the length field (truncated)", ErrCorrupt, h.Length, len(b)-lengthOverhead)
	}
	return h, nil
}

// Stamp writes the producer id, producer epoch and base sequence into a
// batch returned by Builder.Finish, clears the transactional bit, and then
// writes the CRC-32C. The producer calls it when the batch is first drained,
// and again whenever the values change (a KIP-360 epoch bump restamps a
// retried batch). Non-idempotent producers stamp -1, -1, -1.
//
// Stamp costs one CRC pass over the batch and allocates nothing. batch must be
// exactly one whole batch; Stamp panics if it is shorter than HeaderSize.
func Stamp(batch []byte, producerID int64, producerEpoch int16, baseSequence int32) {
	stamp(batch, producerID, producerEpoch, baseSequence, false)
}

// StampTransactional is Stamp for a transactional producer: it also sets the
// transactional attribute bit.
func StampTransactional(batch []byte, producerID int64, producerEpoch int16, baseSequence int32) {
	stamp(batch, producerID, producerEpoch, baseSequence, true)
}

func stamp(batch []byte, producerID int64, producerEpoch int16, baseSequence int32, txn bool) {
	_ = batch[HeaderSize-1]
	be := binary.BigEndian
	be.PutUint64(batch[offProducerID:], uint64(producerID))
	be.PutUint16(batch[offProducerEpoch:], uint16(producerEpoch))
	be.PutUint32(batch[offBaseSequence:], uint32(baseSequence))
	attrs := be.Uint16(batch[offAttributes:]) &^ attrTransactional
	if txn {
		attrs |= attrTransactional
	}
	be.PutUint16(batch[offAttributes:], attrs)
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
}
