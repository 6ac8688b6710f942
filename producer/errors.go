package producer

import (
	"errors"
	"fmt"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/kerr"
)

// Sentinel errors. Match them with errors.Is, never by comparing strings.
//
// Every error the producer returns or completes a record with is one of
// these kinds:
//   - it wraps one of ErrBufferExhausted, ErrClosed, ErrRecordTooLarge,
//     ErrDeliveryTimeout, ErrInvalidRecord, ErrFlushInCallback,
//     ErrInvalidConfig, ErrAuthentication or (with Config.Spool)
//     ErrSpoolFailed, and, where there is one, the
//     cause: a *KafkaError, a connection error (an authentication failure
//     seen last before a delivery timeout wraps ErrAuthentication too), a
//     Partitioner's error;
//   - it is a *KafkaError: the broker's code for a record it rejected for
//     good, or for a topic metadata reports unusable (package kerr names
//     the codes);
//   - it wraps ctx.Err(), when Send's context ended before a request
//     carried the record (while Send waited for buffer memory, while the
//     record was parked, or in a batch not written yet);
//   - it wraps ErrPurged, for a record Purge failed before it was sent;
//   - it is a *DataLossError, given to Config.OnDataLoss;
//   - with Config.TransactionalID, it wraps ErrNoTransaction,
//     ErrTransactionInProgress, ErrProducerFenced or ErrTransactionAborted
//     (transaction.go documents them, and IsAbortable and IsFatal sort the
//     errors of a transaction);
//   - should encoding a batch ever fail, it is the codec's error.
//
// ErrOutcomeUnknown is the one sentinel that accompanies another kind: it
// qualifies the error of a record that failed after its batch was sent,
// when the record may have been written. It then comes with
// ErrDeliveryTimeout, ErrClosed, ErrAuthentication or a *KafkaError (an
// earlier attempt timed out, a later one was refused), never alone and
// never with the sentinels that fail a record before it is sent
// (ErrInvalidRecord, ErrRecordTooLarge, ErrBufferExhausted). No error wraps
// two of the other sentinels; in particular ErrDeliveryTimeout and
// ErrClosed never come together. The one exception is a record of a
// transaction that became abortable or fatal before the record was sent:
// ErrTransactionAborted then wraps the transaction's error, which may
// carry its own sentinel (ErrDeliveryTimeout of another record,
// ErrProducerFenced).
var (
	// ErrBufferExhausted is returned by Send when the record needs memory
	// from the buffer pool and none was freed within Config.MaxBlock (or
	// before Send's context ended). The message says how long Send waited,
	// how many bytes it asked for and how many were available. It is the
	// same value as bufferpool.ErrBufferExhausted. A Send from a callback
	// (on the completion goroutine, which is what frees memory) never
	// waits: it fails at once with ErrBufferExhausted when the pool is full.
	// It also fails a Send whose custom Config.BufferPool panicked in
	// Allocate or Reserve ("the buffer pool panicked in ...").
	ErrBufferExhausted = bufferpool.ErrBufferExhausted
	// ErrBufferFull is ErrBufferExhausted under the name issue 34's spool
	// was specified with (Java's BufferExhaustedException; librdkafka's
	// QUEUE_FULL): the same value, so errors.Is matches either. A full
	// Config.Spool (its MaxBytes, or the disk) fails Send with it after
	// MaxBlock, wrapping spool.ErrFull.
	ErrBufferFull = ErrBufferExhausted

	// ErrClosed fails a record sent after Close has been called (through
	// its Future, callback or delivery channel, at once). Records still
	// buffered when Close gives up waiting for them also fail with an error
	// wrapping ErrClosed.
	ErrClosed = errors.New("producer: closed")

	// ErrSpoolFailed fails a record that Config.Spool's log could not
	// take because a write or an fsync of the spool failed (it wraps
	// spool.ErrFailed and the I/O error, errors.Is(err, syscall.EIO)):
	// the spool stops (fail-stop), every later Send fails with it at
	// once, and no record is reported persisted that was not. Reopening
	// the directory (a new producer) recovers what the log holds. Also
	// returned by SyncSpool, and it fails a record the log took but memory
	// then refused after the spool failed (its Send's ctx or MaxBlock
	// ended): a failed spool writes no position again, so that record
	// stays in the log and the next New may send it again.
	ErrSpoolFailed = errors.New("producer: spool failed")

	// ErrRecordTooLarge completes a record's future when the record, once
	// encoded, is larger than Config.MaxRequestSize or Config.BufferMemory;
	// such a record could never be sent. Send checks this before the record
	// takes any buffer memory, like the Java client's
	// RecordTooLargeException. (A broker that rejects a batch with
	// MESSAGE_TOO_LARGE comes back as a *KafkaError instead.)
	ErrRecordTooLarge = errors.New("producer: record too large")

	// ErrDeliveryTimeout completes a record's future when the record was
	// not acknowledged within Config.DeliveryTimeout of entering the
	// producer, whatever the reason (no leader, retries that kept failing),
	// or when its topic was not present in metadata within Config.MaxBlock
	// of its Send (as the Java producer's send fails after max.block.ms),
	// whatever the metadata requests are doing: that error says how long
	// the record waited and why the topic is missing (its code, a failed
	// fetch, or the broker that has not answered the request in flight).
	// When a last error was seen, the error wraps it too, so errors.Is and
	// errors.As also match that cause (UNKNOWN_TOPIC_OR_PARTITION, or the
	// dial or metadata error of an unreachable cluster).
	ErrDeliveryTimeout = errors.New("producer: delivery timeout")

	// ErrInvalidRecord fails a record that cannot be produced as given: a
	// nil record, an empty or invalid topic name, a partition out of range
	// (Record.Partition with ExplicitPartition or ManualPartitioner, or a
	// Partitioner's answer), a negative Partition with ExplicitPartition, a
	// non-zero Partition without ExplicitPartition under another
	// partitioner, a Partitioner error (wrapped, so errors.Is matches it
	// too) or panic, or a TypedProducer serializer error or panic. It
	// surfaces through the record's Future or callback, before the record
	// takes buffer memory, or, for a record parked until its topic's
	// partitions are known, from the IO goroutine once they are.
	ErrInvalidRecord = errors.New("producer: invalid record")

	// ErrOutcomeUnknown qualifies the error of a record that may or may not
	// have been written (the error wraps both): a request timed out or a
	// connection broke after the batch was written to it, in whole or in
	// part (a request the connection failed before writing a byte of it,
	// held behind a throttle or a KIP-368 re-authentication, was not: its
	// records are retried as never sent, and their error at the deadline
	// says "the request was not sent"), or the broker's answer
	// left its partition out, and no later attempt settled it; a batch
	// still in flight when its DeliveryTimeout passed (it fails at the
	// deadline); or a batch in flight when Close gave up and closed its
	// connection. Most often it comes with ErrDeliveryTimeout or ErrClosed;
	// see above for the others. An error without it means the record was
	// definitely not written. It is never returned on its own, so its
	// message has no "producer:" prefix: it reads as the end of the other
	// error's message.
	ErrOutcomeUnknown = errors.New("outcome unknown, the record may have been written")

	// ErrFlushInCallback is returned by Flush (and CommitTransaction,
	// AbortTransaction) when it is called from a callback (SendCallback's
	// function, on the completion goroutine), or from a hook, partitioner
	// or OnDataLoss running on another of the producer's goroutines (the
	// IO goroutine, a connection's reader or writer, the metadata
	// goroutine): it would wait for the goroutine it runs on.
	ErrFlushInCallback = errors.New("producer: Flush called from a callback")

	// ErrPurged fails the records Producer.Purge found not yet sent:
	// parked for their topic's metadata, or in a batch no request has
	// drained yet. It surfaces through each record's Future, callback or
	// channel, from the completion goroutine: before Purge returns, unless
	// Purge's ctx ends while Purge waits (Purge then returns ctx.Err(), and
	// these may complete after it). Such a record was definitely not
	// written (never with ErrOutcomeUnknown), and IsRetriable is false for
	// it: send it again if it is still wanted. In a transaction it makes
	// the transaction abortable, as any failed record does:
	// CommitTransaction then fails, AbortTransaction ends it.
	ErrPurged = errors.New("producer: purged")

	// ErrInvalidConfig is returned by New and by ConfigFromProperties when a
	// setting is invalid. The message names every bad field (or property)
	// and says why.
	ErrInvalidConfig = errors.New("producer: invalid config")

	// ErrClusterMismatch is a cause, never alone: a record that waited for
	// a broker of another cluster fails at DeliveryTimeout with
	// ErrDeliveryTimeout wrapping it; a transaction request whose
	// coordinator's address leads to another cluster is retried like one
	// whose coordinator cannot be reached (the error of its method wraps
	// it when the context ends).
	// The producer stays with the cluster of its first Metadata answer: a
	// broker whose Metadata answer names another cluster id is refused
	// (the message names both ids) and its answer never used, and, unless
	// Config.DisableMetadataClusterCheck, a connection whose ApiVersions
	// v5 handshake (KIP-1242, Kafka 4.4+) says the broker is not the node
	// of the cluster dialed is closed before any request (the message
	// names the node and cluster expected); a broker before Kafka 4.4,
	// which cannot check that, is asked for Metadata of no topic on each
	// new connection first, and refused the same way if it names another
	// cluster id. The transaction coordinator's connections are checked
	// so too (the node of FindCoordinator's answer), and so are the
	// connections of the producer's other requests (InitProducerId,
	// CreateTopics, FindCoordinator, telemetry). Nothing is written there;
	// records wait for the producer's cluster, which it looks for again
	// at the bootstrap brokers (MetadataRecoveryRebootstrap). It is the
	// same value as metadata.ErrClusterMismatch.
	ErrClusterMismatch = conn.ErrClusterMismatch
)

// KafkaError is an error code returned by a broker: an alias of kerr.Error,
// which carries the code, Kafka's name for it (for example
// NOT_LEADER_OR_FOLLOWER), whether the protocol marks it retriable, and the
// broker's message. A record's future completes with a *KafkaError
// (possibly wrapped by ErrDeliveryTimeout or ErrClosed) when the broker
// rejects its batch for good or metadata reports its topic unusable. Match
// a code with errors.Is and the values of package kerr, or read it with
// errors.As:
//
//	if errors.Is(err, kerr.TopicAuthorizationFailed) { ... grant WRITE ... }
//	var ke *producer.KafkaError
//	if errors.As(err, &ke) { log.Print(ke.Code, ke.Name) }
type KafkaError = kerr.Error

// IsRetriable reports whether sending the record again may succeed, for an
// error a record completed with (or Send returned). The producer already
// retries retriable causes itself until Config.DeliveryTimeout, so this is
// for a caller deciding whether to send a failed record again (with more
// time, or once the cluster is back). In order:
//   - false for nil, and for ErrClosed, ErrInvalidRecord,
//     ErrRecordTooLarge, ErrInvalidConfig, ErrFlushInCallback and
//     ErrAuthentication (fix the credentials first), whatever they wrap;
//   - when err wraps a *KafkaError, its code decides, as kerr.IsRetriable:
//     true for NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS, false for
//     TOPIC_AUTHORIZATION_FAILED or MESSAGE_TOO_LARGE, even under
//     ErrDeliveryTimeout;
//   - true for ErrDeliveryTimeout without a Kafka code (no leader, an
//     unreachable broker, a topic not in metadata yet) and for
//     ErrBufferExhausted (the buffer was full);
//   - false for anything else, such as a bare ctx.Err().
//
// A record whose error also wraps ErrOutcomeUnknown may have been written:
// sending it again may store it twice. kerr.IsRetriable answers the
// narrower question of whether a Kafka error code is retriable.
func IsRetriable(err error) bool {
	if err == nil {
		return false
	}
	for _, final := range notRetriable {
		if errors.Is(err, final) {
			return false
		}
	}
	if ke := (*KafkaError)(nil); errors.As(err, &ke) {
		return ke.Retriable
	}
	return errors.Is(err, ErrDeliveryTimeout) || errors.Is(err, ErrBufferExhausted)
}

// notRetriable are the sentinels after which sending the same record again
// cannot succeed without a change, whatever cause they wrap.
var notRetriable = []error{ErrAuthentication, ErrClosed, ErrInvalidRecord, ErrRecordTooLarge, ErrInvalidConfig, ErrFlushInCallback}

// maxTopicLen is Kafka's limit on topic name length (Topic.MAX_NAME_LENGTH).
const maxTopicLen = 249

// validateTopic checks Kafka's topic-name rules: 1 to 249 characters of
// [a-zA-Z0-9._-], and neither "." nor "..". The error wraps
// ErrInvalidRecord and names the topic and the rule it breaks. It does not
// allocate when the name is valid.
func validateTopic(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty topic name", ErrInvalidRecord)
	case len(name) > maxTopicLen:
		return fmt.Errorf("%w: topic name %.32q... is %d characters long, the limit is %d",
			ErrInvalidRecord, name, len(name), maxTopicLen)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name %q is not allowed", ErrInvalidRecord, name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !topicChars[c] {
			return fmt.Errorf("%w: topic name %q has illegal character %q at byte %d (allowed: a-z A-Z 0-9 . _ -)",
				ErrInvalidRecord, name, rune(c), i)
		}
	}
	return nil
}

// topicChars marks the bytes legal in a topic name: [a-zA-Z0-9._-].
var topicChars = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == '-'
	}
	return t
}()

// DataLossError describes acknowledged records that are no longer in their
// partition: the broker's log start offset moved past the last offset it
// acknowledged to this producer. See Config.OnDataLoss.
type DataLossError struct {
	Topic     string
	Partition int32
	// LastAcked is the highest offset acknowledged to this producer.
	LastAcked int64
	// LogStart is the partition's log start offset the broker reported.
	LogStart int64
}

func (e *DataLossError) Error() string {
	return fmt.Sprintf("producer: %s[%d]: acknowledged records up to offset %d are no longer in the log (log start offset %d)",
		e.Topic, e.Partition, e.LastAcked, e.LogStart)
}
