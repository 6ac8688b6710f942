// Command sarama is the peer benchmark's client for IBM/sarama (its
// AsyncProducer). The harness (cmd/peerbench) runs it; see package workload
// for its flags and output.
package main

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

func main() { workload.Main("sarama", &client{}) }

type client struct {
	spec    workload.Spec
	payload *workload.Payload
	p       sarama.AsyncProducer
	tls     *tls.Config
}

func (c *client) UseTLS(_ string, cfg *tls.Config) { c.tls = cfg }

func (c *client) Notes() string {
	return "not idempotent (default; sarama's idempotence forces MaxOpenRequests=1); FNV-1a hash for keys, random for null keys (default); no bound on buffered bytes (none in sarama); AsyncProducer, Successes and Errors drained by one goroutine"
}

func codec(name string) (sarama.CompressionCodec, error) {
	switch name {
	case "none":
		return sarama.CompressionNone, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return 0, fmt.Errorf("unknown compression %q", name)
}

func (c *client) Open(ctx context.Context, spec workload.Spec, brokers []string, p *workload.Payload) error {
	cc, err := codec(spec.Compression)
	if err != nil {
		return err
	}
	c.spec, c.payload = spec, p
	// The shared knobs (MaxMessageBytes and Flush.Bytes are its batch
	// size); everything else sarama's default. Version defaults to 2.8:
	// record batches, zstd.
	cfg := sarama.NewConfig()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Compression = cc
	cfg.Producer.Flush.Frequency = workload.Linger
	cfg.Producer.Flush.Bytes = workload.BatchBytes
	cfg.Producer.MaxMessageBytes = workload.BatchBytes
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	if c.tls != nil {
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, c.tls // ServerName: the broker's host
	}
	c.p, err = sarama.NewAsyncProducer(brokers, cfg)
	if err != nil {
		return err
	}
	c.p.Input() <- c.message(0)
	select {
	case <-c.p.Successes():
	case perr := <-c.p.Errors():
		return fmt.Errorf("warm-up record: %w", perr.Err)
	case <-ctx.Done():
		return fmt.Errorf("warm-up record: %w", ctx.Err())
	}
	return nil
}

func (c *client) message(i int) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: c.spec.Topic(), Value: sarama.ByteEncoder(c.payload.Value(i))}
	if k := c.payload.Key(i); k != nil {
		m.Key = sarama.ByteEncoder(k) // a nil Encoder, not an empty one, for null keys
	}
	return m
}

func (c *client) Produce(ctx context.Context, cnt *workload.Counter) {
	n := int64(c.spec.Records)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cnt.Done() < n {
			select {
			case <-c.p.Successes():
				cnt.Ack()
			case perr := <-c.p.Errors():
				cnt.Fail(1, perr.Err)
			case <-ctx.Done():
				return
			}
		}
	}()
	in := c.p.Input()
	for i := range c.spec.Records {
		select {
		case in <- c.message(i):
		case <-ctx.Done():
			cnt.Fail(c.spec.Records-i, ctx.Err())
			<-done
			return
		}
	}
	<-done
	if err := ctx.Err(); err != nil {
		cnt.Fail(c.spec.Records-int(cnt.Done()), err)
	}
}

func (c *client) Close() error { return c.p.Close() }
