package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
)

// TestDialErrorsNameTheirCause: a connection that cannot be set up says
// what happened (issue 22), not "the broker disconnected before
// responding": a refused port, an unresolvable host, a timeout, a listener
// speaking TLS to a plaintext client or plaintext to a TLS one. Network
// failures stay retriable (kerr.NetworkException); the mismatches are not
// (ErrAuthentication).
func TestDialErrorsNameTheirCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := ln.Addr().String()
	require.NoError(t, ln.Close())
	cl, ca := secureCluster(t, 0)
	blocking := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	cases := []struct {
		name  string
		addr  string
		ctx   context.Context
		cfg   Config
		text  string // the error's whole text after "cannot connect to broker <addr>: "
		class error  // kerr.NetworkException or ErrAuthentication
		also  error  // another error it wraps, if any
	}{
		{"refused", refused, context.Background(), Config{},
			"connection refused (nothing is listening there)", kerr.NetworkException, syscall.ECONNREFUSED},
		{"no such host", "nope.invalid:9092", context.Background(), Config{},
			`no such host "nope.invalid"`, kerr.NetworkException, nil},
		{"connect timeout", "10.1.2.3:9092", context.Background(), Config{Dialer: blocking, DialTimeout: 100 * time.Millisecond},
			"timed out after 100ms", kerr.NetworkException, context.DeadlineExceeded},
		{"ApiVersions never answered", silentListener(t), context.Background(), Config{DialTimeout: 50 * time.Millisecond},
			"timed out after 50ms in the ApiVersions handshake", kerr.NetworkException, context.DeadlineExceeded},
		{"cancelled", silentListener(t), cancelled, Config{},
			"stopped: context canceled", kerr.NetworkException, context.Canceled},
		{"plaintext client on an SSL listener", cl.ListenerAddrs(testbroker.SSL)[0], context.Background(), Config{},
			speaksTLS, ErrAuthentication, nil},
		{"plaintext client on a SASL_SSL listener", cl.ListenerAddrs(testbroker.SASLSSL)[0], context.Background(), Config{},
			speaksTLS, ErrAuthentication, nil},
		{"TLS client on a PLAINTEXT listener", cl.Addrs()[0], context.Background(), Config{TLS: ca.ClientConfig()},
			doesNotSpeakTLS, ErrAuthentication, nil},
		{"TLS client on a SASL_PLAINTEXT listener", cl.ListenerAddrs(testbroker.SASLPlaintext)[0], context.Background(), Config{TLS: ca.ClientConfig()},
			doesNotSpeakTLS, ErrAuthentication, nil},
		// Issue 33 item 7: a listener that closes at the ApiVersions
		// request without a TLS alert (a TLS proxy or load balancer, a
		// non-Kafka service) is told as librdkafka tells it.
		{"closed at ApiVersions, plaintext", closingListener(t, nil), context.Background(), Config{},
			"the broker closed the connection during the ApiVersions handshake" + closedInPlaintext, kerr.NetworkException, nil},
		{"closed at ApiVersions, after the TLS handshake", closingListener(t, ca), context.Background(), Config{TLS: ca.ClientConfig()},
			"the broker closed the connection during the ApiVersions handshake" + closedInTLS, kerr.NetworkException, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "no such host" {
				var dns *net.DNSError
				if _, err := net.LookupHost("nope.invalid"); !errors.As(err, &dns) || !dns.IsNotFound {
					t.Skipf("no resolver to say that nope.invalid does not exist: %v", err)
				}
			}
			if tc.cfg.DialTimeout == 0 {
				tc.cfg.DialTimeout = 5 * time.Second
			}
			c, err := Dial(tc.ctx, tc.addr, tc.cfg)
			if err == nil {
				_ = c.Close()
				t.Fatal("Dial succeeded")
			}
			assert.Equal(t, "cannot connect to broker "+tc.addr+": "+tc.text, err.Error())
			assert.NotContains(t, err.Error(), "disconnected before responding")
			assert.ErrorIs(t, err, tc.class)
			if tc.class == ErrAuthentication {
				assert.NotErrorIs(t, err, kerr.NetworkException, "a mismatch is not retried")
			} else {
				assert.True(t, kerr.IsRetriable(err), "a network failure is retried")
			}
			if tc.also != nil {
				assert.ErrorIs(t, err, tc.also)
			}
		})
	}
}

// closingListener listens on loopback (with TLS when ca is set, finishing
// the handshake), reads the first bytes of each connection and closes it
// without a word, as a TLS proxy given plaintext or a service that is not
// Kafka may; closed with the test.
func closingListener(t *testing.T, ca *testbroker.TestCA) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if ca != nil {
		srv, err := ca.ServerConfig("127.0.0.1")
		require.NoError(t, err)
		ln = tls.NewListener(ln, srv)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Read(make([]byte, 64)) // the TLS handshake, then the ApiVersions request
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

// TestTLSProbeNeedsAPlaintextAnswer: a TLS handshake that the broker ends by
// closing the connection is a listener mismatch only when the listener
// answers a plaintext ApiVersions request; a broker that closes every
// connection (one shedding load, say) stays a retriable network error.
func TestTLSProbeNeedsAPlaintextAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	defer func() { _ = ln.Close(); <-done }()
	_, err = Dial(context.Background(), ln.Addr().String(), Config{TLS: &tls.Config{InsecureSkipVerify: true}, DialTimeout: 5 * time.Second})
	require.Error(t, err)
	assert.ErrorIs(t, err, kerr.NetworkException)
	assert.NotErrorIs(t, err, ErrAuthentication)
	assert.Equal(t, "cannot connect to broker "+ln.Addr().String()+": the broker closed the connection during the TLS handshake", err.Error())
}
