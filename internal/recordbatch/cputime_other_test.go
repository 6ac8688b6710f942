//go:build !unix

package recordbatch

// cpuSeconds is not measured on this platform; the per-CPU metric is then
// left out.
func cpuSeconds() float64 { return 0 }
