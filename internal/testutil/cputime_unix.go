//go:build unix

package testutil

import "syscall"

// CPUSeconds returns the CPU time (user + system) the process has used, so
// that benchmarks can report cost per CPU second, which holds on a shared,
// loaded machine where wall-clock rates do not. 0 where it is not measured.
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
