package interop

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
