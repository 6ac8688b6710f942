package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/producer"
)

// progressInterval is how often the progress line is redrawn.
const progressInterval = 150 * time.Millisecond

// progressBar redraws one line on a terminal, from its own goroutine, until
// stop.
type progressBar struct {
	w         io.Writer
	metrics   func() producer.Metrics
	acked     *atomic.Int64
	failed    *atomic.Int64
	total     int64
	recBytes  int64 // payload bytes per record, for MiB/s
	start     time.Time
	done      chan struct{}
	wg        sync.WaitGroup
	lastWidth int
}

// startProgress starts redrawing the progress of total records on w: done
// is acked + failed, metrics gives the producer's buffer and in-flight
// state.
func startProgress(w io.Writer, metrics func() producer.Metrics, acked, failed *atomic.Int64, total, recBytes int64) *progressBar {
	b := &progressBar{w: w, metrics: metrics, acked: acked, failed: failed, total: total, recBytes: recBytes,
		start: time.Now(), done: make(chan struct{})}
	b.wg.Go(b.loop)
	return b
}

func (b *progressBar) loop() {
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			b.draw()
		case <-b.done:
			b.draw()
			fmt.Fprintln(b.w)
			return
		}
	}
}

// stop draws the final state, ends the line and waits for the goroutine.
func (b *progressBar) stop() {
	close(b.done)
	b.wg.Wait()
}

func (b *progressBar) draw() {
	line := progressLine(b.acked.Load()+b.failed.Load(), b.total, b.recBytes, time.Since(b.start), b.metrics().Producer)
	// Pad over a longer previous line instead of relying on terminal
	// escapes.
	pad := max(b.lastWidth-len(line), 0)
	b.lastWidth = len(line)
	fmt.Fprintf(b.w, "\r%s%s", line, strings.Repeat(" ", pad))
}

// barWidth is the number of cells of the bar itself.
const barWidth = 30

// progressLine renders the progress of done records out of total after
// elapsed: the bar, percent, records/s and MiB/s since the start, in-flight
// Produce requests and buffer memory in use.
func progressLine(done, total, recBytes int64, elapsed time.Duration, m producer.ProducerMetrics) string {
	frac := 0.0
	if total > 0 {
		frac = min(float64(done)/float64(total), 1)
	}
	cells := int(frac * barWidth)
	bar := strings.Repeat("=", cells)
	if cells < barWidth {
		bar += ">" + strings.Repeat(" ", barWidth-cells-1)
	}
	rate, mbs := 0.0, 0.0
	if sec := elapsed.Seconds(); sec > 0 {
		rate = float64(done) / sec
		mbs = float64(done*recBytes) / sec / (1 << 20)
	}
	return fmt.Sprintf("[%s] %5.1f%%  %s rec/s  %6.1f MiB/s  in-flight %d  buffer %s/%s",
		bar, 100*frac, humanCount(rate), mbs, m.RequestsInFlight, humanBytes(m.BufferTotalBytes-m.BufferAvailableBytes), humanBytes(m.BufferTotalBytes))
}

// humanCount writes n with a k or M suffix, in 6 columns.
func humanCount(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%5.2fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%5.1fk", n/1e3)
	}
	return fmt.Sprintf("%6.0f", n)
}

// humanBytes writes n bytes in KiB or MiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
