package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The knobs shared by every client, as the issue fixes them. Everything
// else is each client's default.
const (
	// Linger is how long a batch waits for more records (linger.ms=5).
	Linger = 5 * time.Millisecond
	// BatchBytes is the largest batch (batch.size=1MiB).
	BatchBytes = 1 << 20
	// DefaultBufferMemory is Spec.BufferMemory unless the harness says
	// otherwise (peerbench -buffer-memory).
	DefaultBufferMemory = 64 << 20
)

// Spec is one workload: what a client produces and to which topic.
type Spec struct {
	// Name identifies the workload in flags and tables: a base workload's
	// name (All, Optional), then "-" and the key order unless it is
	// KeysScattered, then "-" and the values unless they are the base
	// workload's own: "1KiB-zstd-keyed-zipf", "100B-letters".
	Name string `json:"name"`
	// ID is the base workload's short name in the issues ("W1", "W2c");
	// empty for the optional ones.
	ID string `json:"id,omitempty"`
	// Records is the number of records to produce (the warm-up record
	// excluded).
	Records int `json:"records"`
	// ValueSize is the size in bytes of every value.
	ValueSize int `json:"value_size"`
	// Values is the kind of values: ValuesText, ValuesJSON or
	// ValuesLetters.
	Values string `json:"values"`
	// Keys is the number of distinct keys; 0 means unkeyed (null keys).
	Keys int `json:"keys"`
	// KeyOrder is the order records take their keys in: KeysScattered,
	// KeysOrdered or KeysZipf; empty when unkeyed.
	KeyOrder string `json:"key_order,omitempty"`
	// Compression is "none", "lz4" or "zstd".
	Compression string `json:"compression"`
	// Partitions is the partition count of the workload's topic.
	Partitions int `json:"partitions"`
	// TxnRecords, when positive, makes the client transactional: it
	// commits a transaction every TxnRecords records (and the rest at
	// the end). Only clients that are a TxnClient run such a workload.
	TxnRecords int `json:"txn_records,omitempty"`
	// BufferMemory is the bytes a client may buffer, for every client
	// with such a bound (samsa BufferMemory, kgo MaxBufferedBytes, Java
	// buffer.memory, librdkafka queue.buffering.max.kbytes, kafka-go's
	// bytes in flight as its client bounds them). Not part of Name: the
	// harness passes it to every client with -buffer-memory.
	BufferMemory int64 `json:"buffer_memory"`
	// FreshValues gives every record a value of its own, newly allocated
	// and filled before the client is handed it, as an application that
	// serializes each record does; otherwise records share the payload's
	// 4 096 values. A client that keeps the caller's value until the
	// record completes (kgo, sarama, kafka-go) then holds that memory,
	// as it would in an application. Not part of Name: the harness passes
	// it to the Go clients with -fresh-values.
	FreshValues bool `json:"fresh_values,omitempty"`
	// Rate, when positive, runs the fixed-rate mode (issue 35, rate.go):
	// Records records at Rate records a second, paced by Java's
	// ProducerPerformance throttle, the first RateWarmup of them a
	// warm-up that no figure counts. Not part of Name: the harness passes
	// it with -rate and -rate-warmup.
	Rate       int64 `json:"rate,omitempty"`
	RateWarmup int   `json:"rate_warmup,omitempty"`
	// Linger is the clients' linger: 0 the shared knob (Linger, 5 ms),
	// LingerClientDefault each client's own default, or this. Not part of
	// Name: the harness passes it with -linger.
	Linger time.Duration `json:"linger_ns,omitempty"`
}

// LingerOr returns the linger a client sets and whether it sets one
// (false: the client's own default).
func (s Spec) LingerOr() (time.Duration, bool) {
	switch {
	case s.Linger == 0:
		return Linger, true
	case s.Linger < 0:
		return 0, false
	}
	return s.Linger, true
}

// Topic returns the name of the workload's topic.
func (s Spec) Topic() string { return "bench-" + s.Name }

// DefaultRecords is the record count of every workload in a full run.
const DefaultRecords = 1_000_000

// All returns the six workloads, each with records records and
// DefaultBufferMemory: W1 to W4 as the first peer benchmark ran them, and
// W2c and W3c, W2 and W3 with JSON values.
func All(records int) []Spec {
	return withBuffer([]Spec{
		{Name: "100B", ID: "W1", Records: records, ValueSize: 100, Values: ValuesText, Compression: "none", Partitions: 8},
		{Name: "100B-lz4", ID: "W2", Records: records, ValueSize: 100, Values: ValuesText, Compression: "lz4", Partitions: 8},
		{Name: "100B-json-lz4", ID: "W2c", Records: records, ValueSize: 100, Values: ValuesJSON, Compression: "lz4", Partitions: 8},
		{Name: "1KiB-zstd-keyed", ID: "W3", Records: records, ValueSize: 1024, Values: ValuesText, Keys: 10_000, KeyOrder: KeysScattered, Compression: "zstd", Partitions: 8},
		{Name: "1KiB-json-zstd-keyed", ID: "W3c", Records: records, ValueSize: 1024, Values: ValuesJSON, Keys: 10_000, KeyOrder: KeysScattered, Compression: "zstd", Partitions: 8},
		{Name: "100B-keyed-10k-partitions", ID: "W4", Records: records, ValueSize: 100, Values: ValuesText, Keys: 100_000, KeyOrder: KeysScattered, Compression: "none", Partitions: 10_000},
	})
}

// Rated returns the fixed-rate mode's workload (issue 35), with records
// records: 1 KiB text values, no keys, no compression, 8 partitions. It
// runs only when asked for (peerbench -rates).
func Rated(records int) []Spec {
	return withBuffer([]Spec{
		{Name: "1KiB", Records: records, ValueSize: 1024, Values: ValuesText, Compression: "none", Partitions: 8},
	})
}

func withBuffer(specs []Spec) []Spec {
	for i := range specs {
		specs[i].BufferMemory = DefaultBufferMemory
	}
	return specs
}

// Optional returns the workloads run only when named (-workloads): the
// transactional one (issue 16: 1 000 records per transaction, samsa and
// kgo, on kfake or Kafka; the test broker has no transactions yet).
func Optional(records int) []Spec {
	return withBuffer([]Spec{
		{Name: "100B-txn", Records: records, ValueSize: 100, Values: ValuesText, Compression: "none", Partitions: 8, TxnRecords: 1000},
	})
}

// ByName returns the workload named name, with records records and
// DefaultBufferMemory: a base workload of All or Optional by its name or
// its ID ("W2c"), or a variant of one (WithKeys, WithValues) by its name,
// or by its base's ID and the same suffixes ("W3-zipf" for
// "1KiB-zstd-keyed-zipf"). A suffix that changes nothing (the key order of
// an unkeyed workload, scattered keys, a workload's own values) is not
// part of any name.
func ByName(name string, records int) (Spec, error) {
	base := name
	var order, values string
	if b, v, ok := cutSuffix(base, ValueKinds); ok {
		base, values = b, v
	}
	if b, k, ok := cutSuffix(base, KeyOrders); ok {
		base, order = b, k
	}
	for _, s := range slices.Concat(All(records), Optional(records), Rated(records)) {
		if s.Name != base && !strings.EqualFold(s.ID, base) {
			continue
		}
		if order != "" {
			if s.Keys == 0 || order == KeysScattered {
				break
			}
			s, _ = s.WithKeys(order) // a base workload's keys are scattered
		}
		if values != "" {
			if values == s.Values {
				break
			}
			s, _ = s.WithValues(values)
		}
		return s, nil
	}
	return Spec{}, fmt.Errorf("unknown workload %q", name)
}

// cutSuffix cuts "-" and one of words off the end of name.
func cutSuffix(name string, words []string) (rest, word string, ok bool) {
	for _, w := range words {
		if r, found := strings.CutSuffix(name, "-"+w); found && r != "" {
			return r, w, true
		}
	}
	return name, "", false
}

// WithKeys returns s with its records taking their keys in order (one of
// KeyOrders), named after it unless it is KeysScattered. An unkeyed
// workload has no key order: it is returned as it is.
func (s Spec) WithKeys(order string) (Spec, error) {
	if !slices.Contains(KeyOrders, order) {
		return Spec{}, fmt.Errorf("unknown key order %q (want one of %s)", order, strings.Join(KeyOrders, ", "))
	}
	if s.Keys == 0 || s.KeyOrder == order {
		return s, nil
	}
	if s.KeyOrder != KeysScattered {
		return Spec{}, fmt.Errorf("workload %s already has key order %s", s.Name, s.KeyOrder)
	}
	s.Name, s.KeyOrder = s.Name+"-"+order, order
	return s, nil
}

// WithValues returns s with values of kind values (one of ValueKinds),
// named after them unless they are s's own.
func (s Spec) WithValues(values string) (Spec, error) {
	if !slices.Contains(ValueKinds, values) {
		return Spec{}, fmt.Errorf("unknown values %q (want one of %s)", values, strings.Join(ValueKinds, ", "))
	}
	if s.Values == values {
		return s, nil
	}
	s.Name, s.Values = s.Name+"-"+values, values
	return s, nil
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
	if !slices.Contains(ValueKinds, s.Values) {
		errs = append(errs, fmt.Errorf("workload %s: values %q is not one of %s", s.Name, s.Values, strings.Join(ValueKinds, ", ")))
	}
	if s.Keys < 0 {
		errs = append(errs, fmt.Errorf("workload %s: keys %d < 0", s.Name, s.Keys))
	}
	if s.Keys > 0 && !slices.Contains(KeyOrders, s.KeyOrder) {
		errs = append(errs, fmt.Errorf("workload %s: key order %q is not one of %s", s.Name, s.KeyOrder, strings.Join(KeyOrders, ", ")))
	}
	if s.TxnRecords < 0 {
		errs = append(errs, fmt.Errorf("workload %s: txn records %d < 0", s.Name, s.TxnRecords))
	}
	if s.Rate < 0 || s.RateWarmup < 0 || (s.Rate == 0 && s.RateWarmup > 0) {
		errs = append(errs, fmt.Errorf("workload %s: rate %d, rate warm-up %d records: want a rate > 0 for a warm-up, neither negative", s.Name, s.Rate, s.RateWarmup))
	}
	if s.Partitions <= 0 {
		errs = append(errs, fmt.Errorf("workload %s: partitions %d <= 0", s.Name, s.Partitions))
	}
	if s.BufferMemory < BatchBytes {
		errs = append(errs, fmt.Errorf("workload %s: buffer memory %d below the batch size %d", s.Name, s.BufferMemory, BatchBytes))
	}
	switch s.Compression {
	case "none", "lz4", "zstd":
	default:
		errs = append(errs, fmt.Errorf("workload %s: compression %q is not none, lz4 or zstd", s.Name, s.Compression))
	}
	return errors.Join(errs...)
}

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

	// The fixed-rate mode's (Spec.Rate > 0): there WallNanos runs from
	// the first steady-phase send to the last acknowledgment and
	// ProduceCPUNanos is the process's CPU over that time.
	//
	// Rate is Spec.Rate, SteadyRecords the records after the warm-up,
	// SteadySendNanos the time from the first steady-phase send to the
	// return of the last send (the rate achieved is SteadyRecords over
	// it). LatencyBuckets are the steady-phase records' latencies, from
	// just before the send to the callback, as [bucket, count] pairs of
	// Histogram's buckets. SlotWaits counts the times the send loop found
	// a callback slot still busy (LoopSlots; 0 expected).
	Rate            int64      `json:"rate,omitempty"`
	SteadyRecords   int        `json:"steady_records,omitempty"`
	SteadySendNanos int64      `json:"steady_send_ns,omitempty"`
	LatencyBuckets  [][2]int64 `json:"latency_buckets,omitempty"`
	SlotWaits       int64      `json:"slot_waits,omitempty"`
}

// Encode returns r as one JSON line.
func (r Result) Encode() []byte {
	b, _ := json.Marshal(r) // a struct of plain fields cannot fail
	return append(b, '\n')
}
