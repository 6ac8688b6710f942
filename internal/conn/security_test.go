package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/sasl"
)

// secureCluster starts one broker with a PLAINTEXT, a SASL_SSL, an SSL and
// a SASL_PLAINTEXT listener and one user per mechanism.
func secureCluster(t *testing.T, lifetime time.Duration) (*testbroker.Cluster, *testbroker.TestCA) {
	t.Helper()
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	srv, err := ca.ServerConfig("127.0.0.1", "localhost")
	require.NoError(t, err)
	cl, err := testbroker.New(testbroker.Config{Brokers: 1, Security: &testbroker.Security{
		Listeners: []testbroker.Listener{
			{Protocol: testbroker.Plaintext},
			{Protocol: testbroker.SASLSSL},
			{Protocol: testbroker.SSL},
			{Protocol: testbroker.SASLPlaintext},
		},
		TLS: srv,
		Users: []testbroker.User{
			{Mechanism: testbroker.MechPlain, Name: "alice", Password: "alice-pw"},
			{Mechanism: testbroker.MechScramSHA256, Name: "bob", Password: "bob-pw"},
			{Mechanism: testbroker.MechScramSHA512, Name: "carol", Password: "carol-pw"},
			{Mechanism: testbroker.MechOAuthBearer, Name: "dave", Password: "dave-token"},
		},
		SessionLifetime: lifetime,
	}})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.NoError(t, cl.CreateTopic("t", 1))
	return cl, ca
}

func token(v string) sasl.Mechanism {
	return sasl.OAuthBearer(func(context.Context) (sasl.Token, error) { return sasl.Token{Value: v}, nil })
}

func TestSecureDial(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	cl, ca := secureCluster(t, 0)
	saslSSL := cl.ListenerAddrs(testbroker.SASLSSL)[0]
	tlsOnly := cl.ListenerAddrs(testbroker.SSL)[0]
	saslPlain := cl.ListenerAddrs(testbroker.SASLPlaintext)[0]
	plain := cl.Addrs()[0]
	wrongHost := ca.ClientConfig()
	wrongHost.ServerName = "kafka.example.com"
	otherCA, err := testbroker.NewTestCA()
	require.NoError(t, err)

	tests := []struct {
		name    string
		addr    string
		tls     *tls.Config
		mech    sasl.Mechanism
		wantErr error // nil: the dial and a Metadata request succeed
	}{
		{"SASL_SSL PLAIN", saslSSL, ca.ClientConfig(), sasl.Plain("alice", "alice-pw"), nil},
		{"SASL_SSL SCRAM-SHA-256", saslSSL, ca.ClientConfig(), sasl.ScramSHA256("bob", "bob-pw"), nil},
		{"SASL_SSL SCRAM-SHA-512", saslSSL, ca.ClientConfig(), sasl.ScramSHA512("carol", "carol-pw"), nil},
		{"SASL_SSL OAUTHBEARER", saslSSL, ca.ClientConfig(), token("dave-token"), nil},
		{"SASL_PLAINTEXT SCRAM-SHA-256", saslPlain, nil, sasl.ScramSHA256("bob", "bob-pw"), nil},
		{"SSL", tlsOnly, ca.ClientConfig(), nil, nil},
		{"PLAINTEXT", plain, nil, nil, nil},
		{"bad PLAIN password", saslSSL, ca.ClientConfig(), sasl.Plain("alice", "WRONG-pw"), kerr.SASLAuthenticationFailed},
		{"bad SCRAM password", saslSSL, ca.ClientConfig(), sasl.ScramSHA256("bob", "WRONG-pw"), kerr.SASLAuthenticationFailed},
		{"SCRAM user of the other hash", saslSSL, ca.ClientConfig(), sasl.ScramSHA512("bob", "bob-pw"), kerr.SASLAuthenticationFailed},
		{"bad token", saslSSL, ca.ClientConfig(), token("WRONG-token"), kerr.SASLAuthenticationFailed},
		{"unknown mechanism", saslSSL, ca.ClientConfig(), fakeMech{}, kerr.ForCode(33)},
		{"mechanism fails on the client", saslSSL, ca.ClientConfig(), sasl.Plain("", ""), ErrAuthentication},
		{"unknown CA", saslSSL, otherCA.ClientConfig(), sasl.Plain("alice", "alice-pw"), ErrAuthentication},
		{"wrong host name", saslSSL, wrongHost, sasl.Plain("alice", "alice-pw"), ErrAuthentication},
		// Listener mismatches: TestDialErrorsNameTheirCause.
		{"SASL to an SSL listener", tlsOnly, ca.ClientConfig(), sasl.Plain("alice", "alice-pw"), ErrAuthentication},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Dial(context.Background(), tt.addr, Config{TLS: tt.tls, SASL: tt.mech, DialTimeout: 5 * time.Second})
			if tt.wantErr != nil {
				require.Error(t, err)
				assert.ErrorIs(t, err, tt.wantErr)
				assert.ErrorIs(t, err, ErrAuthentication)
				assert.NotErrorIs(t, err, kerr.NetworkException, "not retriable")
				assert.Contains(t, err.Error(), tt.addr, "names the broker")
				assert.NotContains(t, err.Error(), "-pw")
				assert.NotContains(t, err.Error(), "token\x00")
				return
			}
			require.NoError(t, err)
			defer c.Close()
			resp, err := c.Do(context.Background(), metadataReq("t"))
			require.NoError(t, err)
			mr := resp.(*kmsg.MetadataResponse)
			require.Len(t, mr.Brokers, 1)
			assert.Equal(t, tt.addr, fmt.Sprintf("%s:%d", mr.Brokers[0].Host, mr.Brokers[0].Port), "advertises the listener it came in on")
		})
	}
}

// A client without SASL on a SASL listener is closed at its first request
// past ApiVersions. It was a network error ("EOF"), retried until the
// records' timeout; a second connection's SaslHandshake now tells the
// listener wants SASL: the error names security.protocol and wraps
// ErrAuthentication, as the TLS mismatches do. A plaintext listener that
// closes a connection at its first request stays a network error.
func TestNoSASLOnSASLListener(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	cl, ca := secureCluster(t, 0)
	cases := []struct {
		name string
		addr string
		tls  bool
		want string // "" for a network error
		drop bool
	}{
		{"SASL_PLAINTEXT", cl.ListenerAddrs(testbroker.SASLPlaintext)[0], false, "set security.protocol=SASL_PLAINTEXT or SASL_SSL and sasl.mechanism (Config.SASL); the listener enables [\"PLAIN\" \"SCRAM-SHA-256\" \"SCRAM-SHA-512\" \"OAUTHBEARER\"]", false},
		{"SASL_SSL with TLS", cl.ListenerAddrs(testbroker.SASLSSL)[0], true, "set security.protocol=SASL_SSL and sasl.mechanism", false},
		{"a plaintext listener closing the connection", cl.ListenerAddrs(testbroker.Plaintext)[0], false, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.drop {
				defer cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, Times: 1, Drop: true})()
			}
			cfg := Config{}
			if tc.tls {
				cfg.TLS = ca.ClientConfig()
				cfg.TLS.ServerName = "localhost"
			}
			c, err := Dial(context.Background(), tc.addr, cfg)
			require.NoError(t, err) // ApiVersions is allowed before authentication
			defer c.Close()
			_, err = c.Do(context.Background(), metadataReq("t"))
			if tc.want == "" {
				assert.ErrorIs(t, err, kerr.NetworkException)
				assert.NotErrorIs(t, err, ErrAuthentication)
				return
			}
			assert.ErrorIs(t, err, ErrAuthentication)
			assert.NotErrorIs(t, err, kerr.NetworkException, "not retried")
			assert.ErrorContains(t, err, "cannot connect to broker "+tc.addr+": the listener requires SASL authentication, but the client connects without it")
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

type fakeMech struct{}

func (fakeMech) Name() string { return "NOPE" }
func (fakeMech) Start(context.Context, string) (sasl.Session, []byte, error) {
	return nil, nil, errors.New("unreachable")
}

// TestReauthentication keeps requests pipelined across several SASL
// session lifetimes: each connection re-authenticates before its session
// ends (KIP-368; the broker closes a connection that sends anything else
// after it), and no request fails.
func TestReauthentication(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	mechs := []struct {
		name string
		m    sasl.Mechanism
	}{
		{"PLAIN", sasl.Plain("alice", "alice-pw")},
		{"SCRAM-SHA-512", sasl.ScramSHA512("carol", "carol-pw")},
		{"OAUTHBEARER", token("dave-token")},
	}
	for _, tt := range mechs {
		t.Run(tt.name, func(t *testing.T) {
			// A 1.2 s session: the connection re-authenticates 0.9 s in
			// (setReauth leaves a quarter of it for the requests in
			// flight), about three times in the 3.2 s below.
			cl, ca := secureCluster(t, 1200*time.Millisecond)
			c, err := Dial(context.Background(), cl.ListenerAddrs(testbroker.SASLSSL)[0], Config{TLS: ca.ClientConfig(), SASL: tt.m})
			require.NoError(t, err)
			defer c.Close()
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				failed []error
			)
			end := time.Now().Add(3200 * time.Millisecond)
			for time.Now().Before(end) {
				// Keep 8 requests in flight at a time.
				for range 8 {
					wg.Add(1)
					c.Send(metadataReq("t"), func(_ kmsg.Response, err error) {
						defer wg.Done()
						if err != nil {
							mu.Lock()
							failed = append(failed, err)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				time.Sleep(5 * time.Millisecond)
			}
			require.Empty(t, failed)
			require.NoError(t, c.Err())
			st := cl.SecurityStats()
			assert.Equal(t, int64(1), st.Authentications)
			assert.GreaterOrEqual(t, st.Reauthentications, int64(2), "about one per 900 ms")
		})
	}
}

// A re-authentication the broker rejects breaks the connection with an
// authentication error.
func TestReauthenticationRejected(t *testing.T) {
	cl, ca := secureCluster(t, 200*time.Millisecond)
	var calls int
	var mu sync.Mutex
	m := sasl.OAuthBearer(func(context.Context) (sasl.Token, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls > 1 {
			return sasl.Token{Value: "revoked"}, nil
		}
		return sasl.Token{Value: "dave-token"}, nil
	})
	err := requestAfterReauth(t, cl.ListenerAddrs(testbroker.SASLSSL)[0], ca, m)
	assert.True(t, strings.Contains(err.Error(), "OAUTHBEARER"), err.Error())
}

// requestAfterReauth dials addr with m, makes a request, waits past the
// 200 ms session so that the next request re-authenticates, and returns
// that request's error, which must be an authentication error that broke
// the connection.
func requestAfterReauth(t *testing.T, addr string, ca *testbroker.TestCA, m sasl.Mechanism) error {
	t.Helper()
	c, err := Dial(context.Background(), addr, Config{TLS: ca.ClientConfig(), SASL: m})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Do(context.Background(), metadataReq("t"))
	require.NoError(t, err)
	time.Sleep(250 * time.Millisecond)
	_, err = c.Do(context.Background(), metadataReq("t"))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrAuthentication)
	// The request waited for the exchange and never reached the socket.
	assert.ErrorIs(t, err, ErrNotSent)
	<-c.Done()
	return err
}

// panicStepMech wraps a mechanism whose session's Step panics.
type panicStepMech struct{ sasl.Mechanism }

type panicStepSession struct{}

func (panicStepSession) Step([]byte) (bool, []byte, error) { panic("step bug") }

func (m panicStepMech) Start(ctx context.Context, addr string) (sasl.Session, []byte, error) {
	_, msg, err := m.Mechanism.Start(ctx, addr)
	return panicStepSession{}, msg, err
}

// A mechanism's Start or Step that panics (user code: a token callback)
// fails the exchange with ErrAuthentication, at Dial and at
// re-authentication, instead of crashing the program; the panic's value
// is printed capped.
func TestPanickingMechanismFailsAuthentication(t *testing.T) {
	cl, ca := secureCluster(t, 200*time.Millisecond)
	addr := cl.ListenerAddrs(testbroker.SASLSSL)[0]
	long := strings.Repeat("x", 5000)
	for _, tt := range []struct {
		name, want string
		mech       sasl.Mechanism
	}{
		{"Start", "Start panicked: token bug", sasl.OAuthBearer(func(context.Context) (sasl.Token, error) { panic("token bug") })},
		{"Step", "Step panicked: step bug", panicStepMech{sasl.ScramSHA256("bob", "bob-pw")}},
		{"long panic", "Start panicked: xxx", sasl.OAuthBearer(func(context.Context) (sasl.Token, error) { panic(long) })},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Dial(context.Background(), addr, Config{TLS: ca.ClientConfig(), SASL: tt.mech, DialTimeout: 5 * time.Second})
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrAuthentication)
			assert.Contains(t, err.Error(), tt.want)
			assert.Less(t, len(err.Error()), 400, "the panic's value is capped")
		})
	}
	t.Run("re-authentication", func(t *testing.T) {
		var calls atomic.Int32
		m := sasl.OAuthBearer(func(context.Context) (sasl.Token, error) {
			if calls.Add(1) > 1 {
				panic("refresh bug")
			}
			return sasl.Token{Value: "dave-token"}, nil
		})
		assert.Contains(t, requestAfterReauth(t, addr, ca, m).Error(), "refresh bug")
	})
}
