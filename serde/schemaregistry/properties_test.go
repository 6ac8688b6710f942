package schemaregistry_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
	sr "github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/internal/fakeregistry"
)

// selfSigned writes a self-signed CA certificate as PEM into dir.
func selfSigned(t *testing.T, dir string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	path := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return path
}

func TestConfigFromProperties(t *testing.T) {
	ca := selfSigned(t, t.TempDir())
	cases := []struct {
		name  string
		props map[string]string
		check func(t *testing.T, c sr.Config)
	}{
		{"URLs and user info", map[string]string{
			"schema.registry.url":           "http://a:8081, http://b:8081",
			"basic.auth.credentials.source": "USER_INFO",
			"basic.auth.user.info":          "alice:pa:ss",
			"bootstrap.servers":             "ignored:9092", // the producer's key
			"acks":                          "all",
		}, func(t *testing.T, c sr.Config) {
			assert.Equal(t, []string{"http://a:8081", "http://b:8081"}, c.URLs)
			assert.Equal(t, "alice", c.Username)
			assert.Equal(t, "pa:ss", c.Password)
		}},
		{"user info alias, default source", map[string]string{
			"schema.registry.url":                  "http://a",
			"schema.registry.basic.auth.user.info": "bob:pw",
		}, func(t *testing.T, c sr.Config) { assert.Equal(t, "bob", c.Username) }},
		{"URL source", map[string]string{
			"schema.registry.url":           "http://u:p@a",
			"basic.auth.credentials.source": "URL",
		}, func(t *testing.T, c sr.Config) { assert.Empty(t, c.Username) }},
		{"SASL_INHERIT from sasl.username", map[string]string{
			"schema.registry.url": "http://a", "basic.auth.credentials.source": "SASL_INHERIT",
			"sasl.username": "carol", "sasl.password": "pw",
		}, func(t *testing.T, c sr.Config) {
			assert.Equal(t, []string{"carol", "pw"}, []string{c.Username, c.Password})
		}},
		{"SASL_INHERIT from JAAS", map[string]string{
			"schema.registry.url": "http://a", "basic.auth.credentials.source": "SASL_INHERIT",
			"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="dave" password="p\"w";`,
		}, func(t *testing.T, c sr.Config) {
			assert.Equal(t, []string{"dave", `p"w`}, []string{c.Username, c.Password})
		}},
		{"static token and Cloud headers", map[string]string{
			"schema.registry.url": "https://a", "bearer.auth.credentials.source": "STATIC_TOKEN",
			"bearer.auth.token": "tok", "bearer.auth.logical.cluster": "lsrc-1", "bearer.auth.identity.pool.id": "pool-1",
		}, func(t *testing.T, c sr.Config) {
			assert.Equal(t, "tok", c.BearerToken)
			assert.Equal(t, "lsrc-1", c.LogicalCluster)
			assert.Equal(t, "pool-1", c.IdentityPoolID)
		}},
		{"OAUTHBEARER", map[string]string{
			"schema.registry.url": "https://a", "bearer.auth.credentials.source": "OAUTHBEARER",
			"bearer.auth.issuer.endpoint.url": "https://idp.example/token",
			"bearer.auth.client.id":           "id", "bearer.auth.client.secret": "secret", "bearer.auth.scope": "sr",
		}, func(t *testing.T, c sr.Config) { assert.NotNil(t, c.BearerTokenSource) }},
		{"TLS", map[string]string{
			"schema.registry.url":                                   "https://a",
			"schema.registry.ssl.truststore.location":               ca,
			"schema.registry.ssl.truststore.type":                   "PEM",
			"schema.registry.ssl.endpoint.identification.algorithm": "https",
			"schema.registry.ssl.protocol":                          "TLSv1.3",
		}, func(t *testing.T, c sr.Config) {
			require.NotNil(t, c.TLS)
			assert.NotNil(t, c.TLS.RootCAs)
			assert.EqualValues(t, 0x0304, c.TLS.MinVersion)
		}},
		{"retries and timeouts", map[string]string{
			"schema.registry.url": "http://a", "max.retries": "5", "retries.wait.ms": "250",
			"retries.max.wait.ms": "4000", "http.connect.timeout.ms": "1000", "http.read.timeout.ms": "2000",
			"max.schemas.per.subject": "50",
		}, func(t *testing.T, c sr.Config) {
			assert.Equal(t, 5, c.MaxRetries)
			assert.Equal(t, 250*time.Millisecond, c.RetryBackoff)
			assert.Equal(t, 4*time.Second, c.RetryBackoffMax)
			assert.Equal(t, 3*time.Second, c.RequestTimeout)
			assert.Equal(t, 50, c.CacheSize)
		}},
		{"max.retries=0", map[string]string{"schema.registry.url": "http://a", "max.retries": "0"},
			func(t *testing.T, c sr.Config) { assert.Equal(t, sr.NoRetries, c.MaxRetries) }},
		{"confluent-kafka-go timeout", map[string]string{"schema.registry.url": "http://a", "schema.registry.request.timeout.ms": "1500"},
			func(t *testing.T, c sr.Config) { assert.Equal(t, 1500*time.Millisecond, c.RequestTimeout) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := sr.ConfigFromProperties(tc.props)
			require.NoError(t, err)
			tc.check(t, c)
			cl, err := sr.NewClient(c)
			require.NoError(t, err)
			cl.Close()
		})
	}
}

func TestConfigFromPropertiesErrors(t *testing.T) {
	const secret = "Sup3rSecret"
	cases := []struct {
		name  string
		props map[string]string
		want  string
	}{
		{"no URL", map[string]string{}, "schema.registry.url: not set"},
		{"typo under the prefix", map[string]string{"schema.registry.url": "http://a", "schema.registry.ulr": "x", "basic.auth.user.inf": "u:" + secret}, "unknown properties: basic.auth.user.inf, schema.registry.ulr"},
		{"bad source", map[string]string{"schema.registry.url": "http://a", "basic.auth.credentials.source": "LDAP"}, `"LDAP" is not USER_INFO`},
		{"user info without colon", map[string]string{"schema.registry.url": "http://a", "basic.auth.user.info": secret}, "basic.auth.user.info: not of the form user:password"},
		{"token without source", map[string]string{"schema.registry.url": "http://a", "bearer.auth.token": secret}, "bearer.auth.token: set without"},
		{"static token missing", map[string]string{"schema.registry.url": "http://a", "bearer.auth.credentials.source": "STATIC_TOKEN"}, "bearer.auth.token: not set"},
		{"basic and bearer", map[string]string{"schema.registry.url": "http://a", "basic.auth.user.info": "u:" + secret, "bearer.auth.credentials.source": "STATIC_TOKEN", "bearer.auth.token": secret}, "conflicts with Basic"},
		{"JKS store", map[string]string{"schema.registry.url": "https://a", "schema.registry.ssl.truststore.type": "JKS", "schema.registry.ssl.truststore.password": secret}, "schema.registry.ssl.truststore.type"},
		{"missing PEM", map[string]string{"schema.registry.url": "https://a", "schema.registry.ssl.truststore.location": "/nonexistent/ca.pem"}, "schema.registry.ssl.truststore.location"},
		{"bad number", map[string]string{"schema.registry.url": "http://a", "retries.wait.ms": "soon"}, `retries.wait.ms: "soon" is not a number`},
		{"OAUTHBEARER without endpoint", map[string]string{"schema.registry.url": "http://a", "bearer.auth.credentials.source": "OAUTHBEARER", "bearer.auth.client.secret": secret}, "bearer.auth.issuer.endpoint.url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sr.ConfigFromProperties(tc.props)
			require.ErrorIs(t, err, sr.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), secret)
		})
	}
}

func TestSerializerConfigFromProperties(t *testing.T) {
	props := map[string]string{
		"auto.register.schemas":       "false",
		"use.latest.version":          "true",
		"normalize.schemas":           "true",
		"json.fail.invalid.schema":    "true",
		"key.subject.name.strategy":   "io.confluent.kafka.serializers.subject.RecordNameStrategy",
		"value.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
		"latest.compatibility.strict": "false",
		"schema.registry.url":         "http://ignored-here",
	}
	v, err := sr.SerializerConfigFromProperties(props, false)
	require.NoError(t, err)
	assert.Equal(t, sr.SerializerConfig{DisableAutoRegister: true, UseLatestVersion: true, Normalize: true, Validate: true, SubjectNameStrategy: sr.TopicRecordNameStrategy}, v)
	k, err := sr.SerializerConfigFromProperties(props, true)
	require.NoError(t, err)
	assert.True(t, k.IsKey)
	assert.Equal(t, sr.RecordNameStrategy, k.SubjectNameStrategy)

	def, err := sr.SerializerConfigFromProperties(map[string]string{}, false)
	require.NoError(t, err)
	assert.Equal(t, sr.SerializerConfig{}, def, "Java's defaults are the zero value")

	for _, bad := range []map[string]string{
		{"auto.register.schemas": "yes"},
		{"value.subject.name.strategy": "com.example.Custom"},
	} {
		_, err := sr.SerializerConfigFromProperties(bad, false)
		assert.ErrorIs(t, err, sr.ErrInvalidConfig, "%v", bad)
	}
}

// TestOnePropertiesFile: the producer and the registry read the same file;
// neither refuses the other's keys.
func TestOnePropertiesFile(t *testing.T) {
	fake := fakeregistry.New(t)
	text := fmt.Sprintf(`bootstrap.servers=127.0.0.1:9092
acks=all
key.serializer=org.apache.kafka.common.serialization.StringSerializer
value.serializer=io.confluent.kafka.serializers.KafkaAvroSerializer
schema.registry.url=%s
basic.auth.credentials.source=USER_INFO
basic.auth.user.info=u:p
auto.register.schemas=true
use.latest.version=false
value.subject.name.strategy=io.confluent.kafka.serializers.subject.TopicNameStrategy
key.subject.name.strategy=io.confluent.kafka.serializers.subject.TopicNameStrategy
max.retries=2
`, fake.URL())
	path := filepath.Join(t.TempDir(), "client.properties")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	props, err := producer.LoadProperties(path)
	require.NoError(t, err)

	_, err = producer.ConfigFromProperties(props)
	require.NoError(t, err, "the producer accepts the serializer's keys")
	cfg, err := sr.ConfigFromProperties(props)
	require.NoError(t, err)
	c, err := sr.NewClient(cfg)
	require.NoError(t, err)
	defer c.Close()
	fake.Auth = "Basic dTpw"
	_, err = c.Subjects(context.Background())
	require.NoError(t, err)
	_, err = sr.SerializerConfigFromProperties(props, false)
	require.NoError(t, err)
}
