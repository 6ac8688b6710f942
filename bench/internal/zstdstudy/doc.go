// Package zstdstudy holds a benchmark, not code: what the zstd encoder's
// options (encoder reuse, window and block size, checksum, lower memory)
// do to the cost and the ratio of compressing the record batches of the
// peer benchmark's 1KiB-zstd-keyed workload (W3), at Kafka's default level
// (klauspost's SpeedDefault, about zstd level 3).
//
// Run it with
//
//	go test -run x -bench . -benchmem ./internal/zstdstudy/
//
// Each case reports ns/op and MB/s of uncompressed input, the ratio
// (uncompressed / compressed bytes) and the encoder's retained heap after
// one encode (B-retained). The output is always one standard zstd frame
// per batch, which every Kafka consumer reads; the frame checksum is
// optional in the format.
package zstdstudy
