// Command kafkago is the peer benchmark's client for segmentio/kafka-go
// (its Writer). The harness (cmd/peerbench) runs it; see package workload
// for its flags and output.
//
// The Writer runs in Async mode with a Completion callback, fed by
// WriteMessages calls of chunkSize messages: kafka-go's fast path (one call
// per record pays a map and a lock per call); one Completion function for
// every record. Async mode has no memory bound of its own, so the client
// bounds the bytes of keys and values in flight to Spec.BufferMemory, like
// the other clients' buffer memory.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/segmentio/kafka-go"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

func main() { workload.Main("kafkago", newClient()) }

// chunkSize is the number of messages per WriteMessages call.
const chunkSize = 1000

type client struct {
	spec    workload.Spec
	payload *workload.Payload
	w       *kafka.Writer
	tls     *tls.Config

	cnt      atomic.Pointer[workload.Counter] // where completions count
	progress chan struct{}                    // 1-buffered: a completion happened

	mu       sync.Mutex
	room     *sync.Cond // signaled when inflight shrinks
	inflight int64      // bytes written and not completed
}

func newClient() *client {
	c := &client{progress: make(chan struct{}, 1)}
	c.room = sync.NewCond(&c.mu)
	return c
}

func (c *client) Notes() string {
	return fmt.Sprintf("no idempotence (none in kafka-go); Hash (FNV-1a) balancer for keys, RoundRobin for null keys (default); Async Writer with one Completion for every record, %d messages per WriteMessages, BatchSize (a message count) = min(1 MiB / value size, 2 × records per partition + 16), keys and values in flight bounded to %d MiB by the client", chunkSize, c.spec.BufferMemory>>20)
}

func codec(name string) (kafka.Compression, error) {
	switch name {
	case "none":
		return 0, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("unknown compression %q", name)
}

// batchCount is the Writer's BatchSize, a message count. kafka-go
// allocates a batch's message slice at this capacity, so it is the number
// of records that fill BatchBytes, but never more than twice the records a
// partition gets in the whole workload: with 10 000 partitions, 10 000
// lingering batches of 10 000 preallocated messages would take gigabytes.
// It never binds before BatchBytes does.
func (c *client) batchCount() int {
	n := workload.BatchBytes / c.spec.ValueSize
	perPartition := (c.spec.Records+c.spec.Partitions-1)/c.spec.Partitions*2 + 16
	return max(1, min(n, perPartition))
}

func size(m *kafka.Message) int64 { return int64(len(m.Key) + len(m.Value)) }

func (c *client) completion(msgs []kafka.Message, err error) {
	var n int64
	for i := range msgs {
		n += size(&msgs[i])
	}
	cnt := c.cnt.Load()
	if err != nil {
		cnt.Fail(len(msgs), err)
	} else {
		cnt.AckN(len(msgs))
	}
	c.mu.Lock()
	c.inflight -= n
	c.mu.Unlock()
	c.room.Broadcast()
	select {
	case c.progress <- struct{}{}:
	default:
	}
}

func (c *client) UseTLS(_ string, cfg *tls.Config) { c.tls = cfg }

func (c *client) Open(ctx context.Context, spec workload.Spec, brokers []string, p *workload.Payload) error {
	cc, err := codec(spec.Compression)
	if err != nil {
		return err
	}
	c.spec, c.payload = spec, p
	c.w = &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        spec.Topic(),
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: workload.Linger,
		BatchBytes:   workload.BatchBytes,
		BatchSize:    c.batchCount(),
		Compression:  cc,
		Async:        true,
		Completion:   c.completion,
	}
	if c.tls != nil {
		c.w.Transport = &kafka.Transport{TLS: c.tls} // ServerName: the broker's host
	}
	if spec.Keys > 0 {
		c.w.Balancer = &kafka.Hash{}
	}
	var warm workload.Counter
	c.cnt.Store(&warm)
	if err := c.w.WriteMessages(ctx, kafka.Message{Key: p.Key(0), Value: p.Value(0)}); err != nil {
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
	c.cnt.Store(cnt)
	chunk := make([]kafka.Message, 0, chunkSize)
	var chunkBytes int64
	flush := func() error {
		c.mu.Lock()
		for c.inflight > 0 && c.inflight+chunkBytes > c.spec.BufferMemory {
			c.room.Wait()
		}
		c.inflight += chunkBytes
		c.mu.Unlock()
		// Async: the Writer copies the Message values into its batches.
		err := c.w.WriteMessages(ctx, chunk...)
		if err != nil {
			cnt.Fail(len(chunk), err)
		}
		chunk, chunkBytes = chunk[:0], 0
		return err
	}
	for i := range c.spec.Records {
		chunk = append(chunk, kafka.Message{Key: c.payload.Key(i), Value: c.payload.Value(i)})
		chunkBytes += size(&chunk[len(chunk)-1])
		if len(chunk) == chunkSize {
			if err := flush(); err != nil {
				break
			}
		}
	}
	if len(chunk) > 0 {
		_ = flush()
	}
	if err := c.wait(ctx, cnt, int64(c.spec.Records)); err != nil {
		cnt.Fail(c.spec.Records-int(cnt.Done()), err)
	}
}

func (c *client) Close() error { return c.w.Close() }
