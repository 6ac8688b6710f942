package sasl_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/sasl"
)

// TestAssertionLogins: the jwt-bearer grant (KIP-1139) and the client
// credentials grant with a private_key_jwt client assertion (KIP-1258),
// signed with RS256 and ES256 keys of every PEM form, reach a token
// endpoint that verifies the signature and the claims as Entra ID, Okta
// and Keycloak do (iss, sub, aud, iat, exp, nbf, a jti never seen twice,
// no Authorization header); two sources never send the same jti.
func TestAssertionLogins(t *testing.T) {
	cases := []struct {
		name, kind, form, alg string
		bearer                bool
		clientID              string
	}{
		{"jwt-bearer RS256 PKCS#8", "rsa", "pkcs8", "RS256", true, ""},
		{"jwt-bearer ES256 PKCS#8", "ec", "pkcs8", "ES256", true, ""},
		{"jwt-bearer RS256 PKCS#1", "rsa", "pkcs1", "rs256", true, ""},
		{"private_key_jwt RS256 PKCS#8", "rsa", "pkcs8", "RS256", false, "svc-1"},
		{"private_key_jwt ES256 SEC1", "ec", "sec1", "ES256", false, "svc-1"},
		{"private_key_jwt ES256 no client_id", "ec", "pkcs8", "ES256", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			keyFile, key := testutil.WriteKey(t, t.TempDir(), tc.kind, tc.form)
			grant := testutil.GrantClientCredentials
			if tc.bearer {
				grant = testutil.GrantJWTBearer
			}
			p := testutil.NewOAuthIdP(t, testutil.AssertionWant{
				Grant: grant, ClientID: tc.clientID, Alg: strings.ToUpper(tc.alg), Key: key.Public(),
				Iss: "svc-1", Sub: "svc-1", ExpSeconds: 300, NbfSeconds: 60, JTI: true,
			})
			for range 2 { // the same endpoint: its jti check spans both sources
				cfg := sasl.ClientCredentialsConfig{
					TokenURL: p.TokenURL, ClientID: tc.clientID, Scope: "kafka",
					Assertion: &sasl.AssertionConfig{
						PrivateKeyFile: keyFile, Algorithm: tc.alg,
						Issuer: "svc-1", Subject: "svc-1", Audience: "", IncludeJTI: true,
					},
				}
				var src func(context.Context) (sasl.Token, error)
				var err error
				if tc.bearer {
					src, err = sasl.JWTBearer(cfg)
				} else {
					src, err = sasl.ClientCredentials(cfg)
				}
				require.NoError(t, err)
				tok, err := src(context.Background())
				require.NoError(t, err, "refused: %v", p.Failures())
				assert.Equal(t, 3, strings.Count(tok.Value, ".")+1, "the IdP's JWT")
			}
			assert.Empty(t, p.Failures())
			assert.Equal(t, 2, p.Issued())
		})
	}
}

// TestAssertionClaimsAndTemplate: aud, the exp and nbf offsets, the
// template file's header (a kid) and claims, and Java's layering (the
// dynamic claims win over the template's, which win over aud/iss/sub);
// without IncludeJTI no jti is sent (Java's default).
func TestAssertionClaimsAndTemplate(t *testing.T) {
	dir := t.TempDir()
	keyFile, key := testutil.WriteKey(t, dir, "ec", "pkcs8")
	tmpl := filepath.Join(dir, "template.json")
	require.NoError(t, os.WriteFile(tmpl, []byte(`{"header":{"kid":"k-7"},"payload":{"sub":"from-template","exp":1,"tenant":"t1"}}`), 0o600))
	p := testutil.NewOAuthIdP(t, testutil.AssertionWant{
		Grant: testutil.GrantJWTBearer, Alg: "ES256", Key: key.Public(),
		Iss: "svc", Sub: "from-template", Aud: "https://idp.example/token",
		ExpSeconds: 120, NbfSeconds: 0, Header: map[string]string{"kid": "k-7"},
	})
	src, err := sasl.JWTBearer(sasl.ClientCredentialsConfig{TokenURL: p.TokenURL, Assertion: &sasl.AssertionConfig{
		PrivateKeyFile: keyFile, Algorithm: "ES256", Issuer: "svc", Subject: "svc", Audience: "https://idp.example/token",
		Expiry: 120 * time.Second, NotBefore: -1, TemplateFile: tmpl,
	}})
	require.NoError(t, err)
	_, err = src(context.Background())
	require.NoError(t, err, "refused: %v", p.Failures())
	_, claims, err := testutil.VerifyJWT(p.LastAssertion(), "ES256", key.Public())
	require.NoError(t, err)
	assert.Equal(t, "t1", claims["tenant"])
	assert.NotContains(t, claims, "jti")
}

// TestAssertionFileIsSent: with File, the file's assertion goes as it
// is, and a new one written to the file is sent on the next fetch.
func TestAssertionFileIsSent(t *testing.T) {
	dir := t.TempDir()
	_, key := testutil.WriteKey(t, dir, "rsa", "pkcs8")
	mint := func(jti string) string {
		now := time.Now().Unix()
		a, err := testutil.SignJWT(key, "RS256", map[string]any{}, map[string]any{"iss": "ext", "sub": "ext", "aud": "", "iat": now, "exp": now + 300, "nbf": now - 60, "jti": jti})
		require.NoError(t, err)
		return a
	}
	file := filepath.Join(dir, "assertion.jwt")
	require.NoError(t, os.WriteFile(file, []byte(mint("a-1")+"\n"), 0o600))
	p := testutil.NewOAuthIdP(t, testutil.AssertionWant{
		Grant: testutil.GrantClientCredentials, ClientID: "ext", Alg: "RS256", Key: key.Public(),
		Iss: "ext", Sub: "ext", ExpSeconds: 300, NbfSeconds: 60, JTI: true,
	})
	p.TokenLifetime = 2 * time.Second // expires soon: the second call fetches again
	src, err := sasl.ClientCredentials(sasl.ClientCredentialsConfig{
		TokenURL: p.TokenURL, ClientID: "ext", Assertion: &sasl.AssertionConfig{File: file},
		RefreshMinPeriod: -1, RefreshBuffer: -1,
	})
	require.NoError(t, err)
	_, err = src(context.Background())
	require.NoError(t, err, "refused: %v", p.Failures())
	second := mint("a-2")
	require.NoError(t, os.WriteFile(file, []byte(second), 0o600))
	require.Eventually(t, func() bool {
		_, _ = src(context.Background())
		return p.LastAssertion() == second
	}, 10*time.Second, 50*time.Millisecond)
	assert.Empty(t, p.Failures())
}

// TestEncryptedPrivateKey: an ENCRYPTED PRIVATE KEY as OpenSSL writes it
// (PBES2, PBKDF2 with HMAC-SHA-256 or -1, AES-256/128-CBC) signs with the
// right passphrase; a wrong one fails without showing it.
func TestEncryptedPrivateKey(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl to write an encrypted key")
	}
	const pass = "pa55-PHRASE-q9"
	cases := []struct{ name, kind, cipher, prf string }{
		{"RSA AES-256 SHA-256", "rsa", "aes256", "hmacWithSHA256"},
		{"EC AES-128 SHA-1", "ec", "aes128", "hmacWithSHA1"},
		{"EC AES-192 SHA-512", "ec", "aes192", "hmacWithSHA512"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plain, key := testutil.WriteKey(t, dir, tc.kind, "pkcs8")
			enc := filepath.Join(dir, "enc.pem")
			out, err := exec.Command("openssl", "pkcs8", "-topk8", "-in", plain, "-out", enc,
				"-v2", tc.cipher, "-v2prf", tc.prf, "-passout", "pass:"+pass).CombinedOutput()
			require.NoError(t, err, "%s", out)
			head, _ := os.ReadFile(enc)
			require.Contains(t, string(head), "ENCRYPTED PRIVATE KEY")
			alg := map[string]string{"rsa": "RS256", "ec": "ES256"}[tc.kind]
			p := testutil.NewOAuthIdP(t, testutil.AssertionWant{
				Grant: testutil.GrantJWTBearer, Alg: alg, Key: key.Public(), Iss: "svc", Sub: "svc", ExpSeconds: 300, NbfSeconds: 60,
			})
			cfg := sasl.ClientCredentialsConfig{TokenURL: p.TokenURL, Assertion: &sasl.AssertionConfig{
				PrivateKeyFile: enc, PrivateKeyPassphrase: pass, Algorithm: alg, Issuer: "svc", Subject: "svc",
			}}
			src, err := sasl.JWTBearer(cfg)
			require.NoError(t, err)
			_, err = src(context.Background())
			require.NoError(t, err, "refused: %v", p.Failures())

			cfg.Assertion.PrivateKeyPassphrase = "wrong-" + pass
			_, err = sasl.JWTBearer(cfg)
			require.ErrorContains(t, err, "wrong passphrase")
			assert.NotContains(t, err.Error(), pass)
			cfg.Assertion.PrivateKeyPassphrase = ""
			_, err = sasl.JWTBearer(cfg)
			require.ErrorContains(t, err, "no passphrase is set")
		})
	}
}

// TestAssertionConfigErrors: a key or file that cannot sign fails at
// construction with an error naming the problem, never the key's bytes
// or the passphrase.
func TestAssertionConfigErrors(t *testing.T) {
	dir := t.TempDir()
	rsaKey, _ := testutil.WriteKey(t, dir, "rsa", "pkcs8")
	ecKey, _ := testutil.WriteKey(t, dir, "ec", "pkcs8")
	small := filepath.Join(dir, "small.pem")
	k1024, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	testutil.WriteKeyAs(t, small, k1024, "pkcs8")
	p384 := filepath.Join(dir, "p384.pem")
	k384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	testutil.WriteKeyAs(t, p384, k384, "pkcs8")
	garbage := filepath.Join(dir, "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("-----BEGIN PRIVATE KEY-----\nTUlJQ0VL\n-----END PRIVATE KEY-----\n"), 0o600))
	notKey := filepath.Join(dir, "notkey.pem")
	require.NoError(t, os.WriteFile(notKey, []byte("hello"), 0o600))
	badTemplate := filepath.Join(dir, "template.json")
	require.NoError(t, os.WriteFile(badTemplate, []byte(`{"header": [1, 2`), 0o600))
	notJWT := filepath.Join(dir, "notjwt")
	require.NoError(t, os.WriteFile(notJWT, []byte("just-a-string"), 0o600))
	keyBytes, err := os.ReadFile(rsaKey)
	require.NoError(t, err)

	const url = "https://idp.example/token"
	cases := []struct {
		name   string
		bearer bool
		cfg    sasl.ClientCredentialsConfig
		want   string
	}{
		{"missing key file", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: filepath.Join(dir, "nope.pem")}}, "no such file"},
		{"key file is a directory", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: dir}}, "is a directory"},
		{"no key", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{}}, "needs File or PrivateKeyFile"},
		{"not a key", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: notKey}}, "no PEM private key"},
		{"garbage PKCS#8", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: garbage}}, "does not parse"},
		{"RSA key for ES256", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: rsaKey, Algorithm: "ES256"}}, "RSA key, which does not sign ES256"},
		{"EC key for RS256 (the default)", false, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: ecKey}}, "EC key, which does not sign RS256"},
		{"HS256", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: rsaKey, Algorithm: "HS256"}}, `"HS256" is not RS256 or ES256`},
		{"RSA 1024", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: small}}, "1024 bits"},
		{"P-384", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: p384, Algorithm: "ES256"}}, "P-384"},
		{"passphrase on a plain key", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: rsaKey, PrivateKeyPassphrase: "pp-SECRET-1"}}, "not encrypted"},
		{"template not JSON", true, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{PrivateKeyFile: rsaKey, TemplateFile: badTemplate}}, "not a JSON object"},
		{"missing assertion file", false, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{File: filepath.Join(dir, "none.jwt")}}, "no such file"},
		{"assertion file not a JWT", false, sasl.ClientCredentialsConfig{TokenURL: url, Assertion: &sasl.AssertionConfig{File: notJWT}}, "does not hold a JWT"},
		{"secret and assertion", false, sasl.ClientCredentialsConfig{TokenURL: url, ClientID: "c", ClientSecret: "s3cr3t", Assertion: &sasl.AssertionConfig{PrivateKeyFile: rsaKey}}, "both set"},
		{"jwt-bearer without assertion", true, sasl.ClientCredentialsConfig{TokenURL: url}, "Assertion is required"},
		{"jwt-bearer with client id", true, sasl.ClientCredentialsConfig{TokenURL: url, ClientID: "c", Assertion: &sasl.AssertionConfig{PrivateKeyFile: rsaKey}}, "must be empty"},
		{"file: token URL", false, sasl.ClientCredentialsConfig{TokenURL: "file:///tmp/tok", Assertion: &sasl.AssertionConfig{PrivateKeyFile: rsaKey}}, "takes no assertion"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.bearer {
				_, err = sasl.JWTBearer(tc.cfg)
			} else {
				_, err = sasl.ClientCredentials(tc.cfg)
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "pp-SECRET-1")
			assert.NotContains(t, err.Error(), "s3cr3t")
			body := strings.Split(string(keyBytes), "\n")[1]
			assert.NotContains(t, err.Error(), body[:20])
		})
	}
}

// TestAssertionNeverShown: an endpoint that echoes the assertion in its
// error, and an assertion file that disappears after construction, give
// errors without the assertion; printing the configuration never shows
// the passphrase.
func TestAssertionNeverShown(t *testing.T) {
	dir := t.TempDir()
	keyFile, _ := testutil.WriteKey(t, dir, "ec", "pkcs8")
	for _, echoWhat := range []string{"whole", "signature"} {
		var got string
		echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = r.ParseForm()
			got = r.PostForm.Get("client_assertion")
			shown := got
			if echoWhat == "signature" {
				shown = got[strings.LastIndexByte(got, '.')+1:]
			}
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"invalid_client %s","error_description":"bad: %s"}`, shown, shown)
		}))
		cfg := sasl.ClientCredentialsConfig{TokenURL: echo.URL, ClientID: "c", Assertion: &sasl.AssertionConfig{PrivateKeyFile: keyFile, Algorithm: "ES256"}, RetryBackoffMax: -1}
		src, err := sasl.ClientCredentials(cfg)
		require.NoError(t, err)
		_, err = src(context.Background())
		echo.Close()
		require.Error(t, err)
		require.NotEmpty(t, got)
		sig := got[strings.LastIndexByte(got, '.')+1:]
		assert.NotContains(t, err.Error(), sig[:16], "echoing the %s", echoWhat)
		assert.Contains(t, err.Error(), "invalid_client")
	}
	const pass = "never-PRINT-me"
	cfg := sasl.ClientCredentialsConfig{TokenURL: "https://idp.example/token", ClientID: "c", Assertion: &sasl.AssertionConfig{PrivateKeyFile: keyFile, Algorithm: "ES256"}}
	src, err := sasl.ClientCredentials(cfg)
	require.NoError(t, err)

	cfg.Assertion.PrivateKeyPassphrase = pass
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		assert.NotContains(t, fmt.Sprintf(verb, cfg), pass)
		assert.NotContains(t, fmt.Sprintf(verb, *cfg.Assertion), pass)
		assert.NotContains(t, fmt.Sprintf(verb, cfg.Assertion), pass)
	}
	assert.Contains(t, fmt.Sprint(cfg), "PrivateKeyFile")

	// A file that goes missing fails the fetch, naming the file.
	file := filepath.Join(dir, "a.jwt")
	require.NoError(t, os.WriteFile(file, []byte("aaa.bbb.ccc"), 0o600))
	_ = src
	src, err = sasl.ClientCredentials(sasl.ClientCredentialsConfig{TokenURL: "http://127.0.0.1:1/token", Assertion: &sasl.AssertionConfig{File: file}})
	require.NoError(t, err)
	require.NoError(t, os.Remove(file))
	_, err = src(context.Background())
	var te *sasl.TokenEndpointError
	require.ErrorAs(t, err, &te)
	assert.Contains(t, err.Error(), "a.jwt")
	assert.Equal(t, 1, te.Attempts, "not retried")
}

// TestAssertionNotLogged: a background refresh refused by an endpoint
// that quotes the assertion is logged at Warn without the assertion or
// its signature.
func TestAssertionNotLogged(t *testing.T) {
	keyFile, _ := testutil.WriteKey(t, t.TempDir(), "ec", "pkcs8")
	var logs testutil.SyncBuffer
	var sent atomic.Value
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		a := r.PostForm.Get("assertion")
		sent.Store(a)
		if n.Add(1) == 1 {
			fmt.Fprint(w, `{"access_token":"tok-1","expires_in":2}`)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"invalid_grant","error_description":"assertion %s sig %s"}`, a, a[strings.LastIndexByte(a, '.')+1:])
	}))
	t.Cleanup(srv.Close)
	src, err := sasl.JWTBearer(sasl.ClientCredentialsConfig{
		TokenURL: srv.URL, Assertion: &sasl.AssertionConfig{PrivateKeyFile: keyFile, Algorithm: "ES256"},
		RetryBackoffMax: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		RefreshMinPeriod: -1, RefreshBuffer: -1, RefreshWindowJitter: -1, RefreshWindowFactor: 0.5,
	})
	require.NoError(t, err)
	_, err = src(context.Background())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, _ = src(context.Background()) // starts the refresh once its time has come
		return strings.Contains(logs.String(), "level=WARN")
	}, 5*time.Second, 50*time.Millisecond)
	a := sent.Load().(string)
	out := logs.String()
	assert.Contains(t, out, "invalid_grant")
	assert.NotContains(t, out, a[strings.LastIndexByte(a, '.')+1:][:16])
}

// panicBody is a RoundTripper that panics with the request's body, as a
// buggy transport might.
type panicBody struct{}

func (panicBody) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	panic("transport bug: " + string(b))
}

// TestAssertionNotInPanic: a panic of the HTTP client that quotes the
// request goes on up the caller's goroutine, and is recorded as the
// fetch's error, without the assertion (its text was shown whole).
func TestAssertionNotInPanic(t *testing.T) {
	keyFile, _ := testutil.WriteKey(t, t.TempDir(), "ec", "pkcs8")
	src, err := sasl.JWTBearer(sasl.ClientCredentialsConfig{
		TokenURL: "https://idp.example/token", Assertion: &sasl.AssertionConfig{PrivateKeyFile: keyFile, Algorithm: "ES256"},
		HTTPClient: &http.Client{Transport: panicBody{}}, RetryBackoffMax: -1,
	})
	require.NoError(t, err)
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_, _ = src(context.Background())
	}()
	text := fmt.Sprint(recovered)
	require.Contains(t, text, "transport bug: ")
	assert.Contains(t, text, "assertion=")
	// The form's assertion is redacted whole: no JWT part (header,
	// claims, signature: base64url of at least 16 characters) is left.
	_, form, _ := strings.Cut(text, "assertion=")
	form, _, _ = strings.Cut(form, "&")
	assert.NotRegexp(t, `[A-Za-z0-9_-]{16,}`, form, "the panic shows the assertion: %s", text)
}

// TestAssertionConfigEncodings: no encoding of the configurations shows
// the passphrase or the secret: fmt, slog's text and JSON handlers,
// encoding/json.
func TestAssertionConfigEncodings(t *testing.T) {
	const pass, secret = "PASS-phrase-7", "client-secret-9"
	a := sasl.AssertionConfig{PrivateKeyFile: "/k.pem", PrivateKeyPassphrase: pass}
	c := sasl.ClientCredentialsConfig{TokenURL: "https://idp.example/token", ClientID: "id", ClientSecret: secret, Assertion: &a}
	var logs strings.Builder
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "a", a, "c", c, "ap", &a, "cp", &c)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "a", a, "c", c, "ap", &a, "cp", &c)
	for _, v := range []any{a, c, &a, &c} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		logs.Write(b)
		fmt.Fprintf(&logs, "%v %+v %#v %s", v, v, v, v)
	}
	out := logs.String()
	assert.Contains(t, out, "/k.pem")
	assert.NotContains(t, out, pass)
	assert.NotContains(t, out, secret)
}

// TestAssertionFileNotRegular: a file the client would block on (a FIFO,
// a device) is refused, not read.
func TestAssertionFileNotRegular(t *testing.T) {
	if _, err := os.Stat(os.DevNull); err != nil || os.DevNull != "/dev/null" {
		t.Skip("no /dev/null")
	}
	_, err := sasl.JWTBearer(sasl.ClientCredentialsConfig{
		TokenURL: "https://idp.example/token", Assertion: &sasl.AssertionConfig{File: os.DevNull},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a regular file")
}
