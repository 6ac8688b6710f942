// Package samsaotel connects a samsa producer to OpenTelemetry: a tracing
// hook, a hook that records the messaging semantic conventions' client
// metrics, and observable instruments over Producer.Metrics.
//
//	p, err := producer.New(producer.Config{
//		Brokers: brokers,
//		Hooks:   []producer.Hook{samsaotel.NewTracer(), meterHook},
//	})
//
// # Tracing
//
// Tracer starts a span of kind Producer per record in Send, named
// "send <topic>" and parented on Send's context, injects its context into
// the record's headers with the propagator (W3C trace context by default),
// and ends it when the record is acknowledged or fails, with the partition
// and offset, or the error, as attributes. A record whose span the sampler
// drops gets neither a span nor a header.
//
// # Metrics
//
// MeterHook records messaging.client.sent.messages and
// messaging.client.operation.duration for every Produce attempt of every
// batch, with messaging.system "kafka", messaging.operation.name "send",
// messaging.destination.name, server.address and server.port, and
// error.type when the attempt failed. RegisterMetrics exposes every value
// of Producer.Metrics as an observable instrument named
// "samsa.producer.<name>"; with a spool, Metrics.Spool's values too
// ("samsa.producer.spool_bytes", "samsa.producer.spool_fsync_latency_p99",
// ...), reported only while the producer has one.
//
// The tests run every part against a real producer on samsatest, and
// against hook calls made directly.
//
// The package is its own Go module, so that the samsa library does not
// depend on OpenTelemetry.
package samsaotel
