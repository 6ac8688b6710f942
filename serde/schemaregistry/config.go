package schemaregistry

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/samsa-go/samsa/sasl"
)

// Config configures a Client. The zero value of every field but URLs
// means its default, written on the field. ConfigFromProperties fills it
// from the Java serializers' property names.
//
// Credentials (Password, BearerToken, and the tokens of BearerTokenSource)
// never appear in an error or a log line, nor in the %v, %+v or %#v of a
// Config.
type Config struct {
	// URLs are the registry's base URLs (schema.registry.url), with any
	// path prefix (Apicurio's Confluent API is at /apis/ccompat/v7). A
	// request goes to one of them; after a failed attempt, its retry
	// goes to the next. A URL's user:password@ gives Basic credentials
	// when Username is empty (basic.auth.credentials.source=URL); it is
	// removed from the URL before any request. Required.
	URLs []string

	// Username and Password authenticate with HTTP Basic
	// (basic.auth.user.info "user:password"). Password never prints.
	Username, Password string

	// BearerToken is sent as "Authorization: Bearer <token>"
	// (bearer.auth.credentials.source=STATIC_TOKEN, bearer.auth.token).
	// It never prints. Not with Username.
	BearerToken string
	// BearerTokenSource, when set, gives the token of every request
	// instead of BearerToken, for example a sasl.ClientCredentials
	// source (bearer.auth.credentials.source=OAUTHBEARER). Its Token's
	// extensions logicalCluster and identityPoolId become the headers
	// below. Not with Username or BearerToken.
	BearerTokenSource func(context.Context) (sasl.Token, error)
	// LogicalCluster and IdentityPoolID are Confluent Cloud's
	// target-sr-cluster and Confluent-Identity-Pool-Id headers
	// (bearer.auth.logical.cluster, bearer.auth.identity.pool.id), sent
	// with a bearer token. Default: none.
	LogicalCluster, IdentityPoolID string

	// TLS configures https:// URLs (schema.registry.ssl.*). Default: the
	// system's roots, TLS 1.2 or later.
	TLS *tls.Config

	// HTTPClient sends the requests. Default: a client of its own (TLS as
	// above, no redirects followed, dials bounded by RequestTimeout);
	// Client.Close closes its idle connections. A client given here is
	// used as is (its TLS, proxy and redirect policy), and never closed.
	HTTPClient *http.Client

	// RequestTimeout bounds one attempt of a request, from dialing to the
	// last byte of the answer (http.connect.timeout.ms +
	// http.read.timeout.ms). Default 30s. The context of each call bounds
	// all attempts and backoffs together.
	RequestTimeout time.Duration

	// MaxRetries is how many times a request is retried after a
	// transport error (refused connection, timeout), HTTP 5xx or HTTP 429
	// (max.retries). Default 3; NoRetries for none. Other answers (4xx)
	// are never retried.
	MaxRetries int
	// RetryBackoff is the wait before the first retry, doubled for each
	// further retry up to RetryBackoffMax, with ±20% jitter; a 429's
	// Retry-After (seconds) is honoured up to RetryBackoffMax
	// (retries.wait.ms, retries.max.wait.ms). Defaults 1s and 20s.
	RetryBackoff, RetryBackoffMax time.Duration

	// MaxResponseBytes caps the answer body read: a longer one fails the
	// call (and is not retried). Default 8 MiB.
	MaxResponseBytes int64

	// CacheSize bounds each of the Client's caches (schemas by id, ids by
	// subject and schema, schemas by subject and version) in entries
	// (max.schemas.per.subject). Default 1000.
	CacheSize int
}

// NoRetries, as Config.MaxRetries, turns retries off.
const NoRetries = -1

const (
	defaultRequestTimeout   = 30 * time.Second
	defaultMaxRetries       = 3
	defaultRetryBackoff     = time.Second
	defaultRetryBackoffMax  = 20 * time.Second
	defaultMaxResponseBytes = 8 << 20
	defaultCacheSize        = 1000
)

const redacted = "[redacted]"

// String prints c with its credentials redacted, as do %v, %+v and %#v.
func (c Config) String() string {
	var b strings.Builder
	b.WriteString("schemaregistry.Config{URLs: [")
	for i, u := range c.URLs {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(redactURL(u))
	}
	b.WriteString("]")
	if c.Username != "" {
		fmt.Fprintf(&b, ", Username: %q, Password: %s", c.Username, redacted)
	}
	if c.BearerToken != "" {
		b.WriteString(", BearerToken: " + redacted)
	}
	if c.BearerTokenSource != nil {
		b.WriteString(", BearerTokenSource: set")
	}
	if c.LogicalCluster != "" {
		fmt.Fprintf(&b, ", LogicalCluster: %q", c.LogicalCluster)
	}
	if c.IdentityPoolID != "" {
		fmt.Fprintf(&b, ", IdentityPoolID: %q", c.IdentityPoolID)
	}
	if c.TLS != nil {
		b.WriteString(", TLS: set")
	}
	if c.HTTPClient != nil {
		b.WriteString(", HTTPClient: set")
	}
	for _, f := range []struct {
		name string
		v    any
		set  bool
	}{
		{"RequestTimeout", c.RequestTimeout, c.RequestTimeout != 0},
		{"MaxRetries", c.MaxRetries, c.MaxRetries != 0},
		{"RetryBackoff", c.RetryBackoff, c.RetryBackoff != 0},
		{"RetryBackoffMax", c.RetryBackoffMax, c.RetryBackoffMax != 0},
		{"MaxResponseBytes", c.MaxResponseBytes, c.MaxResponseBytes != 0},
		{"CacheSize", c.CacheSize, c.CacheSize != 0},
	} {
		if f.set {
			fmt.Fprintf(&b, ", %s: %v", f.name, f.v)
		}
	}
	b.WriteString("}")
	return b.String()
}

// GoString is String, so that %#v redacts too.
func (c Config) GoString() string { return c.String() }

// Format prints String for every verb.
func (c Config) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// redactURL removes the password of a URL's user information; a string
// that does not parse is hidden whole past its scheme, since it may hold
// one.
func redactURL(s string) string {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return s
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || strings.IndexByte(rest, '@') < 0 {
		return redacted
	}
	i := strings.LastIndexByte(rest, '@')
	user, _, _ := strings.Cut(rest[:i], ":")
	return scheme + "://" + user + ":" + redacted + rest[i:]
}
