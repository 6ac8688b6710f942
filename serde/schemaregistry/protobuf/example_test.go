package protobuf_test

import (
	"context"
	"fmt"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/protobuf"
	"github.com/samsa-go/samsa/serde/schemaregistry/protobuf/internal/testpb"
)

// The schema comes from the message's descriptor; its imports are
// registered first, as references.
func ExampleNewSerializer() {
	ctx := context.Background()
	client, err := schemaregistry.NewClient(schemaregistry.Config{URLs: []string{"http://registry:8081"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ser, err := protobuf.NewSerializer[*testpb.Order](ctx, client, schemaregistry.SerializerConfig{Topics: []string{"orders"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := producer.New(producer.Config{Brokers: []string{"127.0.0.1:9092"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(ctx)
	orders := producer.NewTyped(p, producer.StringSerializer{}, ser)
	orders.Send(ctx, "orders", "order-1", &testpb.Order{Id: 1})
}
