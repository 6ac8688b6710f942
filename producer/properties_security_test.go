package producer_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/producer"
)

// tlsFiles writes the CA and a client certificate and key (unencrypted,
// and encrypted with openssl if it is installed) to a temp dir.
type tlsFiles struct {
	dir, ca, cert, key, keystore string
	encKey, legacyKey            string // "" without openssl
}

func writeTLSFiles(t *testing.T, ca *testbroker.TestCA) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, err := ca.Issue("client")
	require.NoError(t, err)
	f := tlsFiles{dir: dir, ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "client.pem"),
		key: filepath.Join(dir, "client.key"), keystore: filepath.Join(dir, "keystore.pem")}
	require.NoError(t, os.WriteFile(f.ca, ca.CertPEM, 0o600))
	require.NoError(t, os.WriteFile(f.cert, certPEM, 0o600))
	require.NoError(t, os.WriteFile(f.key, keyPEM, 0o600))
	require.NoError(t, os.WriteFile(f.keystore, append(append([]byte{}, keyPEM...), certPEM...), 0o600))
	if _, err := exec.LookPath("openssl"); err == nil {
		f.encKey = filepath.Join(dir, "client-enc.key")
		out, err := exec.Command("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", f.key, "-out", f.encKey, "-passout", "pass:key-pw").CombinedOutput()
		require.NoError(t, err, "%s", out)
		f.legacyKey = filepath.Join(dir, "client-legacy.key")
		out, err = exec.Command("openssl", "ec", "-aes256", "-in", f.key, "-out", f.legacyKey, "-passout", "pass:key-pw").CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	return f
}

// mtlsCluster is secureCluster with client certificates required.
func mtlsCluster(t *testing.T) (*testbroker.Cluster, *testbroker.TestCA) {
	t.Helper()
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	srv, err := ca.ServerConfig("127.0.0.1")
	require.NoError(t, err)
	srv.ClientAuth = tls.RequireAndVerifyClientCert
	srv.ClientCAs = ca.Pool
	cl, err := testbroker.New(testbroker.Config{Brokers: 1, Security: &testbroker.Security{
		Listeners: []testbroker.Listener{{Protocol: testbroker.SSL}, {Protocol: testbroker.SASLSSL}},
		TLS:       srv,
		Users:     []testbroker.User{{Mechanism: testbroker.MechScramSHA512, Name: "carol", Password: "carol-secret"}},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.NoError(t, cl.CreateTopic("secure", 1))
	return cl, ca
}

// produceOne sends one record with cfg and returns its error.
func produceOne(t *testing.T, cfg producer.Config) error {
	t.Helper()
	cfg.DeliveryTimeout, cfg.RequestTimeout = 20*time.Second, 10*time.Second
	p, err := producer.New(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	defer p.Close(ctx)
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = p.Send(ctx, &producer.Record{Topic: "secure", Value: []byte("v")}).Wait(wctx)
	return err
}

// TestPropertiesConnect connects with Java and librdkafka style properties
// only, to listeners that need what they configure.
func TestPropertiesConnect(t *testing.T) {
	cl, ca := secureCluster(t, 0)
	mcl, mca := mtlsCluster(t)
	f := writeTLSFiles(t, ca)
	mf := writeTLSFiles(t, mca)
	saslSSL := cl.ListenerAddrs(testbroker.SASLSSL)[0]
	_, port, _ := strings.Cut(saslSSL, ":")
	byName := "localhost:" + port // the certificate is for 127.0.0.1 only

	tests := []struct {
		name    string
		props   map[string]string
		wantErr string // "" for success; else a substring of the error, which must wrap ErrAuthentication
	}{
		{"Confluent Cloud style: SASL_SSL, PLAIN via JAAS, single quotes", map[string]string{
			"bootstrap.servers": saslSSL, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
			"sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username='alice' password='alice-secret';",
			"ssl.ca.location":  f.ca, "client.dns.lookup": "use_all_dns_ips", "session.timeout.ms": "45000", "acks": "all",
		}, ""},
		{"MSK SCRAM style: truststore PEM, ScramLoginModule", map[string]string{
			"bootstrap.servers": saslSSL, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
			"sasl.jaas.config":        `org.apache.kafka.common.security.scram.ScramLoginModule required username="carol" password="carol-secret";`,
			"ssl.truststore.location": f.ca, "ssl.truststore.type": "PEM",
		}, ""},
		{"librdkafka style", map[string]string{
			"metadata.broker.list": saslSSL, "security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-256",
			"sasl.username": "bob", "sasl.password": "bob-secret", "ssl.ca.location": f.ca,
		}, ""},
		{"host name checked by default", map[string]string{
			"bootstrap.servers": byName, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
			"sasl.username": "alice", "sasl.password": "alice-secret", "ssl.ca.location": f.ca,
		}, "certificate"},
		{"empty endpoint identification skips the host name, not the chain", map[string]string{
			"bootstrap.servers": byName, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
			"sasl.username": "alice", "sasl.password": "alice-secret", "ssl.ca.location": f.ca,
			"ssl.endpoint.identification.algorithm": "",
		}, ""},
		{"empty endpoint identification still rejects an unknown CA", map[string]string{
			"bootstrap.servers": byName, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
			"sasl.username": "alice", "sasl.password": "alice-secret", "ssl.ca.location": mf.ca,
			"ssl.endpoint.identification.algorithm": "",
		}, "certificate"},
		{"verification off", map[string]string{
			"bootstrap.servers": byName, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
			"sasl.username": "alice", "sasl.password": "alice-secret", "enable.ssl.certificate.verification": "false",
		}, ""},
		{"bad password", map[string]string{
			"bootstrap.servers": saslSSL, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
			"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="nope-secret";`,
			"ssl.ca.location":  f.ca,
		}, "SASL_AUTHENTICATION_FAILED"},
		{"mutual TLS, librdkafka files", map[string]string{
			"bootstrap.servers": mcl.Addrs()[0], "security.protocol": "SSL", "ssl.ca.location": mf.ca,
			"ssl.certificate.location": mf.cert, "ssl.key.location": mf.key,
		}, ""},
		{"mutual TLS, Java PEM keystore, and SASL", map[string]string{
			"bootstrap.servers": mcl.ListenerAddrs(testbroker.SASLSSL)[0], "security.protocol": "SASL_SSL",
			"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol", "sasl.password": "carol-secret",
			"ssl.truststore.location": mf.ca, "ssl.keystore.location": mf.keystore, "ssl.keystore.type": "PEM",
		}, ""},
		{"mutual TLS without a client certificate", map[string]string{
			"bootstrap.servers": mcl.Addrs()[0], "security.protocol": "SSL", "ssl.ca.location": mf.ca,
		}, "certificate required"},
	}
	if mf.encKey != "" {
		tests = append(tests,
			struct {
				name    string
				props   map[string]string
				wantErr string
			}{"mutual TLS, encrypted PKCS#8 key", map[string]string{
				"bootstrap.servers": mcl.Addrs()[0], "security.protocol": "SSL", "ssl.ca.location": mf.ca,
				"ssl.certificate.location": mf.cert, "ssl.key.location": mf.encKey, "ssl.key.password": "key-pw",
			}, ""},
			struct {
				name    string
				props   map[string]string
				wantErr string
			}{"mutual TLS, legacy encrypted PEM key", map[string]string{
				"bootstrap.servers": mcl.Addrs()[0], "security.protocol": "SSL", "ssl.ca.location": mf.ca,
				"ssl.certificate.location": mf.cert, "ssl.key.location": mf.legacyKey, "ssl.key.password": "key-pw",
			}, ""})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := producer.ConfigFromProperties(tt.props)
			require.NoError(t, err)
			err = produceOne(t, cfg)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, producer.ErrAuthentication)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotContains(t, err.Error(), "secret")
		})
	}
}

func TestSecurityPropertiesErrors(t *testing.T) {
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	f := writeTLSFiles(t, ca)
	jks := filepath.Join(f.dir, "truststore.jks")
	require.NoError(t, os.WriteFile(jks, []byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2}, 0o600))
	noPEM := filepath.Join(f.dir, "empty.pem")
	require.NoError(t, os.WriteFile(noPEM, []byte("-----BEGIN NOTHING-----\n"), 0o600))
	other, err := testbroker.NewTestCA()
	require.NoError(t, err)
	otherCert, _, err := other.Issue("x")
	require.NoError(t, err)
	otherCertFile := filepath.Join(f.dir, "other.pem")
	require.NoError(t, os.WriteFile(otherCertFile, otherCert, 0o600))

	base := func(kv ...string) map[string]string {
		m := map[string]string{"bootstrap.servers": "k:9093"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name  string
		props map[string]string
		want  []string
	}{
		{"bad protocol", base("security.protocol", "TLS"), []string{`security.protocol: "TLS" is not`}},
		{"no mechanism", base("security.protocol", "SASL_SSL"), []string{"sasl.mechanism: not set", "GSSAPI"}},
		{"GSSAPI", base("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "GSSAPI"), []string{"Kerberos"}},
		{"unknown mechanism", base("security.protocol", "SASL_SSL", "sasl.mechanism", "DIGEST-MD5"), []string{`"DIGEST-MD5" is not`}},
		{"no password", base("security.protocol", "SASL_SSL", "sasl.mechanism", "PLAIN", "sasl.username", "u"), []string{"needs a user name and a password"}},
		{"password without user", base("security.protocol", "SASL_SSL", "sasl.mechanism", "PLAIN", "sasl.password", "pw-SECRET"), []string{"sasl.password: set without sasl.username"}},
		{"module does not match", base("security.protocol", "SASL_SSL", "sasl.mechanism", "SCRAM-SHA-256",
			"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="pw-SECRET";`),
			[]string{"PlainLoginModule does not go with sasl.mechanism SCRAM-SHA-256"}},
		{"unterminated quote", base("security.protocol", "SASL_SSL", "sasl.mechanism", "PLAIN",
			"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="pw-SECRET;`),
			[]string{"sasl.jaas.config: an unterminated quoted value"}},
		{"no flag", base("security.protocol", "SASL_SSL", "sasl.mechanism", "PLAIN",
			"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule username="u" password="pw-SECRET";`),
			[]string{"required, requisite"}},
		{"JAAS and sasl.username", base("security.protocol", "SASL_SSL", "sasl.mechanism", "PLAIN", "sasl.username", "u", "sasl.password", "pw-SECRET",
			"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="pw-SECRET";`),
			[]string{"conflicts with sasl.username"}},
		{"JKS truststore", base("security.protocol", "SSL", "ssl.truststore.location", jks), []string{"a JKS store", "convert it"}},
		{"JKS type", base("security.protocol", "SSL", "ssl.truststore.type", "JKS"), []string{`"JKS" stores are not supported`}},
		{"PKCS12 keystore type", base("security.protocol", "SSL", "ssl.keystore.type", "PKCS12"), []string{`"PKCS12" stores are not supported`}},
		{"missing CA file", base("security.protocol", "SSL", "ssl.ca.location", filepath.Join(f.dir, "nope.pem")), []string{"ssl.ca.location", "no such file"}},
		{"no certificate in CA file", base("security.protocol", "SSL", "ssl.ca.location", noPEM), []string{"ssl.ca.location: holds no PEM certificate"}},
		{"cert without key", base("security.protocol", "SSL", "ssl.certificate.location", f.cert), []string{"ssl.key.location is missing"}},
		{"key of another cert", base("security.protocol", "SSL", "ssl.certificate.location", otherCertFile, "ssl.key.location", f.key), []string{"does not match the certificate"}},
		{"bad verification flag", base("security.protocol", "SSL", "enable.ssl.certificate.verification", "maybe"), []string{"is not true or false"}},
		{"bad endpoint algorithm", base("security.protocol", "SSL", "ssl.endpoint.identification.algorithm", "ldap"), []string{`"ldap" is not https or empty`}},
		{"bad TLS version", base("security.protocol", "SSL", "ssl.protocol", "SSLv3"), []string{`"SSLv3" is not TLSv1.2 or TLSv1.3`}},
	}
	if f.encKey != "" {
		tests = append(tests,
			struct {
				name  string
				props map[string]string
				want  []string
			}{"encrypted key without password", base("security.protocol", "SSL", "ssl.certificate.location", f.cert, "ssl.key.location", f.encKey), []string{"set ssl.key.password"}},
			struct {
				name  string
				props map[string]string
				want  []string
			}{"wrong key password", base("security.protocol", "SSL", "ssl.certificate.location", f.cert, "ssl.key.location", f.encKey, "ssl.key.password", "wrong-SECRET"), []string{"ssl.key.password does not decrypt the key"}},
			struct {
				name  string
				props map[string]string
				want  []string
			}{"wrong legacy key password", base("security.protocol", "SSL", "ssl.certificate.location", f.cert, "ssl.key.location", f.legacyKey, "ssl.key.password", "wrong-SECRET"), []string{"ssl.key.password does not decrypt the key"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := producer.ConfigFromProperties(tt.props)
			require.Error(t, err)
			assert.ErrorIs(t, err, producer.ErrInvalidConfig)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "SECRET")
		})
	}
}

func TestSecurityPropertiesSettings(t *testing.T) {
	cfg, err := producer.ConfigFromProperties(map[string]string{"bootstrap.servers": "k:9092"})
	require.NoError(t, err)
	assert.Nil(t, cfg.TLS, "PLAINTEXT by default")
	assert.Nil(t, cfg.SASL)

	cfg, err = producer.ConfigFromProperties(map[string]string{"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv1.3"})
	require.NoError(t, err)
	require.NotNil(t, cfg.TLS)
	assert.Equal(t, uint16(tls.VersionTLS13), cfg.TLS.MinVersion)
	assert.False(t, cfg.TLS.InsecureSkipVerify)
	assert.Nil(t, cfg.TLS.RootCAs, "the system's CAs")
	assert.Nil(t, cfg.SASL)

	// SASL keys without a SASL protocol are an error naming
	// security.protocol (Java ignores them, and connects unauthenticated).
	_, err = producer.ConfigFromProperties(map[string]string{"security.protocol": "SSL", "sasl.mechanism": "PLAIN"})
	require.ErrorIs(t, err, producer.ErrInvalidConfig)
	assert.ErrorContains(t, err, "security.protocol: is SSL, so the SASL keys given (sasl.mechanism) would be ignored")
	assert.ErrorContains(t, err, "set security.protocol=SASL_SSL")

	for _, mech := range []string{"OAUTHBEARER", "AWS_MSK_IAM"} {
		cfg, err = producer.ConfigFromProperties(map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": mech})
		require.NoError(t, err)
		require.NotNil(t, cfg.SASL)
		assert.Equal(t, mech, cfg.SASL.Name())
		_, _, err = cfg.SASL.Start(context.Background(), "k:9093")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "set Config.SASL")
	}

	cfg, err = producer.ConfigFromProperties(map[string]string{
		"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
		"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="u\"v" password="p w;x" ;`,
	})
	require.NoError(t, err)
	assert.Nil(t, cfg.TLS)
	assert.Equal(t, "SCRAM-SHA-256", cfg.SASL.Name())
	assert.Contains(t, fmt.Sprint(cfg.SASL), `u\"v`)
	assert.NotContains(t, fmt.Sprintf("%+v", cfg), "p w;x")
	_ = x509.NewCertPool
}

// TestSecurityKeysNeedTheirProtocol: ssl.* and sasl.* keys in a file
// without security.protocol (or with one that does not use them) were
// dropped silently: not reported, and a client meant to authenticate
// connected without SASL (against a SASL listener, a record then waited
// 60 s for "the broker disconnected before responding: EOF"). Java ignores
// them with a warning; here the file is an error naming
// security.protocol, and never the secrets.
func TestSecurityKeysNeedTheirProtocol(t *testing.T) {
	const pw = "hunter2-secret"
	jaasLine := `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + pw + `";`
	cases := []struct {
		name  string
		props map[string]string
		want  string
	}{
		{"SASL without security.protocol", map[string]string{"sasl.mechanism": "PLAIN", "sasl.jaas.config": jaasLine},
			"security.protocol: is not set (PLAINTEXT), so the SASL keys given (sasl.jaas.config, sasl.mechanism) would be ignored and the client would connect without authenticating: set security.protocol=SASL_PLAINTEXT or SASL_SSL"},
		{"SASL with PLAINTEXT", map[string]string{"security.protocol": "PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaasLine},
			"security.protocol: is PLAINTEXT, so the SASL keys given"},
		{"GSSAPI without the Kerberos import, and without a protocol", map[string]string{"sasl.mechanism": "GSSAPI"},
			"security.protocol: is not set (PLAINTEXT), so the SASL keys given (sasl.mechanism)"},
		{"librdkafka's credentials", map[string]string{"sasl.username": "u", "sasl.password": pw},
			"(sasl.password, sasl.username) would be ignored"},
		{"TLS without security.protocol", map[string]string{"ssl.truststore.location": "/etc/ca.pem"},
			"security.protocol: is not set (PLAINTEXT), so the TLS keys given (ssl.truststore.location) would be ignored and the client would connect in plaintext: set security.protocol=SSL or SASL_SSL"},
		{"TLS with SASL_PLAINTEXT", map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaasLine, "ssl.ca.location": "/etc/ca.pem"},
			"security.protocol: is SASL_PLAINTEXT, so the TLS keys given (ssl.ca.location) would be ignored and the client would connect in plaintext: set security.protocol=SASL_SSL"},
		{"both", map[string]string{"sasl.mechanism": "PLAIN", "ssl.endpoint.identification.algorithm": "", "enable.ssl.certificate.verification": "false"},
			"so the SASL and TLS keys given (sasl.mechanism; enable.ssl.certificate.verification, ssl.endpoint.identification.algorithm) would be ignored and the client would connect without them: set security.protocol=SASL_SSL"},
		{"Kerberos tuning keys", map[string]string{"sasl.kerberos.service.name": "kafka"},
			"security.protocol: is not set (PLAINTEXT), so the SASL keys given (sasl.kerberos.service.name)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.props["bootstrap.servers"] = "k:9092"
			_, err := producer.ConfigFromProperties(tc.props)
			require.ErrorIs(t, err, producer.ErrInvalidConfig)
			assert.ErrorContains(t, err, tc.want)
			assert.NotContains(t, err.Error(), pw)
		})
	}
}
