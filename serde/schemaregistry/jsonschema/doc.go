// Package jsonschema serializes Go values as JSON in Confluent's Schema
// Registry wire format (the Java KafkaJsonSchemaSerializer's) with a JSON
// Schema given by the user, optionally checking each value against it with
// github.com/santhosh-tekuri/jsonschema/v6
// (SerializerConfig.Validate, Java's json.fail.invalid.schema).
//
//	ser, err := jsonschema.NewSerializer[Order](ctx, client, orderSchema,
//		schemaregistry.SerializerConfig{Topics: []string{"orders"}, Validate: true})
//	orders := producer.NewTyped(p, producer.StringSerializer{}, ser)
//
// NewSerializer registers the schema before it returns; Serialize and
// AppendSerialize then never call the registry. The validator loads
// nothing from files or the network: a $ref must name one of
// SerializerConfig.References, fetched from the registry at construction.
// Apicurio's registry refuses a JSON Schema without "$schema".
//
// Deserializer reads records back with encoding/json, validating them
// against the writer's schema (fetched once per id) when asked.
//
// This is a module of its own
// (github.com/samsa-go/samsa/serde/schemaregistry/jsonschema); see package
// schemaregistry.
package jsonschema
