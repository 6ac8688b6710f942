package sasl_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/internal/lifetime"
	"github.com/samsa-go/samsa/sasl"
)

const (
	ccID     = "client-1"
	ccSecret = "S3CRET-xyzzy"
)

// idp is a token endpoint for tests: answer decides each reply; it
// counts requests and checks that each is a client credentials grant.
type idp struct {
	t        *testing.T
	srv      *httptest.Server
	requests atomic.Int64
	answer   func(n int64, w http.ResponseWriter, r *http.Request)
}

func newIDP(t *testing.T, answer func(n int64, w http.ResponseWriter, r *http.Request)) *idp {
	t.Helper()
	p := &idp{t: t, answer: answer}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.requests.Add(1)
		// Read the body first: the server notices a client that goes away
		// (and cancels r.Context) only once the body is read.
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.answer(n, w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// tokenJSON answers a token with expires_in seconds (omitted when < 0).
func tokenJSON(w http.ResponseWriter, tok string, expiresIn int) {
	m := map[string]any{"access_token": tok, "token_type": "Bearer"}
	if expiresIn >= 0 {
		m["expires_in"] = expiresIn
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m)
}

func (p *idp) config() sasl.ClientCredentialsConfig {
	return sasl.ClientCredentialsConfig{TokenURL: p.srv.URL + "/oauth2/token", ClientID: ccID, ClientSecret: ccSecret}
}

func mustSource(t *testing.T, cfg sasl.ClientCredentialsConfig) func(context.Context) (sasl.Token, error) {
	t.Helper()
	src, err := sasl.ClientCredentials(cfg)
	require.NoError(t, err)
	return src
}

// halfLifeSource returns a source on p that refreshes a token half way
// through its lifetime (no jitter, minimum period or buffer), once it has
// fetched its first token.
func halfLifeSource(t *testing.T, p *idp) func(context.Context) (sasl.Token, error) {
	t.Helper()
	cfg := p.config()
	cfg.RefreshWindowFactor, cfg.RefreshWindowJitter = 0.5, -1
	cfg.RefreshMinPeriod, cfg.RefreshBuffer = -1, -1
	src := mustSource(t, cfg)
	_, err := src(context.Background())
	require.NoError(t, err)
	return src
}

// jwt makes an unsigned JWT with an exp claim.
func jwt(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(fmt.Appendf(nil, `{"sub":"svc","exp":%d}`, exp.Unix())) + ".sig"
}

func TestClientCredentialsRequest(t *testing.T) {
	tests := []struct {
		name       string
		id, secret string
		scope      string
		urlencode  bool
		wantAuth   string // id:secret as the header carries it
		wantForm   string
	}{
		{"plain", ccID, ccSecret, "", false, ccID + ":" + ccSecret, "grant_type=client_credentials"},
		{"scopes", ccID, ccSecret, " kafka email ", false, ccID + ":" + ccSecret, "grant_type=client_credentials&scope=kafka+email"},
		{"urlencoded", "my id", "s+c/r=t", "", true, "my+id:s%2Bc%2Fr%3Dt", "grant_type=client_credentials"},
		{"not urlencoded", "my id", "s+c/r=t", "", false, "my id:s+c/r=t", "grant_type=client_credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newIDP(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
				assert.Equal(t, http.MethodPost, r.Method)
				assert.Equal(t, "/oauth2/token", r.URL.Path)
				assert.Equal(t, "application/x-www-form-urlencoded", r.Header.Get("Content-Type"))
				assert.Equal(t, "application/json", r.Header.Get("Accept"))
				auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Basic ")
				assert.True(t, ok)
				dec, err := base64.StdEncoding.DecodeString(auth)
				assert.NoError(t, err)
				assert.Equal(t, tc.wantAuth, string(dec))
				body, _ := io.ReadAll(r.Body)
				assert.Equal(t, tc.wantForm, string(body))
				tokenJSON(w, "tok-1", 3600)
			})
			cfg := p.config()
			cfg.ClientID, cfg.ClientSecret, cfg.Scope, cfg.URLEncodeCredentials = tc.id, tc.secret, tc.scope, tc.urlencode
			cfg.Extensions = map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-1"}
			tok, err := mustSource(t, cfg)(context.Background())
			require.NoError(t, err)
			assert.Equal(t, "tok-1", tok.Value)
			assert.Equal(t, map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-1"}, tok.Extensions)
			assert.EqualValues(t, 1, p.requests.Load())
		})
	}
}

func TestClientCredentialsCachesToken(t *testing.T) {
	p := newIDP(t, func(n int64, w http.ResponseWriter, _ *http.Request) { tokenJSON(w, fmt.Sprint("tok-", n), 3600) })
	cfg := p.config()
	cfg.Extensions = map[string]string{"k": "v"}
	src := mustSource(t, cfg)
	for range 5 {
		tok, err := src(context.Background())
		require.NoError(t, err)
		assert.Equal(t, "tok-1", tok.Value)
	}
	assert.EqualValues(t, 1, p.requests.Load())
	// A caller changing its Token's extensions does not change the next.
	tok, _ := src(context.Background())
	tok.Extensions["x"] = "y"
	tok, _ = src(context.Background())
	assert.Equal(t, map[string]string{"k": "v"}, tok.Extensions)
}

// TestClientCredentialsRefreshesBeforeExpiry: a new token is fetched after
// the refresh window factor of the lifetime, which is the sooner of
// expires_in and the JWT's exp; a token without either lasts the minimum
// refresh period.
func TestClientCredentialsRefreshesBeforeExpiry(t *testing.T) {
	tests := []struct {
		name   string
		token  func(n int64) string
		expiry int           // expires_in, -1: none
		min    time.Duration // RefreshMinPeriod
		before time.Duration // still the first token
		after  time.Duration // a new token
	}{
		{"expires_in", func(n int64) string { return fmt.Sprint("tok-", n) }, 2, -1, 500 * time.Millisecond, 1300 * time.Millisecond},
		{"jwt exp sooner than expires_in", func(n int64) string { return jwt(time.Now().Add(2*time.Second)) + fmt.Sprint(n) }, 3600, -1, 300 * time.Millisecond, 1300 * time.Millisecond},
		{"no lifetime: the minimum period", func(n int64) string { return fmt.Sprint("tok-", n) }, -1, time.Second, 500 * time.Millisecond, 1200 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newIDP(t, func(n int64, w http.ResponseWriter, _ *http.Request) { tokenJSON(w, tc.token(n), tc.expiry) })
			cfg := p.config()
			cfg.RefreshWindowFactor, cfg.RefreshWindowJitter = 0.5, -1
			cfg.RefreshMinPeriod, cfg.RefreshBuffer = tc.min, -1
			src := mustSource(t, cfg)
			start := time.Now()
			first, err := src(context.Background())
			require.NoError(t, err)
			time.Sleep(tc.before - time.Since(start))
			again, err := src(context.Background())
			require.NoError(t, err)
			if time.Since(start) < tc.before+200*time.Millisecond { // not when the machine stalled
				assert.Equal(t, first.Value, again.Value)
				assert.EqualValues(t, 1, p.requests.Load())
			}
			time.Sleep(tc.after - time.Since(start))
			// A refresh while the token is valid runs in the background:
			// the new token comes soon after, from one request.
			require.Eventually(t, func() bool {
				next, err := src(context.Background())
				return err == nil && next.Value != first.Value
			}, 2*time.Second, 10*time.Millisecond)
			assert.EqualValues(t, 2, p.requests.Load())
		})
	}
}

// TestClientCredentialsRefreshFailureKeepsToken: a refresh that fails
// while the cached token is still valid hands out the cached token.
func TestClientCredentialsRefreshFailureKeepsToken(t *testing.T) {
	p := newIDP(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			tokenJSON(w, "tok-1", 3)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	cfg := p.config()
	cfg.RefreshWindowFactor, cfg.RefreshWindowJitter, cfg.RefreshMinPeriod, cfg.RefreshBuffer = 0.5, -1, -1, -1
	cfg.RetryBackoff, cfg.RetryBackoffMax = 10*time.Millisecond, 50*time.Millisecond
	src := mustSource(t, cfg)
	_, err := src(context.Background())
	require.NoError(t, err)
	time.Sleep(1600 * time.Millisecond) // past the refresh time, before expiry
	tok, err := src(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "tok-1", tok.Value)
	require.Eventually(t, func() bool { return p.requests.Load() > 1 }, time.Second, 5*time.Millisecond, "a refresh was tried")
	time.Sleep(200 * time.Millisecond) // the refresh's retries are over
	tried := p.requests.Load()
	tok, err = src(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "tok-1", tok.Value)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, tried, p.requests.Load(), "no new try right after a failed refresh")
}

// TestClientCredentialsRefreshDoesNotBlock: once the refresh time of a
// token still valid has come, callers get it at once while a goroutine
// fetches the next one (the endpoint is slow); that goroutine ends.
func TestClientCredentialsRefreshDoesNotBlock(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	p := newIDP(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n > 1 {
			time.Sleep(700 * time.Millisecond)
		}
		tokenJSON(w, fmt.Sprint("tok-", n), 2)
	})
	src := halfLifeSource(t, p)
	time.Sleep(1100 * time.Millisecond) // past the refresh time (1s), before expiry (2s)
	for range 5 {
		start := time.Now()
		tok, err := src(context.Background())
		require.NoError(t, err)
		assert.Equal(t, "tok-1", tok.Value)
		assert.Less(t, time.Since(start), 300*time.Millisecond, "a caller waited for the refresh")
	}
	require.Eventually(t, func() bool {
		tok, err := src(context.Background())
		return err == nil && tok.Value == "tok-2"
	}, 2*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, 2, p.requests.Load(), "one refresh, however many callers")
}

// TestClientCredentialsBackgroundRefreshEnds: a background refresh
// against an endpoint that never answers ends by its own budget, with
// nobody calling the source again.
func TestClientCredentialsBackgroundRefreshEnds(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	p := newIDP(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n > 1 {
			<-r.Context().Done()
			return
		}
		tokenJSON(w, "tok-1", 1)
	})
	cfg := p.config()
	cfg.RefreshWindowFactor, cfg.RefreshWindowJitter = 0.5, -1
	cfg.RefreshMinPeriod, cfg.RefreshBuffer = -1, -1
	cfg.ConnectTimeout, cfg.ReadTimeout, cfg.RetryBackoffMax = 100*time.Millisecond, 100*time.Millisecond, -1
	src := mustSource(t, cfg)
	_, err := src(context.Background())
	require.NoError(t, err)
	time.Sleep(600 * time.Millisecond)
	tok, err := src(context.Background()) // starts the refresh
	require.NoError(t, err)
	assert.Equal(t, "tok-1", tok.Value)
	require.Eventually(t, func() bool { return p.requests.Load() == 2 }, time.Second, 5*time.Millisecond)
	// goleak (in Cleanup) checks that the refresh's goroutine is gone.
}

// TestClientCredentialsSlowBodyTimesOut: ConnectTimeout + ReadTimeout
// bound an attempt whole, so an endpoint that sends its headers and then
// the body drop by drop does not hold the caller.
func TestClientCredentialsSlowBodyTimesOut(t *testing.T) {
	p := newIDP(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"`)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
				fmt.Fprint(w, "a")
				w.(http.Flusher).Flush()
			}
		}
	})
	cfg := p.config()
	cfg.ConnectTimeout, cfg.ReadTimeout, cfg.RetryBackoffMax = 200*time.Millisecond, 200*time.Millisecond, -1
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := mustSource(t, cfg)(ctx)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Contains(t, err.Error(), "no complete answer within 400ms")
	assert.NoError(t, ctx.Err(), "the attempt's deadline, not the caller's, ended it")
}

// panicOnce is an HTTP client's transport that panics on its first
// request and answers a token after.
type panicOnce struct{ n atomic.Int64 }

func (p *panicOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.n.Add(1) == 1 {
		panic("transport bug")
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: r,
		Body: io.NopCloser(strings.NewReader(`{"access_token":"tok-2","expires_in":3600}`))}, nil
}

// TestClientCredentialsHTTPClientPanic: a panic of the user's HTTP client
// reaches the caller, and does not leave the fetch in flight: the next
// caller fetches again rather than wait forever.
func TestClientCredentialsHTTPClientPanic(t *testing.T) {
	rt := &panicOnce{}
	src := mustSource(t, sasl.ClientCredentialsConfig{TokenURL: "https://idp.invalid/token", ClientID: ccID, ClientSecret: ccSecret,
		HTTPClient: &http.Client{Transport: rt}})
	assert.PanicsWithValue(t, "transport bug", func() { _, _ = src(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tok, err := src(ctx)
	require.NoError(t, err)
	assert.Equal(t, "tok-2", tok.Value)
	assert.EqualValues(t, 2, rt.n.Load())
}

// TestClientCredentialsOneFetchForConcurrentCallers: callers that come
// while a fetch runs wait for it; the endpoint sees one request.
func TestClientCredentialsOneFetchForConcurrentCallers(t *testing.T) {
	release := make(chan struct{})
	p := newIDP(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		<-release
		tokenJSON(w, fmt.Sprint("tok-", n), 3600)
	})
	src := mustSource(t, p.config())
	const callers = 50
	var wg sync.WaitGroup
	got := make([]string, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			tok, err := src(context.Background())
			got[i], errs[i] = tok.Value, err
		})
	}
	time.Sleep(100 * time.Millisecond) // let them all arrive
	close(release)
	wg.Wait()
	for i := range callers {
		require.NoError(t, errs[i])
		assert.Equal(t, "tok-1", got[i])
	}
	assert.EqualValues(t, 1, p.requests.Load())
}

// TestClientCredentialsWaiterOutlivesCancelledFetcher: when the caller
// whose fetch others wait for gives up, a waiter with time left fetches.
func TestClientCredentialsWaiterOutlivesCancelledFetcher(t *testing.T) {
	p := newIDP(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done() // the first request hangs until its caller gives up
			return
		}
		tokenJSON(w, "tok-2", 3600)
	})
	src := mustSource(t, p.config())
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := src(ctx); first <- err }()
	for p.requests.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	second := make(chan sasl.Token, 1)
	go func() { tok, _ := src(context.Background()); second <- tok }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	err := <-first
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "tok-2", (<-second).Value)
}

func TestClientCredentialsEndpointErrors(t *testing.T) {
	big := `{"access_token":"` + strings.Repeat("a", 2<<20) + `"}`
	tests := []struct {
		name     string
		answer   func(n int64, w http.ResponseWriter)
		wantErr  []string // substrings; nil: success
		requests int64
		status   int
	}{
		{"401 with a JSON error, not retried", func(_ int64, w http.ResponseWriter) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"Client authentication failed"}`)
		}, []string{"HTTP 401", "invalid_client (Client authentication failed)"}, 1, 401},
		{"Okta's errorCode", func(_ int64, w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"errorCode":"E0000021","errorSummary":"Bad request"}`)
		}, []string{"HTTP 400", "E0000021 (Bad request)"}, 1, 400},
		{"500 then success", func(n int64, w http.ResponseWriter) {
			if n == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			tokenJSON(w, "tok", 60)
		}, nil, 2, 0},
		{"503 until the retries end", func(_ int64, w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}, []string{"HTTP 503", "attempts)"}, -1, 503},
		{"malformed JSON", func(_ int64, w http.ResponseWriter) { fmt.Fprint(w, `{"access_token": tok`) },
			[]string{"HTTP 200", "not a JSON object"}, 1, 200},
		{"oversized body", func(_ int64, w http.ResponseWriter) { fmt.Fprint(w, big) },
			[]string{"larger than 1 MiB"}, 1, 200},
		{"missing access_token", func(_ int64, w http.ResponseWriter) { fmt.Fprint(w, `{"token_type":"Bearer","expires_in":60}`) },
			[]string{"no access_token (it has: expires_in, token_type)"}, 1, 200},
		{"key names cleaned of the secret", func(_ int64, w http.ResponseWriter) { fmt.Fprintf(w, `{"token_type":"Bearer",%q:1}`, ccSecret) },
			[]string{"no access_token (it has: [redacted], token_type)"}, 1, 200},
		{"access_token not a string", func(_ int64, w http.ResponseWriter) { fmt.Fprint(w, `{"access_token":5}`) },
			[]string{"not a string"}, 1, 200},
		{"token with a space", func(_ int64, w http.ResponseWriter) { fmt.Fprint(w, `{"access_token":"a b"}`) },
			[]string{"outside printable ASCII"}, 1, 200},
		{"bad expires_in", func(_ int64, w http.ResponseWriter) { fmt.Fprint(w, `{"access_token":"t","expires_in":"soon"}`) },
			[]string{"expires_in"}, 1, 200},
		{"redirect not followed", func(_ int64, w http.ResponseWriter) {
			w.Header().Set("Location", "https://elsewhere.example/token?x=1")
			w.WriteHeader(http.StatusTemporaryRedirect)
		}, []string{"HTTP 307", "redirected to https://elsewhere.example/token, which is not followed"}, 1, 307},
		{"an error that echoes the secret", func(_ int64, w http.ResponseWriter) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":"secret %s is wrong"}`, ccSecret)
		}, []string{"secret [redacted] is wrong"}, 1, 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newIDP(t, func(n int64, w http.ResponseWriter, _ *http.Request) { tc.answer(n, w) })
			cfg := p.config()
			cfg.RetryBackoff, cfg.RetryBackoffMax = 20*time.Millisecond, 300*time.Millisecond
			start := time.Now()
			tok, err := mustSource(t, cfg)(context.Background())
			if tc.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, "tok", tok.Value)
				assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "backed off")
				assert.Equal(t, tc.requests, p.requests.Load())
				return
			}
			require.Error(t, err)
			for _, want := range tc.wantErr {
				assert.Contains(t, err.Error(), want)
			}
			assert.NotContains(t, err.Error(), ccSecret)
			assert.NotContains(t, fmt.Sprintf("%#v", err), ccSecret)
			var te *sasl.TokenEndpointError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tc.status, te.StatusCode)
			if tc.requests > 0 {
				assert.Equal(t, tc.requests, p.requests.Load())
			} else {
				assert.Greater(t, p.requests.Load(), int64(2), "retried")
				assert.Less(t, time.Since(start), 2*time.Second, "within RetryBackoffMax")
			}
		})
	}
}

// TestClientCredentialsContext: the caller's context bounds the fetch and
// its retries.
func TestClientCredentialsContext(t *testing.T) {
	p := newIDP(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	cfg := p.config()
	cfg.RetryBackoff, cfg.RetryBackoffMax = 50*time.Millisecond, time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := mustSource(t, cfg)(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "HTTP 502")
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestClientCredentialsUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	_, err := mustSource(t, sasl.ClientCredentialsConfig{
		TokenURL: addr + "/token", ClientID: ccID, ClientSecret: ccSecret,
		RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond,
	})(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused")
	assert.Contains(t, err.Error(), "attempts)")
}

func TestClientCredentialsTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { tokenJSON(w, "tls-tok", 60) }))
	t.Cleanup(srv.Close)
	cfg := sasl.ClientCredentialsConfig{TokenURL: srv.URL, ClientID: ccID, ClientSecret: ccSecret, RetryBackoffMax: time.Minute}
	// Not trusted: not retried.
	start := time.Now()
	_, err := mustSource(t, cfg)(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")
	assert.Less(t, time.Since(start), 5*time.Second)
	// Trusted through TLS, or through an HTTPClient.
	cfg.TLS = srv.Client().Transport.(*http.Transport).TLSClientConfig
	tok, err := mustSource(t, cfg)(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "tls-tok", tok.Value)
	cfg.TLS, cfg.HTTPClient = nil, srv.Client()
	tok, err = mustSource(t, cfg)(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "tls-tok", tok.Value)
}

// TestClientCredentialsFile: a file: URL names a file holding the token,
// read again when it changes.
func TestClientCredentialsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token.jwt")
	require.NoError(t, os.WriteFile(path, []byte(" tok-1\n"), 0o600))
	for _, u := range []string{"file://" + path, "file:" + path, (&url.URL{Scheme: "file", Path: path}).String()} {
		tok, err := mustSource(t, sasl.ClientCredentialsConfig{TokenURL: u, Extensions: map[string]string{"k": "v"}})(context.Background())
		require.NoError(t, err, u)
		assert.Equal(t, "tok-1", tok.Value)
		assert.Equal(t, map[string]string{"k": "v"}, tok.Extensions)
	}
	src := mustSource(t, sasl.ClientCredentialsConfig{TokenURL: "file://" + path})
	tok, err := src(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "tok-1", tok.Value)
	require.NoError(t, os.WriteFile(path, []byte("tok-2"), 0o600))
	future := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(path, future, future))
	tok, err = src(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "tok-2", tok.Value)

	tests := []struct {
		name, content, wantErr string
	}{
		{"empty", " \n", "empty"},
		{"not a token", "a b", "printable ASCII"},
		{"too large", strings.Repeat("a", 1<<20+1), "larger than 1 MiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			require.NoError(t, os.WriteFile(p, []byte(tc.content), 0o600))
			_, err := mustSource(t, sasl.ClientCredentialsConfig{TokenURL: "file://" + p})(context.Background())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
	_, err = mustSource(t, sasl.ClientCredentialsConfig{TokenURL: "file://" + filepath.Join(dir, "missing")})(context.Background())
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestClientCredentialsConfigErrors(t *testing.T) {
	ok := sasl.ClientCredentialsConfig{TokenURL: "https://idp.example/token", ClientID: ccID, ClientSecret: ccSecret}
	tests := []struct {
		name    string
		edit    func(*sasl.ClientCredentialsConfig)
		wantErr string
	}{
		{"no URL", func(c *sasl.ClientCredentialsConfig) { c.TokenURL = "" }, "TokenURL is empty"},
		{"ftp", func(c *sasl.ClientCredentialsConfig) { c.TokenURL = "ftp://idp/token" }, "not an https://"},
		{"no host", func(c *sasl.ClientCredentialsConfig) { c.TokenURL = "https:///token" }, "no host"},
		{"remote file", func(c *sasl.ClientCredentialsConfig) { c.TokenURL = "file://other/tok" }, "only local files"},
		{"remote file with a query", func(c *sasl.ClientCredentialsConfig) { c.TokenURL = "file://other/tok?k=" + ccSecret }, "file://other/tok\""},
		{"no secret", func(c *sasl.ClientCredentialsConfig) { c.ClientSecret = "" }, "ClientSecret are required"},
		{"no id", func(c *sasl.ClientCredentialsConfig) { c.ClientID = "" }, "ClientID and ClientSecret"},
		{"colon in id", func(c *sasl.ClientCredentialsConfig) { c.ClientID = "a:b" }, "URLEncodeCredentials"},
		{"factor", func(c *sasl.ClientCredentialsConfig) { c.RefreshWindowFactor = 0.3 }, "RefreshWindowFactor"},
		{"jitter", func(c *sasl.ClientCredentialsConfig) { c.RefreshWindowJitter = 0.5 }, "RefreshWindowJitter"},
		{"extension key", func(c *sasl.ClientCredentialsConfig) { c.Extensions = map[string]string{"auth": "x"} }, `"auth"`},
		{"extension value", func(c *sasl.ClientCredentialsConfig) { c.Extensions = map[string]string{"k": "\x01"} }, `"k"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			_, err := sasl.ClientCredentials(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.NotContains(t, err.Error(), ccSecret)
		})
	}
	_, err := sasl.ClientCredentials(ok)
	require.NoError(t, err)
}

// TestClientCredentialsConfigNeverPrintsSecret formats the config, alone
// and inside another struct, with every verb a log line might use.
func TestClientCredentialsConfigNeverPrintsSecret(t *testing.T) {
	cfg := sasl.ClientCredentialsConfig{TokenURL: "https://user:PW-xyzzy@idp.example/token?key=Q-xyzzy", ClientID: ccID, ClientSecret: ccSecret,
		Extensions: map[string]string{"logicalCluster": "lkc-1"}}
	type outer struct {
		CC  sasl.ClientCredentialsConfig
		Ptr *sasl.ClientCredentialsConfig
	}
	o := outer{cfg, &cfg}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		for _, v := range []any{cfg, &cfg, o, &o} {
			out := fmt.Sprintf(verb, v)
			assert.NotContains(t, out, "xyzzy", "%s of %T", verb, v)
			assert.NotContains(t, out, "78797a7a79", "%s of %T (hex)", verb, v)
		}
	}
	assert.Contains(t, fmt.Sprint(cfg), ccID)
	assert.Contains(t, fmt.Sprint(cfg), "idp.example/token")
	assert.Contains(t, fmt.Sprint(cfg), "logicalCluster")
}

// TestClientCredentialsErrorsNeverHoldSecrets: no failure shows the
// secret or a token, whatever the endpoint answers.
func TestClientCredentialsErrorsNeverHoldSecrets(t *testing.T) {
	const tok = "TOKEN-xyzzy"
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) { fmt.Fprint(w, tok) }, // not JSON
		func(w http.ResponseWriter) { fmt.Fprintf(w, `{"id_token":%q}`, tok) },
		func(w http.ResponseWriter) { fmt.Fprintf(w, `{"access_token":"%s x"}`, tok) },
		func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"error":%q,"error_description":"%s %s"}`, ccSecret, url.QueryEscape(ccSecret), tok)
		},
		func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "<html>%s %s</html>", ccSecret, tok)
		},
	}
	for i, answer := range answers {
		p := newIDP(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { answer(w) })
		_, err := mustSource(t, p.config())(context.Background())
		require.Error(t, err, "answer %d", i)
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			out := fmt.Sprintf(verb, err)
			assert.NotContains(t, out, ccSecret, "answer %d, %s", i, verb)
			assert.NotContains(t, out, url.QueryEscape(ccSecret), "answer %d, %s", i, verb)
			if i != 3 { // answer 3 puts the token where the description goes
				assert.NotContains(t, out, tok, "answer %d, %s", i, verb)
			}
		}
	}
}

// TestClientCredentialsErrorsHideEncodedSecrets: an endpoint that
// quotes the credentials in another encoding (the Basic header it got,
// lowercase or path-style percent-encoding) does not get them into the
// error; a description with a Basic header left is dropped whole.
func TestClientCredentialsErrorsHideEncodedSecrets(t *testing.T) {
	const secret = "a/b c+d"
	basic := func(id, sec string) string { return base64.StdEncoding.EncodeToString([]byte(id + ":" + sec)) }
	tests := []struct {
		name      string
		urlencode bool
		desc      func(r *http.Request) string
		hidden    string // must not show
		kept      string // must still show ("" for none)
	}{
		{"the Authorization header", false, func(r *http.Request) string { return "bad header " + r.Header.Get("Authorization") }, basic(ccID, secret), "bad header"},
		{"the url-encoded Basic header", true, func(r *http.Request) string { return "bad " + r.Header.Get("Authorization") }, basic(ccID, url.QueryEscape(secret)), "bad"},
		{"unpadded base64", false, func(*http.Request) string {
			return "got " + base64.RawStdEncoding.EncodeToString([]byte(ccID+":"+secret))
		}, base64.RawStdEncoding.EncodeToString([]byte(ccID + ":" + secret)), "got"},
		{"lowercase percent-encoding", false, func(*http.Request) string { return "client_secret=a%2fb+c%2bd" }, "a%2fb+c%2bd", "client_secret="},
		{"path-style percent-encoding", false, func(*http.Request) string { return "client_secret=a%2Fb%20c+d" }, "a%2Fb%20c+d", "client_secret="},
		{"query-style with %20", false, func(*http.Request) string { return "secret a%2Fb%20c%2Bd" }, "a%2Fb%20c%2Bd", "secret "},
		{"some other Basic header", false, func(*http.Request) string { return "header Basic " + basic("x", "Zz9-other") }, basic("x", "Zz9-other"), ""},
		{"the word Basic", false, func(*http.Request) string { return "Basic authentication failed" }, secret, "Basic authentication failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newIDP(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": tc.desc(r)})
			})
			cfg := p.config()
			cfg.ClientSecret, cfg.URLEncodeCredentials = secret, tc.urlencode
			_, err := mustSource(t, cfg)(context.Background())
			require.Error(t, err)
			out := err.Error()
			assert.NotContains(t, out, tc.hidden)
			assert.NotContains(t, out, secret)
			assert.Contains(t, out, "invalid_client")
			if tc.kept != "" {
				assert.Contains(t, out, tc.kept)
			}
		})
	}
}

// leakyTransport fails every request with a leakError: the request's
// Authorization header after prefix in its text (quote), or only in its
// fields.
type leakyTransport struct {
	prefix string
	quote  bool
}

type leakError struct {
	prefix, header string
	quote          bool
}

func (e *leakError) Error() string {
	if !e.quote {
		return "proxy refused the request"
	}
	return e.prefix + "proxy refused " + e.header
}

func (l leakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, &leakError{l.prefix, r.Header.Get("Authorization"), l.quote}
}

// TestClientCredentialsCauseWithSecretUnreachable: a cause whose text
// held the secret, even past what the error shows, or that is of a type
// of the HTTP client's own (whose fields may hold the request), is not
// reachable through errors.As; a clean cause of the standard library
// stays reachable.
func TestClientCredentialsCauseWithSecretUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name string
		rt   leakyTransport
		want string // in the error
	}{
		{"the header quoted", leakyTransport{quote: true}, "proxy refused"},
		{"the header quoted past byte 300", leakyTransport{prefix: strings.Repeat("x", 400) + " ", quote: true}, "xxx..."},
		{"a custom type with a clean text", leakyTransport{}, "proxy refused the request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sasl.ClientCredentialsConfig{TokenURL: "https://idp.invalid/token", ClientID: ccID, ClientSecret: ccSecret,
				HTTPClient: &http.Client{Transport: tc.rt}, RetryBackoffMax: -1}
			_, err := mustSource(t, cfg)(context.Background())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var leak *leakError
			assert.False(t, errors.As(err, &leak), "the cause that holds the header is reachable")
			assert.NotContains(t, fmt.Sprintf("%+v %#v", err, err), base64.StdEncoding.EncodeToString([]byte(ccID+":"+ccSecret)))
		})
	}

	_, err := mustSource(t, sasl.ClientCredentialsConfig{TokenURL: "https://127.0.0.1:1/token", ClientID: ccID, ClientSecret: ccSecret, RetryBackoffMax: -1})(context.Background())
	var op *net.OpError
	assert.True(t, errors.As(err, &op), "a clean cause stays reachable: %v", err)
}

// TestClientCredentialsWithOAuthBearer: the source plugged into
// OAuthBearer gives the client's first message.
func TestClientCredentialsWithOAuthBearer(t *testing.T) {
	p := newIDP(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { tokenJSON(w, "eyJ.tok.en", 60) })
	cfg := p.config()
	cfg.Extensions = map[string]string{"logicalCluster": "lkc-1"}
	m := sasl.OAuthBearer(mustSource(t, cfg))
	_, first, err := m.Start(context.Background(), "b:9092")
	require.NoError(t, err)
	assert.Equal(t, "n,,\x01auth=Bearer eyJ.tok.en\x01logicalCluster=lkc-1\x01\x01", string(first))

	refused := newIDP(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	_, _, err = sasl.OAuthBearer(mustSource(t, refused.config())).Start(context.Background(), "b:9092")
	var te *sasl.TokenEndpointError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, http.StatusUnauthorized, te.StatusCode)
	assert.False(t, errors.Is(err, context.Canceled))
}

// TestClientCredentialsExpiredOnArrival: a token that has expired when it
// arrives fails the fetch instead of being handed out, and callers get
// that error for a second rather than send one request each; a token
// without a lifetime and RefreshMinPeriod none is still used for a second.
func TestClientCredentialsExpiredOnArrival(t *testing.T) {
	tests := []struct {
		name      string
		answer    func(w http.ResponseWriter)
		minPeriod time.Duration
		wantErr   string
	}{
		{"expires_in 0", func(w http.ResponseWriter) { tokenJSON(w, "tok", 0) }, 0, "expired on arrival"},
		{"a JWT exp in the past", func(w http.ResponseWriter) { tokenJSON(w, jwt(time.Now().Add(-time.Minute)), 3600) }, 0, "expired on arrival"},
		{"no lifetime, no minimum period", func(w http.ResponseWriter) { tokenJSON(w, "tok", -1) }, -1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newIDP(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { tc.answer(w) })
			cfg := p.config()
			cfg.RefreshMinPeriod = tc.minPeriod
			src := mustSource(t, cfg)
			start := time.Now()
			for range 50 {
				_, err := src(context.Background())
				if tc.wantErr == "" {
					require.NoError(t, err)
					continue
				}
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
			}
			if time.Since(start) < 800*time.Millisecond { // not when the machine stalled
				assert.EqualValues(t, 1, p.requests.Load(), "one request, not one per call")
			}
			if tc.wantErr != "" {
				time.Sleep(1100*time.Millisecond - time.Since(start))
				_, err := src(context.Background())
				require.Error(t, err)
				assert.EqualValues(t, 2, p.requests.Load(), "tried again after the hold-off")
			}
		})
	}
}

// TestClientCredentialsHugeRetryBackoffMax: the largest RetryBackoffMax
// (as properties accept it) does not overflow the background refresh's
// budget: the refresh runs.
func TestClientCredentialsHugeRetryBackoffMax(t *testing.T) {
	p := newIDP(t, func(n int64, w http.ResponseWriter, _ *http.Request) { tokenJSON(w, fmt.Sprint("tok-", n), 2) })
	cfg := p.config()
	cfg.RetryBackoff, cfg.RetryBackoffMax = time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	cfg.RefreshMinPeriod, cfg.RefreshBuffer, cfg.RefreshWindowJitter, cfg.RefreshWindowFactor = -1, -1, -1, 0.5
	src := mustSource(t, cfg)
	_, err := src(context.Background())
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond)
	require.Eventually(t, func() bool {
		tok, err := src(context.Background())
		return err == nil && tok.Value == "tok-2"
	}, 800*time.Millisecond, 10*time.Millisecond, "the background refresh ran before expiry")
}

// TestClientCredentialsRefreshBeforeExpiryWithFactorOne: with
// RefreshWindowFactor 1 and no jitter the refresh still comes before
// expiry, in the background, so that callers never lack a token.
func TestClientCredentialsRefreshBeforeExpiryWithFactorOne(t *testing.T) {
	p := newIDP(t, func(n int64, w http.ResponseWriter, _ *http.Request) { tokenJSON(w, fmt.Sprint("tok-", n), 3) })
	cfg := p.config()
	cfg.RefreshMinPeriod, cfg.RefreshBuffer, cfg.RefreshWindowJitter, cfg.RefreshWindowFactor = -1, -1, -1, 1
	src := mustSource(t, cfg)
	start := time.Now()
	_, err := src(context.Background())
	require.NoError(t, err)
	time.Sleep(2870*time.Millisecond - time.Since(start)) // past 95% of the lifetime
	if time.Since(start) > 2920*time.Millisecond {
		t.Skip("the machine stalled")
	}
	for {
		tok, err := src(context.Background())
		require.NoError(t, err)
		if tok.Value == "tok-2" {
			break
		}
		assert.Equal(t, "tok-1", tok.Value)
		require.Less(t, time.Since(start), 2980*time.Millisecond, "no refresh before expiry")
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's goroutine and the
// test's.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tokenThen answers a token, then fails every request: with a 503 that
// quotes the secret, or by panicking with it.
type tokenThen struct {
	n     atomic.Int64
	panic bool
}

func (tt *tokenThen) RoundTrip(r *http.Request) (*http.Response, error) {
	answer := func(code int, body string) *http.Response {
		return &http.Response{StatusCode: code, Header: http.Header{}, Request: r, Body: io.NopCloser(strings.NewReader(body))}
	}
	if tt.n.Add(1) == 1 {
		return answer(http.StatusOK, `{"access_token":"TOKEN-xyzzy","expires_in":2}`), nil
	}
	if tt.panic {
		panic("transport bug " + r.Header.Get("Authorization") + " " + ccSecret)
	}
	return answer(http.StatusServiceUnavailable, `{"error":"unavailable","error_description":"no `+ccSecret+`"}`), nil
}

// TestClientCredentialsLogsBackgroundFailure: a background refresh that
// fails, or whose HTTP client panics, is logged once at Warn with the
// endpoint and the cleaned error, never the secret or the token.
func TestClientCredentialsLogsBackgroundFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		panic bool
		want  string
	}{
		{"HTTP 503", false, "HTTP 503: unavailable (no [redacted])"},
		{"a panic", true, "the HTTP client panicked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			rt := &tokenThen{panic: tc.panic}
			cfg := sasl.ClientCredentialsConfig{TokenURL: "https://idp.invalid/token?k=v", ClientID: ccID, ClientSecret: ccSecret,
				HTTPClient: &http.Client{Transport: rt}, RetryBackoffMax: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				RefreshMinPeriod: -1, RefreshBuffer: -1, RefreshWindowJitter: -1, RefreshWindowFactor: 0.5}
			src := mustSource(t, cfg)
			_, err := src(context.Background())
			require.NoError(t, err)
			time.Sleep(1100 * time.Millisecond)
			tok, err := src(context.Background()) // starts the refresh
			require.NoError(t, err)
			assert.Equal(t, "TOKEN-xyzzy", tok.Value)
			require.Eventually(t, func() bool { return strings.Contains(logs.String(), "\n") },
				time.Second, 5*time.Millisecond)
			_, _ = src(context.Background()) // within the next-try time: no new refresh
			time.Sleep(50 * time.Millisecond)
			out := logs.String()
			assert.Equal(t, 1, strings.Count(out, "\n"), "one record per failure: %s", out)
			assert.Contains(t, out, "level=WARN")
			assert.Contains(t, out, "url=https://idp.invalid/token")
			assert.Contains(t, out, tc.want)
			for _, hidden := range []string{ccSecret, "TOKEN-xyzzy", "k=v", base64.StdEncoding.EncodeToString([]byte(ccID + ":" + ccSecret))} {
				assert.NotContains(t, out, hidden)
			}
		})
	}
}

// TestClientCredentialsRefreshEndsWithItsOwner: a background refresh
// started by a caller whose context carries its owner's lifetime.Group (a
// producer's) is the owner's: closing the Group ends it (the endpoint
// never answered) and waits for it; and as the owner, not the endpoint,
// ended it, the next caller refreshes at once instead of after
// RetryBackoffMax.
func TestClientCredentialsRefreshEndsWithItsOwner(t *testing.T) {
	before := goleak.IgnoreCurrent() // goroutines of earlier tests still ending
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	var hang atomic.Bool
	hang.Store(true)
	p := newIDP(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 2 && hang.Load() {
			<-r.Context().Done()
			return
		}
		tokenJSON(w, fmt.Sprint("tok-", n), 4)
	})
	src := halfLifeSource(t, p)
	time.Sleep(2100 * time.Millisecond) // past the refresh time (2s), before expiry (4s)
	owner := lifetime.NewGroup()
	tok, err := src(lifetime.With(context.Background(), owner)) // starts the refresh, the owner's
	require.NoError(t, err)
	assert.Equal(t, "tok-1", tok.Value)
	require.Eventually(t, func() bool { return p.requests.Load() == 2 }, 2*time.Second, 5*time.Millisecond)
	owner.Close() // returns once the refresh has ended
	hang.Store(false)
	require.Eventually(t, func() bool {
		tok, err := src(context.Background())
		return err == nil && tok.Value == "tok-3"
	}, 1500*time.Millisecond, 10*time.Millisecond, "the next caller refreshed at once, before tok-1 expired")
}
