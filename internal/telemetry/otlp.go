package telemetry

import (
	"encoding/binary"
	"math"
)

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
)

// Field numbers of opentelemetry/proto/metrics/v1/metrics.proto,
// common/v1/common.proto and resource/v1/resource.proto (OTLP 1.x).
const (
	fMetricsDataResourceMetrics = 1 // MetricsData.resource_metrics

	fResourceMetricsResource = 1 // ResourceMetrics.resource
	fResourceMetricsScope    = 2 // ResourceMetrics.scope_metrics

	fResourceAttributes = 1 // Resource.attributes

	fScopeMetricsScope   = 1 // ScopeMetrics.scope
	fScopeMetricsMetrics = 2 // ScopeMetrics.metrics

	fScopeName    = 1 // InstrumentationScope.name
	fScopeVersion = 2 // InstrumentationScope.version

	fMetricName  = 1 // Metric.name
	fMetricGauge = 5 // Metric.gauge
	fMetricSum   = 7 // Metric.sum

	fGaugePoints = 1 // Gauge.data_points

	fSumPoints      = 1 // Sum.data_points
	fSumTemporality = 2 // Sum.aggregation_temporality
	fSumMonotonic   = 3 // Sum.is_monotonic

	fPointStart      = 2 // NumberDataPoint.start_time_unix_nano (fixed64)
	fPointTime       = 3 // NumberDataPoint.time_unix_nano (fixed64)
	fPointDouble     = 4 // NumberDataPoint.as_double
	fPointAttributes = 7 // NumberDataPoint.attributes

	fKeyValueKey   = 1 // KeyValue.key
	fKeyValueValue = 2 // KeyValue.value
	fAnyString     = 1 // AnyValue.string_value
)

// AggregationTemporality values.
const (
	temporalityDelta      = 1
	temporalityCumulative = 2
)

// Kind is how a metric's points aggregate.
type Kind uint8

const (
	// Gauge is a value at the point's time (OTLP Gauge).
	Gauge Kind = iota
	// DeltaSum is a monotonic Sum whose points count since their start
	// time, the previous push (AGGREGATION_TEMPORALITY_DELTA).
	DeltaSum
	// CumulativeSum is a monotonic Sum whose points count since their
	// start time, the series' creation (AGGREGATION_TEMPORALITY_CUMULATIVE).
	CumulativeSum
)

// KeyValue is a string attribute; an empty Key means none.
type KeyValue struct{ Key, Value string }

// Encoder writes one OTLP MetricsData message into a buffer it reuses:
//
//	e.Reset()
//	e.Begin(resource, "samsa", version)
//	e.BeginMetric("org.apache.kafka.producer.record.send.total", telemetry.DeltaSum)
//	e.Point(telemetry.KeyValue{}, start, now, 42)
//	e.EndMetric()
//	e.End()
//	payload := e.Bytes()
//
// Every metric goes into one ResourceMetrics with one ScopeMetrics. A
// metric that got no Point is left out. Each nested message is written in
// place and its length prefix inserted when it closes (the body moves by
// the prefix's 1 to 3 bytes), so one buffer serves every push: after the
// first pushes an Encoder allocates nothing.
type Encoder struct {
	b      []byte
	open   []int // start offsets of the open messages' bodies
	metric int   // where the open metric's tag starts
	points int   // points of the open metric
	kind   Kind
}

// Reset empties the buffer for a new message.
func (e *Encoder) Reset() {
	e.b = e.b[:0]
	e.open = e.open[:0]
}

// Bytes returns the encoded message; it is valid until the next Reset.
func (e *Encoder) Bytes() []byte { return e.b }

// Begin opens the ResourceMetrics (with resource's attributes; an empty
// one has none) and its ScopeMetrics, whose scope is name and version.
func (e *Encoder) Begin(resource []KeyValue, name, version string) {
	e.openField(fMetricsDataResourceMetrics)
	if len(resource) > 0 {
		e.openField(fResourceMetricsResource)
		for _, kv := range resource {
			e.keyValue(fResourceAttributes, kv)
		}
		e.closeField()
	}
	e.openField(fResourceMetricsScope)
	e.openField(fScopeMetricsScope)
	e.str(fScopeName, name)
	e.str(fScopeVersion, version)
	e.closeField()
}

// End closes what Begin opened.
func (e *Encoder) End() {
	e.closeField() // ScopeMetrics
	e.closeField() // ResourceMetrics
}

// BeginMetric opens a metric of the scope.
func (e *Encoder) BeginMetric(name string, kind Kind) {
	e.metric = len(e.b)
	e.points = 0
	e.kind = kind
	e.openField(fScopeMetricsMetrics)
	e.str(fMetricName, name)
	if kind == Gauge {
		e.openField(fMetricGauge)
	} else {
		e.openField(fMetricSum)
	}
}

// Point adds a data point to the open metric: attr (if its Key is set),
// the start of the interval it covers (0: none, as for gauges) and its
// time, both in Unix nanoseconds, and its value.
func (e *Encoder) Point(attr KeyValue, start, at int64, v float64) {
	e.points++
	e.openField(fGaugePoints) // the same field number in Sum
	if attr.Key != "" {
		e.keyValue(fPointAttributes, attr)
	}
	if start != 0 {
		e.fixed64(fPointStart, uint64(start))
	}
	e.fixed64(fPointTime, uint64(at))
	e.fixed64(fPointDouble, math.Float64bits(v))
	e.closeField()
}

// EndMetric closes the open metric, or drops it if it got no point.
func (e *Encoder) EndMetric() {
	if e.points == 0 {
		e.b = e.b[:e.metric]
		e.open = e.open[:len(e.open)-2]
		return
	}
	if e.kind != Gauge {
		t := uint64(temporalityCumulative)
		if e.kind == DeltaSum {
			t = temporalityDelta
		}
		e.varint(fSumTemporality, t)
		e.varint(fSumMonotonic, 1)
	}
	e.closeField() // Gauge or Sum
	e.closeField() // Metric
}

func (e *Encoder) tag(field, wire int) {
	e.b = binary.AppendUvarint(e.b, uint64(field)<<3|uint64(wire))
}

func (e *Encoder) openField(field int) {
	e.tag(field, wireBytes)
	e.open = append(e.open, len(e.b))
}

// closeField ends the innermost open message: its body moves right to make
// room for its length.
func (e *Encoder) closeField() {
	start := e.open[len(e.open)-1]
	e.open = e.open[:len(e.open)-1]
	n := len(e.b) - start
	var prefix [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(prefix[:], uint64(n))
	e.b = append(e.b, prefix[:l]...) // room; the bytes are overwritten
	copy(e.b[start+l:], e.b[start:start+n])
	copy(e.b[start:], prefix[:l])
}

func (e *Encoder) str(field int, s string) {
	e.tag(field, wireBytes)
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *Encoder) fixed64(field int, v uint64) {
	e.tag(field, wireFixed64)
	e.b = binary.LittleEndian.AppendUint64(e.b, v)
}

func (e *Encoder) varint(field int, v uint64) {
	e.tag(field, wireVarint)
	e.b = binary.AppendUvarint(e.b, v)
}

func (e *Encoder) keyValue(field int, kv KeyValue) {
	e.openField(field)
	e.str(fKeyValueKey, kv.Key)
	e.openField(fKeyValueValue)
	e.str(fAnyString, kv.Value)
	e.closeField()
	e.closeField()
}
