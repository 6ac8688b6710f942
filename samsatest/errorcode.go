package samsatest

import (
	"errors"
	"strconv"

	"github.com/samsa-go/samsa/kerr"
)

// ErrorCode is a Kafka protocol error code, as a broker sends it (for
// example 6 for NOT_LEADER_OR_FOLLOWER). Any int16 code may be injected;
// the constants name the ones tests of a producer use most. A record the
// broker failed this way carries the code as a *kerr.Error: match it with
// errors.Is(err, kerr.NotLeaderOrFollower).
type ErrorCode int16

// Kafka error codes (https://kafka.apache.org/protocol#protocol_error_codes).
// A producer retries the retriable ones until its delivery timeout, and
// fails records at once with the others.
const (
	// CorruptMessage (2, retriable): the batch failed its CRC check.
	CorruptMessage ErrorCode = 2
	// UnknownTopicOrPartition (3, retriable): the broker does not host it.
	UnknownTopicOrPartition ErrorCode = 3
	// LeaderNotAvailable (5, retriable): a leader election is running.
	LeaderNotAvailable ErrorCode = 5
	// NotLeaderOrFollower (6, retriable): the broker no longer leads the
	// partition.
	NotLeaderOrFollower ErrorCode = 6
	// RequestTimedOut (7, retriable): the request timed out on the
	// broker; after handling, the write may have happened.
	RequestTimedOut ErrorCode = 7
	// MessageTooLarge (10): the batch exceeds the topic's
	// max.message.bytes.
	MessageTooLarge ErrorCode = 10
	// NotEnoughReplicas (19, retriable): too few in-sync replicas; nothing
	// was written.
	NotEnoughReplicas ErrorCode = 19
	// NotEnoughReplicasAfterAppend (20, retriable): written to the
	// leader, but too few in-sync replicas confirmed it.
	NotEnoughReplicasAfterAppend ErrorCode = 20
	// TopicAuthorizationFailed (29): the client may not write the topic.
	TopicAuthorizationFailed ErrorCode = 29
	// InvalidRecord (87): the broker rejected a record of the batch.
	InvalidRecord ErrorCode = 87
	// ThrottlingQuotaExceeded (89, retriable): over the controller
	// mutation quota (KIP-599).
	ThrottlingQuotaExceeded ErrorCode = 89
)

// String returns Kafka's name for the code, such as
// "NOT_LEADER_OR_FOLLOWER", "NONE" for 0, or "UNKNOWN_ERROR_CODE_<n>".
func (e ErrorCode) String() string {
	if e == 0 {
		return "NONE"
	}
	var ke *kerr.Error
	if errors.As(kerr.ForCode(int16(e)), &ke) {
		return ke.Name
	}
	return "ErrorCode(" + strconv.Itoa(int(e)) + ")"
}

// Retriable reports whether Kafka marks the code retriable: a client may
// send the same request again and succeed.
func (e ErrorCode) Retriable() bool { return kerr.IsRetriable(kerr.ForCode(int16(e))) }
