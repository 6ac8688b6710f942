package samsatest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
)

// A cluster with one topic; a producer sends to it, and the test reads
// back what the brokers stored, without a consumer.
func Example() {
	c, err := samsatest.NewCluster(samsatest.Config{Topics: map[string]int32{"orders": 3}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: c.Addrs()})
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	for _, customer := range []string{"alice", "carol"} {
		p.Send(ctx, &producer.Record{
			Topic:   "orders",
			Key:     []byte(customer),
			Value:   []byte("paid"),
			Headers: []producer.Header{{Key: "source", Value: []byte("checkout")}},
		})
	}
	if err := p.Flush(ctx); err != nil {
		panic(err)
	}

	recs, err := c.Records("orders")
	if err != nil {
		panic(err)
	}
	for _, r := range recs {
		fmt.Printf("orders[%d]@%d %s=%s %s=%s\n", r.Partition, r.Offset, r.Key, r.Value, r.Headers[0].Key, r.Headers[0].Value)
	}
	// Output:
	// orders[0]@0 alice=paid source=checkout
	// orders[2]@0 carol=paid source=checkout
}

// The next two Produce requests fail with a retriable code: the producer
// retries, and the record is delivered once.
func ExampleCluster_FailProduce() {
	c, err := samsatest.NewCluster(samsatest.Config{Topics: map[string]int32{"events": 1}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.FailProduce(2, samsatest.NotLeaderOrFollower)

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: c.Addrs(), RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	_, err = p.Send(ctx, &producer.Record{Topic: "events", Value: []byte("e")}).Wait(ctx)
	hw, _ := c.HighWatermark("events", 0)
	fmt.Println("error:", err, "- retries:", p.Metrics().Producer.BatchRetryTotal, "- stored:", hw)
	// Output: error: <nil> - retries: 2 - stored: 1
}

// A write whose confirmation is lost: the broker appends the batch, then
// drops the connection before answering. The idempotent producer sends
// it again, and the broker recognises the duplicate: the record is stored
// once.
func ExampleCluster_Inject_lostAnswer() {
	c, err := samsatest.NewCluster(samsatest.Config{Topics: map[string]int32{"payments": 1}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Inject(samsatest.Fault{
		Requests:      []samsatest.API{samsatest.Produce},
		Times:         1,
		AfterHandling: true,
		Drop:          true,
	})

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: c.Addrs(), RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	_, err = p.Send(ctx, &producer.Record{Topic: "payments", Value: []byte("100 EUR")}).Wait(ctx)
	recs, _ := c.Records("payments")
	fmt.Println("error:", err, "- stored:", len(recs))
	// Output: error: <nil> - stored: 1
}

// A broker that stops answering Produce requests: nothing is acknowledged
// until the fault is removed.
func ExampleCluster_Inject_stall() {
	c, err := samsatest.NewCluster(samsatest.Config{Topics: map[string]int32{"logs": 1}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	release := c.Inject(samsatest.Fault{Requests: []samsatest.API{samsatest.Produce}, Stall: true})

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: c.Addrs()})
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	f := p.Send(ctx, &producer.Record{Topic: "logs", Value: []byte("line")})
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = f.Wait(short)
	cancel()
	fmt.Println("while stalled:", err)

	release()
	_, err = f.Wait(ctx)
	fmt.Println("released:", err)
	// Output:
	// while stalled: context deadline exceeded
	// released: <nil>
}

// A transactional producer commits one transaction and aborts another:
// Records holds both, and the markers; CommittedRecords what a
// read_committed consumer sees.
func ExampleCluster_CommittedRecords() {
	c, err := samsatest.NewCluster(samsatest.Config{Topics: map[string]int32{"payments": 1}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: c.Addrs(), TransactionalID: "payments-1"})
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	for _, v := range []string{"committed", "aborted"} {
		if err := p.BeginTransaction(); err != nil {
			panic(err)
		}
		// Wait for the record, so that the aborted one is stored too.
		if _, err := p.Send(ctx, &producer.Record{Topic: "payments", Value: []byte(v)}).Wait(ctx); err != nil {
			panic(err)
		}
		if v == "committed" {
			err = p.CommitTransaction(ctx)
		} else {
			err = p.AbortTransaction(ctx)
		}
		if err != nil {
			panic(err)
		}
	}

	all, err := c.Records("payments")
	if err != nil {
		panic(err)
	}
	for _, r := range all {
		if r.Control {
			fmt.Printf("@%d marker\n", r.Offset)
		} else {
			fmt.Printf("@%d %s\n", r.Offset, r.Value)
		}
	}
	committed, err := c.CommittedRecords("payments")
	if err != nil {
		panic(err)
	}
	for _, r := range committed {
		fmt.Printf("read_committed: %s\n", r.Value)
	}
	// Output:
	// @0 committed
	// @1 marker
	// @2 aborted
	// @3 marker
	// read_committed: committed
}
