package testbroker

import (
	"crypto/rand"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/telemetry"
)

// API keys and error codes of KIP-714 client metrics.
const (
	getTelemetrySubscriptionsKey int16 = 71
	pushTelemetryKey             int16 = 72

	ecUnsupportedCompressionType int16 = 76
	ecInvalidRecord              int16 = 87
	ecUnknownSubscriptionID      int16 = 117
	ecTelemetryTooLarge          int16 = 118
)

// Telemetry configures KIP-714 client metrics. With it the brokers
// advertise GetTelemetrySubscriptions (71) and PushTelemetry (72) in
// ApiVersions, as Kafka does only when a metrics reporter plugin that
// receives client telemetry is configured; without it they do not, and a
// client that sends either anyway is disconnected. Every client matches
// the one subscription. Pushes are recorded (Cluster.TelemetryPushes).
//
// The brokers answer as Kafka's ClientMetricsManager does: a client
// instance id of zeros gets a new one; a GetTelemetrySubscriptions within
// Interval of the client's last request gets THROTTLING_QUOTA_EXCEEDED
// (unless its last push failed with UNKNOWN_SUBSCRIPTION_ID or
// UNSUPPORTED_COMPRESSION_TYPE), and so does a push within Interval of
// the previous one, unless it is the first after a
// GetTelemetrySubscriptions or is terminating; a push after a
// terminating push gets INVALID_REQUEST; a push with another subscription
// id (SetTelemetry changes it) gets UNKNOWN_SUBSCRIPTION_ID, with a codec
// not accepted UNSUPPORTED_COMPRESSION_TYPE, with more than MaxBytes of
// metrics TELEMETRY_TOO_LARGE, and with metrics that do not decompress or
// are no OTLP MetricsData INVALID_RECORD (Kafka's answer when its plugin
// fails to export them). Interceptors inject other answers (keys 71 and 72).
type Telemetry struct {
	// Metrics are the requested metric name prefixes: nil for none (the
	// client then only asks again every Interval), "*" for all.
	Metrics []string
	// Interval is the push interval (Kafka's interval.ms, default 5
	// minutes).
	Interval time.Duration
	// CompressionTypes are the accepted codecs, in order of preference
	// (default Kafka's: zstd, lz4, gzip, snappy). None is always accepted.
	CompressionTypes []int8
	// MaxBytes bounds a push's metrics, compressed (Kafka's
	// telemetry.max.bytes, default 1 MiB).
	MaxBytes int32
	// Cumulative answers DeltaTemporality false; Kafka always asks for
	// deltas.
	Cumulative bool
}

// TelemetryPush is one PushTelemetry request a broker received.
type TelemetryPush struct {
	// Broker is the broker that received it, ClientID the request's
	// client id.
	Broker   int32
	ClientID string
	// ClientInstanceID, SubscriptionID, Terminating and CompressionType
	// are the request's.
	ClientInstanceID [16]byte
	SubscriptionID   int32
	Terminating      bool
	CompressionType  int8
	// WireBytes is the size of the request's metrics, as sent; Metrics
	// is them decompressed (an OTLP MetricsData, which
	// internal/telemetry.Decode reads), nil if they did not decompress.
	WireBytes int
	Metrics   []byte
	// ErrorCode is the broker's answer: 0 when the push was accepted.
	ErrorCode int16
	// At is when it arrived (Config.Clock).
	At time.Time
}

// telemetryState is the cluster's KIP-714 state, under mu.
type telemetryState struct {
	cfg     atomic.Pointer[Telemetry] // nil: the APIs are not advertised
	mu      sync.Mutex
	version int // bumped by SetTelemetry: subscription ids change
	clients map[[16]byte]*telemetryClient
	pushes  []TelemetryPush
	gets    int
}

// telemetryClient is a client instance's state, as Kafka's
// ClientMetricsInstance.
type telemetryClient struct {
	version           int
	subscriptionID    int32
	lastGet, lastPush time.Time
	gotSince          bool // a GetTelemetrySubscriptions was answered since the last push
	lastErr           int16
	terminating       bool
}

func (t *Telemetry) withDefaults() *Telemetry {
	cp := *t
	cp.Metrics = slices.Clone(t.Metrics)
	if cp.Interval <= 0 {
		cp.Interval = 5 * time.Minute
	}
	if cp.CompressionTypes == nil {
		cp.CompressionTypes = []int8{int8(compression.Zstd), int8(compression.LZ4), int8(compression.Gzip), int8(compression.Snappy)}
	} else {
		cp.CompressionTypes = slices.Clone(t.CompressionTypes)
	}
	if cp.MaxBytes <= 0 {
		cp.MaxBytes = 1 << 20
	}
	return &cp
}

// telemetryEnabled reports whether the cluster serves KIP-714's APIs.
func telemetryEnabled(c *Cluster) bool { return c.tel.cfg.Load() != nil }

// SetTelemetry sets or replaces the cluster's subscription (enabling the
// APIs for connections opened from now on, if Config.Telemetry was nil).
// Client instances get a new subscription id: their next push is answered
// UNKNOWN_SUBSCRIPTION_ID, and they fetch the new subscription.
func (c *Cluster) SetTelemetry(t Telemetry) {
	c.tel.mu.Lock()
	defer c.tel.mu.Unlock()
	c.tel.cfg.Store(t.withDefaults())
	c.tel.version++
}

// TelemetryPushes returns every PushTelemetry request received so far, in
// arrival order, with its answer.
func (c *Cluster) TelemetryPushes() []TelemetryPush {
	c.tel.mu.Lock()
	defer c.tel.mu.Unlock()
	out := slices.Clone(c.tel.pushes)
	for i := range out {
		out[i].Metrics = slices.Clone(out[i].Metrics)
	}
	return out
}

// TelemetrySubscriptionRequests counts the GetTelemetrySubscriptions
// requests received so far.
func (c *Cluster) TelemetrySubscriptionRequests() int {
	c.tel.mu.Lock()
	defer c.tel.mu.Unlock()
	return c.tel.gets
}

// clientLocked returns the client instance id's state, created (or
// created again, with fresh timestamps, after SetTelemetry) as Kafka does.
func (s *telemetryState) clientLocked(id [16]byte, cfg *Telemetry) *telemetryClient {
	cl := s.clients[id]
	if cl != nil && cl.version == s.version {
		return cl
	}
	if s.clients == nil {
		s.clients = make(map[[16]byte]*telemetryClient)
	}
	// As Kafka: a CRC-32C of the subscription, XORed with a hash of the
	// instance id, and here the version, so that a change shows.
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	fmt.Fprintf(h, "%s|%d|%d", strings.Join(cfg.Metrics, ","), cfg.Interval.Milliseconds(), s.version)
	cl = &telemetryClient{version: s.version, subscriptionID: int32(h.Sum32() ^ crc32.ChecksumIEEE(id[:]))}
	s.clients[id] = cl
	return cl
}

func handleGetTelemetrySubscriptions(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	c := cn.c
	cfg := c.tel.cfg.Load()
	if cfg == nil {
		return result{closeConn: true}
	}
	now := c.cfg.Clock()
	id := req.ClientInstanceID
	if id == ([16]byte{}) {
		for id == ([16]byte{}) {
			_, _ = rand.Read(id[:])
		}
	}
	s := &c.tel
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	cl := s.clientLocked(id, cfg)
	last := cl.lastGet
	if cl.lastPush.After(last) {
		last = cl.lastPush
	}
	switch {
	case !last.IsZero() && now.Sub(last) < cfg.Interval &&
		cl.lastErr != ecUnknownSubscriptionID && cl.lastErr != ecUnsupportedCompressionType:
		resp.ErrorCode = ecThrottlingQuotaExceeded
	default:
		cl.lastGet, cl.lastErr, cl.gotSince = now, 0, true
		resp.ClientInstanceID = id
		resp.SubscriptionID = cl.subscriptionID
		resp.AcceptedCompressionTypes = slices.Clone(cfg.CompressionTypes)
		resp.PushIntervalMillis = int32(cfg.Interval.Milliseconds())
		resp.TelemetryMaxBytes = cfg.MaxBytes
		resp.DeltaTemporality = !cfg.Cumulative
		resp.RequestedMetrics = slices.Clone(cfg.Metrics)
	}
	return result{resp: resp}
}

func handlePushTelemetry(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.PushTelemetryRequest)
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	c := cn.c
	cfg := c.tel.cfg.Load()
	if cfg == nil {
		return result{closeConn: true}
	}
	now := c.cfg.Clock()
	push := TelemetryPush{
		Broker: cn.b.id, ClientID: cn.clientID, ClientInstanceID: req.ClientInstanceID,
		SubscriptionID: req.SubscriptionID, Terminating: req.Terminating,
		CompressionType: req.CompressionType, WireBytes: len(req.Metrics), At: now,
	}
	decoded := false
	if t := compression.Type(req.CompressionType); t >= compression.None && t <= compression.Zstd {
		if m, err := compression.AppendDecompress(t, nil, req.Metrics, 64<<20); err == nil {
			push.Metrics = m
			_, err = telemetry.Decode(m)
			decoded = err == nil
		}
	}
	push.ErrorCode = c.tel.checkPush(req, decoded, cfg, now)
	resp.ErrorCode = push.ErrorCode
	c.tel.mu.Lock()
	c.tel.pushes = append(c.tel.pushes, push)
	c.tel.mu.Unlock()
	return result{resp: resp}
}

// checkPush applies Kafka's rules to a push and returns the answer's code.
func (s *telemetryState) checkPush(req *kmsg.PushTelemetryRequest, decoded bool, cfg *Telemetry, now time.Time) int16 {
	if req.ClientInstanceID == ([16]byte{}) {
		return ecInvalidRequest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := s.clientLocked(req.ClientInstanceID, cfg)
	code := func() int16 {
		if cl.terminating {
			return ecInvalidRequest
		}
		// The first push after a GetTelemetrySubscriptions may come
		// early: the client's first push is jittered over 0.5 to 1.5
		// intervals.
		ok := cl.gotSince || now.Sub(cl.lastPush) >= cfg.Interval
		if ok {
			cl.lastPush, cl.gotSince = now, false
		} else if !req.Terminating {
			return ecThrottlingQuotaExceeded
		}
		if req.SubscriptionID != cl.subscriptionID {
			return ecUnknownSubscriptionID
		}
		if req.CompressionType != 0 && !slices.Contains(cfg.CompressionTypes, req.CompressionType) {
			return ecUnsupportedCompressionType
		}
		if len(req.Metrics) > int(cfg.MaxBytes) {
			return ecTelemetryTooLarge
		}
		if !decoded {
			return ecInvalidRecord
		}
		return 0
	}()
	cl.terminating = cl.terminating || req.Terminating
	cl.lastErr = code
	return code
}
