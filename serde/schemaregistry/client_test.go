package schemaregistry_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/sasl"
	sr "github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/internal/fakeregistry"
)

const orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"}]}`
const orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}`

// newClient returns a Client of fake with fast retries.
func newClient(t *testing.T, fake *fakeregistry.Registry, mod ...func(*sr.Config)) *sr.Client {
	t.Helper()
	cfg := sr.Config{URLs: []string{fake.URL()}, RetryBackoff: time.Millisecond, RetryBackoffMax: 5 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := sr.NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func TestClientCalls(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	c := newClient(t, fake)

	id1, err := c.Register(ctx, "orders-value", sr.Schema{Schema: orderV1}, false)
	require.NoError(t, err)
	id2, err := c.Register(ctx, "orders-value", sr.Schema{Schema: orderV2, Type: sr.Avro}, false)
	require.NoError(t, err)
	assert.NotEqual(t, id1, id2)
	// The same schema under another subject keeps its registry-wide id.
	idOther, err := c.Register(ctx, "returns-value", sr.Schema{Schema: orderV1}, false)
	require.NoError(t, err)
	assert.Equal(t, id1, idOther)

	got, err := c.Lookup(ctx, "orders-value", sr.Schema{Schema: orderV2}, false)
	require.NoError(t, err)
	assert.Equal(t, sr.SubjectSchema{Subject: "orders-value", Version: 2, ID: id2, Schema: sr.Schema{Schema: orderV2}}, got)

	s, err := c.SchemaByID(ctx, id1)
	require.NoError(t, err)
	assert.Equal(t, orderV1, s.Schema)
	assert.Equal(t, sr.Avro, s.TypeOrAvro())

	versions, err := c.Versions(ctx, "orders-value")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, versions)

	v1, err := c.SchemaByVersion(ctx, "orders-value", 1)
	require.NoError(t, err)
	assert.Equal(t, id1, v1.ID)
	assert.Equal(t, orderV1, v1.Schema.Schema)

	latest, err := c.Latest(ctx, "orders-value")
	require.NoError(t, err)
	assert.Equal(t, 2, latest.Version)
	assert.Equal(t, id2, latest.ID)

	subjects, err := c.Subjects(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"orders-value", "returns-value"}, subjects)

	cfg, err := c.GetConfig(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, sr.CompatibilityBackward, cfg.Compatibility)
	require.NoError(t, c.SetConfig(ctx, "orders-value", sr.SubjectConfig{Compatibility: sr.CompatibilityFull}))
	cfg, err = c.GetConfig(ctx, "orders-value")
	require.NoError(t, err)
	assert.Equal(t, sr.CompatibilityFull, cfg.Compatibility)
	cfg, err = c.GetConfig(ctx, "returns-value") // the registry's, by defaultToGlobal
	require.NoError(t, err)
	assert.Equal(t, sr.CompatibilityBackward, cfg.Compatibility)

	compat, err := c.CheckCompatibility(ctx, "orders-value", 0, sr.Schema{Schema: orderV1})
	require.NoError(t, err)
	assert.True(t, compat.IsCompatible)

	deleted, err := c.DeleteSubject(ctx, "returns-value", false)
	require.NoError(t, err)
	assert.Equal(t, []int{1}, deleted)
	_, err = c.Versions(ctx, "returns-value")
	assert.True(t, sr.IsNotFound(err), "%v", err)
}

func TestClientRequestShapes(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	c := newClient(t, fake)

	_, err := c.Register(ctx, "dir/common.proto", sr.Schema{Schema: "syntax = \"proto3\";", Type: sr.Protobuf}, true)
	require.NoError(t, err)
	_, err = c.Register(ctx, "o-value", sr.Schema{Schema: orderV1, Type: sr.Avro}, false)
	require.NoError(t, err)
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	// A subject holding a slash travels as one escaped path segment.
	assert.Equal(t, "/subjects/dir/common.proto/versions", reqs[0].Path)
	assert.Equal(t, "normalize=true", reqs[0].Query)
	assert.JSONEq(t, `{"schema":"syntax = \"proto3\";","schemaType":"PROTOBUF"}`, reqs[0].Body)
	// Avro is sent without schemaType, as every registry expects.
	assert.JSONEq(t, `{"schema":`+quote(orderV1)+`}`, reqs[1].Body)
	assert.Equal(t, "application/vnd.schemaregistry.v1+json", reqs[1].Header.Get("Content-Type"))
}

func quote(s string) string {
	b := new(strings.Builder)
	fmt.Fprintf(b, "%q", s)
	return b.String()
}

func TestClientCaches(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	c := newClient(t, fake)

	s := sr.Schema{Schema: orderV1}
	for range 3 {
		_, err := c.Register(ctx, "a-value", s, false)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, fake.Count("POST", "/subjects/a-value/versions"), "Register is cached by subject and schema")

	// Lookup needs the version, which Register's answer lacks: one request, then cached.
	for range 3 {
		_, err := c.Lookup(ctx, "a-value", s, false)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, fake.Count("POST", "/subjects/a-value"))

	// SchemaByID of an id the client registered itself makes no request;
	// another id is fetched once.
	id, err := c.Register(ctx, "b-value", sr.Schema{Schema: orderV2}, false)
	require.NoError(t, err)
	other := newClient(t, fake)
	for range 3 {
		got, err := other.SchemaByID(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, orderV2, got.Schema)
	}
	assert.Equal(t, 1, fake.Count("GET", fmt.Sprintf("/schemas/ids/%d", id)))

	for range 2 {
		_, err := other.SchemaByVersion(ctx, "b-value", 1)
		require.NoError(t, err)
		_, err = other.Latest(ctx, "b-value")
		require.NoError(t, err)
	}
	assert.Equal(t, 1, fake.Count("GET", "/subjects/b-value/versions/1"))
	assert.Equal(t, 2, fake.Count("GET", "/subjects/b-value/versions/latest"), "Latest is never cached")
}

func TestClientCacheSizeBound(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	c := newClient(t, fake, func(c *sr.Config) { c.CacheSize = 2 })
	for i := range 5 {
		_, err := c.Register(ctx, fmt.Sprintf("s%d", i), sr.Schema{Schema: orderV1}, false)
		require.NoError(t, err)
	}
	// With room for two entries, at least three of the five were dropped:
	// registering all again asks the registry at least three times more.
	before := len(fake.Requests())
	for i := range 5 {
		_, err := c.Register(ctx, fmt.Sprintf("s%d", i), sr.Schema{Schema: orderV1}, false)
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, len(fake.Requests())-before, 3)
}

func TestClientErrors(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	fake.Compatible = func(_, _ string, _ []fakeregistry.Schema, _ fakeregistry.Schema) bool { return false }
	c := newClient(t, fake)
	_, err := c.Register(ctx, "x-value", sr.Schema{Schema: orderV1}, false)
	require.NoError(t, err)

	cases := []struct {
		name   string
		call   func() error
		status int
		code   int
	}{
		{"incompatible", func() error {
			_, err := c.Register(ctx, "x-value", sr.Schema{Schema: orderV2}, false)
			return err
		}, 409, sr.CodeIncompatibleSchema},
		{"subject not found", func() error { _, err := c.Latest(ctx, "nope"); return err }, 404, sr.CodeSubjectNotFound},
		{"version not found", func() error { _, err := c.SchemaByVersion(ctx, "x-value", 7); return err }, 404, sr.CodeVersionNotFound},
		{"schema not found", func() error {
			_, err := c.Lookup(ctx, "x-value", sr.Schema{Schema: orderV2}, false)
			return err
		}, 404, sr.CodeSchemaNotFound},
		{"id not found", func() error { _, err := c.SchemaByID(ctx, 999); return err }, 404, sr.CodeSchemaNotFound},
		{"bad level", func() error {
			return c.SetConfig(ctx, "", sr.SubjectConfig{Compatibility: "SIDEWAYS"})
		}, 422, sr.CodeInvalidCompatibility},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var se *sr.Error
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.status, se.StatusCode)
			assert.Equal(t, tc.code, se.Code)
			assert.NotEmpty(t, se.Message)
			assert.Contains(t, err.Error(), se.Message)
			assert.Equal(t, tc.status == 404, sr.IsNotFound(err))
		})
	}
}

func TestClientNonJSONErrorBody(t *testing.T) {
	fake := fakeregistry.New(t)
	fake.FailNextWith(1, 403, "", "<html>Forbidden by the proxy</html>")
	c := newClient(t, fake)
	_, err := c.Subjects(context.Background())
	var se *sr.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 403, se.StatusCode)
	assert.Equal(t, 0, se.Code)
	assert.Equal(t, "<html>Forbidden by the proxy</html>", se.Message)
}

func TestClientRetries(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		failures   int
		maxRetries int
		wantOK     bool
		attempts   int
	}{
		{"500 then success", 500, 2, 0, true, 3},
		{"503 past the retries", 503, 5, 0, false, 4},
		{"429 then success", 429, 1, 0, true, 2},
		{"no retries", 500, 1, sr.NoRetries, false, 1},
		{"one retry", 502, 1, 1, true, 2},
		{"404 is not retried", 404, 1, 0, false, 1},
		{"409 is not retried", 409, 1, 0, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeregistry.New(t)
			fake.FailNext(tc.failures, tc.status, "")
			c := newClient(t, fake, func(c *sr.Config) { c.MaxRetries = tc.maxRetries })
			_, err := c.Subjects(context.Background())
			if tc.wantOK {
				require.NoError(t, err)
			} else {
				var se *sr.Error
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tc.status, se.StatusCode)
			}
			assert.Len(t, fake.Requests(), tc.attempts)
		})
	}
}

func TestClientRetryAfterIsHonouredUpToTheMax(t *testing.T) {
	fake := fakeregistry.New(t)
	fake.FailNext(1, 429, "3600")
	c := newClient(t, fake, func(c *sr.Config) { c.RetryBackoffMax = 20 * time.Millisecond })
	start := time.Now()
	_, err := c.Subjects(context.Background())
	require.NoError(t, err)
	// Retry-After: 3600 is capped at RetryBackoffMax: the call returns.
	assert.Less(t, time.Since(start), time.Minute)
	assert.Len(t, fake.Requests(), 2)
}

func TestClientRetriesGoToTheNextURL(t *testing.T) {
	down := fakeregistry.New(t)
	down.Close()
	up := fakeregistry.New(t)
	c, err := sr.NewClient(sr.Config{URLs: []string{down.URL(), up.URL()}, RetryBackoff: time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Subjects(context.Background())
	require.NoError(t, err)
	assert.Len(t, up.Requests(), 1)
}

func TestClientContextBoundsRetries(t *testing.T) {
	fake := fakeregistry.New(t)
	fake.Close() // refused connections: retried until the context ends
	c := newClient(t, fake, func(c *sr.Config) {
		c.MaxRetries = 1000
		c.RetryBackoff = 10 * time.Millisecond
		c.RetryBackoffMax = 10 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Register(ctx, "t-value", sr.Schema{Schema: orderV1}, false)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestClientRequestTimeout(t *testing.T) {
	fake := fakeregistry.New(t)
	release := make(chan struct{})
	defer close(release)
	fake.Handler = func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	}
	c := newClient(t, fake, func(c *sr.Config) {
		c.RequestTimeout = 20 * time.Millisecond
		c.MaxRetries = 2
	})
	_, err := c.Subjects(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GET "+fake.URL()+"/subjects")
	assert.Len(t, fake.Requests(), 3, "a timed-out attempt is retried")
}

func TestClientBodyCap(t *testing.T) {
	fake := fakeregistry.New(t)
	fake.Handler = func(w http.ResponseWriter, r *http.Request) bool {
		_, _ = w.Write([]byte(`["` + strings.Repeat("x", 2000) + `"]`))
		return true
	}
	c := newClient(t, fake, func(c *sr.Config) { c.MaxResponseBytes = 1000 })
	_, err := c.Subjects(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than MaxResponseBytes")
	assert.Len(t, fake.Requests(), 1, "an oversized answer is not retried")
}

func TestClientAuthHeaders(t *testing.T) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	cases := []struct {
		name  string
		cfg   func(c *sr.Config, url string)
		want  string
		extra map[string]string
	}{
		{"basic", func(c *sr.Config, _ string) { c.Username, c.Password = "alice", "s3cret" }, basic, nil},
		{"basic from the URL", func(c *sr.Config, u string) {
			c.URLs = []string{strings.Replace(u, "http://", "http://alice:s3cret@", 1)}
		}, basic, nil},
		{"static bearer", func(c *sr.Config, _ string) {
			c.BearerToken = "tok-123"
			c.LogicalCluster, c.IdentityPoolID = "lsrc-1", "pool-2"
		}, "Bearer tok-123", map[string]string{"target-sr-cluster": "lsrc-1", "Confluent-Identity-Pool-Id": "pool-2"}},
		{"token source", func(c *sr.Config, _ string) {
			c.BearerTokenSource = func(context.Context) (sasl.Token, error) {
				return sasl.Token{Value: "dyn-9", Extensions: map[string]string{"logicalCluster": "lsrc-3", "identityPoolId": "pool-4"}}, nil
			}
		}, "Bearer dyn-9", map[string]string{"target-sr-cluster": "lsrc-3", "Confluent-Identity-Pool-Id": "pool-4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeregistry.New(t)
			fake.Auth = tc.want
			c := newClient(t, fake, func(c *sr.Config) { tc.cfg(c, fake.URL()) })
			_, err := c.Subjects(context.Background())
			require.NoError(t, err)
			h := fake.Requests()[0].Header
			assert.Equal(t, tc.want, h.Get("Authorization"))
			for k, v := range tc.extra {
				assert.Equal(t, v, h.Get(k), k)
			}
		})
	}
}

func TestClientWrongCredentials(t *testing.T) {
	fake := fakeregistry.New(t)
	fake.Auth = "Bearer right"
	c := newClient(t, fake, func(c *sr.Config) { c.BearerToken = "wrong-token-value" })
	_, err := c.Subjects(context.Background())
	var se *sr.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 401, se.StatusCode)
	assert.Equal(t, sr.CodeUnauthorized, se.Code)
	assert.Len(t, fake.Requests(), 1, "401 is not retried")
}

// TestSecretsNeverPrinted: credentials appear neither in errors (even
// when a hostile registry echoes them, or in transport errors) nor in the
// printed Config.
func TestSecretsNeverPrinted(t *testing.T) {
	const pass, token = "pa55-word-xyz", "tok-secret-abc"
	basic := base64.StdEncoding.EncodeToString([]byte("bob:" + pass))
	echo := fakeregistry.New(t)
	echo.Handler = func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(500)
		_, _ = fmt.Fprintf(w, `{"error_code":50001,"message":"bad auth %s from %s"}`, r.Header.Get("Authorization"), r.URL)
		return true
	}
	down := fakeregistry.New(t)
	down.Close()

	cases := []struct {
		name string
		cfg  sr.Config
	}{
		{"basic echoed", sr.Config{URLs: []string{echo.URL()}, Username: "bob", Password: pass}},
		{"URL credentials echoed", sr.Config{URLs: []string{strings.Replace(echo.URL(), "http://", "http://bob:"+pass+"@", 1)}}},
		{"bearer echoed", sr.Config{URLs: []string{echo.URL()}, BearerToken: token}},
		{"token source echoed", sr.Config{URLs: []string{echo.URL()}, BearerTokenSource: func(context.Context) (sasl.Token, error) {
			return sasl.Token{Value: token}, nil
		}}},
		{"URL credentials, registry down", sr.Config{URLs: []string{strings.Replace(down.URL(), "http://", "http://bob:"+pass+"@", 1)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.MaxRetries = sr.NoRetries
			for _, s := range []string{fmt.Sprintf("%v", tc.cfg), fmt.Sprintf("%+v", tc.cfg), fmt.Sprintf("%#v", tc.cfg), fmt.Sprint(&tc.cfg)} {
				assert.NotContains(t, s, pass)
				assert.NotContains(t, s, token)
			}
			c, err := sr.NewClient(tc.cfg)
			require.NoError(t, err)
			defer c.Close()
			assert.NotContains(t, c.String(), pass)
			_, err = c.Subjects(context.Background())
			require.Error(t, err)
			for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err)} {
				assert.NotContains(t, s, pass)
				assert.NotContains(t, s, token)
				assert.NotContains(t, s, basic)
			}
		})
	}
}

func TestNewClientRejects(t *testing.T) {
	cases := []struct {
		name string
		cfg  sr.Config
		want string
	}{
		{"no URL", sr.Config{}, "URLs"},
		{"not http", sr.Config{URLs: []string{"ftp://x"}}, "not an http"},
		{"basic and bearer", sr.Config{URLs: []string{"http://x"}, Username: "u", Password: "p", BearerToken: "t"}, "both"},
		{"password alone", sr.Config{URLs: []string{"http://x"}, Password: "hidden-pw"}, "Password is set without Username"},
		{"negative timeout", sr.Config{URLs: []string{"http://x"}, RequestTimeout: -1}, "negative"},
		{"query", sr.Config{URLs: []string{"http://u:hidden-pw@x/?a=b"}}, "query"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sr.NewClient(tc.cfg)
			require.ErrorIs(t, err, sr.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "hidden-pw")
		})
	}
}

func TestClientTLS(t *testing.T) {
	fake := fakeregistry.NewTLS(t)
	var calls atomic.Int32
	fake.Handler = func(http.ResponseWriter, *http.Request) bool { calls.Add(1); return false }
	c := newClient(t, fake, func(c *sr.Config) {
		c.TLS = fake.Server().Client().Transport.(*http.Transport).TLSClientConfig
	})
	_, err := c.Subjects(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 1, calls.Load())

	// Without trusting the registry's CA the handshake fails, and is not
	// retried forever.
	untrusted := newClient(t, fake, func(c *sr.Config) { c.MaxRetries = sr.NoRetries })
	_, err = untrusted.Subjects(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")
}
