package producer

import (
	"strconv"
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

	// Partition is where the record goes. The zero value lets
	// Config.Partitioner choose; ToPartition(n) sends the record to
	// partition n whatever the partitioner (which is then not called), as
	// a Java ProducerRecord with a partition does. A partition outside the
	// topic's partitions fails the record with an error wrapping
	// ErrInvalidRecord that names the topic, the partition and the
	// partition count: in Send, or, when the topic's partitions are not
	// known yet, once they are.
	Partition PartitionChoice

	// Key is the record key; nil is a null key. Keyed records are
	// partitioned by the murmur2 hash of the key, like the Java client.
	Key []byte

	// Value is the record value; nil is a null value (a tombstone on
	// compacted topics).
	Value []byte

	// Headers are optional record headers.
	Headers []Header

	// Timestamp is the record's create time. The zero value means the time
	// Send is called.
	Timestamp time.Time
}

// PartitionChoice is a Record's partition: either "the partitioner
// chooses", the zero value, or a partition named by ToPartition. It is
// opaque so that the zero value cannot be mistaken for partition 0.
type PartitionChoice struct {
	id  int32
	set bool
}

// ToPartition returns the choice of partition id. A negative id is never a
// partition: a record with one fails in Send with ErrInvalidRecord.
func ToPartition(id int32) PartitionChoice { return PartitionChoice{id: id, set: true} }

// Get returns the chosen partition and true, or 0 and false for the zero
// value (the partitioner chooses).
func (c PartitionChoice) Get() (id int32, ok bool) { return c.id, c.set }

// String returns the partition's number, or "any" for the zero value.
func (c PartitionChoice) String() string {
	if !c.set {
		return "any"
	}
	return strconv.Itoa(int(c.id))
}

// parked is c as an accumulator keeps it for a parked record: the
// partition, or UnknownPartition for the zero value (Send refuses negative
// partitions before parking). fromParked reverses it.
func (c PartitionChoice) parked() int32 {
	if !c.set {
		return UnknownPartition
	}
	return c.id
}

// fromParked returns the PartitionChoice that parked encoded as p.
func fromParked(p int32) PartitionChoice {
	if p < 0 {
		return PartitionChoice{}
	}
	return ToPartition(p)
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
