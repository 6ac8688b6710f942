package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/samsa-go/samsa/producer"
)

// summary is the result of a run, printed as text or as one JSON object
// (-json). Durations in JSON are nanoseconds; sizes are in bytes, or in
// MiB (2^20 bytes) where the name says so, as in the text.
type summary struct {
	Cluster string `json:"cluster"`
	Topic   string `json:"topic"`
	// Partitions is the topic's partition count as the cluster's metadata
	// shows it after the run (on a real cluster, 0 when it could not be
	// read: see Warnings); PartitionsAsked is -partitions, the count the
	// example creates the topic with when it does not exist. They differ
	// for a topic that existed before with another count, and Warnings
	// then says so.
	Partitions      int    `json:"partitions,omitempty"`
	PartitionsAsked int    `json:"partitions_asked"`
	Compression     string `json:"compression"`
	Acks            string `json:"acks"`
	Idempotent      bool   `json:"idempotent"`
	Keys            int    `json:"keys"`
	RecordSize      int    `json:"record_size"`
	// Linger and BatchSize are the producer's effective settings: -linger
	// (0: none) and -batch-size, capped by the producer's request size.
	Linger    time.Duration `json:"linger_ns"`
	BatchSize int           `json:"batch_size"`

	// With -properties: PropertiesFile is the file's name; Settings say
	// where each setting with a flag came from (the flag, the file or the
	// flag's default); PropertiesUsed are the file's other keys, which the
	// producer uses as they are; IgnoredProperties are the keys samsa has
	// no setting for (producer.Config.IgnoredProperties).
	PropertiesFile    string    `json:"properties_file,omitempty"`
	Settings          []setting `json:"settings,omitempty"`
	PropertiesUsed    []string  `json:"properties_used,omitempty"`
	IgnoredProperties []string  `json:"ignored_properties,omitempty"`

	// Transactional is set for a run with -transactional-id: TxnRecords
	// records per transaction, Transactions of them committed.
	Transactional bool  `json:"transactional"`
	TxnRecords    int64 `json:"txn_records,omitempty"`
	Transactions  int64 `json:"transactions_committed,omitempty"`

	// Sent is the number of records the run meant to send; Records were
	// acknowledged (with acks=none: written to the connection, which is
	// all the producer learns), Failed failed.
	Sent    int64 `json:"sent"`
	Records int64 `json:"records"`
	Failed  int64 `json:"failed"`
	// Bytes is the payload (keys and values) of the acknowledged records.
	Bytes int64 `json:"bytes"`
	// Batches, BatchBytes and UncompressedBytes are from the producer's
	// Metrics: batches acknowledged, their bytes on the wire, and before
	// compression; CompressionRatio is UncompressedBytes / BatchBytes;
	// Retries counts batches sent again.
	Batches           int64   `json:"batches"`
	BatchBytes        int64   `json:"batch_bytes"`
	UncompressedBytes int64   `json:"uncompressed_bytes"`
	CompressionRatio  float64 `json:"compression_ratio"`
	Retries           int64   `json:"retries"`
	// RequestLatency, BatchSize and Throttle come from the producer's
	// Metrics: the Produce round trip (p50 and p99 estimates, max), the
	// batches' size on the wire, and the throttle time brokers asked for.
	RequestLatency latency       `json:"request_latency_ns"`
	BatchSizeAvg   float64       `json:"batch_size_avg"`
	BatchSizeMax   int64         `json:"batch_size_max"`
	ThrottleAvg    time.Duration `json:"throttle_avg_ns"`
	ThrottleMax    time.Duration `json:"throttle_max_ns"`

	// Elapsed runs from the first Send to the end of Flush.
	Elapsed       time.Duration `json:"elapsed_ns"`
	RecordsPerSec float64       `json:"records_per_sec"`
	MiBPerSec     float64       `json:"mib_per_sec"`
	// SendLatency is the time spent in SendCallback (one record in 64);
	// AckLatency is from SendCallback to the record's callback (every
	// acknowledged record).
	SendLatency latency `json:"send_latency_ns"`
	AckLatency  latency `json:"ack_latency_ns"`

	// Verified is true when nothing below went wrong: every record was
	// acknowledged, in order, and (embedded cluster) read back exactly once.
	Verified bool `json:"verified"`
	// PerKeyOrderVerified is true when each key's records stayed in one
	// partition and in Send order, as acknowledged and, when ReadBack, as
	// stored.
	PerKeyOrderVerified bool `json:"per_key_order_verified"`
	// ReadBack is true when the records were read back from the embedded
	// cluster; ReadBackRecords is how many were found.
	ReadBack        bool     `json:"read_back"`
	ReadBackRecords int64    `json:"read_back_records"`
	Interrupted     bool     `json:"interrupted,omitempty"`
	FirstError      string   `json:"first_error,omitempty"`
	Problems        []string `json:"problems,omitempty"`
	// Warnings are what the run found that is not a failure: the topic's
	// partition count differs from -partitions, or could not be read.
	Warnings []string `json:"warnings,omitempty"`
}

// latency holds quantiles of a latency histogram, in nanoseconds.
type latency struct {
	P50     time.Duration `json:"p50"`
	P99     time.Duration `json:"p99"`
	Max     time.Duration `json:"max"`
	Samples uint64        `json:"samples"`
}

func latencyOf(h *histogram) latency {
	return latency{P50: h.quantile(0.5), P99: h.quantile(0.99), Max: h.quantile(1), Samples: h.count()}
}

func (s *summary) problem(msg string) { s.Problems = append(s.Problems, msg) }

func (s *summary) warn(msg string) { s.Warnings = append(s.Warnings, msg) }

// fill copies the tracker's counts into s.
func (s *summary) fill(t *tracker, elapsed time.Duration) {
	s.Records = t.acked.Load()
	s.Failed = t.failed.Load()
	s.Bytes = s.Records * int64(s.RecordSize)
	if s.Keys > 0 {
		// Record i has key "key-<i mod keys>": count the key bytes of the
		// acknowledged records as if they were the first ones.
		s.Bytes += keyBytes(s.Records, s.Keys)
	}
	s.Elapsed = elapsed
	if sec := elapsed.Seconds(); sec > 0 {
		s.RecordsPerSec = float64(s.Records) / sec
		s.MiBPerSec = float64(s.Bytes) / sec / (1 << 20)
	}
	s.SendLatency = latencyOf(&t.sendLat)
	s.AckLatency = latencyOf(&t.ackLat)
}

// fillMetrics copies the producer's batch counts, request latency, batch
// size and throttle time into s.
func (s *summary) fillMetrics(m *producer.ProducerMetrics) {
	s.Batches, s.BatchBytes, s.UncompressedBytes = m.BatchAckTotal, m.BatchAckBytesTotal, m.BatchAckUncompressedBytesTotal
	s.Retries = m.BatchRetryTotal
	if m.BatchAckBytesTotal > 0 {
		s.CompressionRatio = float64(m.BatchAckUncompressedBytesTotal) / float64(m.BatchAckBytesTotal)
	}
	s.RequestLatency = latency{P50: m.RequestLatencyP50, P99: m.RequestLatencyP99, Max: m.RequestLatencyMax, Samples: uint64(m.ResponseTotal)}
	s.BatchSizeAvg, s.BatchSizeMax = m.BatchSizeAvg, m.BatchSizeMax
	s.ThrottleAvg, s.ThrottleMax = m.ProduceThrottleTimeAvg, m.ProduceThrottleTimeMax
}

// keyBytes returns the total length of the keys of records 0 to n-1, whose
// keys are "key-<i mod keys>".
func keyBytes(n int64, keys int) int64 {
	var total int64
	full, rest := n/int64(keys), n%int64(keys)
	for i := range int64(keys) {
		l := int64(len("key-")) + int64(len(fmt.Sprint(i)))
		c := full
		if i < rest {
			c++
		}
		total += l * c
	}
	return total
}

// err is the run's outcome for the exit status: nil when verified.
func (s *summary) err() error {
	if s.Verified {
		return nil
	}
	return fmt.Errorf("%w: %s", errNotVerified, strings.Join(s.Problems, "; "))
}

// errNotVerified is the error of a run where a record failed or the
// verification found a problem.
var errNotVerified = errors.New("not verified")

func (s *summary) writeJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(s)
}

func (s *summary) writeText(w io.Writer) error {
	var b strings.Builder
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "  %-14s", label)
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	where := s.Cluster
	if s.Partitions > 0 {
		where += fmt.Sprintf(", %d partitions", s.Partitions)
	}
	fmt.Fprintf(&b, "samsa producer: %d records to %q (%s)\n", s.Sent, s.Topic, where)
	for _, w := range s.Warnings {
		line("warning", "%s", w)
	}
	keys := "no keys"
	if s.Keys > 0 {
		keys = fmt.Sprintf("%d keys", s.Keys)
	}
	idem := "idempotent"
	if !s.Idempotent {
		idem = "not idempotent"
	}
	linger := "no linger"
	if s.Linger > 0 {
		linger = "linger " + s.Linger.String()
	}
	line("settings", "%d-byte values, %s, %s, acks=%s, %s", s.RecordSize, keys, s.Compression, s.Acks, idem)
	line("", "%s, batch size %s", linger, humanBytes(int64(s.BatchSize)))
	for i, st := range s.Settings {
		label := ""
		if i == 0 {
			label = "config"
		}
		line(label, "%s: %s (%s)", st.Name, st.Value, st.Source)
	}
	if len(s.PropertiesUsed) > 0 {
		line("", "also from %s: %s", s.PropertiesFile, strings.Join(s.PropertiesUsed, ", "))
	}
	if len(s.IgnoredProperties) > 0 {
		line("ignored", "%s (in %s: samsa has no such setting)", strings.Join(s.IgnoredProperties, ", "), s.PropertiesFile)
	}
	if s.Acks == producer.AcksNone.String() {
		line("records", "%d written to the connection, not acknowledged (acks=none), %d failed", s.Records, s.Failed)
	} else {
		line("records", "%d acknowledged, %d failed", s.Records, s.Failed)
	}
	if s.Transactional {
		line("transactions", "%d committed, %d records each", s.Transactions, s.TxnRecords)
	}
	line("bytes", "%s of keys and values", humanBytes(s.Bytes))
	line("batches", "%d, %s on the wire from %s: compression ratio %.2f, %d retries",
		s.Batches, humanBytes(s.BatchBytes), humanBytes(s.UncompressedBytes), s.CompressionRatio, s.Retries)
	line("", "batch size avg %s, max %s", humanBytes(int64(s.BatchSizeAvg)), humanBytes(s.BatchSizeMax))
	line("throughput", "%.0f records/s, %.1f MiB/s (%v)", s.RecordsPerSec, s.MiBPerSec, s.Elapsed.Round(time.Millisecond))
	line("send latency", "p50 %v  p99 %v", roundLatency(s.SendLatency.P50), roundLatency(s.SendLatency.P99))
	ackLabel := "ack latency"
	if s.Acks == producer.AcksNone.String() {
		ackLabel = "write latency" // no acknowledgement: until written
	}
	line(ackLabel, "p50 %v  p99 %v  max %v", roundLatency(s.AckLatency.P50), roundLatency(s.AckLatency.P99), roundLatency(s.AckLatency.Max))
	if s.RequestLatency.Samples > 0 {
		line("request", "p50 %v  p99 %v  max %v (Produce round trip)", roundLatency(s.RequestLatency.P50), roundLatency(s.RequestLatency.P99), roundLatency(s.RequestLatency.Max))
	}
	line("throttle", "avg %v  max %v", s.ThrottleAvg, s.ThrottleMax)
	switch {
	case !s.Verified:
		line("verified", "NO")
		for _, p := range s.Problems {
			line("", "%s", p)
		}
	case s.ReadBack:
		order := "; order per key kept"
		if s.Keys == 0 {
			order = ""
		}
		line("verified", "yes: read back %d records, each once%s", s.ReadBackRecords, order)
	case s.Acks == producer.AcksNone.String():
		line("verified", "yes, as completed (acks=none; records not read back from a real cluster)")
	default:
		line("verified", "yes, as acknowledged (records not read back from a real cluster)")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// roundLatency keeps three significant digits.
func roundLatency(d time.Duration) time.Duration {
	for r := time.Duration(1); ; r *= 10 {
		if d < 1000*r {
			return d.Round(r)
		}
	}
}
