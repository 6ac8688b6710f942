// Package avro serializes Go values as Avro in Confluent's Schema Registry
// wire format (the Java KafkaAvroSerializer's, or Apicurio's serdes with
// apicurio.registry.as-confluent=true), with github.com/hamba/avro/v2:
// structs tagged `avro:"field"`, generic map[string]any records, or any
// type hamba/avro maps to the schema.
//
//	ser, err := avro.NewSerializer[Order](ctx, client, orderSchema,
//		schemaregistry.SerializerConfig{Topics: []string{"orders"}})
//	orders := producer.NewTyped(p, producer.StringSerializer{}, ser)
//	orders.Send(ctx, "orders", o.ID, o)
//
// NewSerializer registers the schema (or looks it up, see
// schemaregistry.SerializerConfig) before it returns; after that,
// Serialize and AppendSerialize are pure functions of the value that never
// call the registry, and AppendSerialize allocates nothing for a struct of
// fixed-size fields and strings. A registry that is down fails
// NewSerializer within its context, and a ready serializer keeps serving
// Sends while the registry is down. Register adds topics and SetSchema
// changes the schema, both outside Send.
//
// Deserializer reads records back with the writer's schema, fetched once
// per schema id.
//
// This is a module of its own (github.com/samsa-go/samsa/serde/schemaregistry/avro),
// so that only Avro users download hamba/avro; see package schemaregistry.
package avro
