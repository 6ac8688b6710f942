package samsaotel

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// liveProducer starts a cluster with topic "t" and a producer on it with
// hooks.
func liveProducer(tb testing.TB, hooks ...producer.Hook) (*producer.Producer, *samsatest.Cluster) {
	tb.Helper()
	cluster := samsatest.Start(tb, samsatest.Config{Brokers: 1, Topics: map[string]int32{"t": 2}})
	p, err := producer.New(producer.Config{Brokers: cluster.Addrs(), Hooks: hooks})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p, cluster
}

// TestTracerOnLiveProducer: through a real producer, one span per record
// from Send to ack, a child of Send's context, and the record read back
// from the cluster carries that span's context in W3C headers.
func TestTracerOnLiveProducer(t *testing.T) {
	exp, tp := newTracing(sdktrace.AlwaysSample())
	p, cluster := liveProducer(t, NewTracer(WithTracerProvider(tp)))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	const n = 20
	for i := range n {
		if _, err := p.Send(ctx, &producer.Record{Topic: "t", Value: fmt.Appendf(nil, "r%d", i)}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	parent.End()
	spans := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() != "send t" {
			continue
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindProducer {
			t.Errorf("span %s: parent %s, kind %v", s.SpanContext().SpanID(), s.Parent().SpanID(), s.SpanKind())
		}
		if !s.EndTime().After(s.StartTime()) {
			t.Errorf("span %s does not last from Send to ack", s.SpanContext().SpanID())
		}
		spans[s.SpanContext().SpanID()] = s
	}
	if len(spans) != n {
		t.Fatalf("%d record spans, want %d", len(spans), n)
	}
	recs, err := cluster.Records("t")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("%d records read back", len(recs))
	}
	w3c := propagation.TraceContext{}
	for _, r := range recs {
		hs := r.Headers
		sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), HeaderCarrier{Headers: &hs}))
		if !sc.IsValid() || sc.TraceID() != parent.SpanContext().TraceID() || !sc.IsSampled() {
			t.Fatalf("record %q: headers %v decode to %v", r.Value, r.Headers, sc)
		}
		if _, ok := spans[sc.SpanID()]; !ok {
			t.Errorf("record %q carries span %s, not one of the record spans", r.Value, sc.SpanID())
		}
	}
}

// TestTracerUnsampledOnLiveProducer: an unsampled record gets no span and
// no header.
func TestTracerUnsampledOnLiveProducer(t *testing.T) {
	exp, tp := newTracing(sdktrace.NeverSample())
	p, cluster := liveProducer(t, NewTracer(WithTracerProvider(tp)))
	ctx := context.Background()
	for range 5 {
		if _, err := p.Send(ctx, &producer.Record{Topic: "t", Value: []byte("v")}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans", n)
	}
	recs, err := cluster.Records("t")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if len(r.Headers) != 0 {
			t.Errorf("record has headers %v", r.Headers)
		}
	}
}

// TestMetricsOnLiveProducer: the semantic-convention hook and the
// observable instruments report a real producer's known workload.
func TestMetricsOnLiveProducer(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	h, err := NewMeterHook(WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := liveProducer(t, h)
	reg, err := RegisterMetrics(p, WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	ctx := context.Background()
	const n = 120
	for range n {
		p.Send(ctx, &producer.Record{Topic: "t", Value: []byte("v")})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ms := collect(t, reader)
	sent, ok := ms["messaging.client.sent.messages"].Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("sent.messages: %+v", ms["messaging.client.sent.messages"])
	}
	var total int64
	for _, dp := range sent.DataPoints {
		total += dp.Value
	}
	if total != n {
		t.Errorf("messaging.client.sent.messages = %d, want %d", total, n)
	}
	if d, ok := ms["samsa.producer.record_send"].Data.(metricdata.Sum[float64]); !ok || d.DataPoints[0].Value != n {
		t.Errorf("samsa.producer.record_send: %+v", ms["samsa.producer.record_send"].Data)
	}
	if d, ok := ms["samsa.producer.request_latency_p99"].Data.(metricdata.Gauge[float64]); !ok || d.DataPoints[0].Value <= 0 {
		t.Errorf("samsa.producer.request_latency_p99: %+v", ms["samsa.producer.request_latency_p99"].Data)
	}
}

var benchValue = make([]byte, 100)

// BenchmarkSendTraced is the producer's BenchmarkSend/callback with no
// hook, and with the Tracer sampling every record or none.
func BenchmarkSendTraced(b *testing.B) {
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"none", nil}, {"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}} {
		b.Run(tc.name, func(b *testing.B) {
			var hooks []producer.Hook
			if tc.sampler != nil {
				// Spans go to a no-op exporter through a batcher, as in
				// production.
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampler), sdktrace.WithBatcher(discardExporter{}))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				hooks = append(hooks, NewTracer(WithTracerProvider(tp)))
			}
			p, _ := liveProducer(b, hooks...)
			ctx := context.Background()
			if _, err := p.Send(ctx, &producer.Record{Topic: "t", Value: benchValue}).Wait(ctx); err != nil {
				b.Fatal(err)
			}
			noop := func(producer.RecordMetadata, error) {}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				p.SendCallback(ctx, &producer.Record{Topic: "t", Value: benchValue}, noop)
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }
