package producer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/telemetry"
	"github.com/samsa-go/samsa/internal/testbroker"
)

// decodedPush is a push the test broker recorded, its metrics decoded.
type decodedPush struct {
	testbroker.TelemetryPush
	data telemetry.MetricsData
}

// pushesOf returns the pushes of client id, decoded.
func pushesOf(t *testing.T, c *testbroker.Cluster, clientID string) []decodedPush {
	t.Helper()
	var out []decodedPush
	for _, p := range c.TelemetryPushes() {
		if p.ClientID != clientID {
			continue
		}
		d, err := telemetry.Decode(p.Metrics)
		require.NoError(t, err)
		out = append(out, decodedPush{p, d})
	}
	return out
}

// accepted counts the pushes the broker took.
func accepted(ps []decodedPush) int {
	n := 0
	for _, p := range ps {
		if p.ErrorCode == 0 {
			n++
		}
	}
	return n
}

// points returns the points of the metric named name in p.
func points(p decodedPush, name string) []telemetry.Point {
	for _, m := range p.data.All() {
		if m.Name == name {
			return m.Points
		}
	}
	return nil
}

// deltaTotal adds up a delta Sum over the accepted pushes, per attribute
// value ("" without one).
func deltaTotal(ps []decodedPush, name string) map[string]float64 {
	out := map[string]float64{}
	for _, p := range ps {
		if p.ErrorCode != 0 {
			continue
		}
		for _, pt := range points(p, name) {
			key := ""
			if len(pt.Attributes) > 0 {
				key = pt.Attributes[0].Value
			}
			out[key] += pt.Value
		}
	}
	return out
}

func closeProducer(t *testing.T, p *Producer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Close(ctx))
}

// TestMetricsPushCarriesJavaNamesAndTheMetricsValues is issue 25's KIP-714
// promise: a subscribed producer pushes Metrics under Java's telemetry
// names, deltas that add up to Metrics' counters, per-topic and per-node
// series with Java's attributes, and a terminating push with the final
// values on Close.
func TestMetricsPushCarriesJavaNamesAndTheMetricsValues(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 2, Telemetry: &testbroker.Telemetry{
		Metrics: []string{"org.apache.kafka.producer."}, Interval: 50 * time.Millisecond,
	}})
	require.NoError(t, c.CreateTopic("tele", 4))
	p := newProducer(t, c, Config{ClientID: "tele-java-names"})
	require.Zero(t, sendN(t, p, "tele", 200))
	require.True(t, waitFor(20*time.Second, func() bool { return accepted(pushesOf(t, c, "tele-java-names")) >= 2 }))
	require.Zero(t, sendN(t, p, "tele", 100))
	closeProducer(t, p)
	m := p.Metrics()

	ps := pushesOf(t, c, "tele-java-names")
	last := ps[len(ps)-1]
	require.True(t, last.Terminating, "the last push is the terminating one")
	require.Zero(t, last.ErrorCode)
	for i, push := range ps {
		assert.Equal(t, int8(compression.Zstd), push.CompressionType, "push %d: the broker's first codec", i)
		assert.Equal(t, i == len(ps)-1, push.Terminating, "push %d: only the last terminates", i)
	}
	for _, m := range last.data.All() {
		assert.True(t, strings.HasPrefix(m.Name, "org.apache.kafka.producer."), m.Name)
	}
	require.Len(t, last.data.Resources, 1)
	assert.Empty(t, last.data.Resources[0].Attributes, "no transactional id")
	assert.Equal(t, "samsa", last.data.Resources[0].Scopes[0].Name)

	assert.Equal(t, map[string]float64{"": 300}, deltaTotal(ps, "org.apache.kafka.producer.record.send.total"))
	assert.EqualValues(t, 300, m.Producer.RecordSendTotal)
	assert.Equal(t, map[string]float64{"tele": 300}, deltaTotal(ps, "org.apache.kafka.producer.topic.record.send.total"))
	assert.Equal(t, map[string]float64{"": float64(m.Producer.OutgoingByteTotal)}, deltaTotal(ps, "org.apache.kafka.producer.outgoing.byte.total"))
	assert.Equal(t, map[string]float64{"tele": float64(m.Topics[0].ByteTotal)}, deltaTotal(ps, "org.apache.kafka.producer.topic.byte.total"))
	nodeBytes := map[string]float64{}
	for _, b := range m.Brokers {
		nodeBytes[fmt.Sprintf("node-%d", b.NodeID)] = float64(b.OutgoingByteTotal)
	}
	assert.Equal(t, nodeBytes, deltaTotal(ps, "org.apache.kafka.producer.node.outgoing.byte.total"))

	// Gauges carry the final values, in Java's units (milliseconds).
	latency := map[string]float64{}
	for _, pt := range points(last, "org.apache.kafka.producer.node.request.latency.avg") {
		require.Len(t, pt.Attributes, 1)
		assert.Equal(t, "node_id", pt.Attributes[0].Key)
		latency[pt.Attributes[0].Value] = pt.Value
	}
	want := map[string]float64{}
	for _, b := range m.Brokers {
		want[fmt.Sprintf("node-%d", b.NodeID)] = b.RequestLatencyAvg.Seconds() * 1e3
	}
	assert.Equal(t, want, latency)
	assert.Equal(t, []telemetry.Point{{Time: last.data.All()[0].Points[0].Time, Value: m.Producer.RequestLatencyMax.Seconds() * 1e3}},
		points(last, "org.apache.kafka.producer.request.latency.max"))
	assert.NotEmpty(t, points(last, "org.apache.kafka.producer.record.send.rate"), "Java's rate gauges")
	assert.NotEmpty(t, points(last, "org.apache.kafka.producer.connection.creation.total"), "KIP-714's required metrics")
	assert.Empty(t, points(last, "org.apache.kafka.producer.request.latency.p99"), "samsa's own metrics stay out of Java's namespace")
}
