package producer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
)

// TestUUIDStringIsKafkasUuidToString: Kafka prints a Uuid as URL-safe
// base64 without padding (Uuid.ONE_UUID is "AAAAAAAAAAAAAAAAAAAAAQ").
func TestUUIDStringIsKafkasUuidToString(t *testing.T) {
	cases := []struct {
		id   UUID
		want string
	}{
		{UUID{}, "AAAAAAAAAAAAAAAAAAAAAA"},
		{UUID{15: 1}, "AAAAAAAAAAAAAAAAAAAAAQ"},
		{UUID{0: 0xfb, 1: 0xff, 15: 0xfe}, "-_8AAAAAAAAAAAAAAAAA_g"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, tc.id.String())
		assert.Equal(t, tc.id == UUID{}, tc.id.IsZero())
	}
}

// TestClientInstanceIDIsTheOneThePushesCarry: ClientInstanceID returns the
// id the broker assigned (Java's clientInstanceId), the one every push
// carries; it waits for it, bounded by ctx.
func TestClientInstanceIDIsTheOneThePushesCarry(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, Telemetry: &testbroker.Telemetry{Metrics: []string{"*"}, Interval: 20 * time.Millisecond}})
	require.NoError(t, c.CreateTopic("cid", 1))
	p := newProducer(t, c, Config{ClientID: "cid"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := p.ClientInstanceID(ctx) // before any Send: asked one second after New
	require.NoError(t, err)
	require.False(t, id.IsZero())
	require.Zero(t, sendN(t, p, "cid", 10))
	require.True(t, waitFor(20*time.Second, func() bool { return accepted(pushesOf(t, c, "cid")) >= 1 }))
	for _, push := range pushesOf(t, c, "cid") {
		assert.Equal(t, [16]byte(id), push.ClientInstanceID)
	}
	again, err := p.ClientInstanceID(ctx)
	require.NoError(t, err)
	assert.Equal(t, id, again)
	closeProducer(t, p)
	afterClose, err := p.ClientInstanceID(context.Background())
	require.NoError(t, err, "a known id is returned after Close too")
	assert.Equal(t, id, afterClose)
}

// TestClientInstanceIDWithoutTelemetry: metrics push off is an error at
// once (Java throws IllegalStateException); a broker without KIP-714's
// APIs is an UNSUPPORTED_VERSION error as soon as the producer learns it
// (Java waits its whole timeout and returns null); a ctx that ends first
// is ctx's error.
func TestClientInstanceIDWithoutTelemetry(t *testing.T) {
	sub := &testbroker.Telemetry{Metrics: []string{"*"}, Interval: 20 * time.Millisecond}
	cases := []struct {
		name      string
		telemetry *testbroker.Telemetry
		cfg       Config
		ctxFor    time.Duration
		want      error
		within    time.Duration
	}{
		{"enable.metrics.push=false", sub, Config{DisableMetricsPush: true}, 20 * time.Second, ErrTelemetryDisabled, 100 * time.Millisecond},
		{"brokers without the APIs", nil, Config{}, 20 * time.Second, kerr.UnsupportedVersion, 10 * time.Second},
		{"ctx ends first", sub, Config{}, time.Millisecond, context.DeadlineExceeded, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1, Telemetry: tc.telemetry})
			p := newProducer(t, c, tc.cfg)
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctxFor)
			defer cancel()
			start := time.Now()
			id, err := p.ClientInstanceID(ctx)
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.want), "%v", err)
			assert.True(t, id.IsZero())
			assert.Less(t, time.Since(start), tc.within)
			closeProducer(t, p)
		})
	}
}
