package interop

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/producer"
)

// TestRealKafkaOAuthAssertion: OAuth without a client secret against real
// Kafka 4.4's OAUTH listener (the 1-node cluster started with -sasl-ssl),
// whose OAuthBearerValidatorCallbackHandler verifies every token's RS256
// signature with the JWKS of the script's identity-provider key, its
// audience and its issuer. samsa, configured by Java properties only, sends the test's
// token endpoint a signed assertion, which the endpoint verifies (signature,
// iss, sub, aud, iat, exp, nbf, jti) before it mints a token with that
// key: KIP-1139's jwt-bearer grant with an RS256 key, and KIP-1258's
// client assertion (private_key_jwt) with an ES256 key. Every record is
// read back by kgo over the plaintext listener. A token signed by another
// key under the JWKS's kid is refused by the broker: records fail with
// ErrAuthentication.
func TestRealKafkaOAuthAssertion(t *testing.T) {
	c := realKafka(t)
	addrs := strings.Split(realEnv(t, "SAMSA_KAFKA_OAUTH_BROKERS", "the 1-node cluster was started without -sasl-ssl"), ",")
	keyPEM, err := os.ReadFile(realEnv(t, "SAMSA_KAFKA_OAUTH_IDP_KEY", "no identity-provider key"))
	require.NoError(t, err)
	block, _ := pem.Decode(keyPEM)
	require.NotNil(t, block)
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	idpKey := parsed.(*rsa.PrivateKey)
	kid := realEnv(t, "SAMSA_KAFKA_OAUTH_IDP_KID", "no kid")
	audience := realEnv(t, "SAMSA_KAFKA_OAUTH_AUDIENCE", "no audience")
	issuer := realEnv(t, "SAMSA_KAFKA_OAUTH_ISSUER", "no issuer")

	props := func(tokenURL string, kv ...string) map[string]string {
		m := map[string]string{
			"bootstrap.servers":                   strings.Join(addrs, ","),
			"security.protocol":                   "SASL_PLAINTEXT",
			"sasl.mechanism":                      "OAUTHBEARER",
			"sasl.login.callback.handler.class":   "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
			"sasl.jaas.config":                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
			"sasl.oauthbearer.token.endpoint.url": tokenURL,
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	dir := t.TempDir()
	rsaFile, rsaKey := testutil.WriteKey(t, dir, "rsa", "pkcs8")
	ecFile, ecKey := testutil.WriteKey(t, dir, "ec", "sec1")
	cases := []struct {
		name string
		want testutil.AssertionWant
		kv   []string
	}{
		{"jwt-bearer RS256", testutil.AssertionWant{Grant: testutil.GrantJWTBearer, Alg: "RS256", Key: rsaKey.Public(), Iss: "samsa-svc", Sub: "samsa-svc", Aud: "samsa-idp", ExpSeconds: 300, NbfSeconds: 60, JTI: true},
			[]string{
				"sasl.oauthbearer.jwt.retriever.class", "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever",
				"sasl.oauthbearer.assertion.private.key.file", rsaFile,
				"sasl.oauthbearer.assertion.claim.iss", "samsa-svc", "sasl.oauthbearer.assertion.claim.sub", "samsa-svc",
				"sasl.oauthbearer.assertion.claim.aud", "samsa-idp", "sasl.oauthbearer.assertion.claim.jti.include", "true",
			}},
		{"private_key_jwt ES256", testutil.AssertionWant{Grant: testutil.GrantClientCredentials, ClientID: "samsa-svc", Alg: "ES256", Key: ecKey.Public(), Iss: "samsa-svc", Sub: "samsa-svc", Aud: "samsa-idp", ExpSeconds: 120, NbfSeconds: 30, JTI: true},
			[]string{
				"sasl.oauthbearer.client.credentials.client.id", "samsa-svc",
				"sasl.oauthbearer.scope", "kafka",
				"sasl.oauthbearer.assertion.private.key.file", ecFile,
				"sasl.oauthbearer.assertion.algorithm", "ES256",
				"sasl.oauthbearer.assertion.claim.iss", "samsa-svc", "sasl.oauthbearer.assertion.claim.sub", "samsa-svc",
				"sasl.oauthbearer.assertion.claim.aud", "samsa-idp",
				"sasl.oauthbearer.assertion.claim.exp.seconds", "120", "sasl.oauthbearer.assertion.claim.nbf.seconds", "30",
				"sasl.oauthbearer.assertion.claim.jti.include", "true",
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			idp := testutil.NewOAuthIdPWithKey(t, tc.want, idpKey, kid)
			idp.TokenAudience, idp.TokenIssuer, idp.TokenSubject = audience, issuer, "samsa-oauth"
			t.Setenv(producer.EnvAllowedTokenURLs, idp.TokenURL)
			t.Setenv(producer.EnvAllowedFiles, rsaFile+","+ecFile) // as Kafka's allowed.files
			cfg, err := producer.ConfigFromProperties(props(idp.TokenURL, tc.kv...))
			require.NoError(t, err)
			topic := uniqueTopic("samsa-oauth-assertion")
			c.createTopic(t, topic, 3, 1, nil)
			p := newSamsaProducer(t, addrs, producer.Config{SASL: cfg.SASL})
			const n = 500
			recs := makeSamsaRecords(topic, n)
			mds := sendAll(t, p, recs)
			got := consumeAll(t, c.addrs, topic, 3, n)
			checkDelivered(t, recs, mds, got, 3, compression.None)
			require.NoError(t, p.Close(testContext(t)))
			assert.Empty(t, idp.Failures(), "the endpoint refused an assertion")
			assert.Positive(t, idp.Issued())
		})
	}

	t.Run("a token the JWKS does not verify", func(t *testing.T) {
		want := cases[0].want
		want.JTI = true
		// Another key under the JWKS's kid: the broker finds the key
		// and the signature does not verify.
		other, err := rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
		idp := testutil.NewOAuthIdPWithKey(t, want, other, kid)
		idp.TokenAudience, idp.TokenIssuer = audience, issuer
		t.Setenv(producer.EnvAllowedTokenURLs, idp.TokenURL)
		t.Setenv(producer.EnvAllowedFiles, rsaFile+","+ecFile)
		cfg, err := producer.ConfigFromProperties(props(idp.TokenURL, cases[0].kv...))
		require.NoError(t, err)
		topic := uniqueTopic("samsa-oauth-refused")
		c.createTopic(t, topic, 1, 1, nil)
		p := newSamsaProducer(t, addrs, producer.Config{SASL: cfg.SASL, DeliveryTimeout: 20 * time.Second})
		start := time.Now()
		_, err = p.Send(testContext(t), &producer.Record{Topic: topic, Value: []byte("x")}).Wait(testContext(t))
		require.ErrorIs(t, err, producer.ErrAuthentication)
		assert.Less(t, time.Since(start), 15*time.Second, "failed fast")
		assert.Empty(t, idp.Failures(), "the endpoint accepted the assertion; the broker refused the token")
		assert.NotContains(t, err.Error(), idp.LastAssertion()[strings.LastIndexByte(idp.LastAssertion(), '.')+1:])
	})
}
