package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/kerr"
)

// Ping connects to a broker as the producer does (Config.TLS, SASL,
// DialTimeout and the connection settings), runs the ApiVersions handshake
// and, with SASL, authenticates (without SASL, it sends one Metadata
// request for no topic, which a SASL listener answers by closing the
// connection), then closes the connection: for readiness
// probes and start-up checks. It tries Config.Brokers in order, then the
// brokers the producer learned from metadata, and returns nil at the first
// that answers.
//
// Otherwise it returns, once every broker failed, what each did, naming it
// ("cannot connect to broker 127.0.0.1:9: connection refused (nothing is
// listening there)", "no such host", "timed out after 10s", a listener that
// speaks TLS to a plaintext client or not to a TLS one, a SASL listener
// dialled without SASL); the error wraps
// ErrAuthentication when a broker refused the credentials or certificates
// or its listener does not speak the client's protocol, which no retry
// fixes. It returns ctx's error (wrapped) when ctx ends first, and an error
// wrapping ErrClosed after Close (a Ping running when Close is called ends
// with it). Ping neither uses nor disturbs the producer's own connections,
// and feeds none of its metrics or hooks.
//
// With topics, Ping also asks the broker that answered for their metadata,
// on the same connection, never creating them (whatever
// Config.DisableAutoTopicCreation says: a check must not make topics), and
// returns an error naming each topic the broker does not have or refuses
// (`topic "orders": UNKNOWN_TOPIC_OR_PARTITION ...`, wrapping the
// kerr.Error, so errors.Is(err, kerr.UnknownTopicOrPartition) or
// kerr.TopicAuthorizationFailed tells which), all of them in one error;
// nil when every topic exists with its partitions. So a start-up check
// finds a topic that was never created at once, instead of its records
// failing after MaxBlock.
func (p *Producer) Ping(ctx context.Context, topics ...string) error {
	if p.closed.Load() {
		return fmt.Errorf("%w: Ping after Close", ErrClosed)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.closing, cancel) // Close ends a Ping
	defer stop()

	var errs []error
	for _, addr := range p.pingAddrs() {
		c, err := conn.Dial(ctx, addr, p.connCfg)
		if err == nil && p.connCfg.SASL == nil {
			err = saslListenerCheck(ctx, c)
		}
		if err == nil {
			if len(topics) == 0 {
				_ = c.Close()
				return nil
			}
			err = pingTopics(ctx, c, topics)
			_ = c.Close()
			if err == nil || !errors.Is(err, errPingMetadata) {
				return err // the broker answered: its answer is the result
			}
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if p.closed.Load() {
		return fmt.Errorf("%w: Close ended the Ping", ErrClosed)
	}
	if len(errs) == 1 {
		return fmt.Errorf("producer: ping: %w", errs[0])
	}
	format := "producer: ping: no broker answered: " + strings.TrimSuffix(strings.Repeat("%w; ", len(errs)), "; ")
	args := make([]any, len(errs))
	for i, err := range errs {
		args[i] = err
	}
	return fmt.Errorf(format, args...)
}

// errPingMetadata marks a Metadata request of Ping that got no answer (the
// connection broke): Ping then tries the next broker.
var errPingMetadata = errors.New("no Metadata answer")

// pingTopics asks c for topics' metadata and returns an error naming each
// topic the answer has with an error or without partitions.
func pingTopics(ctx context.Context, c *conn.Conn, topics []string) error {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	for _, name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	resp, err := c.Do(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("producer: ping: %w", err)
		}
		return fmt.Errorf("producer: ping: broker %s: %w: %w", c.Addr(), errPingMetadata, err)
	}
	mr := resp.(*kmsg.MetadataResponse)
	answered := make(map[string]*kmsg.MetadataResponseTopic, len(mr.Topics))
	for i := range mr.Topics {
		if n := mr.Topics[i].Topic; n != nil {
			answered[*n] = &mr.Topics[i]
		}
	}
	var errs []error
	seen := make(map[string]bool, len(topics))
	for _, name := range topics {
		if seen[name] {
			continue
		}
		seen[name] = true
		t := answered[name]
		switch {
		case t == nil:
			errs = append(errs, fmt.Errorf("topic %q: not in broker %s's Metadata answer", name, c.Addr()))
		case t.ErrorCode != 0:
			errs = append(errs, fmt.Errorf("topic %q: %w", name, kerr.ForCode(t.ErrorCode)))
		case len(t.Partitions) == 0:
			errs = append(errs, fmt.Errorf("topic %q: %w (no partitions)", name, kerr.LeaderNotAvailable))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	format := "producer: ping: broker %s answered: " + strings.TrimSuffix(strings.Repeat("%w; ", len(errs)), "; ")
	args := []any{c.Addr()}
	for _, err := range errs {
		args = append(args, err)
	}
	return fmt.Errorf(format, args...)
}

// pingAddrs lists the addresses Ping tries: Config.Brokers, then the
// brokers of the metadata snapshot, each once.
func (p *Producer) pingAddrs() []string {
	seen := make(map[string]bool)
	var out []string
	add := func(a string) {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, a := range p.cfg.Brokers {
		add(a)
	}
	for _, b := range p.meta.Snapshot().Brokers {
		add(b.Addr())
	}
	return out
}

// saslListenerCheck sends, on c (a connection without SASL), one Metadata
// request for no topic: a SASL listener answers ApiVersions to such a
// client but closes the connection at its next request, which the
// connection then names as a mismatch (wrapping ErrAuthentication). Only
// that error is returned (c closed); any other outcome leaves the Ping a
// success, as before.
func saslListenerCheck(ctx context.Context, c *conn.Conn) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	if _, err := c.Do(ctx, req); err != nil && errors.Is(err, ErrAuthentication) {
		_ = c.Close()
		return err
	}
	return nil
}
