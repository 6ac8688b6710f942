// Package telemetry holds what KIP-714 client metrics need below the
// producer: the OTLP MetricsData encoder (otlp.go), the subscription a
// broker hands out and what its error codes ask of the client
// (subscription.go), and the ledger of values last pushed, for delta
// temporality (ledger.go).
//
// The encoder writes the small, stable subset of OpenTelemetry's
// metrics.proto that client metrics use (MetricsData, ResourceMetrics,
// Resource, ScopeMetrics, InstrumentationScope, Metric, Gauge, Sum,
// NumberDataPoint, KeyValue, AnyValue) with protobuf's wire format by hand,
// so that the library's go.mod does not grow google.golang.org/protobuf
// and the OTLP modules. The interop module decodes its output with
// go.opentelemetry.io/proto/otlp (interop/telemetry_test.go).
package telemetry
