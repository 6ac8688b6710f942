//go:build !unix

package zstdstudy

// cpuSeconds is not measured here: BenchmarkEncodeCPU reports no cpu-ns/op.
func cpuSeconds() float64 { return 0 }
