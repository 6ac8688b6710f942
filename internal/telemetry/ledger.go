package telemetry

// Ledger remembers, per series, the value and time of its last push, for
// delta temporality (Java's KafkaMetricsCollector keeps the same in its
// LastValueTracker). K identifies a series; it should be a comparable
// struct of the metric and its labels, so that a lookup allocates nothing.
// Not safe for concurrent use: its one owner is the goroutine that pushes.
type Ledger[K comparable] struct {
	last map[K]entry
}

type entry struct {
	v  float64
	at int64
}

// Delta returns v minus the series' last value and the start of the
// interval it covers (the last push), and records v at now. A series
// never seen before counts from 0 at start (when it came to be).
func (l *Ledger[K]) Delta(k K, v float64, start, now int64) (float64, int64) {
	if l.last == nil {
		l.last = make(map[K]entry)
	}
	prev, ok := l.last[k]
	l.last[k] = entry{v: v, at: now}
	if !ok {
		return v, start
	}
	return v - prev.v, prev.at
}

// Last returns the series' last recorded value and time, if any.
func (l *Ledger[K]) Last(k K) (v float64, at int64, ok bool) {
	e, ok := l.last[k]
	return e.v, e.at, ok
}

// Reset forgets every series (Java resets when the temporality changes).
func (l *Ledger[K]) Reset() { clear(l.last) }
