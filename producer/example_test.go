package producer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
)

// startCluster starts an in-process cluster with one topic, standing in for
// a real Kafka cluster in these examples (package samsatest, which your own
// tests can use too).
func startCluster(topic string, partitions int32) *samsatest.Cluster {
	c, err := samsatest.NewCluster(samsatest.Config{Topics: map[string]int32{topic: partitions}})
	if err != nil {
		panic(err)
	}
	return c
}

// Send returns a Future at once; Wait blocks until the broker has the
// record. A keyed record goes to the partition Java's murmur2 gives its key.
func Example() {
	cluster := startCluster("greetings", 6)
	defer cluster.Close()

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: cluster.Addrs()})
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	f := p.Send(ctx, &producer.Record{Topic: "greetings", Key: []byte("alice"), Value: []byte("hello")})
	md, err := f.Wait(ctx)
	if err != nil {
		fmt.Println("not delivered:", err)
		return
	}
	fmt.Printf("%s[%d] offset %d\n", md.Topic, md.Partition, md.Offset)
	fmt.Println("murmur2 partition:", producer.KeyPartition([]byte("alice"), 6))
	// Output:
	// greetings[3] offset 0
	// murmur2 partition: 3
}

// SendCallback is the allocation-free way to send: the callback runs on the
// producer's completion goroutine, one at a time, and Flush returns only
// after the callbacks of every record sent before it have returned.
func ExampleProducer_SendCallback() {
	cluster := startCluster("events", 3)
	defer cluster.Close()

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: cluster.Addrs()})
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	var delivered, failed atomic.Int64
	done := func(md producer.RecordMetadata, err error) {
		if err != nil {
			failed.Add(1)
			return
		}
		delivered.Add(1)
	}
	rec := &producer.Record{Topic: "events"}
	for i := range 1000 {
		rec.Value = fmt.Appendf(rec.Value[:0], "event %d", i) // Send copies it
		p.SendCallback(ctx, rec, done)
	}
	if err := p.Flush(ctx); err != nil {
		panic(err)
	}
	fmt.Println(delivered.Load(), "delivered,", failed.Load(), "failed")
	// Output: 1000 delivered, 0 failed
}

// Order is the value of a typed producer's records.
type Order struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

// A TypedProducer serializes keys and values in Send: here string keys and
// JSON values.
func ExampleNewTyped() {
	cluster := startCluster("orders", 1)
	defer cluster.Close()

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: cluster.Addrs()})
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	orders := producer.NewTyped(p, producer.StringSerializer{}, producer.JSONSerializer[Order]{})
	if _, err := orders.Send(ctx, "orders", "o-1", Order{ID: "o-1", Amount: 9.5}).Wait(ctx); err != nil {
		panic(err)
	}

	stored, _ := cluster.Records("orders") // what a consumer would read
	fmt.Printf("%s: %s\n", stored[0].Key, stored[0].Value)
	// Output: o-1: {"id":"o-1","amount":9.5}
}

// Flush waits for everything sent so far without stopping the producer;
// Close flushes, then stops it. Sending after Close fails with ErrClosed.
func ExampleProducer_Close() {
	cluster := startCluster("logs", 2)
	defer cluster.Close()

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: cluster.Addrs(), Linger: time.Second})
	if err != nil {
		panic(err)
	}

	first := p.Send(ctx, &producer.Record{Topic: "logs", Value: []byte("one")})
	// Flush sends at once, without waiting for the one-second Linger.
	if err := p.Flush(ctx); err != nil {
		panic(err)
	}
	_, err = first.Wait(ctx)
	fmt.Println("after Flush:", err)

	last := p.Send(ctx, &producer.Record{Topic: "logs", Value: []byte("two")})
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second) // bounds the final flush
	defer cancel()
	if err := p.Close(closeCtx); err != nil {
		panic(err)
	}
	_, err = last.Wait(ctx)
	fmt.Println("sent before Close:", err)

	_, err = p.Send(ctx, &producer.Record{Topic: "logs", Value: []byte("late")}).Wait(ctx)
	fmt.Println("sent after Close:", errors.Is(err, producer.ErrClosed))
	// Output:
	// after Flush: <nil>
	// sent before Close: <nil>
	// sent after Close: true
}

// ConfigFromProperties brings a Java (or librdkafka) configuration over
// unchanged; New applies the defaults and checks the result.
func ExampleConfigFromProperties_java() {
	cfg, err := producer.ConfigFromProperties(map[string]string{
		"bootstrap.servers": "kafka1:9092,kafka2:9092",
		"acks":              "1",
		"linger.ms":         "20",
		"compression.type":  "zstd",
		"batch.size":        "65536",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Brokers, cfg.Acks, cfg.Linger, cfg.Compression, cfg.BatchSize)
	// acks=1 alone turns idempotence off, as in the Java client.
	fmt.Println("idempotent:", !cfg.DisableIdempotence)

	_, err = producer.ConfigFromProperties(map[string]string{"linger.ms": "soon", "lingr.ms": "5"})
	fmt.Println(errors.Is(err, producer.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// [kafka1:9092 kafka2:9092] leader 20ms zstd 65536
	// idempotent: false
	// true
	// producer: invalid config: unknown properties: "lingr.ms" (did you mean linger.ms?); linger.ms: "soon" is not a number of milliseconds
}

// A record with ExplicitPartition goes to its Partition whatever the
// partitioner, like a Java ProducerRecord with a partition; without it a
// non-zero Partition fails rather than being ignored (ManualPartitioner
// aside), and the zero Partition leaves the choice to Config.Partitioner.
func ExampleRecord_explicitPartition() {
	cluster := startCluster("audit", 4)
	defer cluster.Close()

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: cluster.Addrs()})
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	md, err := p.Send(ctx, &producer.Record{Topic: "audit", Partition: 2, ExplicitPartition: true, Value: []byte("login")}).Wait(ctx)
	fmt.Println(md.Partition, err)
	_, err = p.Send(ctx, &producer.Record{Topic: "audit", Partition: 7, ExplicitPartition: true, Value: []byte("lost?")}).Wait(ctx)
	fmt.Println(err)
	_, err = p.Send(ctx, &producer.Record{Topic: "audit", Partition: 2, Value: []byte("ignored?")}).Wait(ctx)
	fmt.Println(errors.Is(err, producer.ErrInvalidRecord))
	// Output:
	// 2 <nil>
	// producer: invalid record: partition 7 of topic "audit" is out of range: the topic has 4 partitions
	// true
}

// ParseAcks reads Java's acks settings with their Java meaning.
func ExampleParseAcks() {
	for _, s := range []string{"all", "-1", "1", "0"} {
		a, err := producer.ParseAcks(s)
		fmt.Println(s, "->", a, a.Wire(), err)
	}
	// Output:
	// all -> all -1 <nil>
	// -1 -> all -1 <nil>
	// 1 -> leader 1 <nil>
	// 0 -> none 0 <nil>
}

// Ping checks at start-up, or in a readiness probe, that the cluster can
// be reached with the producer's settings, and says at once why not.
func ExampleProducer_Ping() {
	cluster, err := samsatest.NewCluster(samsatest.Config{Brokers: 1})
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	addr := cluster.Addrs()[0]

	p, err := producer.New(producer.Config{Brokers: []string{addr}})
	if err != nil {
		panic(err)
	}
	defer p.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println("ping:", p.Ping(ctx))

	_ = cluster.StopBroker(0)
	err = p.Ping(ctx)
	fmt.Println("after the broker stopped:", strings.TrimPrefix(err.Error(), "producer: ping: cannot connect to broker "+addr+": "))
	// Output:
	// ping: <nil>
	// after the broker stopped: connection refused (nothing is listening there)
}
