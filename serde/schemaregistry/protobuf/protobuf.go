package protobuf

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	sr "github.com/samsa-go/samsa/serde/schemaregistry"
)

// Serializer writes messages of type T (a generated message type, such as
// *orderpb.Order) in Confluent's Protobuf wire format: the magic byte, the
// schema id, the message-index array of T within its .proto file, then
// the message's binary encoding. It implements producer.Serializer[T] and
// producer.AppendSerializer[T]. Serialize never calls the registry (see
// NewSerializer) and is safe for concurrent use.
type Serializer[T proto.Message] struct {
	reg  *sr.Registrations[struct{}]
	desc protoreflect.MessageDescriptor
	idx  []byte // the message-index array
	mo   proto.MarshalOptions
}

// NewSerializer derives T's schema from its descriptor: the .proto source
// of T's file (Render), whose imports become references, registered first
// under their file paths as subjects, as Confluent's serializers do (the
// well-known google/protobuf/ and google/type/ files, which registries
// know, are skipped). Then it resolves the schema as cfg says for each
// topic of cfg.Topics (or once, under RecordNameStrategy, whose subject
// is T's full name): registered by default, looked up with
// cfg.DisableAutoRegister (the imports too), or the subject's latest with
// cfg.UseLatestVersion (imports untouched; the message-index array is
// still T's place in its own file, so the latest schema must keep T's
// file layout). ctx bounds every registry
// call; a registry that is down, an incompatible schema (an *sr.Error with
// Code 409), or a file that cannot be rendered fails the constructor.
//
// T must be a concrete generated type (its zero value gives the
// descriptor); cfg.References is ignored.
func NewSerializer[T proto.Message](ctx context.Context, client *sr.Client, cfg sr.SerializerConfig) (*Serializer[T], error) {
	var zero T
	if any(zero) == nil {
		return nil, errors.New("protobuf: T must be a generated message type, such as *orderpb.Order, not an interface")
	}
	md := zero.ProtoReflect().Descriptor()
	s := &Serializer[T]{reg: sr.NewRegistrations[struct{}](client, cfg), desc: md, mo: proto.MarshalOptions{Deterministic: false}}
	s.idx = sr.AppendMessageIndexes(nil, MessageIndexes(md))
	var schema sr.Schema
	if cfg.UseLatestVersion {
		text, err := Render(md.ParentFile())
		if err != nil {
			return nil, err
		}
		schema = sr.Schema{Schema: text, Type: sr.Protobuf}
	} else {
		var err error
		if schema, err = resolveFile(ctx, client, md.ParentFile(), cfg, map[string]sr.Reference{}); err != nil {
			return nil, fmt.Errorf("protobuf: %w", err)
		}
	}
	build := func(sr.SubjectSchema) (struct{}, error) { return struct{}{}, nil }
	if err := s.reg.Set(ctx, schema, string(md.FullName()), build); err != nil {
		return nil, fmt.Errorf("protobuf: %w", err)
	}
	return s, nil
}

// skipImport reports whether an import is one the registries know
// without registration, as Confluent's serializers treat them.
func skipImport(path string) bool {
	return strings.HasPrefix(path, "google/protobuf/") || strings.HasPrefix(path, "google/type/") || strings.HasPrefix(path, "confluent/")
}

// resolveFile renders fd and resolves its imports as references, each
// registered (or looked up) under its path, depth first; seen holds the
// files done.
func resolveFile(ctx context.Context, client *sr.Client, fd protoreflect.FileDescriptor, cfg sr.SerializerConfig, seen map[string]sr.Reference) (sr.Schema, error) {
	text, err := Render(fd)
	if err != nil {
		return sr.Schema{}, err
	}
	var refs []sr.Reference
	imports := fd.Imports()
	for i := range imports.Len() {
		imp := imports.Get(i)
		path := imp.Path()
		if skipImport(path) {
			continue
		}
		ref, ok := seen[path]
		if !ok {
			if imp.IsPlaceholder() {
				return sr.Schema{}, fmt.Errorf("import %q of %s is not linked into the program", path, fd.Path())
			}
			dep, err := resolveFile(ctx, client, imp.FileDescriptor, cfg, seen)
			if err != nil {
				return sr.Schema{}, err
			}
			if !cfg.DisableAutoRegister {
				if _, err := client.Register(ctx, path, dep, cfg.Normalize); err != nil {
					return sr.Schema{}, fmt.Errorf("registering import %q: %w", path, err)
				}
			}
			got, err := client.Lookup(ctx, path, dep, cfg.Normalize)
			if err != nil {
				return sr.Schema{}, fmt.Errorf("looking up import %q: %w", path, err)
			}
			ref = sr.Reference{Name: path, Subject: path, Version: got.Version}
			seen[path] = ref
		}
		refs = append(refs, ref)
	}
	return sr.Schema{Schema: text, Type: sr.Protobuf, References: refs}, nil
}

// MessageIndexes returns the path of md in its file, as Confluent's
// message-index array writes it: its index among the file's top-level
// messages, then among the nested messages of each enclosing message.
// Map entry messages, which .proto source does not show, are not counted.
func MessageIndexes(md protoreflect.MessageDescriptor) []int {
	var path []int
	for d := protoreflect.Descriptor(md); ; {
		parent := d.Parent()
		var siblings protoreflect.MessageDescriptors
		switch p := parent.(type) {
		case protoreflect.MessageDescriptor:
			siblings = p.Messages()
		case protoreflect.FileDescriptor:
			siblings = p.Messages()
		default:
			return path
		}
		n := 0
		for i := range d.Index() {
			if !siblings.Get(i).IsMapEntry() {
				n++
			}
		}
		path = append([]int{n}, path...)
		if _, top := parent.(protoreflect.FileDescriptor); top {
			return path
		}
		d = parent
	}
}

// Register resolves the schema for more topics (Registrations.Add), so
// that records for them can be serialized; call it, outside Send, before
// sending to a topic not in SerializerConfig.Topics.
func (s *Serializer[T]) Register(ctx context.Context, topics ...string) error {
	if err := s.reg.Add(ctx, topics...); err != nil {
		return fmt.Errorf("protobuf: %w", err)
	}
	return nil
}

// SchemaID returns the schema id written for topic
// (Registrations.SchemaID).
func (s *Serializer[T]) SchemaID(topic string) (int, error) { return s.reg.SchemaID(topic) }

// Serialize returns m in Confluent's wire format for topic. It fails with
// an error wrapping sr.ErrTopicNotRegistered for a topic whose schema id
// the serializer does not have, for a nil interface value, or for a
// message of another type than the serializer's.
func (s *Serializer[T]) Serialize(topic string, m T) ([]byte, error) {
	return s.AppendSerialize(nil, topic, m)
}

// AppendSerialize appends m in Confluent's wire format for topic to dst.
// Errors are Serialize's; dst is then returned unchanged.
func (s *Serializer[T]) AppendSerialize(dst []byte, topic string, m T) ([]byte, error) {
	reg, err := s.reg.Get(topic)
	if err != nil {
		return dst, fmt.Errorf("protobuf: %w", err)
	}
	if any(m) == nil {
		return dst, errors.New("protobuf: a nil message")
	}
	if d := m.ProtoReflect().Descriptor(); d != s.desc && d.FullName() != s.desc.FullName() {
		return dst, fmt.Errorf("protobuf: a %s, but the serializer writes %s", d.FullName(), s.desc.FullName())
	}
	start := len(dst)
	dst = append(dst, reg.Header...)
	dst = append(dst, s.idx...)
	out, err := s.mo.MarshalAppend(dst, m)
	if err != nil {
		return dst[:start], fmt.Errorf("protobuf: topic %q: %w", topic, err)
	}
	return out, nil
}

// Deserializer reads messages of type T written in Confluent's Protobuf
// wire format by any serializer. It fetches the writer's schema once per
// schema id and checks that the message-index array names T's message
// (by full name) in it, then unmarshals the payload into a new T. Safe for
// concurrent use.
type Deserializer[T proto.Message] struct {
	dec  *sr.Decoders[*messageTree]
	name protoreflect.FullName
	newT func() T
}

// NewDeserializer returns a Deserializer for T, a generated message type,
// reading schemas through client. It makes no request, and panics if T is
// an interface type.
func NewDeserializer[T proto.Message](client *sr.Client) *Deserializer[T] {
	var zero T
	if any(zero) == nil {
		panic("protobuf: NewDeserializer needs a generated message type, not an interface")
	}
	mt := zero.ProtoReflect().Type()
	return &Deserializer[T]{
		dec: sr.NewDecoders(client, func(_ context.Context, s sr.Schema) (*messageTree, error) {
			if t := s.TypeOrAvro(); t != sr.Protobuf {
				return nil, fmt.Errorf("schema type %s, not PROTOBUF", t)
			}
			return parseMessageTree(s.Schema), nil
		}),
		name: mt.Descriptor().FullName(),
		newT: func() T { return mt.New().Interface().(T) },
	}
}

// ErrNull is returned by Deserialize for a null record value or key (a
// tombstone), which holds no schema id.
var ErrNull = errors.New("protobuf: a null value has no schema")

// Deserialize decodes data into a new T, fetching the writer's schema the
// first time its id is seen (ctx bounds that call). topic is not used. A
// nil data fails with ErrNull, bytes not in the wire format with an error
// wrapping sr.ErrInvalidWireFormat, and a record of another message type
// than T with an error naming both.
func (d *Deserializer[T]) Deserialize(ctx context.Context, topic string, data []byte) (T, error) {
	var zero T
	if data == nil {
		return zero, ErrNull
	}
	id, rest, err := sr.ParseHeader(data)
	if err != nil {
		return zero, err
	}
	idx, payload, err := sr.ParseMessageIndexes(rest)
	if err != nil {
		return zero, err
	}
	tree, err := d.dec.Get(ctx, id)
	if err != nil {
		return zero, fmt.Errorf("protobuf: %w", err)
	}
	name, ok := tree.lookup(idx)
	if !ok {
		return zero, fmt.Errorf("protobuf: schema id %d has no message at indexes %v", id, idx)
	}
	if name != d.name {
		return zero, fmt.Errorf("protobuf: schema id %d writes %s, not %s", id, name, d.name)
	}
	m := d.newT()
	if err := proto.Unmarshal(payload, m); err != nil {
		return zero, fmt.Errorf("protobuf: schema id %d: %w", id, err)
	}
	return m, nil
}
