package sasl

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/samsa-go/samsa/internal/lifetime"
)

// Defaults of [ClientCredentialsConfig], Kafka's where Kafka has one.
const (
	defaultTokenConnectTimeout = 10 * time.Second // Kafka: none (the JVM's)
	defaultTokenReadTimeout    = 10 * time.Second // Kafka: none (the JVM's)
	defaultTokenRetryBackoff   = 100 * time.Millisecond
	defaultTokenRetryMax       = 10 * time.Second
	defaultRefreshFactor       = 0.8
	defaultRefreshJitter       = 0.05
	defaultRefreshMinPeriod    = 60 * time.Second
	defaultRefreshBuffer       = 300 * time.Second

	// maxTokenAnswer caps what is read of the endpoint's answer or of a
	// token file: a hostile endpoint cannot make the client buffer more.
	maxTokenAnswer = 1 << 20

	// expiryMargin: a token that expires within it of arriving has
	// expired on arrival (expires_in 0, a JWT exp in the past, a lifetime
	// shorter than the round trip) and fails the fetch.
	expiryMargin = 100 * time.Millisecond
)

// ClientCredentialsConfig configures [ClientCredentials]: the OAuth 2
// client credentials grant (RFC 6749 section 4.4) against an OIDC
// provider's token endpoint, as Kafka's OAuthBearerLoginCallbackHandler
// does (KIP-768; Confluent Cloud, Okta, Keycloak, Azure AD/Entra ID).
// Each field names the Java property it stands for.
//
// Every time.Duration field follows one rule: 0 means its default, a
// positive value is used as it is, and a negative value asks for none.
//
// Printing a ClientCredentialsConfig (%v, %+v, %#v) never shows
// ClientSecret.
type ClientCredentialsConfig struct {
	// TokenURL is the token endpoint (sasl.oauthbearer.token.endpoint.url):
	// an https:// URL, or http:// (the secret then crosses the network in
	// the clear). A file: URL (file:///path, or file:path relative to the
	// working directory) names a file that holds the token itself, as
	// Kafka allows: the file is read again whenever its size or
	// modification time changes, and ClientID, ClientSecret, Scope and
	// the HTTP settings are not used. Required.
	//
	// ClientCredentials trusts TokenURL: it sends the client's
	// credentials there, or reads the file it names and sends its
	// content to the brokers as a bearer token. Code that takes the URL
	// from someone else must check it first, as
	// producer.ConfigFromProperties does (SAMSA_OAUTHBEARER_ALLOWED_URLS).
	TokenURL string
	// ClientID and ClientSecret authenticate the client to the endpoint
	// in an Authorization: Basic header (JAAS clientId and clientSecret,
	// or sasl.oauthbearer.client.credentials.client.id and .secret).
	// Required with an http(s) TokenURL. ClientSecret never prints and
	// never appears in an error.
	ClientID, ClientSecret string
	// Scope, when not empty, is sent as the request's scope parameter
	// (JAAS scope, or sasl.oauthbearer.scope); space-separated scopes are
	// sent as one parameter. Default: none, the provider's default scope.
	Scope string
	// Extensions are sent with every token (KIP-342, JAAS options
	// extension_NAME), for example Confluent Cloud's logicalCluster and
	// identityPoolId; see [Token.Extensions] for what keys and values may
	// hold. ClientCredentials copies the map.
	Extensions map[string]string
	// Assertion, when set, authenticates the client with a signed JWT
	// instead of ClientSecret (private_key_jwt: RFC 7523 section 2.2,
	// KIP-1258): each request carries
	// client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer
	// and client_assertion, and client_id when ClientID is set, with no
	// Authorization header. ClientSecret must then be empty. For
	// [JWTBearer] it is the grant's assertion (required). Default: none.
	Assertion *AssertionConfig
	// URLEncodeCredentials URL-encodes ClientID and ClientSecret before
	// they are joined in the Basic header, as RFC 6749 section 2.3.1 asks
	// (sasl.oauthbearer.header.urlencode). Default false, as in Kafka:
	// most providers take them as they are.
	URLEncodeCredentials bool

	// HTTPClient sends the token requests. Default: a client of its own
	// that verifies the endpoint against TLS (or the system's roots),
	// takes the proxy from the environment (HTTPS_PROXY, NO_PROXY),
	// bounds connecting by ConnectTimeout and waiting for the answer by
	// ReadTimeout, keeps no idle connection (nothing is left running
	// between fetches), and follows no redirect (a redirect fails the
	// request, so the credentials never go to another host). A panic of
	// HTTPClient fails the fetch and goes on up the caller's goroutine; in
	// a background refresh it only fails that refresh. An error of
	// HTTPClient stays reachable (errors.Is, errors.As) from the fetch's
	// error only when it, and all it wraps, are of the standard library's
	// HTTP, network, TLS, I/O or context types and its text holds no
	// secret: an error type of its own could hold the request, and with
	// it the Authorization header; only its cleaned text is kept.
	HTTPClient *http.Client
	// TLS is the TLS configuration of the default client, for an
	// endpoint whose certificate a private CA signed (set RootCAs; nil
	// means the system's roots). Ignored with HTTPClient.
	TLS *tls.Config
	// ConnectTimeout bounds connecting to the endpoint, TLS included
	// (sasl.login.connect.timeout.ms), per attempt. Default 10s (Kafka
	// has none); ignored with HTTPClient.
	ConnectTimeout time.Duration
	// ReadTimeout bounds waiting for the endpoint's answer once the
	// request is sent (sasl.login.read.timeout.ms), per attempt: its
	// headers, and with ConnectTimeout the whole attempt, body included
	// (an attempt gets ConnectTimeout + ReadTimeout, when neither is
	// none). Default 10s (Kafka has none); ignored with HTTPClient.
	ReadTimeout time.Duration
	// RetryBackoff is the wait after the first failed attempt that may be
	// transient (no answer, or an HTTP status other than the permanent
	// 4xx ones Kafka lists); each later wait doubles, up to
	// RetryBackoffMax (sasl.login.retry.backoff.ms). Default 100ms;
	// negative: retry at once.
	RetryBackoff time.Duration
	// RetryBackoffMax bounds the retries of one fetch: as in Kafka, no
	// attempt starts once RetryBackoffMax has passed since the first
	// (sasl.login.retry.backoff.max.ms), and the caller's context bounds
	// them too. Default 10s; negative: a single attempt.
	RetryBackoffMax time.Duration

	// RefreshWindowFactor is the share of a token's lifetime after which
	// a new one is fetched (sasl.login.refresh.window.factor), in
	// [0.5, 1]. Default 0.8.
	RefreshWindowFactor float64
	// RefreshWindowJitter adds up to this share of the lifetime, at
	// random, to the refresh time, so that many clients do not refresh
	// together (sasl.login.refresh.window.jitter), in [0, 0.25]. Default
	// 0.05; negative: none.
	RefreshWindowJitter float64
	// RefreshMinPeriod is the least time a token is used before it is
	// refreshed (sasl.login.refresh.min.period.seconds). Default 60s;
	// negative: none.
	RefreshMinPeriod time.Duration
	// RefreshBuffer is the time before a token expires by which it is
	// refreshed (sasl.login.refresh.buffer.seconds). Default 300s;
	// negative: none. As in Kafka, RefreshMinPeriod and RefreshBuffer
	// are both ignored for a token whose lifetime is shorter than their
	// sum.
	RefreshBuffer time.Duration

	// Logger receives a Warn record for each background refresh that
	// fails (a recovered panic of HTTPClient included), with the
	// endpoint's URL (without user info or query) and the error, cleaned
	// as every error is: never the secret or a token. A failed
	// background refresh is not otherwise seen while the cached token
	// lasts. Default (nil): slog.Default().
	Logger *slog.Logger
}

// String prints the configuration with the secret redacted.
func (c ClientCredentialsConfig) String() string {
	secret := ""
	if c.ClientSecret != "" {
		secret = redacted
	}
	assertion := "<nil>"
	if c.Assertion != nil {
		assertion = c.Assertion.String()
	}
	return fmt.Sprintf("sasl.ClientCredentialsConfig{TokenURL: %q, ClientID: %q, ClientSecret: %s, Assertion: %s, Scope: %q, Extensions: %v}",
		redactURL(c.TokenURL), c.ClientID, secret, assertion, c.Scope, slices.Sorted(maps.Keys(c.Extensions)))
}

// GoString is String: %#v does not print the secret either.
func (c ClientCredentialsConfig) GoString() string { return c.String() }

// Format prints String for every verb.
func (c ClientCredentialsConfig) Format(f fmt.State, verb rune) { fmt.Fprint(f, c.String()) }

// LogValue is String for log/slog, so that no handler (slog's JSON one
// reflects over a value otherwise) prints the secret.
func (c ClientCredentialsConfig) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalJSON encodes String as a JSON string: encoding/json does not
// print the secret either.
func (c ClientCredentialsConfig) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

// ClientCredentials returns a token source for [OAuthBearer] that logs in
// with the OAuth 2 client credentials grant, as Kafka's Java client does
// with sasl.oauthbearer.token.endpoint.url (KIP-768): it POSTs
// grant_type=client_credentials (and the scope) to TokenURL with the
// client's id and secret in an Authorization: Basic header, and takes the
// access_token of the JSON answer.
//
//	tokens, err := sasl.ClientCredentials(sasl.ClientCredentialsConfig{
//		TokenURL:     "https://idp.example.com/oauth2/token",
//		ClientID:     id,
//		ClientSecret: secret,
//	})
//	if err != nil { ... }
//	cfg.SASL = sasl.OAuthBearer(tokens)
//
// The source caches the token and fetches a new one in good time: after
// RefreshWindowFactor of its lifetime (plus jitter), no sooner than
// RefreshMinPeriod and no later than RefreshBuffer before it expires, as
// Java's refreshing login does. The lifetime is the answer's expires_in,
// or the token's own exp claim (a JWT's, read but not verified) when it
// is sooner or expires_in is missing; a token with neither is used for
// RefreshMinPeriod (60s by default).
//
// A caller never waits for a refresh while the cached token is valid:
// the first caller after the refresh time starts the fetch on a goroutine
// of the source's own and gets the cached token at once, as Java's
// refreshing login thread does (so a connection re-authenticating,
// KIP-368, does not hold its requests for the endpoint's round trip).
// That goroutine ends by RetryBackoffMax + ConnectTimeout + ReadTimeout
// (their defaults when none or with HTTPClient), whether or not the
// source is used again; no goroutine runs between fetches. A refresh that
// a producer's connection started is the producer's: its Close ends the
// refresh and waits for it (the next caller, of another producer sharing
// the source, refreshes at once). A refresh
// that fails leaves the cached token in use until it expires (the next
// try comes after RetryBackoffMax, at least a second) and is logged at
// Warn to Logger. The refresh time always comes before expiry (by 5% of
// the lifetime at least), so that callers keep the cached token while it
// runs. Only a caller
// without a valid token blocks: it fetches with its own context, and
// callers that come meanwhile wait for that fetch rather than send a
// request of their own; if it fails because its caller's context ended,
// a waiter with time left fetches. After a fetch without a valid token
// fails, callers get its error at once for RetryBackoff (at least a
// second) rather than send one request each; a token that has expired
// when it arrives, or expires within 100ms (expires_in 0, a JWT exp in
// the past), fails the fetch ("expired on arrival") rather than being
// used.
//
// With Assertion set, the client authenticates with a JWT instead of the
// secret (private_key_jwt, KIP-1258; see [AssertionConfig]): a new one is
// signed (or the assertion file read) for every token request.
//
// Errors: ClientCredentials returns one for an invalid configuration (a
// TokenURL that is not https, http or file, missing credentials, bad
// extensions, refresh settings out of range, an Assertion whose key or
// template does not read, parse or suit its algorithm; see [JWTBearer]). A fetch that fails returns
// a [*TokenEndpointError]; OAuthBearer then fails the exchange, which the
// producer reports as an authentication failure (producer.ErrAuthentication)
// naming the endpoint, the HTTP status and the provider's error code. No
// error holds the client secret or a token. A cancelled or expired
// context ends the fetch (and the retries) with the context's error.
//
// The source is safe for concurrent use.
func ClientCredentials(cfg ClientCredentialsConfig) (func(context.Context) (Token, error), error) {
	return newTokenSource(cfg, false)
}

// JWTBearer returns a token source for [OAuthBearer] that logs in with
// the JWT bearer grant (RFC 7523 section 2.1), as Kafka's
// JwtBearerJwtRetriever does (KIP-1139, Kafka 4.1+): it POSTs
// grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer, the assertion
// that cfg.Assertion reads or signs (a new one for every request) and the
// scope to TokenURL, an https:// or http:// URL, with no client id or
// secret, and takes the access_token of the JSON answer.
//
//	tokens, err := sasl.JWTBearer(sasl.ClientCredentialsConfig{
//		TokenURL: "https://idp.example.com/oauth2/token",
//		Assertion: &sasl.AssertionConfig{
//			PrivateKeyFile: "/etc/kafka/client.key",
//			Algorithm:      "ES256",
//			Issuer:         "my-service",
//			Subject:        "my-service",
//			Audience:       "https://idp.example.com/oauth2/token",
//			IncludeJTI:     true,
//		},
//	})
//
// Everything [ClientCredentials] says of caching, refreshing, retries,
// timeouts, errors and the context holds here too; ClientID,
// ClientSecret and URLEncodeCredentials must be empty. Errors: JWTBearer
// returns one for an invalid configuration, a key file that does not
// read, parse or suit the algorithm, a wrong passphrase, a template that
// is not JSON; a fetch whose assertion cannot be made (a file that went
// missing) fails with a [*TokenEndpointError] that is not retried. No
// error holds the key, the passphrase or an assertion.
func JWTBearer(cfg ClientCredentialsConfig) (func(context.Context) (Token, error), error) {
	return newTokenSource(cfg, true)
}

// newTokenSource builds the source of ClientCredentials (bearer false) or
// JWTBearer.
func newTokenSource(cfg ClientCredentialsConfig, bearer bool) (func(context.Context) (Token, error), error) {
	name := "ClientCredentials"
	if bearer {
		name = "JWTBearer"
	}
	raw := strings.TrimSpace(cfg.TokenURL)
	if raw == "" {
		return nil, fmt.Errorf("sasl: %s: TokenURL is empty", name)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("sasl: %s: TokenURL %q does not parse", name, redactURL(raw))
	}
	if err := validExtensions(cfg.Extensions); err != nil {
		return nil, err
	}
	ext := maps.Clone(cfg.Extensions)
	switch strings.ToLower(u.Scheme) {
	case "file":
		if bearer || cfg.Assertion != nil {
			return nil, fmt.Errorf("sasl: %s: TokenURL %q is a file: URL, which takes no assertion: the token endpoint must be https:// or http://", name, redactURL(raw))
		}
		path, err := filePath(u)
		if err != nil {
			return nil, fmt.Errorf("sasl: ClientCredentials: TokenURL %q: %w", redactURL(raw), err)
		}
		fs := &fileToken{path: path, ext: ext}
		return fs.token, nil
	case "https", "http":
		if u.Host == "" {
			return nil, fmt.Errorf("sasl: ClientCredentials: TokenURL %q has no host", redactURL(raw))
		}
	default:
		return nil, fmt.Errorf("sasl: ClientCredentials: TokenURL %q is not an https://, http:// or file: URL", redactURL(raw))
	}
	s := &tokenSource{ext: ext, url: raw, printURL: redactURL(raw), scope: strings.TrimSpace(cfg.Scope), log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	switch {
	case bearer && cfg.Assertion == nil:
		return nil, errors.New("sasl: JWTBearer: Assertion is required")
	case bearer && (cfg.ClientID != "" || cfg.ClientSecret != "" || cfg.URLEncodeCredentials):
		return nil, errors.New("sasl: JWTBearer: ClientID, ClientSecret and URLEncodeCredentials must be empty: the jwt-bearer grant sends no client credentials")
	case cfg.Assertion != nil && cfg.ClientSecret != "":
		return nil, errors.New("sasl: ClientCredentials: ClientSecret and Assertion are both set: the client authenticates with one")
	case cfg.Assertion != nil:
		s.clientID = cfg.ClientID
	case cfg.ClientID == "" || cfg.ClientSecret == "":
		return nil, errors.New("sasl: ClientCredentials: ClientID and ClientSecret are required with an http(s) TokenURL (or Assertion, for a client assertion)")
	case strings.ContainsRune(cfg.ClientID, ':') && !cfg.URLEncodeCredentials:
		return nil, errors.New("sasl: ClientCredentials: ClientID holds a ':', which the Basic header cannot carry: set URLEncodeCredentials")
	default:
		s.id, s.secret, s.basic = cfg.ClientID, cfg.ClientSecret, true
		if cfg.URLEncodeCredentials {
			s.id, s.secret = url.QueryEscape(s.id), url.QueryEscape(s.secret)
		}
	}
	if cfg.Assertion != nil {
		if s.assertion, err = newAssertionMaker(*cfg.Assertion); err != nil {
			return nil, fmt.Errorf("sasl: %s: %w", name, err)
		}
		s.bearer = bearer
	}
	if s.basic {
		s.secrets, s.foldSecrets = secretForms(cfg.ClientID, cfg.ClientSecret, s.id, s.secret, u)
	} else {
		// No secret of the client's: the URL's, and the passphrase,
		// which no error of ours shows (this is a second guard).
		s.secrets = urlSecrets(u)
		if p := cfg.Assertion.PrivateKeyPassphrase; p != "" {
			s.secrets = append(s.secrets, p)
			s.foldSecrets = []string{url.QueryEscape(p)}
		}
		slices.SortFunc(s.secrets, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	}
	if err := s.settings(cfg); err != nil {
		return nil, fmt.Errorf("sasl: %s: %w", name, err)
	}
	connect, read := tokenTimeout(cfg.ConnectTimeout, defaultTokenConnectTimeout), tokenTimeout(cfg.ReadTimeout, defaultTokenReadTimeout)
	s.client = cfg.HTTPClient
	if s.client == nil {
		s.client = defaultTokenClient(cfg.TLS, connect, read)
		if connect > 0 && read > 0 {
			s.attemptTimeout = addDur(connect, read)
		}
	}
	// A background refresh may take the retries' budget plus one last
	// attempt; a timeout set to none counts as its default here.
	if connect <= 0 || cfg.HTTPClient != nil {
		connect = defaultTokenConnectTimeout
	}
	if read <= 0 || cfg.HTTPClient != nil {
		read = defaultTokenReadTimeout
	}
	s.refreshBudget = addDur(addDur(s.backoffMax, connect), read)
	return s.token, nil
}

// addDur is a + b for durations that are not negative, saturating at the
// largest duration (RetryBackoffMax may be set to it) instead of
// overflowing to a negative one.
func addDur(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// secretForms are the texts an error must never show: the secret as
// given, as sent and percent-encoded (query and path style), the Basic
// header's base64 of id:secret (as sent and as given, padded or not), and
// the password and query of the token URL. The second list holds the
// percent-encoded forms, matched in any case (%2f is %2F).
func secretForms(id, secret, sentID, sentSecret string, u *url.URL) (exact, fold []string) {
	exact = []string{secret, sentSecret}
	for _, pair := range []string{sentID + ":" + sentSecret, id + ":" + secret} {
		exact = append(exact, base64.StdEncoding.EncodeToString([]byte(pair)), base64.RawStdEncoding.EncodeToString([]byte(pair)))
	}
	exact = append(exact, urlSecrets(u)...)
	for _, enc := range []string{url.QueryEscape(secret), url.PathEscape(secret), strings.ReplaceAll(url.QueryEscape(secret), "+", "%20")} {
		if enc != secret {
			fold = append(fold, enc)
		}
	}
	// Longest first, so that no shorter form cuts a longer one in two;
	// equal forms side by side, for Compact.
	longestFirst := func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) }
	slices.SortFunc(exact, longestFirst)
	slices.SortFunc(fold, longestFirst)
	return slices.Compact(exact), slices.Compact(fold)
}

// urlSecrets are the parts of the token URL an error must not show: its
// password and its query.
func urlSecrets(u *url.URL) []string {
	var out []string
	if p, ok := u.User.Password(); ok && p != "" {
		out = append(out, p)
	}
	if u.RawQuery != "" {
		out = append(out, u.RawQuery)
	}
	return out
}

// settings resolves the retry and refresh settings of cfg into s.
func (s *tokenSource) settings(cfg ClientCredentialsConfig) error {
	dur := tokenTimeout
	s.backoff = dur(cfg.RetryBackoff, defaultTokenRetryBackoff)
	s.backoffMax = dur(cfg.RetryBackoffMax, defaultTokenRetryMax)
	s.minPeriod = dur(cfg.RefreshMinPeriod, defaultRefreshMinPeriod)
	s.buffer = dur(cfg.RefreshBuffer, defaultRefreshBuffer)
	s.factor = cfg.RefreshWindowFactor
	if s.factor == 0 {
		s.factor = defaultRefreshFactor
	}
	if s.factor < 0.5 || s.factor > 1 {
		return fmt.Errorf("RefreshWindowFactor %v is not in [0.5, 1]", cfg.RefreshWindowFactor)
	}
	switch j := cfg.RefreshWindowJitter; {
	case j == 0:
		s.jitter = defaultRefreshJitter
	case j < 0:
		s.jitter = 0
	case j > 0.25:
		return fmt.Errorf("RefreshWindowJitter %v is not in [0, 0.25]", j)
	default:
		s.jitter = j
	}
	return nil
}

// tokenTimeout resolves a timeout of ClientCredentialsConfig: 0 is def,
// a negative value none (0).
func tokenTimeout(v, def time.Duration) time.Duration {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// defaultTokenClient is the HTTP client of a source without HTTPClient.
// The request's own deadline (attemptTimeout) bounds the body too.
func defaultTokenClient(tlsCfg *tls.Config, connect, read time.Duration) *http.Client {
	if tlsCfg != nil {
		tlsCfg = tlsCfg.Clone()
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   connect,
		ResponseHeaderTimeout: read,
		// A token is fetched once in many minutes: keeping the
		// connection would only leave goroutines behind.
		DisableKeepAlives: true,
	}
	tr.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// tokenSource is the state of one ClientCredentials source with an
// http(s) TokenURL.
type tokenSource struct {
	// Fixed at construction.
	url, printURL, scope string
	id, secret           string // as they go into the Basic header
	basic                bool   // the client authenticates with id and secret
	clientID             string // sent as client_id with a client assertion
	assertion            *assertionMaker
	bearer               bool     // the jwt-bearer grant, with assertion
	secrets              []string // what errors must never show, exactly
	foldSecrets          []string // the same, matched in any case (percent-encodings)
	ext                  map[string]string
	client               *http.Client
	log                  *slog.Logger
	backoff, backoffMax  time.Duration
	minPeriod, buffer    time.Duration
	factor, jitter       float64
	// attemptTimeout bounds one request, connecting, headers and body
	// (0: none); refreshBudget bounds a background refresh.
	attemptTimeout, refreshBudget time.Duration

	mu      sync.Mutex
	tok     string
	expires time.Time // the cached token is used until then
	refresh time.Time // a new token is fetched from then on
	next    time.Time // after a failed fetch: no new try before then
	lastErr error     // the failed fetch without a valid token, returned until next
	flight  *tokenFlight
}

// tokenFlight is one fetch in progress, which other callers wait for.
type tokenFlight struct {
	done chan struct{}
	tok  string
	err  error
	// abandoned: the fetch ended because its caller's context did, which
	// says nothing about the endpoint; a waiter then fetches itself.
	abandoned bool
	// failed is the fetch's own error, even when the cached token
	// stays in use (err nil); read once done is closed.
	failed error
}

// token is the source's func for OAuthBearer. While the cached token is
// valid it is returned at once; when its refresh time has come, a
// background fetch replaces it (see refreshInBackground). A caller blocks
// only when there is no valid token: it fetches, or waits for the fetch
// in progress.
func (s *tokenSource) token(ctx context.Context) (Token, error) {
	for {
		s.mu.Lock()
		now := time.Now()
		if s.tok != "" && now.Before(s.expires) {
			if s.flight == nil && !now.Before(s.refresh) && !now.Before(s.next) {
				s.refreshInBackground(ctx)
			}
			tok := s.tok
			s.mu.Unlock()
			return s.result(tok), nil
		}
		if s.lastErr != nil && s.flight == nil && now.Before(s.next) {
			// A fetch just failed: its error, rather than one request
			// per caller against a failing endpoint.
			err := s.lastErr
			s.mu.Unlock()
			return Token{}, err
		}
		if f := s.flight; f != nil {
			s.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return Token{}, &TokenEndpointError{URL: s.printURL, Err: ctx.Err()}
			}
			if f.abandoned {
				continue
			}
			if f.err != nil {
				return Token{}, f.err
			}
			return s.result(f.tok), nil
		}
		f := &tokenFlight{done: make(chan struct{})}
		s.flight = f
		s.mu.Unlock()
		tok, err := s.run(ctx, f, ctx)
		if err != nil {
			return Token{}, err
		}
		return s.result(tok), nil
	}
}

// refreshInBackground starts the fetch of a new token while the cached
// one stays in use, on a goroutine of its own, as Java's refreshing login
// thread does: the caller (often a connection re-authenticating, KIP-368)
// does not wait for the endpoint. s.mu is held. The goroutine is bounded
// by refreshBudget, not by any caller: it ends by then even if the source
// is never used again, and a source that is dropped leaves nothing behind
// after that. When the caller's context carries its owner's
// lifetime.Group (a producer's), the goroutine is the owner's: it ends
// when the owner closes, which waits for it, and such an end abandons the
// fetch (no hold-off: the next caller refreshes at once). A panic of the
// HTTP client there is recorded as the refresh's failure (the cached token
// stays in use) instead of crashing the program; a caller that later
// fetches itself meets it. A failure is logged once, at Warn, after the
// flight has ended (no lock held).
func (s *tokenSource) refreshInBackground(caller context.Context) {
	f := &tokenFlight{done: make(chan struct{})}
	s.flight = f // the goroutine's finish takes s.mu: it clears it after this
	refresh := func(owner context.Context) {
		ctx, cancel := context.WithTimeout(owner, s.refreshBudget)
		defer cancel()
		defer func() {
			_ = recover() // run has recorded it in f
			if f.failed != nil && owner.Err() == nil {
				s.log.Warn("sasl: OAUTHBEARER background token refresh failed; the cached token stays in use until it expires",
					"url", s.printURL, "error", f.failed.Error())
			}
		}()
		_, _ = s.run(ctx, f, owner)
	}
	if g := lifetime.From(caller); g != nil {
		if !g.Go(refresh) {
			s.flight = nil // the owner is closing: no refresh for it
		}
		return
	}
	go refresh(context.Background())
}

// run does the fetch of flight f and records its outcome. The end of
// abandon (a caller's context, or a background refresh's owner's) abandons
// the fetch: a waiter then fetches itself, and a failure is not held. A
// panic of the HTTP client (or a runtime.Goexit) clears the flight and
// fails it; the panic goes on.
func (s *tokenSource) run(ctx context.Context, f *tokenFlight, abandon context.Context) (tok string, err error) {
	finished := false
	defer func() {
		if finished {
			return
		}
		r := recover()
		perr := &TokenEndpointError{URL: s.printURL, Err: fmt.Errorf("the HTTP client panicked: %s", s.cleanText(fmt.Sprint(r), 200))}
		if r == nil {
			perr.Err = errors.New("the fetch's goroutine exited (runtime.Goexit)")
		}
		s.finish(f, "", time.Time{}, perr, false, false)
		if r != nil {
			panic(r)
		}
	}()
	tok, expires, err := s.fetch(ctx)
	finished = true
	abandoned := err != nil && abandon.Err() != nil
	return s.finish(f, tok, expires, err, abandoned, !abandoned)
}

// finish records the outcome of flight f, ends it and returns what its
// waiters get. abandoned: the caller's context ended the fetch. hold: a
// failure without a valid token is returned to callers until s.next
// instead of being fetched again (not after a panic, which is a bug of
// the HTTP client rather than news of the endpoint).
func (s *tokenSource) finish(f *tokenFlight, tok string, expires time.Time, err error, abandoned, hold bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flight = nil
	f.failed = err
	now := time.Now()
	switch {
	case err == nil && expires.IsZero():
		// No known lifetime: used for the minimum refresh period (a
		// second at least, or every call would fetch).
		s.tok, s.next, s.lastErr = tok, time.Time{}, nil
		s.expires = now.Add(max(s.minPeriod, time.Second))
		s.refresh = beforeExpiry(now, s.expires, s.expires)
	case err == nil:
		s.tok, s.expires, s.next, s.lastErr = tok, expires, time.Time{}, nil
		s.refresh = beforeExpiry(now, expires, s.refreshAt(now, expires))
	case s.tok != "" && now.Before(s.expires):
		// Keep the token that still works; try again later, unless the
		// fetch only ended because its caller gave up.
		if !abandoned {
			s.next = now.Add(max(s.backoffMax, s.backoff, time.Second))
		}
		tok, err, abandoned = s.tok, nil, false
	case hold:
		// No valid token: a short hold-off, so that a failing endpoint
		// is not sent one request per call.
		s.next, s.lastErr = now.Add(max(s.backoff, time.Second)), err
	}
	f.tok, f.err, f.abandoned = tok, err, abandoned
	close(f.done)
	return tok, err
}

// result is the Token handed to OAuthBearer: the value and a copy of the
// extensions, so that no caller shares a map with another.
func (s *tokenSource) result(tok string) Token {
	return Token{Value: tok, Extensions: maps.Clone(s.ext)}
}

// beforeExpiry moves refresh to 95% of the lifetime from now to expires
// when it is later: the refresh time must come strictly before expiry, so
// that callers keep the cached token while the background fetch runs
// (with factor 1 and no jitter, or no known lifetime, it would not).
func beforeExpiry(now, expires, refresh time.Time) time.Time {
	latest := now.Add(expires.Sub(now) / 20 * 19)
	if refresh.After(latest) {
		return latest
	}
	return refresh
}

// refreshAt is when a token fetched at now and valid until expires is
// replaced, by Java's rule (ExpiringCredentialRefreshingLogin): after the
// window factor of its lifetime plus jitter, moved up to leave the buffer
// before expiry and back to respect the minimum period, unless the
// lifetime is shorter than the buffer and the period together.
func (s *tokenSource) refreshAt(now, expires time.Time) time.Time {
	life := expires.Sub(now)
	if life <= 0 {
		return now
	}
	pct := s.factor + s.jitter*rand.Float64()
	proposed := now.Add(time.Duration(float64(life) * pct))
	if s.minPeriod+s.buffer > life {
		return proposed
	}
	if end := expires.Add(-s.buffer); proposed.After(end) {
		proposed = end
	}
	if start := now.Add(s.minPeriod); proposed.Before(start) {
		proposed = start
	}
	return proposed
}
