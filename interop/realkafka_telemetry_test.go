package interop

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/telemetry"
	"github.com/samsa-go/samsa/producer"
)

// telemetryFiles returns the pushes the capture plugin
// (kafka/SamsaTelemetryCapture.java) wrote for clientID, in arrival order:
// the file names start with the arrival time and a sequence number.
func telemetryFiles(t *testing.T, dir, clientID string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	type file struct {
		name     string
		ms, seq  string
		terminal bool
	}
	var files []file
	for _, e := range entries {
		parts := strings.SplitN(e.Name(), "-", 3)
		if len(parts) < 3 || !strings.HasSuffix(e.Name(), ".otlp") || !strings.HasPrefix(parts[2], clientID+"-") {
			continue
		}
		files = append(files, file{name: e.Name(), ms: parts[0], seq: parts[1]})
	}
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i], files[j]
		if len(a.seq) != len(b.seq) {
			return len(a.seq) < len(b.seq)
		}
		return a.seq < b.seq
	})
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = filepath.Join(dir, f.name)
	}
	return out
}

// TestRealKafkaMetricsPush: a Kafka 4.4 broker with a client metrics
// plugin (start.sh -telemetry: a subscription of org.apache.kafka.producer.
// every second for client ids starting with
// SAMSA_KAFKA_TELEMETRY_CLIENT_ID_PREFIX) receives samsa's pushes: OTLP
// that the real types decode, under Java's names, with values that add up
// to the producer's Metrics, and a terminating push on Close; a producer
// with enable.metrics.push=false pushes nothing.
func TestRealKafkaMetricsPush(t *testing.T) {
	c := realKafka(t)
	dir := realEnv(t, "SAMSA_KAFKA_TELEMETRY_DIR", "no client metrics plugin (interop/kafka/start.sh -telemetry)")
	prefix := realEnv(t, "SAMSA_KAFKA_TELEMETRY_CLIENT_ID_PREFIX", "no client metrics subscription (interop/kafka/start.sh -telemetry)")
	topic := uniqueTopic("samsa-telemetry")
	c.createTopic(t, topic, 2, 1, nil)

	pushing := uniqueTopic(prefix)
	p := newSamsaProducer(t, c.addrs, producer.Config{ClientID: pushing})
	cfg, err := producer.ConfigFromProperties(map[string]string{"enable.metrics.push": "false", "client.id": uniqueTopic(prefix)})
	require.NoError(t, err)
	silent := newSamsaProducer(t, c.addrs, cfg)

	sendAll(t, p, makeSamsaRecords(topic, 200))
	sendAll(t, silent, makeSamsaRecords(topic, 10))
	// The first push comes 0.5 to 1.5 intervals after the subscription,
	// the next one an interval later (the broker refuses it earlier).
	require.Eventually(t, func() bool { return len(telemetryFiles(t, dir, pushing)) >= 2 }, 30*time.Second, 50*time.Millisecond,
		"no push from %s in %s", pushing, dir)
	sendAll(t, p, makeSamsaRecords(topic, 100))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.Close(ctx))
	require.NoError(t, silent.Close(ctx))
	m := p.Metrics()

	files := telemetryFiles(t, dir, pushing)
	require.NotEmpty(t, files)
	require.True(t, strings.HasSuffix(files[len(files)-1], "-terminating.otlp"), "the terminating push arrived on Close: %v", files)
	var ps []otlpPush
	sizes := make([]int, len(files))
	for i, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		sizes[i] = len(b)
		ps = append(ps, decodeOTLP(t, b, strings.HasSuffix(f, "-terminating.otlp")))
	}
	t.Logf("%d pushes from %s, %v bytes of OTLP each (decompressed by the broker)", len(files), pushing, sizes)
	for _, push := range ps {
		for name := range push.series {
			assert.True(t, strings.HasPrefix(name, "org.apache.kafka.producer."), name)
		}
	}
	checkPushesAgree(t, ps, m, topic)
	assert.EqualValues(t, 300, m.Producer.RecordSendTotal)
	assert.Empty(t, telemetryFiles(t, dir, cfg.ClientID), "enable.metrics.push=false pushes nothing")
}

// TestRealKafkaTelemetryCodecs: a push compressed by samsa's compression
// package with each codec is decompressed by Kafka's broker (Java's
// ClientTelemetryUtils) into the same OTLP bytes: the codecs' framing (gzip
// stream, snappy in xerial framing, the LZ4 frame, a zstd frame) is what
// the broker reads. Kafka 4.4 lists zstd first, so samsa's producer only
// ever uses zstd with it; here each codec is pushed by hand, each by a new
// client instance (the first push after a subscription is never early).
func TestRealKafkaTelemetryCodecs(t *testing.T) {
	c := realKafka(t)
	dir := realEnv(t, "SAMSA_KAFKA_TELEMETRY_DIR", "no client metrics plugin (interop/kafka/start.sh -telemetry)")
	prefix := realEnv(t, "SAMSA_KAFKA_TELEMETRY_CLIENT_ID_PREFIX", "no client metrics subscription (interop/kafka/start.sh -telemetry)")
	clientID := uniqueTopic(prefix + "-codecs")
	cl := newKgoClient(t, c.addrs, kgo.ClientID(clientID))
	ctx := testContext(t)

	var e telemetry.Encoder
	e.Begin(nil, "samsa-codec-test", "v0")
	e.BeginMetric("org.apache.kafka.producer.record.send.total", telemetry.DeltaSum)
	for i := range 50 {
		e.Point(telemetry.KeyValue{Key: "topic", Value: fmt.Sprintf("topic-%d", i)}, 1, 2, float64(i))
	}
	e.EndMetric()
	e.End()
	raw := e.Bytes()

	for _, codec := range []compression.Type{compression.None, compression.Gzip, compression.Snappy, compression.LZ4, compression.Zstd} {
		t.Run(codec.String(), func(t *testing.T) {
			get := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
			sub, err := get.RequestWith(ctx, cl)
			require.NoError(t, err)
			require.Zero(t, sub.ErrorCode)
			comp, err := compression.NewCompressor(codec, 0)
			require.NoError(t, err)
			payload, err := comp.AppendCompress(nil, raw)
			require.NoError(t, err)
			push := kmsg.NewPtrPushTelemetryRequest()
			push.ClientInstanceID, push.SubscriptionID = sub.ClientInstanceID, sub.SubscriptionID
			push.CompressionType, push.Metrics = int8(codec), payload
			resp, err := push.RequestWith(ctx, cl)
			require.NoError(t, err)
			require.Zero(t, resp.ErrorCode, "%s accepted", codec)
			id := base64.RawURLEncoding.EncodeToString(sub.ClientInstanceID[:])
			var got []byte
			require.Eventually(t, func() bool {
				for _, f := range telemetryFiles(t, dir, clientID) {
					if strings.Contains(f, id) {
						got, err = os.ReadFile(f)
						return err == nil
					}
				}
				return false
			}, 10*time.Second, 20*time.Millisecond)
			assert.Equal(t, raw, got, "%s: the broker decompressed the same OTLP bytes (%d on the wire)", codec, len(payload))
		})
	}
}
