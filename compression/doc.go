// Package compression implements Kafka's record batch codecs (none, gzip,
// snappy, lz4 and zstd) in the wire formats every broker and client reads.
//
// # Compressing
//
// Create one Compressor per codec and level when the producer starts, and
// share it between goroutines:
//
//	c, err := compression.NewCompressor(compression.Zstd, 0) // 0: the codec's default level
//	if err != nil {
//		return err // an unknown codec or level; errors.Is(err, compression.ErrUnsupported)
//	}
//	buf, err = c.AppendCompress(buf[:0], records) // appends to buf, returns the extended slice
//
// Only the records section of a batch is compressed; the batch header stays
// plain, and its attributes carry the Type (bits 0-2) so that readers know
// the codec.
//
// # Decompressing
//
// AppendDecompress needs no setup. Always pass a limit: the output of a
// hostile or broken batch is bounded by maxSize, never by what it claims.
//
//	out, err := compression.AppendDecompress(compression.LZ4, out[:0], payload, 64<<20)
//	switch {
//	case errors.Is(err, compression.ErrTooLarge): // more than 64 MiB
//	case errors.Is(err, compression.ErrCorrupt): // not valid lz4
//	}
//
// # Wire formats
//
//   - Gzip: a standard gzip stream (RFC 1952), via klauspost/compress/gzip.
//     Decoding accepts concatenated members.
//   - Snappy: xerial framing, as the Java client writes it: the magic
//     "\x82SNAPPY\x00", version 1 and compatible version 1 (big-endian
//     int32s), then chunks of a big-endian int32 length and a raw snappy
//     block, each of at most 32 KiB of input. Decoding also accepts a single
//     raw snappy block, which some clients send.
//   - LZ4: the LZ4 frame format with 64 KiB independent blocks and no
//     checksums, like the Java client; the batch's CRC-32C covers the
//     data. At the default level each block is compressed straight into
//     dst by LZ4's reference fast algorithm, so the frame is the Java
//     client's byte for byte (lz4fast.go); at the others by pierrec/lz4/v4's
//     high-compression one (see lz4.go for the frame and why 64 KiB).
//     Decoding accepts any block size, checksum flags and dependent blocks.
//   - Zstd: standard zstd frames (klauspost/compress/zstd). Brokers accept
//     them from Produce v7 (Kafka 2.1) on; older ones answer
//     UNSUPPORTED_COMPRESSION_TYPE.
//
// # Levels
//
// NewCompressor takes Kafka's compression.<codec>.level values (KIP-390):
// gzip 1-9 (default 6), lz4 1-17 (default 9: LZ4's fast compressor, as in
// the Java client, see NewCompressor), zstd -131072 to 22 (default 3).
// Level 0 always means the codec's default; none and snappy have no
// levels.
//
// # Ratio
//
// At the default levels each codec stores no more than the Java client's
// codecs make of the same records (within 2 %, and mostly less;
// TestCompressedSizeNoWorseThanJavaClient, and against a real broker
// interop's TestRealKafkaCompressionNoWorseThanJava): zstd and gzip
// entropy-code text with few repeats (random letters, hex) as zstd-jni and
// zlib do, snappy finds the 4-byte matches snappy-java finds, and LZ4 runs
// the Java client's own algorithm.
//
// # Memory and goroutines
//
// Encoders and decoders are reused: gzip stream encoders (two per call
// when the Huffman-only pass runs) and lz4 block compressors (16 KiB at
// the fast level, 256 KiB at the others) live in per-Compressor pools,
// zstd encoders in a per-Compressor free list that keeps one encoder per
// concurrent caller (a zstd encoder holds 0.7 MiB at level 1, 1.7 MiB at
// 3, 20 MiB at 6-9 and 50 MiB at 10+), and decoders live in package-level
// pools. Steady-state calls allocate only what dst
// needs to grow, and no call starts a goroutine, so nothing needs closing.
// Pass a dst with spare capacity (a recycled buffer) to avoid even that.
//
// Decompression grows dst by doubling, up to maxSize+1 bytes, and stops
// as soon as the output passes maxSize, so a bomb costs about 2*maxSize
// bytes of allocation in all plus a bounded slack:
//
//   - LZ4: one block buffer of the frame's block size (at most 4 MiB).
//   - Snappy: nothing; each chunk's size is checked before it is decoded.
//   - Gzip: the 32 KiB deflate window.
//   - Zstd: frames that declare their content size are checked before
//     decoding. Frames that do not are streamed through a ring buffer of
//     one window, kept with the pooled decoder. A window larger than
//     maxSize is accepted up to 8 MiB (zstd levels up to 19; the Java
//     client declares 2 MiB at its default level), larger ones only when
//     maxSize covers them, otherwise the frame fails with ErrTooLarge.
//
// # Compatibility notes
//
//   - Snappy decoding uses the S2 decoder, which also accepts S2's
//     extensions of the snappy block format. Output is plain snappy.
//   - LZ4 and snappy output carries no checksum of its own, so a flipped
//     bit may decode to wrong data without error; Kafka's batch CRC-32C
//     detects it. Gzip and zstd check their own checksums.
package compression
