package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// SerializerConfig configures a serializer of the avro, protobuf or
// jsonschema package: which subject it registers its schema under, and
// how. SerializerConfigFromProperties fills it from the Java serializers'
// property names. The zero value is Java's defaults: a value serializer,
// TopicNameStrategy, schemas registered automatically.
type SerializerConfig struct {
	// IsKey makes a key serializer (subject "<topic>-key" under
	// TopicNameStrategy); false, a value serializer.
	IsKey bool

	// Topics are the topics the serializer writes to: its constructor
	// resolves the schema id of each (under TopicNameStrategy and
	// TopicRecordNameStrategy a topic has its own subject), so that
	// Serialize never calls the registry. A record for another topic
	// fails with ErrTopicNotRegistered until Register adds the topic.
	// Required unless the strategy is RecordNameStrategy, whose subject
	// is the same for every topic.
	Topics []string

	// SubjectNameStrategy names the subject (key.subject.name.strategy,
	// value.subject.name.strategy). Default TopicNameStrategy.
	SubjectNameStrategy SubjectNameStrategy

	// DisableAutoRegister looks the schema up under its subject instead
	// of registering it (auto.register.schemas=false): a schema the
	// registry does not have under the subject fails the constructor.
	DisableAutoRegister bool

	// UseLatestVersion writes with the subject's latest schema and its
	// id, whatever the serializer's own (use.latest.version=true; Java
	// pairs it with auto.register.schemas=false). The value must fit the
	// latest schema: Avro encodes with it.
	UseLatestVersion bool

	// Normalize asks the registry to normalize the schema before
	// registering or looking it up (normalize.schemas).
	Normalize bool

	// References are the schemas the given schema uses (Avro named types
	// defined elsewhere, JSON Schema $refs), each registered beforehand.
	// The protobuf package computes its own from the file's imports.
	References []Reference

	// Validate checks every value against the schema before writing it
	// (json.fail.invalid.schema=true). JSON Schema only; it costs a
	// decoding of the JSON per record.
	Validate bool
}

// ErrTopicNotRegistered fails a record (wrapped with the topic) whose
// topic the serializer has no schema id for: Serialize never calls the
// registry, so add topics with the serializer's Register beforehand, or
// list them in SerializerConfig.Topics.
var ErrTopicNotRegistered = errors.New("schemaregistry: no schema id for the topic (call Register with it first)")

// ResolveSchema returns the schema a serializer configured by cfg writes
// under subject, with its id: s registered (the default), s looked up
// (DisableAutoRegister), or the subject's latest schema
// (UseLatestVersion). Register and Lookup cache their answers, so
// resolving the same schema again makes no request.
func (c *Client) ResolveSchema(ctx context.Context, subject string, s Schema, cfg SerializerConfig) (SubjectSchema, error) {
	switch {
	case cfg.UseLatestVersion:
		return c.Latest(ctx, subject)
	case cfg.DisableAutoRegister:
		got, err := c.Lookup(ctx, subject, s, cfg.Normalize)
		if err != nil {
			return SubjectSchema{}, err
		}
		// Write the caller's schema text: it is the one the codec was
		// built from, and the registry found it equivalent.
		got.Schema = s
		return got, nil
	default:
		id, err := c.Register(ctx, subject, s, cfg.Normalize)
		if err != nil {
			return SubjectSchema{}, err
		}
		return SubjectSchema{Subject: subject, ID: id, Schema: s}, nil
	}
}

// References returns every schema s refers to, directly or through other
// references, each once, in an order where a schema comes after those it
// refers to; s itself is not included. A format parses them first (Avro
// named types, JSON Schema $refs). Versions come from the cache after the
// first fetch.
func (c *Client) References(ctx context.Context, s Schema) ([]NamedSchema, error) {
	var (
		out  []NamedSchema
		seen = map[versionKey]bool{}
		walk func(refs []Reference, depth int) error
	)
	walk = func(refs []Reference, depth int) error {
		if depth > 32 {
			return errors.New("schemaregistry: references nest more than 32 deep (a cycle?)")
		}
		for _, r := range refs {
			k := versionKey{subject: r.Subject, version: r.Version}
			if seen[k] {
				continue
			}
			seen[k] = true
			var (
				got SubjectSchema
				err error
			)
			if r.Version > 0 {
				got, err = c.SchemaByVersion(ctx, r.Subject, r.Version)
			} else {
				got, err = c.Latest(ctx, r.Subject)
			}
			if err != nil {
				return fmt.Errorf("reference %q (subject %q version %d): %w", r.Name, r.Subject, r.Version, err)
			}
			if err := walk(got.References, depth+1); err != nil {
				return err
			}
			out = append(out, NamedSchema{Name: r.Name, SubjectSchema: got})
		}
		return nil
	}
	if err := walk(s.References, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// NamedSchema is a referenced schema with the name its referrer uses.
type NamedSchema struct {
	Name string
	SubjectSchema
}

// Registration is what a serializer resolved for a subject ahead of its
// Sends: the id it writes, the record prefix, and a codec of the format's
// own, built from the schema it writes.
type Registration[C any] struct {
	// SubjectSchema is the schema written, with its subject and id.
	SubjectSchema
	// Header is the magic byte and the id, the start of every record.
	Header []byte
	// Codec is what the format built from the schema.
	Codec C
}

// Registrations holds a serializer's Registration per topic (one for all
// topics under RecordNameStrategy). Lookups (Get) are lock-free and
// allocate nothing, for Serialize; Set and Add call the registry, never
// from Send. A format package builds its serializer on it; so can a
// format of your own.
type Registrations[C any] struct {
	client *Client
	cfg    SerializerConfig
	mu     sync.Mutex // serializes Set and Add
	cur    atomic.Pointer[regTable[C]]
}

// regTable is an immutable snapshot of a serializer's registrations.
type regTable[C any] struct {
	schema     Schema
	recordName string
	build      func(SubjectSchema) (C, error)
	byTopic    map[string]*Registration[C]
	all        *Registration[C] // RecordNameStrategy
}

// NewRegistrations returns empty Registrations; Set fills them.
func NewRegistrations[C any](client *Client, cfg SerializerConfig) *Registrations[C] {
	return &Registrations[C]{client: client, cfg: cfg}
}

// Set resolves s (whose record name, for the record name strategies, is
// recordName) for cfg.Topics, the topics added since, and topics,
// building each codec with build; then it replaces every registration at
// once. On error nothing changes. Serializers call it from their
// constructor and to change their schema at run time.
func (r *Registrations[C]) Set(ctx context.Context, s Schema, recordName string, build func(SubjectSchema) (C, error), topics ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := slices.Clone(r.cfg.Topics)
	if old := r.cur.Load(); old != nil {
		for t := range old.byTopic {
			all = append(all, t)
		}
	}
	all = append(all, topics...)
	t := &regTable[C]{schema: s, recordName: recordName, build: build, byTopic: map[string]*Registration[C]{}}
	if err := r.resolve(ctx, t, all); err != nil {
		return err
	}
	r.cur.Store(t)
	return nil
}

// Add resolves the current schema for more topics. It is how a serializer
// learns a topic without a registry call in Send.
func (r *Registrations[C]) Add(ctx context.Context, topics ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.cur.Load()
	if old == nil {
		return errors.New("schemaregistry: Add before Set")
	}
	if !r.cfg.SubjectNameStrategy.UsesTopic() {
		return nil
	}
	t := &regTable[C]{schema: old.schema, recordName: old.recordName, build: old.build, byTopic: make(map[string]*Registration[C], len(old.byTopic)+len(topics))}
	for k, v := range old.byTopic {
		t.byTopic[k] = v
	}
	if err := r.resolve(ctx, t, topics); err != nil {
		return err
	}
	r.cur.Store(t)
	return nil
}

// resolve fills t for topics.
func (r *Registrations[C]) resolve(ctx context.Context, t *regTable[C], topics []string) error {
	strategy := r.cfg.SubjectNameStrategy
	if !strategy.UsesTopic() {
		subject, err := strategy.Subject("", r.cfg.IsKey, t.recordName)
		if err != nil {
			return err
		}
		reg, err := r.one(ctx, t, subject)
		if err != nil {
			return err
		}
		t.all = reg
		return nil
	}
	if len(topics) == 0 {
		return fmt.Errorf("%w: SerializerConfig.Topics is empty: %v needs the topics to register the schema for", ErrInvalidConfig, strategy)
	}
	bySubject := map[string]*Registration[C]{}
	for _, topic := range topics {
		if _, done := t.byTopic[topic]; done {
			continue
		}
		if topic == "" {
			return fmt.Errorf("%w: an empty topic name", ErrInvalidConfig)
		}
		subject, err := strategy.Subject(topic, r.cfg.IsKey, t.recordName)
		if err != nil {
			return err
		}
		reg := bySubject[subject]
		if reg == nil {
			if reg, err = r.one(ctx, t, subject); err != nil {
				return fmt.Errorf("topic %q: %w", topic, err)
			}
			bySubject[subject] = reg
		}
		t.byTopic[topic] = reg
	}
	return nil
}

// one resolves t's schema under subject and builds its codec.
func (r *Registrations[C]) one(ctx context.Context, t *regTable[C], subject string) (*Registration[C], error) {
	ss, err := r.client.ResolveSchema(ctx, subject, t.schema, r.cfg)
	if err != nil {
		return nil, fmt.Errorf("subject %q: %w", subject, err)
	}
	codec, err := t.build(ss)
	if err != nil {
		return nil, fmt.Errorf("subject %q, schema id %d: %w", subject, ss.ID, err)
	}
	return &Registration[C]{SubjectSchema: ss, Header: AppendHeader(make([]byte, 0, HeaderSize), ss.ID), Codec: codec}, nil
}

// Get returns the registration for topic, or an error wrapping
// ErrTopicNotRegistered. It never calls the registry, takes no lock and
// allocates nothing on success.
func (r *Registrations[C]) Get(topic string) (*Registration[C], error) {
	t := r.cur.Load()
	if t == nil {
		return nil, ErrTopicNotRegistered
	}
	if t.all != nil {
		return t.all, nil
	}
	if reg, ok := t.byTopic[topic]; ok {
		return reg, nil
	}
	return nil, fmt.Errorf("%w: topic %q", ErrTopicNotRegistered, topic)
}

// SchemaID returns the schema id written for topic, or an error wrapping
// ErrTopicNotRegistered.
func (r *Registrations[C]) SchemaID(topic string) (int, error) {
	reg, err := r.Get(topic)
	if err != nil {
		return 0, err
	}
	return reg.ID, nil
}

// Topics returns the topics registered, sorted (none under
// RecordNameStrategy, which serves every topic).
func (r *Registrations[C]) Topics() []string {
	t := r.cur.Load()
	if t == nil {
		return nil
	}
	out := make([]string, 0, len(t.byTopic))
	for k := range t.byTopic {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Decoders caches, per schema id, what a deserializer built from the
// writer's schema: the registry is asked once per id (the Client caches
// the schema, Decoders the built codec). Safe for concurrent use; no lock
// is held across a registry call.
type Decoders[C any] struct {
	client *Client
	build  func(context.Context, Schema) (C, error)
	mu     sync.Mutex
	m      boundedMap[int, C]
}

// NewDecoders returns a Decoders that builds a codec with build, at most
// the Client's CacheSize of them.
func NewDecoders[C any](client *Client, build func(ctx context.Context, writer Schema) (C, error)) *Decoders[C] {
	d := &Decoders[C]{client: client, build: build}
	d.m.max = client.cfg.CacheSize
	return d
}

// Get returns the codec for schema id, fetching the schema and building
// the codec the first time.
func (d *Decoders[C]) Get(ctx context.Context, id int) (C, error) {
	d.mu.Lock()
	c, ok := d.m.get(id)
	d.mu.Unlock()
	if ok {
		return c, nil
	}
	s, err := d.client.SchemaByID(ctx, id)
	if err != nil {
		var zero C
		return zero, fmt.Errorf("schema id %d: %w", id, err)
	}
	if c, err = d.build(ctx, s); err != nil {
		var zero C
		return zero, fmt.Errorf("schema id %d: %w", id, err)
	}
	d.mu.Lock()
	d.m.put(id, c)
	d.mu.Unlock()
	return c, nil
}
