package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
)

// TestMetricsServer: -metrics-addr serves the producer's metrics in the
// text format, under samsaprom's names.
func TestMetricsServer(t *testing.T) {
	cluster := samsatest.Start(t, samsatest.Config{Brokers: 1, Topics: map[string]int32{"m": 1}})
	p, err := producer.New(producer.Config{Brokers: cluster.Addrs()})
	require.NoError(t, err)
	defer p.Close(context.Background())
	ms, err := serveMetrics("127.0.0.1:0", p)
	require.NoError(t, err)
	defer ms.stop()
	ctx := context.Background()
	for range 7 {
		p.Send(ctx, &producer.Record{Topic: "m", Value: []byte("v")})
	}
	require.NoError(t, p.Flush(ctx))

	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + ms.addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := string(body)
	for _, want := range []string{
		"# TYPE samsa_producer_record_send_total counter\nsamsa_producer_record_send_total 7\n",
		"# TYPE samsa_producer_request_latency_p99_seconds gauge\n",
		"samsa_producer_topic_record_send_total{topic=\"m\"} 7\n",
		"samsa_producer_broker_connection_count{address=\"",
	} {
		assert.Contains(t, out, want)
	}
	assert.Equal(t, 1, strings.Count(out, "# TYPE samsa_producer_topic_record_send_total "))
}

// TestSummaryHasProducerMetrics: the summary's request latency, batch size
// and throttle lines come from Producer.Metrics.
func TestSummaryHasProducerMetrics(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-records", "2000", "-metrics-addr", "127.0.0.1:0"}, &stdout, &stderr))
	out := stdout.String()
	for _, want := range []string{"request       p50 ", "throttle      avg 0s  max 0s", "batch size avg "} {
		assert.Contains(t, out, want)
	}
	s, _, err := runJSON(t, t.Context(), "-records", "2000")
	require.NoError(t, err)
	assert.Positive(t, s.RequestLatency.P50)
	assert.LessOrEqual(t, s.RequestLatency.P50, s.RequestLatency.P99)
	assert.Positive(t, s.BatchSizeAvg)
	assert.GreaterOrEqual(t, float64(s.BatchSizeMax), s.BatchSizeAvg)
}
