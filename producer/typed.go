package producer

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// TypedRecord is a Record whose key and value are Go values, serialized by
// a TypedProducer.
type TypedRecord[K, V any] struct {
	// Topic, Partition, ExplicitPartition, Headers and Timestamp are as
	// in Record.
	Topic             string
	Partition         int32
	ExplicitPartition bool
	Headers           []Header
	Timestamp         time.Time

	// Key and Value are serialized by the TypedProducer's serializers.
	Key   K
	Value V
}

// TypedProducer sends keys of type K and values of type V through a
// Producer, serializing them in Send:
//
//	orders := producer.NewTyped(p, producer.StringSerializer{}, producer.JSONSerializer[Order]{})
//	fut := orders.Send(ctx, "orders", order.ID, order)
//
// A serializer error, or a panic (recovered), fails the record's future (or
// callback) with an error wrapping ErrInvalidRecord and the serializer's
// error; the record never reaches the producer. Serializers that implement AppendSerializer (such as
// StringSerializer) write into a reused buffer, so the typed path adds no
// allocation of its own to the Producer's. A TypedProducer is safe for
// concurrent use. Flush and Close the Producer itself (see Producer).
type TypedProducer[K, V any] struct {
	p      *Producer
	key    Serializer[K]
	keyApp AppendSerializer[K]
	val    Serializer[V]
	valApp AppendSerializer[V]
	// scratch holds *typedScratch: a Record and a buffer the serializers
	// append to, reused once Send has copied the record.
	scratch sync.Pool
}

// typedScratch is the per-Send working memory of a TypedProducer.
type typedScratch struct {
	rec Record
	buf []byte
}

// maxScratch is the largest serialization buffer kept for reuse; larger
// ones are left to the garbage collector so that one huge record does not
// pin its memory.
const maxScratch = 64 << 10

// NewTyped returns a TypedProducer that sends through p with the given
// serializers. A nil key serializer makes every key null (for records
// partitioned by the sticky partitioner); value must not be nil.
func NewTyped[K, V any](p *Producer, key Serializer[K], value Serializer[V]) *TypedProducer[K, V] {
	if p == nil || value == nil {
		panic("producer: NewTyped needs a Producer and a value serializer")
	}
	t := &TypedProducer[K, V]{p: p, key: key, val: value}
	t.keyApp, _ = key.(AppendSerializer[K])
	t.valApp, _ = value.(AppendSerializer[V])
	t.scratch.New = func() any { return new(typedScratch) }
	return t
}

// Producer returns the underlying Producer, for Flush, Close and untyped
// sends.
func (t *TypedProducer[K, V]) Producer() *Producer { return t.p }

// Send serializes key and value and sends them to topic, like
// Producer.Send; the partition is chosen by the producer's partitioner.
func (t *TypedProducer[K, V]) Send(ctx context.Context, topic string, key K, value V) *Future {
	return t.SendRecord(ctx, &TypedRecord[K, V]{Topic: topic, Key: key, Value: value})
}

// SendRecord serializes rec's key and value and sends it like
// Producer.Send. rec may be reused once SendRecord returns.
func (t *TypedProducer[K, V]) SendRecord(ctx context.Context, rec *TypedRecord[K, V]) *Future {
	s := t.scratch.Get().(*typedScratch)
	defer t.release(s)
	if err := t.encode(s, rec); err != nil {
		f := new(Future)
		f.complete(failedTyped(rec), err)
		return f
	}
	return t.p.Send(ctx, &s.rec)
}

// TrySend serializes rec's key and value and sends it like
// Producer.TrySend: when the buffer pool has no memory for the record it
// fails at once with ErrBufferExhausted instead of waiting up to MaxBlock.
// A serialization error fails the returned Future, as in SendRecord. rec
// may be reused once TrySend returns.
func (t *TypedProducer[K, V]) TrySend(ctx context.Context, rec *TypedRecord[K, V]) *Future {
	s := t.scratch.Get().(*typedScratch)
	defer t.release(s)
	if err := t.encode(s, rec); err != nil {
		f := new(Future)
		f.complete(failedTyped(rec), err)
		return f
	}
	return t.p.TrySend(ctx, &s.rec)
}

// TypedResult is what TypedProducer.SendTo delivers on its channel for each
// record.
type TypedResult[K, V any] struct {
	// Record is the record given to SendTo. The producer keeps the pointer
	// (not the serialized key and value, which Send copied) until the
	// TypedResult is delivered, so do not reuse it before then.
	Record *TypedRecord[K, V]
	// Metadata is set when Err is nil.
	Metadata RecordMetadata
	// Err is why the record failed, or nil.
	Err error
}

// SendTo serializes rec's key and value and sends it like Producer.SendTo:
// one TypedResult per record is sent on results, from the producer's
// completion goroutine, so the channel must be drained (a full channel
// holds up every completion). A serialization error, or another error found
// by SendTo itself, is sent from the caller's goroutine before SendTo
// returns, so an unbuffered channel must have a receiver running elsewhere.
// SendTo costs one allocation per record more than SendCallback (the
// delivery closure). It panics if results is nil.
func (t *TypedProducer[K, V]) SendTo(ctx context.Context, rec *TypedRecord[K, V], results chan<- TypedResult[K, V]) {
	if results == nil {
		panic("producer: SendTo needs a non-nil results channel")
	}
	s := t.scratch.Get().(*typedScratch)
	defer t.release(s)
	if err := t.encode(s, rec); err != nil {
		results <- TypedResult[K, V]{Record: rec, Metadata: failedTyped(rec), Err: err}
		return
	}
	t.p.SendCallback(ctx, &s.rec, func(md RecordMetadata, err error) {
		results <- TypedResult[K, V]{Record: rec, Metadata: md, Err: err}
	})
}

// SendCallback serializes rec's key and value and sends it like
// Producer.SendCallback. A serialization error calls fn on the caller's
// goroutine before SendCallback returns, as other errors found by Send
// itself do.
func (t *TypedProducer[K, V]) SendCallback(ctx context.Context, rec *TypedRecord[K, V], fn func(RecordMetadata, error)) {
	s := t.scratch.Get().(*typedScratch)
	defer t.release(s)
	if err := t.encode(s, rec); err != nil {
		if fn != nil {
			fn(failedTyped(rec), err)
		}
		return
	}
	t.p.SendCallback(ctx, &s.rec, fn)
}

// failedTyped is the metadata a record that failed serialization completes
// with, like the producer's for records it rejects.
func failedTyped[K, V any](rec *TypedRecord[K, V]) RecordMetadata {
	md := RecordMetadata{Partition: -1, Offset: -1}
	if rec != nil {
		md.Topic = rec.Topic
	}
	return md
}

// encode fills s.rec from rec, serializing the key and value (into s.buf
// for append serializers). A panicking serializer is recovered: its record
// fails with ErrInvalidRecord, and the caller's goroutine goes on.
func (t *TypedProducer[K, V]) encode(s *typedScratch, rec *TypedRecord[K, V]) (err error) {
	if rec == nil {
		return fmt.Errorf("%w: nil record", ErrInvalidRecord)
	}
	defer func() {
		if v := recover(); v != nil {
			s.buf = nil // may be left half written
			err = fmt.Errorf("%w: topic %q: the serializer panicked: %v", ErrInvalidRecord, rec.Topic, v)
		}
	}()
	s.rec = Record{Topic: rec.Topic, Partition: rec.Partition, ExplicitPartition: rec.ExplicitPartition, Headers: rec.Headers, Timestamp: rec.Timestamp}
	buf := s.buf[:0]
	switch {
	case t.key == nil:
	case t.keyApp != nil:
		if buf, err = t.keyApp.AppendSerialize(buf, rec.Topic, rec.Key); err == nil {
			// Full slice expression: the value appended next must not
			// grow into the key.
			s.rec.Key = nonNil(buf[0:len(buf):len(buf)])
		}
	default:
		s.rec.Key, err = t.key.Serialize(rec.Topic, rec.Key)
	}
	if err != nil {
		return fmt.Errorf("%w: topic %q: serializing the key: %w", ErrInvalidRecord, rec.Topic, err)
	}
	if t.valApp != nil {
		start := len(buf)
		if buf, err = t.valApp.AppendSerialize(buf, rec.Topic, rec.Value); err == nil {
			s.rec.Value = nonNil(buf[start:len(buf):len(buf)])
		}
	} else {
		s.rec.Value, err = t.val.Serialize(rec.Topic, rec.Value)
	}
	s.buf = buf
	if err != nil {
		return fmt.Errorf("%w: topic %q: serializing the value: %w", ErrInvalidRecord, rec.Topic, err)
	}
	return nil
}

// nonNil keeps an empty append result an empty (not null) key or value.
func nonNil(b []byte) []byte {
	if b == nil {
		return emptyBytes
	}
	return b
}

var emptyBytes = []byte{}

func (t *TypedProducer[K, V]) release(s *typedScratch) {
	s.rec = Record{} // drop references to the caller's data
	if cap(s.buf) > maxScratch {
		return
	}
	t.scratch.Put(s)
}
