// A user's program of the serde/schemaregistry modules, built by
// scripts/release-check.sh from the published modules: the registry client
// from Java's properties, and an Avro, a Protobuf and a JSON Schema
// serializer plugged into producer.NewTyped.
package main

import (
	"context"
	"log"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/avro"
	"github.com/samsa-go/samsa/serde/schemaregistry/jsonschema"
	"github.com/samsa-go/samsa/serde/schemaregistry/protobuf"
)

type order struct {
	ID int64 `avro:"id" json:"id"`
}

const (
	avroSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`
	jsonSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"id":{"type":"integer"}}}`
)

func main() {
	ctx := context.Background()
	props := map[string]string{"schema.registry.url": "http://registry.example.com:8081"}
	cfg, err := schemaregistry.ConfigFromProperties(props)
	if err != nil {
		log.Fatal(err)
	}
	client, err := schemaregistry.NewClient(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	scfg := schemaregistry.SerializerConfig{Topics: []string{"orders"}}

	p, err := producer.New(producer.Config{Brokers: []string{"127.0.0.1:9092"}})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	a, err := avro.NewSerializer[order](ctx, client, avroSchema, scfg)
	if err != nil {
		log.Fatal(err)
	}
	producer.NewTyped(p, producer.StringSerializer{}, a).Send(ctx, "orders", "o-1", order{ID: 1})

	pb, err := protobuf.NewSerializer[*wrapperspb.Int64Value](ctx, client, scfg)
	if err != nil {
		log.Fatal(err)
	}
	producer.NewTyped(p, producer.StringSerializer{}, pb).Send(ctx, "orders", "o-2", wrapperspb.Int64(2))

	js, err := jsonschema.NewSerializer[order](ctx, client, jsonSchema, scfg)
	if err != nil {
		log.Fatal(err)
	}
	producer.NewTyped(p, producer.StringSerializer{}, js).Send(ctx, "orders", "o-3", order{ID: 3})
}
