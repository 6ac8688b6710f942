package schemaregistry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/sasl"
)

// Client calls a Schema Registry's REST API (Confluent's, which Apicurio
// serves at /apis/ccompat/v7) and caches what does not change: schemas by
// id, ids by subject and schema, and schemas by subject and version. It is
// safe for concurrent use, holds no lock across a request, and starts no
// goroutine. Close it when done with it.
type Client struct {
	cfg  Config
	urls []string // base URLs without user information or a trailing slash
	next atomic.Uint32
	hc   *http.Client
	own  *http.Transport // the default client's transport, closed by Close

	basic   string // the Authorization header for Basic, or ""
	secrets []string

	mu        sync.Mutex
	byID      boundedMap[int, Schema]
	bySchema  boundedMap[subjectKey, SubjectSchema]
	byVersion boundedMap[versionKey, SubjectSchema]
}

type subjectKey struct {
	subject, schema string
	normalize       bool
}

type versionKey struct {
	subject string
	version int
}

// ErrInvalidConfig is returned, wrapped with the reason, by NewClient,
// ConfigFromProperties and SerializerConfigFromProperties for a bad
// setting; the reason names the field or property and never quotes a
// credential.
var ErrInvalidConfig = errors.New("schemaregistry: invalid config")

// NewClient checks cfg and returns a Client. It makes no request.
func NewClient(cfg Config) (*Client, error) {
	bad := func(format string, args ...any) (*Client, error) {
		return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if len(cfg.URLs) == 0 {
		return bad("URLs (schema.registry.url) is empty")
	}
	c := &Client{cfg: cfg}
	for _, raw := range cfg.URLs {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("URL %q is not an http:// or https:// URL", redactURL(raw))
		}
		if u.User != nil {
			if pass, ok := u.User.Password(); ok && cfg.Username == "" && cfg.BearerToken == "" && cfg.BearerTokenSource == nil {
				c.cfg.Username, c.cfg.Password = u.User.Username(), pass
			}
			u.User = nil
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return bad("URL %q has a query or fragment", redactURL(raw))
		}
		c.urls = append(c.urls, strings.TrimSuffix(u.String(), "/"))
	}
	cfg = c.cfg
	bearer := cfg.BearerToken != "" || cfg.BearerTokenSource != nil
	switch {
	case cfg.Username != "" && bearer:
		return bad("both Basic credentials and a bearer token are set; use one")
	case cfg.BearerToken != "" && cfg.BearerTokenSource != nil:
		return bad("both BearerToken and BearerTokenSource are set; use one")
	case cfg.Username == "" && cfg.Password != "":
		return bad("Password is set without Username")
	case strings.ContainsAny(cfg.BearerToken, "\r\n"):
		return bad("BearerToken holds a line break")
	}
	if cfg.Username != "" {
		if strings.Contains(cfg.Username, ":") {
			return bad("Username holds a ':', which HTTP Basic cannot carry")
		}
		enc := base64.StdEncoding.EncodeToString([]byte(cfg.Username + ":" + cfg.Password))
		c.basic = "Basic " + enc
		c.secrets = append(c.secrets, enc)
		if cfg.Password != "" {
			c.secrets = append(c.secrets, cfg.Password, url.QueryEscape(cfg.Password), url.PathEscape(cfg.Password))
		}
	}
	if cfg.BearerToken != "" {
		c.secrets = append(c.secrets, cfg.BearerToken)
	}
	switch {
	case cfg.RequestTimeout < 0, cfg.RetryBackoff < 0, cfg.RetryBackoffMax < 0:
		return bad("a negative duration")
	case cfg.MaxRetries < NoRetries:
		return bad("MaxRetries %d is below NoRetries (-1)", cfg.MaxRetries)
	case cfg.MaxResponseBytes < 0, cfg.CacheSize < 0:
		return bad("a negative size")
	}
	if c.cfg.RequestTimeout == 0 {
		c.cfg.RequestTimeout = defaultRequestTimeout
	}
	switch c.cfg.MaxRetries {
	case 0:
		c.cfg.MaxRetries = defaultMaxRetries
	case NoRetries:
		c.cfg.MaxRetries = 0
	}
	if c.cfg.RetryBackoff == 0 {
		c.cfg.RetryBackoff = defaultRetryBackoff
	}
	if c.cfg.RetryBackoffMax == 0 {
		c.cfg.RetryBackoffMax = defaultRetryBackoffMax
	}
	if c.cfg.RetryBackoffMax < c.cfg.RetryBackoff {
		c.cfg.RetryBackoffMax = c.cfg.RetryBackoff
	}
	if c.cfg.MaxResponseBytes == 0 {
		c.cfg.MaxResponseBytes = defaultMaxResponseBytes
	}
	if c.cfg.CacheSize == 0 {
		c.cfg.CacheSize = defaultCacheSize
	}
	c.byID.max, c.bySchema.max, c.byVersion.max = c.cfg.CacheSize, c.cfg.CacheSize, c.cfg.CacheSize
	c.hc = cfg.HTTPClient
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{Timeout: c.cfg.RequestTimeout, KeepAlive: 30 * time.Second}).DialContext
		if cfg.TLS != nil {
			tr.TLSClientConfig = cfg.TLS.Clone()
		}
		tr.MaxIdleConnsPerHost = 4
		c.own = tr
		c.hc = &http.Client{
			Transport: tr,
			// A redirect could carry the credentials elsewhere; the
			// registry's API does not redirect.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return c, nil
}

// Close closes the idle connections of the Client's own HTTP client (not
// those of a Config.HTTPClient). The Client stays usable: a later call
// dials again.
func (c *Client) Close() {
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
}

// String describes the Client without credentials.
func (c *Client) String() string { return "schemaregistry.Client(" + strings.Join(c.urls, " ") + ")" }

// redact replaces the Client's credentials, and extra ones (a token of
// BearerTokenSource), in s.
func (c *Client) redact(s string, extra ...string) string {
	for _, sec := range append(c.secrets, extra...) {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	return s
}

// transportError is a request that got no HTTP answer, its text cleaned
// of credentials (the cause is not kept: its text may hold them).
type transportError struct {
	msg       string
	timeout   bool
	cancelled error // the context's error, when the context ended it
}

func (e *transportError) Error() string { return e.msg }

// Timeout reports whether the attempt timed out, for net.Error-style checks.
func (e *transportError) Timeout() bool { return e.timeout }

// Unwrap returns the context's error when the call's context ended it, so
// that errors.Is(err, context.DeadlineExceeded) works.
func (e *transportError) Unwrap() error { return e.cancelled }

// call sends one request, with retries, and decodes a successful answer
// into out (when not nil). body, when not nil, is sent as JSON.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("schemaregistry: %s %s: encoding the request: %w", method, path, err)
		}
	}
	for attempt := 0; ; attempt++ {
		data, retryAfter, err := c.attempt(ctx, method, path, payload)
		if err == nil {
			if out == nil || len(data) == 0 {
				return nil
			}
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("schemaregistry: %s %s: the answer is not the expected JSON: %s", method, path, c.redact(err.Error()))
			}
			return nil
		}
		if !retriable(err) || attempt >= c.cfg.MaxRetries || ctx.Err() != nil {
			return err
		}
		c.next.Add(1) // the retry goes to the next URL
		wait := c.backoff(attempt)
		if retryAfter > 0 {
			wait = min(retryAfter, c.cfg.RetryBackoffMax)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up after %d attempts: %w)", err, attempt+1, ctx.Err())
		case <-t.C:
		}
	}
}

// retriable reports whether err, from attempt, may succeed on a retry.
func retriable(err error) bool {
	var te *transportError
	if errors.As(err, &te) {
		return te.cancelled == nil
	}
	var se *Error
	return errors.As(err, &se) && (se.StatusCode >= 500 || se.StatusCode == http.StatusTooManyRequests)
}

// backoff is the wait before retry attempt+1.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.RetryBackoff
	for i := 0; i < attempt && d < c.cfg.RetryBackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.cfg.RetryBackoffMax)
	// ±20% jitter, so that many clients do not retry in step.
	j := time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	return max(j, time.Millisecond)
}

// attempt sends one request and returns the body of a 2xx answer, or an
// *Error (with a 429's Retry-After), or a *transportError.
func (c *Client) attempt(ctx context.Context, method, path string, payload []byte) ([]byte, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	base := c.urls[int(c.next.Load())%len(c.urls)]
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, method, base+path, rd)
	if err != nil {
		return nil, 0, fmt.Errorf("schemaregistry: %s %s: %s", method, path, c.redact(err.Error()))
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json, application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	token, err := c.authorize(actx, req)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, c.transportErr(ctx, method, path, base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, 0, c.transportErr(ctx, method, path, base, err)
	}
	if int64(len(data)) > c.cfg.MaxResponseBytes {
		return nil, 0, fmt.Errorf("schemaregistry: %s %s: the answer is larger than MaxResponseBytes (%d)", method, path, c.cfg.MaxResponseBytes)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return data, 0, nil
	}
	e := &Error{Method: method, Path: path, StatusCode: resp.StatusCode}
	var body struct {
		Code    int    `json:"error_code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &body) == nil && (body.Code != 0 || body.Message != "") {
		e.Code, e.Message = body.Code, body.Message
	} else {
		e.Message = strings.TrimSpace(truncate(strings.ToValidUTF8(string(data), "?"), 200))
	}
	e.Message = c.redact(e.Message, token)
	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests {
		if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s > 0 {
			retryAfter = time.Duration(min(s, 3600)) * time.Second
		}
	}
	return nil, retryAfter, e
}

// transportErr describes a request that got no answer. Only the kind of
// failure and the URL without credentials are kept; the context's error is
// wrapped when the call's own context ended it.
func (c *Client) transportErr(ctx context.Context, method, path, base string, err error) error {
	te := &transportError{}
	var ne net.Error
	te.timeout = errors.As(err, &ne) && ne.Timeout()
	if ctx.Err() != nil {
		te.cancelled = ctx.Err()
	}
	// url.Error adds the method and URL (without the password, which
	// NewClient removed anyway); keep the innermost reason.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	te.msg = fmt.Sprintf("schemaregistry: %s %s%s: %s", method, base, path, c.redact(err.Error()))
	return te
}

// authorize sets the Authorization header and Confluent Cloud's headers.
// It returns the token of a BearerTokenSource, for redaction.
func (c *Client) authorize(ctx context.Context, req *http.Request) (string, error) {
	var dynamic string
	switch {
	case c.basic != "":
		req.Header.Set("Authorization", c.basic)
		return "", nil
	case c.cfg.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+c.cfg.BearerToken)
	case c.cfg.BearerTokenSource != nil:
		tok, err := c.bearerToken(ctx)
		if err != nil {
			return "", err
		}
		dynamic = tok.Value
		req.Header.Set("Authorization", "Bearer "+tok.Value)
		if v := tok.Extensions["logicalCluster"]; v != "" && c.cfg.LogicalCluster == "" {
			req.Header.Set("target-sr-cluster", v)
		}
		if v := tok.Extensions["identityPoolId"]; v != "" && c.cfg.IdentityPoolID == "" {
			req.Header.Set("Confluent-Identity-Pool-Id", v)
		}
	default:
		return "", nil
	}
	if c.cfg.LogicalCluster != "" {
		req.Header.Set("target-sr-cluster", c.cfg.LogicalCluster)
	}
	if c.cfg.IdentityPoolID != "" {
		req.Header.Set("Confluent-Identity-Pool-Id", c.cfg.IdentityPoolID)
	}
	return dynamic, nil
}

// bearerToken calls BearerTokenSource, recovering a panic. Its error is
// wrapped as a transport error, retried like one.
func (c *Client) bearerToken(ctx context.Context) (tok sasl.Token, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &transportError{msg: fmt.Sprintf("schemaregistry: the bearer token source panicked: %s", truncate(c.redact(fmt.Sprint(v)), 200))}
		}
	}()
	t, err := c.cfg.BearerTokenSource(ctx)
	if err != nil {
		te := &transportError{msg: "schemaregistry: getting a bearer token: " + c.redact(err.Error())}
		if ctx.Err() != nil {
			te.cancelled = ctx.Err()
		}
		return sasl.Token{}, te
	}
	if t.Value == "" || strings.ContainsAny(t.Value, "\r\n") {
		return sasl.Token{}, &transportError{msg: "schemaregistry: the bearer token source returned an empty or multi-line token"}
	}
	return t, nil
}

// boundedMap is a map of at most max entries: inserting into a full map
// drops an arbitrary entry first. Guarded by Client.mu.
type boundedMap[K comparable, V any] struct {
	m   map[K]V
	max int
}

func (b *boundedMap[K, V]) get(k K) (V, bool) {
	v, ok := b.m[k]
	return v, ok
}

func (b *boundedMap[K, V]) put(k K, v V) {
	if b.m == nil {
		b.m = make(map[K]V)
	}
	if _, ok := b.m[k]; !ok && len(b.m) >= b.max {
		for old := range b.m {
			delete(b.m, old)
			break
		}
	}
	b.m[k] = v
}

func (b *boundedMap[K, V]) deleteIf(drop func(K) bool) {
	for k := range b.m {
		if drop(k) {
			delete(b.m, k)
		}
	}
}
