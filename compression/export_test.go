package compression

// LZ4FastBlock returns a fast LZ4 block compressor of its own
// (lz4fast.go's compressBlock), for the external benchmarks, with the
// room its output needs.
func LZ4FastBlock() (compress func(dst, src []byte) int, bound func(n int) int) {
	return new(lz4Fast).compressBlock, lz4BlockBound
}
