package fakeregistry

import (
	"context"
	"testing"
	"time"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
)

// SendWithRegistryDown closes r, then sends values to topic through a
// TypedProducer with ser (a ready serializer) on an in-process Kafka
// cluster, and returns the record values the cluster stored, in order. It
// fails the test if a Send fails or if the registry got a request while
// the records were sent: serializing never calls the registry.
func SendWithRegistryDown[V any](t *testing.T, r *Registry, ser producer.Serializer[V], topic string, values []V) [][]byte {
	t.Helper()
	cluster := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{topic: 1}})
	p, err := producer.New(producer.Config{Brokers: cluster.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer func() { _ = p.Close(ctx) }()

	r.Close()
	before := len(r.Requests())
	typed := producer.NewTyped[[]byte](p, nil, ser)
	futures := make([]*producer.Future, len(values))
	for i, v := range values {
		futures[i] = typed.Send(ctx, topic, nil, v)
	}
	for i, f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if n := len(r.Requests()); n != before {
		t.Fatalf("the registry got %d requests while records were sent", n-before)
	}
	recs, err := cluster.Records(topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(recs))
	for i, rec := range recs {
		out[i] = rec.Value
	}
	return out
}
