package sasl

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"
	"time"
)

// Defaults of [AssertionConfig], Kafka's.
const (
	defaultAssertionExpiry    = 300 * time.Second // sasl.oauthbearer.assertion.claim.exp.seconds
	defaultAssertionNotBefore = 60 * time.Second  // sasl.oauthbearer.assertion.claim.nbf.seconds
)

// Grant and client assertion types of RFC 7523.
const (
	grantJWTBearer      = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
)

// AssertionConfig is the JWT a client proves itself with instead of a
// client secret (RFC 7521, RFC 7523), as Kafka's Java client builds it:
// either read from File (a JWT made by someone else, KIP-1139's
// sasl.oauthbearer.assertion.file), or built and signed anew for every
// token request from the claims, TemplateFile and the key in
// PrivateKeyFile. It serves two grants: as the client's authentication
// in the client credentials grant ([ClientCredentialsConfig.Assertion],
// KIP-1258's private_key_jwt, which Entra ID, Okta and Keycloak accept),
// and as the grant itself ([JWTBearer], KIP-1139).
//
// A signed assertion has the header {"alg": Algorithm, "typ": "JWT"} and
// the claims aud, iss and sub (when set), then those of TemplateFile, then
// iat (now, in seconds), exp (iat + Expiry), nbf (iat - NotBefore) and,
// with IncludeJTI, a random jti; a later source wins, as in Java.
//
// Printing an AssertionConfig (%v, %+v, %#v) never shows
// PrivateKeyPassphrase. No error shows the key, the passphrase or an
// assertion.
type AssertionConfig struct {
	// File names a file that holds a finished assertion
	// (sasl.oauthbearer.assertion.file). It is read again whenever its
	// size or modification time changes, so that whoever renews it
	// need not restart the client; every other field is then ignored,
	// as in Java.
	File string
	// PrivateKeyFile is the PEM file of the signing key
	// (sasl.oauthbearer.assertion.private.key.file): PKCS#8, PKCS#1 (RSA)
	// or SEC 1 (EC), or an ENCRYPTED PRIVATE KEY (PKCS#8 with PBES2:
	// PBKDF2 and AES-CBC, as OpenSSL and Java write it) with
	// PrivateKeyPassphrase. Read again whenever it changes. Required
	// without File.
	PrivateKeyFile string
	// PrivateKeyPassphrase decrypts an ENCRYPTED PRIVATE KEY
	// (sasl.oauthbearer.assertion.private.key.passphrase). Never printed.
	PrivateKeyPassphrase string
	// Algorithm signs the assertion and is its "alg" header
	// (sasl.oauthbearer.assertion.algorithm): "RS256" (an RSA key) or
	// "ES256" (a P-256 key), in any case. Default "RS256", as in Java.
	Algorithm string
	// Audience, Issuer and Subject are the aud, iss and sub claims, when
	// not empty (sasl.oauthbearer.assertion.claim.aud, .iss, .sub). Entra
	// ID, Okta and Keycloak want the client id as iss and sub and the
	// token endpoint as aud.
	Audience, Issuer, Subject string
	// Expiry is how long an assertion is valid: exp = iat + Expiry
	// (sasl.oauthbearer.assertion.claim.exp.seconds). Default 300s;
	// negative: exp = iat. Whole seconds.
	Expiry time.Duration
	// NotBefore dates nbf back from iat: nbf = iat - NotBefore
	// (sasl.oauthbearer.assertion.claim.nbf.seconds), for clocks that
	// differ. Default 60s; negative: nbf = iat. Whole seconds.
	NotBefore time.Duration
	// IncludeJTI adds a jti claim, a random UUID, to every assertion
	// (sasl.oauthbearer.assertion.claim.jti.include). Default false, as
	// in Java; Entra ID, Okta and Keycloak require it.
	IncludeJTI bool
	// TemplateFile names a JSON file {"header": {...}, "payload": {...}}
	// of header fields (a kid, Entra ID's x5t) and claims to add
	// (sasl.oauthbearer.assertion.template.file). Read again whenever it
	// changes. Default: none.
	TemplateFile string
}

// String prints the configuration with the passphrase redacted.
func (c AssertionConfig) String() string {
	pass := ""
	if c.PrivateKeyPassphrase != "" {
		pass = redacted
	}
	return fmt.Sprintf("sasl.AssertionConfig{File: %q, PrivateKeyFile: %q, PrivateKeyPassphrase: %s, Algorithm: %q, Audience: %q, Issuer: %q, Subject: %q, Expiry: %v, NotBefore: %v, IncludeJTI: %v, TemplateFile: %q}",
		c.File, c.PrivateKeyFile, pass, c.Algorithm, c.Audience, c.Issuer, c.Subject, c.Expiry, c.NotBefore, c.IncludeJTI, c.TemplateFile)
}

// GoString is String: %#v does not print the passphrase either.
func (c AssertionConfig) GoString() string { return c.String() }

// Format prints String for every verb.
func (c AssertionConfig) Format(f fmt.State, verb rune) { fmt.Fprint(f, c.String()) }

// LogValue is String for log/slog, so that no handler (slog's JSON one
// reflects over a value otherwise) prints the passphrase.
func (c AssertionConfig) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalJSON encodes String as a JSON string: encoding/json does not
// print the passphrase either.
func (c AssertionConfig) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

// assertionMaker makes the assertion of each token request.
type assertionMaker struct {
	file *cachedFile[string] // a finished assertion; the rest unused

	alg               string
	claims            map[string]any // aud, iss, sub
	expiry, notBefore time.Duration
	jti               bool
	key               *cachedFile[crypto.Signer]
	template          *cachedFile[jwtTemplate] // nil without one
}

// jwtTemplate is a template file's content.
type jwtTemplate struct {
	Header  map[string]any `json:"header"`
	Payload map[string]any `json:"payload"`
}

// newAssertionMaker checks cfg and reads its files once, so that a bad
// key or template fails at construction.
func newAssertionMaker(cfg AssertionConfig) (*assertionMaker, error) {
	if strings.TrimSpace(cfg.File) != "" {
		m := &assertionMaker{file: newCachedFile(strings.TrimSpace(cfg.File), parseAssertionFile)}
		if _, err := m.file.get(); err != nil {
			return nil, fmt.Errorf("assertion file: %w", err)
		}
		return m, nil
	}
	alg := strings.ToUpper(strings.TrimSpace(cfg.Algorithm))
	switch alg {
	case "":
		alg = AlgRS256
	case AlgRS256, AlgES256:
	default:
		return nil, fmt.Errorf("assertion algorithm %q is not RS256 or ES256", cfg.Algorithm)
	}
	path := strings.TrimSpace(cfg.PrivateKeyFile)
	if path == "" {
		return nil, errors.New("the assertion needs File or PrivateKeyFile")
	}
	pass := cfg.PrivateKeyPassphrase
	m := &assertionMaker{
		alg:       alg,
		claims:    map[string]any{},
		expiry:    max(tokenTimeout(cfg.Expiry, defaultAssertionExpiry), 0).Truncate(time.Second),
		notBefore: max(tokenTimeout(cfg.NotBefore, defaultAssertionNotBefore), 0).Truncate(time.Second),
		jti:       cfg.IncludeJTI,
		key: newCachedFile(path, func(b []byte) (crypto.Signer, error) {
			return parseSigningKey(b, pass, alg)
		}),
	}
	for name, v := range map[string]string{"aud": cfg.Audience, "iss": cfg.Issuer, "sub": cfg.Subject} {
		if v = strings.TrimSpace(v); v != "" {
			m.claims[name] = v
		}
	}
	if _, err := m.key.get(); err != nil {
		return nil, fmt.Errorf("assertion private key file: %w", err)
	}
	if t := strings.TrimSpace(cfg.TemplateFile); t != "" {
		m.template = newCachedFile(t, parseTemplate)
		if _, err := m.template.get(); err != nil {
			return nil, fmt.Errorf("assertion template file: %w", err)
		}
	}
	return m, nil
}

// parseAssertionFile takes a finished assertion: a JWT's three parts.
func parseAssertionFile(b []byte) (string, error) {
	a := strings.TrimSpace(string(b))
	switch {
	case a == "":
		return "", errors.New("the file is empty")
	case !printableToken(a):
		return "", errors.New("the assertion holds a character outside printable ASCII")
	case strings.Count(a, ".") != 2 && strings.Count(a, ".") != 4:
		// Three parts: a signed JWT (JWS); five: an encrypted one
		// (JWE, RFC 7516), which RFC 7523 allows as an assertion.
		return "", errors.New("the file does not hold a JWT (three or five parts separated by '.')")
	}
	return a, nil
}

// parseTemplate reads a template file. Its errors never quote it.
func parseTemplate(b []byte) (jwtTemplate, error) {
	var t jwtTemplate
	// Numbers stay as written: a float64 would change an integer claim
	// above 2^53.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&t); err != nil || dec.Decode(&struct{}{}) != io.EOF {
		return jwtTemplate{}, errors.New(`the file is not a JSON object {"header": {...}, "payload": {...}}`)
	}
	return t, nil
}

// make returns the assertion of one token request.
func (m *assertionMaker) make() (string, error) {
	if m.file != nil {
		a, err := m.file.get()
		if err != nil {
			return "", fmt.Errorf("assertion file: %w", err)
		}
		return a, nil
	}
	key, err := m.key.get()
	if err != nil {
		return "", fmt.Errorf("assertion private key file: %w", err)
	}
	header, payload := map[string]any{}, maps.Clone(m.claims)
	if m.template != nil {
		t, err := m.template.get()
		if err != nil {
			return "", fmt.Errorf("assertion template file: %w", err)
		}
		maps.Copy(header, t.Header)
		maps.Copy(payload, t.Payload)
	}
	header["alg"], header["typ"] = m.alg, "JWT"
	now := time.Now().Unix()
	payload["iat"] = now
	payload["exp"] = now + int64(m.expiry/time.Second)
	payload["nbf"] = now - int64(m.notBefore/time.Second)
	if m.jti {
		payload["jti"] = randomUUID()
	}
	return signJWT(m.alg, key, header, payload)
}

// signJWT returns the compact JWS of header and payload signed with key.
func signJWT(alg string, key crypto.Signer, header, payload map[string]any) (string, error) {
	h, err := json.Marshal(header)
	if err != nil {
		return "", errors.New("the assertion's header does not encode as JSON")
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return "", errors.New("the assertion's claims do not encode as JSON")
	}
	enc := base64.RawURLEncoding
	input := enc.EncodeToString(h) + "." + enc.EncodeToString(p)
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		sig, err = rsa.SignPKCS1v15(nil, k, crypto.SHA256, digest[:])
	case *ecdsa.PrivateKey:
		// JWS wants r||s, each 32 bytes (RFC 7518 section 3.4), not
		// the ASN.1 that ecdsa.SignASN1 writes.
		r, s, e := ecdsa.Sign(rand.Reader, k, digest[:])
		if err = e; err == nil {
			sig = make([]byte, 64)
			r.FillBytes(sig[:32])
			s.FillBytes(sig[32:])
		}
	default:
		err = fmt.Errorf("a %T cannot sign %s", key, alg)
	}
	if err != nil {
		return "", errors.New("signing the assertion failed")
	}
	return input + "." + enc.EncodeToString(sig), nil
}

// randomUUID is a version 4 UUID.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// cachedFile is a file's parsed content, read again whenever its size or
// modification time changes (Java's CachedFile with its last-modified
// policy). A file that fails to read or parse keeps failing until it
// changes and parses.
type cachedFile[T any] struct {
	path  string
	parse func([]byte) (T, error)

	mu   sync.Mutex
	val  T
	ok   bool
	mod  time.Time
	size int64
}

func newCachedFile[T any](path string, parse func([]byte) (T, error)) *cachedFile[T] {
	return &cachedFile[T]{path: path, parse: parse}
}

// get returns the content, reading the file again when it changed. Its
// errors name the file, never its content.
func (c *cachedFile[T]) get() (T, error) {
	var zero T
	fail := func(err error) (T, error) { return zero, fmt.Errorf("%s: %w", c.path, err) }
	st, err := os.Stat(c.path)
	switch {
	case err != nil:
		return fail(plainFileError(err))
	case st.IsDir():
		return fail(errors.New("is a directory, not a file"))
	case !st.Mode().IsRegular():
		// A FIFO or a device would block the read, and with it every
		// token request, for as long as nobody writes to it.
		return fail(errors.New("is not a regular file"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && st.ModTime().Equal(c.mod) && st.Size() == c.size {
		return c.val, nil
	}
	f, err := os.Open(c.path)
	if err != nil {
		return fail(plainFileError(err))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenAnswer+1))
	f.Close()
	switch {
	case err != nil:
		return fail(plainFileError(err))
	case len(b) > maxTokenAnswer:
		return fail(errors.New("the file is larger than 1 MiB"))
	}
	v, err := c.parse(b)
	clear(b)
	if err != nil {
		c.ok = false
		return fail(err)
	}
	c.val, c.ok, c.mod, c.size = v, true, st.ModTime(), st.Size()
	return v, nil
}

// plainFileError is the text of a file error without the path (which
// cachedFile adds) and without a cause's fields.
func plainFileError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return errors.New(printable(err.Error(), 200))
}
