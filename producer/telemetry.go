// The KIP-714 client metrics goroutine: GetTelemetrySubscriptions,
// PushTelemetry on the subscription's schedule, the terminating push of
// Close.

package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/telemetry"
	"github.com/samsa-go/samsa/kerr"
)

// pusher is the telemetry goroutine: it owns the client instance id, the
// subscription, the payload encoder and its ledger. It sends its requests
// through the metadata client's connection (metadata.Client.Do: a
// connection the producer keeps anyway, idle most of the time, like the
// least-loaded node Java picks; the first once metadata was fetched, so
// that it finds that connection open; a request whose connection breaks
// is tried on the next broker, which at worst refuses a push as early or
// counts one twice), one at a time, and never touches the
// Send path or the IO goroutine's state: it reads Producer.Metrics. Close's
// teardown ends it (close) once the IO and completion goroutines are done,
// so that the terminating push carries the final metrics.
type pusher struct {
	p  *Producer
	do func(context.Context, kmsg.Request) (kmsg.Response, error)

	// getCtx ends when Close starts: a GetTelemetrySubscriptions in
	// flight is abandoned (nothing is lost). pushCtx ends when Close's
	// ctx does: a push in flight is waited for until then, so that its
	// values are not lost to the terminating push.
	getCtx, pushCtx       context.Context
	cancelGet, cancelPush context.CancelFunc
	closing               chan context.Context // Close's ctx, for the terminating push
	done                  chan struct{}

	instance  [16]byte // assigned by the broker; zeros until then
	sub       telemetry.Subscription
	pushing   bool // a subscription with metrics is loaded: the next request is a push
	announced bool // the first subscription with metrics was logged at Info
	failures  int  // requests in a row that got no answer, or Resubscribe
	enc       pushEncoder
	comp      *compression.Compressor // the subscription's codec's, made on first use
	wire      []byte

	idState instanceIDState // the id as ClientInstanceID reads it (client_instance.go)
}

// telemetryStartDelay is how long the first GetTelemetrySubscriptions
// waits for the producer's first metadata fetch (its first Send), after
// which it goes out anyway.
const telemetryStartDelay = time.Second

func newPusher(p *Producer, start time.Time) *pusher {
	t := &pusher{
		p:       p,
		do:      p.meta.Do,
		closing: make(chan context.Context, 1),
		done:    make(chan struct{}),
		enc:     pushEncoder{start: start.UnixNano(), version: conn.ModuleVersion()},
	}
	t.getCtx, t.cancelGet = context.WithCancel(context.Background())
	t.pushCtx, t.cancelPush = context.WithCancel(context.Background())
	if id := p.cfg.TransactionalID; id != "" {
		// Java's ClientTelemetryProvider: the producer's own resource
		// labels (the broker adds client_id, client_instance_id, the
		// software name and version, the source address).
		t.enc.resource = []telemetry.KeyValue{{Key: "transactional_id", Value: id}}
	}
	return t
}

// close asks for the terminating push and waits for the goroutine to end:
// a GetTelemetrySubscriptions in flight is abandoned, a push in flight is
// waited for, then the terminating push is sent (bounded by
// RequestTimeout). All of it is bounded by ctx: once it ends, the push
// in flight is abandoned and no terminating push is sent.
func (t *pusher) close(ctx context.Context) {
	t.closing <- ctx
	t.cancelGet()
	select {
	case <-t.done:
	case <-ctx.Done():
		t.cancelPush()
		<-t.done
	}
	t.cancelPush()
}

func (t *pusher) run() {
	defer close(t.done)
	// The first GetTelemetrySubscriptions once metadata has been
	// fetched, on the connection that fetched it (at once, it would dial
	// a second one beside the metadata client's first), or after
	// telemetryStartDelay for a producer that has sent nothing yet.
	timer := time.NewTimer(telemetryStartDelay)
	defer timer.Stop()
	select {
	case <-t.p.metaReady:
	case <-timer.C:
	case <-t.closing:
		return
	}
	timer.Reset(0)
	for {
		select {
		case <-timer.C:
		case ctx := <-t.closing:
			t.terminate(ctx)
			return
		}
		select { // Close first, when both are due
		case ctx := <-t.closing:
			t.terminate(ctx)
			return
		default:
		}
		wait, ok := t.step()
		if !ok {
			<-t.closing // disabled: nothing more, not even on Close
			return
		}
		timer.Reset(wait)
	}
}

// step sends the next request and returns how long to wait before the
// one after it; false when telemetry is disabled for good.
func (t *pusher) step() (time.Duration, bool) {
	if t.pushing {
		return t.push()
	}
	return t.subscribe()
}

// subscribe sends GetTelemetrySubscriptions (with the zero id the first
// time: the broker assigns one) and loads the answer.
func (t *pusher) subscribe() (time.Duration, bool) {
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = t.instance
	kresp, err := t.do(t.getCtx, req)
	if err != nil {
		return t.failed("GetTelemetrySubscriptions", err), true
	}
	resp := kresp.(*kmsg.GetTelemetrySubscriptionsResponse)
	throttle := time.Duration(resp.ThrottleMillis) * time.Millisecond
	if resp.ErrorCode != 0 {
		return t.answered("GetTelemetrySubscriptions", resp.ErrorCode, throttle)
	}
	if resp.ClientInstanceID == ([16]byte{}) {
		// A broken answer: Java refuses it too.
		t.p.log.Debug("client metrics: GetTelemetrySubscriptions answered no client instance id")
		return max(t.interval(), throttle), true
	}
	sub := telemetry.NewSubscription(resp)
	if t.instance != ([16]byte{}) && t.sub.Delta != sub.Delta {
		t.enc.ledger.Reset() // as Java: the values last pushed mean nothing now
	}
	t.instance, t.sub, t.failures = resp.ClientInstanceID, sub, 0
	t.idState.set(t.instance, nil)
	if t.comp != nil && t.comp.Type() != sub.Codec() {
		t.comp = nil
	}
	if sub.Empty() {
		// No metric asked for: ask again after the interval (KIP-714),
		// so that a subscription made later is picked up.
		t.pushing = false
		return max(sub.Interval, throttle), true
	}
	level := slog.LevelDebug
	if !t.announced { // once per producer, as Java's "Client telemetry registered"
		level, t.announced = slog.LevelInfo, true
	}
	t.p.log.Log(context.Background(), level, "client metrics: pushing to the cluster",
		"client_instance_id", uuidString(t.instance), "interval", sub.Interval, "metrics", len(resp.RequestedMetrics))
	t.pushing = true
	return max(telemetry.Jitter(sub.Interval, rand.Float64()), throttle), true
}

// push sends the metrics the subscription asks for.
func (t *pusher) push() (time.Duration, bool) {
	req, err := t.pushRequest(false)
	if err != nil {
		t.p.log.Debug("client metrics: building a push failed", "err", err)
		return t.sub.Interval, true
	}
	kresp, err := t.do(t.pushCtx, req)
	if err != nil {
		t.pushing = false // as Java: fetch the subscription again
		return t.failed("PushTelemetry", err), true
	}
	resp := kresp.(*kmsg.PushTelemetryResponse)
	throttle := time.Duration(resp.ThrottleMillis) * time.Millisecond
	if resp.ErrorCode != 0 {
		t.pushing = false
		return t.answered("PushTelemetry", resp.ErrorCode, throttle)
	}
	t.failures = 0
	return max(t.sub.Interval, throttle), true
}

// terminate sends the terminating push when a subscription with metrics
// is loaded (Java's initiateClose), bounded by ctx.
func (t *pusher) terminate(ctx context.Context) {
	if !t.pushing || ctx.Err() != nil {
		return
	}
	req, err := t.pushRequest(true)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, t.p.cfg.RequestTimeout)
	defer cancel()
	kresp, err := t.do(ctx, req)
	if err != nil {
		t.p.log.Debug("client metrics: the terminating push failed", "err", err)
		return
	}
	if code := kresp.(*kmsg.PushTelemetryResponse).ErrorCode; code != 0 {
		t.p.log.Debug("client metrics: the terminating push was refused", "err", kerr.ForCode(code))
	}
}

// pushRequest builds a PushTelemetry request from the producer's metrics
// now: encoded, compressed with the broker's preferred codec, and encoded
// again without per-topic and per-broker series if that is over the
// broker's TelemetryMaxBytes.
func (t *pusher) pushRequest(terminating bool) (*kmsg.PushTelemetryRequest, error) {
	m := t.p.Metrics()
	now := time.Now().UnixNano()
	t.enc.collect(&m, &t.sub, now)
	codec := t.sub.Codec()
	payload, err := t.compress(codec, t.enc.encode(&t.sub, now, false))
	if err == nil && t.sub.MaxBytes > 0 && len(payload) > int(t.sub.MaxBytes) {
		payload, err = t.compress(codec, t.enc.encode(&t.sub, now, true))
	}
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID, req.SubscriptionID = t.instance, t.sub.ID
	req.Terminating, req.CompressionType, req.Metrics = terminating, int8(codec), payload
	return req, nil
}

// compress compresses raw with codec into the pusher's buffer, which the
// request takes: a request is answered before the next is built.
func (t *pusher) compress(codec compression.Type, raw []byte) ([]byte, error) {
	if codec == compression.None {
		return raw, nil
	}
	if t.comp == nil {
		if pc := t.p.compressor; pc.Type() == codec {
			t.comp = pc // the producer's own, if the codecs agree
		} else {
			c, err := compression.NewCompressor(codec, 0)
			if err != nil {
				return nil, err
			}
			t.comp = c
		}
	}
	out, err := t.comp.AppendCompress(t.wire[:0], raw)
	t.wire = out
	return out, err
}

// answered applies an error code of an answer: what KIP-714 asks
// (telemetry.ActionFor). The subscription is fetched again next.
func (t *pusher) answered(api string, code int16, throttle time.Duration) (time.Duration, bool) {
	t.pushing = false
	switch telemetry.ActionFor(code) {
	case telemetry.Resubscribe:
		// At once, as KIP-714 says; a broker that keeps answering so is
		// asked again with backoff, not in a loop.
		t.failures++
		return max(t.retryWait(), throttle), true
	case telemetry.Retry:
		t.p.log.Debug("client metrics: "+api+" refused; asking again after the interval", "err", kerr.ForCode(code))
		return max(t.interval(), throttle), true
	default:
		t.p.log.Warn("client metrics: "+api+" refused; pushing no more metrics", "err", kerr.ForCode(code))
		t.idState.set(UUID{}, fmt.Errorf("%w: %s refused: %w", ErrTelemetryDisabled, api, kerr.ForCode(code)))
		return 0, false
	}
}

// failed handles a request that got no answer: the metadata client found
// no broker, or the broker does not advertise KIP-714's APIs (Kafka
// without a client metrics plugin: nothing was sent; asked again after
// Java's default interval, 5 minutes, in case the plugin or another
// broker comes). The wait grows with each failure in a row.
func (t *pusher) failed(api string, err error) time.Duration {
	if errors.Is(err, kerr.UnsupportedVersion) {
		t.p.log.Debug("client metrics: the broker does not offer "+api+"; asking again in 5 minutes", "err", err)
		t.idState.set(UUID{}, fmt.Errorf("producer: ClientInstanceID: the broker does not offer KIP-714 client metrics (Kafka 3.7+ with a client metrics plugin): %w", err))
		return telemetry.DefaultInterval
	}
	t.failures++
	t.p.log.Debug("client metrics: "+api+" failed", "err", err, "failures", t.failures)
	return t.backoff(t.failures)
}

// retryWait is the wait after an answer that asks for the subscription at
// once: none the first time (KIP-714), then with backoff, so that a broker
// that keeps answering so is not asked in a loop.
func (t *pusher) retryWait() time.Duration {
	if t.failures <= 1 {
		return 0
	}
	return t.backoff(t.failures - 1)
}

// backoff is the wait before attempt n (1-based): 100ms doubling up to
// the push interval, with jitter.
func (t *pusher) backoff(n int) time.Duration {
	return conn.Backoff(n-1, 100*time.Millisecond, t.interval())
}

// interval is the subscription's push interval, or KIP-714's default
// without one.
func (t *pusher) interval() time.Duration {
	if t.instance == ([16]byte{}) {
		return telemetry.DefaultInterval
	}
	return t.sub.Interval
}

// uuidString formats a client instance id as Kafka prints a Uuid:
// URL-safe base64 without padding.
func uuidString(id [16]byte) string { return UUID(id).String() }
