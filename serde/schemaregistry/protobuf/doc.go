// Package protobuf serializes Protobuf messages in Confluent's Schema
// Registry wire format (the Java KafkaProtobufSerializer's): the magic
// byte, the schema id, the message-index array of the message type within
// its .proto file, then the message's binary encoding.
//
//	ser, err := protobuf.NewSerializer[*orderpb.Order](ctx, client,
//		schemaregistry.SerializerConfig{Topics: []string{"orders"}})
//	orders := producer.NewTyped(p, producer.StringSerializer{}, ser)
//	orders.Send(ctx, "orders", o.GetId(), o)
//
// The registered schema is derived from the message's descriptor: Render
// writes the .proto source of its file, and each import is registered
// first, under its path as the subject, and referenced, as Confluent's
// serializers do (the well-known google/protobuf/ and google/type/ files
// are left to the registry). NewSerializer does all of it before it
// returns; Serialize and AppendSerialize then never call the registry, and
// AppendSerialize allocates nothing of its own (proto.MarshalAppend into
// the caller's buffer).
//
// Deserializer reads records back into the generated type, after checking,
// against the writer's schema (fetched once per id), that the
// message-index array names that type.
//
// This is a module of its own
// (github.com/samsa-go/samsa/serde/schemaregistry/protobuf), so that only
// Protobuf users download google.golang.org/protobuf; see package
// schemaregistry.
package protobuf
