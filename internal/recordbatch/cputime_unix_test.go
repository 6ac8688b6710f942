//go:build unix

package recordbatch

import "syscall"

// cpuSeconds returns the CPU time (user + system) the process has used. The
// benchmarks divide by it to report per-core rates that hold on a shared,
// loaded machine, where wall-clock rates do not.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
