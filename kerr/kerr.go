package kerr

import (
	"errors"
	"strconv"

	"github.com/samsa-go/samsa/internal/safetext"
)

// Error is a Kafka protocol error code with its name, retriability and a
// message.
//
// Errors compare by Code: errors.Is(err, kerr.NotLeaderOrFollower) is true for
// any *Error with code 6 in err's chain, including copies made by WithMessage.
// The values this package holds are shared; do not modify their fields.
type Error struct {
	// Code is the wire error code (for example 6).
	Code int16
	// Name is Kafka's name for the code (for example NOT_LEADER_OR_FOLLOWER).
	Name string
	// Retriable is true when the protocol documentation marks the code
	// retriable: the same request may succeed later.
	Retriable bool
	// Message describes the error; a broker's ErrorMessage replaces the
	// default through WithMessage, bounded and escaped.
	Message string
}

// Error returns "NAME: message", or "NAME" when Message is empty.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Name
	}
	return e.Name + ": " + e.Message
}

// Is reports whether target is an *Error with the same code. errors.Is calls
// it, so errors.Is(err, kerr.X) matches by code, not by pointer.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// WithMessage returns a copy of e that carries msg (typically the ErrorMessage
// a broker sent with the code). An empty msg returns e itself. msg is
// bounded and escaped first, as text from a broker must be before it
// reaches an error or a log line: cut to 256 bytes (a cut message ends with
// "… (N bytes)", N being its length), newlines, NUL and other control
// characters and invalid UTF-8 escaped as strconv.Quote escapes them
// (backslashes stay as they are), so that a broker can neither grow every
// error that wraps it nor forge log lines.
func (e *Error) WithMessage(msg string) *Error {
	msg = safetext.Bound(msg)
	if msg == "" || msg == e.Message {
		return e
	}
	c := *e
	c.Message = msg
	return &c
}

// ForCode returns the error for a wire error code: nil for 0, the shared
// *Error of a known code, and for a code this package does not know a new
// *Error named UNKNOWN_ERROR_CODE_<code> that is not retriable. It does not
// allocate for known codes.
func ForCode(code int16) error {
	if code == 0 {
		return nil
	}
	if e := lookup(code); e != nil {
		return e
	}
	return &Error{Code: code, Name: "UNKNOWN_ERROR_CODE_" + strconv.Itoa(int(code)), Message: "the broker returned an error code this client does not know"}
}

// IsRetriable reports whether err is, or wraps, an *Error whose code the
// protocol marks retriable, which is the codes kafka-clients 4.4 maps to a
// RetriableException (KIP-1050's Retriable and RefreshRetriable
// categories): the same request may succeed later (a leader
// moved, an election is running, too few in-sync replicas). It looks at the
// first *Error in err's chain and returns false for nil and for errors that
// carry no Kafka error code, such as a broken connection; see
// producer.IsRetriable for the producer's wider answer.
func IsRetriable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retriable
}

// category is a set of the KIP-1050 categories of a code: what the exception
// class kafka-clients 4.4 maps the code to extends.
type category uint8

const (
	catRetriable              category = 1 << iota // RetriableException
	catRefreshRetriable                            // RefreshRetriableException (also a RetriableException)
	catAbortable                                   // TransactionAbortableException
	catApplicationRecoverable                      // ApplicationRecoverableException
	catInvalidConfiguration                        // InvalidConfigurationException
	catFatal                                       // none of the above
)

// entry is one code of the table with its categories.
type entry struct {
	err *Error
	cat category
}

// byCode is indexed by code+1 so that UNKNOWN_SERVER_ERROR (-1) is at 0.
var byCode = func() []entry {
	max := int16(0)
	for _, e := range table {
		if e.err.Code > max {
			max = e.err.Code
		}
	}
	out := make([]entry, int(max)+2)
	for _, e := range table {
		out[int(e.err.Code)+1] = e
	}
	return out
}()

func lookup(code int16) *Error {
	i := int(code) + 1
	if i < 0 || i >= len(byCode) {
		return nil
	}
	return byCode[i].err
}

// categoryOf returns the categories of the first *Error in err's chain, and
// false when there is none. A code this package does not know is fatal, as
// kafka-clients maps it to UNKNOWN_SERVER_ERROR.
func categoryOf(err error) (category, bool) {
	e := firstError(err)
	if e == nil {
		return 0, false
	}
	i := int(e.Code) + 1
	if i < 0 || i >= len(byCode) || byCode[i].err == nil {
		return catFatal, true
	}
	return byCode[i].cat, true
}

// firstError returns the first *Error in err's chain, as errors.As finds
// it, without allocating on the common chains of single wrappers.
func firstError(err error) *Error {
	for err != nil {
		if e, ok := err.(*Error); ok {
			return e
		}
		_, hasAs := err.(interface{ As(any) bool })
		u, single := err.(interface{ Unwrap() error })
		if !single || hasAs {
			// A multi-error or an As method: errors.As walks it.
			var e *Error
			if errors.As(err, &e) {
				return e
			}
			return nil
		}
		err = u.Unwrap()
	}
	return nil
}

func hasCategory(err error, c category) bool {
	got, ok := categoryOf(err)
	return ok && got&c != 0
}

// IsRefreshRetriable reports whether err is, or wraps, an *Error whose code
// kafka-clients 4.4 maps to a RefreshRetriableException (KIP-1050): the
// request may succeed after the client refreshes its metadata, because a
// leader or coordinator moved or a topic is not yet known
// (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_COORDINATOR,
// ...). Every such code is also retriable (IsRetriable). The producer
// refreshes metadata and retries these itself until delivery.timeout.ms; a
// user who sees one has seen it outlive that timeout. False for nil and for
// errors that carry no Kafka error code.
func IsRefreshRetriable(err error) bool { return hasCategory(err, catRefreshRetriable) }

// IsAbortable reports whether err is, or wraps, an *Error whose code
// kafka-clients 4.4 maps to a TransactionAbortableException (KIP-1050;
// TRANSACTION_ABORTABLE): the current transaction failed, the producer is
// still usable, and the user should abort the transaction and begin a new
// one. False for nil and for errors that carry no Kafka error code.
//
// This is the code's own category. The producer classifies a transactional
// error by the request that met it as well (Java's TransactionManager does
// the same: UNKNOWN_PRODUCER_ID on AddPartitionsToTxn aborts the
// transaction when the coordinator can bump the epoch, while the code alone
// is fatal): for an error a producer returned, producer.IsAbortable and
// producer.IsFatal are the answer.
func IsAbortable(err error) bool { return hasCategory(err, catAbortable) }

// IsApplicationRecoverable reports whether err is, or wraps, an *Error whose
// code kafka-clients 4.4 maps to an ApplicationRecoverableException
// (KIP-1050; PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
// INVALID_PRODUCER_ID_MAPPING, and the consumer group's fencing codes): this
// producer cannot go on, but the application can recover by closing it and
// creating a new one (for a transactional producer, with the same
// transactional.id, which fences the old one and aborts its open
// transaction). False for nil and for errors that carry no Kafka error code.
// For an error a producer returned, producer.IsFatal says whether that
// producer must be closed.
func IsApplicationRecoverable(err error) bool { return hasCategory(err, catApplicationRecoverable) }

// IsInvalidConfiguration reports whether err is, or wraps, an *Error whose
// code kafka-clients 4.4 maps to an InvalidConfigurationException (KIP-1050;
// authorization failures, INVALID_REQUIRED_ACKS, INVALID_TOPIC_EXCEPTION,
// RECORD_LIST_TOO_LARGE, UNSUPPORTED_VERSION, SASL failures, ...): retrying
// will not help until the configuration, the ACLs or the topic is changed;
// fix it and create a new producer. False for nil and for errors that carry
// no Kafka error code.
func IsInvalidConfiguration(err error) bool { return hasCategory(err, catInvalidConfiguration) }

// IsFatal reports whether err is, or wraps, an *Error whose code kafka-clients
// 4.4 maps to an exception in none of KIP-1050's other categories (not
// retriable, abortable, application-recoverable or an invalid
// configuration), and for a code this package does not know (Java maps it
// to UNKNOWN_SERVER_ERROR): no retry, abort or new producer is known to
// help; close the producer and report the error. False for nil and for
// errors that carry no Kafka error code.
//
// This is the code's own category; for an error a producer returned,
// producer.IsFatal (which classifies by the request as Java's
// TransactionManager does) is the answer.
func IsFatal(err error) bool { return hasCategory(err, catFatal) }

// The codes a producer meets, by Kafka's name for them (the message of each
// says what it means). Every other code of the protocol is returned by
// ForCode, and the value it returns can be used with errors.Is the same way.
var (
	UnknownServerError                 = &Error{-1, "UNKNOWN_SERVER_ERROR", false, "the broker hit an unexpected error"}
	CorruptMessage                     = &Error{2, "CORRUPT_MESSAGE", true, "the batch failed its CRC check, exceeds the valid size or is otherwise corrupt"}
	UnknownTopicOrPartition            = &Error{3, "UNKNOWN_TOPIC_OR_PARTITION", true, "the broker does not host this topic-partition"}
	LeaderNotAvailable                 = &Error{5, "LEADER_NOT_AVAILABLE", true, "the partition has no leader (an election is in progress)"}
	NotLeaderOrFollower                = &Error{6, "NOT_LEADER_OR_FOLLOWER", true, "the broker is not the leader of this partition"}
	RequestTimedOut                    = &Error{7, "REQUEST_TIMED_OUT", true, "the request timed out on the broker"}
	BrokerNotAvailable                 = &Error{8, "BROKER_NOT_AVAILABLE", false, "the broker is not available"}
	ReplicaNotAvailable                = &Error{9, "REPLICA_NOT_AVAILABLE", true, "the replica is not available for this partition"}
	MessageTooLarge                    = &Error{10, "MESSAGE_TOO_LARGE", false, "the batch is larger than the broker accepts"}
	NetworkException                   = &Error{13, "NETWORK_EXCEPTION", true, "the broker disconnected before responding"}
	InvalidTopicException              = &Error{17, "INVALID_TOPIC_EXCEPTION", false, "the topic name is invalid or the topic is internal"}
	RecordListTooLarge                 = &Error{18, "RECORD_LIST_TOO_LARGE", false, "the batch is larger than the topic's segment size"}
	NotEnoughReplicas                  = &Error{19, "NOT_ENOUGH_REPLICAS", true, "fewer in-sync replicas than min.insync.replicas"}
	NotEnoughReplicasAfterAppend       = &Error{20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true, "the batch was written, but to fewer in-sync replicas than required"}
	InvalidRequiredAcks                = &Error{21, "INVALID_REQUIRED_ACKS", false, "the acks value is invalid"}
	TopicAuthorizationFailed           = &Error{29, "TOPIC_AUTHORIZATION_FAILED", false, "not authorized to access the topic"}
	ClusterAuthorizationFailed         = &Error{31, "CLUSTER_AUTHORIZATION_FAILED", false, "not authorized for the cluster operation"}
	InvalidTimestamp                   = &Error{32, "INVALID_TIMESTAMP", false, "the record timestamp is outside the accepted range"}
	UnsupportedVersion                 = &Error{35, "UNSUPPORTED_VERSION", false, "the broker does not support this API version"}
	TopicAlreadyExists                 = &Error{36, "TOPIC_ALREADY_EXISTS", false, "a topic with this name already exists"}
	InvalidPartitions                  = &Error{37, "INVALID_PARTITIONS", false, "the number of partitions is invalid"}
	InvalidReplicationFactor           = &Error{38, "INVALID_REPLICATION_FACTOR", false, "the replication factor is invalid"}
	InvalidConfig                      = &Error{40, "INVALID_CONFIG", false, "the configuration is invalid"}
	NotController                      = &Error{41, "NOT_CONTROLLER", true, "the broker is not the controller"}
	InvalidRequest                     = &Error{42, "INVALID_REQUEST", false, "the broker could not understand the request"}
	PolicyViolation                    = &Error{44, "POLICY_VIOLATION", false, "the request violates a broker policy"}
	OutOfOrderSequenceNumber           = &Error{45, "OUT_OF_ORDER_SEQUENCE_NUMBER", false, "the broker received an out of order sequence number"}
	DuplicateSequenceNumber            = &Error{46, "DUPLICATE_SEQUENCE_NUMBER", false, "the broker received a duplicate sequence number"}
	InvalidProducerEpoch               = &Error{47, "INVALID_PRODUCER_EPOCH", false, "the producer epoch is older than the broker's"}
	ConcurrentTransactions             = &Error{51, "CONCURRENT_TRANSACTIONS", true, "another operation on the same transaction is ongoing"}
	TransactionalIDAuthorizationFailed = &Error{53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", false, "not authorized for the transactional id"}
	KafkaStorageError                  = &Error{56, "KAFKA_STORAGE_ERROR", true, "the broker hit a disk error"}
	SASLAuthenticationFailed           = &Error{58, "SASL_AUTHENTICATION_FAILED", false, "SASL authentication failed"}
	UnknownProducerID                  = &Error{59, "UNKNOWN_PRODUCER_ID", false, "the broker has no state for this producer id"}
	ListenerNotFound                   = &Error{72, "LISTENER_NOT_FOUND", true, "the leader has no listener matching the one used for metadata"}
	FencedLeaderEpoch                  = &Error{74, "FENCED_LEADER_EPOCH", true, "the leader epoch in the request is older than the broker's"}
	UnknownLeaderEpoch                 = &Error{75, "UNKNOWN_LEADER_EPOCH", true, "the leader epoch in the request is newer than the broker's"}
	UnsupportedCompressionType         = &Error{76, "UNSUPPORTED_COMPRESSION_TYPE", false, "the broker does not support the compression type"}
	InvalidRecord                      = &Error{87, "INVALID_RECORD", false, "a record failed validation on the broker"}
	ThrottlingQuotaExceeded            = &Error{89, "THROTTLING_QUOTA_EXCEEDED", true, "the controller mutation quota is exceeded"}
	ProducerFenced                     = &Error{90, "PRODUCER_FENCED", false, "a newer producer with the same transactional id fenced this one"}
	UnknownTopicID                     = &Error{100, "UNKNOWN_TOPIC_ID", true, "the broker does not host this topic id"}
	InconsistentTopicID                = &Error{103, "INCONSISTENT_TOPIC_ID", true, "the topic id does not match the log's"}
	TransactionAbortable               = &Error{120, "TRANSACTION_ABORTABLE", false, "the transaction failed; abort it to continue"}
	RebootstrapRequired                = &Error{129, "REBOOTSTRAP_REQUIRED", false, "client metadata is stale; rebootstrap"}
)
