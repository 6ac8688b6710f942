package samsaotel

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"

	"github.com/samsa-go/samsa/producer"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
)

// WithMeterProvider sets the meter provider. Default: otel's global one at
// the time of NewMeterHook or RegisterMetrics.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meterProvider = mp }
}

// MeterHook is a producer.Hook (HookBatchWritten) that records the
// messaging semantic conventions' producer metrics for every Produce
// attempt of every batch: messaging.client.sent.messages (the batch's
// records) and messaging.client.operation.duration (the request's round
// trip). It runs on the IO goroutine; it is safe for concurrent use.
type MeterHook struct {
	sent     messagingconv.ClientSentMessages
	duration messagingconv.ClientOperationDuration
	clientID string
}

var _ producer.HookBatchWritten = (*MeterHook)(nil)

// NewMeterHook creates the instruments and returns the hook; the error is
// the meter's.
func NewMeterHook(opts ...Option) (*MeterHook, error) {
	o := newOptions(opts)
	m := o.meterProvider.Meter(ScopeName)
	sent, err1 := messagingconv.NewClientSentMessages(m)
	duration, err2 := messagingconv.NewClientOperationDuration(m)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	return &MeterHook{sent: sent, duration: duration, clientID: o.clientID}, nil
}

// OnBatchWritten records the attempt.
func (h *MeterHook) OnBatchWritten(b producer.BatchWritten) {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, semconv.MessagingDestinationName(b.Topic))
	attrs = append(attrs, serverAttrs(b.Broker.Addr)...)
	if h.clientID != "" {
		attrs = append(attrs, semconv.MessagingClientID(h.clientID))
	}
	if b.Err != nil {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(b.Err)))
	}
	ctx := context.Background()
	h.sent.Add(ctx, int64(b.Records), "send", messagingconv.SystemKafka, attrs...)
	h.duration.Record(ctx, b.Latency.Seconds(), "send", messagingconv.SystemKafka,
		append(attrs, semconv.MessagingOperationTypeSend)...)
}

// serverAttrs returns server.address and server.port of a host:port.
func serverAttrs(addr string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if addr == "" {
			return nil
		}
		return []attribute.KeyValue{semconv.ServerAddress(addr)}
	}
	out := []attribute.KeyValue{semconv.ServerAddress(host)}
	if p, err := strconv.Atoi(port); err == nil {
		out = append(out, semconv.ServerPort(p))
	}
	return out
}

// errorType names an error for error.type, with few values: the producer's
// sentinel, else the Kafka error code's name, else "_OTHER".
func errorType(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{producer.ErrDeliveryTimeout, "delivery_timeout"},
		{producer.ErrBufferExhausted, "buffer_exhausted"},
		{producer.ErrRecordTooLarge, "record_too_large"},
		{producer.ErrInvalidRecord, "invalid_record"},
		{producer.ErrClosed, "closed"},
		{producer.ErrAuthentication, "authentication"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	var ke *producer.KafkaError
	if errors.As(err, &ke) {
		return ke.Name
	}
	return "_OTHER"
}

// Source is what RegisterMetrics reads: *producer.Producer.
type Source interface {
	Metrics() producer.Metrics
}

// otelUnits maps MetricInfo.Unit to UCUM units.
var otelUnits = map[string]string{
	"seconds": "s", "bytes": "By", "records": "{record}", "batches": "{batch}", "requests": "{request}",
	"connections": "{connection}", "ratio": "1", "segments": "{segment}", "fsyncs": "{fsync}", "boolean": "1", "transactions": "{transaction}",
}

// InstrumentName returns the instrument name of a metric of
// producer.Metrics: "samsa.producer." then "topic." or "broker." for those
// scopes, then the Java name with '_' for '-' and, for counters, without
// "-total" (OpenTelemetry's counters carry no suffix; a Prometheus exporter
// adds "_total" back).
func InstrumentName(in producer.MetricInfo) string {
	name := in.Name
	if in.Kind == producer.MetricCounter {
		name = strings.TrimSuffix(name, "-total")
	}
	name = strings.ReplaceAll(name, "-", "_")
	switch in.Scope {
	case producer.ScopeTopic:
		name = "topic." + name
	case producer.ScopeBroker:
		name = "broker." + name
	}
	return "samsa.producer." + name
}

type instKey struct {
	scope producer.MetricScope
	name  string
}

// RegisterMetrics creates an observable instrument per metric of
// producer.Metrics (see InstrumentName) and registers one callback that
// takes a snapshot of src per collection. Topic values carry
// messaging.destination.name; broker values server.address, server.port
// and samsa.broker.node_id. Unregister the returned registration when the
// producer closes.
func RegisterMetrics(src Source, opts ...Option) (metric.Registration, error) {
	o := newOptions(opts)
	m := o.meterProvider.Meter(ScopeName)
	insts := map[instKey]metric.Float64Observable{}
	var all []metric.Observable
	var errs []error
	for _, in := range producer.MetricInfos() {
		name, unit := InstrumentName(in), otelUnits[in.Unit]
		var inst metric.Float64Observable
		var err error
		if in.Kind == producer.MetricCounter {
			inst, err = m.Float64ObservableCounter(name, metric.WithDescription(in.Help), metric.WithUnit(unit))
		} else {
			inst, err = m.Float64ObservableGauge(name, metric.WithDescription(in.Help), metric.WithUnit(unit))
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		insts[instKey{in.Scope, in.Name}] = inst
		all = append(all, inst)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var base []attribute.KeyValue
	if o.clientID != "" {
		base = append(base, semconv.MessagingClientID(o.clientID))
	}
	return m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		snap := src.Metrics()
		snap.Each(func(in *producer.MetricInfo, l producer.Labels, v float64) {
			attrs := base
			switch in.Scope {
			case producer.ScopeTopic:
				attrs = append(attrs[:len(attrs):len(attrs)], semconv.MessagingDestinationName(l.Topic))
			case producer.ScopeBroker:
				attrs = append(append(attrs[:len(attrs):len(attrs)], serverAttrs(l.Addr)...),
					attribute.Int("samsa.broker.node_id", int(l.NodeID)))
			}
			obs.ObserveFloat64(insts[instKey{in.Scope, in.Name}], v, metric.WithAttributes(attrs...))
		})
		return nil
	}, all...)
}
