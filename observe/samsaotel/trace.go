package samsaotel

import (
	"context"
	"strconv"

	"github.com/samsa-go/samsa/producer"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/samsa-go/samsa/observe/samsaotel"

// Option configures NewTracer and NewMeterHook.
type Option func(*options)

type options struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	propagator     propagation.TextMapPropagator
	clientID       string
}

// WithTracerProvider sets the tracer provider. Default: otel's global one
// at the time of NewTracer.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// WithPropagator sets how span contexts are written into headers. Default:
// W3C trace context (traceparent, tracestate) and baggage.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(o *options) { o.propagator = p }
}

// WithClientID adds messaging.client.id to spans and metrics; use the
// producer's Config.ClientID. Default: none.
func WithClientID(id string) Option { return func(o *options) { o.clientID = id } }

func newOptions(opts []Option) options {
	o := options{propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
	for _, opt := range opts {
		opt(&o)
	}
	if o.tracerProvider == nil {
		o.tracerProvider = otel.GetTracerProvider()
	}
	if o.meterProvider == nil {
		o.meterProvider = otel.GetMeterProvider()
	}
	return o
}

// Tracer is a producer.Hook (HookRecordBuffered, HookRecordCompleted) that
// traces each record from Send to its outcome. It is safe for concurrent
// use.
type Tracer struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	clientID   string
}

// NewTracer returns a tracing hook.
func NewTracer(opts ...Option) *Tracer {
	o := newOptions(opts)
	return &Tracer{
		tracer:     o.tracerProvider.Tracer(ScopeName),
		propagator: o.propagator,
		clientID:   o.clientID,
	}
}

var (
	_ producer.HookRecordBuffered  = (*Tracer)(nil)
	_ producer.HookRecordCompleted = (*Tracer)(nil)
)

// spanKey marks the context of a span this Tracer started, so that
// OnRecordCompleted never ends a span of the caller's or of another Tracer.
type spanKey struct{ t *Tracer }

// OnRecordBuffered starts the record's span and injects its context into
// the record's headers; an unsampled record keeps ctx and its headers.
func (t *Tracer) OnRecordBuffered(ctx context.Context, rec *producer.Record) context.Context {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationName("send"),
		semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(rec.Topic),
		semconv.MessagingMessageBodySize(len(rec.Value)),
	}
	if rec.Key != nil {
		attrs = append(attrs, semconv.MessagingKafkaMessageKey(string(rec.Key)))
	}
	if rec.Value == nil {
		attrs = append(attrs, semconv.MessagingKafkaMessageTombstone(true))
	}
	if t.clientID != "" {
		attrs = append(attrs, semconv.MessagingClientID(t.clientID))
	}
	sctx, span := t.tracer.Start(ctx, "send "+rec.Topic,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	if !span.SpanContext().IsSampled() {
		span.End()
		return ctx
	}
	t.propagator.Inject(sctx, HeaderCarrier{Headers: &rec.Headers})
	return context.WithValue(sctx, spanKey{t}, span)
}

// OnRecordCompleted ends the record's span.
func (t *Tracer) OnRecordCompleted(ctx context.Context, c producer.RecordCompletion) {
	span, ok := ctx.Value(spanKey{t}).(trace.Span)
	if !ok {
		return
	}
	if c.Metadata.Partition >= 0 {
		span.SetAttributes(semconv.MessagingDestinationPartitionID(strconv.Itoa(int(c.Metadata.Partition))))
	}
	if c.Err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(c.Err)))
		span.RecordError(c.Err)
		span.SetStatus(codes.Error, c.Err.Error())
	} else if c.Metadata.Offset >= 0 {
		span.SetAttributes(semconv.MessagingKafkaOffset(int(c.Metadata.Offset)))
	}
	span.End()
}

// HeaderCarrier adapts record headers to propagation.TextMapCarrier, for
// injecting (Set replaces a header of the same key) and, on the consumer
// side, extracting.
type HeaderCarrier struct {
	Headers *[]producer.Header
}

var _ propagation.TextMapCarrier = HeaderCarrier{}

// Get returns the value of the first header named key, or "".
func (c HeaderCarrier) Get(key string) string {
	for _, h := range *c.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set sets the header key to value.
func (c HeaderCarrier) Set(key, value string) {
	*c.Headers = producer.SetHeader(*c.Headers, key, []byte(value))
}

// Keys returns the header keys.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, len(*c.Headers))
	for i, h := range *c.Headers {
		keys[i] = h.Key
	}
	return keys
}
