// Command confluent is the peer benchmark's client for
// confluent-kafka-go (librdkafka through cgo, with the static librdkafka
// the module bundles). The harness (cmd/peerbench) runs it; see package
// workload for its flags and output. It needs cgo.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

func main() { workload.Main("confluent", &client{progress: make(chan struct{}, 1)}) }

type client struct {
	spec    workload.Spec
	payload *workload.Payload
	p       *kafka.Producer
	topic   string
	caFile  string // set: security.protocol=SSL

	cnt      atomic.Pointer[workload.Counter] // where drain counts reports
	progress chan struct{}                    // 1-buffered: a delivery report arrived
	drained  chan struct{}                    // closed when drain returns
}

func (c *client) Notes() string {
	return "not idempotent (librdkafka's default enable.idempotence=false); consistent_random (CRC32) for keys, random for null keys (default); queue.buffering.max.messages 100 000 and batch.num.messages 10 000 (defaults); Produce with no delivery channel, every report on the one Events() channel, go.delivery.report.fields=none, queue-full answered by waiting for a delivery report"
}

func (c *client) UseTLS(caFile string, _ *tls.Config) { c.caFile = caFile }

func (c *client) Open(ctx context.Context, spec workload.Spec, brokers []string, p *workload.Payload) error {
	c.spec, c.payload, c.topic = spec, p, spec.Topic()
	servers := ""
	for i, b := range brokers {
		if i > 0 {
			servers += ","
		}
		servers += b
	}
	var err error
	// The shared knobs and the buffer bound; everything else
	// librdkafka's default (queue.buffering.max.messages,
	// batch.num.messages, message.max.bytes among them).
	cm := kafka.ConfigMap{
		"bootstrap.servers":          servers,
		"acks":                       "all",
		"linger.ms":                  int(workload.Linger / time.Millisecond),
		"batch.size":                 workload.BatchBytes,
		"compression.type":           spec.Compression,
		"queue.buffering.max.kbytes": int(spec.BufferMemory >> 10),
		"go.delivery.report.fields":  "none",
	}
	if c.caFile != "" {
		// librdkafka checks the host name by default
		// (ssl.endpoint.identification.algorithm=https).
		cm["security.protocol"], cm["ssl.ca.location"] = "SSL", c.caFile
	}
	c.p, err = kafka.NewProducer(&cm)
	if err != nil {
		return err
	}
	c.drained = make(chan struct{})
	var warm workload.Counter
	c.cnt.Store(&warm)
	go c.drain()
	if err := c.produce(ctx, 0); err != nil {
		return fmt.Errorf("warm-up record: %w", err)
	}
	if err := c.wait(ctx, &warm, 1); err != nil {
		return fmt.Errorf("warm-up record: %w", err)
	}
	if err := warm.Err(); err != nil {
		return fmt.Errorf("warm-up record: %w", err)
	}
	return nil
}

// drain counts delivery reports until Close closes the Events channel.
func (c *client) drain() {
	defer close(c.drained)
	for ev := range c.p.Events() {
		m, ok := ev.(*kafka.Message)
		if !ok {
			continue // kafka.Error events are librdkafka's logs; failures come per message
		}
		if m.TopicPartition.Error != nil {
			c.cnt.Load().Fail(1, m.TopicPartition.Error)
		} else {
			c.cnt.Load().Ack()
		}
		select {
		case c.progress <- struct{}{}:
		default:
		}
	}
}

// produce hands record i to librdkafka, waiting for a delivery report
// whenever its queue is full.
func (c *client) produce(ctx context.Context, i int) error {
	msg := kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &c.topic, Partition: kafka.PartitionAny},
		Key:            c.payload.Key(i),
		Value:          c.payload.Value(i),
	}
	for {
		err := c.p.Produce(&msg, nil) // copies Key and Value
		var kerr kafka.Error
		if err == nil || !errors.As(err, &kerr) || kerr.Code() != kafka.ErrQueueFull {
			return err
		}
		select {
		case <-c.progress:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// wait blocks until cnt has counted n records or ctx ends.
func (c *client) wait(ctx context.Context, cnt *workload.Counter, n int64) error {
	for cnt.Done() < n {
		select {
		case <-c.progress:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (c *client) Produce(ctx context.Context, cnt *workload.Counter) {
	c.cnt.Store(cnt) // the warm-up record's report came before
	for i := range c.spec.Records {
		if err := c.produce(ctx, i); err != nil {
			cnt.Fail(c.spec.Records-i, err)
			break
		}
	}
	if err := c.wait(ctx, cnt, int64(c.spec.Records)); err != nil {
		cnt.Fail(c.spec.Records-int(cnt.Done()), err)
	}
}

func (c *client) Close() error {
	c.p.Close()
	<-c.drained
	return nil
}
