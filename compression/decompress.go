package compression

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

// AppendDecompress appends the decompressed form of src, compressed with
// codec t, to dst and returns the extended slice. dst and src must not
// overlap.
//
// maxSize caps the number of bytes appended. Decompression stops as soon as
// the output would exceed it and fails with an error wrapping ErrTooLarge,
// so a compression bomb costs about maxSize bytes of memory plus a small
// codec-dependent slack (one LZ4 block, one zstd block, one snappy chunk),
// never the size it claims. A negative maxSize counts as 0.
//
// Malformed input, including empty input for a codec other than None,
// fails with an error wrapping ErrCorrupt; an unknown t with one wrapping
// ErrUnsupported. On error, dst is returned with its original length.
//
// Snappy input may be in xerial framing or a single raw snappy block. Gzip
// input may hold several members, zstd input several frames, and LZ4 input
// several frames; their outputs are concatenated.
//
// AppendDecompress is safe for concurrent use. Decoders come from
// package-level pools, so steady-state calls allocate only the growth of
// dst (for zstd, see the package documentation) and start no goroutine.
func AppendDecompress(t Type, dst, src []byte, maxSize int) ([]byte, error) {
	maxSize = max(maxSize, 0)
	if t != None && len(src) == 0 {
		return dst, fmt.Errorf("compression: %s: %w: empty input", t, ErrCorrupt)
	}
	switch t {
	case None:
		if len(src) > maxSize {
			return dst, tooLarge(t, maxSize)
		}
		return append(dst, src...), nil
	case Gzip:
		return appendGunzip(dst, src, maxSize)
	case Snappy:
		return appendUnsnappy(dst, src, maxSize)
	case LZ4:
		return appendUnlz4(dst, src, maxSize)
	case Zstd:
		return appendUnzstd(dst, src, maxSize)
	}
	return dst, fmt.Errorf("compression: %w type %s", ErrUnsupported, t)
}

func tooLarge(t Type, maxSize int) error {
	return fmt.Errorf("compression: %s: %w: more than %d bytes", t, ErrTooLarge, maxSize)
}

func corrupt(t Type, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("compression: %s: %w: %w", t, ErrCorrupt, err)
}

// readCapped appends everything r produces to dst, failing with ErrTooLarge
// as soon as more than maxSize bytes have come out. It never grows dst
// beyond len(dst)+maxSize+1 bytes; hint, the expected output size, only
// sizes the first growth.
func readCapped(dst []byte, r io.Reader, t Type, maxSize, hint int) ([]byte, error) {
	start := len(dst)
	limit := start + maxSize + 1 // one byte more than allowed, to see an overrun
	if hint <= 0 {
		hint = 4 << 10
	}
	for empty := 0; ; {
		if len(dst) == cap(dst) {
			grow := max(hint, len(dst)-start) // at least double what we have
			grow = min(grow, limit-len(dst))
			dst = slices.Grow(dst, grow)
		}
		n, err := r.Read(dst[len(dst):min(cap(dst), limit)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > maxSize {
			return dst[:start], tooLarge(t, maxSize)
		}
		switch {
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return dst[:start], corrupt(t, err)
		case n > 0:
			empty = 0
		default:
			if empty++; empty > 100 { // a reader that makes no progress
				return dst[:start], corrupt(t, io.ErrNoProgress)
			}
		}
	}
}
