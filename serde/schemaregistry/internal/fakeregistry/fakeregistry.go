// Package fakeregistry is an in-process Schema Registry speaking
// Confluent's REST API, for the tests of the schemaregistry modules:
// subjects, versions, registry-wide ids shared by equal schemas,
// compatibility levels with a pluggable check, Basic or bearer
// authentication, injected failures, and a log of requests.
package fakeregistry

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Schema is a schema as the API carries it.
type Schema struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
}

// Reference is a schema reference.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

func (s Schema) key() string {
	b, _ := json.Marshal(struct {
		S string
		T string
		R []Reference
	}{s.Schema, typeOf(s), s.References})
	return string(b)
}

func typeOf(s Schema) string {
	if s.SchemaType == "" {
		return "AVRO"
	}
	return s.SchemaType
}

type version struct {
	id, version int
	schema      Schema
}

// Request is a request the registry received.
type Request struct {
	Method, Path, Query string
	Header              http.Header
	Body                string
}

// Registry is the fake. Its fields may be set before the first request.
type Registry struct {
	srv *httptest.Server

	mu       sync.Mutex
	ids      map[string]int // schema key -> id
	byID     map[int]Schema
	subjects map[string][]version
	config   map[string]string // subject ("" = global) -> level
	nextID   int
	log      []Request
	failures []failure

	// Auth, when set, is the Authorization header every request must
	// carry; others get 401.
	Auth string
	// Compatible decides whether candidate may follow the subject's
	// existing versions under level (not NONE); nil accepts everything.
	Compatible func(subject, level string, existing []Schema, candidate Schema) bool
	// Handler, when set, answers a request first; returning false lets
	// the registry answer it.
	Handler func(w http.ResponseWriter, r *http.Request) bool
}

type failure struct {
	status     int
	retryAfter string
	body       string
}

// New starts a registry on a loopback port, closed at the end of the test.
func New(t testing.TB) *Registry { return start(t, httptest.NewServer) }

// NewTLS is New over TLS; Server().Client() trusts it.
func NewTLS(t testing.TB) *Registry { return start(t, httptest.NewTLSServer) }

func start(t testing.TB, serve func(http.Handler) *httptest.Server) *Registry {
	r := &Registry{
		ids:      map[string]int{},
		byID:     map[int]Schema{},
		subjects: map[string][]version{},
		config:   map[string]string{"": "BACKWARD"},
		nextID:   1,
	}
	r.srv = serve(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// Server returns the underlying server (for its certificate).
func (r *Registry) Server() *httptest.Server { return r.srv }

// URL is the registry's base URL.
func (r *Registry) URL() string { return r.srv.URL }

// Close stops the registry: later requests are refused.
func (r *Registry) Close() { r.srv.Close() }

// SetNextID makes the next new schema get id.
func (r *Registry) SetNextID(id int) {
	r.mu.Lock()
	r.nextID = id
	r.mu.Unlock()
}

// FailNext makes the next n requests fail with status (and a Retry-After
// header, when not empty) and Confluent's error body.
func (r *Registry) FailNext(n, status int, retryAfter string) {
	r.FailNextWith(n, status, retryAfter, fmt.Sprintf(`{"error_code":%d,"message":"injected failure"}`, status*100+1))
}

// FailNextWith is FailNext with the body given.
func (r *Registry) FailNextWith(n, status int, retryAfter, body string) {
	r.mu.Lock()
	for range n {
		r.failures = append(r.failures, failure{status, retryAfter, body})
	}
	r.mu.Unlock()
}

// Requests returns the requests received so far.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// Count returns how many requests had method and path.
func (r *Registry) Count(method, path string) int {
	n := 0
	for _, q := range r.Requests() {
		if q.Method == method && q.Path == path {
			n++
		}
	}
	return n
}

// Versions returns the schemas registered under subject, oldest first.
func (r *Registry) Versions(subject string) []Schema {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Schema
	for _, v := range r.subjects[subject] {
		out = append(out, v.schema)
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status, code int, format string, args ...any) {
	writeJSON(w, status, map[string]any{"error_code": code, "message": fmt.Sprintf(format, args...)})
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 16<<20))
	// Segments of the escaped path, each unescaped: a subject may hold
	// an escaped slash.
	var segs []string
	for _, s := range strings.Split(strings.Trim(req.URL.EscapedPath(), "/"), "/") {
		u, err := url.PathUnescape(s)
		if err != nil {
			fail(w, 400, 400, "bad path")
			return
		}
		segs = append(segs, u)
	}
	r.mu.Lock()
	r.log = append(r.log, Request{Method: req.Method, Path: "/" + strings.Join(segs, "/"), Query: req.URL.RawQuery, Header: req.Header.Clone(), Body: string(body)})
	var f *failure
	if len(r.failures) > 0 {
		f = &r.failures[0]
		r.failures = r.failures[1:]
	}
	auth, handler := r.Auth, r.Handler
	r.mu.Unlock()
	if f != nil {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, f.body)
		return
	}
	if handler != nil && handler(w, req) {
		return
	}
	if auth != "" && req.Header.Get("Authorization") != auth {
		fail(w, 401, 40101, "Unauthorized")
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	q := req.URL.Query()
	switch {
	case len(segs) == 3 && segs[0] == "subjects" && segs[2] == "versions" && req.Method == http.MethodPost:
		r.register(w, segs[1], body)
	case len(segs) == 2 && segs[0] == "subjects" && req.Method == http.MethodPost:
		r.lookup(w, segs[1], body)
	case len(segs) == 2 && segs[0] == "subjects" && req.Method == http.MethodDelete:
		if r.listVersions(w, segs[1]) {
			delete(r.subjects, segs[1])
		}
	case len(segs) == 3 && segs[0] == "schemas" && segs[1] == "ids" && req.Method == http.MethodGet:
		id, err := strconv.Atoi(segs[2])
		s, ok := r.byID[id]
		if err != nil || !ok {
			fail(w, 404, 40403, "Schema %s not found", segs[2])
			return
		}
		writeJSON(w, 200, s)
	case len(segs) == 1 && segs[0] == "subjects" && req.Method == http.MethodGet:
		out := []string{}
		for s := range r.subjects {
			out = append(out, s)
		}
		slices.Sort(out)
		writeJSON(w, 200, out)
	case len(segs) == 3 && segs[0] == "subjects" && segs[2] == "versions" && req.Method == http.MethodGet:
		r.listVersions(w, segs[1])
	case len(segs) == 4 && segs[0] == "subjects" && segs[2] == "versions" && req.Method == http.MethodGet:
		v, ok := r.version(w, segs[1], segs[3])
		if ok {
			writeJSON(w, 200, r.full(segs[1], v))
		}
	case len(segs) == 5 && segs[0] == "compatibility" && segs[1] == "subjects" && segs[3] == "versions" && req.Method == http.MethodPost:
		var s Schema
		if json.Unmarshal(body, &s) != nil {
			fail(w, 422, 42201, "Invalid schema")
			return
		}
		v, ok := r.version(w, segs[2], segs[4])
		if !ok {
			return
		}
		if r.compatible(segs[2], []Schema{v.schema}, s) {
			writeJSON(w, 200, map[string]any{"is_compatible": true})
		} else {
			writeJSON(w, 200, map[string]any{"is_compatible": false, "messages": []string{"incompatible with version " + strconv.Itoa(v.version)}})
		}
	case (len(segs) == 1 || len(segs) == 2) && segs[0] == "config":
		subject := ""
		if len(segs) == 2 {
			subject = segs[1]
		}
		switch req.Method {
		case http.MethodGet:
			level, ok := r.config[subject]
			if !ok && q.Get("defaultToGlobal") == "true" {
				level, ok = r.config[""], true
			}
			if !ok {
				fail(w, 404, 40408, "Subject '%s' does not have subject-level compatibility configured", subject)
				return
			}
			writeJSON(w, 200, map[string]string{"compatibilityLevel": level})
		case http.MethodPut:
			var c struct {
				Compatibility string `json:"compatibility"`
			}
			_ = json.Unmarshal(body, &c)
			switch c.Compatibility {
			case "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE":
			default:
				fail(w, 422, 42203, "Invalid compatibility level")
				return
			}
			r.config[subject] = c.Compatibility
			writeJSON(w, 200, c)
		default:
			fail(w, 405, 405, "method not allowed")
		}
	default:
		fail(w, 404, 404, "HTTP 404 Not Found")
	}
}

// listVersions answers the version numbers of subject, or 404; it
// reports whether the subject exists.
func (r *Registry) listVersions(w http.ResponseWriter, subject string) bool {
	vs, ok := r.subjects[subject]
	if !ok {
		fail(w, 404, 40401, "Subject '%s' not found.", subject)
		return false
	}
	out := []int{}
	for _, v := range vs {
		out = append(out, v.version)
	}
	writeJSON(w, 200, out)
	return true
}

// version finds version (a number or "latest") of subject, answering 404
// itself when there is none.
func (r *Registry) version(w http.ResponseWriter, subject, which string) (version, bool) {
	vs := r.subjects[subject]
	if len(vs) == 0 {
		fail(w, 404, 40401, "Subject '%s' not found.", subject)
		return version{}, false
	}
	if which == "latest" {
		return vs[len(vs)-1], true
	}
	n, err := strconv.Atoi(which)
	if err != nil {
		fail(w, 422, 42202, "The specified version '%s' is not a valid version id.", which)
		return version{}, false
	}
	for _, v := range vs {
		if v.version == n {
			return v, true
		}
	}
	fail(w, 404, 40402, "Version %d not found.", n)
	return version{}, false
}

func (r *Registry) full(subject string, v version) map[string]any {
	out := map[string]any{"subject": subject, "version": v.version, "id": v.id, "schema": v.schema.Schema}
	if v.schema.SchemaType != "" && v.schema.SchemaType != "AVRO" {
		out["schemaType"] = v.schema.SchemaType
	}
	if len(v.schema.References) > 0 {
		out["references"] = v.schema.References
	}
	return out
}

func (r *Registry) compatible(subject string, existing []Schema, s Schema) bool {
	level, ok := r.config[subject]
	if !ok {
		level = r.config[""]
	}
	if level == "NONE" || r.Compatible == nil {
		return true
	}
	return r.Compatible(subject, level, existing, s)
}

func (r *Registry) register(w http.ResponseWriter, subject string, body []byte) {
	var s Schema
	if err := json.Unmarshal(body, &s); err != nil || s.Schema == "" {
		fail(w, 422, 42201, "Either the input schema or one its references is invalid")
		return
	}
	for _, ref := range s.References {
		found := false
		for _, v := range r.subjects[ref.Subject] {
			found = found || v.version == ref.Version
		}
		if !found {
			fail(w, 422, 42201, "Invalid schema: reference %q not found", ref.Name)
			return
		}
	}
	k := s.key()
	vs := r.subjects[subject]
	for _, v := range vs {
		if v.schema.key() == k {
			writeJSON(w, 200, map[string]int{"id": v.id})
			return
		}
	}
	var existing []Schema
	for _, v := range vs {
		existing = append(existing, v.schema)
	}
	if len(vs) > 0 && !r.compatible(subject, existing, s) {
		fail(w, 409, 409, "Schema being registered is incompatible with an earlier schema for subject \"%s\"", subject)
		return
	}
	id, ok := r.ids[k]
	if !ok {
		id = r.nextID
		r.nextID++
		r.ids[k] = id
		r.byID[id] = s
	}
	next := 1
	if len(vs) > 0 {
		next = vs[len(vs)-1].version + 1
	}
	r.subjects[subject] = append(vs, version{id: id, version: next, schema: s})
	writeJSON(w, 200, map[string]int{"id": id})
}

func (r *Registry) lookup(w http.ResponseWriter, subject string, body []byte) {
	var s Schema
	if err := json.Unmarshal(body, &s); err != nil {
		fail(w, 422, 42201, "Invalid schema")
		return
	}
	vs, ok := r.subjects[subject]
	if !ok {
		fail(w, 404, 40401, "Subject '%s' not found.", subject)
		return
	}
	k := s.key()
	for _, v := range vs {
		if v.schema.key() == k {
			writeJSON(w, 200, r.full(subject, v))
			return
		}
	}
	fail(w, 404, 40403, "Schema not found")
}
