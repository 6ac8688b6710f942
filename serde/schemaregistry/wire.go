package schemaregistry

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Confluent's wire format, which every Schema Registry serializer writes
// (the Java KafkaAvroSerializer family, confluent-kafka-go, Apicurio's
// serdes with as-confluent):
//
//	byte 0      magic byte 0
//	bytes 1..4  the schema id, a big-endian int32
//	Protobuf    the message-index array (see AppendMessageIndexes)
//	rest        the payload: Avro binary, Protobuf binary, or JSON text
const (
	// MagicByte is the first byte of a record in Confluent's wire format.
	MagicByte byte = 0
	// HeaderSize is the length of the magic byte and the schema id.
	HeaderSize = 5
)

// ErrInvalidWireFormat is returned (wrapped, with the reason) by
// ParseHeader and ParseMessageIndexes, and so by every deserializer, for
// bytes that are not in Confluent's wire format: too short, another magic
// byte, or a malformed message-index array.
var ErrInvalidWireFormat = errors.New("schemaregistry: not in Confluent's wire format")

// AppendHeader appends the magic byte and the schema id, big-endian, to
// dst.
func AppendHeader(dst []byte, id int) []byte {
	return append(dst, MagicByte, byte(uint32(id)>>24), byte(uint32(id)>>16), byte(uint32(id)>>8), byte(uint32(id)))
}

// ParseHeader reads the magic byte and the schema id of b and returns the
// id and the bytes after it. Its errors wrap ErrInvalidWireFormat.
func ParseHeader(b []byte) (id int, rest []byte, err error) {
	if len(b) < HeaderSize {
		return 0, nil, fmt.Errorf("%w: %d bytes, fewer than the 5 of the magic byte and schema id", ErrInvalidWireFormat, len(b))
	}
	if b[0] != MagicByte {
		return 0, nil, fmt.Errorf("%w: magic byte %d, not 0", ErrInvalidWireFormat, b[0])
	}
	return int(int32(binary.BigEndian.Uint32(b[1:5]))), b[HeaderSize:], nil
}

// AppendMessageIndexes appends the message-index array of Confluent's
// Protobuf format to dst: the path to the record's message type in its
// schema's .proto file (the index among the file's top-level messages,
// then among that message's nested messages, and so on). It is written as
// a zig-zag varint count followed by each index as a zig-zag varint, and
// the common path [0] (the file's first message) as the single byte 0.
func AppendMessageIndexes(dst []byte, indexes []int) []byte {
	if len(indexes) == 1 && indexes[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(indexes)))
	for _, i := range indexes {
		dst = binary.AppendVarint(dst, int64(i))
	}
	return dst
}

// maxMessageDepth bounds the message-index array a reader accepts: far
// deeper than any .proto file nests its messages, and small enough that a
// hostile count allocates nothing large.
const maxMessageDepth = 100

// ParseMessageIndexes reads a message-index array (see
// AppendMessageIndexes) from the start of b and returns the indexes and
// the bytes after them: a count of 0 is the path [0]. A negative count or
// index, a count above 100, or a truncated array is an error wrapping
// ErrInvalidWireFormat.
func ParseMessageIndexes(b []byte) (indexes []int, rest []byte, err error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return nil, nil, fmt.Errorf("%w: the message-index count is truncated or overflows", ErrInvalidWireFormat)
	}
	b = b[k:]
	switch {
	case n == 0:
		return []int{0}, b, nil
	case n < 0 || n > maxMessageDepth:
		return nil, nil, fmt.Errorf("%w: message-index count %d, not 0..%d", ErrInvalidWireFormat, n, maxMessageDepth)
	}
	indexes = make([]int, n)
	for i := range indexes {
		v, k := binary.Varint(b)
		if k <= 0 {
			return nil, nil, fmt.Errorf("%w: message index %d of %d is truncated or overflows", ErrInvalidWireFormat, i, n)
		}
		if v < 0 || v > 1<<31-1 {
			return nil, nil, fmt.Errorf("%w: message index %d is %d", ErrInvalidWireFormat, i, v)
		}
		indexes[i] = int(v)
		b = b[k:]
	}
	return indexes, b, nil
}
