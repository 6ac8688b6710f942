package testbroker_test

import (
	"fmt"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// A cluster for a test: three brokers on random loopback ports, a topic,
// and a fault: the next two Produce requests to the partition's leader get
// NOT_LEADER_OR_FOLLOWER.
func Example() {
	c, err := testbroker.New(testbroker.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if err := c.CreateTopic("orders", 6); err != nil {
		panic(err)
	}
	leader, _, _ := c.Leader("orders", 0)
	remove := c.Intercept(testbroker.Interceptor{
		Keys:      []int16{0}, // Produce
		Brokers:   []int32{leader},
		Times:     2,
		ErrorCode: 6, // NOT_LEADER_OR_FOLLOWER
	})
	defer remove()

	// ... point a producer at c.Addrs() and send ...

	hw, _ := c.HighWatermark("orders", 0)
	fmt.Println(len(c.Addrs()), "brokers; high watermark", hw)
	// Output: 3 brokers; high watermark 0
}

// Stalling Produce entirely, as a broker that never answers, then letting
// it go.
func ExampleInterceptor_stall() {
	c, err := testbroker.New(testbroker.Config{Brokers: 1})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	release := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true})

	// ... a producer sends; nothing is acknowledged, its buffer fills ...

	release() // the stalled requests are handled and answered now
	fmt.Println(c.Stats().Requests[0], "produce requests handled")
	// Output: 0 produce requests handled
}
