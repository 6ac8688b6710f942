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
//   - LZ4: the LZ4 frame format (pierrec/lz4/v4) with 64 KiB independent
//     blocks and no checksums, like the Java client; the batch's CRC-32C
//     covers the data. Decoding accepts any block size and checksum flags.
//   - Zstd: standard zstd frames (klauspost/compress/zstd). Brokers accept
//     them from Produce v7 (Kafka 2.1) on; older ones answer
//     UNSUPPORTED_COMPRESSION_TYPE.
//
// # Levels
//
// NewCompressor takes Kafka's compression.<codec>.level values (KIP-390):
// gzip 1-9 (default 6), lz4 1-17 (default here: LZ4's fast mode, see
// NewCompressor), zstd -131072 to 22 (default 3). Level 0 always means the
// codec's default; none and snappy have no levels.
//
// # Memory and goroutines
//
// Encoders and decoders are reused: gzip and lz4 stream encoders live in a
// per-Compressor pool, zstd shares one encoder per Compressor, and
// decoders live in package-level pools. Steady-state calls allocate only
// what dst needs to grow, and no call starts a goroutine, so nothing needs
// closing.
//
// Decompression stops as soon as the output passes maxSize. The memory a
// bomb can cost is maxSize plus a bounded slack: one LZ4 block (at most
// 4 MiB), one snappy chunk, or for zstd one 128 KiB block plus the slice
// growth of dst. A zstd frame whose declared window exceeds maxSize (a
// streaming encoder declares its window even for small content) is
// decoded with a limit of up to 8 MiB and then checked against maxSize.
package compression
