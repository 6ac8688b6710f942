package compression

import (
	"errors"
	"fmt"
	"strings"
)

// Type is a Kafka compression codec, as stored in bits 0-2 of a record
// batch's attributes.
type Type int8

// The codecs Kafka defines, with their attribute ids.
const (
	None   Type = 0 // no compression
	Gzip   Type = 1 // gzip (RFC 1952)
	Snappy Type = 2 // snappy blocks in xerial framing, as the Java client writes them
	LZ4    Type = 3 // the LZ4 frame format
	Zstd   Type = 4 // zstd frames; needs Produce v7+ (Kafka 2.1+)
)

var typeNames = [...]string{None: "none", Gzip: "gzip", Snappy: "snappy", LZ4: "lz4", Zstd: "zstd"}

// String returns Kafka's name for t ("none", "gzip", "snappy", "lz4",
// "zstd"), the same name compression.type takes. An unknown value prints as
// "compression(N)".
func (t Type) String() string {
	if t.valid() {
		return typeNames[t]
	}
	return fmt.Sprintf("compression(%d)", int8(t))
}

func (t Type) valid() bool { return t >= None && t <= Zstd }

// ParseType returns the Type named by s, one of "none", "gzip", "snappy",
// "lz4" or "zstd", ignoring case and surrounding spaces. Other values fail
// with an error wrapping ErrUnsupported that names s and lists the valid
// names.
func ParseType(s string) (Type, error) {
	name := strings.TrimSpace(s)
	for t, n := range typeNames {
		if strings.EqualFold(name, n) {
			return Type(t), nil
		}
	}
	return None, fmt.Errorf("compression: %w type %q (valid: %s)", ErrUnsupported, s, strings.Join(typeNames[:], ", "))
}

var (
	// ErrTooLarge is wrapped by the error AppendDecompress returns when the
	// decompressed data would exceed its maxSize. Decompression stops as
	// soon as the limit is crossed, so a compression bomb costs at most
	// about maxSize bytes of memory.
	ErrTooLarge = errors.New("decompressed data exceeds the size limit")

	// ErrCorrupt is wrapped by the error AppendDecompress returns when src
	// is not valid data of the given codec: bad framing, bad checksum,
	// truncated input, or empty input for a codec other than None.
	ErrCorrupt = errors.New("corrupt compressed data")

	// ErrUnsupported is wrapped by the errors of ParseType, NewCompressor and
	// AppendDecompress for a Type outside None..Zstd, and by NewCompressor
	// for a level the codec does not have.
	ErrUnsupported = errors.New("unsupported")
)
