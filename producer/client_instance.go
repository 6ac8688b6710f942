// Producer.ClientInstanceID: the KIP-714 client instance id the cluster
// assigned, as Java's KafkaProducer.clientInstanceId; the UUID type.

package producer

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
)

// UUID is a Kafka Uuid (a topic id, a client instance id): 16 bytes.
type UUID [16]byte

// String formats u as Kafka's Uuid.toString does: URL-safe base64 without
// padding, 22 characters ("AAAAAAAAAAAAAAAAAAAAAA" for the zero UUID).
func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// IsZero reports whether u is the zero UUID (Kafka's Uuid.ZERO_UUID).
func (u UUID) IsZero() bool { return u == UUID{} }

// ErrTelemetryDisabled is returned by ClientInstanceID when the producer
// takes no part in KIP-714 client metrics: Config.DisableMetricsPush is set
// (enable.metrics.push=false; Java's clientInstanceId throws
// IllegalStateException then), or the cluster refused telemetry for good
// (an answer KIP-714 says ends it). A cluster that does not offer
// telemetry at all gives an error wrapping kerr.UnsupportedVersion
// instead.
var ErrTelemetryDisabled = errors.New("producer: client metrics (KIP-714) are disabled")

// ClientInstanceID returns the client instance id that the cluster assigned
// to this producer for KIP-714 client metrics, as Java's
// KafkaProducer.clientInstanceId(timeout): the id of the first
// GetTelemetrySubscriptions answer, which the producer asks for once its
// first metadata arrives (or one second after New). It waits for that
// answer until ctx ends; Java's timeout is ctx's deadline here, and where
// Java returns null after the timeout, ClientInstanceID returns an error
// wrapping ctx.Err(). Once an id is known it returns at once, also after
// Close.
//
// Errors: ErrTelemetryDisabled with Config.DisableMetricsPush (at once), or
// when a broker refused telemetry for good; an error wrapping
// kerr.UnsupportedVersion when the broker asked does not offer
// GetTelemetrySubscriptions (Kafka before 3.7, or without a client metrics
// plugin: Java then waits the whole timeout and returns null, samsa says
// so at once); ErrClosed when Close ended before an id came. The id changes
// only if a broker assigns another one (after UNKNOWN_SUBSCRIPTION_ID);
// the latest is returned.
func (p *Producer) ClientInstanceID(ctx context.Context) (UUID, error) {
	if p.push == nil {
		return UUID{}, fmt.Errorf("%w: Config.DisableMetricsPush is set (enable.metrics.push=false)", ErrTelemetryDisabled)
	}
	st := &p.push.idState
	for {
		st.mu.Lock()
		id, err, changed := st.id, st.err, st.waitChan()
		st.mu.Unlock()
		if !id.IsZero() {
			return id, nil
		}
		if err != nil {
			return UUID{}, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return UUID{}, fmt.Errorf("producer: ClientInstanceID: no client instance id assigned yet: %w", ctx.Err())
		case <-p.closing.Done():
			st.mu.Lock()
			id = st.id
			st.mu.Unlock()
			if !id.IsZero() {
				return id, nil
			}
			return UUID{}, fmt.Errorf("%w: no client instance id was assigned before Close", ErrClosed)
		}
	}
}

// instanceIDState is what the telemetry goroutine tells ClientInstanceID:
// the id once assigned, or why none will come (for now). Waiters wait on
// changed, closed and replaced at every change.
type instanceIDState struct {
	mu      sync.Mutex
	id      UUID
	err     error // the reason no id comes; nil while one may
	changed chan struct{}
}

// waitChan returns the channel closed at the next change (mu held).
func (s *instanceIDState) waitChan() chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// set records an id or a reason and wakes the waiters. An id clears the
// reason; a reason leaves a known id in place.
func (s *instanceIDState) set(id UUID, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !id.IsZero() {
		s.id, s.err = id, nil
	} else if s.id.IsZero() {
		s.err = err
	}
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}
