//go:build !linux

package producer

import "time"

// threadCountersOK reports whether readThreadCounters measures anything:
// only Linux has per-thread counters (RUSAGE_THREAD).
const threadCountersOK = false

func readThreadCounters(c *threadCounters) { *c = threadCounters{} }

func cpuTimes() (process, thread time.Duration, now time.Time) { return 0, 0, time.Now() }
