package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
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
func (p *Producer) Ping(ctx context.Context) error {
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
			_ = c.Close()
			return nil
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
