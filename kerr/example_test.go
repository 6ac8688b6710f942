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
