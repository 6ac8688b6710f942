package interop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-go/samsa/internal/telemetry"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/producer"
)

// otlpPush is one KIP-714 push decoded with the real OTLP types
// (go.opentelemetry.io/proto/otlp), the check of samsa's hand-written
// encoder (internal/telemetry): every series by metric name, then by its
// attribute ("" without one).
type otlpPush struct {
	terminating bool
	resource    map[string]string
	scope       string
	series      map[string]map[string]otlpPoint
}

type otlpPoint struct {
	gauge     bool
	delta     bool // a Sum with AGGREGATION_TEMPORALITY_DELTA
	monotonic bool
	start, at uint64
	v         float64
}

func decodeOTLP(t *testing.T, b []byte, terminating bool) otlpPush {
	t.Helper()
	var md metricspb.MetricsData
	require.NoError(t, proto.Unmarshal(b, &md), "an OTLP MetricsData")
	p := otlpPush{terminating: terminating, resource: map[string]string{}, series: map[string]map[string]otlpPoint{}}
	for _, rm := range md.GetResourceMetrics() {
		for _, kv := range rm.GetResource().GetAttributes() {
			p.resource[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, sm := range rm.GetScopeMetrics() {
			p.scope = sm.GetScope().GetName()
			for _, m := range sm.GetMetrics() {
				byAttr := p.series[m.GetName()]
				if byAttr == nil {
					byAttr = map[string]otlpPoint{}
					p.series[m.GetName()] = byAttr
				}
				var pts []*metricspb.NumberDataPoint
				var pt otlpPoint
				switch {
				case m.GetGauge() != nil:
					pts, pt.gauge = m.GetGauge().GetDataPoints(), true
				case m.GetSum() != nil:
					s := m.GetSum()
					pts, pt.monotonic = s.GetDataPoints(), s.GetIsMonotonic()
					pt.delta = s.GetAggregationTemporality() == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
					require.NotEqual(t, metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_UNSPECIFIED, s.GetAggregationTemporality(), m.GetName())
				default:
					t.Fatalf("%s: neither a Gauge nor a Sum", m.GetName())
				}
				for _, dp := range pts {
					attr := ""
					for _, kv := range dp.GetAttributes() {
						attr = kv.GetKey() + "=" + kv.GetValue().GetStringValue()
					}
					q := pt
					q.start, q.at, q.v = dp.GetStartTimeUnixNano(), dp.GetTimeUnixNano(), dp.GetAsDouble()
					byAttr[attr] = q
				}
			}
		}
	}
	return p
}

// deltaSum adds up a delta Sum over pushes, per attribute.
func deltaSum(t *testing.T, ps []otlpPush, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, p := range ps {
		for attr, pt := range p.series[name] {
			require.True(t, pt.delta && pt.monotonic, "%s: a monotonic delta Sum", name)
			require.Less(t, pt.start, pt.at, "%s: a start time before the point's", name)
			out[attr] += pt.v
		}
	}
	return out
}

// checkPushesAgree checks that pushes (all accepted, in order, the last
// terminating) say what m says, under Java's names and units.
func checkPushesAgree(t *testing.T, ps []otlpPush, m producer.Metrics, topic string) {
	t.Helper()
	require.NotEmpty(t, ps)
	last := ps[len(ps)-1]
	require.True(t, last.terminating, "the last push terminates")
	assert.Equal(t, "samsa", last.scope)
	assert.Equal(t, map[string]float64{"": float64(m.Producer.RecordSendTotal)}, deltaSum(t, ps, "org.apache.kafka.producer.record.send.total"))
	assert.Equal(t, map[string]float64{"topic=" + topic: float64(m.Producer.RecordSendTotal)},
		deltaSum(t, ps, "org.apache.kafka.producer.topic.record.send.total"))
	assert.Equal(t, map[string]float64{"": float64(m.Producer.OutgoingByteTotal)}, deltaSum(t, ps, "org.apache.kafka.producer.outgoing.byte.total"))
	var topicBytes int64
	for _, tm := range m.Topics {
		if tm.Topic == topic {
			topicBytes = tm.ByteTotal
		}
	}
	assert.Equal(t, map[string]float64{"topic=" + topic: float64(topicBytes)}, deltaSum(t, ps, "org.apache.kafka.producer.topic.byte.total"))
	latency, bytes := map[string]float64{}, map[string]float64{}
	for _, b := range m.Brokers {
		attr := fmt.Sprintf("node_id=node-%d", b.NodeID)
		latency[attr] = b.RequestLatencyAvg.Seconds() * 1e3
		bytes[attr] = float64(b.OutgoingByteTotal)
	}
	got := map[string]float64{}
	for attr, pt := range last.series["org.apache.kafka.producer.node.request.latency.avg"] {
		assert.True(t, pt.gauge)
		got[attr] = pt.v
	}
	assert.Equal(t, latency, got, "request latency per node, in milliseconds")
	assert.Equal(t, bytes, deltaSum(t, ps, "org.apache.kafka.producer.node.outgoing.byte.total"))
	assert.Equal(t, m.Producer.RequestLatencyAvg.Seconds()*1e3, last.series["org.apache.kafka.producer.request.latency.avg"][""].v)
	assert.Contains(t, last.series, "org.apache.kafka.producer.connection.creation.rate", "KIP-714's required producer metrics")
	assert.Contains(t, last.series, "org.apache.kafka.producer.record.queue.time.max")
}

// TestTelemetryDecodesWithTheOTLPTypes: what samsa pushes to the test
// broker parses as an OTLP MetricsData with the real generated types, and
// agrees with internal/telemetry.Decode and with the producer's Metrics.
func TestTelemetryDecodesWithTheOTLPTypes(t *testing.T) {
	c := startCluster(t, testbroker.Config{Brokers: 2, Telemetry: &testbroker.Telemetry{
		Metrics: []string{"*"}, Interval: 50 * time.Millisecond,
	}})
	const topic = "otlp"
	require.NoError(t, c.CreateTopic(topic, 3))
	p := newSamsaProducer(t, c.Addrs(), producer.Config{ClientID: "samsa-telemetry-otlp", TransactionalID: ""})
	sendAll(t, p, makeSamsaRecords(topic, 300))
	require.Eventually(t, func() bool { return len(c.TelemetryPushes()) >= 2 }, 20*time.Second, 5*time.Millisecond)
	sendAll(t, p, makeSamsaRecords(topic, 100))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Close(ctx))

	var ps []otlpPush
	for i, push := range c.TelemetryPushes() {
		require.Zero(t, push.ErrorCode, "push %d accepted", i)
		got := decodeOTLP(t, push.Metrics, push.Terminating)
		ours, err := telemetry.Decode(push.Metrics)
		require.NoError(t, err)
		n := 0
		for _, m := range ours.All() {
			n += len(m.Points)
			for _, pt := range m.Points {
				attr := ""
				for _, kv := range pt.Attributes {
					attr = kv.Key + "=" + kv.Value
				}
				q, ok := got.series[m.Name][attr]
				require.True(t, ok, "%s %s", m.Name, attr)
				assert.Equal(t, pt.Value, q.v, "%s %s", m.Name, attr)
				assert.Equal(t, uint64(pt.Start), q.start)
				assert.Equal(t, m.Kind == telemetry.Gauge, q.gauge)
			}
		}
		total := 0
		for _, s := range got.series {
			total += len(s)
		}
		assert.Equal(t, n, total, "push %d: the same points both ways", i)
		ps = append(ps, got)
	}
	checkPushesAgree(t, ps, p.Metrics(), topic)
}
