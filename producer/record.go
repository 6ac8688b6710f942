package producer

import (
	"time"

	"github.com/samsa-go/samsa/internal/recordbatch"
)

// Header is a record header: a key and an optional value. A nil Value is
// written as a null header value.
type Header = recordbatch.Header

// Record is one message to produce.
//
// Send copies Key, Value and Headers into the producer's buffer before it
// returns, so the caller may reuse them at once. The Record itself may also
// be reused after Send returns.
type Record struct {
	// Topic is the topic to produce to. It must be a valid Kafka topic name:
	// 1 to 249 characters of [a-zA-Z0-9._-], and neither "." nor "..".
	Topic string

	// Partition is the record's partition when ExplicitPartition is set
	// or Config.Partitioner is ManualPartitioner; otherwise it must be 0
	// (the zero value: the partitioner decides). A non-zero Partition
	// without ExplicitPartition under any other partitioner fails the
	// record with ErrInvalidRecord rather than being ignored. A partition
	// outside the topic's partitions fails the record with an error
	// wrapping ErrInvalidRecord that names the topic, the partition and
	// the partition count: in Send, or, when the topic's partitions are
	// not known yet, once they are.
	Partition int32

	// ExplicitPartition sends the record to Partition whatever
	// Config.Partitioner, which is then not called for it, as a Java
	// ProducerRecord with a partition does. With it a negative Partition
	// fails in Send with ErrInvalidRecord, even before the topic's
	// partitions are known. Default false.
	ExplicitPartition bool

	// Key is the record key; nil is a null key. Keyed records are
	// partitioned by the murmur2 hash of the key, like the Java client.
	Key []byte

	// Value is the record value; nil is a null value (a tombstone on
	// compacted topics).
	Value []byte

	// Headers are optional record headers.
	Headers []Header

	// Timestamp is the record's create time. The zero value means the time
	// Send is called. A time before 1970 fails the record with
	// ErrInvalidRecord (Kafka's timestamps are milliseconds since 1970; -1
	// means none on the wire), as Java's ProducerRecord refuses it; so
	// does a time 2^60 ms (36 million years) or more after 1970.
	Timestamp time.Time
}

// RecordMetadata describes a record that the broker acknowledged.
type RecordMetadata struct {
	// Topic and Partition say where the record was written.
	Topic     string
	Partition int32

	// Offset is the record's offset in its partition, or -1 when the
	// producer runs with acks=none and the broker sends no answer.
	Offset int64

	// Timestamp is the record's timestamp: its create time, or the broker's
	// log append time if the topic is configured with LogAppendTime.
	Timestamp time.Time
}
