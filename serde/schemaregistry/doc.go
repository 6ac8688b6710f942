// Package schemaregistry is a Schema Registry client (Confluent's REST API,
// which Apicurio Registry serves at /apis/ccompat/v7) and the parts every
// Schema Registry serializer shares: Confluent's wire format, subject name
// strategies, and the registrations that let a serializer write without
// calling the registry. The serializers themselves are in the modules
// github.com/samsa-go/samsa/serde/schemaregistry/avro, .../protobuf and
// .../jsonschema; each implements producer.Serializer and
// producer.AppendSerializer, so it plugs into producer.NewTyped.
//
// # Send never calls the registry
//
// A serializer is created ready: its constructor takes a context, registers
// its schema (or looks it up, or takes the subject's latest version) for
// the topics of SerializerConfig.Topics and keeps the ids. Serialize then
// only reads an immutable table (Registrations.Get: no lock, no allocation)
// and encodes; a record for a topic it has no id for fails at once with
// ErrTopicNotRegistered. A new topic or a new schema is registered by an
// explicit call (the serializer's Register or SetSchema), never inside
// Send; so a registry that is down fails the constructor within its
// context, and records keep flowing once the serializer exists.
//
//	client, err := schemaregistry.NewClient(schemaregistry.Config{URLs: []string{"http://registry:8081"}})
//	ser, err := avro.NewSerializer[Order](ctx, client, orderSchema,
//		schemaregistry.SerializerConfig{Topics: []string{"orders"}})
//	orders := producer.NewTyped(p, producer.StringSerializer{}, ser)
//	orders.Send(ctx, "orders", o.ID, o)
//
// # Wire format
//
// Every record is the magic byte 0, the schema id as a 4-byte big-endian
// integer, then the payload; a Protobuf payload is preceded by its
// message-index array (AppendMessageIndexes). AppendHeader, ParseHeader and
// ParseMessageIndexes read and write it; the deserializers read the id,
// fetch the writer's schema once (Decoders) and decode.
//
// # Client
//
// Client covers registering (Register), looking up (Lookup), schemas by id
// (SchemaByID), subjects and versions (Subjects, Versions, SchemaByVersion,
// Latest, DeleteSubject), compatibility (CheckCompatibility) and
// configuration (GetConfig, SetConfig), for AVRO, PROTOBUF and JSON schemas
// with references. It caches what never changes (schemas by id, ids by
// subject and schema, versions), bounds every answer (8 MiB) and every
// attempt (30 s), and retries transport errors, 5xx and 429 with
// exponential backoff (3 retries). A failed answer is an *Error holding the
// registry's error_code and message. Basic credentials, bearer tokens
// (static, or any token source such as sasl.ClientCredentials) and TLS are
// configured on Config; credentials never appear in an error or in the %v
// of a Config.
//
// # Java properties
//
// ConfigFromProperties and SerializerConfigFromProperties read the Java
// serializers' keys (schema.registry.url, basic.auth.credentials.source,
// basic.auth.user.info, bearer.auth.credentials.source, bearer.auth.token,
// schema.registry.ssl.*, auto.register.schemas, use.latest.version,
// key.subject.name.strategy, value.subject.name.strategy, ...) from the
// same properties file as producer.ConfigFromProperties, which leaves
// them alone:
//
//	props, err := producer.LoadProperties("client.properties")
//	pcfg, err := producer.ConfigFromProperties(props)
//	rcfg, err := schemaregistry.ConfigFromProperties(props)
//	scfg, err := schemaregistry.SerializerConfigFromProperties(props, false)
//
// # Why four modules
//
// This module needs only the standard library and samsa itself. Each
// format is a module of its own (avro: github.com/hamba/avro/v2; protobuf:
// google.golang.org/protobuf; jsonschema:
// github.com/santhosh-tekuri/jsonschema/v6), so an Avro user never
// downloads Protobuf's or a JSON Schema validator's code, and samsa's own
// module never depends on any of them. The formats build on the exported
// Registrations and Decoders here, which a format of your own can use too.
package schemaregistry
