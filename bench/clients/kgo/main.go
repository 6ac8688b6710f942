// Command kgo is the peer benchmark's client for franz-go (pkg/kgo). The
// harness (cmd/peerbench) runs it; see package workload for its flags and
// output.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

func main() { workload.Main("kgo", &client{}) }

type client struct {
	spec    workload.Spec
	payload *workload.Payload
	cl      *kgo.Client
	tls     *tls.Config
}

func (c *client) UseTLS(_ string, cfg *tls.Config) { c.tls = cfg }

func (c *client) Transactional() {}

func (c *client) Notes() string {
	return "idempotent (default); murmur2 for keys, uniform bytes sticky for null keys (default); MaxBufferedRecords 50 000 (default); Produce with one promise for every record, one *kgo.Record per record"
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown compression %q", name)
}

func (c *client) Open(ctx context.Context, spec workload.Spec, brokers []string, p *workload.Payload) error {
	cc, err := codec(spec.Compression)
	if err != nil {
		return err
	}
	c.spec, c.payload = spec, p
	// The shared knobs and MaxBufferedBytes; everything else kgo's
	// default (MaxBufferedRecords 50 000 among them).
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(spec.Topic()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(workload.BatchBytes),
		kgo.ProducerBatchCompression(cc),
		kgo.MaxBufferedBytes(int(spec.BufferMemory)),
	}
	if linger, ok := spec.LingerOr(); ok { // otherwise kgo's default, 10ms
		opts = append(opts, kgo.ProducerLinger(linger))
	}
	if c.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(c.tls)) // ServerName: the broker's host
	}
	txn := spec.TxnRecords > 0
	if txn {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("bench-kgo-%d", os.Getpid())))
	}
	c.cl, err = kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	if txn {
		if err := c.cl.BeginTransaction(); err != nil {
			return err
		}
	}
	if err := c.cl.ProduceSync(ctx, &kgo.Record{Key: p.Key(0), Value: p.Value(0)}).FirstErr(); err != nil {
		return fmt.Errorf("warm-up record: %w", err)
	}
	if txn {
		if err := c.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("warm-up transaction: %w", err)
		}
	}
	return nil
}

func (c *client) Produce(ctx context.Context, cnt *workload.Counter) {
	// One promise for every record.
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			cnt.Fail(1, err)
			return
		}
		cnt.Ack()
	}
	n := c.spec.TxnRecords
	for i := range c.spec.Records {
		if n > 0 && i%n == 0 {
			if err := c.cl.BeginTransaction(); err != nil {
				cnt.Fail(c.spec.Records-i, err)
				return
			}
		}
		// kgo keeps the record until its promise runs, so each needs its own.
		c.cl.Produce(ctx, &kgo.Record{Key: c.payload.Key(i), Value: c.payload.Value(i)}, done)
		if n > 0 && (i%n == n-1 || i == c.spec.Records-1) {
			// kgo commits only what is flushed: Flush, then commit.
			if err := c.cl.Flush(ctx); err != nil {
				cnt.Fail(0, fmt.Errorf("flush: %w", err))
				return
			}
			if err := c.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				cnt.Fail(0, fmt.Errorf("commit: %w", err))
				return
			}
		}
	}
	if err := c.cl.Flush(ctx); err != nil {
		cnt.Fail(c.spec.Records-int(cnt.Done()), fmt.Errorf("flush: %w", err))
	}
}

// ProduceRate is the fixed-rate mode: kgo hands a promise the record,
// but keeps its Timestamp to the millisecond (Produce truncates it), so
// as for samsa and Java each of the run's slots has one promise, made
// before the loop, and a record takes its slot's.
func (c *client) ProduceRate(ctx context.Context, r *workload.RateRun) {
	done := make([]func(*kgo.Record, error), workload.Slots())
	for slot := range done {
		done[slot] = func(_ *kgo.Record, err error) { r.CompleteSlot(slot, err) }
	}
	r.LoopSlots(ctx, func(i, slot int) {
		// kgo keeps the record until its promise runs, so each needs its own.
		c.cl.Produce(ctx, &kgo.Record{Key: c.payload.Key(i), Value: c.payload.Value(i)}, done[slot])
	})
	if err := c.cl.Flush(ctx); err != nil {
		r.Fail(fmt.Errorf("flush: %w", err))
	}
}

func (c *client) Close() error {
	c.cl.Close()
	return nil
}
