// Package metrics holds the producer's metric primitives: counters, gauges
// and fixed-bucket histograms that cost a few atomic operations per
// observation, take no lock and allocate nothing, so Send, the IO goroutine
// and the completion goroutine can record into them on their hot paths.
//
// A Histogram has log-linear buckets: every value below 8 has its own
// bucket, and each power of two above is split into 8 equal buckets, so a
// bucket's width is at most 1/8 of its lower bound. A quantile is estimated
// from the bucket holding the value of that rank, within RelativeError of
// the true value. Count, sum (for the mean) and max are exact.
//
// Readers take a Snapshot at any time from any goroutine; a snapshot taken
// while writers run may count an observation in some fields and not yet in
// others (each field is read atomically, not the set of them).
package metrics
