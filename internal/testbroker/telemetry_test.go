package testbroker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/telemetry"
)

// metricsData is a small OTLP MetricsData.
var metricsData = func() []byte {
	var e telemetry.Encoder
	e.Begin(nil, "test", "v0")
	e.BeginMetric("org.apache.kafka.producer.record.send.total", telemetry.DeltaSum)
	e.Point(telemetry.KeyValue{}, 1, 2, 3)
	e.EndMetric()
	e.End()
	return e.Bytes()
}()

func advertised(t *testing.T, w *wireClient) map[int16]bool {
	t.Helper()
	resp := w.request(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	out := map[int16]bool{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = true
	}
	return out
}

// TestTelemetryAPIsOnlyWithTelemetry: like Kafka without a metrics reporter
// plugin, a cluster without Config.Telemetry neither advertises KIP-714's
// APIs nor answers them.
func TestTelemetryAPIsOnlyWithTelemetry(t *testing.T) {
	off := newTestCluster(t, Config{Brokers: 1})
	w := dialBroker(t, off.Addrs()[0], "c")
	keys := advertised(t, w)
	assert.False(t, keys[getTelemetrySubscriptionsKey])
	assert.False(t, keys[pushTelemetryKey])
	require.NoError(t, w.send(kmsg.NewPtrGetTelemetrySubscriptionsRequest()))
	_, err := w.recv()
	assert.Error(t, err, "the connection is closed")

	on := newTestCluster(t, Config{Brokers: 1, Telemetry: &Telemetry{Metrics: []string{"*"}}})
	keys = advertised(t, dialBroker(t, on.Addrs()[0], "c"))
	assert.True(t, keys[getTelemetrySubscriptionsKey])
	assert.True(t, keys[pushTelemetryKey])
}

func telemetryGet(t *testing.T, w *wireClient, id [16]byte) *kmsg.GetTelemetrySubscriptionsResponse {
	t.Helper()
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = id
	return w.request(req).(*kmsg.GetTelemetrySubscriptionsResponse)
}

func telemetryPush(t *testing.T, w *wireClient, id [16]byte, sub int32, codec int8, metrics []byte, terminating bool) int16 {
	t.Helper()
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID, req.SubscriptionID, req.CompressionType = id, sub, codec
	req.Metrics, req.Terminating = metrics, terminating
	return w.request(req).(*kmsg.PushTelemetryResponse).ErrorCode
}

// TestTelemetryFollowsKafkasRules walks one client instance through the
// answers of Kafka's ClientMetricsManager: an assigned id, pushes too
// early, a changed subscription, codecs, sizes, a terminating push.
func TestTelemetryFollowsKafkasRules(t *testing.T) {
	clk := newFakeClock()
	c := newTestCluster(t, Config{Brokers: 1, Clock: clk.Now, Telemetry: &Telemetry{
		Metrics: []string{"org.apache.kafka.producer."}, Interval: time.Second,
		CompressionTypes: []int8{int8(compression.Gzip)}, MaxBytes: 300,
	}})
	w := dialBroker(t, c.Addrs()[0], "tele")

	sub := telemetryGet(t, w, [16]byte{})
	require.Zero(t, sub.ErrorCode)
	id := sub.ClientInstanceID
	assert.NotEqual(t, [16]byte{}, id, "an id is assigned")
	assert.Equal(t, int32(1000), sub.PushIntervalMillis)
	assert.Equal(t, []int8{1}, sub.AcceptedCompressionTypes)
	assert.Equal(t, int32(300), sub.TelemetryMaxBytes)
	assert.True(t, sub.DeltaTemporality)
	assert.Equal(t, []string{"org.apache.kafka.producer."}, sub.RequestedMetrics)

	gz, err := compression.NewCompressor(compression.Gzip, 0)
	require.NoError(t, err)
	payload, err := gz.AppendCompress(nil, metricsData)
	require.NoError(t, err)
	garbage, err := gz.AppendCompress(nil, []byte{0x0b}) // gzip, but no protobuf
	require.NoError(t, err)

	steps := []struct {
		name        string
		advance     time.Duration
		sub         int32 // 0: the current one
		codec       int8
		metrics     []byte
		terminating bool
		want        int16
	}{
		{"first push after the subscription, early", 10 * time.Millisecond, 0, 1, payload, false, 0},
		{"too early", 500 * time.Millisecond, 0, 1, payload, false, ecThrottlingQuotaExceeded},
		{"after the interval", time.Second, 0, 1, payload, false, 0},
		{"unknown subscription", time.Second, 77, 1, payload, false, ecUnknownSubscriptionID},
		{"codec not accepted", time.Second, 0, int8(compression.Zstd), payload, false, ecUnsupportedCompressionType},
		{"too large", time.Second, 0, 0, make([]byte, 301), false, ecTelemetryTooLarge},
		{"not gzip", time.Second, 0, 1, []byte("garbage"), false, ecInvalidRecord},
		{"not MetricsData", time.Second, 0, 1, garbage, false, ecInvalidRecord},
		{"uncompressed", time.Second, 0, 0, metricsData, false, 0},
		{"terminating, early", 0, 0, 1, payload, true, 0},
		{"after terminating", 2 * time.Second, 0, 1, payload, false, ecInvalidRequest},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		s := st.sub
		if s == 0 {
			s = sub.SubscriptionID
		}
		assert.Equal(t, st.want, telemetryPush(t, w, id, s, st.codec, st.metrics, st.terminating), st.name)
	}
	pushes := c.TelemetryPushes()
	require.Len(t, pushes, len(steps))
	assert.Equal(t, "tele", pushes[0].ClientID)
	assert.Equal(t, id, pushes[0].ClientInstanceID)
	assert.Equal(t, metricsData, pushes[0].Metrics, "decompressed")
	assert.Equal(t, len(payload), pushes[0].WireBytes)
	assert.True(t, pushes[9].Terminating)
	assert.Equal(t, 1, c.TelemetrySubscriptionRequests())
}

// TestTelemetrySubscriptionChangeAndThrottledGets: a subscription fetched
// again within the interval is throttled, unless the last push found the
// subscription changed (SetTelemetry).
func TestTelemetrySubscriptionChangeAndThrottledGets(t *testing.T) {
	clk := newFakeClock()
	c := newTestCluster(t, Config{Brokers: 1, Clock: clk.Now, Telemetry: &Telemetry{Metrics: []string{"*"}, Interval: time.Second}})
	w := dialBroker(t, c.Addrs()[0], "tele")
	sub := telemetryGet(t, w, [16]byte{})
	id := sub.ClientInstanceID
	clk.Advance(100 * time.Millisecond)
	assert.Equal(t, ecThrottlingQuotaExceeded, telemetryGet(t, w, id).ErrorCode, "again within the interval")
	clk.Advance(time.Second)
	again := telemetryGet(t, w, id)
	require.Zero(t, again.ErrorCode)
	assert.Equal(t, id, again.ClientInstanceID)
	assert.Equal(t, sub.SubscriptionID, again.SubscriptionID)

	c.SetTelemetry(Telemetry{Metrics: []string{"org.apache.kafka.producer.record."}, Interval: 2 * time.Second})
	clk.Advance(10 * time.Millisecond)
	assert.Equal(t, ecUnknownSubscriptionID, telemetryPush(t, w, id, sub.SubscriptionID, 0, metricsData, false))
	fresh := telemetryGet(t, w, id)
	require.Zero(t, fresh.ErrorCode, "at once after UNKNOWN_SUBSCRIPTION_ID")
	assert.NotEqual(t, sub.SubscriptionID, fresh.SubscriptionID)
	assert.Equal(t, int32(2000), fresh.PushIntervalMillis)
	assert.Equal(t, []string{"org.apache.kafka.producer.record."}, fresh.RequestedMetrics)
	assert.Zero(t, telemetryPush(t, w, id, fresh.SubscriptionID, 0, metricsData, false))
}

// TestTelemetryInterceptors: a test injects KIP-714's error codes and
// throttles with interceptors on keys 71 and 72.
func TestTelemetryInterceptors(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1, Telemetry: &Telemetry{Metrics: []string{"*"}}})
	w := dialBroker(t, c.Addrs()[0], "tele")
	remove := c.Intercept(Interceptor{Keys: []int16{getTelemetrySubscriptionsKey}, Times: 1, ErrorCode: ecThrottlingQuotaExceeded, Throttle: 20 * time.Millisecond})
	defer remove()
	got := telemetryGet(t, w, [16]byte{})
	assert.Equal(t, ecThrottlingQuotaExceeded, got.ErrorCode)
	assert.Equal(t, int32(20), got.ThrottleMillis)
	assert.Equal(t, [16]byte{}, got.ClientInstanceID)
	sub := telemetryGet(t, w, [16]byte{})
	require.Zero(t, sub.ErrorCode)

	c.Intercept(Interceptor{Keys: []int16{pushTelemetryKey}, Times: 1, After: true, ErrorCode: ecUnknownSubscriptionID})
	assert.Equal(t, ecUnknownSubscriptionID, telemetryPush(t, w, sub.ClientInstanceID, sub.SubscriptionID, 0, metricsData, false))
}
