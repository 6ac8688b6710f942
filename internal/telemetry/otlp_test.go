package telemetry

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// field is one decoded protobuf field: a varint or fixed64 in n, bytes in
// b. The interop module decodes the same payloads with the real OTLP types
// (interop/telemetry_test.go); this walker checks the structure here.
type field struct {
	num, wire int
	n         uint64
	b         []byte
}

func decode(t *testing.T, b []byte) []field {
	t.Helper()
	var out []field
	for len(b) > 0 {
		tag, l := binary.Uvarint(b)
		require.Positive(t, l, "tag")
		b = b[l:]
		f := field{num: int(tag >> 3), wire: int(tag & 7)}
		switch f.wire {
		case wireVarint:
			f.n, l = binary.Uvarint(b)
			require.Positive(t, l, "varint")
			b = b[l:]
		case wireFixed64:
			require.GreaterOrEqual(t, len(b), 8)
			f.n, b = binary.LittleEndian.Uint64(b), b[8:]
		case wireBytes:
			n, l := binary.Uvarint(b)
			require.Positive(t, l, "length")
			require.LessOrEqual(t, n, uint64(len(b)-l), "length past the end")
			f.b, b = b[l:l+int(n)], b[l+int(n):]
		default:
			t.Fatalf("wire type %d", f.wire)
		}
		out = append(out, f)
	}
	return out
}

func get(fs []field, num int) []field {
	var out []field
	for _, f := range fs {
		if f.num == num {
			out = append(out, f)
		}
	}
	return out
}

func one(t *testing.T, fs []field, num int) field {
	t.Helper()
	got := get(fs, num)
	require.Len(t, got, 1, "field %d", num)
	return got[0]
}

// point is a decoded NumberDataPoint.
type point struct {
	attr      string // "key=value" or ""
	start, at uint64
	v         float64
}

type metric struct {
	name        string
	gauge       bool
	temporality uint64
	monotonic   bool
	points      []point
}

// decodeMetrics returns the resource's attributes ("k=v"), the scope and
// every metric of a MetricsData with one ResourceMetrics and one
// ScopeMetrics.
func decodeMetrics(t *testing.T, b []byte) (resource []string, scope string, ms []metric) {
	t.Helper()
	rm := decode(t, one(t, decode(t, b), fMetricsDataResourceMetrics).b)
	kv := func(b []byte) string {
		f := decode(t, b)
		return string(one(t, f, fKeyValueKey).b) + "=" + string(one(t, decode(t, one(t, f, fKeyValueValue).b), fAnyString).b)
	}
	for _, r := range get(rm, fResourceMetricsResource) {
		for _, a := range get(decode(t, r.b), fResourceAttributes) {
			resource = append(resource, kv(a.b))
		}
	}
	sm := decode(t, one(t, rm, fResourceMetricsScope).b)
	sc := decode(t, one(t, sm, fScopeMetricsScope).b)
	scope = string(one(t, sc, fScopeName).b) + "/" + string(one(t, sc, fScopeVersion).b)
	for _, mf := range get(sm, fScopeMetricsMetrics) {
		f := decode(t, mf.b)
		m := metric{name: string(one(t, f, fMetricName).b)}
		var data []field
		if g := get(f, fMetricGauge); len(g) == 1 {
			m.gauge = true
			data = decode(t, g[0].b)
		} else {
			data = decode(t, one(t, f, fMetricSum).b)
			m.temporality = one(t, data, fSumTemporality).n
			m.monotonic = one(t, data, fSumMonotonic).n == 1
		}
		for _, pf := range get(data, fSumPoints) {
			p := decode(t, pf.b)
			pt := point{at: one(t, p, fPointTime).n, v: math.Float64frombits(one(t, p, fPointDouble).n)}
			if a := get(p, fPointAttributes); len(a) == 1 {
				pt.attr = kv(a[0].b)
			}
			if s := get(p, fPointStart); len(s) == 1 {
				pt.start = s[0].n
			}
			m.points = append(m.points, pt)
		}
		ms = append(ms, m)
	}
	return resource, scope, ms
}

func TestEncoderWritesMetricsData(t *testing.T) {
	var e Encoder
	for round := range 2 { // the second round reuses the buffer
		e.Reset()
		e.Begin([]KeyValue{{"transactional_id", "tx-1"}}, "samsa", "v1.2.3")
		e.BeginMetric("org.apache.kafka.producer.record.send.total", DeltaSum)
		e.Point(KeyValue{}, 100, 200, 42)
		e.EndMetric()
		e.BeginMetric("org.apache.kafka.producer.node.request.latency.avg", Gauge)
		e.Point(KeyValue{"node_id", "node-1"}, 0, 200, 1.5)
		e.Point(KeyValue{"node_id", "node-2"}, 0, 200, 2.5)
		e.EndMetric()
		e.BeginMetric("org.apache.kafka.producer.topic.byte.total", CumulativeSum)
		e.EndMetric() // no point: left out
		e.BeginMetric("org.apache.kafka.producer.connection.creation.total", CumulativeSum)
		e.Point(KeyValue{}, 50, 200, 3)
		e.EndMetric()
		e.End()

		res, scope, ms := decodeMetrics(t, e.Bytes())
		assert.Equal(t, []string{"transactional_id=tx-1"}, res, "round %d", round)
		assert.Equal(t, "samsa/v1.2.3", scope)
		assert.Equal(t, []metric{
			{name: "org.apache.kafka.producer.record.send.total", temporality: temporalityDelta, monotonic: true,
				points: []point{{start: 100, at: 200, v: 42}}},
			{name: "org.apache.kafka.producer.node.request.latency.avg", gauge: true,
				points: []point{{attr: "node_id=node-1", at: 200, v: 1.5}, {attr: "node_id=node-2", at: 200, v: 2.5}}},
			{name: "org.apache.kafka.producer.connection.creation.total", temporality: temporalityCumulative, monotonic: true,
				points: []point{{start: 50, at: 200, v: 3}}},
		}, ms)
	}
}

// TestEncoderLengthPrefixesOfEverySize crosses the 1-, 2- and 3-byte
// length prefixes of nested messages: a body that grows past 127 and 16383
// bytes moves by the prefix's size when its message closes.
func TestEncoderLengthPrefixesOfEverySize(t *testing.T) {
	cases := []struct{ name, value int }{{1, 1}, {120, 3}, {200, 10}, {16000, 500}, {20000, 20000}}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.name, "-", tc.value), func(t *testing.T) {
			var e Encoder
			e.Begin(nil, "samsa", "v0")
			name := strings.Repeat("n", tc.name)
			e.BeginMetric(name, Gauge)
			e.Point(KeyValue{"topic", strings.Repeat("t", tc.value)}, 0, 7, -1)
			e.EndMetric()
			e.End()
			res, _, ms := decodeMetrics(t, e.Bytes())
			assert.Empty(t, res)
			require.Len(t, ms, 1)
			assert.Equal(t, name, ms[0].name)
			assert.Equal(t, []point{{attr: "topic=" + strings.Repeat("t", tc.value), at: 7, v: -1}}, ms[0].points)
		})
	}
}

func TestEncoderAllocatesNothingOnceWarm(t *testing.T) {
	var e Encoder
	build := func() {
		e.Reset()
		e.Begin([]KeyValue{{"transactional_id", "tx"}}, "samsa", "v1")
		for range 40 {
			e.BeginMetric("org.apache.kafka.producer.record.send.total", DeltaSum)
			e.Point(KeyValue{"topic", "orders"}, 1, 2, 3)
			e.EndMetric()
		}
		e.End()
	}
	build()
	assert.Zero(t, testing.AllocsPerRun(10, build))
}
