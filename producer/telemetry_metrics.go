// What a KIP-714 push carries: the metrics of Metrics that the Java
// producer also has, under Java's telemetry names and units, as OTLP.

package producer

import (
	"strconv"
	"strings"
	"time"

	"github.com/samsa-go/samsa/internal/telemetry"
)

// javaPush says how a metric of Metrics maps to the Java producer's
// telemetry metric of the same name: scale converts Each's unit to
// Java's (seconds to milliseconds for latencies and throttles), name
// replaces the metric's name where Java 4 renamed it, and rate adds
// Java's "-rate" gauge of a "-total" counter.
type javaPush struct {
	scale float64
	name  string
	rate  bool
}

var (
	javaCount = javaPush{scale: 1, rate: true}
	javaValue = javaPush{scale: 1}
	javaMs    = javaPush{scale: 1e3}
)

// javaPushMetrics are, per scope, the metrics Java's producer registers in
// its producer-metrics, producer-topic-metrics and producer-node-metrics
// groups that samsa has too (KIP-714's required producer metrics among
// them: connection-creation-rate and -total, node request-latency-avg and
// -max, produce-throttle-time-avg and -max, record-queue-time-avg and
// -max). samsa's own metrics (request-latency-p50, parked-*,
// buffered-records, batch-ack-*, ...) are not pushed: their names would
// claim Java's namespace.
var javaPushMetrics = [...]map[string]javaPush{
	ScopeProducer: {
		"record-send-total": javaCount, "record-error-total": javaCount, "record-retry-total": javaCount,
		"record-size-avg": javaValue, "record-size-max": javaValue,
		"record-queue-time-avg": javaMs, "record-queue-time-max": javaMs,
		"batch-size-avg": javaValue, "batch-size-max": javaValue,
		"records-per-request-avg": javaValue, "compression-rate-avg": javaValue,
		"request-latency-avg": javaMs, "request-latency-max": javaMs,
		"requests-in-flight": javaValue, "request-total": javaCount, "response-total": javaCount,
		"buffer-available-bytes": javaValue, "buffer-total-bytes": javaValue,
		// Java 4 has only the nanosecond name (3.x's deprecated
		// bufferpool-wait-time-total was removed).
		"bufferpool-wait-time-total": {scale: 1e9, name: "bufferpool-wait-time-ns-total"},
		"buffer-exhausted-total":     javaCount,
		"produce-throttle-time-avg":  javaMs, "produce-throttle-time-max": javaMs,
		"metadata-age":        javaValue, // seconds in Java too
		"outgoing-byte-total": javaCount, "incoming-byte-total": javaCount,
		"connection-count":          javaValue,
		"connection-creation-total": javaCount, "connection-close-total": javaCount,
	},
	ScopeTopic: {
		"record-send-total": javaCount, "record-error-total": javaCount, "record-retry-total": javaCount,
		"byte-total": javaCount, "compression-rate": javaValue,
	},
	ScopeBroker: {
		"request-latency-avg": javaMs, "request-latency-max": javaMs,
		"request-total": javaCount, "response-total": javaCount,
		"outgoing-byte-total": javaCount, "incoming-byte-total": javaCount,
	},
}

// telemetryGroups are the Java metric groups' telemetry prefixes (Java's
// TelemetryMetricNamingConvention: the domain, then the group without
// "-metrics", dotted): producer-metrics, producer-topic-metrics and
// producer-node-metrics.
var telemetryGroups = [...]string{
	ScopeProducer: "org.apache.kafka.producer.",
	ScopeTopic:    "org.apache.kafka.producer.topic.",
	ScopeBroker:   "org.apache.kafka.producer.node.",
}

// telemetryName is Java's telemetry name of a metric of scope:
// "record-send-total" → "org.apache.kafka.producer.record.send.total".
func telemetryName(scope MetricScope, name string) string {
	return telemetryGroups[scope] + strings.ReplaceAll(name, "-", ".")
}

// pushMetric is one metric a push may carry.
type pushMetric struct {
	scope MetricScope
	index int // in the scope's metric table
	name  string
	sum   bool    // a counter: an OTLP Sum
	scale float64 // Each's unit to Java's
	rate  string  // the name of its rate gauge, or ""
}

// pushTable lists the pushed metrics in Each's order.
var pushTable = func() []pushMetric {
	var out []pushMetric
	add := func(scope MetricScope, i int, info MetricInfo) {
		j, ok := javaPushMetrics[scope][info.Name]
		if !ok {
			return
		}
		name := info.Name
		if j.name != "" {
			name = j.name
		}
		pm := pushMetric{scope: scope, index: i, name: telemetryName(scope, name), sum: info.Kind == MetricCounter, scale: j.scale}
		if j.rate {
			pm.rate = telemetryName(scope, strings.TrimSuffix(name, "-total")+"-rate")
		}
		out = append(out, pm)
	}
	for i, e := range producerMetricTable {
		add(ScopeProducer, i, e.info)
	}
	for i, e := range topicMetricTable {
		add(ScopeTopic, i, e.info)
	}
	for i, e := range brokerMetricTable {
		add(ScopeBroker, i, e.info)
	}
	return out
}()

// seriesKey names one series of a pushed metric, for the ledger.
type seriesKey struct {
	metric int32 // in pushTable
	node   int32
	topic  string
}

// pushPoint is one series' value at a push: v the metric's value; for a
// counter, d its growth since from, the last push (or the producer's
// start).
type pushPoint struct {
	metric int32
	attr   telemetry.KeyValue
	v, d   float64
	from   int64
}

// pushEncoder turns Metrics snapshots into the OTLP payloads of a
// subscription. Only the telemetry goroutine uses it.
type pushEncoder struct {
	start    int64 // the producer's creation, Unix nanoseconds
	resource []telemetry.KeyValue
	version  string
	enc      telemetry.Encoder
	ledger   telemetry.Ledger[seriesKey]
	points   []pushPoint
	nodes    map[int32]string // "node-1": Java's node-id tag
}

// collect takes every subscribed series' value from m at now and, for
// counters, its growth since the last push (recorded in the ledger).
func (pe *pushEncoder) collect(m *Metrics, sub *telemetry.Subscription, now int64) {
	pe.points = pe.points[:0]
	for i := range pushTable {
		pm := &pushTable[i]
		if !sub.Wants(pm.name) && (pm.rate == "" || !sub.Wants(pm.rate)) {
			continue
		}
		switch pm.scope {
		case ScopeProducer:
			pe.add(i, telemetry.KeyValue{}, seriesKey{metric: int32(i)}, producerMetricTable[pm.index].get(&m.Producer), now)
		case ScopeTopic:
			for j := range m.Topics {
				tm := &m.Topics[j]
				pe.add(i, telemetry.KeyValue{Key: "topic", Value: tm.Topic}, seriesKey{metric: int32(i), topic: tm.Topic},
					topicMetricTable[pm.index].get(tm), now)
			}
		case ScopeBroker:
			for j := range m.Brokers {
				bm := &m.Brokers[j]
				pe.add(i, telemetry.KeyValue{Key: "node_id", Value: pe.nodeTag(bm.NodeID)}, seriesKey{metric: int32(i), node: bm.NodeID},
					brokerMetricTable[pm.index].get(bm), now)
			}
		}
	}
}

func (pe *pushEncoder) add(i int, attr telemetry.KeyValue, k seriesKey, v float64, now int64) {
	pm := &pushTable[i]
	pt := pushPoint{metric: int32(i), attr: attr, v: v * pm.scale}
	if pm.sum {
		pt.d, pt.from = pe.ledger.Delta(k, pt.v, pe.start, now)
	}
	pe.points = append(pe.points, pt)
}

// nodeTag is Java's node-id tag of a broker: "node-" and its id.
func (pe *pushEncoder) nodeTag(id int32) string {
	if s, ok := pe.nodes[id]; ok {
		return s
	}
	if pe.nodes == nil {
		pe.nodes = make(map[int32]string)
	}
	s := "node-" + strconv.Itoa(int(id))
	pe.nodes[id] = s
	return s
}

// encode writes the collected points as a MetricsData: counters as
// monotonic Sums (deltas since the last push with delta, else cumulative
// since the producer's start), the rest as Gauges, and each counter's rate
// over the interval as a Gauge. With producerOnly, per-topic and
// per-broker series are left out (a payload over the broker's
// TelemetryMaxBytes is encoded again so).
func (pe *pushEncoder) encode(sub *telemetry.Subscription, now int64, producerOnly bool) []byte {
	e := &pe.enc
	e.Reset()
	e.Begin(pe.resource, "samsa", pe.version)
	for lo := 0; lo < len(pe.points); {
		hi := lo + 1
		for hi < len(pe.points) && pe.points[hi].metric == pe.points[lo].metric {
			hi++
		}
		pm := &pushTable[pe.points[lo].metric]
		pts := pe.points[lo:hi]
		lo = hi
		if producerOnly && pm.scope != ScopeProducer {
			continue
		}
		if sub.Wants(pm.name) {
			kind := telemetry.Gauge
			if pm.sum {
				kind = telemetry.CumulativeSum
				if sub.Delta {
					kind = telemetry.DeltaSum
				}
			}
			e.BeginMetric(pm.name, kind)
			for _, pt := range pts {
				switch kind {
				case telemetry.Gauge:
					e.Point(pt.attr, 0, now, pt.v)
				case telemetry.DeltaSum:
					e.Point(pt.attr, pt.from, now, pt.d)
				default:
					e.Point(pt.attr, pe.start, now, pt.v)
				}
			}
			e.EndMetric()
		}
		if pm.rate != "" && sub.Wants(pm.rate) {
			e.BeginMetric(pm.rate, telemetry.Gauge)
			for _, pt := range pts {
				r := 0.0
				if secs := time.Duration(now - pt.from).Seconds(); secs > 0 {
					r = pt.d / secs
				}
				e.Point(pt.attr, 0, now, r)
			}
			e.EndMetric()
		}
	}
	e.End()
	return e.Bytes()
}
