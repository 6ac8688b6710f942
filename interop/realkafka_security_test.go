package interop

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl"
)

// TestRealKafkaSASLSSL: samsa produces to a real Kafka's SASL_SSL listener
// (the 1-node cluster started with -sasl-ssl: a CA of the script's, SCRAM
// users made at format time, a PLAIN user in the JAAS config) with each
// mechanism, every record read back by kgo over the plaintext listener; and
// a wrong password fails every record fast with ErrAuthentication, naming
// the broker, without the password in the error; and OAUTHBEARER with a
// token from an OIDC client-credentials endpoint, configured by properties.
func TestRealKafkaSASLSSL(t *testing.T) {
	c := realKafka(t)
	brokers := realEnv(t, "SAMSA_KAFKA_SASL_SSL_BROKERS", "the 1-node cluster was started without -sasl-ssl")
	caPEM, err := os.ReadFile(realEnv(t, "SAMSA_KAFKA_CA", "no CA"))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	tlsCfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	scramUser, scramPass := realEnv(t, "SAMSA_KAFKA_SCRAM_USER", "no SCRAM user"), realEnv(t, "SAMSA_KAFKA_SCRAM_PASSWORD", "no SCRAM password")
	plainUser, plainPass := realEnv(t, "SAMSA_KAFKA_PLAIN_USER", "no PLAIN user"), realEnv(t, "SAMSA_KAFKA_PLAIN_PASSWORD", "no PLAIN password")
	secureAddrs := strings.Split(brokers, ",")

	for _, tt := range []struct {
		name string
		mech sasl.Mechanism
	}{
		{"PLAIN", sasl.Plain(plainUser, plainPass)},
		{"SCRAM-SHA-256", sasl.ScramSHA256(scramUser, scramPass)},
		{"SCRAM-SHA-512", sasl.ScramSHA512(scramUser, scramPass)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			topic := uniqueTopic("samsa-sasl-" + tt.name)
			c.createTopic(t, topic, 3, 1, nil)
			p := newSamsaProducer(t, secureAddrs, producer.Config{TLS: tlsCfg.Clone(), SASL: tt.mech, Compression: compression.Zstd})
			const n = 2000
			recs := makeSamsaRecords(topic, n)
			mds := sendAll(t, p, recs)
			got := consumeAll(t, c.addrs, topic, 3, n)
			checkDelivered(t, recs, mds, got, 3, compression.Zstd)
			require.NoError(t, p.Close(testContext(t)))
		})
	}

	// OAUTHBEARER by OIDC client credentials (KIP-768), configured from
	// Java properties only: samsa gets an unsigned JWT from a token
	// endpoint of the test's (Kafka's default unsecured validator accepts
	// those) and the broker takes "sub" as the principal.
	t.Run("OAUTHBEARER OIDC from properties", func(t *testing.T) {
		const clientSecret = "oidc-secret-q7"
		var fetches atomic.Int32
		idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, secret, ok := r.BasicAuth()
			if !ok || id != "samsa-client" || secret != clientSecret || r.FormValue("grant_type") != "client_credentials" {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"error":"invalid_client"}`)
				return
			}
			fetches.Add(1)
			now := time.Now().Unix()
			b64 := base64.RawURLEncoding.EncodeToString
			jwt := b64([]byte(`{"alg":"none"}`)) + "." + b64(fmt.Appendf(nil, `{"sub":"samsa-oidc","iat":%d,"exp":%d}`, now, now+3600)) + "."
			fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, jwt)
		}))
		t.Cleanup(idp.Close)
		t.Setenv(producer.EnvAllowedTokenURLs, idp.URL+"/token") // as Kafka 4's allowed.urls
		cfg, err := producer.ConfigFromProperties(map[string]string{
			"bootstrap.servers":                   brokers,
			"security.protocol":                   "SASL_SSL",
			"sasl.mechanism":                      "OAUTHBEARER",
			"ssl.ca.location":                     realEnv(t, "SAMSA_KAFKA_CA", "no CA"),
			"sasl.oauthbearer.token.endpoint.url": idp.URL + "/token",
			"sasl.jaas.config":                    `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="samsa-client" clientSecret="` + clientSecret + `";`,
		})
		require.NoError(t, err)
		require.NotContains(t, fmt.Sprintf("%v %+v", cfg, cfg), clientSecret)
		topic := uniqueTopic("samsa-sasl-oidc")
		c.createTopic(t, topic, 3, 1, nil)
		p := newSamsaProducer(t, secureAddrs, producer.Config{TLS: cfg.TLS, SASL: cfg.SASL})
		const n = 500
		recs := makeSamsaRecords(topic, n)
		mds := sendAll(t, p, recs)
		got := consumeAll(t, c.addrs, topic, 3, n)
		checkDelivered(t, recs, mds, got, 3, compression.None)
		require.NoError(t, p.Close(testContext(t)))
		require.Positive(t, fetches.Load(), "the token came from the endpoint")
	})

	// A Java team keeps the SCRAM password in a Kubernetes secret volume
	// and names it with DirectoryConfigProvider (KIP-297): the same
	// properties work here, allowed.paths included.
	t.Run("SCRAM password from a DirectoryConfigProvider", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(dir+"/password", []byte(scramPass), 0o600))
		cfg, err := producer.ConfigFromProperties(map[string]string{
			"bootstrap.servers":                            brokers,
			"security.protocol":                            "SASL_SSL",
			"ssl.truststore.type":                          "PEM",
			"ssl.truststore.location":                      os.Getenv("SAMSA_KAFKA_CA"),
			"sasl.mechanism":                               "SCRAM-SHA-512",
			"sasl.jaas.config":                             `org.apache.kafka.common.security.scram.ScramLoginModule required username="` + scramUser + `" password="${secrets:` + dir + `:password}";`,
			"config.providers":                             "secrets",
			"config.providers.secrets.class":               "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
			"config.providers.secrets.param.allowed.paths": dir,
		})
		require.NoError(t, err)
		topic := uniqueTopic("samsa-sasl-provider")
		c.createTopic(t, topic, 3, 1, nil)
		p := newSamsaProducer(t, secureAddrs, producer.Config{TLS: cfg.TLS, SASL: cfg.SASL})
		const n = 500
		recs := makeSamsaRecords(topic, n)
		mds := sendAll(t, p, recs)
		got := consumeAll(t, c.addrs, topic, 3, n)
		checkDelivered(t, recs, mds, got, 3, compression.None)
		require.NoError(t, p.Close(testContext(t)))
		assert.NotContains(t, fmt.Sprintf("%v", cfg), scramPass)
	})

	t.Run("wrong password", func(t *testing.T) {
		const secret = "not-the-password-x9"
		p := newSamsaProducer(t, secureAddrs, producer.Config{TLS: tlsCfg.Clone(), SASL: sasl.ScramSHA512(scramUser, secret), DeliveryTimeout: 2 * time.Minute})
		ctx := testContext(t)
		start := time.Now()
		futs := make([]*producer.Future, 20)
		for i := range futs {
			futs[i] = p.Send(ctx, &producer.Record{Topic: uniqueTopic("samsa-sasl-denied"), Value: []byte(fmt.Sprint(i))})
		}
		for i, f := range futs {
			_, err := f.Wait(ctx)
			require.Error(t, err, "record %d", i)
			assert.True(t, errors.Is(err, producer.ErrAuthentication), "record %d: %v", i, err)
			assert.NotContains(t, err.Error(), secret)
		}
		require.Less(t, time.Since(start), 20*time.Second, "records failed only after %v", time.Since(start))
		require.NoError(t, p.Close(ctx))
	})
}
