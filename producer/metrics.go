package producer

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/internal/metrics"
)

// Metrics is a snapshot of the producer's metrics, named after the Java
// producer's (the Java name is on each field). Counters ("-total") count
// since the producer was created; averages and maxima are over the same
// span, not over Java's 30-second windows: a monitoring system derives
// rates and windows from successive snapshots.
//
// Each visits every value by its Java name, for adapters that map names
// (see the observe/samsaprom and observe/samsaotel modules).
type Metrics struct {
	// Producer holds the producer-wide values.
	Producer ProducerMetrics
	// Topics holds one entry per topic the producer has sent to, sorted
	// by name.
	Topics []TopicMetrics
	// Brokers holds one entry per broker the producer has connected to,
	// sorted by node id.
	Brokers []BrokerMetrics
	// Spool holds Config.Spool's metrics; nil without a spool
	// (spool_metrics.go).
	Spool *SpoolMetrics
}

// ProducerMetrics are the producer-wide metrics (Java's
// producer-metrics group).
type ProducerMetrics struct {
	// RecordSendTotal counts records sent to brokers, each once, when its
	// batch is first written (record-send-total).
	RecordSendTotal int64
	// RecordErrorTotal counts records that failed, wherever they failed
	// (record-error-total).
	RecordErrorTotal int64
	// RecordRetryTotal counts records in batches sent again after a
	// retriable error, once per resend (record-retry-total).
	RecordRetryTotal int64
	// RecordSizeAvg is the mean size of a record in its batch, in bytes
	// (record-size-avg), and RecordSizeMax the largest (record-size-max).
	RecordSizeAvg float64
	RecordSizeMax int64
	// RecordQueueTimeAvg and RecordQueueTimeMax are the mean and largest
	// time a batch waited in the accumulator, from its first record to its
	// first send (record-queue-time-avg, record-queue-time-max).
	RecordQueueTimeAvg, RecordQueueTimeMax time.Duration
	// BatchSizeAvg and BatchSizeMax are the mean and largest batch size on
	// the wire, in bytes (batch-size-avg, batch-size-max).
	BatchSizeAvg float64
	BatchSizeMax int64
	// RecordsPerRequestAvg is the mean number of records per Produce
	// request (records-per-request-avg).
	RecordsPerRequestAvg float64
	// CompressionRateAvg is the wire size of batches divided by their
	// uncompressed size, weighted by bytes (compression-rate-avg; Java
	// averages the ratio per batch). 1 without compression or batches.
	CompressionRateAvg float64
	// RequestLatencyAvg and RequestLatencyMax are the mean and largest
	// Produce round trip over all brokers (request-latency-avg,
	// request-latency-max); RequestLatencyP50 and RequestLatencyP99
	// estimate its median and 99th percentile within 1/16
	// (request-latency-p50, request-latency-p99; samsa's own).
	RequestLatencyAvg, RequestLatencyMax time.Duration
	RequestLatencyP50, RequestLatencyP99 time.Duration
	// RequestsInFlight is the number of Produce requests awaiting an answer
	// (requests-in-flight).
	RequestsInFlight int64
	// RequestTotal counts Produce requests written and ResponseTotal their
	// answers read (request-total, response-total).
	RequestTotal, ResponseTotal int64
	// BufferAvailableBytes is the free memory of the buffer pool
	// (buffer-available-bytes) and BufferTotalBytes its size
	// (buffer-total-bytes).
	BufferAvailableBytes, BufferTotalBytes int64
	// BufferPoolWaitTimeTotal is the total time Sends waited for buffer
	// memory (bufferpool-wait-time-total; Java 3.1+ also names it
	// bufferpool-wait-time-ns-total, in nanoseconds).
	BufferPoolWaitTimeTotal time.Duration
	// BufferExhaustedTotal counts records that failed with
	// ErrBufferExhausted (buffer-exhausted-total).
	BufferExhaustedTotal int64
	// ProduceThrottleTimeAvg and ProduceThrottleTimeMax are the mean and
	// largest throttle time brokers asked for in Produce answers, over the
	// answers that asked for one (produce-throttle-time-avg,
	// produce-throttle-time-max).
	ProduceThrottleTimeAvg, ProduceThrottleTimeMax time.Duration
	// MetadataAge is the time since metadata was last refreshed
	// (metadata-age); 0 before the first refresh.
	MetadataAge time.Duration
	// ParkedRecords and ParkedBytes are the records, and their bytes,
	// waiting for their topic's partitions (parked-records, parked-bytes;
	// samsa's own).
	ParkedRecords, ParkedBytes int64
	// OutgoingByteTotal counts bytes written to brokers and
	// IncomingByteTotal bytes read from them, Produce requests and answers
	// (outgoing-byte-total, incoming-byte-total).
	OutgoingByteTotal, IncomingByteTotal int64
	// ConnectionCount is the number of open broker connections
	// (connection-count); ConnectionCreationTotal and ConnectionCloseTotal
	// count the ones set up and closed (connection-creation-total,
	// connection-close-total).
	ConnectionCount, ConnectionCreationTotal, ConnectionCloseTotal int64
	// BufferedRecords is the number of records Send accepted that have not
	// completed yet: parked, batched or in flight (buffered-records;
	// samsa's own).
	BufferedRecords int64
	// BatchAckTotal counts the batches their leader acknowledged (with
	// AcksNone: written to the connection), BatchAckBytesTotal their
	// bytes on the wire and BatchAckUncompressedBytesTotal their bytes
	// before compression (batch-ack-total, batch-ack-bytes-total,
	// batch-ack-uncompressed-bytes-total; samsa's own).
	// CompressionRateAvg compares the same sizes over every batch first
	// sent.
	BatchAckTotal, BatchAckBytesTotal, BatchAckUncompressedBytesTotal int64
	// BatchRetryTotal counts batches sent again after a retriable error,
	// once per resend (batch-retry-total; samsa's own; RecordRetryTotal
	// counts their records).
	BatchRetryTotal int64
	// ThrottleTimeTotal is the total throttle time brokers asked for on
	// every connection of the producer, Metadata and CreateTopics answers
	// included (throttle-time-total; samsa's own).
	ThrottleTimeTotal time.Duration
}

// TopicMetrics are one topic's metrics (Java's producer-topic-metrics
// group).
type TopicMetrics struct {
	// Topic is the topic's name.
	Topic string
	// RecordSendTotal, RecordErrorTotal and RecordRetryTotal are as in
	// ProducerMetrics, for this topic (record-send-total,
	// record-error-total, record-retry-total).
	RecordSendTotal, RecordErrorTotal, RecordRetryTotal int64
	// ByteTotal counts the uncompressed bytes of the topic's batches, when
	// first sent (byte-total).
	ByteTotal int64
	// CompressionRate is the topic's wire bytes over its uncompressed bytes
	// (compression-rate); 1 before any batch.
	CompressionRate float64
	// ParkedRecords and ParkedBytes are the topic's records, and their
	// bytes, waiting for its partitions (parked-records, parked-bytes).
	ParkedRecords, ParkedBytes int64
}

// BrokerMetrics are one broker's metrics (Java's producer-node-metrics
// group, with some of producer-metrics per node).
type BrokerMetrics struct {
	// NodeID is the broker's node id and Addr its host:port.
	NodeID int32
	Addr   string
	// RequestLatencyAvg, RequestLatencyMax and RequestLatencyP99 are as in
	// ProducerMetrics, for this broker (request-latency-avg,
	// request-latency-max, request-latency-p99).
	RequestLatencyAvg, RequestLatencyMax, RequestLatencyP99 time.Duration
	// RequestsInFlight, RequestTotal, ResponseTotal, OutgoingByteTotal and
	// IncomingByteTotal are as in ProducerMetrics, for this broker
	// (requests-in-flight, request-total, response-total,
	// outgoing-byte-total, incoming-byte-total).
	RequestsInFlight, RequestTotal, ResponseTotal int64
	OutgoingByteTotal, IncomingByteTotal          int64
	// ProduceThrottleTimeAvg and ProduceThrottleTimeMax are as in
	// ProducerMetrics, for this broker (produce-throttle-time-avg,
	// produce-throttle-time-max).
	ProduceThrottleTimeAvg, ProduceThrottleTimeMax time.Duration
	// ConnectionCount, ConnectionCreationTotal and ConnectionCloseTotal are
	// as in ProducerMetrics, for this broker (connection-count,
	// connection-creation-total, connection-close-total).
	ConnectionCount, ConnectionCreationTotal, ConnectionCloseTotal int64
}

// MetricKind says how a metric's value behaves.
type MetricKind uint8

const (
	// MetricCounter only grows (Java's "-total" metrics).
	MetricCounter MetricKind = iota
	// MetricGauge goes up and down (averages, maxima, current values).
	MetricGauge
)

// MetricScope says what a metric's value is about, and so which Labels
// fields are set.
type MetricScope uint8

const (
	// ScopeProducer is the whole producer; Labels are empty.
	ScopeProducer MetricScope = iota
	// ScopeTopic is one topic; Labels.Topic is set.
	ScopeTopic
	// ScopeBroker is one broker; Labels.NodeID and Labels.Addr are set.
	ScopeBroker
)

// MetricInfo describes one metric of Metrics.
type MetricInfo struct {
	// Name is the Java producer's metric name ("record-send-total"), or
	// samsa's name in the same style for metrics Java lacks.
	Name string
	// Help is a one-line description.
	Help string
	// Unit is the unit of the values Each reports: "seconds" (durations,
	// whatever Java uses), "bytes", "records", "batches", "requests",
	// "connections", "ratio", "segments", "fsyncs", "transactions" or
	// "boolean" (1 or 0).
	Unit  string
	Kind  MetricKind
	Scope MetricScope
}

// Labels say which topic or broker a value is about; see MetricScope.
type Labels struct {
	// Topic is set for ScopeTopic.
	Topic string
	// NodeID and Addr are set for ScopeBroker.
	NodeID int32
	Addr   string
}

type metricEntry[T any] struct {
	info MetricInfo
	get  func(*T) float64
}

func metricSecs(d time.Duration) float64 { return d.Seconds() }

func counterEntry[T any](scope MetricScope, name, unit, help string, get func(*T) float64) metricEntry[T] {
	return metricEntry[T]{MetricInfo{Name: name, Help: help, Unit: unit, Kind: MetricCounter, Scope: scope}, get}
}

func gaugeEntry[T any](scope MetricScope, name, unit, help string, get func(*T) float64) metricEntry[T] {
	return metricEntry[T]{MetricInfo{Name: name, Help: help, Unit: unit, Kind: MetricGauge, Scope: scope}, get}
}

// The tables behind Each and MetricInfos; TestMetricTablesCoverEveryField
// checks that every numeric field is in them once.
var (
	producerMetricTable = []metricEntry[ProducerMetrics]{
		counterEntry(ScopeProducer, "record-send-total", "records", "Records sent to brokers, once each.", func(m *ProducerMetrics) float64 { return float64(m.RecordSendTotal) }),
		counterEntry(ScopeProducer, "record-error-total", "records", "Records that failed.", func(m *ProducerMetrics) float64 { return float64(m.RecordErrorTotal) }),
		counterEntry(ScopeProducer, "record-retry-total", "records", "Records in batches sent again.", func(m *ProducerMetrics) float64 { return float64(m.RecordRetryTotal) }),
		gaugeEntry(ScopeProducer, "record-size-avg", "bytes", "Mean record size in its batch.", func(m *ProducerMetrics) float64 { return m.RecordSizeAvg }),
		gaugeEntry(ScopeProducer, "record-size-max", "bytes", "Largest record size in its batch.", func(m *ProducerMetrics) float64 { return float64(m.RecordSizeMax) }),
		gaugeEntry(ScopeProducer, "record-queue-time-avg", "seconds", "Mean time a batch waited before its first send.", func(m *ProducerMetrics) float64 { return metricSecs(m.RecordQueueTimeAvg) }),
		gaugeEntry(ScopeProducer, "record-queue-time-max", "seconds", "Longest time a batch waited before its first send.", func(m *ProducerMetrics) float64 { return metricSecs(m.RecordQueueTimeMax) }),
		gaugeEntry(ScopeProducer, "batch-size-avg", "bytes", "Mean batch size on the wire.", func(m *ProducerMetrics) float64 { return m.BatchSizeAvg }),
		gaugeEntry(ScopeProducer, "batch-size-max", "bytes", "Largest batch size on the wire.", func(m *ProducerMetrics) float64 { return float64(m.BatchSizeMax) }),
		gaugeEntry(ScopeProducer, "records-per-request-avg", "records", "Mean records per Produce request.", func(m *ProducerMetrics) float64 { return m.RecordsPerRequestAvg }),
		gaugeEntry(ScopeProducer, "compression-rate-avg", "ratio", "Wire bytes over uncompressed bytes of batches.", func(m *ProducerMetrics) float64 { return m.CompressionRateAvg }),
		gaugeEntry(ScopeProducer, "request-latency-avg", "seconds", "Mean Produce round trip.", func(m *ProducerMetrics) float64 { return metricSecs(m.RequestLatencyAvg) }),
		gaugeEntry(ScopeProducer, "request-latency-max", "seconds", "Longest Produce round trip.", func(m *ProducerMetrics) float64 { return metricSecs(m.RequestLatencyMax) }),
		gaugeEntry(ScopeProducer, "request-latency-p50", "seconds", "Median Produce round trip (estimate).", func(m *ProducerMetrics) float64 { return metricSecs(m.RequestLatencyP50) }),
		gaugeEntry(ScopeProducer, "request-latency-p99", "seconds", "99th percentile Produce round trip (estimate).", func(m *ProducerMetrics) float64 { return metricSecs(m.RequestLatencyP99) }),
		gaugeEntry(ScopeProducer, "requests-in-flight", "requests", "Produce requests awaiting an answer.", func(m *ProducerMetrics) float64 { return float64(m.RequestsInFlight) }),
		counterEntry(ScopeProducer, "request-total", "requests", "Produce requests written.", func(m *ProducerMetrics) float64 { return float64(m.RequestTotal) }),
		counterEntry(ScopeProducer, "response-total", "requests", "Produce answers read.", func(m *ProducerMetrics) float64 { return float64(m.ResponseTotal) }),
		gaugeEntry(ScopeProducer, "buffer-available-bytes", "bytes", "Free buffer pool memory.", func(m *ProducerMetrics) float64 { return float64(m.BufferAvailableBytes) }),
		gaugeEntry(ScopeProducer, "buffer-total-bytes", "bytes", "Buffer pool size.", func(m *ProducerMetrics) float64 { return float64(m.BufferTotalBytes) }),
		counterEntry(ScopeProducer, "bufferpool-wait-time-total", "seconds", "Time Sends waited for buffer memory.", func(m *ProducerMetrics) float64 { return metricSecs(m.BufferPoolWaitTimeTotal) }),
		counterEntry(ScopeProducer, "buffer-exhausted-total", "records", "Records failed for lack of buffer memory.", func(m *ProducerMetrics) float64 { return float64(m.BufferExhaustedTotal) }),
		gaugeEntry(ScopeProducer, "produce-throttle-time-avg", "seconds", "Mean throttle time brokers asked for.", func(m *ProducerMetrics) float64 { return metricSecs(m.ProduceThrottleTimeAvg) }),
		gaugeEntry(ScopeProducer, "produce-throttle-time-max", "seconds", "Longest throttle time brokers asked for.", func(m *ProducerMetrics) float64 { return metricSecs(m.ProduceThrottleTimeMax) }),
		gaugeEntry(ScopeProducer, "metadata-age", "seconds", "Time since the last metadata refresh.", func(m *ProducerMetrics) float64 { return metricSecs(m.MetadataAge) }),
		gaugeEntry(ScopeProducer, "parked-records", "records", "Records waiting for their topic's partitions.", func(m *ProducerMetrics) float64 { return float64(m.ParkedRecords) }),
		gaugeEntry(ScopeProducer, "parked-bytes", "bytes", "Bytes of records waiting for their topic's partitions.", func(m *ProducerMetrics) float64 { return float64(m.ParkedBytes) }),
		counterEntry(ScopeProducer, "outgoing-byte-total", "bytes", "Bytes written to brokers.", func(m *ProducerMetrics) float64 { return float64(m.OutgoingByteTotal) }),
		counterEntry(ScopeProducer, "incoming-byte-total", "bytes", "Bytes read from brokers.", func(m *ProducerMetrics) float64 { return float64(m.IncomingByteTotal) }),
		gaugeEntry(ScopeProducer, "connection-count", "connections", "Open broker connections.", func(m *ProducerMetrics) float64 { return float64(m.ConnectionCount) }),
		counterEntry(ScopeProducer, "connection-creation-total", "connections", "Broker connections set up.", func(m *ProducerMetrics) float64 { return float64(m.ConnectionCreationTotal) }),
		counterEntry(ScopeProducer, "connection-close-total", "connections", "Broker connections closed.", func(m *ProducerMetrics) float64 { return float64(m.ConnectionCloseTotal) }),
		gaugeEntry(ScopeProducer, "buffered-records", "records", "Records accepted and not yet completed.", func(m *ProducerMetrics) float64 { return float64(m.BufferedRecords) }),
		counterEntry(ScopeProducer, "batch-ack-total", "batches", "Batches acknowledged.", func(m *ProducerMetrics) float64 { return float64(m.BatchAckTotal) }),
		counterEntry(ScopeProducer, "batch-ack-bytes-total", "bytes", "Wire bytes of the batches acknowledged.", func(m *ProducerMetrics) float64 { return float64(m.BatchAckBytesTotal) }),
		counterEntry(ScopeProducer, "batch-ack-uncompressed-bytes-total", "bytes", "Uncompressed bytes of the batches acknowledged.", func(m *ProducerMetrics) float64 { return float64(m.BatchAckUncompressedBytesTotal) }),
		counterEntry(ScopeProducer, "batch-retry-total", "batches", "Batches sent again.", func(m *ProducerMetrics) float64 { return float64(m.BatchRetryTotal) }),
		counterEntry(ScopeProducer, "throttle-time-total", "seconds", "Throttle time brokers asked for, on every connection.", func(m *ProducerMetrics) float64 { return metricSecs(m.ThrottleTimeTotal) }),
	}
	topicMetricTable = []metricEntry[TopicMetrics]{
		counterEntry(ScopeTopic, "record-send-total", "records", "Records sent to brokers, once each.", func(m *TopicMetrics) float64 { return float64(m.RecordSendTotal) }),
		counterEntry(ScopeTopic, "record-error-total", "records", "Records that failed.", func(m *TopicMetrics) float64 { return float64(m.RecordErrorTotal) }),
		counterEntry(ScopeTopic, "record-retry-total", "records", "Records in batches sent again.", func(m *TopicMetrics) float64 { return float64(m.RecordRetryTotal) }),
		counterEntry(ScopeTopic, "byte-total", "bytes", "Uncompressed bytes of batches sent.", func(m *TopicMetrics) float64 { return float64(m.ByteTotal) }),
		gaugeEntry(ScopeTopic, "compression-rate", "ratio", "Wire bytes over uncompressed bytes.", func(m *TopicMetrics) float64 { return m.CompressionRate }),
		gaugeEntry(ScopeTopic, "parked-records", "records", "Records waiting for the topic's partitions.", func(m *TopicMetrics) float64 { return float64(m.ParkedRecords) }),
		gaugeEntry(ScopeTopic, "parked-bytes", "bytes", "Bytes of records waiting for the topic's partitions.", func(m *TopicMetrics) float64 { return float64(m.ParkedBytes) }),
	}
	brokerMetricTable = []metricEntry[BrokerMetrics]{
		gaugeEntry(ScopeBroker, "request-latency-avg", "seconds", "Mean Produce round trip.", func(m *BrokerMetrics) float64 { return metricSecs(m.RequestLatencyAvg) }),
		gaugeEntry(ScopeBroker, "request-latency-max", "seconds", "Longest Produce round trip.", func(m *BrokerMetrics) float64 { return metricSecs(m.RequestLatencyMax) }),
		gaugeEntry(ScopeBroker, "request-latency-p99", "seconds", "99th percentile Produce round trip (estimate).", func(m *BrokerMetrics) float64 { return metricSecs(m.RequestLatencyP99) }),
		gaugeEntry(ScopeBroker, "requests-in-flight", "requests", "Produce requests awaiting an answer.", func(m *BrokerMetrics) float64 { return float64(m.RequestsInFlight) }),
		counterEntry(ScopeBroker, "request-total", "requests", "Produce requests written.", func(m *BrokerMetrics) float64 { return float64(m.RequestTotal) }),
		counterEntry(ScopeBroker, "response-total", "requests", "Produce answers read.", func(m *BrokerMetrics) float64 { return float64(m.ResponseTotal) }),
		counterEntry(ScopeBroker, "outgoing-byte-total", "bytes", "Bytes written to the broker.", func(m *BrokerMetrics) float64 { return float64(m.OutgoingByteTotal) }),
		counterEntry(ScopeBroker, "incoming-byte-total", "bytes", "Bytes read from the broker.", func(m *BrokerMetrics) float64 { return float64(m.IncomingByteTotal) }),
		gaugeEntry(ScopeBroker, "produce-throttle-time-avg", "seconds", "Mean throttle time the broker asked for.", func(m *BrokerMetrics) float64 { return metricSecs(m.ProduceThrottleTimeAvg) }),
		gaugeEntry(ScopeBroker, "produce-throttle-time-max", "seconds", "Longest throttle time the broker asked for.", func(m *BrokerMetrics) float64 { return metricSecs(m.ProduceThrottleTimeMax) }),
		gaugeEntry(ScopeBroker, "connection-count", "connections", "Open connections to the broker.", func(m *BrokerMetrics) float64 { return float64(m.ConnectionCount) }),
		counterEntry(ScopeBroker, "connection-creation-total", "connections", "Connections to the broker set up.", func(m *BrokerMetrics) float64 { return float64(m.ConnectionCreationTotal) }),
		counterEntry(ScopeBroker, "connection-close-total", "connections", "Connections to the broker closed.", func(m *BrokerMetrics) float64 { return float64(m.ConnectionCloseTotal) }),
	}
)

// MetricInfos returns the description of every metric Each reports, in
// Each's order: producer-wide, then the spool's (producer scope, reported
// only with Config.Spool), then per topic, then per broker. A name may
// appear in several scopes. The slice is the caller's.
func MetricInfos() []MetricInfo {
	out := make([]MetricInfo, 0, len(producerMetricTable)+len(spoolMetricTable)+len(topicMetricTable)+len(brokerMetricTable))
	for _, e := range producerMetricTable {
		out = append(out, e.info)
	}
	for _, e := range spoolMetricTable {
		out = append(out, e.info)
	}
	for _, e := range topicMetricTable {
		out = append(out, e.info)
	}
	for _, e := range brokerMetricTable {
		out = append(out, e.info)
	}
	return out
}

// Each calls fn for every value of m: the producer-wide metrics, then the
// spool's (when m.Spool is set), then each topic's, then each broker's,
// with durations in seconds (see MetricInfo.Unit). info points into a
// table shared by every call; fn must not modify it.
func (m *Metrics) Each(fn func(info *MetricInfo, labels Labels, v float64)) {
	for i := range producerMetricTable {
		e := &producerMetricTable[i]
		fn(&e.info, Labels{}, e.get(&m.Producer))
	}
	if m.Spool != nil {
		for i := range spoolMetricTable {
			e := &spoolMetricTable[i]
			fn(&e.info, Labels{}, e.get(m.Spool))
		}
	}
	for t := range m.Topics {
		tm := &m.Topics[t]
		l := Labels{Topic: tm.Topic}
		for i := range topicMetricTable {
			e := &topicMetricTable[i]
			fn(&e.info, l, e.get(tm))
		}
	}
	for b := range m.Brokers {
		bm := &m.Brokers[b]
		l := Labels{NodeID: bm.NodeID, Addr: bm.Addr}
		for i := range brokerMetricTable {
			e := &brokerMetricTable[i]
			fn(&e.info, l, e.get(bm))
		}
	}
}

// recorder collects the metrics behind Producer.Metrics. Every field is an
// atomic (internal/metrics), so each goroutine records into it without a
// lock and without waiting for a reader; mu guards only the maps, which
// grow when a topic or broker is first seen. The writers, by field:
//
//   - Send's goroutine (any number of them): recordSizeMax (one atomic load
//     per record unless it is a new maximum), bufferWait, bufferExhausted,
//     and recordErrors for records Send fails itself;
//   - the IO goroutine: everything about batches, requests and answers
//     (queueTime, batchSize, recordBytes, records*, requests, wire and
//     uncompressed bytes, brokerStats' requests, answers, latency,
//     throttle and connections);
//   - a Produce connection's writer and reader: brokerStats' outgoing and
//     incoming bytes;
//   - the completion goroutine: recordErrors for every record failed after
//     Send took it (batches, parked records; a record counts once);
//   - the metadata refresh goroutine: metadataAt.
//
// Parked records and bytes are not recorded: a snapshot reads them from
// the accumulator's topics (topicStats.parkedOf).
//
// snapshot takes mu only to copy the map values' pointers, then reads the
// atomics without it: a reader never holds up the IO goroutine for longer
// than a map copy, and only when the IO goroutine meets a new topic or
// broker at the same time.
type recorder struct {
	recordSizeMax   metrics.Max
	bufferWait      metrics.Counter // nanoseconds
	bufferExhausted metrics.Counter
	recordErrors    metrics.Counter

	queueTime         metrics.Histogram // nanoseconds, per batch
	batchSize         metrics.Histogram // wire bytes, per batch
	recordBytes       metrics.Counter   // records' bytes in batches first sent
	recordsSent       metrics.Counter
	recordsRetried    metrics.Counter
	wireBytes         metrics.Counter // batches first sent
	uncompressedBytes metrics.Counter
	requestRecords    metrics.Counter // records in Produce requests, retries too

	metadataAt atomic.Int64 // UnixNano of the last refresh; 0 before one

	mu      sync.Mutex
	topics  map[string]*topicStats
	brokers map[int32]*brokerStats
}

// topicStats is one topic's part of the recorder; the producer keeps the
// pointer beside the topic's state so hot paths skip the map.
type topicStats struct {
	name                                    string
	sent, errors, retried, wire, uncompress metrics.Counter
	// parkedOf reads the topic's parked records and bytes from their
	// owner (accumulator.Topic.Parked) when a snapshot is taken; nil
	// before the producer links it.
	parkedOf atomic.Pointer[func() (records, bytes int64)]
}

// brokerStats is one broker's part of the recorder, written by the IO
// goroutine (and, for connections, by whichever goroutine owns them).
type brokerStats struct {
	node                      int32
	addr                      atomic.Pointer[string]
	latency, throttle         metrics.Histogram // nanoseconds
	inflight                  metrics.Gauge
	requests, responses       metrics.Counter
	outgoing, incoming        metrics.Counter
	conns                     metrics.Gauge
	connsCreated, connsClosed metrics.Counter
}

func newRecorder() *recorder {
	return &recorder{topics: map[string]*topicStats{}, brokers: map[int32]*brokerStats{}}
}

// topic returns the topic's stats, creating them on first use. Any
// goroutine; it takes mu.
func (r *recorder) topic(name string) *topicStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.topics[name]
	if ts == nil {
		ts = &topicStats{name: name}
		r.topics[name] = ts
	}
	return ts
}

// broker returns the broker's stats, creating them on first use and
// updating the address when it moved. Any goroutine; it takes mu.
func (r *recorder) broker(node int32, addr string) *brokerStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	bs := r.brokers[node]
	if bs == nil {
		bs = &brokerStats{node: node}
		r.brokers[node] = bs
	}
	if p := bs.addr.Load(); p == nil || *p != addr {
		bs.addr.Store(&addr)
	}
	return bs
}

// forgetBroker drops node's stats if they are bs: a broker learned from a
// Produce answer that the metadata never listed (dropHinted). IO goroutine.
func (r *recorder) forgetBroker(node int32, bs *brokerStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.brokers[node] == bs {
		delete(r.brokers, node)
	}
}

// recordSize notes one record's size in its batch. Send's goroutine.
func (r *recorder) recordSize(n int) { r.recordSizeMax.Observe(uint64(n)) }

// bufferWaited notes a Send's wait for memory, and exhausted whether it
// failed with ErrBufferExhausted. Send's goroutine.
func (r *recorder) bufferWaited(d time.Duration, exhausted bool) {
	if d > 0 {
		r.bufferWait.Add(uint64(d))
	}
	if exhausted {
		r.bufferExhausted.Inc()
	}
}

// recordsFailed counts n failed records of ts (nil when the record had no
// valid topic). The goroutine that fails them.
func (r *recorder) recordsFailed(ts *topicStats, n int) {
	r.recordErrors.Add(uint64(n))
	if ts != nil {
		ts.errors.Add(uint64(n))
	}
}

// batchSample describes one batch in a Produce request, for batchSent.
type batchSample struct {
	records, recordBytes int // records and their encoded bytes
	uncompressed, wire   int // batch sizes with the batch header
	queued               time.Duration
	retry                bool // a resend: only the retry counters move
}

// batchSent notes a batch written in a Produce request. IO goroutine.
func (r *recorder) batchSent(ts *topicStats, b batchSample) {
	n := uint64(b.records)
	r.requestRecords.Add(n)
	if b.retry {
		r.recordsRetried.Add(n)
		ts.retried.Add(n)
		return
	}
	r.recordsSent.Add(n)
	r.recordBytes.Add(uint64(b.recordBytes))
	r.wireBytes.Add(uint64(b.wire))
	r.uncompressedBytes.Add(uint64(b.uncompressed))
	r.queueTime.Observe(uint64(max(b.queued, 0)))
	r.batchSize.Observe(uint64(b.wire))
	ts.sent.Add(n)
	ts.wire.Add(uint64(b.wire))
	ts.uncompress.Add(uint64(b.uncompressed))
}

// requestWritten notes a Produce request handed to bs's connection. IO
// goroutine.
func (r *recorder) requestWritten(bs *brokerStats) {
	bs.requests.Inc()
	bs.inflight.Add(1)
}

// responseRead notes the end of a Produce request to bs: answered (not
// acks=0, a broken connection or a timeout) after latency. IO goroutine.
func (r *recorder) responseRead(bs *brokerStats, latency time.Duration, answered bool) {
	bs.inflight.Add(-1)
	if !answered {
		return
	}
	bs.responses.Inc()
	bs.latency.Observe(uint64(max(latency, 0)))
}

// wrote and read count bytes written to and read from bs's Produce
// connections. The connection's writer and reader goroutines.
func (r *recorder) wrote(bs *brokerStats, n int) { bs.outgoing.Add(uint64(n)) }

func (r *recorder) read(bs *brokerStats, n int) { bs.incoming.Add(uint64(n)) }

// throttled notes a throttle time bs asked for. IO goroutine.
func (r *recorder) throttled(bs *brokerStats, d time.Duration) {
	if d > 0 {
		bs.throttle.Observe(uint64(d))
	}
}

// connected and disconnected track a connection to bs. The goroutine that
// owns the connection.
func (r *recorder) connected(bs *brokerStats) {
	bs.conns.Add(1)
	bs.connsCreated.Inc()
}

func (r *recorder) disconnected(bs *brokerStats) {
	bs.conns.Add(-1)
	bs.connsClosed.Inc()
}

// metadataRefreshed notes a metadata refresh at t. Metadata goroutine.
func (r *recorder) metadataRefreshed(t time.Time) { r.metadataAt.Store(t.UnixNano()) }

// liveGauges are the values the recorder does not keep, read by
// Producer.Metrics from their owners (the buffer pool, the producer's
// pending counts and its counters) when it snapshots.
type liveGauges struct {
	bufferAvailable, bufferTotal int64
	buffered                     int64
	batchAcks, batchAckBytes     int64
	batchAckUncompressed         int64
	batchRetries                 int64
	throttled                    time.Duration
}

func metricRatio(num, den uint64) float64 {
	if den == 0 {
		return 1
	}
	return float64(num) / float64(den)
}

func metricDiv(num, den uint64) float64 {
	if den == 0 {
		return 0
	}
	return float64(num) / float64(den)
}

// snapshot returns the metrics at now. Any goroutine; it holds mu only to
// copy the topic and broker pointers.
func (r *recorder) snapshot(now time.Time, live liveGauges) Metrics {
	r.mu.Lock()
	topics := make([]*topicStats, 0, len(r.topics))
	for _, ts := range r.topics {
		topics = append(topics, ts)
	}
	brokers := make([]*brokerStats, 0, len(r.brokers))
	for _, bs := range r.brokers {
		brokers = append(brokers, bs)
	}
	r.mu.Unlock()
	slices.SortFunc(topics, func(a, b *topicStats) int { return cmp.Compare(a.name, b.name) })
	slices.SortFunc(brokers, func(a, b *brokerStats) int { return cmp.Compare(a.node, b.node) })

	var m Metrics
	p := &m.Producer
	p.RecordSendTotal = int64(r.recordsSent.Load())
	p.RecordErrorTotal = int64(r.recordErrors.Load())
	p.RecordRetryTotal = int64(r.recordsRetried.Load())
	p.RecordSizeAvg = metricDiv(r.recordBytes.Load(), r.recordsSent.Load())
	p.RecordSizeMax = int64(r.recordSizeMax.Load())

	h := new(metrics.HistogramSnapshot) // 4 KiB: off the stack
	r.queueTime.SnapshotInto(h)
	p.RecordQueueTimeAvg = time.Duration(h.Mean())
	p.RecordQueueTimeMax = time.Duration(h.Max)
	r.batchSize.SnapshotInto(h)
	p.BatchSizeAvg = h.Mean()
	p.BatchSizeMax = int64(h.Max)
	p.CompressionRateAvg = metricRatio(r.wireBytes.Load(), r.uncompressedBytes.Load())
	p.BufferAvailableBytes = live.bufferAvailable
	p.BufferTotalBytes = live.bufferTotal
	p.BufferedRecords = live.buffered
	p.BatchAckTotal, p.BatchAckBytesTotal = live.batchAcks, live.batchAckBytes
	p.BatchAckUncompressedBytesTotal = live.batchAckUncompressed
	p.BatchRetryTotal = live.batchRetries
	p.ThrottleTimeTotal = live.throttled
	p.BufferPoolWaitTimeTotal = time.Duration(r.bufferWait.Load())
	p.BufferExhaustedTotal = int64(r.bufferExhausted.Load())
	if at := r.metadataAt.Load(); at != 0 {
		p.MetadataAge = max(now.Sub(time.Unix(0, at)), 0)
	}

	m.Topics = make([]TopicMetrics, len(topics))
	for i, ts := range topics {
		var parkedRecords, parkedBytes int64
		if f := ts.parkedOf.Load(); f != nil {
			parkedRecords, parkedBytes = (*f)()
		}
		t := &m.Topics[i]
		*t = TopicMetrics{
			Topic:            ts.name,
			RecordSendTotal:  int64(ts.sent.Load()),
			RecordErrorTotal: int64(ts.errors.Load()),
			RecordRetryTotal: int64(ts.retried.Load()),
			ByteTotal:        int64(ts.uncompress.Load()),
			CompressionRate:  metricRatio(ts.wire.Load(), ts.uncompress.Load()),
			ParkedRecords:    parkedRecords,
			ParkedBytes:      parkedBytes,
		}
		p.ParkedRecords += t.ParkedRecords
		p.ParkedBytes += t.ParkedBytes
	}

	latency, throttle := new(metrics.HistogramSnapshot), new(metrics.HistogramSnapshot)
	m.Brokers = make([]BrokerMetrics, len(brokers))
	for i, bs := range brokers {
		b := &m.Brokers[i]
		b.NodeID = bs.node
		if a := bs.addr.Load(); a != nil {
			b.Addr = *a
		}
		bs.latency.SnapshotInto(h)
		b.RequestLatencyAvg = time.Duration(h.Mean())
		b.RequestLatencyMax = time.Duration(h.Max)
		b.RequestLatencyP99 = time.Duration(h.Quantile(0.99))
		latency.Merge(h)
		bs.throttle.SnapshotInto(h)
		b.ProduceThrottleTimeAvg = time.Duration(h.Mean())
		b.ProduceThrottleTimeMax = time.Duration(h.Max)
		throttle.Merge(h)
		b.RequestsInFlight = bs.inflight.Load()
		b.RequestTotal = int64(bs.requests.Load())
		b.ResponseTotal = int64(bs.responses.Load())
		b.OutgoingByteTotal = int64(bs.outgoing.Load())
		b.IncomingByteTotal = int64(bs.incoming.Load())
		b.ConnectionCount = bs.conns.Load()
		b.ConnectionCreationTotal = int64(bs.connsCreated.Load())
		b.ConnectionCloseTotal = int64(bs.connsClosed.Load())

		p.RequestsInFlight += b.RequestsInFlight
		p.RequestTotal += b.RequestTotal
		p.ResponseTotal += b.ResponseTotal
		p.OutgoingByteTotal += b.OutgoingByteTotal
		p.IncomingByteTotal += b.IncomingByteTotal
		p.ConnectionCount += b.ConnectionCount
		p.ConnectionCreationTotal += b.ConnectionCreationTotal
		p.ConnectionCloseTotal += b.ConnectionCloseTotal
	}
	p.RequestLatencyAvg = time.Duration(latency.Mean())
	p.RequestLatencyMax = time.Duration(latency.Max)
	p.RequestLatencyP50 = time.Duration(latency.Quantile(0.5))
	p.RequestLatencyP99 = time.Duration(latency.Quantile(0.99))
	p.ProduceThrottleTimeAvg = time.Duration(throttle.Mean())
	p.ProduceThrottleTimeMax = time.Duration(throttle.Max)
	p.RecordsPerRequestAvg = metricDiv(r.requestRecords.Load(), uint64(p.RequestTotal))
	return m
}
