package harness

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// RSSInterval is how often the harness samples a client's resident set
// size while it runs.
const RSSInterval = 100 * time.Millisecond

// rssSampler records a process's VmRSS from /proc/PID/status every
// RSSInterval until stop is called.
type rssSampler struct {
	stopc chan struct{}
	done  chan struct{}
	kib   []int64
}

// sampleRSS starts sampling pid. On a system without /proc the series
// stays empty.
func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	path := fmt.Sprintf("/proc/%d/status", pid)
	go func() {
		defer close(s.done)
		t := time.NewTicker(RSSInterval)
		defer t.Stop()
		for {
			if kib, ok := readVmRSS(path); ok {
				s.kib = append(s.kib, kib)
			}
			select {
			case <-s.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the series, in KiB, one value per
// RSSInterval from the process's start.
func (s *rssSampler) stop() []int64 {
	close(s.stopc)
	<-s.done
	return s.kib
}

// readVmRSS returns the VmRSS line of a /proc/PID/status file, in KiB.
func readVmRSS(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseVmRSS(b)
}

func parseVmRSS(status []byte) (int64, bool) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 1 {
			return 0, false
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		if len(f) > 1 && string(f[1]) != "kB" {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// rssDigest returns a compact view of a series for the table: at most n
// values in MiB, each the maximum of its share of the series.
func rssDigest(kib []int64, n int) []float64 {
	if len(kib) == 0 || n <= 0 {
		return nil
	}
	n = min(n, len(kib))
	out := make([]float64, n)
	for i := range n {
		lo, hi := i*len(kib)/n, (i+1)*len(kib)/n
		var m int64
		for _, v := range kib[lo:hi] {
			m = max(m, v)
		}
		out[i] = float64(m) / 1024
	}
	return out
}
