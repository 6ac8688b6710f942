//go:build unix

package zstdstudy

import "syscall"

// cpuSeconds returns the CPU time (user + system) the process has used, so
// that BenchmarkEncodeCPU reports cost that holds on a shared, loaded
// machine, where ns/op does not.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
