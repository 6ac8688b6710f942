package recordbatch

import (
	"encoding/binary"
	"math/bits"
)

// Header is a record header: a key and an optional value. A nil Value is
// written as a null header value (length -1); an empty non-nil Value is
// written as an empty one (length 0). Header keys cannot be null on the wire.
//
// producer.Header is an alias of this type.
type Header struct {
	Key   string
	Value []byte
}

// zigzag maps signed integers to unsigned ones so that small magnitudes get
// short varints: 0, -1, 1, -2, ... become 0, 1, 2, 3, ... This is Kafka's
// (and protobuf's sint64) encoding. For values that fit in an int32 it gives
// the same number as Kafka's 32-bit zigzag, so one function serves varint
// and varlong fields.
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// varintLen is the number of bytes of v as a zigzag varint.
func varintLen(v int64) int { return (bits.Len64(zigzag(v)|1) + 6) / 7 }

// appendVarint appends v as a zigzag varint.
func appendVarint(dst []byte, v int64) []byte {
	if u := zigzag(v); u < 0x80 { // the common case: deltas, counts, short lengths
		return append(dst, byte(u))
	}
	return binary.AppendUvarint(dst, zigzag(v))
}

// bytesSize is the encoded size of a nullable byte string: its varint length
// (-1 for nil) followed by its bytes.
func bytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 1) // zigzag(-1)
	}
	dst = appendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// BodySize returns the number of bytes AppendBody writes for these fields. A
// nil key or value counts as null (length -1), an empty one as length 0.
func BodySize(key, value []byte, headers []Header) int {
	n := bytesSize(key) + bytesSize(value) + varintLen(int64(len(headers)))
	for i := range headers {
		h := &headers[i]
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	return n
}

// AppendBody appends a record body to dst and returns the extended slice.
//
// A body is everything of a record after its OffsetDelta: KeyLen varint,
// Key, ValueLen varint, Value, HeadersCount varint and the headers. It does
// not depend on the record's place in a batch, so a record can be encoded
// once, parked, and later copied into a batch with Builder.AppendBody.
func AppendBody(dst, key, value []byte, headers []Header) []byte {
	dst = appendBytes(dst, key)
	dst = appendBytes(dst, value)
	dst = appendVarint(dst, int64(len(headers)))
	for i := range headers {
		h := &headers[i]
		dst = appendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytes(dst, h.Value)
	}
	return dst
}

// recordSize is the full encoded size of a record (its length varint
// included) with these deltas and body size.
func recordSize(tsDelta int64, offsetDelta int32, bodySize int) int {
	l := 1 + varintLen(tsDelta) + varintLen(int64(offsetDelta)) + bodySize
	return varintLen(int64(l)) + l
}

// SingleRecordBatchSize returns the size of an uncompressed batch that holds
// only one record with a body of bodySize bytes. The accumulator compares it
// with max.request.size to reject a record that could never be sent.
func SingleRecordBatchSize(bodySize int) int {
	return HeaderSize + recordSize(0, 0, bodySize)
}
