package telemetry

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The interop module decodes the encoder's payloads with the real OTLP
// types (interop/telemetry_test.go); here Decode reads them back.

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

		d, err := Decode(e.Bytes())
		require.NoError(t, err)
		require.Len(t, d.Resources, 1, "round %d", round)
		r := d.Resources[0]
		assert.Equal(t, []KeyValue{{"transactional_id", "tx-1"}}, r.Attributes)
		require.Len(t, r.Scopes, 1)
		assert.Equal(t, "samsa", r.Scopes[0].Name)
		assert.Equal(t, "v1.2.3", r.Scopes[0].Version)
		assert.Equal(t, []Metric{
			{Name: "org.apache.kafka.producer.record.send.total", Kind: DeltaSum, Monotonic: true,
				Points: []Point{{Start: 100, Time: 200, Value: 42}}},
			{Name: "org.apache.kafka.producer.node.request.latency.avg", Kind: Gauge,
				Points: []Point{{Attributes: []KeyValue{{"node_id", "node-1"}}, Time: 200, Value: 1.5},
					{Attributes: []KeyValue{{"node_id", "node-2"}}, Time: 200, Value: 2.5}}},
			{Name: "org.apache.kafka.producer.connection.creation.total", Kind: CumulativeSum, Monotonic: true,
				Points: []Point{{Start: 50, Time: 200, Value: 3}}},
		}, d.All())
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
			d, err := Decode(e.Bytes())
			require.NoError(t, err)
			assert.Empty(t, d.Resources[0].Attributes)
			assert.Equal(t, []Metric{{Name: name, Kind: Gauge,
				Points: []Point{{Attributes: []KeyValue{{"topic", strings.Repeat("t", tc.value)}}, Time: 7, Value: -1}}}}, d.All())
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

func TestDecodeRefusesMalformedInput(t *testing.T) {
	var e Encoder
	e.Begin(nil, "samsa", "v0")
	e.BeginMetric("m", Gauge)
	e.Point(KeyValue{}, 0, 1, 2)
	e.EndMetric()
	e.End()
	good := e.Bytes()
	cases := map[string][]byte{
		"truncated":     good[:len(good)-3],
		"bad length":    {0x0a, 0x7f, 0x01},
		"field zero":    {0x00, 0x01},
		"wire type 3":   {0x0b},
		"short fixed64": {0x09, 1, 2},
	}
	for name, b := range cases {
		_, err := Decode(b)
		assert.ErrorIs(t, err, errMalformed, name)
	}
	_, err := Decode(nil)
	assert.NoError(t, err, "an empty MetricsData")
}

func FuzzDecode(f *testing.F) {
	var e Encoder
	e.Begin([]KeyValue{{"k", "v"}}, "samsa", "v0")
	e.BeginMetric("m", DeltaSum)
	e.Point(KeyValue{"topic", "t"}, 1, 2, 3)
	e.EndMetric()
	e.End()
	f.Add(e.Bytes())
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Decode(b) // never panics
	})
}
