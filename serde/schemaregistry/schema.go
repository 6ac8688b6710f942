package schemaregistry

import (
	"strconv"
	"strings"
)

// SchemaType is the kind of a schema, as the registry names it.
type SchemaType string

// The schema types of Confluent's API. The registry leaves schemaType out
// of an Avro schema; Schema.Type is then empty, which means Avro.
const (
	Avro     SchemaType = "AVRO"
	Protobuf SchemaType = "PROTOBUF"
	JSON     SchemaType = "JSON"
)

// Reference names another registered schema that a schema uses: an Avro
// named type defined elsewhere, a Protobuf import, a JSON Schema $ref.
type Reference struct {
	// Name is how the schema refers to it: the Avro type's full name, the
	// Protobuf import path ("common/money.proto"), the JSON $ref URL.
	Name string `json:"name"`
	// Subject and Version locate the referenced schema in the registry.
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// Schema is a schema's text with its type and references, as registered.
type Schema struct {
	// Schema is the schema's text: Avro JSON, a .proto file, or a JSON
	// Schema document.
	Schema string `json:"schema"`
	// Type is Avro, Protobuf or JSON; empty means Avro.
	Type SchemaType `json:"schemaType,omitempty"`
	// References are the schemas this one uses, registered first.
	References []Reference `json:"references,omitempty"`
}

// TypeOrAvro returns s.Type, or Avro when it is empty.
func (s Schema) TypeOrAvro() SchemaType {
	if s.Type == "" {
		return Avro
	}
	return s.Type
}

// wire is s as a request body holds it: without schemaType for Avro,
// which every registry reads as Avro (and some older ones refuse).
func (s Schema) wire() Schema {
	if s.Type == Avro {
		s.Type = ""
	}
	return s
}

// key identifies s among cached schemas: type, text and references.
func (s Schema) key() string {
	var b strings.Builder
	b.WriteString(string(s.TypeOrAvro()))
	b.WriteByte(0)
	b.WriteString(s.Schema)
	for _, r := range s.References {
		b.WriteByte(0)
		b.WriteString(r.Name)
		b.WriteByte(0)
		b.WriteString(r.Subject)
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(r.Version))
	}
	return b.String()
}

// SubjectSchema is a schema registered under a subject.
type SubjectSchema struct {
	Subject string `json:"subject"`
	// Version is the schema's version under Subject; 0 when the call that
	// returned it does not say (Register).
	Version int `json:"version"`
	// ID is the registry-wide schema id, written in every record.
	ID int `json:"id"`
	Schema
}

// Compatibility is a compatibility level (a subject's or the registry's
// configuration).
type Compatibility string

// The compatibility levels. Confluent's registry defaults to Backward;
// Apicurio's ccompat API to None.
const (
	CompatibilityNone               Compatibility = "NONE"
	CompatibilityBackward           Compatibility = "BACKWARD"
	CompatibilityBackwardTransitive Compatibility = "BACKWARD_TRANSITIVE"
	CompatibilityForward            Compatibility = "FORWARD"
	CompatibilityForwardTransitive  Compatibility = "FORWARD_TRANSITIVE"
	CompatibilityFull               Compatibility = "FULL"
	CompatibilityFullTransitive     Compatibility = "FULL_TRANSITIVE"
)
