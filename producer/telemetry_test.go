package producer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twmb/franz-go/pkg/kmsg"

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

// TestMetricsPushOffSendsNothing: with DisableMetricsPush
// (enable.metrics.push=false), or against brokers that do not advertise
// KIP-714's APIs (Kafka without a client metrics plugin), the producer
// sends no telemetry request at all.
func TestMetricsPushOffSendsNothing(t *testing.T) {
	sub := &testbroker.Telemetry{Metrics: []string{"*"}, Interval: 20 * time.Millisecond}
	cases := []struct {
		name      string
		telemetry *testbroker.Telemetry
		props     map[string]string
	}{
		{"enable.metrics.push=false", sub, map[string]string{"enable.metrics.push": "false"}},
		{"brokers without the APIs", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1, Telemetry: tc.telemetry})
			require.NoError(t, c.CreateTopic("quiet", 1))
			props := map[string]string{"bootstrap.servers": c.Addrs()[0], "client.id": "quiet"}
			for k, v := range tc.props {
				props[k] = v
			}
			cfg, err := ConfigFromProperties(props)
			require.NoError(t, err)
			p := newProducer(t, c, cfg)
			require.Zero(t, sendN(t, p, "quiet", 10))
			time.Sleep(100 * time.Millisecond) // five intervals
			closeProducer(t, p)
			assert.Zero(t, c.TelemetrySubscriptionRequests())
			assert.Empty(t, c.TelemetryPushes())
		})
	}
}

// TestMetricsPushFollowsTheSubscription: the subscription decides what is
// pushed (name prefixes), how (codec, temporality) and whether (an empty
// one is polled every interval until metrics are asked for).
func TestMetricsPushFollowsTheSubscription(t *testing.T) {
	const ivl = 30 * time.Millisecond
	cases := []struct {
		name  string
		sub   testbroker.Telemetry
		check func(t *testing.T, p *Producer, ps []decodedPush)
	}{
		{"name prefixes", testbroker.Telemetry{Metrics: []string{"org.apache.kafka.producer.node.", "org.apache.kafka.producer.record.send.total"}},
			func(t *testing.T, _ *Producer, ps []decodedPush) {
				names := map[string]bool{}
				for _, p := range ps {
					for _, m := range p.data.All() {
						names[m.Name] = true
					}
				}
				assert.True(t, names["org.apache.kafka.producer.record.send.total"])
				assert.True(t, names["org.apache.kafka.producer.node.request.latency.avg"])
				for n := range names {
					assert.True(t, strings.HasPrefix(n, "org.apache.kafka.producer.node.") || n == "org.apache.kafka.producer.record.send.total", n)
				}
			}},
		{"lz4 preferred", testbroker.Telemetry{Metrics: []string{"*"}, CompressionTypes: []int8{int8(compression.LZ4), int8(compression.Gzip)}},
			func(t *testing.T, _ *Producer, ps []decodedPush) {
				for _, p := range ps {
					assert.Equal(t, int8(compression.LZ4), p.CompressionType)
				}
			}},
		{"no codec accepted", testbroker.Telemetry{Metrics: []string{"*"}, CompressionTypes: []int8{}},
			func(t *testing.T, _ *Producer, ps []decodedPush) {
				for _, p := range ps {
					assert.Equal(t, int8(compression.None), p.CompressionType)
					assert.Equal(t, p.WireBytes, len(p.Metrics))
				}
			}},
		{"cumulative", testbroker.Telemetry{Metrics: []string{"org.apache.kafka.producer.record."}, Cumulative: true},
			func(t *testing.T, p *Producer, ps []decodedPush) {
				last := ps[len(ps)-1]
				var sum telemetry.Metric
				for _, m := range last.data.All() {
					if m.Name == "org.apache.kafka.producer.record.send.total" {
						sum = m
					}
				}
				assert.Equal(t, telemetry.CumulativeSum, sum.Kind)
				assert.True(t, sum.Monotonic)
				require.Len(t, sum.Points, 1)
				assert.EqualValues(t, p.Metrics().Producer.RecordSendTotal, sum.Points[0].Value)
				first := points(ps[0], "org.apache.kafka.producer.record.send.total")
				assert.Equal(t, first[0].Start, sum.Points[0].Start, "counted from the producer's start")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.sub.Interval = ivl
			c := newCluster(t, testbroker.Config{Brokers: 1, Telemetry: &tc.sub})
			require.NoError(t, c.CreateTopic("sub", 1))
			p := newProducer(t, c, Config{ClientID: "sub"})
			require.Zero(t, sendN(t, p, "sub", 20))
			require.True(t, waitFor(20*time.Second, func() bool { return accepted(pushesOf(t, c, "sub")) >= 2 }))
			closeProducer(t, p)
			ps := pushesOf(t, c, "sub")
			assert.Equal(t, len(ps), accepted(ps), "every push accepted")
			tc.check(t, p, ps)
		})
	}
}

// TestEmptySubscriptionIsPolledUntilMetricsAreAsked: KIP-714: a
// subscription without metrics is fetched again every push interval, so
// that one made later is picked up without a restart.
func TestEmptySubscriptionIsPolledUntilMetricsAreAsked(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, Telemetry: &testbroker.Telemetry{Interval: 20 * time.Millisecond}})
	p := newProducer(t, c, Config{ClientID: "poll"})
	require.True(t, waitFor(20*time.Second, func() bool { return c.TelemetrySubscriptionRequests() >= 3 }))
	assert.Empty(t, c.TelemetryPushes())
	c.SetTelemetry(testbroker.Telemetry{Metrics: []string{"*"}, Interval: 20 * time.Millisecond})
	require.True(t, waitFor(20*time.Second, func() bool { return accepted(pushesOf(t, c, "poll")) >= 1 }))
	closeProducer(t, p)
}

// TestMetricsPushAnswersAsKIP714Says: UNKNOWN_SUBSCRIPTION_ID fetches the
// subscription again at once, a throttle waits for the interval, and
// INVALID_RECORD stops telemetry for the producer's life (no terminating
// push either).
func TestMetricsPushAnswersAsKIP714Says(t *testing.T) {
	const ivl = 20 * time.Millisecond
	cases := []struct {
		name    string
		code    int16
		resumes bool
	}{
		{"UNKNOWN_SUBSCRIPTION_ID", 117, true},
		{"UNSUPPORTED_COMPRESSION_TYPE", 76, true},
		{"THROTTLING_QUOTA_EXCEEDED", 89, true},
		{"TELEMETRY_TOO_LARGE", 118, true},
		{"INVALID_RECORD", 87, false},
		{"INVALID_REQUEST", 42, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1, Telemetry: &testbroker.Telemetry{Metrics: []string{"*"}, Interval: ivl}})
			// The second push is refused (after the broker recorded
			// it); the first has shown the schedule works.
			n := 0
			c.Intercept(testbroker.Interceptor{Keys: []int16{72}, Times: 1, After: true, ErrorCode: tc.code, Match: func(int32, kmsg.Request) bool {
				n++
				return n == 2
			}})
			p := newProducer(t, c, Config{ClientID: "answers"})
			require.True(t, waitFor(20*time.Second, func() bool { return len(pushesOf(t, c, "answers")) >= 2 }))
			gets := c.TelemetrySubscriptionRequests()
			if tc.resumes {
				require.True(t, waitFor(20*time.Second, func() bool { return accepted(pushesOf(t, c, "answers")) >= 3 }))
				assert.GreaterOrEqual(t, c.TelemetrySubscriptionRequests(), 2, "the subscription was fetched again")
			} else {
				time.Sleep(10 * ivl)
			}
			closeProducer(t, p)
			ps := pushesOf(t, c, "answers")
			if !tc.resumes {
				assert.Len(t, ps, 2, "nothing after %s, not even a terminating push", tc.name)
				assert.Equal(t, gets, c.TelemetrySubscriptionRequests())
				return
			}
			assert.True(t, ps[len(ps)-1].Terminating)
		})
	}
}

// TestCloseBoundsTheTerminatingPushByItsContext: a broker that never
// answers telemetry holds Close only until Close's ctx ends.
func TestCloseBoundsTheTerminatingPushByItsContext(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, Telemetry: &testbroker.Telemetry{Metrics: []string{"*"}, Interval: 20 * time.Millisecond}})
	p := newProducer(t, c, Config{ClientID: "stalled"})
	require.True(t, waitFor(20*time.Second, func() bool { return accepted(pushesOf(t, c, "stalled")) >= 1 }))
	release := c.Intercept(testbroker.Interceptor{Keys: []int16{72}, Stall: true})
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Close(ctx) }()
	select {
	case err := <-done:
		assert.NoError(t, err, "nothing was buffered")
	case <-time.After(20 * time.Second):
		t.Fatal("Close waited for a telemetry answer past its ctx")
	}
}

// TestTransactionalIDIsAResourceAttribute: as Java's
// ClientTelemetryProvider, a transactional producer labels its metrics
// with its transactional id; the broker adds client_id and the rest.
func TestTransactionalIDIsAResourceAttribute(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, Telemetry: &testbroker.Telemetry{Metrics: []string{"*"}, Interval: 20 * time.Millisecond}})
	p := newProducer(t, c, Config{ClientID: "txn-tele", TransactionalID: "tx-tele"})
	require.True(t, waitFor(20*time.Second, func() bool { return accepted(pushesOf(t, c, "txn-tele")) >= 1 }))
	closeProducer(t, p)
	ps := pushesOf(t, c, "txn-tele")
	assert.Equal(t, []telemetry.KeyValue{{Key: "transactional_id", Value: "tx-tele"}}, ps[0].data.Resources[0].Attributes)
}

// TestPushTableNamesJavasMetrics: every metric of javaPushMetrics is one of
// Metrics' (a renamed field would drop out of the pushes silently), and
// the names are Java's telemetry names.
func TestPushTableNamesJavasMetrics(t *testing.T) {
	n := 0
	for scope, names := range javaPushMetrics {
		n += len(names)
		for name := range names {
			found := false
			for _, pm := range pushTable {
				found = found || (pm.scope == MetricScope(scope) && pushInfo(pm).Name == name)
			}
			assert.True(t, found, "scope %d: %s is not a metric of Metrics", scope, name)
		}
	}
	assert.Len(t, pushTable, n)
	names := map[string]pushMetric{}
	for _, pm := range pushTable {
		names[pm.name] = pm
	}
	cases := []struct {
		name string
		sum  bool
		rate string
	}{
		{"org.apache.kafka.producer.record.send.total", true, "org.apache.kafka.producer.record.send.rate"},
		{"org.apache.kafka.producer.connection.creation.total", true, "org.apache.kafka.producer.connection.creation.rate"},
		{"org.apache.kafka.producer.bufferpool.wait.time.ns.total", true, ""},
		{"org.apache.kafka.producer.record.queue.time.max", false, ""},
		{"org.apache.kafka.producer.produce.throttle.time.avg", false, ""},
		{"org.apache.kafka.producer.topic.byte.total", true, "org.apache.kafka.producer.topic.byte.rate"},
		{"org.apache.kafka.producer.node.request.latency.avg", false, ""},
		{"org.apache.kafka.producer.node.request.total", true, "org.apache.kafka.producer.node.request.rate"},
	}
	for _, tc := range cases {
		pm, ok := names[tc.name]
		require.True(t, ok, tc.name)
		assert.Equal(t, tc.sum, pm.sum, tc.name)
		assert.Equal(t, tc.rate, pm.rate, tc.name)
	}
	for _, own := range []string{"request.latency.p99", "parked.records", "buffered.records", "batch.ack.total", "throttle.time.total"} {
		assert.NotContains(t, names, "org.apache.kafka.producer."+own, "samsa's own metrics stay out of Java's namespace")
	}
}

// pushInfo is the MetricInfo of a pushed metric.
func pushInfo(pm pushMetric) MetricInfo {
	switch pm.scope {
	case ScopeTopic:
		return topicMetricTable[pm.index].info
	case ScopeBroker:
		return brokerMetricTable[pm.index].info
	}
	return producerMetricTable[pm.index].info
}
