package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// The knobs shared by every client, as the issue fixes them.
const (
	// Linger is how long a batch waits for more records (linger.ms=5).
	Linger = 5 * time.Millisecond
	// BatchBytes is the largest batch (batch.size=1MiB).
	BatchBytes = 1 << 20
	// BufferBytes bounds the memory a client buffers, where it has such a
	// bound (buffer.memory, queue.buffering.max.kbytes, MaxBufferedBytes).
	BufferBytes = 128 << 20
	// MaxRequestBytes bounds one Produce request where a client has such a
	// bound of its own (max.request.size, message.max.bytes). It must hold
	// at least one full batch and its framing.
	MaxRequestBytes = 16 << 20
	// MaxBufferedRecords bounds the records a client buffers, where it
	// counts records rather than bytes (queue.buffering.max.messages,
	// kgo's MaxBufferedRecords): high enough that BufferBytes binds first
	// on every workload but the 100-byte ones.
	MaxBufferedRecords = 1 << 20
)

// Spec is one workload: what a client produces and to which topic.
type Spec struct {
	// Name identifies the workload in flags and tables.
	Name string `json:"name"`
	// Records is the number of records to produce (the warm-up record
	// excluded).
	Records int `json:"records"`
	// ValueSize is the size in bytes of every value.
	ValueSize int `json:"value_size"`
	// Keys is the number of distinct keys; 0 means unkeyed (null keys).
	Keys int `json:"keys"`
	// Compression is "none", "lz4" or "zstd".
	Compression string `json:"compression"`
	// Partitions is the partition count of the workload's topic.
	Partitions int `json:"partitions"`
	// TxnRecords, when positive, makes the client transactional: it
	// commits a transaction every TxnRecords records (and the rest at
	// the end). Only clients that are a TxnClient run such a workload.
	TxnRecords int `json:"txn_records,omitempty"`
}

// Topic returns the name of the workload's topic.
func (s Spec) Topic() string { return "bench-" + s.Name }

// DefaultRecords is the record count of every workload in a full run.
const DefaultRecords = 1_000_000

// All returns the four workloads of the issue, each with records records.
func All(records int) []Spec {
	return []Spec{
		{Name: "100B", Records: records, ValueSize: 100, Compression: "none", Partitions: 8},
		{Name: "100B-lz4", Records: records, ValueSize: 100, Compression: "lz4", Partitions: 8},
		{Name: "1KiB-zstd-keyed", Records: records, ValueSize: 1024, Keys: 10_000, Compression: "zstd", Partitions: 8},
		{Name: "100B-keyed-10k-partitions", Records: records, ValueSize: 100, Keys: 100_000, Compression: "none", Partitions: 10_000},
	}
}

// ByName returns the workload of All named name.
func ByName(name string, records int) (Spec, error) {
	for _, s := range append(All(records), Optional(records)...) {
		if s.Name == name {
			return s, nil
		}
	}
	return Spec{}, fmt.Errorf("unknown workload %q", name)
}

// Optional returns the workloads run only when named (-workloads): the
// transactional one (issue 16: 1 000 records per transaction, samsa and
// kgo, on kfake or Kafka; the test broker has no transactions yet).
func Optional(records int) []Spec {
	return []Spec{
		{Name: "100B-txn", Records: records, ValueSize: 100, Compression: "none", Partitions: 8, TxnRecords: 1000},
	}
}

// Validate reports a Spec that no client could run.
func (s Spec) Validate() error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("workload: empty name"))
	}
	if s.Records <= 0 {
		errs = append(errs, fmt.Errorf("workload %s: records %d <= 0", s.Name, s.Records))
	}
	if s.ValueSize <= 0 || s.ValueSize > BatchBytes/2 {
		errs = append(errs, fmt.Errorf("workload %s: value size %d not in [1, %d]", s.Name, s.ValueSize, BatchBytes/2))
	}
	if s.Keys < 0 {
		errs = append(errs, fmt.Errorf("workload %s: keys %d < 0", s.Name, s.Keys))
	}
	if s.TxnRecords < 0 {
		errs = append(errs, fmt.Errorf("workload %s: txn records %d < 0", s.Name, s.TxnRecords))
	}
	if s.Partitions <= 0 {
		errs = append(errs, fmt.Errorf("workload %s: partitions %d <= 0", s.Name, s.Partitions))
	}
	switch s.Compression {
	case "none", "lz4", "zstd":
	default:
		errs = append(errs, fmt.Errorf("workload %s: compression %q is not none, lz4 or zstd", s.Name, s.Compression))
	}
	return errors.Join(errs...)
}

// valuePoolSize is the number of distinct values a Payload holds; records
// cycle through them.
const valuePoolSize = 4096

// Payload holds the keys and values of a workload, made once before the
// clock starts so that every client pays nothing to make them. Its slices
// are never written after NewPayload returns, so clients that keep a
// reference until the ack (kgo, sarama, kafka-go) may share them.
type Payload struct {
	keys   [][]byte
	values [][]byte
}

// words is the vocabulary of values: text-like, so that lz4 and zstd find
// something to compress (about 2-3x), as in typical JSON or log records.
var words = []string{
	"user", "id", "event", "click", "view", "purchase", "session", "time",
	"region", "eu-west", "us-east", "status", "ok", "error", "retry",
	"amount", "currency", "EUR", "USD", "device", "mobile", "desktop",
	"page", "home", "cart", "checkout", "true", "false", "null", "count",
}

// NewPayload makes s's keys and values from a fixed seed: every client, and
// every run, produces the same bytes.
func NewPayload(s Spec) *Payload {
	rng := rand.New(rand.NewPCG(1, uint64(s.ValueSize)))
	p := &Payload{values: make([][]byte, valuePoolSize)}
	for i := range p.values {
		v := make([]byte, 0, s.ValueSize+16)
		for len(v) < s.ValueSize {
			v = append(v, '"')
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, '"', ':')
			v = strconv.AppendUint(v, uint64(rng.Uint32()%100000), 10)
			v = append(v, ',')
		}
		p.values[i] = v[:s.ValueSize:s.ValueSize]
	}
	if s.Keys > 0 {
		p.keys = make([][]byte, s.Keys)
		for i := range p.keys {
			p.keys[i] = []byte(fmt.Sprintf("key-%08d", i))
		}
	}
	return p
}

// KeyStride scatters keys: record i takes key (i × KeyStride) mod Keys.
const KeyStride = 7919

// Key returns record i's key, nil for an unkeyed workload. Consecutive
// records take keys in a scattered order, so that keyed batches do not fill
// one partition at a time.
func (p *Payload) Key(i int) []byte {
	if len(p.keys) == 0 {
		return nil
	}
	return p.keys[(i*KeyStride)%len(p.keys)]
}

// Value returns record i's value.
func (p *Payload) Value(i int) []byte { return p.values[i%len(p.values)] }

// Result is what a client process prints, as one JSON line on stdout, when
// it has produced a workload.
type Result struct {
	// Client names the library.
	Client string `json:"client"`
	// Workload is the Spec's name.
	Workload string `json:"workload"`
	// Records is the number of records sent in the timed phase.
	Records int `json:"records"`
	// Acked and Errors count the records acknowledged and failed.
	Acked  int64 `json:"acked"`
	Errors int64 `json:"errors"`
	// FirstError is the text of the first failure, if any.
	FirstError string `json:"first_error,omitempty"`
	// WallNanos is the time from the first send to the last ack.
	WallNanos int64 `json:"wall_ns"`
	// SetupNanos is the time to create the client and get the warm-up
	// record acknowledged (connections and metadata), not timed.
	SetupNanos int64 `json:"setup_ns"`
	// ProduceCPUNanos is the process's user+system time (every thread)
	// spent from the first send to the last ack: the timed phase only,
	// without start-up, connection setup, the warm-up record or Close.
	// Zero when the client could not read it.
	ProduceCPUNanos int64 `json:"produce_cpu_ns,omitempty"`
	// Notes describes client-specific choices (idempotence, partitioner).
	Notes string `json:"notes,omitempty"`
}

// Encode returns r as one JSON line.
func (r Result) Encode() []byte {
	b, _ := json.Marshal(r) // a struct of plain fields cannot fail
	return append(b, '\n')
}
