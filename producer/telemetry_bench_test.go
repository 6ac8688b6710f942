package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/telemetry"
	"github.com/samsa-go/samsa/internal/testbroker"
)

// BenchmarkTelemetryPush measures one KIP-714 push as the telemetry
// goroutine builds it, per codec: a Metrics snapshot of a producer that
// sent to 10 topics on 3 brokers, the series a "*" subscription selects
// (deltas, rates), the OTLP encoding and its compression. It reports the
// OTLP bytes before compression and the bytes on the wire.
func BenchmarkTelemetryPush(b *testing.B) {
	c := newCluster(b, testbroker.Config{Brokers: 3})
	p := newProducer(b, c, Config{ClientID: "bench-telemetry", DisableMetricsPush: true})
	ctx := context.Background()
	for i := range 10 {
		topic := fmt.Sprintf("bench-telemetry-%d", i)
		if err := c.CreateTopic(topic, 3); err != nil {
			b.Fatal(err)
		}
		for range 20 {
			p.Send(ctx, &Record{Topic: topic, Value: benchValue})
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	for _, codec := range []compression.Type{compression.None, compression.Gzip, compression.Snappy, compression.LZ4, compression.Zstd} {
		b.Run(codec.String(), func(b *testing.B) {
			t := newPusher(p, time.Now().Add(-time.Minute))
			resp := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
			resp.ClientInstanceID = [16]byte{1}
			resp.SubscriptionID, resp.PushIntervalMillis, resp.DeltaTemporality = 7, 1000, true
			resp.RequestedMetrics = []string{"*"}
			resp.AcceptedCompressionTypes = []int8{int8(codec)}
			t.instance, t.sub = resp.ClientInstanceID, telemetry.NewSubscription(resp)
			var raw, wire int
			b.ReportAllocs()
			for b.Loop() {
				req, err := t.pushRequest(false)
				if err != nil {
					b.Fatal(err)
				}
				raw, wire = len(t.enc.enc.Bytes()), len(req.Metrics)
			}
			b.ReportMetric(float64(raw), "otlp-bytes")
			b.ReportMetric(float64(wire), "wire-bytes")
		})
	}
}
