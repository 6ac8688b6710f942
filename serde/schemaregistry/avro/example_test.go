package avro_test

import (
	"context"
	"fmt"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/avro"
)

// A serializer is ready when NewSerializer returns; Send never waits for
// the registry.
func ExampleNewSerializer() {
	ctx := context.Background()
	client, err := schemaregistry.NewClient(schemaregistry.Config{URLs: []string{"http://registry:8081"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ser, err := avro.NewSerializer[Order](ctx, client, orderSchema, schemaregistry.SerializerConfig{Topics: []string{"orders"}})
	if err != nil {
		fmt.Println(err) // the registry is down, or refused the schema
		return
	}
	p, err := producer.New(producer.Config{Brokers: []string{"127.0.0.1:9092"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(ctx)
	orders := producer.NewTyped(p, producer.StringSerializer{}, ser)
	orders.Send(ctx, "orders", "order-1", Order{ID: 1, Customer: "ada"})
}
