package compression

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/klauspost/compress/s2"
)

// Xerial framing, as snappy-java's SnappyOutputStream writes it and the Java
// client sends it: an 8-byte magic, a big-endian int32 version and an int32
// minimum compatible version (both 1), then chunks of a big-endian int32
// length followed by one raw snappy block of at most 32 KiB of input.
var xerialMagic = [8]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// Each chunk is compressed with S2's "better" snappy encoder, not its
// default one (s2.EncodeSnappy): that one looks matches up by a hash of 6
// bytes and gives up on a block that it cannot shrink by 1/32, so it
// misses the 4- and 5-byte matches that the reference snappy (the Java
// client's snappy-java) finds. On log lines and CSV it stored 6 % more
// than the Java client, and it sent batches of small-alphabet data (digits,
// a few letters) uncompressed that snappy-java shrinks by 10 to 20 %. The
// better encoder also hashes 4 bytes: it stores 2 to 7 % less than the
// Java client on those payloads, at about half the speed of the default
// one (see BenchmarkCompressPayloads).
const (
	xerialHeaderLen = 16
	xerialChunkLen  = 32 << 10 // snappy-java's default block size
)

func appendSnappy(dst, src []byte) []byte {
	dst = append(dst, xerialMagic[:]...)
	dst = binary.BigEndian.AppendUint32(dst, 1) // version
	dst = binary.BigEndian.AppendUint32(dst, 1) // minimum compatible version
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialChunkLen)]
		src = src[len(chunk):]
		at := len(dst)
		dst = slices.Grow(dst, 4+s2.MaxEncodedLen(len(chunk)))
		block := s2.EncodeSnappyBetter(dst[at+4:cap(dst)], chunk)
		binary.BigEndian.PutUint32(dst[at:at+4], uint32(len(block)))
		dst = dst[:at+4+len(block)]
	}
	return dst
}

var errXerialTruncated = errors.New("truncated xerial chunk")

func appendUnsnappy(dst, src []byte, maxSize int) ([]byte, error) {
	if len(src) < xerialHeaderLen || !bytes.Equal(src[:len(xerialMagic)], xerialMagic[:]) {
		// A single raw block, as some clients send.
		return appendSnappyBlock(dst, src, len(dst), maxSize)
	}
	start := len(dst)
	for rest := src[xerialHeaderLen:]; len(rest) > 0; {
		if len(rest) < 4 {
			return dst[:start], corrupt(Snappy, errXerialTruncated)
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return dst[:start], corrupt(Snappy, errXerialTruncated)
		}
		var err error
		if dst, err = appendSnappyBlock(dst, rest[:n], start, maxSize); err != nil {
			return dst[:start], err
		}
		rest = rest[n:]
	}
	return dst, nil
}

// appendSnappyBlock decodes one raw snappy block onto dst, checking its
// declared length against what remains of maxSize (counted from start)
// before allocating anything.
func appendSnappyBlock(dst, block []byte, start, maxSize int) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return dst, corrupt(Snappy, err)
	}
	if n > maxSize-(len(dst)-start) {
		return dst, tooLarge(Snappy, maxSize)
	}
	at := len(dst)
	if cap(dst)-at < n {
		// Double what was decoded so far, never past maxSize.
		dst = grow(dst, max(n, min(at-start, maxSize-(at-start))))
	}
	if _, err := s2.Decode(dst[at:at+n], block); err != nil {
		return dst[:at], corrupt(Snappy, err)
	}
	return dst[:at+n], nil
}
