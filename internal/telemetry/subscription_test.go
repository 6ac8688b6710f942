package telemetry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
)

func TestActionForEveryCode(t *testing.T) {
	cases := []struct {
		code int16
		want Action
	}{
		{0, Proceed},
		{117, Resubscribe}, // UNKNOWN_SUBSCRIPTION_ID
		{76, Resubscribe},  // UNSUPPORTED_COMPRESSION_TYPE
		{89, Retry},        // THROTTLING_QUOTA_EXCEEDED
		{118, Retry},       // TELEMETRY_TOO_LARGE
		{42, Disable},      // INVALID_REQUEST
		{87, Disable},      // INVALID_RECORD
		{35, Disable},      // UNSUPPORTED_VERSION
		{-1, Disable},      // UNKNOWN_SERVER_ERROR
		{7, Disable},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, ActionFor(tc.code), "code %d", tc.code)
	}
}

func TestSubscriptionSelectsByPrefix(t *testing.T) {
	cases := []struct {
		name      string
		requested []string
		empty     bool
		wants     map[string]bool
	}{
		{"none", nil, true, map[string]bool{"org.apache.kafka.producer.record.send.total": false}},
		{"star", []string{"*"}, false, map[string]bool{"org.apache.kafka.producer.record.send.total": true, "x": true}},
		{"empty string", []string{""}, false, map[string]bool{"anything": true}},
		{"prefixes", []string{"org.apache.kafka.producer.node.", "org.apache.kafka.producer.record.send"}, false, map[string]bool{
			"org.apache.kafka.producer.node.request.latency.avg": true,
			"org.apache.kafka.producer.record.send.total":        true,
			"org.apache.kafka.producer.record.send.rate":         true,
			"org.apache.kafka.producer.record.error.total":       false,
			"org.apache.kafka.consumer.node.request.latency.avg": false,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
			r.RequestedMetrics = tc.requested
			s := NewSubscription(r)
			assert.Equal(t, tc.empty, s.Empty())
			for name, want := range tc.wants {
				assert.Equal(t, want, s.Wants(name), name)
			}
		})
	}
}

func TestSubscriptionIntervalAndCodec(t *testing.T) {
	cases := []struct {
		name     string
		interval int32
		accepted []int8
		wantIvl  time.Duration
		codec    compression.Type
	}{
		{"Kafka's list", 1000, []int8{4, 3, 1, 2}, time.Second, compression.Zstd},
		{"unknown codec skipped", 60000, []int8{9, 2}, time.Minute, compression.Snappy},
		{"none listed", 0, nil, DefaultInterval, compression.None},
		{"negative interval", -5, []int8{0}, DefaultInterval, compression.None},
		{"none preferred", 1000, []int8{0, 4}, time.Second, compression.None},
		{"under Kafka's floor", 1, []int8{3}, MinInterval, compression.LZ4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
			r.PushIntervalMillis, r.AcceptedCompressionTypes = tc.interval, tc.accepted
			s := NewSubscription(r)
			assert.Equal(t, tc.wantIvl, s.Interval)
			assert.Equal(t, tc.codec, s.Codec())
		})
	}
}

func TestJitterSpansHalfToOneAndAHalfIntervals(t *testing.T) {
	assert.Equal(t, 500*time.Millisecond, Jitter(time.Second, 0))
	assert.Equal(t, time.Second, Jitter(time.Second, 0.5))
	assert.Less(t, Jitter(time.Second, 0.999999), 1500*time.Millisecond)
}

func TestLedgerDeltas(t *testing.T) {
	type key struct {
		metric int
		topic  string
	}
	var l Ledger[key]
	d, start := l.Delta(key{1, "a"}, 10, 5, 100)
	assert.Equal(t, 10.0, d)
	assert.Equal(t, int64(5), start)
	d, start = l.Delta(key{1, "a"}, 25, 5, 200)
	assert.Equal(t, 15.0, d)
	assert.Equal(t, int64(100), start)
	d, _ = l.Delta(key{1, "b"}, 7, 5, 200)
	assert.Equal(t, 7.0, d, "another series")
	l.Reset()
	d, start = l.Delta(key{1, "a"}, 30, 150, 300)
	assert.Equal(t, 30.0, d, "after Reset a series starts over")
	assert.Equal(t, int64(150), start)
	assert.Zero(t, testing.AllocsPerRun(10, func() { l.Delta(key{1, "a"}, 31, 0, 400) }))
}
