// Package kerr names the error codes of the Kafka protocol, so that callers
// match a broker's answer with errors.Is instead of comparing numbers.
//
// A broker rejects a request with a 16-bit error code (6 is
// NOT_LEADER_OR_FOLLOWER, 29 is TOPIC_AUTHORIZATION_FAILED). Every code is an
// *Error carrying the code, Kafka's name for it, whether the protocol marks it
// retriable, and a message. The producer completes a record with such an
// error, often wrapped (for example by producer.ErrDeliveryTimeout), when a
// broker rejects the record's batch for good or when metadata reports its
// topic unusable.
//
// # Matching
//
// errors.Is compares by code, through any number of wrappers, and also
// matches a copy made by WithMessage that carries the broker's own error
// message:
//
//	if errors.Is(err, kerr.TopicAuthorizationFailed) { ... grant WRITE on the topic ... }
//	if kerr.IsRetriable(err) { ... the same request may succeed later ... }
//
// Use errors.As to read the code, name and message:
//
//	var ke *kerr.Error
//	if errors.As(err, &ke) { log.Printf("broker code %d (%s)", ke.Code, ke.Name) }
//
// The variables name the codes a producer meets. ForCode returns the error
// of any code of the protocol, and its value is itself a target for
// errors.Is: errors.Is(err, kerr.ForCode(1)) matches OFFSET_OUT_OF_RANGE.
//
// # Categories (KIP-1050)
//
// Every code also carries the category kafka-clients 4.4 gives it by what
// its exception class extends, and a predicate per category says what a
// producer's user can do about it:
//
//	IsRetriable               RetriableException: the same request may succeed later
//	IsRefreshRetriable        RefreshRetriableException: after a metadata refresh (also retriable)
//	IsAbortable               TransactionAbortableException: abort the transaction, begin a new one
//	IsApplicationRecoverable  ApplicationRecoverableException: close the producer, create a new one
//	IsInvalidConfiguration    InvalidConfigurationException: fix the configuration or ACLs first
//	IsFatal                   none of these (and unknown codes): close the producer, report it
//
// testdata/errors-kafka-clients-4.4.0.tsv is the list kafka-clients 4.4.0
// prints of its codes and categories; the tests check every row against
// this package's table. The categories belong to the code: a transactional
// producer classifies its errors by the request as well, as Java's
// TransactionManager does, and producer.IsAbortable and producer.IsFatal
// are the answer for an error a producer returned.
//
// # Sharing
//
// The variables and the errors ForCode returns for known codes are shared
// values: ForCode does not allocate for them, so decoding a response costs
// nothing. Never modify their fields; use WithMessage to get a copy with
// another message.
//
// # Layering
//
// kerr imports nothing else of samsa but internal/safetext (a leaf), which
// bounds and escapes the messages WithMessage takes. The connection layer, metadata and
// producer decode error codes with it; producer.KafkaError is an alias of
// Error.
package kerr
