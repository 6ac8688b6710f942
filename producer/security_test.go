package producer_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl"
)

// secureCluster starts 3 brokers, each with a PLAINTEXT and a SASL_SSL
// listener, one user per mechanism, and a topic of 6 partitions.
func secureCluster(t *testing.T, lifetime time.Duration) (*testbroker.Cluster, *testbroker.TestCA) {
	t.Helper()
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	srv, err := ca.ServerConfig("127.0.0.1")
	require.NoError(t, err)
	cl, err := testbroker.New(testbroker.Config{Security: &testbroker.Security{
		Listeners: []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: testbroker.SASLSSL}},
		TLS:       srv,
		Users: []testbroker.User{
			{Mechanism: testbroker.MechPlain, Name: "alice", Password: "alice-secret"},
			{Mechanism: testbroker.MechScramSHA256, Name: "bob", Password: "bob-secret"},
			{Mechanism: testbroker.MechScramSHA512, Name: "carol", Password: "carol-secret"},
			{Mechanism: testbroker.MechOAuthBearer, Name: "dave", Password: "dave-secret-token"},
		},
		SessionLifetime: lifetime,
	}})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.NoError(t, cl.CreateTopic("secure", 6))
	return cl, ca
}

func bearer(tok string) sasl.Mechanism {
	return sasl.OAuthBearer(func(context.Context) (sasl.Token, error) { return sasl.Token{Value: tok}, nil })
}

// TestProduceSecurely produces through the SASL_SSL listeners with every
// mechanism: bootstrap, metadata and produce connections (to brokers learned
// from metadata, which advertises the SASL_SSL ports) all authenticate.
func TestProduceSecurely(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	tests := []struct {
		name string
		mech sasl.Mechanism
	}{
		{"PLAIN", sasl.Plain("alice", "alice-secret")},
		{"SCRAM-SHA-256", sasl.ScramSHA256("bob", "bob-secret")},
		{"SCRAM-SHA-512", sasl.ScramSHA512("carol", "carol-secret")},
		{"OAUTHBEARER", bearer("dave-secret-token")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, ca := secureCluster(t, 0)
			ctx := context.Background()
			p, err := producer.New(producer.Config{
				Brokers: cl.ListenerAddrs(testbroker.SASLSSL)[:1],
				TLS:     ca.ClientConfig(),
				SASL:    tt.mech,
			})
			require.NoError(t, err)
			defer p.Close(ctx)
			const n = 300
			futures := make([]*producer.Future, n)
			for i := range futures {
				futures[i] = p.Send(ctx, &producer.Record{Topic: "secure", Key: []byte(fmt.Sprint(i)), Value: []byte("v")})
			}
			for _, f := range futures {
				_, err := f.Wait(ctx)
				require.NoError(t, err)
			}
			total := 0
			for part := range int32(6) {
				recs, err := cl.Records("secure", part)
				require.NoError(t, err)
				total += len(recs)
			}
			assert.Equal(t, n, total)
			// Every broker's connection authenticated: 3 produce
			// connections plus the metadata one at least.
			assert.GreaterOrEqual(t, cl.SecurityStats().Authentications, int64(3))
			assert.Zero(t, cl.SecurityStats().Failures)
		})
	}
}

// TestProduceAcrossReauthentication keeps producing across several short
// SASL sessions (KIP-368): no record fails.
func TestProduceAcrossReauthentication(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	cl, ca := secureCluster(t, 600*time.Millisecond)
	ctx := context.Background()
	p, err := producer.New(producer.Config{
		Brokers: cl.ListenerAddrs(testbroker.SASLSSL),
		TLS:     ca.ClientConfig(),
		SASL:    sasl.ScramSHA256("bob", "bob-secret"),
		Linger:  -1,
	})
	require.NoError(t, err)
	defer p.Close(ctx)
	end := time.Now().Add(1600 * time.Millisecond)
	var futures []*producer.Future
	for time.Now().Before(end) {
		for range 20 {
			futures = append(futures, p.Send(ctx, &producer.Record{Topic: "secure", Value: []byte("v")}))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, f := range futures {
		_, err := f.Wait(ctx)
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, cl.SecurityStats().Reauthentications, int64(2))
}

// TestConfigNeverPrintsSecrets formats a Config holding credentials with
// every verb a log line might use.
func TestConfigNeverPrintsSecrets(t *testing.T) {
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.Issue("client")
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	tlsCfg := ca.ClientConfig()
	tlsCfg.Certificates = []tls.Certificate{pair}
	for _, m := range []sasl.Mechanism{
		sasl.Plain("alice", "PASSWORD-XYZZY"),
		sasl.ScramSHA256("alice", "PASSWORD-XYZZY"),
		sasl.ScramSHA512("alice", "PASSWORD-XYZZY"),
		bearer("PASSWORD-XYZZY"),
	} {
		cfg := producer.Config{Brokers: []string{"b:9093"}, TLS: tlsCfg, SASL: m}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			for _, v := range []any{cfg, &cfg} {
				out := fmt.Sprintf(verb, v)
				assert.NotContains(t, out, "XYZZY", "%s of %T", verb, v)
				assert.NotContains(t, out, "PRIVATE KEY", "%s of %T", verb, v)
				assert.False(t, strings.Contains(out, string(keyPEM[40:60])), "%s of %T shows the key", verb, v)
			}
		}
	}
}
