// Command samsa is the peer benchmark's client for samsa (this
// repository's producer). The harness (cmd/peerbench) runs it; see package
// workload for its flags and output.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"

	"github.com/samsa-go/samsa/bench/internal/workload"
	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/producer"
)

func main() { workload.Main("samsa", &client{}) }

type client struct {
	spec    workload.Spec
	payload *workload.Payload
	p       *producer.Producer
	tls     *tls.Config
}

func (c *client) UseTLS(_ string, cfg *tls.Config) { c.tls = cfg }

func (c *client) Transactional() {}

func (c *client) Notes() string {
	return "idempotent (default); murmur2 for keys, uniform sticky for null keys (default); SendCallback with one callback for every record, one reused Record"
}

func (c *client) Open(ctx context.Context, spec workload.Spec, brokers []string, p *workload.Payload) error {
	codec, err := compression.ParseType(spec.Compression)
	if err != nil {
		return err
	}
	c.spec, c.payload = spec, p
	txnID := ""
	if spec.TxnRecords > 0 {
		txnID = fmt.Sprintf("bench-samsa-%d", os.Getpid())
	}
	// The shared knobs and BufferMemory; everything else samsa's default.
	// Config.Linger 0 is samsa's default (5ms).
	linger, _ := spec.LingerOr()
	c.p, err = producer.New(producer.Config{
		TransactionalID: txnID,
		Brokers:         brokers,
		Acks:            producer.AcksAll,
		Linger:          linger,
		BatchSize:       workload.BatchBytes,
		BufferMemory:    spec.BufferMemory,
		Compression:     codec,
		TLS:             c.tls,
	})
	if err != nil {
		return err
	}
	if txnID != "" {
		if err := c.p.BeginTransaction(); err != nil {
			return err
		}
	}
	_, err = c.p.Send(ctx, &producer.Record{Topic: spec.Topic(), Key: p.Key(0), Value: p.Value(0)}).Wait(ctx)
	if err != nil {
		return fmt.Errorf("warm-up record: %w", err)
	}
	if txnID != "" {
		if err := c.p.CommitTransaction(ctx); err != nil {
			return fmt.Errorf("warm-up transaction: %w", err)
		}
	}
	return nil
}

func (c *client) Produce(ctx context.Context, cnt *workload.Counter) {
	// One callback for every record.
	done := func(_ producer.RecordMetadata, err error) {
		if err != nil {
			cnt.Fail(1, err)
			return
		}
		cnt.Ack()
	}
	rec := producer.Record{Topic: c.spec.Topic()}
	n := c.spec.TxnRecords
	for i := range c.spec.Records {
		if n > 0 && i%n == 0 {
			if err := c.p.BeginTransaction(); err != nil {
				cnt.Fail(c.spec.Records-i, err)
				return
			}
		}
		rec.Key, rec.Value = c.payload.Key(i), c.payload.Value(i)
		c.p.SendCallback(ctx, &rec, done) // Send copies Key and Value
		if n > 0 && (i%n == n-1 || i == c.spec.Records-1) {
			if err := c.p.CommitTransaction(ctx); err != nil {
				// The records have their outcomes already; the
				// transaction's failure is one more.
				cnt.Fail(0, fmt.Errorf("commit: %w", err))
				return
			}
		}
	}
	if err := c.p.Flush(ctx); err != nil {
		cnt.Fail(c.spec.Records-int(cnt.Done()), fmt.Errorf("flush: %w", err))
	}
}

// ProduceRate is the fixed-rate mode: samsa's callback is told the
// record's partition, offset and millisecond timestamp, not which Send it
// answers, so each of the run's slots has one callback, made before the
// loop, and a record takes its slot's.
func (c *client) ProduceRate(ctx context.Context, r *workload.RateRun) {
	done := make([]func(producer.RecordMetadata, error), workload.Slots())
	for slot := range done {
		done[slot] = func(_ producer.RecordMetadata, err error) { r.CompleteSlot(slot, err) }
	}
	rec := producer.Record{Topic: c.spec.Topic()}
	r.LoopSlots(ctx, func(i, slot int) {
		rec.Key, rec.Value = c.payload.Key(i), c.payload.Value(i)
		c.p.SendCallback(ctx, &rec, done[slot]) // Send copies Key and Value
	})
	if err := c.p.Flush(ctx); err != nil {
		r.Fail(fmt.Errorf("flush: %w", err))
	}
}

func (c *client) Close() error { return c.p.Close(context.Background()) }
