package conn

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var errShortHeader = errors.New("response header: truncated")

// parseResponseHeader parses a response header: the correlation id and, for
// flexible responses (header v1), the tagged fields, which it skips. It
// returns the correlation id and the body that follows.
func parseResponseHeader(b []byte, flexible bool) (corr int32, rest []byte, err error) {
	if len(b) < 4 {
		return 0, nil, errShortHeader
	}
	corr = int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if !flexible {
		return corr, b, nil
	}
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, errShortHeader
	}
	b = b[n:]
	for i := uint64(0); i < count; i++ {
		if _, n = binary.Uvarint(b); n <= 0 { // tag
			return 0, nil, errShortHeader
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, nil, errShortHeader
		}
		b = b[n:]
		if size > uint64(len(b)) {
			return 0, nil, fmt.Errorf("response header: tagged field of %d bytes, %d left", size, len(b))
		}
		b = b[size:]
	}
	return corr, b, nil
}
