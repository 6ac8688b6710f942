package producer

import "encoding/json"

// Serializer turns a key or value of type T into the bytes of a record, for
// TypedProducer. Serialize is called from Send's goroutine, so it must be
// safe for concurrent use. The producer only reads the returned slice and
// copies it into its buffer before Send returns, so Serialize may return a
// slice it does not own (such as the []byte it was given). A nil slice is a
// null key or value. An error fails the record's future with an error
// wrapping ErrInvalidRecord and the serializer's error.
type Serializer[T any] interface {
	Serialize(topic string, v T) ([]byte, error)
}

// AppendSerializer is an optional interface for a Serializer that can write
// into a buffer the caller provides. TypedProducer uses it when available,
// with a reused scratch buffer, so that serializing allocates nothing in the
// steady state. AppendSerialize appends the encoding of v to dst and returns
// the extended slice; appending nothing gives an empty (not null) key or
// value.
type AppendSerializer[T any] interface {
	Serializer[T]
	AppendSerialize(dst []byte, topic string, v T) ([]byte, error)
}

// SerializerFunc adapts a function to the Serializer interface.
type SerializerFunc[T any] func(topic string, v T) ([]byte, error)

// Serialize calls f(topic, v).
func (f SerializerFunc[T]) Serialize(topic string, v T) ([]byte, error) { return f(topic, v) }

// StringSerializer writes a string as its UTF-8 bytes, like the Java
// client's StringSerializer. The empty string is an empty (not null) key or
// value; use BytesSerializer with nil for null.
type StringSerializer struct{}

// Serialize returns a new slice holding the bytes of v.
func (StringSerializer) Serialize(_ string, v string) ([]byte, error) { return []byte(v), nil }

// AppendSerialize appends v to dst. TypedProducer uses it, so sending a
// string allocates nothing.
func (StringSerializer) AppendSerialize(dst []byte, _ string, v string) ([]byte, error) {
	return append(dst, v...), nil
}

// BytesSerializer passes a []byte through unchanged; nil stays a null key
// or value.
type BytesSerializer struct{}

// Serialize returns v.
func (BytesSerializer) Serialize(_ string, v []byte) ([]byte, error) { return v, nil }

// JSONSerializer writes v as JSON with encoding/json (json.Marshal). The
// JSON null (for a nil pointer, map or slice) is written as the 4 bytes
// "null", not as a null record value.
type JSONSerializer[T any] struct{}

// Serialize returns json.Marshal(v).
func (JSONSerializer[T]) Serialize(_ string, v T) ([]byte, error) { return json.Marshal(v) }
