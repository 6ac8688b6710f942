package recordbatch

import (
	"errors"
	"fmt"
)

// ErrCorrupt is wrapped by every error about a malformed batch: truncated
// input, a length that does not match, a bad record count or offset delta,
// bad varints, trailing bytes, corrupt compressed data. ErrCRCMismatch and
// ErrBadMagic wrap it too, so errors.Is(err, ErrCorrupt) catches every
// malformed batch. The test broker answers CORRUPT_MESSAGE for it.
var ErrCorrupt = errors.New("recordbatch: corrupt record batch")

// ErrCRCMismatch is returned by Decode and Validate when the CRC-32C in the
// header does not match the bytes. It wraps ErrCorrupt.
var ErrCRCMismatch = fmt.Errorf("%w: CRC-32C mismatch", ErrCorrupt)

// ErrBadMagic is returned when the magic byte is not 2 (this package reads
// only record batch v2). It wraps ErrCorrupt.
var ErrBadMagic = fmt.Errorf("%w: unsupported magic", ErrCorrupt)
