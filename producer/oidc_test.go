package producer_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// TestOIDCLoginFromProperties: a producer built only from Java properties
// (KIP-768's OIDC client credentials login) fetches a token from an HTTPS
// token endpoint, trusted through ssl.ca.location, and the test broker's
// OAUTHBEARER listener accepts it; when the endpoint refuses the client,
// records fail fast with ErrAuthentication, the endpoint's error and never
// the client secret.
func TestOIDCLoginFromProperties(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	srv, err := ca.ServerConfig("127.0.0.1")
	require.NoError(t, err)
	cl, err := testbroker.New(testbroker.Config{Brokers: 2, Security: &testbroker.Security{
		Listeners: []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: testbroker.SASLSSL}},
		TLS:       srv,
		Users:     []testbroker.User{{Mechanism: testbroker.MechOAuthBearer, Name: "svc", Password: "oidc-access-token"}},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.NoError(t, cl.CreateTopic("secure", 2))
	files := writeTLSFiles(t, ca)

	const clientSecret = "cs-XYZZY"
	var refuse atomic.Bool
	var requests atomic.Int64
	idp := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		id, secret, ok := r.BasicAuth()
		if refuse.Load() || !ok || id != "svc-client" || secret != clientSecret || r.FormValue("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":"client %s refused"}`, id)
			return
		}
		fmt.Fprint(w, `{"access_token":"oidc-access-token","token_type":"Bearer","expires_in":3600}`)
	}))
	idp.TLS = srv
	idp.StartTLS()
	t.Cleanup(idp.Close)
	t.Setenv(producer.EnvAllowedTokenURLs, "https://other.example/token, "+idp.URL+"/oauth2/token")

	props := map[string]string{
		"bootstrap.servers":                   cl.ListenerAddrs(testbroker.SASLSSL)[0],
		"security.protocol":                   "SASL_SSL",
		"sasl.mechanism":                      "OAUTHBEARER",
		"ssl.ca.location":                     files.ca,
		"sasl.login.callback.handler.class":   "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
		"sasl.oauthbearer.token.endpoint.url": idp.URL + "/oauth2/token",
		"sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="svc-client" clientSecret="` +
			clientSecret + `" scope="kafka" extension_logicalCluster="lkc-1";`,
		"sasl.login.retry.backoff.max.ms": "500",
	}

	t.Run("accepted", func(t *testing.T) {
		cfg, err := producer.ConfigFromProperties(props)
		require.NoError(t, err)
		require.NoError(t, produceOne(t, cfg))
		recs, err := cl.Records("secure", 0)
		require.NoError(t, err)
		recs1, err := cl.Records("secure", 1)
		require.NoError(t, err)
		assert.Len(t, append(recs, recs1...), 1)
		assert.GreaterOrEqual(t, cl.SecurityStats().Authentications, int64(2), "the metadata and produce connections")
		assert.EqualValues(t, 1, requests.Load(), "every connection used the cached token")
	})

	t.Run("refused", func(t *testing.T) {
		refuse.Store(true)
		cfg, err := producer.ConfigFromProperties(props)
		require.NoError(t, err)
		start := time.Now()
		err = produceOne(t, cfg)
		require.ErrorIs(t, err, producer.ErrAuthentication)
		assert.Less(t, time.Since(start), 10*time.Second, "failed fast, not at DeliveryTimeout")
		for _, want := range []string{"token endpoint", "/oauth2/token", "HTTP 401", "invalid_client (client svc-client refused)"} {
			assert.Contains(t, err.Error(), want)
		}
		assert.NotContains(t, err.Error(), "XYZZY")
		assert.NotContains(t, fmt.Sprintf("%+v", cfg), "XYZZY")
		assert.False(t, strings.Contains(fmt.Sprintf("%#v", cfg), "XYZZY"))
	})
}

// TestOIDCTokenRefreshAcrossReauthentication: with short-lived tokens and
// short SASL sessions (KIP-368), connections re-authenticate with the new
// tokens the source fetches in time, and no record fails.
func TestOIDCTokenRefreshAcrossReauthentication(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	const tokens = 50
	users := make([]testbroker.User, tokens)
	for i := range users {
		users[i] = testbroker.User{Mechanism: testbroker.MechOAuthBearer, Name: "svc", Password: fmt.Sprint("oidc-tok-", i+1)}
	}
	cl, err := testbroker.New(testbroker.Config{Brokers: 2, Security: &testbroker.Security{
		Listeners:       []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: testbroker.SASLPlaintext}},
		Users:           users,
		SessionLifetime: 400 * time.Millisecond,
	}})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.NoError(t, cl.CreateTopic("secure", 2))
	var issued atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := min(issued.Add(1), tokens)
		fmt.Fprintf(w, `{"access_token":"oidc-tok-%d","expires_in":1}`, n)
	}))
	t.Cleanup(idp.Close)
	t.Setenv(producer.EnvAllowedTokenURLs, idp.URL)
	props := halfLifeOIDCProps(cl.ListenerAddrs(testbroker.SASLPlaintext)[0], idp.URL)
	props["sasl.login.retry.backoff.max.ms"] = "300" // a background refresh ends soon after the endpoint closes (goleak)
	props["linger.ms"] = "0"
	cfg, err := producer.ConfigFromProperties(props)
	require.NoError(t, err)
	p, err := producer.New(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	defer p.Close(ctx)
	var futures []*producer.Future
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		futures = append(futures, p.Send(ctx, &producer.Record{Topic: "secure", Value: []byte("v")}))
		time.Sleep(10 * time.Millisecond)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, f := range futures {
		_, err := f.Wait(wctx)
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, issued.Load(), int64(3), "tokens were refreshed")
	assert.GreaterOrEqual(t, cl.SecurityStats().Reauthentications, int64(2))
	assert.Zero(t, cl.SecurityStats().Failures)
}

// halfLifeOIDCProps are the properties of a producer on a SASL_PLAINTEXT
// broker that logs in with OIDC client credentials at tokenURL and
// refreshes its token half way through its lifetime (no jitter, minimum
// period or buffer).
func halfLifeOIDCProps(broker, tokenURL string) map[string]string {
	return map[string]string{
		"bootstrap.servers":                                 broker,
		"security.protocol":                                 "SASL_PLAINTEXT",
		"sasl.mechanism":                                    "OAUTHBEARER",
		"sasl.oauthbearer.token.endpoint.url":               tokenURL,
		"sasl.oauthbearer.client.credentials.client.id":     "svc-client",
		"sasl.oauthbearer.client.credentials.client.secret": "cs-XYZZY",
		"sasl.login.refresh.window.factor":                  "0.5",
		"sasl.login.refresh.window.jitter":                  "0",
		"sasl.login.refresh.min.period.seconds":             "0",
		"sasl.login.refresh.buffer.seconds":                 "0",
	}
}

// TestNoTokenRefreshOutlivesClose: a background token refresh
// (sasl.ClientCredentials, KIP-768) in progress when Close is called is the
// producer's: Close ends it and waits for it, so that nothing of the
// producer runs once Close has returned, even with a token endpoint that
// never answers (the refresh used to go on until its own timeouts, about
// 30 s by default).
func TestNoTokenRefreshOutlivesClose(t *testing.T) {
	cl, err := testbroker.New(testbroker.Config{Security: &testbroker.Security{
		Listeners:       []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: testbroker.SASLPlaintext}},
		Users:           []testbroker.User{{Mechanism: testbroker.MechOAuthBearer, Name: "svc", Password: "oidc-tok-1"}},
		SessionLifetime: 400 * time.Millisecond,
	}})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.NoError(t, cl.CreateTopic("secure", 1))
	stop := make(chan struct{})
	var asked atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm() // the body read, the server sees the client go away
		if asked.Add(1) > 1 {
			select { // the refresh: no answer
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		fmt.Fprint(w, `{"access_token":"oidc-tok-1","expires_in":2}`)
	}))
	t.Cleanup(idp.Close)
	t.Cleanup(func() { close(stop) }) // before idp.Close, which waits for the handlers
	t.Setenv(producer.EnvAllowedTokenURLs, idp.URL)
	cases := []struct {
		name string
		cfg  func(t *testing.T) producer.Config
	}{
		{"from properties", func(t *testing.T) producer.Config {
			cfg, err := producer.ConfigFromProperties(halfLifeOIDCProps(cl.ListenerAddrs(testbroker.SASLPlaintext)[0], idp.URL))
			require.NoError(t, err)
			return cfg
		}},
		{"sasl.ClientCredentials in code", func(t *testing.T) producer.Config {
			src, err := sasl.ClientCredentials(sasl.ClientCredentialsConfig{
				TokenURL: idp.URL, ClientID: "svc-client", ClientSecret: "cs-XYZZY",
				RefreshWindowFactor: 0.5, RefreshWindowJitter: -1, RefreshMinPeriod: -1, RefreshBuffer: -1,
			})
			require.NoError(t, err)
			return producer.Config{Brokers: cl.ListenerAddrs(testbroker.SASLPlaintext), SASL: sasl.OAuthBearer(src)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			asked.Store(0)
			before := goleak.IgnoreCurrent()
			cfg := tc.cfg(t)
			cfg.Linger = -1
			p, err := producer.New(cfg)
			require.NoError(t, err)
			ctx := context.Background()
			// Records keep the connections re-authenticating (KIP-368),
			// each time asking for the token: past half its lifetime,
			// the source refreshes it in the background.
			for end := time.Now().Add(10 * time.Second); asked.Load() < 2 && time.Now().Before(end); {
				_, err := p.Send(ctx, &producer.Record{Topic: "secure", Value: []byte("v")}).Wait(ctx)
				require.NoError(t, err)
				time.Sleep(20 * time.Millisecond)
			}
			require.EqualValues(t, 2, asked.Load(), "the background refresh started")
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, p.Close(cctx))
			require.NoError(t, goleak.Find(before), "goroutines left after Close returned nil")
		})
	}
}

// TestAssertionLoginFromProperties: logins without a client secret,
// built only from Java properties, reach the test broker's OAUTHBEARER
// listener through an IdP that verifies each assertion's signature and
// claims: KIP-1139's jwt-bearer grant (JwtBearerJwtRetriever) with an
// RS256 key, and KIP-1258's client assertion (private_key_jwt) for the
// client credentials grant, signed with an ES256 key (the default
// retriever, chosen by sasl.oauthbearer.assertion.claim.iss) or read from
// sasl.oauthbearer.assertion.file. The passphrase never prints.
func TestAssertionLoginFromProperties(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	cl, err := testbroker.New(testbroker.Config{Brokers: 1, Security: &testbroker.Security{
		Listeners: []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: testbroker.SASLPlaintext}},
		Users:     []testbroker.User{{Mechanism: testbroker.MechOAuthBearer, Name: "svc", Password: "minted-for-svc"}},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.NoError(t, cl.CreateTopic("secure", 1))
	dir := t.TempDir()
	rsaFile, rsaKey := testutil.WriteKey(t, dir, "rsa", "pkcs1")
	ecFile, ecKey := testutil.WriteKey(t, dir, "ec", "pkcs8")

	base := func(tokenURL string) map[string]string {
		return map[string]string{
			"bootstrap.servers":                   cl.ListenerAddrs(testbroker.SASLPlaintext)[0],
			"security.protocol":                   "SASL_PLAINTEXT",
			"sasl.mechanism":                      "OAUTHBEARER",
			"sasl.oauthbearer.token.endpoint.url": tokenURL,
			"sasl.jaas.config":                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
			"sasl.login.retry.backoff.max.ms":     "300",
		}
	}
	cases := []struct {
		name  string
		want  testutil.AssertionWant
		props func(p *testutil.OAuthIdP) map[string]string
	}{
		{"jwt-bearer RS256", testutil.AssertionWant{Grant: testutil.GrantJWTBearer, Alg: "RS256", Key: rsaKey.Public(), Iss: "svc", Sub: "svc", Aud: "kafka-idp", ExpSeconds: 300, NbfSeconds: 60},
			func(p *testutil.OAuthIdP) map[string]string {
				return setProps(base(p.TokenURL),
					"sasl.oauthbearer.jwt.retriever.class", "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever",
					"sasl.oauthbearer.assertion.private.key.file", rsaFile,
					"sasl.oauthbearer.assertion.claim.iss", "svc", "sasl.oauthbearer.assertion.claim.sub", "svc",
					"sasl.oauthbearer.assertion.claim.aud", "kafka-idp")
			}},
		{"private_key_jwt ES256", testutil.AssertionWant{Grant: testutil.GrantClientCredentials, ClientID: "svc", Alg: "ES256", Key: ecKey.Public(), Iss: "svc", Sub: "svc", ExpSeconds: 60, NbfSeconds: 5, JTI: true},
			func(p *testutil.OAuthIdP) map[string]string {
				return setProps(base(p.TokenURL),
					"sasl.oauthbearer.client.credentials.client.id", "svc",
					"sasl.oauthbearer.assertion.private.key.file", ecFile,
					"sasl.oauthbearer.assertion.algorithm", "ES256",
					"sasl.oauthbearer.assertion.claim.iss", "svc", "sasl.oauthbearer.assertion.claim.sub", "svc",
					"sasl.oauthbearer.assertion.claim.exp.seconds", "60", "sasl.oauthbearer.assertion.claim.nbf.seconds", "5",
					"sasl.oauthbearer.assertion.claim.jti.include", "true")
			}},
		{"private_key_jwt from a file", testutil.AssertionWant{Grant: testutil.GrantClientCredentials, Alg: "RS256", Key: rsaKey.Public(), Iss: "ext", Sub: "ext", ExpSeconds: 600, NbfSeconds: 0},
			func(p *testutil.OAuthIdP) map[string]string {
				now := time.Now().Unix()
				a, err := testutil.SignJWT(rsaKey, "RS256", map[string]any{}, map[string]any{"iss": "ext", "sub": "ext", "aud": "", "iat": now, "exp": now + 600, "nbf": now})
				require.NoError(t, err)
				file := filepath.Join(t.TempDir(), "assertion.jwt")
				require.NoError(t, os.WriteFile(file, []byte(a), 0o600))
				return setProps(base(p.TokenURL),
					"sasl.oauthbearer.jwt.retriever.class", "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever",
					"sasl.oauthbearer.assertion.file", file)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := testutil.NewOAuthIdP(t, tc.want)
			p.FixedToken = "minted-for-svc"
			t.Setenv(producer.EnvAllowedTokenURLs, p.TokenURL)
			props := tc.props(p)
			var files []string
			for _, k := range []string{"sasl.oauthbearer.assertion.private.key.file", "sasl.oauthbearer.assertion.file"} {
				if f := props[k]; f != "" {
					files = append(files, f)
				}
			}
			t.Setenv(producer.EnvAllowedFiles, strings.Join(files, ","))
			cfg, err := producer.ConfigFromProperties(props)
			require.NoError(t, err)
			require.NoError(t, produceOne(t, cfg), "IdP refusals: %v", p.Failures())
			assert.Empty(t, p.Failures())
			assert.Equal(t, 1, p.Issued())
		})
	}
	recs, err := cl.Records("secure", 0)
	require.NoError(t, err)
	assert.Len(t, recs, len(cases))
}

// setProps sets the key-value pairs kv in m and returns m.
func setProps(m map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
