package kerr_test

import (
	"errors"
	"fmt"

	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/producer"
)

// A record's error names the broker's code through any wrapping: match it
// with errors.Is, and ask kerr.IsRetriable whether the request may succeed
// later.
func Example() {
	// Errors a record's future might complete with: the broker refused the
	// topic (code 29), and a delivery timeout whose last error was code 6.
	denied := fmt.Errorf("topic %q: %w", "orders", kerr.ForCode(29))
	timedOut := fmt.Errorf("%w: last error: %w", producer.ErrDeliveryTimeout, kerr.ForCode(6))

	for _, err := range []error{denied, timedOut} {
		fmt.Println(err)
		fmt.Println("  authorization:", errors.Is(err, kerr.TopicAuthorizationFailed),
			"not leader:", errors.Is(err, kerr.NotLeaderOrFollower),
			"retriable:", kerr.IsRetriable(err))
	}

	var ke *kerr.Error
	if errors.As(denied, &ke) {
		fmt.Println("code", ke.Code, "name", ke.Name)
	}
	// Output:
	// topic "orders": TOPIC_AUTHORIZATION_FAILED: not authorized to access the topic
	//   authorization: true not leader: false retriable: false
	// producer: delivery timeout: last error: NOT_LEADER_OR_FOLLOWER: the broker is not the leader of this partition
	//   authorization: false not leader: true retriable: true
	// code 29 name TOPIC_AUTHORIZATION_FAILED
}

// A code without a variable is still a target for errors.Is: ForCode's value
// compares by code.
func ExampleForCode() {
	err := fmt.Errorf("fetch: %w", kerr.ForCode(1).(*kerr.Error).WithMessage("offset 42 is gone"))
	fmt.Println(errors.Is(err, kerr.ForCode(1)), errors.Is(err, kerr.ForCode(3)))
	fmt.Println(kerr.ForCode(0) == nil)
	// Output:
	// true false
	// true
}

// The KIP-1050 categories say what to do about a code, as kafka-clients 4.4
// classifies it. For a transactional producer's own error, ask
// producer.IsAbortable and producer.IsFatal first: they know the request.
func ExampleIsApplicationRecoverable() {
	for _, code := range []int16{6, 29, 90, 120, 45} {
		err := fmt.Errorf("commit: %w", kerr.ForCode(code))
		switch {
		case kerr.IsRefreshRetriable(err):
			fmt.Println(code, "retry after a metadata refresh")
		case kerr.IsRetriable(err):
			fmt.Println(code, "retry")
		case kerr.IsAbortable(err):
			fmt.Println(code, "abort the transaction, begin a new one")
		case kerr.IsApplicationRecoverable(err):
			fmt.Println(code, "close the producer, create a new one")
		case kerr.IsInvalidConfiguration(err):
			fmt.Println(code, "fix the configuration or the ACLs")
		case kerr.IsFatal(err):
			fmt.Println(code, "fatal: close the producer, report it")
		}
	}
	// Output:
	// 6 retry after a metadata refresh
	// 29 fix the configuration or the ACLs
	// 90 close the producer, create a new one
	// 120 abort the transaction, begin a new one
	// 45 fatal: close the producer, report it
}
