package compression

import (
	"errors"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstdDecoder is a pooled zstd decoder and the output limit it is currently
// configured with.
//
// Decoding uses DecodeAll, which writes into dst directly and checks the
// output size after each block (at most 128 KiB). The decoder's limit
// (WithDecoderMaxMemory) is set per call, only when it changes. The same
// option also bounds the declared window of a frame, and a legitimate frame
// written by a streaming encoder may declare a window larger than its
// content (2 MiB at Kafka's default level), so the decoder's limit is the
// larger of maxSize and the first frame's window; AppendDecompress then
// checks maxSize exactly. The window is honoured only up to zstdMaxWindow.
type zstdDecoder struct {
	dec   *zstd.Decoder
	limit uint64
}

// zstdMaxWindow is the largest frame window accepted when it exceeds
// maxSize: 8 MiB, what zstd levels up to 19 use. Frames with larger windows
// decode only when maxSize covers the window.
const zstdMaxWindow = 8 << 20

var zstdDecoders = sync.Pool{New: func() any {
	// Concurrency 1: one block decoder, no goroutines (those exist only for
	// streaming, which we never use). Nothing to Close when the pool drops
	// it.
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		panic("compression: zstd.NewReader with constant options failed: " + err.Error())
	}
	return &zstdDecoder{dec: dec}
}}

func appendUnzstd(dst, src []byte, maxSize int) ([]byte, error) {
	// The decoder rejects a frame whose window exceeds its limit, and the
	// smallest window is 1 KiB, even for an empty frame.
	limit := uint64(max(maxSize, zstd.MinWindowSize))
	var h zstd.Header
	if err := h.Decode(src); err == nil && !h.Skippable {
		if h.HasFCS && h.FrameContentSize > uint64(maxSize) {
			return dst, tooLarge(Zstd, maxSize)
		}
		if !h.SingleSegment && h.WindowSize > limit && h.WindowSize <= zstdMaxWindow {
			limit = h.WindowSize
		}
	}
	d := zstdDecoders.Get().(*zstdDecoder)
	defer zstdDecoders.Put(d)
	if d.limit != limit {
		if err := d.dec.ResetWithOptions(nil, zstd.WithDecoderMaxMemory(limit)); err != nil {
			d.limit = 0
			return dst, corrupt(Zstd, err)
		}
		d.limit = limit
	}
	// DecodeAll compares part of its limit against len(dst), not against
	// what it appended, so it decodes into the empty tail of dst; with the
	// content size known, that tail already has room for all of it.
	if h.HasFCS {
		dst = slices.Grow(dst, int(h.FrameContentSize))
	}
	start := len(dst)
	tail := dst[start:]
	out, err := d.dec.DecodeAll(src, tail)
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return dst, tooLarge(Zstd, maxSize)
	case err != nil:
		return dst, corrupt(Zstd, err)
	case len(out) > maxSize:
		return dst, tooLarge(Zstd, maxSize)
	case len(out) == 0:
		return dst, nil
	case cap(tail) > 0 && &out[0] == &tail[:1][0]:
		return dst[:start+len(out)], nil // decoded in place
	}
	return append(dst, out...), nil
}
