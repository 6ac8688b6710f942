package producer

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oauthIDP is a token endpoint that records what each request carried.
type oauthIDP struct {
	srv *httptest.Server

	mu    sync.Mutex
	auth  []string // id:secret, decoded
	forms []string
}

func newOAuthIDP(t *testing.T) *oauthIDP {
	t.Helper()
	p := &oauthIDP{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		form, _ := io.ReadAll(r.Body)
		basic, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Basic ")
		dec, _ := base64.StdEncoding.DecodeString(basic)
		p.mu.Lock()
		p.auth = append(p.auth, string(dec))
		p.forms = append(p.forms, string(form))
		p.mu.Unlock()
		fmt.Fprint(w, `{"access_token":"idp-token","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// propsWith sets the key-value pairs kv in m (an empty value deletes the
// key) and returns m.
func propsWith(m map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(m, kv[i])
			continue
		}
		m[kv[i]] = kv[i+1]
	}
	return m
}

const oauthJAAS = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="svc-1" clientSecret="cs-SECRET" scope="kafka email" extension_logicalCluster="lkc-1" extension_identityPoolId="pool-1";`

// TestOAuthPropertiesMapping: the properties of an OIDC client
// credentials login (KIP-768) reach the token endpoint and the
// OAUTHBEARER message, with Java's precedence of the Kafka 4.1 keys over
// the JAAS options, and both names of the login callback handler.
func TestOAuthPropertiesMapping(t *testing.T) {
	p := newOAuthIDP(t)
	tokenFile := filepath.Join(t.TempDir(), "token.jwt")
	require.NoError(t, os.WriteFile(tokenFile, []byte("file-token\n"), 0o600))
	t.Setenv(EnvAllowedTokenURLs, p.srv.URL+"/token, file://"+tokenFile)
	props := func(kv ...string) map[string]string {
		return propsWith(map[string]string{
			"bootstrap.servers": "k:9093", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
			keyTokenURL: p.srv.URL + "/token",
		}, kv...)
	}
	const ext = "\x01identityPoolId=pool-1\x01logicalCluster=lkc-1"
	tests := []struct {
		name     string
		props    map[string]string
		wantAuth string // "" for a file token (no request)
		wantForm string
		wantMsg  string
	}{
		{"JAAS, Kafka 3.4+ handler", props("sasl.jaas.config", oauthJAAS, keyLoginHandler,
			"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"),
			"svc-1:cs-SECRET", "grant_type=client_credentials&scope=kafka+email", "idp-token" + ext},
		{"JAAS, Kafka 3.1 handler", props("sasl.jaas.config", oauthJAAS, keyLoginHandler,
			"org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"),
			"svc-1:cs-SECRET", "grant_type=client_credentials&scope=kafka+email", "idp-token" + ext},
		{"JAAS, no handler", props("sasl.jaas.config", oauthJAAS),
			"svc-1:cs-SECRET", "grant_type=client_credentials&scope=kafka+email", "idp-token" + ext},
		{"Kafka 4.1 keys win over JAAS", props("sasl.jaas.config", oauthJAAS, keyClientID, "svc-2", keyClientSecret, "cs2-SECRET", keyScope, "other"),
			"svc-2:cs2-SECRET", "grant_type=client_credentials&scope=other", "idp-token" + ext},
		{"Kafka 4.1 keys alone", props(keyClientID, "svc-3", keyClientSecret, "cs3-SECRET"),
			"svc-3:cs3-SECRET", "grant_type=client_credentials", "idp-token"},
		{"header.urlencode", props(keyClientID, "svc 4", keyClientSecret, "a+b/SECRET", keyURLEncode, "true"),
			"svc+4:a%2Bb%2FSECRET", "grant_type=client_credentials", "idp-token"},
		{"tuning keys", props("sasl.jaas.config", oauthJAAS, "sasl.login.connect.timeout.ms", "15000", "sasl.login.read.timeout.ms", "0",
			"sasl.login.retry.backoff.ms", "50", "sasl.login.retry.backoff.max.ms", "2000", "sasl.login.refresh.window.factor", "0.9",
			"sasl.login.refresh.window.jitter", "0", "sasl.login.refresh.min.period.seconds", "30", "sasl.login.refresh.buffer.seconds", "0"),
			"svc-1:cs-SECRET", "grant_type=client_credentials&scope=kafka+email", "idp-token" + ext},
		{"file: token", props(keyTokenURL, "file://"+tokenFile, "sasl.jaas.config",
			`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required extension_logicalCluster="lkc-1";`),
			"", "", "file-token\x01logicalCluster=lkc-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p.mu.Lock()
			p.auth, p.forms = nil, nil
			p.mu.Unlock()
			cfg, err := ConfigFromProperties(tc.props)
			require.NoError(t, err)
			assert.Empty(t, cfg.ignoredProps)
			require.NotNil(t, cfg.SASL)
			assert.Equal(t, "OAUTHBEARER", cfg.SASL.Name())
			_, first, err := cfg.SASL.Start(context.Background(), "k:9093")
			require.NoError(t, err)
			assert.Equal(t, "n,,\x01auth=Bearer "+tc.wantMsg+"\x01\x01", string(first))
			p.mu.Lock()
			defer p.mu.Unlock()
			if tc.wantAuth == "" {
				assert.Empty(t, p.auth)
				return
			}
			assert.Equal(t, []string{tc.wantAuth}, p.auth)
			assert.Equal(t, []string{tc.wantForm}, p.forms)
			for _, verb := range []string{"%v", "%+v", "%#v"} {
				assert.NotContains(t, fmt.Sprintf(verb, cfg), "SECRET", verb)
			}
		})
	}
}

func TestOAuthPropertiesErrors(t *testing.T) {
	t.Setenv(EnvAllowedTokenURLs, "https://idp.example/token")
	props := func(kv ...string) map[string]string {
		return propsWith(map[string]string{
			"bootstrap.servers": "k:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
			keyTokenURL: "https://idp.example/token", "sasl.jaas.config": oauthJAAS,
		}, kv...)
	}
	tests := []struct {
		name  string
		props map[string]string
		want  []string
	}{
		{"custom login handler", props(keyLoginHandler, "com.example.MyLogin"),
			[]string{keyLoginHandler + `: "com.example.MyLogin" cannot be loaded in Go`}},
		{"wrong login module", props("sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p-SECRET";`),
			[]string{"sasl.jaas.config: PlainLoginModule does not go with sasl.mechanism OAUTHBEARER"}},
		{"no secret", props("sasl.jaas.config", `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="svc";`),
			[]string{"sasl.mechanism: OAUTHBEARER with " + keyTokenURL + " needs a client id and secret", keyClientSecret}},
		{"not a URL the login takes", props(keyTokenURL, "ftp://idp/token"), []string{keyTokenURL + ": is not an https://"}},
		{"no host", props(keyTokenURL, "https:///token"), []string{keyTokenURL + ": has no host"}},
		{"bad extension", props("sasl.jaas.config", `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="svc" clientSecret="c-SECRET" extension_a-b="x";`),
			[]string{"sasl.jaas.config:", `invalid extension key "a-b"`}},
		{"window factor", props("sasl.login.refresh.window.factor", "0.3"), []string{`sasl.login.refresh.window.factor: "0.3" is not a number in [0.5, 1]`}},
		{"window jitter", props("sasl.login.refresh.window.jitter", "0.5"), []string{"sasl.login.refresh.window.jitter"}},
		{"min period", props("sasl.login.refresh.min.period.seconds", "901"), []string{`"901" is not an integer in [0, 900]`}},
		{"buffer", props("sasl.login.refresh.buffer.seconds", "-1"), []string{"sasl.login.refresh.buffer.seconds"}},
		{"connect timeout", props("sasl.login.connect.timeout.ms", "soon"), []string{"sasl.login.connect.timeout.ms"}},
		{"urlencode", props(keyURLEncode, "maybe"), []string{keyURLEncode + `: "maybe" is not true or false`}},
		{"retry backoff not a number", props("sasl.login.retry.backoff.ms", "x"), []string{`sasl.login.retry.backoff.ms: "x" is not an integer`}},
		{"read timeout beyond INT", props("sasl.login.read.timeout.ms", "2147483648"), []string{"sasl.login.read.timeout.ms"}},
		{"empty Kafka 4.1 client id", props(keyClientID, " "), []string{keyClientID + " set but empty"}},
		{"typo", props("sasl.oauthbearer.token.endpoint.ulr", "https://x"), []string{"did you mean " + keyTokenURL}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConfigFromProperties(tc.props)
			require.ErrorIs(t, err, ErrInvalidConfig)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "SECRET")
		})
	}
}

// TestOAuthPropertiesAllowedURLs: a token URL from properties is taken
// only when SAMSA_OAUTHBEARER_ALLOWED_URLS lists it exactly, as Kafka 4.0+
// does with org.apache.kafka.sasl.oauthbearer.allowed.urls: unset, empty,
// another URL, a prefix or a different case are refused, file: URLs
// included.
func TestOAuthPropertiesAllowedURLs(t *testing.T) {
	const tokenURL = "https://idp.example/oauth2/token"
	props := func(u string) map[string]string {
		return map[string]string{
			"bootstrap.servers": "k:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
			keyTokenURL: u, "sasl.jaas.config": oauthJAAS,
		}
	}
	tests := []struct {
		name, env, url string
		ok             bool
	}{
		{"unset", "", tokenURL, false},
		{"listed", tokenURL, tokenURL, true},
		{"listed among others, with spaces", " https://a.example/t , " + tokenURL + " ,", tokenURL, true},
		{"the property's spaces", tokenURL, " " + tokenURL + " ", true},
		{"another URL", "https://a.example/t", tokenURL, false},
		{"a prefix", "https://idp.example/", tokenURL, false},
		{"another case", strings.ToUpper(tokenURL), tokenURL, false},
		{"an attacker's host", tokenURL, "https://attacker.example/oauth2/token", false},
		{"a local file", tokenURL, "file:///var/run/secrets/kubernetes.io/serviceaccount/token", false},
		{"a listed file", "file:///run/token", "file:///run/token", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvAllowedTokenURLs, tc.env)
			cfg, err := ConfigFromProperties(props(tc.url))
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, "OAUTHBEARER", cfg.SASL.Name())
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			for _, want := range []string{keyTokenURL + ": is not allowed", EnvAllowedTokenURLs, "org.apache.kafka.sasl.oauthbearer.allowed.urls"} {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

// TestOAuthPropertiesTuningRanges: the login's timing keys take what
// Java's ConfigDef takes: any INT or LONG for the timeouts and backoffs
// (a negative one counts as 0, none), the ranges of the refresh keys.
func TestOAuthPropertiesTuningRanges(t *testing.T) {
	t.Setenv(EnvAllowedTokenURLs, "https://idp.example/token")
	for _, kv := range [][2]string{
		{"sasl.login.retry.backoff.ms", "-1"}, {"sasl.login.retry.backoff.max.ms", "-100"},
		{"sasl.login.connect.timeout.ms", "-5"}, {"sasl.login.read.timeout.ms", "-2147483648"},
		{"sasl.login.retry.backoff.max.ms", "9223372036854775807"},
		{"sasl.login.refresh.min.period.seconds", "900"}, {"sasl.login.refresh.buffer.seconds", "3600"},
	} {
		_, err := ConfigFromProperties(map[string]string{
			"bootstrap.servers": "k:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
			keyTokenURL: "https://idp.example/token", "sasl.jaas.config": oauthJAAS, kv[0]: kv[1],
		})
		assert.NoError(t, err, "%s=%s", kv[0], kv[1])
	}
}

// TestOAuthPropertiesWithoutLogin: OAUTHBEARER without a token endpoint
// keeps the needs-code mechanism, and the login keys, which then
// configure nothing, are logged as ignored (as they are with another
// mechanism).
func TestOAuthPropertiesWithoutLogin(t *testing.T) {
	cfg, err := ConfigFromProperties(map[string]string{
		"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
		"sasl.login.refresh.buffer.seconds": "100", keyScope: "kafka",
	})
	require.NoError(t, err)
	_, _, err = cfg.SASL.Start(context.Background(), "k:9093")
	require.Error(t, err)
	assert.Contains(t, err.Error(), keyTokenURL)
	assert.Contains(t, err.Error(), "set Config.SASL")
	assert.ElementsMatch(t, []string{"sasl.login.refresh.buffer.seconds", keyScope}, cfg.ignoredProps)

	cfg, err = ConfigFromProperties(map[string]string{
		"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p",
		keyTokenURL: "https://idp/token", "sasl.login.retry.backoff.ms": "10",
	})
	require.NoError(t, err)
	assert.Equal(t, "PLAIN", cfg.SASL.Name())
	assert.ElementsMatch(t, []string{keyTokenURL, "sasl.login.retry.backoff.ms"}, cfg.ignoredProps)

	// Their values do not matter then: not parsed, only logged.
	bad := map[string]string{"sasl.login.retry.backoff.ms": "x", "sasl.login.refresh.window.factor": "0.3", keyURLEncode: "yes",
		"sasl.login.refresh.buffer.seconds": "-1"}
	props := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"}
	for k, v := range bad {
		props[k] = v
	}
	cfg, err = ConfigFromProperties(props)
	require.NoError(t, err)
	assert.Equal(t, "PLAIN", cfg.SASL.Name())
	assert.ElementsMatch(t, []string{"sasl.login.retry.backoff.ms", "sasl.login.refresh.window.factor", keyURLEncode, "sasl.login.refresh.buffer.seconds"}, cfg.ignoredProps)
}

// TestAssertionPropertiesErrors: the keys of KIP-1139's jwt-bearer grant
// and KIP-1258's client assertion fail as Java's do when missing or
// contradicting, name the key, and never show the passphrase; Java's
// retriever classes are taken, another is refused; the files may be
// restricted by SAMSA_OAUTHBEARER_ALLOWED_FILES.
func TestAssertionPropertiesErrors(t *testing.T) {
	const tokenURL = "https://idp.example/token"
	t.Setenv(EnvAllowedTokenURLs, tokenURL+",file:///run/token")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "rsa.pem")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	const pass = "PASS-phrase-7"
	props := func(kv ...string) map[string]string {
		return propsWith(map[string]string{
			"bootstrap.servers": "k:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
			keyTokenURL: tokenURL, "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
		}, kv...)
	}
	bearer := func(kv ...string) map[string]string {
		return props(append([]string{keyRetriever, retrieverJWTBearer}, kv...)...)
	}
	// The files the cases may name.
	allowed := strings.Join([]string{keyFile, filepath.Join(dir, "none.pem"), filepath.Join(dir, "t.json")}, ",")
	tests := []struct {
		name  string
		env   string // SAMSA_OAUTHBEARER_ALLOWED_FILES
		props map[string]string
		want  []string // "" : no error
	}{
		{"jwt-bearer with a key", allowed, bearer(keyAssertionKey, keyFile), nil},
		{"jwt-bearer with an assertion file", allowed, bearer(keyAssertionFile, keyFile), []string{keyAssertionFile + ":", "outside printable ASCII"}},
		{"jwt-bearer without key or file", allowed, bearer(), []string{keyAssertionKey + ": is required"}},
		{"jwt-bearer, file: token URL", allowed, bearer(keyAssertionKey, keyFile, keyTokenURL, "file:///run/token"), []string{keyRetriever + ":", "posts to a token endpoint"}},
		{"client assertion by iss", allowed, props(keyAssertionIss, "svc", keyAssertionKey, keyFile), nil},
		{"client assertion, the secret ignored", allowed, props(keyAssertionIss, "svc", keyAssertionKey, keyFile, keyClientSecret, "sec-"+pass), nil},
		{"client assertion by iss, no key", allowed, props(keyAssertionIss, "svc"), []string{keyAssertionKey + ": is required"}},
		{"a key without iss is no client assertion", allowed, props(keyAssertionKey, keyFile), []string{"needs a client id and secret", keyAssertionIss}},
		{"unknown algorithm", allowed, bearer(keyAssertionKey, keyFile, keyAssertionAlg, "PS256"), []string{keyAssertionAlg + `: "PS256" is not RS256 or ES256`}},
		{"algorithm against the key", allowed, bearer(keyAssertionKey, keyFile, keyAssertionAlg, "es256"), []string{keyAssertionKey + ":", "RSA key, which does not sign ES256"}},
		{"exp seconds", allowed, bearer(keyAssertionKey, keyFile, keyAssertionExp, "-5"), []string{keyAssertionExp + `: "-5" is not an integer`}},
		{"nbf seconds", allowed, bearer(keyAssertionKey, keyFile, keyAssertionNbf, "soon"), []string{keyAssertionNbf}},
		{"jti include", allowed, bearer(keyAssertionKey, keyFile, keyAssertionJTI, "yes"), []string{keyAssertionJTI + `: "yes" is not true or false`}},
		{"missing key file", allowed, bearer(keyAssertionKey, filepath.Join(dir, "none.pem")), []string{keyAssertionKey + ":", "none.pem", "no such file"}},
		{"missing template", allowed, bearer(keyAssertionKey, keyFile, keyAssertionTemplate, filepath.Join(dir, "t.json")), []string{keyAssertionTemplate + ":", "no such file"}},
		{"passphrase on a plain key", allowed, bearer(keyAssertionKey, keyFile, keyAssertionKeyPass, pass), []string{keyAssertionKey + ":", "not encrypted"}},
		{"unknown retriever", allowed, props(keyRetriever, "com.example.MyRetriever"), []string{keyRetriever + `: "com.example.MyRetriever" cannot be loaded in Go`}},
		{"FileJwtRetriever with https", allowed, props(keyRetriever, retrieverFile), []string{keyRetriever + ":", "file: URL"}},
		{"DefaultJwtRetriever named", allowed, props(keyRetriever, retrieverDefault, keyAssertionIss, "svc", keyAssertionKey, keyFile), nil},
		{"exp seconds above Java's 86400", allowed, bearer(keyAssertionKey, keyFile, keyAssertionExp, "86401"), []string{keyAssertionExp + `: "86401" is not an integer in [0, 86400]`}},
		{"nbf seconds above Java's 3600", allowed, bearer(keyAssertionKey, keyFile, keyAssertionNbf, "3601"), []string{keyAssertionNbf + `: "3601" is not an integer in [0, 3600]`}},
		{"a blank assertion file is unset, as in Java", allowed, props(keyAssertionFile, " ", keyClientID, "svc", keyClientSecret, "sec-"+pass), nil},
		{"no list: no file allowed, as Java's default", "", bearer(keyAssertionKey, keyFile), []string{keyAssertionKey + ": names a file", EnvAllowedFiles}},
		{"allowed file", keyFile, bearer(keyAssertionKey, keyFile), nil},
		{"file not allowed", filepath.Join(dir, "other.pem"), bearer(keyAssertionKey, keyFile), []string{keyAssertionKey + ": names a file", EnvAllowedFiles, "org.apache.kafka.sasl.oauthbearer.allowed.files"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvAllowedFiles, tc.env)
			cfg, err := ConfigFromProperties(tc.props)
			if tc.want == nil {
				require.NoError(t, err)
				assert.Equal(t, "OAUTHBEARER", cfg.SASL.Name())
				for _, verb := range []string{"%v", "%+v", "%#v"} {
					assert.NotContains(t, fmt.Sprintf(verb, cfg), pass)
				}
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), pass)
			assert.NotContains(t, err.Error(), base64.StdEncoding.EncodeToString(der)[:40], "the key's bytes")
		})
	}
}
