// The spool's observability (issue 34): Metrics.Spool, its rows in Each,
// and the Warn when the spool passes 80 % of MaxBytes.

package producer

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/spool"
)

// SpoolMetrics are Config.Spool's metrics (Metrics.Spool; nil without a
// spool), samsa's own, named "spool-...". Counters count since New (the
// spool's Open).
type SpoolMetrics struct {
	// Bytes is the size of the spool's segment files on disk
	// (spool-bytes), Segments their count (spool-segments) and MaxBytes
	// the bound Send waits at (spool-max-bytes: SpoolConfig.MaxBytes).
	Bytes, Segments, MaxBytes int64
	// Records counts the records in the spool not yet acknowledged:
	// written and waiting for their delivery, or left by an earlier
	// producer for the replay (spool-records).
	Records int64
	// OldestRecordAge is the age of the oldest record not yet
	// acknowledged, from its write (for a record found at New, its
	// timestamp), to within 256 records; 0 when every record is
	// acknowledged (spool-oldest-record-age).
	OldestRecordAge time.Duration
	// AppendTotal counts the records written to the spool
	// (spool-append-total), AckTotal those acknowledged
	// (spool-ack-total: delivered, or failed for good) and ReplayTotal
	// those New found unacknowledged and sent again (spool-replay-total).
	AppendTotal, AckTotal, ReplayTotal int64
	// SkippedRecords counts the records New's Open lost to damage in the
	// segment files (spool-skipped-records; spool.Recovery).
	SkippedRecords int64
	// FsyncTotal counts the fsyncs of the log (spool-fsync-total) and
	// FsyncTimeTotal their total duration (spool-fsync-time-total).
	FsyncTotal     int64
	FsyncTimeTotal time.Duration
	// FsyncLatencyAvg and FsyncLatencyMax are the mean and longest fsync
	// of the log, FsyncLatencyP50 and FsyncLatencyP99 estimates of its
	// median and 99th percentile within 1/16 (spool-fsync-latency-avg,
	// -max, -p50, -p99), as the request latencies.
	FsyncLatencyAvg, FsyncLatencyMax time.Duration
	FsyncLatencyP50, FsyncLatencyP99 time.Duration
	// Failed is set once a write or fsync failed and stopped the spool:
	// every later Send fails with ErrSpoolFailed (spool-failed, 1 or 0).
	Failed bool
	// With SpoolConfig.ExactlyOnce (0 without): DuplicatesSkipped counts
	// the records New found unacknowledged in the spool but already
	// committed by the producer before it, so not sent again
	// (spool-duplicates-skipped-total); TransactionTotal the transactions
	// committed (spool-transaction-total) and TransactionAbortTotal those
	// aborted, their records sent again in the next one
	// (spool-transaction-abort-total). Producer.SpoolExactlyOnceMetrics
	// returns the same three.
	DuplicatesSkipped, TransactionTotal, TransactionAbortTotal int64
}

func metricBool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// spoolMetricTable is Metrics.Spool's part of Each (producer scope: no
// labels), reported only with a spool.
var spoolMetricTable = []metricEntry[SpoolMetrics]{
	gaugeEntry(ScopeProducer, "spool-bytes", "bytes", "Bytes of the spool's segment files.", func(m *SpoolMetrics) float64 { return float64(m.Bytes) }),
	gaugeEntry(ScopeProducer, "spool-segments", "segments", "The spool's segment files.", func(m *SpoolMetrics) float64 { return float64(m.Segments) }),
	gaugeEntry(ScopeProducer, "spool-max-bytes", "bytes", "The spool's MaxBytes.", func(m *SpoolMetrics) float64 { return float64(m.MaxBytes) }),
	gaugeEntry(ScopeProducer, "spool-records", "records", "Records in the spool not yet acknowledged.", func(m *SpoolMetrics) float64 { return float64(m.Records) }),
	gaugeEntry(ScopeProducer, "spool-oldest-record-age", "seconds", "Age of the spool's oldest record not yet acknowledged.", func(m *SpoolMetrics) float64 { return metricSecs(m.OldestRecordAge) }),
	counterEntry(ScopeProducer, "spool-append-total", "records", "Records written to the spool.", func(m *SpoolMetrics) float64 { return float64(m.AppendTotal) }),
	counterEntry(ScopeProducer, "spool-ack-total", "records", "Records acknowledged to the spool.", func(m *SpoolMetrics) float64 { return float64(m.AckTotal) }),
	counterEntry(ScopeProducer, "spool-replay-total", "records", "Records found in the spool at New and sent again.", func(m *SpoolMetrics) float64 { return float64(m.ReplayTotal) }),
	gaugeEntry(ScopeProducer, "spool-skipped-records", "records", "Records lost to damage in the spool's files, found at New.", func(m *SpoolMetrics) float64 { return float64(m.SkippedRecords) }),
	counterEntry(ScopeProducer, "spool-fsync-total", "fsyncs", "Fsyncs of the spool's log.", func(m *SpoolMetrics) float64 { return float64(m.FsyncTotal) }),
	counterEntry(ScopeProducer, "spool-fsync-time-total", "seconds", "Time spent in fsyncs of the spool's log.", func(m *SpoolMetrics) float64 { return metricSecs(m.FsyncTimeTotal) }),
	gaugeEntry(ScopeProducer, "spool-fsync-latency-avg", "seconds", "Mean fsync of the spool's log.", func(m *SpoolMetrics) float64 { return metricSecs(m.FsyncLatencyAvg) }),
	gaugeEntry(ScopeProducer, "spool-fsync-latency-max", "seconds", "Longest fsync of the spool's log.", func(m *SpoolMetrics) float64 { return metricSecs(m.FsyncLatencyMax) }),
	gaugeEntry(ScopeProducer, "spool-fsync-latency-p50", "seconds", "Median fsync of the spool's log (estimate).", func(m *SpoolMetrics) float64 { return metricSecs(m.FsyncLatencyP50) }),
	gaugeEntry(ScopeProducer, "spool-fsync-latency-p99", "seconds", "99th percentile fsync of the spool's log (estimate).", func(m *SpoolMetrics) float64 { return metricSecs(m.FsyncLatencyP99) }),
	gaugeEntry(ScopeProducer, "spool-failed", "boolean", "1 once a write or fsync failed and stopped the spool.", func(m *SpoolMetrics) float64 { return metricBool(m.Failed) }),
	counterEntry(ScopeProducer, "spool-duplicates-skipped-total", "records", "Exactly-once mode: records found in the spool at New that the producer before had committed, not sent again.", func(m *SpoolMetrics) float64 { return float64(m.DuplicatesSkipped) }),
	counterEntry(ScopeProducer, "spool-transaction-total", "transactions", "Exactly-once mode: transactions of the spool's records committed.", func(m *SpoolMetrics) float64 { return float64(m.TransactionTotal) }),
	counterEntry(ScopeProducer, "spool-transaction-abort-total", "transactions", "Exactly-once mode: transactions of the spool's records aborted (their records sent again).", func(m *SpoolMetrics) float64 { return float64(m.TransactionAbortTotal) }),
}

// spoolMetricsOf converts the spool's snapshot.
func spoolMetricsOf(m spool.Metrics) *SpoolMetrics {
	out := &SpoolMetrics{
		Bytes:           m.Bytes,
		Segments:        int64(m.Segments),
		MaxBytes:        m.MaxBytes,
		Records:         m.Unacked,
		OldestRecordAge: m.OldestUnacked,
		AppendTotal:     int64(m.Appended),
		AckTotal:        int64(m.Acked),
		ReplayTotal:     int64(m.Replayed),
		SkippedRecords:  int64(m.SkippedRecords),
		FsyncTotal:      int64(m.Fsyncs),
		FsyncTimeTotal:  m.FsyncTime,
		FsyncLatencyMax: m.FsyncMax,
		FsyncLatencyP50: m.FsyncP50,
		FsyncLatencyP99: m.FsyncP99,
		Failed:          m.Failed != nil,
	}
	if m.Fsyncs > 0 {
		out.FsyncLatencyAvg = m.FsyncTime / time.Duration(m.Fsyncs)
	}
	return out
}

// The spool's usage thresholds, in percent of MaxBytes: a Warn when it
// reaches spoolWarnPercent, an Info when it is back below
// spoolClearPercent (hysteresis: one line per crossing, not per record).
const (
	spoolWarnPercent  = 80
	spoolClearPercent = 70
)

// spoolUsage watches the spool's bytes on disk (spool.Options.OnUsage,
// called after every write and every deletion of segments) and logs the
// crossings: a Warn when the spool reaches 80 % of MaxBytes, then
// nothing until it is back below 70 %, an Info then. The lines name the
// directory, its bytes and MaxBytes, never a record. The common call (no
// crossing) is two atomic loads and a comparison. A crossing is handled
// by one goroutine at a time, the one that got mu (TryLock: a call that
// does not get it returns, and the holder sees its bytes): it reads the
// spool's current bytes, stores the state, logs (under mu, so the lines
// come in the order of the changes; a log handler that Sends through the
// producer does not deadlock, its call fails TryLock), releases mu and
// reads the bytes again, starting over if they crossed meanwhile. So
// calls that arrive out of order (concurrent writers, the spool's
// goroutine) cannot leave the state wrong: it follows the last bytes.
type spoolUsage struct {
	log  *slog.Logger
	dir  string
	max  atomic.Int64 // MaxBytes, 0 until the spool is open (calls ignored)
	sp   atomic.Pointer[spool.Spool]
	high atomic.Bool // a Warn was logged and no Info since
	mu   sync.Mutex  // held by the goroutine handling a crossing

	// Tests: the bytes instead of the spool's, and a pause after the
	// crossing's read.
	testUsage func() int64
	afterRead func()
}

func newSpoolUsage(log *slog.Logger, sc *SpoolConfig) *spoolUsage {
	if sc == nil {
		return nil
	}
	return &spoolUsage{log: log, dir: sc.Dir}
}

// hook is spool.Options.OnUsage: nil without a spool.
func (u *spoolUsage) hook() func(int64) {
	if u == nil {
		return nil
	}
	return u.observe
}

// opened starts watching sp, and logs the Warn at once if New found it
// above 80 % already.
func (u *spoolUsage) opened(sp *spool.Spool) {
	if u == nil || sp == nil {
		return
	}
	u.sp.Store(sp)
	u.max.Store(sp.Metrics().MaxBytes)
	u.observe(sp.Usage())
}

// current is the spool's bytes now (bytes without a spool: tests).
func (u *spoolUsage) current(bytes int64) int64 {
	if f := u.testUsage; f != nil {
		return f()
	}
	if sp := u.sp.Load(); sp != nil {
		return sp.Usage()
	}
	return bytes
}

// settled reports whether bytes crosses no threshold for the state high.
func settled(high bool, bytes, limit int64) bool {
	pct := float64(bytes) * 100 / float64(limit)
	return high && pct >= spoolClearPercent || !high && pct < spoolWarnPercent
}

func (u *spoolUsage) observe(bytes int64) {
	limit := u.max.Load()
	if limit <= 0 || settled(u.high.Load(), bytes, limit) {
		return
	}
	for {
		if !u.mu.TryLock() {
			return // the holder reads the bytes again after it
		}
		bytes = u.current(bytes)
		if f := u.afterRead; f != nil {
			f()
		}
		pct := float64(bytes) * 100 / float64(limit)
		high := u.high.Load()
		switch {
		case !high && pct >= spoolWarnPercent:
			u.high.Store(true)
			u.log.Warn("producer: the spool passed 80% of its MaxBytes; at MaxBytes Send waits up to MaxBlock, then fails with ErrBufferExhausted",
				"dir", u.dir, "bytes", bytes, "max_bytes", limit, "percent", int(pct))
		case high && pct < spoolClearPercent:
			u.high.Store(false)
			u.log.Info("producer: the spool is back below 70% of its MaxBytes",
				"dir", u.dir, "bytes", bytes, "max_bytes", limit, "percent", int(pct))
		}
		u.mu.Unlock()
		// A call that failed TryLock, or read the old state before the
		// store, returned: its bytes are the spool's now, read again.
		if settled(u.high.Load(), u.current(bytes), limit) {
			return
		}
	}
}
