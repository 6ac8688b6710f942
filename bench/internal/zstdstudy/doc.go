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
//
// BenchmarkEncodeCPU compresses the same 1 MiB batch as a producer meets
// it: with samsa's window (1 MiB) and kgo's (64 KiB), warm (the same
// buffer every time) or cold (a new buffer each time out of 128 MiB, the
// peer benchmark's BufferMemory, which samsa's pool fills while the
// encoder is the bottleneck), on one encoder or on two at once (samsa
// compresses a request's batches on CompressionConcurrency goroutines,
// kgo one batch at a time). It reports cpu-ns/op, the process's CPU time
// per batch, which holds better than ns/op on a shared machine:
//
//	go test -run x -bench EncodeCPU -benchtime 30x -count 6 ./internal/zstdstudy/
package zstdstudy
