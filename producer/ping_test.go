package producer

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/sasl"
)

// TestPing: Ping sets up a connection as the producer would (TLS, SASL)
// and says at once why it could not, with the texts of the producer's own
// dial failures; the mismatches and refused credentials wrap
// ErrAuthentication; after Close it fails with ErrClosed; its ctx bounds
// it. It opens no connection of the producer's own.
func TestPing(t *testing.T) {
	c, plain, ssl, client := tlsListenersCluster(t)
	saslSSL := c.ListenerAddrs(testbroker.SASLSSL)[0]
	refused, refused2 := testutil.RefusedAddr(t), testutil.RefusedAddr(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	cases := []struct {
		name    string
		cfg     Config
		ctx     context.Context
		closed  bool
		want    []error  // errors it wraps; none: Ping succeeds
		notWant []error  // errors it must not wrap
		text    []string // in its text
	}{
		{name: "PLAINTEXT", cfg: Config{Brokers: []string{plain}}},
		{name: "SSL", cfg: Config{Brokers: []string{ssl}, TLS: client}},
		{name: "SASL_SSL", cfg: Config{Brokers: []string{saslSSL}, TLS: client, SASL: sasl.Plain("alice", "alice-secret")}},
		{name: "a refused broker, then a good one", cfg: Config{Brokers: []string{refused, plain}}},
		{name: "refused", cfg: Config{Brokers: []string{refused}},
			want: []error{kerr.NetworkException, syscall.ECONNREFUSED}, notWant: []error{ErrAuthentication},
			text: []string{"cannot connect to broker " + refused + ": connection refused (nothing is listening there)"}},
		{name: "no such host", cfg: Config{Brokers: []string{"nope.invalid:9092"}},
			want: []error{kerr.NetworkException}, notWant: []error{ErrAuthentication},
			text: []string{`cannot connect to broker nope.invalid:9092: no such host "nope.invalid"`}},
		{name: "plaintext client on an SSL listener", cfg: Config{Brokers: []string{ssl}},
			want: []error{ErrAuthentication}, notWant: []error{kerr.NetworkException},
			text: []string{"speaks TLS", "security.protocol=SSL or SASL_SSL"}},
		{name: "TLS client on a PLAINTEXT listener", cfg: Config{Brokers: []string{plain}, TLS: client},
			want: []error{ErrAuthentication}, notWant: []error{kerr.NetworkException},
			text: []string{"does not speak TLS", "security.protocol=PLAINTEXT or SASL_PLAINTEXT"}},
		{name: "TLS client without SASL on a SASL_SSL listener", cfg: Config{Brokers: []string{saslSSL}, TLS: client},
			want: []error{ErrAuthentication}, notWant: []error{kerr.NetworkException},
			text: []string{"the listener requires SASL authentication", "security.protocol=SASL_SSL"}},
		{name: "wrong password", cfg: Config{Brokers: []string{saslSSL}, TLS: client, SASL: sasl.Plain("alice", "wrong-secret")},
			want: []error{ErrAuthentication, kerr.SASLAuthenticationFailed}, text: []string{saslSSL}},
		{name: "both refused", cfg: Config{Brokers: []string{refused, refused2}},
			want: []error{syscall.ECONNREFUSED},
			text: []string{"no broker answered", refused + ": connection refused", refused2 + ": connection refused"}},
		{name: "ctx ended", cfg: Config{Brokers: []string{plain}}, ctx: cancelled,
			want: []error{context.Canceled}},
		{name: "after Close", cfg: Config{Brokers: []string{plain}}, closed: true,
			want: []error{ErrClosed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "no such host" {
				var dns *net.DNSError
				if _, err := net.LookupHost("nope.invalid"); !errors.As(err, &dns) || !dns.IsNotFound {
					t.Skipf("no resolver to say that nope.invalid does not exist: %v", err)
				}
			}
			tc.cfg.Logger = slog.New(slog.DiscardHandler)
			p, err := New(tc.cfg)
			require.NoError(t, err)
			defer p.Close(context.Background())
			if tc.closed {
				require.NoError(t, p.Close(context.Background()))
			}
			ctx := tc.ctx
			if ctx == nil {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
			}
			err = p.Ping(ctx)
			if len(tc.want) == 0 {
				require.NoError(t, err)
				m := p.Metrics().Producer
				assert.Zero(t, m.ConnectionCreationTotal, "Ping's connection is not the producer's")
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.ErrorIs(t, err, w)
			}
			for _, w := range tc.notWant {
				assert.NotErrorIs(t, err, w)
			}
			for _, s := range tc.text {
				assert.Contains(t, err.Error(), s)
			}
			assert.NotContains(t, err.Error(), "secret")
		})
	}
}

// TestPingTopics: Ping with topics says which of them the cluster lacks or
// refuses, each named with its code, all in one error, without creating
// any (even on a broker that auto-creates); nil when every one exists.
func TestPingTopics(t *testing.T) {
	c := newCluster(t, testbroker.Config{AllowAutoTopicCreation: true})
	require.NoError(t, c.CreateTopic("orders", 3))
	require.NoError(t, c.CreateTopic("secret", 1))
	c.Intercept(testbroker.Interceptor{Keys: []int16{3}, Match: func(_ int32, req kmsg.Request) bool {
		for _, rt := range req.(*kmsg.MetadataRequest).Topics {
			if rt.Topic != nil && *rt.Topic == "secret" {
				return true
			}
		}
		return false
	}, ErrorCode: kerr.TopicAuthorizationFailed.Code})
	p := newProducer(t, c, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	require.NoError(t, p.Ping(ctx, "orders"))
	require.NoError(t, p.Ping(ctx, "orders", "orders"))

	err := p.Ping(ctx, "orders", "never-made", "also-never")
	require.ErrorIs(t, err, kerr.UnknownTopicOrPartition)
	assert.Contains(t, err.Error(), `topic "never-made": UNKNOWN_TOPIC_OR_PARTITION`)
	assert.Contains(t, err.Error(), `topic "also-never": UNKNOWN_TOPIC_OR_PARTITION`)
	assert.NotContains(t, err.Error(), `"orders"`)
	_, rerr := c.Records("never-made", 0)
	assert.Error(t, rerr, "Ping created the topic")

	err = p.Ping(ctx, "secret")
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
	assert.Contains(t, err.Error(), `topic "secret"`)
}
