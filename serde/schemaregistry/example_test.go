package schemaregistry_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/serde/schemaregistry"
)

// One properties file configures the producer, the registry client and
// the serializers, with the Java client's keys.
func ExampleConfigFromProperties() {
	props, err := producer.LoadProperties("client.properties")
	if err != nil {
		fmt.Println(err)
		return
	}
	pcfg, err := producer.ConfigFromProperties(props)
	if err != nil {
		fmt.Println(err)
		return
	}
	rcfg, err := schemaregistry.ConfigFromProperties(props)
	if err != nil {
		fmt.Println(err)
		return
	}
	scfg, err := schemaregistry.SerializerConfigFromProperties(props, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	scfg.Topics = []string{"orders"}
	client, err := schemaregistry.NewClient(rcfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	_ = pcfg // producer.New(pcfg), then avro.NewSerializer[Order](ctx, client, schema, scfg)
}

// The registry's error code and message come back in an *Error.
func ExampleError() {
	client, err := schemaregistry.NewClient(schemaregistry.Config{URLs: []string{"http://registry:8081"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = client.Register(context.Background(), "orders-value", schemaregistry.Schema{Schema: `"string"`}, false)
	var se *schemaregistry.Error
	if errors.As(err, &se) && se.Code == schemaregistry.CodeIncompatibleSchema {
		fmt.Println("incompatible:", se.Message)
	}
}
