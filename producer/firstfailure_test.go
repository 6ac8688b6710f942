package producer

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
)

// captureHandler records every log record it gets, at every level.
type captureHandler struct {
	mu   sync.Mutex
	recs []capturedLog
}

type capturedLog struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	c := capturedLog{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		c.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, c)
	h.mu.Unlock()
	return nil
}

func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }

func (h *captureHandler) logs() []capturedLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]capturedLog(nil), h.recs...)
}

// captureDefault makes a captureHandler slog's default for the test.
func captureDefault(t *testing.T) *captureHandler {
	h := &captureHandler{}
	old := slog.Default()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() { slog.SetDefault(old) })
	return h
}

// failedRefreshes counts failed Metadata requests.
type failedRefreshes struct{ n atomic.Int32 }

func (f *failedRefreshes) OnMetadataRefreshed(m MetadataRefresh) {
	if m.Err != nil {
		f.n.Add(1)
	}
}

// TestDefaultLoggerWarnsOnFirstDialFailure: without a Logger, the first
// failure to reach the cluster is logged at once to slog's default logger,
// with its cause, and then not again for every retry nor for every record
// (issue 22); Info and Debug lines stay out of it. A discarding Logger
// silences it.
func TestDefaultLoggerWarnsOnFirstDialFailure(t *testing.T) {
	cases := []struct {
		name     string
		silenced bool
		stop     bool // a cluster whose only broker stops, instead of a refused address
	}{
		{"nothing listening", false, false},
		{"the only broker stops", false, true},
		{"silenced", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := captureDefault(t)
			addr := testutil.RefusedAddr(t)
			var c *testbroker.Cluster
			if tc.stop {
				c = newCluster(t, testbroker.Config{Brokers: 1})
				require.NoError(t, c.CreateTopic("events", 1))
				addr = c.Addrs()[0]
			}
			fr := &failedRefreshes{}
			cfg := Config{Brokers: []string{addr}, Hooks: []Hook{fr}, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond}
			if tc.silenced {
				cfg.Logger = slog.New(slog.DiscardHandler)
			}
			p, err := New(cfg)
			require.NoError(t, err)
			closeP := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				_ = p.Close(ctx)
			}
			t.Cleanup(closeP)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tc.stop {
				_, err := p.Send(ctx, &Record{Topic: "events", Value: []byte("before")}).Wait(ctx)
				require.NoError(t, err)
				require.NoError(t, c.StopBroker(0))
			}
			before := fr.n.Load()
			for i := range 200 {
				p.Send(ctx, &Record{Topic: "events", Value: fmt.Appendf(nil, "r%d", i)})
			}
			// Several retries, each failing the same way.
			require.Eventually(t, func() bool { return fr.n.Load() >= before+5 }, 20*time.Second, 5*time.Millisecond)
			closeP()

			logs := h.logs()
			if tc.silenced {
				assert.Empty(t, logs)
				return
			}
			seen := map[string]int{}
			named := false
			for _, l := range logs {
				assert.GreaterOrEqual(t, l.level, slog.LevelWarn, "only Warn and above: %s %v", l.msg, l.attrs)
				seen[l.msg+" "+l.attrs["addr"]]++
				if strings.Contains(l.attrs["err"], "cannot connect to broker "+addr+": connection refused (nothing is listening there)") {
					named = true
				}
			}
			assert.True(t, named, "a warning names the broker and the cause: %v", logs)
			for k, n := range seen {
				assert.Equal(t, 1, n, "%q logged %d times", k, n)
			}
			assert.Less(t, len(logs), 10, "not per record nor per retry: %v", logs)
		})
	}
}

// tlsListenersCluster starts one broker with a PLAINTEXT, an SSL and a
// SASL_SSL listener (user alice, PLAIN), and the topic "events".
func tlsListenersCluster(t *testing.T) (c *testbroker.Cluster, plain, ssl string, client *tls.Config) {
	t.Helper()
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	srv, err := ca.ServerConfig("127.0.0.1")
	require.NoError(t, err)
	c = newCluster(t, testbroker.Config{Brokers: 1, Security: &testbroker.Security{
		Listeners: []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: testbroker.SSL}, {Protocol: testbroker.SASLSSL}},
		TLS:       srv,
		Users:     []testbroker.User{{Mechanism: testbroker.MechPlain, Name: "alice", Password: "alice-secret"}},
	}})
	require.NoError(t, c.CreateTopic("events", 1))
	return c, c.Addrs()[0], c.ListenerAddrs(testbroker.SSL)[0], ca.ClientConfig()
}

// testMismatchFailsFast: a producer whose listener does not speak its
// protocol fails its records at once with an error that says so and names
// the property to change, as for a failed authentication, instead of
// after MaxBlock with "not present in metadata".
func testMismatchFailsFast(t *testing.T, tlsClient bool, want ...string) {
	_, plain, ssl, client := tlsListenersCluster(t)
	cfg := Config{Brokers: []string{ssl}, Logger: slog.New(slog.DiscardHandler)} // MaxBlock: its 60 s default
	if tlsClient {
		cfg.Brokers, cfg.TLS = []string{plain}, client
	}
	p, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 { // the first record waits for metadata, the second fails in Send
		_, err := p.Send(ctx, &Record{Topic: "events", Value: []byte("x")}).Wait(ctx)
		require.Error(t, err, "record %d", i)
		require.NoError(t, ctx.Err(), "record %d failed only when the test gave up: %v", i, err)
		assert.ErrorIs(t, err, ErrAuthentication)
		assert.False(t, IsRetriable(err))
		assert.NotErrorIs(t, err, ErrDeliveryTimeout, "failed fast, not after MaxBlock")
		for _, w := range want {
			assert.Contains(t, err.Error(), w)
		}
	}
}

func TestPlaintextClientOnTLSListenerFailsFast(t *testing.T) {
	testMismatchFailsFast(t, false, "speaks TLS", "security.protocol=SSL or SASL_SSL")
}

func TestTLSClientOnPlaintextListenerFailsFast(t *testing.T) {
	testMismatchFailsFast(t, true, "does not speak TLS", "security.protocol=PLAINTEXT or SASL_PLAINTEXT")
}

// TestUnreachableClusterFailsWithTheCause: records for a cluster that
// cannot be reached wait for MaxBlock or DeliveryTimeout, as in Java (a
// refused connection may be a broker restarting), and then fail with the
// cause, naming the broker: never "the broker disconnected before
// responding" for a dial that was refused.
func TestUnreachableClusterFailsWithTheCause(t *testing.T) {
	cases := []struct {
		name  string
		known bool // the topic was known and its leader stops; else nothing ever listened
		want  string
	}{
		{"never reached", false, "(MaxBlock 300ms)"},
		{"leader stopped", true, "expired after 500ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := testutil.RefusedAddr(t)
			var c *testbroker.Cluster
			if tc.known {
				c = newCluster(t, testbroker.Config{Brokers: 1})
				require.NoError(t, c.CreateTopic("events", 1))
				addr = c.Addrs()[0]
			}
			p, err := New(Config{Brokers: []string{addr}, Logger: slog.New(slog.DiscardHandler),
				RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond,
				MaxBlock: 300 * time.Millisecond, RequestTimeout: 200 * time.Millisecond, DeliveryTimeout: 500 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tc.known {
				_, err := p.Send(ctx, &Record{Topic: "events", Value: []byte("before")}).Wait(ctx)
				require.NoError(t, err)
				require.NoError(t, c.StopBroker(0))
			}
			_, err = p.Send(ctx, &Record{Topic: "events", Value: []byte("x")}).Wait(ctx)
			require.ErrorIs(t, err, ErrDeliveryTimeout)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "cannot connect to broker "+addr+": connection refused (nothing is listening there)")
			assert.NotContains(t, err.Error(), "disconnected before responding")
		})
	}
}

// TestPlaintextClientOnSASLListenerFailsFast: a client without SASL
// dialling a SASL listener got its ApiVersions answered, then the
// connection closed at its Metadata request (Kafka's
// SaslServerAuthenticator refuses any other request before SaslHandshake):
// each record waited MaxBlock (60 s) for "the broker disconnected before
// responding: EOF". A second connection's SaslHandshake now tells the
// listener wants SASL, and records fail at once naming security.protocol,
// as for a TLS listener dialled in plaintext.
func TestPlaintextClientOnSASLListenerFailsFast(t *testing.T) {
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	srv, err := ca.ServerConfig("127.0.0.1")
	require.NoError(t, err)
	c := newCluster(t, testbroker.Config{Brokers: 1, Security: &testbroker.Security{
		Listeners: []testbroker.Listener{{Protocol: testbroker.SASLPlaintext}, {Protocol: testbroker.SASLSSL}},
		TLS:       srv,
		Users:     []testbroker.User{{Mechanism: testbroker.MechPlain, Name: "alice", Password: "alice-secret"}},
	}})
	require.NoError(t, c.CreateTopic("events", 1))
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"SASL_PLAINTEXT listener, no SASL", Config{Brokers: c.ListenerAddrs(testbroker.SASLPlaintext)},
			"set security.protocol=SASL_PLAINTEXT or SASL_SSL and sasl.mechanism (Config.SASL); the listener enables [\"PLAIN\"]"},
		{"SASL_SSL listener, TLS without SASL", Config{Brokers: c.ListenerAddrs(testbroker.SASLSSL), TLS: ca.ClientConfig()},
			"set security.protocol=SASL_SSL and sasl.mechanism (Config.SASL); the listener enables [\"PLAIN\"]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Logger = slog.New(slog.DiscardHandler) // MaxBlock: its 60 s default
			p, err := New(cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := range 2 {
				_, err := p.Send(ctx, &Record{Topic: "events", Value: []byte("x")}).Wait(ctx)
				require.Error(t, err, "record %d", i)
				require.NoError(t, ctx.Err(), "record %d failed only when the test gave up: %v", i, err)
				assert.ErrorIs(t, err, ErrAuthentication)
				assert.False(t, IsRetriable(err))
				assert.NotErrorIs(t, err, ErrDeliveryTimeout, "failed fast, not after MaxBlock")
				assert.Contains(t, err.Error(), "the listener requires SASL authentication, but the client connects without it")
				assert.Contains(t, err.Error(), tc.want)
			}
		})
	}
}
