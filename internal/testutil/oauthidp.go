package testutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Grants an IdP checks.
const (
	GrantJWTBearer         = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	GrantClientCredentials = "client_credentials"
	ClientAssertionType    = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
)

// AssertionWant is what an IdP demands of a client's assertion.
type AssertionWant struct {
	Grant         string           // GrantJWTBearer, or GrantClientCredentials with a client assertion
	ClientID      string           // the client_id form value with a client assertion ("": none sent)
	Alg           string           // "RS256" or "ES256"
	Key           crypto.PublicKey // verifies the assertion's signature
	Iss, Sub, Aud string
	// ExpSeconds and NbfSeconds: exp - iat and iat - nbf; JTI: a jti,
	// never seen before, is required.
	ExpSeconds, NbfSeconds int64
	JTI                    bool
	// Header fields the assertion's header must hold (a kid, say).
	Header map[string]string
}

// OAuthIdP is a token endpoint for tests that checks a client's assertion
// as Entra ID, Okta and Keycloak do (signature, claims, a jti not seen
// before) and answers an RS256 access token signed with its own key,
// which its JWKS publishes.
type OAuthIdP struct {
	Server   *httptest.Server
	TokenURL string
	// TokenSubject is the sub of the tokens it mints, TokenLifetime their
	// lifetime (default one hour).
	TokenSubject  string
	TokenLifetime time.Duration
	// TokenAudience, when set, is the aud of the tokens it mints;
	// TokenIssuer their iss (default: TokenURL).
	TokenAudience, TokenIssuer string
	// FixedToken, when set, is answered instead of a minted token (for a
	// broker that knows its users' tokens in advance).
	FixedToken string

	want AssertionWant
	key  *rsa.PrivateKey
	kid  string

	mu       sync.Mutex
	jtis     map[string]bool
	failures []string
	issued   int
	last     string
}

// NewOAuthIdP starts an IdP over plain HTTP, closed when t ends, with a
// signing key of its own.
func NewOAuthIdP(t testing.TB, want AssertionWant) *OAuthIdP {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return NewOAuthIdPWithKey(t, want, key, "idp-key-1")
}

// NewOAuthIdPWithKey starts an IdP that signs its tokens with key, kid
// in their header (a key a broker's JWKS already holds).
func NewOAuthIdPWithKey(t testing.TB, want AssertionWant, key *rsa.PrivateKey, kid string) *OAuthIdP {
	t.Helper()
	p := &OAuthIdP{want: want, key: key, kid: kid, jtis: map[string]bool{}, TokenSubject: "samsa-client", TokenLifetime: time.Hour}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	p.TokenURL = p.Server.URL + "/oauth2/token"
	t.Cleanup(p.Server.Close)
	return p
}

// Failures lists why the IdP refused requests.
func (p *OAuthIdP) Failures() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.failures...)
}

// Issued counts the tokens answered.
func (p *OAuthIdP) Issued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.issued
}

// LastAssertion is the assertion of the last request.
func (p *OAuthIdP) LastAssertion() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// JWKS is the JSON Web Key Set that verifies the IdP's tokens.
func (p *OAuthIdP) JWKS() []byte {
	enc := base64.RawURLEncoding.EncodeToString
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": p.kid,
		"n": enc(p.key.N.Bytes()), "e": enc(big.NewInt(int64(p.key.E)).Bytes()),
	}}})
	return b
}

func (p *OAuthIdP) serve(w http.ResponseWriter, r *http.Request) {
	refuse := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		p.mu.Lock()
		p.failures = append(p.failures, msg)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": msg})
	}
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		refuse("not a form POST")
		return
	}
	if r.Header.Get("Authorization") != "" {
		refuse("an Authorization header came with an assertion")
		return
	}
	f := r.PostForm
	var assertion string
	switch g := f.Get("grant_type"); {
	case g != p.want.Grant:
		refuse("grant_type %q, want %q", g, p.want.Grant)
		return
	case g == GrantJWTBearer:
		assertion = f.Get("assertion")
	default:
		if at := f.Get("client_assertion_type"); at != ClientAssertionType {
			refuse("client_assertion_type %q", at)
			return
		}
		if id := f.Get("client_id"); id != p.want.ClientID {
			refuse("client_id %q, want %q", id, p.want.ClientID)
			return
		}
		assertion = f.Get("client_assertion")
	}
	p.mu.Lock()
	p.last = assertion
	p.mu.Unlock()
	header, claims, err := VerifyJWT(assertion, p.want.Alg, p.want.Key)
	if err != nil {
		refuse("assertion: %v", err)
		return
	}
	if msg := p.checkClaims(header, claims); msg != "" {
		refuse("assertion: %s", msg)
		return
	}
	now := time.Now().Unix()
	minted := map[string]any{
		"sub": p.TokenSubject, "iss": p.TokenURL, "iat": now, "exp": now + int64(p.TokenLifetime/time.Second), "scope": "kafka",
	}
	if p.TokenAudience != "" {
		minted["aud"] = p.TokenAudience
	}
	if p.TokenIssuer != "" {
		minted["iss"] = p.TokenIssuer
	}
	tok, err := SignJWT(p.key, "RS256", map[string]any{"kid": p.kid}, minted)
	if err != nil {
		refuse("minting: %v", err)
		return
	}
	if p.FixedToken != "" {
		tok = p.FixedToken
	}
	p.mu.Lock()
	p.issued++
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int64(p.TokenLifetime / time.Second)})
}

// checkClaims returns why the assertion's claims do not do, or "".
func (p *OAuthIdP) checkClaims(header, c map[string]any) string {
	str := func(k string) string { s, _ := c[k].(string); return s }
	num := func(k string) (int64, bool) { f, ok := c[k].(float64); return int64(f), ok }
	for k, want := range map[string]string{"iss": p.want.Iss, "sub": p.want.Sub, "aud": p.want.Aud} {
		if str(k) != want {
			return fmt.Sprintf("%s %q, want %q", k, str(k), want)
		}
	}
	for k, want := range p.want.Header {
		if got, _ := header[k].(string); got != want {
			return fmt.Sprintf("header %s %q, want %q", k, got, want)
		}
	}
	if typ, _ := header["typ"].(string); typ != "JWT" {
		return fmt.Sprintf("header typ %q", typ)
	}
	iat, ok1 := num("iat")
	exp, ok2 := num("exp")
	nbf, ok3 := num("nbf")
	now := time.Now().Unix()
	switch {
	case !ok1 || !ok2 || !ok3:
		return "iat, exp or nbf missing"
	case iat < now-30 || iat > now+30:
		return fmt.Sprintf("iat %d is not now (%d)", iat, now)
	case exp-iat != p.want.ExpSeconds:
		return fmt.Sprintf("exp - iat = %d, want %d", exp-iat, p.want.ExpSeconds)
	case iat-nbf != p.want.NbfSeconds:
		return fmt.Sprintf("iat - nbf = %d, want %d", iat-nbf, p.want.NbfSeconds)
	}
	jti, hasJTI := c["jti"].(string)
	switch {
	case p.want.JTI && !hasJTI:
		return "no jti"
	case !p.want.JTI && hasJTI:
		return "a jti that was not asked for"
	case hasJTI:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.jtis[jti] {
			return "jti " + jti + " replayed"
		}
		p.jtis[jti] = true
	}
	return ""
}

// VerifyJWT checks a compact JWS's signature with pub (RS256 or ES256,
// whose signature is r||s) and returns its header and claims.
func VerifyJWT(tok, alg string, pub crypto.PublicKey) (header, claims map[string]any, err error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, nil, errors.New("not three parts")
	}
	dec := base64.RawURLEncoding.DecodeString
	h, err1 := dec(parts[0])
	c, err2 := dec(parts[1])
	sig, err3 := dec(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, nil, errors.New("a part is not base64url")
	}
	if json.Unmarshal(h, &header) != nil || json.Unmarshal(c, &claims) != nil {
		return nil, nil, errors.New("a part is not JSON")
	}
	if header["alg"] != alg {
		return nil, nil, fmt.Errorf("alg %v, want %s", header["alg"], alg)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if alg != "RS256" || rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig) != nil {
			return nil, nil, errors.New("the RS256 signature does not verify")
		}
	case *ecdsa.PublicKey:
		if alg != "ES256" || len(sig) != 64 ||
			!ecdsa.Verify(k, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
			return nil, nil, errors.New("the ES256 signature (r||s) does not verify")
		}
	default:
		return nil, nil, fmt.Errorf("no verifier for %T", pub)
	}
	return header, claims, nil
}

// SignJWT signs a JWT with an RSA (RS256) or P-256 (ES256) key.
func SignJWT(key crypto.Signer, alg string, header, claims map[string]any) (string, error) {
	header["alg"], header["typ"] = alg, "JWT"
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding.EncodeToString
	input := enc(h) + "." + enc(c)
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		s, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
		if err != nil {
			return "", err
		}
		sig = s
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			return "", err
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	default:
		return "", fmt.Errorf("cannot sign with %T", key)
	}
	return input + "." + enc(sig), nil
}

// WriteKey makes a key ("rsa" 2048 bits, or "ec" P-256), writes it in
// dir as PEM in the form asked ("pkcs8", "pkcs1" for RSA, "sec1" for EC),
// and returns the file and the key.
func WriteKey(t testing.TB, dir, kind, form string) (string, crypto.Signer) {
	t.Helper()
	var key crypto.Signer
	var err error
	if kind == "rsa" {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, kind+"-"+form+".pem")
	WriteKeyAs(t, path, key, form)
	return path, key
}

// WriteKeyAs writes key to path as PEM in form ("pkcs8", "pkcs1",
// "sec1").
func WriteKeyAs(t testing.TB, path string, key crypto.Signer, form string) {
	t.Helper()
	var b *pem.Block
	switch form {
	case "pkcs1":
		b = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key.(*rsa.PrivateKey))}
	case "sec1":
		der, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
		if err != nil {
			t.Fatal(err)
		}
		b = &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
	default:
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		b = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(b), 0o600); err != nil {
		t.Fatal(err)
	}
}
