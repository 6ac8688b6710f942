package samsaotel_test

import (
	"context"
	"fmt"

	"github.com/samsa-go/samsa/observe/samsaotel"
	"github.com/samsa-go/samsa/producer"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The tracer is a producer hook: Send calls OnRecordBuffered and the
// completion goroutine OnRecordCompleted (called directly here).
func ExampleNewTracer() {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	tracer := samsaotel.NewTracer(samsaotel.WithTracerProvider(tp))
	var _ producer.Hook = tracer

	rec := &producer.Record{Topic: "events", Value: []byte("v")}
	ctx := tracer.OnRecordBuffered(context.Background(), rec)
	tracer.OnRecordCompleted(ctx, producer.RecordCompletion{Metadata: producer.RecordMetadata{Topic: "events", Offset: 1}})
	fmt.Println(rec.Headers[0].Key)
	// Output: traceparent
}
