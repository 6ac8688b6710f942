package samsaotel

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/samsa-go/samsa/producer"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func newTracing(sampler sdktrace.Sampler) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	exp := tracetest.NewInMemoryExporter()
	return exp, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sampler))
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// TestTracerSpanFromSendToAck: one producer span per record, a child of
// Send's context, whose context the record's headers carry in W3C form,
// ended with the partition and offset.
func TestTracerSpanFromSendToAck(t *testing.T) {
	exp, tp := newTracing(sdktrace.AlwaysSample())
	tr := NewTracer(WithTracerProvider(tp), WithClientID("c1"))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")

	rec := &producer.Record{Topic: "events", Key: []byte("k1"), Value: []byte("hello"),
		Headers: []producer.Header{{Key: "traceparent", Value: []byte("stale")}, {Key: "app"}}}
	rctx := tr.OnRecordBuffered(ctx, rec)
	if len(exp.GetSpans()) != 0 {
		t.Fatal("span ended before the record completed")
	}
	tr.OnRecordCompleted(rctx, producer.RecordCompletion{
		Metadata: producer.RecordMetadata{Topic: "events", Partition: 3, Offset: 77},
		Elapsed:  time.Millisecond,
	})
	parent.End()

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.Name != "send events" || s.SpanKind != trace.SpanKindProducer || s.Parent.SpanID() != parent.SpanContext().SpanID() ||
		s.SpanContext.TraceID() != parent.SpanContext().TraceID() || s.Status.Code == codes.Error {
		t.Fatalf("span %q kind %v parent %v status %v", s.Name, s.SpanKind, s.Parent.SpanID(), s.Status)
	}
	want := map[string]string{
		"messaging.system": "kafka", "messaging.operation.name": "send", "messaging.operation.type": "send",
		"messaging.destination.name": "events", "messaging.destination.partition.id": "3",
		"messaging.kafka.offset": "77", "messaging.kafka.message.key": "k1",
		"messaging.message.body.size": "5", "messaging.client.id": "c1",
	}
	got := attrMap(s.Attributes)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, got[k], v)
		}
	}

	// The stale traceparent is replaced, not duplicated, and decodes to the
	// record's span.
	n := 0
	for _, h := range rec.Headers {
		if h.Key == "traceparent" {
			n++
		}
	}
	if n != 1 || len(rec.Headers) != 2 {
		t.Fatalf("headers %q", rec.Headers)
	}
	ext := propagation.TraceContext{}.Extract(context.Background(), HeaderCarrier{Headers: &rec.Headers})
	sc := trace.SpanContextFromContext(ext)
	if !sc.IsValid() || !sc.IsRemote() || sc.SpanID() != s.SpanContext.SpanID() || sc.TraceID() != s.SpanContext.TraceID() || !sc.IsSampled() {
		t.Fatalf("header decodes to %v, want span %v", sc, s.SpanContext)
	}
}

func TestTracerRecordsErrors(t *testing.T) {
	exp, tp := newTracing(sdktrace.AlwaysSample())
	tr := NewTracer(WithTracerProvider(tp))
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: last: %w", producer.ErrDeliveryTimeout, errors.New("x")), "delivery_timeout"},
		{producer.ErrBufferExhausted, "buffer_exhausted"},
		{&producer.KafkaError{Code: 29, Name: "TOPIC_AUTHORIZATION_FAILED"}, "TOPIC_AUTHORIZATION_FAILED"},
		{errors.New("odd"), "_OTHER"},
	}
	for _, tc := range cases {
		exp.Reset()
		rctx := tr.OnRecordBuffered(context.Background(), &producer.Record{Topic: "t"})
		tr.OnRecordCompleted(rctx, producer.RecordCompletion{Metadata: producer.RecordMetadata{Topic: "t", Partition: -1}, Err: tc.err})
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("%d spans", len(spans))
		}
		s := spans[0]
		a := attrMap(s.Attributes)
		if s.Status.Code != codes.Error || a["error.type"] != tc.want || len(s.Events) != 1 || s.Parent.IsValid() {
			t.Errorf("%v: status %v error.type %q events %d", tc.err, s.Status, a["error.type"], len(s.Events))
		}
		if _, ok := a["messaging.destination.partition.id"]; ok {
			t.Errorf("%v: partition set without one", tc.err)
		}
		if _, ok := a["messaging.kafka.offset"]; ok {
			t.Errorf("%v: offset set on failure", tc.err)
		}
	}
}

// TestTracerRespectsSampling: an unsampled record gets no span and no
// header, and its completion does not end the caller's span.
func TestTracerRespectsSampling(t *testing.T) {
	cases := []struct {
		name    string
		sampler sdktrace.Sampler
		parent  bool
	}{
		{"never", sdktrace.NeverSample(), false},
		{"unsampled parent", sdktrace.ParentBased(sdktrace.AlwaysSample()), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp, tp := newTracing(tc.sampler)
			tr := NewTracer(WithTracerProvider(tp))
			ctx := context.Background()
			if tc.parent {
				sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
				ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
			}
			rec := &producer.Record{Topic: "t"}
			rctx := tr.OnRecordBuffered(ctx, rec)
			if rctx != ctx {
				t.Error("context changed for an unsampled record")
			}
			tr.OnRecordCompleted(rctx, producer.RecordCompletion{})
			if len(rec.Headers) != 0 || len(exp.GetSpans()) != 0 {
				t.Fatalf("headers %q, spans %d", rec.Headers, len(exp.GetSpans()))
			}
		})
	}
	// A caller's own span in Send's context is not ended by the hook.
	exp, tp := newTracing(sdktrace.AlwaysSample())
	tr := NewTracer(WithTracerProvider(tp))
	ctx, own := tp.Tracer("test").Start(context.Background(), "own")
	tr.OnRecordCompleted(ctx, producer.RecordCompletion{})
	if len(exp.GetSpans()) != 0 || !own.IsRecording() {
		t.Fatal("the hook ended the caller's span")
	}
}

func collect(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func TestMeterHookSemanticConventions(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	h, err := NewMeterHook(WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	b := producer.BatchWritten{Topic: "events", Partition: 1, Records: 10, Latency: 20 * time.Millisecond,
		Attempt: 1, Broker: producer.BrokerInfo{NodeID: 1, Addr: "k1:9092"}}
	h.OnBatchWritten(b)
	h.OnBatchWritten(b)
	b.Err, b.Records = &producer.KafkaError{Code: 6, Name: "NOT_LEADER_OR_FOLLOWER"}, 4
	h.OnBatchWritten(b)

	ms := collect(t, reader)
	sent, ok := ms["messaging.client.sent.messages"].Data.(metricdata.Sum[int64])
	if !ok || !sent.IsMonotonic {
		t.Fatalf("sent.messages: %+v", ms["messaging.client.sent.messages"])
	}
	byErr := map[string]int64{}
	for _, dp := range sent.DataPoints {
		a := attrMap(dp.Attributes.ToSlice())
		if a["messaging.system"] != "kafka" || a["messaging.operation.name"] != "send" || a["messaging.destination.name"] != "events" ||
			a["server.address"] != "k1" || a["server.port"] != "9092" {
			t.Errorf("sent.messages attributes %v", a)
		}
		byErr[a["error.type"]] += dp.Value
	}
	if byErr[""] != 20 || byErr["NOT_LEADER_OR_FOLLOWER"] != 4 {
		t.Errorf("sent.messages by error.type %v", byErr)
	}
	dur, ok := ms["messaging.client.operation.duration"].Data.(metricdata.Histogram[float64])
	if !ok || ms["messaging.client.operation.duration"].Unit != "s" {
		t.Fatalf("operation.duration: %+v", ms["messaging.client.operation.duration"])
	}
	var count uint64
	for _, dp := range dur.DataPoints {
		count += dp.Count
		if a := attrMap(dp.Attributes.ToSlice()); a["messaging.operation.type"] != "send" {
			t.Errorf("duration attributes %v", a)
		}
		if dp.Sum != float64(dp.Count)*0.02 {
			t.Errorf("duration sum %v for %d", dp.Sum, dp.Count)
		}
	}
	if count != 3 {
		t.Errorf("duration count %d", count)
	}
}

type fakeSource struct{ m producer.Metrics }

func (f fakeSource) Metrics() producer.Metrics { return f.m }

func TestRegisterMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	src := fakeSource{producer.Metrics{
		Producer: producer.ProducerMetrics{RecordSendTotal: 42, RequestLatencyAvg: 3 * time.Millisecond},
		Topics:   []producer.TopicMetrics{{Topic: "events", RecordSendTotal: 40}},
		Brokers:  []producer.BrokerMetrics{{NodeID: 2, Addr: "k2:9093", ConnectionCount: 1}},
		Spool:    &producer.SpoolMetrics{Bytes: 4096, FsyncTotal: 9, FsyncLatencyP99: 2 * time.Millisecond, Failed: true},
	}}
	reg, err := RegisterMetrics(src, WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	ms := collect(t, reader)
	if len(ms) != len(producer.MetricInfos()) {
		t.Errorf("%d instruments, want %d", len(ms), len(producer.MetricInfos()))
	}
	sum := func(name string) (float64, map[string]string) {
		m, ok := ms[name]
		if !ok {
			t.Fatalf("no %s", name)
		}
		switch d := m.Data.(type) {
		case metricdata.Sum[float64]:
			return d.DataPoints[0].Value, attrMap(d.DataPoints[0].Attributes.ToSlice())
		case metricdata.Gauge[float64]:
			return d.DataPoints[0].Value, attrMap(d.DataPoints[0].Attributes.ToSlice())
		}
		t.Fatalf("%s: %T", name, m.Data)
		return 0, nil
	}
	if v, _ := sum("samsa.producer.record_send"); v != 42 {
		t.Errorf("record_send %v", v)
	}
	if v, _ := sum("samsa.producer.request_latency_avg"); v != 0.003 || ms["samsa.producer.request_latency_avg"].Unit != "s" {
		t.Errorf("request_latency_avg %v", v)
	}
	if v, _ := sum("samsa.producer.spool_bytes"); v != 4096 || ms["samsa.producer.spool_bytes"].Unit != "By" {
		t.Errorf("spool_bytes %v", v)
	}
	if v, _ := sum("samsa.producer.spool_fsync"); v != 9 || ms["samsa.producer.spool_fsync"].Unit != "{fsync}" {
		t.Errorf("spool_fsync %v", v)
	}
	if _, ok := ms["samsa.producer.spool_fsync"].Data.(metricdata.Sum[float64]); !ok {
		t.Errorf("spool_fsync is not a counter: %T", ms["samsa.producer.spool_fsync"].Data)
	}
	if v, _ := sum("samsa.producer.spool_fsync_latency_p99"); v != 0.002 || ms["samsa.producer.spool_fsync_latency_p99"].Unit != "s" {
		t.Errorf("spool_fsync_latency_p99 %v", v)
	}
	if v, _ := sum("samsa.producer.spool_failed"); v != 1 || ms["samsa.producer.spool_failed"].Unit != "1" {
		t.Errorf("spool_failed %v", v)
	}
	if v, a := sum("samsa.producer.topic.record_send"); v != 40 || a["messaging.destination.name"] != "events" {
		t.Errorf("topic record_send %v %v", v, a)
	}
	if v, a := sum("samsa.producer.broker.connection_count"); v != 1 || a["server.address"] != "k2" || a["server.port"] != "9093" || a["samsa.broker.node_id"] != "2" {
		t.Errorf("broker connection_count %v %v", v, a)
	}
}

// TestTwoTracersEndTheirOwnSpans: each Tracer finds its own span in the
// context, also when another Tracer ran after it.
func TestTwoTracersEndTheirOwnSpans(t *testing.T) {
	exp, tp := newTracing(sdktrace.AlwaysSample())
	a, b := NewTracer(WithTracerProvider(tp)), NewTracer(WithTracerProvider(tp))
	rec := &producer.Record{Topic: "t"}
	ctx := b.OnRecordBuffered(a.OnRecordBuffered(context.Background(), rec), rec)
	a.OnRecordCompleted(ctx, producer.RecordCompletion{})
	b.OnRecordCompleted(ctx, producer.RecordCompletion{})
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].SpanContext.SpanID() == spans[1].SpanContext.SpanID() {
		t.Fatalf("%d spans", len(spans))
	}
}
