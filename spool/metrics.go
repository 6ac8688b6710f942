package spool

import (
	"time"

	"github.com/samsa-go/samsa/internal/metrics"
)

// Metrics is a snapshot of the spool's state and counters (cumulative
// since Open).
type Metrics struct {
	// Bytes is the size of the segment files; Segments their count.
	Bytes    int64
	Segments int
	// MaxBytes is Options.MaxBytes (a Warn at 80 % is the producer's).
	MaxBytes int64
	// Unacked counts the records appended (or recovered) and not
	// acknowledged.
	Unacked int64
	// OldestUnacked is the age of the oldest unacknowledged record, from
	// its append (for a recovered record, its timestamp), to within 256
	// records; 0 when every record is acknowledged.
	OldestUnacked time.Duration
	// Appended, Acked and Replayed count records; Replayed those yielded
	// by Unacked.
	Appended, Acked, Replayed uint64
	// DamagedRegions, SkippedBytes, SkippedRecords and TruncatedBytes are
	// Open's (Recovery).
	DamagedRegions int
	SkippedBytes   int64
	SkippedRecords uint64
	TruncatedBytes int64
	// Fsyncs counts fsyncs of the log; FsyncTime is their total duration
	// and FsyncMax the longest; FsyncP50 and FsyncP99 estimate their
	// median and 99th percentile within 1/16.
	Fsyncs             uint64
	FsyncTime          time.Duration
	FsyncMax           time.Duration
	FsyncP50, FsyncP99 time.Duration
	// PositionWrites counts writes of the position file, DeletedSegments
	// the segments deleted.
	PositionWrites, DeletedSegments uint64
	// Failed is the error that stopped the spool, or nil.
	Failed error
}

// Metrics returns a snapshot.
func (s *Spool) Metrics() Metrics {
	s.mu.Lock()
	m := Metrics{
		Bytes:          s.disk,
		Segments:       len(s.segs),
		MaxBytes:       s.opts.MaxBytes,
		Unacked:        int64(s.next-s.acks.below) - int64(s.acks.count()),
		Acked:          s.acked,
		DamagedRegions: s.recovery.DamagedRegions,
		SkippedBytes:   s.recovery.SkippedBytes,
		SkippedRecords: s.recovery.SkippedRecords,
		TruncatedBytes: s.recovery.TruncatedBytes,
		Failed:         s.failed,
	}
	s.trimSamplesLocked()
	if s.acks.below < s.next && len(s.samples) > 0 {
		m.OldestUnacked = time.Since(s.samples[0].at)
	}
	s.mu.Unlock()
	m.Appended = s.m.appended.Load()
	m.Replayed = s.m.replayed.Load()
	h := new(metrics.HistogramSnapshot) // 4 KiB: off the stack
	s.m.fsyncTime.SnapshotInto(h)
	m.Fsyncs = h.Count
	m.FsyncTime = time.Duration(h.Sum)
	m.FsyncMax = time.Duration(h.Max)
	m.FsyncP50 = time.Duration(h.Quantile(0.5))
	m.FsyncP99 = time.Duration(h.Quantile(0.99))
	m.PositionWrites = s.m.positionWrites.Load()
	m.DeletedSegments = s.m.deletedSegments.Load()
	return m
}

// trimSamplesLocked keeps the samples from the newest at or below the
// oldest unacknowledged record on.
func (s *Spool) trimSamplesLocked() {
	if s.acks.below >= s.next {
		s.samples = s.samples[:0]
		return
	}
	i := 0
	for i+1 < len(s.samples) && s.samples[i+1].seq <= s.acks.below {
		i++
	}
	if i > 0 {
		s.samples = append(s.samples[:0], s.samples[i:]...)
	}
}
