package jsonschema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"

	sr "github.com/samsa-go/samsa/serde/schemaregistry"
)

// Serializer writes values of type T as JSON (encoding/json, HTML
// characters not escaped) in Confluent's wire format with a JSON Schema
// given by the user; with SerializerConfig.Validate, each value is first
// checked against the schema (github.com/santhosh-tekuri/jsonschema/v6). It
// implements producer.Serializer[T] and producer.AppendSerializer[T].
// Serialize never calls the registry (see NewSerializer) and is safe for
// concurrent use.
type Serializer[T any] struct {
	client *sr.Client
	cfg    sr.SerializerConfig
	reg    *sr.Registrations[*santhosh.Schema] // nil codec without Validate
	scr    sync.Pool
}

// scratch is a Serialize call's encoder and its buffer.
type scratch struct {
	buf bytes.Buffer
	enc *json.Encoder
}

const maxScratch = 64 << 10

// NewSerializer checks that schema is a JSON document (and, with
// cfg.Validate, compiles it with the references of cfg.References, fetched
// from the registry) and resolves it, as cfg says, for each topic of
// cfg.Topics (or once, under RecordNameStrategy, whose subject is the
// schema's "title"): registered by default, looked up with
// cfg.DisableAutoRegister, or the subject's latest with
// cfg.UseLatestVersion. ctx bounds every registry call; a registry that is
// down, an incompatible schema (an *sr.Error with Code 409), or an invalid
// one (Code 42201: Apicurio refuses a schema without "$schema") fails the
// constructor.
func NewSerializer[T any](ctx context.Context, client *sr.Client, schema string, cfg sr.SerializerConfig) (*Serializer[T], error) {
	s := &Serializer[T]{client: client, cfg: cfg, reg: sr.NewRegistrations[*santhosh.Schema](client, cfg)}
	s.scr.New = func() any {
		sc := &scratch{}
		sc.enc = json.NewEncoder(&sc.buf)
		sc.enc.SetEscapeHTML(false)
		return sc
	}
	if err := s.SetSchema(ctx, schema); err != nil {
		return nil, err
	}
	return s, nil
}

// SetSchema replaces the serializer's schema at run time: it resolves
// schema for every topic the serializer knows, then switches to it at once
// for all of them. On error nothing changes. Call it outside Send.
func (s *Serializer[T]) SetSchema(ctx context.Context, schema string) error {
	title, err := recordName(schema)
	if err != nil {
		return fmt.Errorf("jsonschema: %w", err)
	}
	given := sr.Schema{Schema: schema, Type: sr.JSON, References: s.cfg.References}
	build := func(ss sr.SubjectSchema) (*santhosh.Schema, error) {
		if !s.cfg.Validate {
			return nil, nil
		}
		return compile(ctx, s.client, ss.Schema)
	}
	if err := s.reg.Set(ctx, given, title, build); err != nil {
		return fmt.Errorf("jsonschema: %w", err)
	}
	return nil
}

// recordName returns the schema's "title", the record name of the record
// name strategies; it also checks that the schema is a JSON document.
func recordName(schema string) (string, error) {
	var doc any
	if err := json.Unmarshal([]byte(schema), &doc); err != nil {
		return "", fmt.Errorf("the schema is not JSON: %w", err)
	}
	if obj, ok := doc.(map[string]any); ok {
		if t, ok := obj["title"].(string); ok {
			return t, nil
		}
	}
	return "", nil
}

// Register resolves the schema for more topics (Registrations.Add), so
// that records for them can be serialized; call it, outside Send, before
// sending to a topic not in SerializerConfig.Topics.
func (s *Serializer[T]) Register(ctx context.Context, topics ...string) error {
	if err := s.reg.Add(ctx, topics...); err != nil {
		return fmt.Errorf("jsonschema: %w", err)
	}
	return nil
}

// SchemaID returns the schema id written for topic
// (Registrations.SchemaID).
func (s *Serializer[T]) SchemaID(topic string) (int, error) { return s.reg.SchemaID(topic) }

// Serialize returns v in Confluent's wire format for topic. It fails with
// an error wrapping sr.ErrTopicNotRegistered for a topic whose schema id
// the serializer does not have, with encoding/json's error, or, with
// Validate, with the validator's error (wrapping ErrInvalid) for a value
// the schema refuses.
func (s *Serializer[T]) Serialize(topic string, v T) ([]byte, error) {
	return s.AppendSerialize(nil, topic, v)
}

// ErrInvalid is wrapped by the errors of a value the schema refuses (with
// SerializerConfig.Validate, or a Deserializer's Validate).
var ErrInvalid = errors.New("jsonschema: the value does not match the schema")

// AppendSerialize appends v in Confluent's wire format for topic to dst:
// the magic byte, the schema id, then v's JSON. Errors are Serialize's;
// dst is then returned unchanged.
func (s *Serializer[T]) AppendSerialize(dst []byte, topic string, v T) ([]byte, error) {
	reg, err := s.reg.Get(topic)
	if err != nil {
		return dst, fmt.Errorf("jsonschema: %w", err)
	}
	sc := s.scr.Get().(*scratch)
	defer func() {
		if sc.buf.Cap() <= maxScratch {
			s.scr.Put(sc)
		}
	}()
	sc.buf.Reset()
	if err := sc.enc.Encode(v); err != nil {
		return dst, fmt.Errorf("jsonschema: topic %q: %w", topic, err)
	}
	out := bytes.TrimSuffix(sc.buf.Bytes(), []byte{'\n'})
	if reg.Codec != nil {
		if err := validate(reg.Codec, out); err != nil {
			return dst, fmt.Errorf("jsonschema: topic %q: %w", topic, err)
		}
	}
	dst = append(dst, reg.Header...)
	return append(dst, out...), nil
}

// validate checks the JSON text doc against sch.
func validate(sch *santhosh.Schema, doc []byte) error {
	inst, err := santhosh.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// base is the URL a schema without an absolute "$id" is known by, and
// against which its references' names resolve.
const base = "https://schemaregistry.invalid/schema.json"

// compile compiles s with its references, fetched from the registry. The
// compiler loads nothing else: a $ref to a file or URL that is not a
// reference fails.
func compile(ctx context.Context, client *sr.Client, s sr.Schema) (*santhosh.Schema, error) {
	if t := s.TypeOrAvro(); t != sr.JSON {
		return nil, fmt.Errorf("schema type %s, not JSON", t)
	}
	c := santhosh.NewCompiler()
	c.UseLoader(noLoader{})
	loc := base
	doc, err := santhosh.UnmarshalJSON(strings.NewReader(s.Schema))
	if err != nil {
		return nil, err
	}
	if obj, ok := doc.(map[string]any); ok {
		if id, ok := obj["$id"].(string); ok {
			if u, err := url.Parse(id); err == nil && u.IsAbs() {
				loc = id
			}
		}
	}
	if len(s.References) > 0 {
		refs, err := client.References(ctx, s)
		if err != nil {
			return nil, err
		}
		b, _ := url.Parse(loc)
		for _, r := range refs {
			rdoc, err := santhosh.UnmarshalJSON(strings.NewReader(r.Schema.Schema))
			if err != nil {
				return nil, fmt.Errorf("reference %q: %w", r.Name, err)
			}
			u, err := url.Parse(r.Name)
			if err != nil {
				return nil, fmt.Errorf("reference %q: %w", r.Name, err)
			}
			if err := c.AddResource(b.ResolveReference(u).String(), rdoc); err != nil {
				return nil, fmt.Errorf("reference %q: %w", r.Name, err)
			}
		}
	}
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// noLoader refuses to load anything: schemas come from the registry only.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is not a registered reference (nothing is loaded from files or the network)", u)
}

// DeserializerConfig configures a Deserializer.
type DeserializerConfig struct {
	// Validate checks every record against the writer's schema before
	// decoding it (json.fail.invalid.schema=true).
	Validate bool
}

// Deserializer reads values of type T written in Confluent's wire format
// with a JSON Schema, by any serializer: it decodes the JSON with
// encoding/json, after checking it against the writer's schema (fetched
// once per id) with Validate. Safe for concurrent use.
type Deserializer[T any] struct {
	dec      *sr.Decoders[*santhosh.Schema]
	validate bool
}

// NewDeserializer returns a Deserializer reading schemas through client.
// It makes no request.
func NewDeserializer[T any](client *sr.Client, cfg DeserializerConfig) *Deserializer[T] {
	return &Deserializer[T]{
		dec: sr.NewDecoders(client, func(ctx context.Context, s sr.Schema) (*santhosh.Schema, error) {
			if !cfg.Validate {
				if t := s.TypeOrAvro(); t != sr.JSON {
					return nil, fmt.Errorf("schema type %s, not JSON", t)
				}
				return nil, nil
			}
			return compile(ctx, client, s)
		}),
		validate: cfg.Validate,
	}
}

// ErrNull is returned by Deserialize for a null record value or key (a
// tombstone), which holds no schema id.
var ErrNull = errors.New("jsonschema: a null value has no schema")

// Deserialize decodes data, fetching the writer's schema the first time
// its id is seen (ctx bounds that call). topic is not used. A nil data
// fails with ErrNull, bytes not in the wire format with an error wrapping
// sr.ErrInvalidWireFormat, a value the schema refuses (with Validate) with
// an error wrapping ErrInvalid.
func (d *Deserializer[T]) Deserialize(ctx context.Context, topic string, data []byte) (T, error) {
	var v T
	if data == nil {
		return v, ErrNull
	}
	id, payload, err := sr.ParseHeader(data)
	if err != nil {
		return v, err
	}
	sch, err := d.dec.Get(ctx, id)
	if err != nil {
		return v, fmt.Errorf("jsonschema: %w", err)
	}
	if sch != nil {
		if err := validate(sch, payload); err != nil {
			return v, fmt.Errorf("jsonschema: schema id %d: %w", id, err)
		}
	}
	if err := json.Unmarshal(payload, &v); err != nil {
		return v, fmt.Errorf("jsonschema: schema id %d: %w", id, err)
	}
	return v, nil
}
