package jsonschema_test

import (
	"context"
	"fmt"

	"github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/jsonschema"
)

// With Validate, a value the schema refuses fails its record, before it
// is sent.
func ExampleNewSerializer() {
	ctx := context.Background()
	client, err := schemaregistry.NewClient(schemaregistry.Config{URLs: []string{"http://registry:8081"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ser, err := jsonschema.NewSerializer[Order](ctx, client, orderSchema,
		schemaregistry.SerializerConfig{Topics: []string{"orders"}, Validate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = ser.Serialize("orders", Order{ID: 1}) // customer is required
	fmt.Println(err != nil)
}
