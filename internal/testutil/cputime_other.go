//go:build !unix

package testutil

// CPUSeconds is not measured on this platform: 0, and the benchmarks leave
// their per-CPU metrics out.
func CPUSeconds() float64 { return 0 }
