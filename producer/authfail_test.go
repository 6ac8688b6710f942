package producer_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl"
)

// TestAuthenticationFailsFast: bad credentials or an untrusted certificate
// fail every pending record within seconds, not at DeliveryTimeout, with
// an error that wraps ErrAuthentication, names the broker and never holds
// the password; Sends made while it lasts fail fast too.
func TestAuthenticationFailsFast(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	cl, ca := secureCluster(t, 0)
	other, err := testbroker.NewTestCA()
	require.NoError(t, err)
	tests := []struct {
		name  string
		tls   *tls.Config
		mech  sasl.Mechanism
		cause string
	}{
		{"bad password", ca.ClientConfig(), sasl.Plain("alice", "WRONG-secret"), "SASL_AUTHENTICATION_FAILED"},
		{"bad SCRAM password", ca.ClientConfig(), sasl.ScramSHA512("carol", "WRONG-secret"), "SASL_AUTHENTICATION_FAILED"},
		{"unknown CA", other.ClientConfig(), sasl.Plain("alice", "alice-secret"), "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			addr := cl.ListenerAddrs(testbroker.SASLSSL)[0]
			p, err := producer.New(producer.Config{
				Brokers:         []string{addr},
				TLS:             tt.tls,
				SASL:            tt.mech,
				DeliveryTimeout: 2 * time.Minute,
				MaxBlock:        time.Minute,
			})
			require.NoError(t, err)
			defer p.Close(ctx)
			start := time.Now()
			futures := make([]*producer.Future, 50)
			for i := range futures {
				futures[i] = p.Send(ctx, &producer.Record{Topic: "secure", Value: []byte("v")})
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			for _, f := range futures {
				_, err := f.Wait(wctx)
				require.Error(t, err)
				require.ErrorIs(t, err, producer.ErrAuthentication)
				assert.Contains(t, err.Error(), addr, "names the broker")
				assert.Contains(t, err.Error(), tt.cause)
				assert.NotContains(t, err.Error(), "secret")
			}
			assert.Less(t, time.Since(start), 10*time.Second)
			// While it lasts, a new Send fails fast too.
			f := p.Send(ctx, &producer.Record{Topic: "secure", Value: []byte("v")})
			_, err = f.Wait(wctx)
			require.ErrorIs(t, err, producer.ErrAuthentication)
		})
	}
}

// TestRevokedCredentialsFailFast: the token stops being accepted while the
// producer runs (a revoked credential, seen at the next KIP-368
// re-authentication or connection): records sent after that fail within
// seconds with ErrAuthentication instead of retrying until DeliveryTimeout.
func TestRevokedCredentialsFailFast(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	cl, ca := secureCluster(t, 300*time.Millisecond)
	var revoked atomic.Bool
	mech := sasl.OAuthBearer(func(context.Context) (sasl.Token, error) {
		if revoked.Load() {
			return sasl.Token{Value: "revoked-token"}, nil
		}
		return sasl.Token{Value: "dave-secret-token"}, nil
	})
	ctx := context.Background()
	var logs testutil.SyncBuffer
	p, err := producer.New(producer.Config{
		Brokers:         cl.ListenerAddrs(testbroker.SASLSSL),
		TLS:             ca.ClientConfig(),
		SASL:            mech,
		DeliveryTimeout: 2 * time.Minute,
		MaxBlock:        time.Minute,
		Logger:          slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	require.NoError(t, err)
	defer p.Close(ctx)
	_, err = p.Send(ctx, &producer.Record{Topic: "secure", Value: []byte("before")}).Wait(ctx)
	require.NoError(t, err)

	revoked.Store(true)
	time.Sleep(400 * time.Millisecond) // past the session lifetime
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var futures []*producer.Future
	for i := range 50 {
		futures = append(futures, p.Send(ctx, &producer.Record{Topic: "secure", Key: []byte{byte(i)}, Value: []byte("after")}))
	}
	failed := 0
	for _, f := range futures {
		_, err := f.Wait(wctx)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "a record waited instead of failing")
		if err != nil {
			assert.ErrorIs(t, err, producer.ErrAuthentication)
			assert.NotContains(t, err.Error(), "secret")
			failed++
		}
	}
	assert.Positive(t, failed, "records sent after the revocation fail")

	// While the credentials stay revoked, each failed metadata fetch must
	// not make the topic usable again (it used to flip back and forth on
	// every fetch: the old snapshot cleared the failure, then checkAuth set
	// it again, with a log line each way).
	time.Sleep(time.Second) // several failed fetches
	assert.NotContains(t, logs.String(), "topic usable again", "the topic flipped back while authentication kept failing")
	assert.LessOrEqual(t, strings.Count(logs.String(), "failing records of topic at once"), 1, "the topic was failed again and again")
}

// TestPanickingTokenCallbackFailsWithErrAuthentication: an OAUTHBEARER
// token callback (user code) that panics on the metadata client's and the
// dials' goroutines fails records with ErrAuthentication, naming the
// panic, as a token error does; it does not crash the program. Run in a
// child process, which must exit normally.
func TestPanickingTokenCallbackFailsWithErrAuthentication(t *testing.T) {
	testutil.InChild(t, "SAMSA_TOKEN_PANIC_CHILD", panickingTokenScenario)
}

func panickingTokenScenario(t *testing.T) {
	cl, err := testbroker.New(testbroker.Config{Security: &testbroker.Security{
		Listeners: []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: testbroker.SASLPlaintext}},
		Users:     []testbroker.User{{Mechanism: testbroker.MechOAuthBearer, Name: "dave", Password: "tok"}},
	}})
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.CreateTopic("tok", 1))
	p, err := producer.New(producer.Config{
		Brokers: cl.ListenerAddrs(testbroker.SASLPlaintext),
		SASL: sasl.OAuthBearer(func(context.Context) (sasl.Token, error) {
			panic("token callback bug")
		}),
		MaxBlock: 2 * time.Second,
	})
	require.NoError(t, err)
	ctx := context.Background()
	f := p.Send(ctx, &producer.Record{Topic: "tok", Value: []byte("v")})
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = f.Wait(wctx)
	require.ErrorIs(t, err, producer.ErrAuthentication)
	require.Contains(t, err.Error(), "token callback bug")
	require.NoError(t, p.Close(ctx))
}

// TestRecordsNotWrittenBeforeRefusedReauthAreNotOutcomeUnknown: records
// whose Produce request was queued on a connection that a refused KIP-368
// re-authentication broke before writing it were never seen by the broker:
// they fail with ErrAuthentication alone, never with ErrOutcomeUnknown
// (which says they may have been written, and makes a careful caller
// check for duplicates before sending them again).
func TestRecordsNotWrittenBeforeRefusedReauthAreNotOutcomeUnknown(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	for _, tc := range []struct {
		name string
		cfg  producer.Config
	}{
		{"idempotent", producer.Config{}},
		{"not idempotent", producer.Config{DisableIdempotence: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, ca := secureCluster(t, 300*time.Millisecond)
			var revoked atomic.Bool
			cfg := tc.cfg
			cfg.Brokers, cfg.TLS = cl.ListenerAddrs(testbroker.SASLSSL), ca.ClientConfig()
			cfg.SASL = sasl.OAuthBearer(func(context.Context) (sasl.Token, error) {
				if revoked.Load() {
					return sasl.Token{Value: "revoked-token"}, nil
				}
				return sasl.Token{Value: "dave-secret-token"}, nil
			})
			cfg.DeliveryTimeout, cfg.MaxBlock = time.Minute, time.Minute
			p, err := producer.New(cfg)
			require.NoError(t, err)
			ctx := context.Background()
			defer p.Close(ctx)
			// Every broker's connection is up and authenticated.
			for i := range 6 {
				_, err := p.Send(ctx, &producer.Record{Topic: "secure", Partition: int32(i), ExplicitPartition: true, Value: []byte("before")}).Wait(ctx)
				require.NoError(t, err)
			}
			revoked.Store(true)
			time.Sleep(400 * time.Millisecond) // past the session lifetime: the next write re-authenticates
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			var futures []*producer.Future
			for i := range 10 {
				futures = append(futures, p.Send(ctx, &producer.Record{Topic: "secure", Key: []byte{byte(i)}, Value: []byte("after")}))
			}
			for i, f := range futures {
				_, err := f.Wait(wctx)
				require.Error(t, err, "record %d: written with revoked credentials", i)
				require.NotErrorIs(t, err, context.DeadlineExceeded, "record %d waited instead of failing", i)
				assert.ErrorIs(t, err, producer.ErrAuthentication, "record %d", i)
				assert.NotErrorIs(t, err, producer.ErrOutcomeUnknown, "record %d was never written: %v", i, err)
			}
		})
	}
}
