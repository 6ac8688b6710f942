//go:build linux

package producer

import (
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD, which package syscall does not
// name: the counters of the calling thread only.
const rusageThread = 1

// threadCountersOK reports whether readThreadCounters measures anything.
const threadCountersOK = true

// readThreadCounters reads the calling thread's context switches and
// minor page faults. getrusage is a raw system call: the goroutine
// does not leave its P for it.
func readThreadCounters(c *threadCounters) {
	var ru syscall.Rusage
	if syscall.Getrusage(rusageThread, &ru) != nil {
		*c = threadCounters{}
		return
	}
	*c = threadCounters{vcsw: int64(ru.Nvcsw), ivcsw: int64(ru.Nivcsw), minflt: int64(ru.Minflt)} // int32 on 32-bit Linux
}

// cpuTimes returns the CPU time of the whole process and of the calling
// thread, each up to date within a scheduler tick, and the time.
func cpuTimes() (process, thread time.Duration, now time.Time) {
	tv := func(t syscall.Timeval) time.Duration {
		return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		process = tv(ru.Utime) + tv(ru.Stime)
	}
	if syscall.Getrusage(rusageThread, &ru) == nil {
		thread = tv(ru.Utime) + tv(ru.Stime)
	}
	return process, thread, time.Now()
}
