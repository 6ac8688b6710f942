package telemetry

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
)

// DefaultInterval is the wait KIP-714 and Java's ClientTelemetryReporter
// use when a broker gives no push interval, or cannot be asked: 5 minutes.
const DefaultInterval = 5 * time.Minute

// MinInterval is the shortest push interval taken from a broker: Kafka's
// own floor for a subscription's interval.ms. A shorter one (a broker
// that does not check it) is raised to it, so that the client never
// pushes in a loop.
const MinInterval = 100 * time.Millisecond

// Kafka error codes of GetTelemetrySubscriptions and PushTelemetry.
const (
	codeNone                       = 0
	codeUnsupportedVersion         = 35
	codeInvalidRequest             = 42
	codeUnsupportedCompressionType = 76
	codeInvalidRecord              = 87
	codeThrottlingQuotaExceeded    = 89
	codeUnknownSubscriptionID      = 117
	codeTelemetryTooLarge          = 118
)

// Action is what a client does after a telemetry answer's error code, as
// KIP-714's tables and Java's ClientTelemetryUtils.maybeFetchErrorIntervalMs
// say.
type Action uint8

const (
	// Proceed: no error.
	Proceed Action = iota
	// Resubscribe: fetch the subscription again at once
	// (UNKNOWN_SUBSCRIPTION_ID: the subscriptions changed;
	// UNSUPPORTED_COMPRESSION_TYPE: the accepted codecs did).
	Resubscribe
	// Retry: fetch the subscription again after the push interval
	// (THROTTLING_QUOTA_EXCEEDED: too early; TELEMETRY_TOO_LARGE).
	Retry
	// Disable: stop for the producer's life (INVALID_REQUEST,
	// INVALID_RECORD, UNSUPPORTED_VERSION, and any other code): retrying
	// would not fix the client's request.
	Disable
)

// ActionFor returns what code asks of the client.
func ActionFor(code int16) Action {
	switch code {
	case codeNone:
		return Proceed
	case codeUnknownSubscriptionID, codeUnsupportedCompressionType:
		return Resubscribe
	case codeThrottlingQuotaExceeded, codeTelemetryTooLarge:
		return Retry
	default:
		return Disable
	}
}

// Subscription is a GetTelemetrySubscriptions answer, checked.
type Subscription struct {
	// InstanceID is the client instance id the broker assigned.
	InstanceID [16]byte
	// ID identifies the subscription; pushes carry it.
	ID int32
	// Interval is the push interval (DefaultInterval when the broker
	// gave none, at least MinInterval).
	Interval time.Duration
	// Accepted are the codecs the broker takes, in its order of
	// preference.
	Accepted []int8
	// MaxBytes bounds a push's metrics (0: not given).
	MaxBytes int32
	// Delta asks for monotonic sums as deltas since the previous push
	// rather than cumulative values.
	Delta bool

	prefixes []string
	all      bool
}

// NewSubscription checks r (without an error code) and returns its
// subscription. RequestedMetrics selects by name prefix: none asks for no
// metric, a single "*" (Kafka's broker sends it) or an empty string (the
// KIP's wording) for every metric.
func NewSubscription(r *kmsg.GetTelemetrySubscriptionsResponse) Subscription {
	s := Subscription{
		InstanceID: r.ClientInstanceID,
		ID:         r.SubscriptionID,
		Interval:   time.Duration(r.PushIntervalMillis) * time.Millisecond,
		Accepted:   append([]int8(nil), r.AcceptedCompressionTypes...),
		MaxBytes:   r.TelemetryMaxBytes,
		Delta:      r.DeltaTemporality,
	}
	switch {
	case s.Interval <= 0:
		s.Interval = DefaultInterval
	case s.Interval < MinInterval:
		s.Interval = MinInterval
	}
	for _, m := range r.RequestedMetrics {
		if m == "*" || m == "" {
			s.all = true
		}
	}
	if !s.all {
		s.prefixes = append([]string(nil), r.RequestedMetrics...)
	}
	return s
}

// Empty reports whether the subscription asks for no metric: the client
// then asks again after Interval instead of pushing.
func (s *Subscription) Empty() bool { return !s.all && len(s.prefixes) == 0 }

// Wants reports whether the metric named name is subscribed to.
func (s *Subscription) Wants(name string) bool {
	if s.all {
		return true
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Codec returns the first codec of the broker's accepted list (its order
// of preference) that samsa knows, unknown ids skipped, or
// compression.None when the list names none (or is empty), as Java's
// ClientTelemetryUtils.preferredCompressionType does.
func (s *Subscription) Codec() compression.Type {
	for _, id := range s.Accepted {
		if t := compression.Type(id); t >= compression.None && t <= compression.Zstd {
			return t
		}
	}
	return compression.None
}

// Jitter returns the wait before the first push of a new subscription:
// interval times f, for f in [0, 1), spread over 0.5 to 1.5 of it (KIP-714,
// Java's INITIAL_PUSH_JITTER_LOWER and _UPPER), so that clients started
// together do not push together.
func Jitter(interval time.Duration, f float64) time.Duration {
	return time.Duration((0.5 + f) * float64(interval))
}
