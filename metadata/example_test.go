package metadata_test

import (
	"fmt"
	"time"

	"github.com/samsa-go/samsa/metadata"
	"github.com/samsa-go/samsa/samsatest"
)

func Example() {
	cl, err := samsatest.NewCluster(samsatest.Config{Brokers: 3, Topics: map[string]int32{"orders": 6}})
	if err != nil {
		panic(err)
	}
	defer cl.Close()

	md, err := metadata.New(metadata.Config{Bootstrap: cl.Addrs()})
	if err != nil {
		panic(err)
	}
	defer md.Close()

	md.Want("orders") // non-blocking: the refresh goroutine fetches it
	timeout := time.After(10 * time.Second)
	for !md.Snapshot().Topics["orders"].Usable() {
		select {
		case <-md.Updates():
		case <-timeout:
			panic("no metadata")
		}
	}
	s := md.Snapshot()
	leader, _ := s.Leader("orders", 0)
	fmt.Println(len(s.Brokers), "brokers,", len(s.Topics["orders"].Partitions), "partitions, leader known:", leader.Port != 0)
	// Output: 3 brokers, 6 partitions, leader known: true
}
