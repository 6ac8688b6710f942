package compression

import (
	"errors"
	"fmt"
	"io"
)

// AppendDecompress appends the decompressed form of src, compressed with
// codec t, to dst and returns the extended slice. dst and src must not
// overlap.
//
// maxSize caps the number of bytes appended. Decompression stops as soon as
// the output would exceed it and fails with an error wrapping ErrTooLarge,
// so a compression bomb costs about maxSize bytes of memory (see "Memory
// and goroutines" in the package documentation for the small slack), never
// the size it claims. A negative maxSize counts as 0. Output of exactly
// maxSize bytes is accepted.
//
// Malformed input, including empty input for a codec other than None,
// fails with an error wrapping ErrCorrupt; an unknown t with one wrapping
// ErrUnsupported. On error, dst is returned with its original length and
// content.
//
// Snappy input may be in xerial framing or a single raw snappy block. Gzip
// input may hold several members, and LZ4 and zstd input several frames;
// their outputs are concatenated.
//
// AppendDecompress is safe for concurrent use. Decoders come from
// package-level pools, so steady-state calls allocate nothing but the
// growth of dst, and start no goroutine.
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
// as soon as more than maxSize bytes have come out. It grows dst to at most
// len(dst)+maxSize+1 bytes, the last one only to tell an overrun from the
// end; hint, the expected output size, only sizes the first growth. probe
// is a 1-byte buffer for when dst has no spare byte for that check; it
// lives in the pooled decoder, so that it costs no allocation.
func readCapped(dst []byte, r io.Reader, t Type, maxSize, hint int, probe []byte) ([]byte, error) {
	start := len(dst)
	limit := start + maxSize
	if hint <= 0 {
		hint = 4 << 10
	}
	for empty := 0; ; {
		var buf []byte
		switch {
		case len(dst) < cap(dst):
			buf = dst[len(dst):min(cap(dst), limit+1)]
		case len(dst) == limit:
			// Full, and dst has no spare byte: probe for one more byte
			// rather than copy dst to make room.
			buf = probe[:1]
		default:
			// Double what was decoded so far, never past the limit; the
			// growth that reaches the limit takes the probe byte along.
			n := min(max(hint, len(dst)-start), limit-len(dst))
			if len(dst)+n == limit {
				n++
			}
			dst = grow(dst, n)
			buf = dst[len(dst):min(cap(dst), limit+1)]
		}
		n, err := r.Read(buf)
		if len(dst)+n > limit {
			return dst[:start], tooLarge(t, maxSize)
		}
		dst = dst[:len(dst)+n] // n > 0 only when buf is dst's spare room
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

// grow returns dst with room for n more bytes. Unlike slices.Grow, it
// allocates exactly that much, so that a caller doubling its output up to
// a limit never allocates past the limit.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	grown := make([]byte, len(dst), len(dst)+n)
	copy(grown, dst)
	return grown
}
