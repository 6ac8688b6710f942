package avro

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	hamba "github.com/hamba/avro/v2"
	"github.com/modern-go/reflect2"

	sr "github.com/samsa-go/samsa/serde/schemaregistry"
)

// codec is what a registration holds: the schema written and the encoder
// of T for it.
type codec struct {
	schema hamba.Schema
	enc    hamba.ValEncoder // nil when T is an interface type
}

// Serializer writes values of type T in Confluent's wire format with an
// Avro schema: structs (fields matched by their `avro:"name"` tags, as
// github.com/hamba/avro/v2 does) or generic map[string]any records, or any
// Go type hamba/avro maps to the schema. It implements
// producer.Serializer[T] and producer.AppendSerializer[T]. Serialize never
// calls the registry (see NewSerializer) and is safe for concurrent use.
type Serializer[T any] struct {
	client *sr.Client
	cfg    sr.SerializerConfig
	reg    *sr.Registrations[codec]
	ptr    bool // T is pointer-shaped: its encoder takes the pointer itself
	scr    sync.Pool
}

// scratch is a Serialize call's working memory: a writer and a copy of the
// value, so that the value is encoded without being boxed.
type scratch[T any] struct {
	w *hamba.Writer
	v T
}

// maxScratch is the largest writer buffer kept for reuse.
const maxScratch = 64 << 10

// NewSerializer parses schema (Avro's JSON) and resolves it, as cfg says,
// for each topic of cfg.Topics (or once, under RecordNameStrategy, whose
// subject is the record's full name): registered by default, looked up
// with cfg.DisableAutoRegister, or replaced by the subject's latest
// schema with cfg.UseLatestVersion. The references of cfg.References are
// fetched and parsed first, for named types the schema uses. ctx bounds
// every registry call; a registry that is down, an incompatible schema
// (an *sr.Error with Code 409 and the registry's message), or a schema
// that does not parse fails the constructor, and nothing is left running.
func NewSerializer[T any](ctx context.Context, client *sr.Client, schema string, cfg sr.SerializerConfig) (*Serializer[T], error) {
	s := &Serializer[T]{client: client, cfg: cfg, reg: sr.NewRegistrations[codec](client, cfg)}
	var zero T
	if typ := reflect2.TypeOf(zero); typ != nil {
		s.ptr = typ.LikePtr()
	}
	s.scr.New = func() any { return &scratch[T]{w: hamba.NewWriter(nil, 256)} }
	if err := s.SetSchema(ctx, schema); err != nil {
		return nil, err
	}
	return s, nil
}

// SetSchema replaces the serializer's schema at run time: it parses
// schema, resolves it for every topic the serializer knows, and only then
// switches to it, at once for every topic (a Serialize running meanwhile
// uses the old or the new, never a mix). On error nothing changes. Call it
// outside Send; it is the only way the schema changes.
func (s *Serializer[T]) SetSchema(ctx context.Context, schema string) error {
	given := sr.Schema{Schema: schema, Type: sr.Avro, References: s.cfg.References}
	parsed, err := parse(ctx, s.client, given)
	if err != nil {
		return fmt.Errorf("avro: %w", err)
	}
	name := ""
	if n, ok := parsed.(hamba.NamedSchema); ok {
		name = n.FullName()
	}
	build := func(ss sr.SubjectSchema) (codec, error) {
		p := parsed
		if ss.Schema.Schema != schema { // use.latest.version
			var err error
			if p, err = parse(ctx, s.client, ss.Schema); err != nil {
				return codec{}, err
			}
		}
		return s.codecFor(p)
	}
	if err := s.reg.Set(ctx, given, name, build); err != nil {
		return fmt.Errorf("avro: %w", err)
	}
	return nil
}

// codecFor builds T's encoder for schema. A T that does not fit the
// schema (a struct without a required field) fails each Serialize, with
// hamba/avro's error.
func (s *Serializer[T]) codecFor(schema hamba.Schema) (codec, error) {
	var zero T
	typ := reflect2.TypeOf(zero)
	if typ == nil || typ.Kind() == reflect.Interface {
		return codec{schema: schema}, nil
	}
	return codec{schema: schema, enc: hamba.DefaultConfig.EncoderOf(schema, typ)}, nil
}

// Register resolves the schema for more topics (Registrations.Add), so
// that records for them can be serialized; call it, outside Send, before
// sending to a topic not in SerializerConfig.Topics.
func (s *Serializer[T]) Register(ctx context.Context, topics ...string) error {
	if err := s.reg.Add(ctx, topics...); err != nil {
		return fmt.Errorf("avro: %w", err)
	}
	return nil
}

// SchemaID returns the schema id written for topic
// (Registrations.SchemaID).
func (s *Serializer[T]) SchemaID(topic string) (int, error) { return s.reg.SchemaID(topic) }

// Serialize returns v in Confluent's wire format for topic. It fails with
// an error wrapping sr.ErrTopicNotRegistered for a topic whose schema id
// the serializer does not have, or with hamba/avro's error for a value
// that does not fit the schema.
func (s *Serializer[T]) Serialize(topic string, v T) ([]byte, error) {
	return s.AppendSerialize(nil, topic, v)
}

// AppendSerialize appends v in Confluent's wire format for topic to dst:
// the magic byte, the schema id, then v's Avro binary encoding. It
// allocates nothing in the steady state for structs whose fields need no
// allocation to encode. Errors are Serialize's; dst is then returned
// unchanged.
func (s *Serializer[T]) AppendSerialize(dst []byte, topic string, v T) ([]byte, error) {
	reg, err := s.reg.Get(topic)
	if err != nil {
		return dst, fmt.Errorf("avro: %w", err)
	}
	sc := s.scr.Get().(*scratch[T])
	sc.w.Reset(nil)
	sc.v = v
	if reg.Codec.enc == nil {
		sc.w.WriteVal(reg.Codec.schema, v)
	} else {
		p := unsafe.Pointer(&sc.v)
		if s.ptr {
			p = *(*unsafe.Pointer)(p)
		}
		reg.Codec.enc.Encode(p, sc.w)
	}
	if err = sc.w.Error; err == nil {
		dst = append(dst, reg.Header...)
		dst = append(dst, sc.w.Buffer()...)
	} else {
		err = fmt.Errorf("avro: topic %q: %w", topic, err)
	}
	var zero T
	sc.v = zero // drop references to the caller's data
	sc.w.Error = nil
	if cap(sc.w.Buffer()) <= maxScratch {
		s.scr.Put(sc)
	}
	return dst, err
}

// parse parses s with its references (fetched from the registry, each
// parsed first into a cache of its own, so that two schemas with the
// same type names never mix).
func parse(ctx context.Context, client *sr.Client, s sr.Schema) (hamba.Schema, error) {
	if t := s.TypeOrAvro(); t != sr.Avro {
		return nil, fmt.Errorf("schema type %s, not AVRO", t)
	}
	cache := &hamba.SchemaCache{}
	if len(s.References) > 0 {
		refs, err := client.References(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			if _, err := hamba.ParseWithCache(r.Schema.Schema, "", cache); err != nil {
				return nil, fmt.Errorf("reference %q: %w", r.Name, err)
			}
		}
	}
	parsed, err := hamba.ParseWithCache(s.Schema, "", cache)
	if err != nil {
		return nil, err
	}
	return parsed, nil
}

// Deserializer reads values of type T written in Confluent's wire format
// with an Avro schema, by any serializer (samsa's, Java's, Apicurio's in
// Confluent mode). It decodes with the writer's schema, fetched from the
// registry once per schema id: fields are matched by name, fields T lacks
// are skipped, and fields of T the writer lacks keep their zero value.
// Safe for concurrent use.
type Deserializer[T any] struct {
	dec *sr.Decoders[hamba.Schema]
}

// NewDeserializer returns a Deserializer reading schemas through client.
// It makes no request.
func NewDeserializer[T any](client *sr.Client) *Deserializer[T] {
	return &Deserializer[T]{dec: sr.NewDecoders(client, func(ctx context.Context, s sr.Schema) (hamba.Schema, error) {
		return parse(ctx, client, s)
	})}
}

// ErrNull is returned by Deserialize for a null record value or key (a
// tombstone), which holds no schema id.
var ErrNull = errors.New("avro: a null value has no schema")

// Deserialize decodes data, fetching the writer's schema the first time
// its id is seen (ctx bounds that call). topic is not used (it is there
// for the shape of Java's Deserializer). A nil data fails with ErrNull,
// bytes not in the wire format with an error wrapping
// sr.ErrInvalidWireFormat.
func (d *Deserializer[T]) Deserialize(ctx context.Context, topic string, data []byte) (T, error) {
	var v T
	err := d.DeserializeInto(ctx, data, &v)
	return v, err
}

// DeserializeInto decodes data into *v, like Deserialize.
func (d *Deserializer[T]) DeserializeInto(ctx context.Context, data []byte, v *T) error {
	if data == nil {
		return ErrNull
	}
	id, payload, err := sr.ParseHeader(data)
	if err != nil {
		return err
	}
	schema, err := d.dec.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("avro: %w", err)
	}
	if err := hamba.Unmarshal(schema, payload, v); err != nil {
		return fmt.Errorf("avro: schema id %d: %w", id, err)
	}
	return nil
}
