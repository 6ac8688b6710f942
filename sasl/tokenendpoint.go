package sasl

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TokenEndpointError is the error of a [ClientCredentials] source that
// could not get a token: the endpoint refused the request, answered
// something that is not a token, could not be reached, or the caller's
// context ended first (errors.Is then finds context.Canceled or
// context.DeadlineExceeded). Its text never holds the client secret or a
// token: what the endpoint says is cut short, limited to printable ASCII
// and cleared of the secret.
type TokenEndpointError struct {
	// URL is the token endpoint, without user info, query or fragment.
	URL string
	// StatusCode is the HTTP status of the last answer, 0 without one.
	StatusCode int
	// Code and Description are the provider's error and
	// error_description (RFC 6749 section 5.2; Okta's errorCode and
	// errorSummary), when the answer holds them.
	Code, Description string
	// Attempts counts the requests sent (retries included).
	Attempts int
	// Err is the cause, when there is one beyond the status: a network
	// or TLS error, a malformed answer, a token expired on arrival, the
	// context's error. The HTTP client's error is reachable through it
	// only when it is of the standard library's types and held no
	// secret (see [ClientCredentialsConfig.HTTPClient]).
	Err error
}

func (e *TokenEndpointError) Error() string {
	var b strings.Builder
	b.WriteString("sasl: OAUTHBEARER token endpoint ")
	b.WriteString(e.URL)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.StatusCode)
	}
	switch {
	case e.Code != "" && e.Description != "":
		fmt.Fprintf(&b, ": %s (%s)", e.Code, e.Description)
	case e.Code != "":
		b.WriteString(": " + e.Code)
	case e.Description != "":
		b.WriteString(": " + e.Description)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (%d attempts)", e.Attempts)
	}
	return b.String()
}

// Unwrap returns Err.
func (e *TokenEndpointError) Unwrap() error { return e.Err }

// GoString prints Error, for %#v.
func (e *TokenEndpointError) GoString() string {
	return fmt.Sprintf("&sasl.TokenEndpointError{%q}", e.Error())
}

// cleanError is a cause whose text was cleaned of secrets. Unwrap keeps
// errors.Is and errors.As working, but only for a cause whose whole text
// held none of the secret's forms and whose every error in its chain is
// of a type of the standard library's network, TLS, I/O and context
// packages (knownCause): a cause that quoted the secret (an HTTP client
// or proxy that quotes the request, say), or an error type of a custom
// HTTPClient, is not reachable from the error at all, since its fields
// could hold the request with its Authorization header. The causes are
// the HTTP client's and the body reader's errors; the request they see
// carries the secret only in its Authorization header, and the
// TokenURL's password and query count among the secrets.
type cleanError struct {
	msg   string
	cause error // nil when the text held a secret
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.cause }

// fatalStatus are the answers Kafka does not retry (JwtHttpClient's
// list): a retry cannot change them.
var fatalStatus = map[int]bool{
	http.StatusBadRequest: true, http.StatusUnauthorized: true, http.StatusPaymentRequired: true,
	http.StatusForbidden: true, http.StatusNotFound: true, http.StatusMethodNotAllowed: true,
	http.StatusNotAcceptable: true, http.StatusProxyAuthRequired: true, http.StatusConflict: true,
	http.StatusGone: true, http.StatusLengthRequired: true, http.StatusPreconditionFailed: true,
	http.StatusRequestEntityTooLarge: true, http.StatusRequestURITooLong: true,
	http.StatusUnsupportedMediaType: true, http.StatusNotImplemented: true,
	http.StatusHTTPVersionNotSupported: true,
}

// fetch gets a new token, retrying transient failures with backoff. It
// returns the token and its expiry (zero when unknown).
func (s *tokenSource) fetch(ctx context.Context) (string, time.Time, error) {
	deadline := time.Now().Add(s.backoffMax)
	wait := s.backoff
	for attempt := 1; ; attempt++ {
		tok, expires, retry, e := s.attempt(ctx)
		if e == nil {
			return tok, expires, nil
		}
		e.Attempts = attempt
		if ctx.Err() != nil {
			if !errors.Is(e, ctx.Err()) {
				e.Err = s.withContext(e.Err, ctx.Err())
			}
			return "", time.Time{}, e
		}
		remaining := time.Until(deadline)
		if !retry || remaining <= 0 {
			return "", time.Time{}, e
		}
		t := time.NewTimer(min(wait, remaining))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			e.Err = s.withContext(e.Err, ctx.Err())
			return "", time.Time{}, e
		}
		wait = min(addDur(wait, wait), s.backoffMax)
	}
}

// withContext adds the context's error to a cause.
func (s *tokenSource) withContext(cause, ctxErr error) error {
	if cause == nil {
		return ctxErr
	}
	return fmt.Errorf("%w; then %w", cause, ctxErr)
}

// attempt sends one token request. retry says whether a failure may be
// transient.
func (s *tokenSource) attempt(ctx context.Context) (tok string, expires time.Time, retry bool, e *TokenEndpointError) {
	e = &TokenEndpointError{URL: s.printURL}
	callerCtx := ctx
	if s.attemptTimeout > 0 {
		// Connecting, the headers and the body: a slow drip does not
		// hold the fetch beyond the timeouts.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.attemptTimeout)
		defer cancel()
	}
	// timedOut: the attempt's own deadline, not the caller's, ended it.
	timedOut := func() bool { return ctx.Err() != nil && callerCtx.Err() == nil }
	errTimeout := func() error {
		return fmt.Errorf("no complete answer within %v (connect and read timeouts)", s.attemptTimeout)
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	var a string // the assertion sent, never to be shown
	if s.assertion != nil {
		var err error
		a, err = s.assertion.make()
		if err != nil {
			e.Err = err
			return "", time.Time{}, false, e
		}
		// The assertion is a credential: nothing the endpoint or the
		// HTTP client says may show it, not even a panic's text (run
		// quotes it in the fetch's error and the refresh's Warn).
		defer scrubAssertion(e, a)
		defer scrubPanic(a)
		if s.bearer {
			form.Set("grant_type", grantJWTBearer)
			form.Set("assertion", a)
		} else {
			form.Set("client_assertion_type", clientAssertionType)
			form.Set("client_assertion", a)
			if s.clientID != "" {
				form.Set("client_id", s.clientID)
			}
		}
	}
	if s.scope != "" {
		form.Set("scope", s.scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(form.Encode()))
	if err != nil {
		e.Err = s.clean(err)
		return "", time.Time{}, false, e
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Cache-Control", "no-cache")
	if s.basic {
		req.SetBasicAuth(s.id, s.secret)
	}
	sent := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text repeats the URL
		}
		if timedOut() {
			e.Err = errTimeout()
			return "", time.Time{}, true, e
		}
		e.Err = s.clean(err)
		return "", time.Time{}, !permanentNetError(err), e
	}
	defer resp.Body.Close()
	e.StatusCode = resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenAnswer+1))
	switch {
	case len(body) > maxTokenAnswer:
		e.Err = errors.New("the answer is larger than 1 MiB")
		return "", time.Time{}, false, e
	case err != nil && timedOut():
		e.Err = errTimeout()
		return "", time.Time{}, true, e
	case err != nil:
		e.Err = s.clean(err)
		return "", time.Time{}, true, e
	}
	for _, f := range assertionForms(a) {
		// Before anything is cut from the answer: a part of the
		// assertion cut short would escape a later scrub.
		body = bytes.ReplaceAll(body, []byte(f), []byte(redacted))
	}
	switch code := resp.StatusCode; {
	case code == http.StatusOK || code == http.StatusCreated:
		tok, expires, err := s.parseTokenAnswer(body, sent)
		if err != nil {
			e.Err = err
			return "", time.Time{}, false, e
		}
		if !expires.IsZero() && expires.Before(time.Now().Add(expiryMargin)) {
			// Used, it would make every call fetch again.
			e.Err = fmt.Errorf("the token expired on arrival (expires %s)", expires.UTC().Format(time.RFC3339))
			return "", time.Time{}, false, e
		}
		return tok, expires, false, nil
	case code >= 300 && code < 400:
		e.Err = fmt.Errorf("redirected to %s, which is not followed", redactURL(resp.Header.Get("Location")))
		return "", time.Time{}, false, e
	default:
		e.Code, e.Description = s.oauthError(body)
		return "", time.Time{}, !fatalStatus[code], e
	}
}

// scrubAssertion removes an assertion (whole, or its signature) from what
// e shows: the provider's error and description, and the cause, which is
// then cut from the error chain.
func scrubAssertion(e *TokenEndpointError, a string) {
	if e == nil {
		return
	}
	forms := assertionForms(a)
	scrub := func(t string) (string, bool) {
		found := false
		for _, f := range forms {
			if f != "" && strings.Contains(t, f) {
				t, found = strings.ReplaceAll(t, f, redacted), true
			}
		}
		return t, found
	}
	e.Code, _ = scrub(e.Code)
	e.Description, _ = scrub(e.Description)
	if e.Err != nil {
		if t, found := scrub(e.Err.Error()); found {
			e.Err = &cleanError{msg: t}
		}
	}
}

// scrubPanic, deferred, lets a panic of the HTTP client go on with its
// text cleaned of assertion a.
func scrubPanic(a string) {
	r := recover()
	if r == nil {
		return
	}
	t := fmt.Sprint(r)
	found := false
	for _, f := range assertionForms(a) {
		if f != "" && strings.Contains(t, f) {
			t, found = strings.ReplaceAll(t, f, redacted), true
		}
	}
	if found {
		panic(t)
	}
	panic(r)
}

// assertionForms are the texts of an assertion an error must not show,
// longest first: the whole, percent-encoded, and its signature (the part
// that makes it a credential).
func assertionForms(a string) []string {
	if a == "" {
		return nil
	}
	forms := []string{url.QueryEscape(a), a}
	if i := strings.LastIndexByte(a, '.'); i >= 0 && len(a)-i > 8 {
		forms = append(forms, a[i+1:])
	}
	return forms
}

// permanentNetError reports whether a failed request cannot succeed on a
// retry: the endpoint's certificate does not verify.
func permanentNetError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// parseTokenAnswer reads a successful answer (RFC 6749 section 5.1): the
// access_token and its lifetime. Its errors never quote the answer, which
// may hold a token; the key names they list are cleaned of the secret.
func (s *tokenSource) parseTokenAnswer(body []byte, sent time.Time) (string, time.Time, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return "", time.Time{}, fmt.Errorf("the answer (%d bytes) is not a JSON object", len(body))
	}
	var tok string
	if raw, ok := m["access_token"]; ok {
		if err := json.Unmarshal(raw, &tok); err != nil {
			return "", time.Time{}, errors.New("the answer's access_token is not a string")
		}
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		keys := slices.Sorted(maps.Keys(m))
		if len(keys) > 10 {
			keys = append(keys[:10], "...")
		}
		for i, k := range keys {
			keys[i] = s.cleanText(k, 40)
		}
		return "", time.Time{}, fmt.Errorf("the answer has no access_token (it has: %s)", strings.Join(keys, ", "))
	}
	if !printableToken(tok) {
		return "", time.Time{}, errors.New("the access_token holds a character outside printable ASCII")
	}
	var expires time.Time
	if raw, ok := m["expires_in"]; ok {
		secs, ok := jsonSeconds(raw)
		if !ok {
			return "", time.Time{}, errors.New("the answer's expires_in is not a number of seconds")
		}
		expires = sent.Add(time.Duration(secs * float64(time.Second)))
	}
	if exp, ok := jwtExpiry(tok); ok && (expires.IsZero() || exp.Before(expires)) {
		expires = exp
	}
	return tok, expires, nil
}

// jsonSeconds reads a number of seconds given as a JSON number or string
// (some providers send "3599"), clamped to [0, 100 years].
func jsonSeconds(raw json.RawMessage) (float64, bool) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false
		}
		n = json.Number(strings.TrimSpace(s))
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return min(max(f, 0), 100*365*24*3600), true
}

// jwtExpiry reads the exp claim of a JWT (RFC 7519), without verifying
// it: only to know when the broker will stop accepting the token.
func jwtExpiry(tok string) (time.Time, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == "" {
		return time.Time{}, false
	}
	exp, err := claims.Exp.Float64()
	if err != nil || exp <= 0 || exp > 1<<40 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(exp)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// oauthError reads the error and error_description of an error answer
// (RFC 6749 section 5.2), or Okta's errorCode and errorSummary, cleaned.
func (s *tokenSource) oauthError(body []byte) (code, desc string) {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return "", ""
	}
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := m[k].(string); ok && v != "" {
				return s.cleanText(v, 200)
			}
		}
		return ""
	}
	return str("error", "errorCode"), str("error_description", "errorSummary")
}

// clean makes an error safe to show: its text cleaned of the secret and
// cut short; the cause stays reachable only when its whole text (not only
// what is shown) did not hold the secret and knownCause accepts it.
func (s *tokenSource) clean(err error) error {
	text := err.Error()
	whole := len(text) + 1 // nothing cut: the texts compare in full
	if s.cleanText(text, whole) != printable(text, whole) || !knownCause(err) {
		return &cleanError{msg: s.cleanText(text, 300)}
	}
	return &cleanError{msg: s.cleanText(text, 300), cause: err}
}

// causePackages are the packages whose error types a cause may be made
// of: the standard library's HTTP client, network, TLS, I/O and context
// errors, whose fields hold addresses, syscall numbers and certificates,
// never a request.
var causePackages = map[string]bool{
	"errors": true, "fmt": true, "context": true, "io": true, "io/fs": true, "os": true,
	"syscall": true, "internal/poll": true, "net": true, "net/http": true, "net/url": true,
	"crypto/tls": true, "crypto/x509": true,
}

// knownCause reports whether err and every error it wraps are of types
// of causePackages.
func knownCause(err error) bool {
	if err == nil {
		return true
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !causePackages[t.PkgPath()] {
		return false
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return knownCause(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if !knownCause(e) {
				return false
			}
		}
	}
	return true
}

// basicHeader finds what may be an Authorization: Basic value; quotesBasic
// decides.
var basicHeader = regexp.MustCompile(`Basic\s+([A-Za-z0-9+/]{8,}={0,2})`)

// quotesBasic reports whether text holds "Basic " and base64-looking
// text: with a digit, '+', '/' or '=', or upper and lower case after its
// first letter (not a word such as "Basic authentication").
func quotesBasic(text string) bool {
	for _, m := range basicHeader.FindAllStringSubmatch(text, -1) {
		v := m[1]
		if strings.ContainsAny(v, "0123456789+/=") {
			return true
		}
		rest := v[1:]
		if strings.ToLower(rest) != rest && strings.ToUpper(rest) != rest {
			return true
		}
	}
	return false
}

// cleanText removes the secret's forms (secretForms) from text, the
// percent-encoded ones in any case, then keeps n bytes of printable
// ASCII. A text that still shows a Basic header is withheld entirely:
// its credentials may be encoded in a form not foreseen.
func (s *tokenSource) cleanText(text string, n int) string {
	for _, sec := range s.secrets {
		if sec != "" {
			text = strings.ReplaceAll(text, sec, redacted)
		}
	}
	text = printable(text, len(text)) // ASCII from here: lowering keeps offsets
	for _, sec := range s.foldSecrets {
		text = replaceFold(text, sec, redacted)
	}
	if quotesBasic(text) {
		return "(withheld: it quotes an Authorization header)"
	}
	return printable(text, n)
}

// replaceFold replaces every occurrence of old in ASCII text, in any
// case, with repl.
func replaceFold(text, old, repl string) string {
	if old == "" {
		return text
	}
	lower, lowOld := strings.ToLower(text), strings.ToLower(old)
	var b strings.Builder
	for {
		i := strings.Index(lower, lowOld)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		b.WriteString(repl)
		text, lower = text[i+len(old):], lower[i+len(old):]
	}
}

// printable keeps the printable ASCII of s (others become '?'), cut to n
// bytes.
func printable(s string, n int) string {
	b := make([]byte, 0, min(len(s), n+3))
	for i := 0; i < len(s); i++ {
		if len(b) >= n {
			return string(b) + "..."
		}
		c := s[i]
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		b = append(b, c)
	}
	return string(b)
}

// printableToken reports whether a token is all printable ASCII without
// spaces, as OAUTHBEARER's bearer token must be.
func printableToken(t string) bool {
	for i := 0; i < len(t); i++ {
		if t[i] < 0x21 || t[i] > 0x7e {
			return false
		}
	}
	return true
}

// redactURL prints a URL without user info, query or fragment, which may
// hold credentials.
func redactURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "(a URL that does not parse)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// filePath is the local path of a file: URL.
func filePath(u *url.URL) (string, error) {
	if u.Opaque != "" {
		p, err := url.PathUnescape(u.Opaque)
		if err != nil {
			return "", errors.New("the path does not parse")
		}
		return p, nil
	}
	if u.Host != "" && !strings.EqualFold(u.Host, "localhost") {
		return "", fmt.Errorf("names the host %q: only local files are supported", u.Host)
	}
	if u.Path == "" {
		return "", errors.New("names no file")
	}
	return u.Path, nil
}

// fileToken is a ClientCredentials source with a file: TokenURL: the
// file holds the token, read again whenever it changes (Kafka's
// FileJwtRetriever with its last-modified cache).
type fileToken struct {
	path string
	ext  map[string]string

	mu   sync.Mutex
	tok  string
	mod  time.Time
	size int64
}

func (f *fileToken) token(context.Context) (Token, error) {
	fail := func(err error) (Token, error) {
		return Token{}, &TokenEndpointError{URL: "file:" + f.path, Err: err}
	}
	st, err := os.Stat(f.path)
	if err != nil {
		return fail(err)
	}
	f.mu.Lock()
	if f.tok != "" && st.ModTime().Equal(f.mod) && st.Size() == f.size {
		tok := f.tok
		f.mu.Unlock()
		return Token{Value: tok, Extensions: maps.Clone(f.ext)}, nil
	}
	f.mu.Unlock()
	if st.Size() > maxTokenAnswer {
		return fail(errors.New("the file is larger than 1 MiB"))
	}
	file, err := os.Open(f.path)
	if err != nil {
		return fail(err)
	}
	b, err := io.ReadAll(io.LimitReader(file, maxTokenAnswer+1))
	file.Close()
	switch {
	case err != nil:
		return fail(err)
	case len(b) > maxTokenAnswer:
		return fail(errors.New("the file is larger than 1 MiB"))
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return fail(errors.New("the file is empty"))
	case !printableToken(tok):
		return fail(errors.New("the token holds a character outside printable ASCII"))
	}
	f.mu.Lock()
	f.tok, f.mod, f.size = tok, st.ModTime(), st.Size()
	f.mu.Unlock()
	return Token{Value: tok, Extensions: maps.Clone(f.ext)}, nil
}
