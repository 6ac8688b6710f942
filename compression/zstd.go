package compression

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A zstd encoder holds large state once used: about 0.7 MiB at the fastest
// speed, 1.7 MiB at the default, 20 MiB at "better" and 50 MiB at "best".
// A shared encoder with GOMAXPROCS slots would rotate through all of them
// and end up holding that many states even for one calling goroutine, so
// each Compressor keeps a free list instead: a call takes an idle encoder
// or makes one, and puts it back unless GOMAXPROCS are already idle (per
// window class below: at most 2 × GOMAXPROCS idle encoders in all). The
// state retained is that of the peak number of concurrent calls (one, for
// a producer that compresses on its IO goroutine). EncodeAll starts no
// goroutine, so dropped encoders need no Close.
//
// The window is where the rest of an encoder's memory goes: with the
// level's default window (8 MiB, 4 MiB at the fastest speed) an encoder
// that compressed a 1 MiB batch keeps about 18 MiB; with a 1 MiB window,
// 4 MiB. Input no longer than the window compresses to the same bytes
// whatever the window (matches cannot reach before the input's start, and
// a single-segment frame does not write the window size), so batches up to
// zstdSmallWindow, the common case (Kafka's max.request.size is 1 MiB),
// use encoders with that window, and only larger ones, made on first need,
// the level's default window: the output never changes
// (TestZstdWindowClassesGiveTheSameBytes).

// zstdSmallWindow is the window of the encoders used for input up to its
// size.
const zstdSmallWindow = 1 << 20

// zstdClass is one kind of encoder: its window and its idle encoders.
type zstdClass struct {
	window int                // 0: the level's default
	free   chan *zstd.Encoder // idle encoders, at most GOMAXPROCS
}

func (c *Compressor) newZstdEncoder(window int) (*zstd.Encoder, error) {
	opts := []zstd.EOption{
		zstd.WithEncoderLevel(c.zstdLevel),
		zstd.WithEncoderConcurrency(1),
		// An empty batch still becomes a valid frame, which every other
		// zstd decoder reads.
		zstd.WithZeroFrames(true),
		// Entropy-code the literals of a block in which no match was
		// found, as the reference zstd (the Java client's zstd-jni) does
		// at every level from 1 up. The pure-Go encoder's default stores
		// such a block raw below its "better" speed: random letters (the
		// Java ProducerPerformance payload) then take 1.65 times what the
		// Java client stores, hex or base64 text about twice.
		zstd.WithAllLitEntropyCompression(c.zstdAllLit),
	}
	if window > 0 {
		opts = append(opts, zstd.WithWindowSize(window))
	}
	return zstd.NewWriter(nil, opts...)
}

func (c *Compressor) appendZstd(dst, src []byte) ([]byte, error) {
	class := &c.zstdSmall
	if len(src) > zstdSmallWindow {
		class = &c.zstdLarge
	}
	var enc *zstd.Encoder
	select {
	case enc = <-class.free:
	default:
		var err error
		if enc, err = c.newZstdEncoder(class.window); err != nil {
			return dst, fmt.Errorf("compression: zstd encoder: %w", err)
		}
	}
	dst = enc.EncodeAll(src, dst)
	select {
	case class.free <- enc:
	default: // enough idle encoders already
	}
	return dst, nil
}

// zstd input is split into frames here, by walking the frame and block
// headers, and each frame is decoded on its own:
//
//   - A frame that declares its content size (EncodeAll writes one, like
//     librdkafka) is checked against what is left of maxSize before
//     anything is allocated, then decoded with DecodeAll straight into dst,
//     grown to exactly that size.
//   - A frame without one (streaming encoders such as the Java client's
//     ZstdOutputStream) is decoded as a stream through readCapped, which
//     stops one byte past maxSize.
//
// Either way a pooled zstd.Decoder does the work. It has concurrency 1, so
// it never starts a goroutine and needs no Close when the pool drops it.
// Its stream mode keeps a ring buffer of one window (up to 8 MiB at the
// levels Kafka clients use), reused across calls.

// zstdMaxWindow is the largest frame window accepted beyond maxSize: 8 MiB,
// the window of zstd levels up to 19. Frames with larger windows (levels
// 20-22) decode only when maxSize is at least their window.
const zstdMaxWindow = 8 << 20

// zstdDecoder is a pooled decoder with the options it currently has: its
// limit is the largest window it accepts (and, for DecodeAll, output size).
type zstdDecoder struct {
	dec   *zstd.Decoder
	limit uint64
	src   bytes.Reader
	probe [1]byte
}

var zstdDecoders = sync.Pool{New: func() any {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeBuffersBelow(0))
	if err != nil {
		panic("compression: zstd.NewReader with constant options: " + err.Error())
	}
	return &zstdDecoder{dec: dec}
}}

var (
	errZstdTruncated = errors.New("truncated zstd frame")
	errZstdBlockType = errors.New("reserved zstd block type")
)

// zstdFrameLen returns the length of the frame at the start of src and its
// decoded header.
func zstdFrameLen(src []byte) (int, zstd.Header, error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return 0, h, err
	}
	if h.Skippable {
		n := uint64(h.HeaderSize) + uint64(h.SkippableSize)
		if n > uint64(len(src)) {
			return 0, h, errZstdTruncated
		}
		return int(n), h, nil
	}
	pos := h.HeaderSize
	for {
		if len(src)-pos < 3 {
			return 0, h, errZstdTruncated
		}
		bh := uint32(src[pos]) | uint32(src[pos+1])<<8 | uint32(src[pos+2])<<16
		pos += 3
		size := int(bh >> 3)
		switch (bh >> 1) & 3 {
		case 1: // RLE: one byte repeated size times
			size = 1
		case 3:
			return 0, h, errZstdBlockType
		}
		if len(src)-pos < size {
			return 0, h, errZstdTruncated
		}
		pos += size
		if bh&1 == 1 { // last block
			break
		}
	}
	if h.HasCheckSum {
		if len(src)-pos < 4 {
			return 0, h, errZstdTruncated
		}
		pos += 4
	}
	return pos, h, nil
}

func appendUnzstd(dst, src []byte, maxSize int) ([]byte, error) {
	d := zstdDecoders.Get().(*zstdDecoder)
	defer func() {
		d.src.Reset(nil)
		zstdDecoders.Put(d)
	}()
	start := len(dst)
	for len(src) > 0 {
		n, h, err := zstdFrameLen(src)
		if err != nil {
			return dst[:start], corrupt(Zstd, err)
		}
		frame := src[:n]
		src = src[n:]
		if h.Skippable {
			continue
		}
		budget := maxSize - (len(dst) - start)
		if h.HasFCS && h.FrameContentSize > uint64(budget) {
			return dst[:start], tooLarge(Zstd, maxSize)
		}
		// The decoder rejects windows above its limit, and the smallest
		// window is 1 KiB, even for an empty frame.
		limit := uint64(max(budget, zstd.MinWindowSize))
		if h.WindowSize > limit {
			if h.WindowSize > zstdMaxWindow {
				return dst[:start], tooLarge(Zstd, maxSize)
			}
			limit = h.WindowSize
		}
		if d.limit != limit {
			if err := d.dec.ResetWithOptions(nil, zstd.WithDecoderMaxMemory(limit)); err != nil {
				d.limit = 0
				return dst[:start], corrupt(Zstd, err)
			}
			d.limit = limit
		}
		if h.HasFCS {
			size := int(h.FrameContentSize)
			if cap(dst)-len(dst) < size {
				// Double what was decoded so far, so that many small
				// frames do not regrow dst each time; never past maxSize.
				dst = grow(dst, max(size, min(len(dst)-start, budget)))
			}
			dst, err = appendZstdFrame(d.dec, dst, frame, size)
		} else {
			d.src.Reset(frame)
			if err = d.dec.Reset(&d.src); err == nil {
				dst, err = readCapped(dst, d.dec, Zstd, budget, 0, d.probe[:])
			}
			// A stream stopped before its end keeps the decoder's only
			// block decoder, and DecodeAll would wait for it forever.
			// Reset hands it back.
			_ = d.dec.Reset(nil)
		}
		switch {
		case errors.Is(err, ErrCorrupt):
			return dst[:start], err
		case errors.Is(err, ErrTooLarge), errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
			return dst[:start], tooLarge(Zstd, maxSize)
		case err != nil:
			return dst[:start], corrupt(Zstd, err)
		}
	}
	return dst, nil
}

// appendZstdFrame decodes one frame of known content size onto dst, which
// should have room for it so that DecodeAll writes in place. DecodeAll
// compares part of its limit against len(dst) rather than against what it
// appends, so it is handed only the empty tail of dst.
func appendZstdFrame(dec *zstd.Decoder, dst, frame []byte, size int) ([]byte, error) {
	at := len(dst)
	tail := dst[at:]
	out, err := dec.DecodeAll(frame, tail)
	switch {
	case err != nil:
		return dst, err
	case len(out) != size: // DecodeAll checks this; be sure
		return dst, zstd.ErrFrameSizeMismatch
	case size == 0:
		return dst, nil
	case &out[0] != &tail[:1][0]:
		return append(dst, out...), nil // not in place after all
	}
	return dst[:at+size], nil
}
