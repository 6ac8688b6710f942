package schemaregistry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Every call takes a context, which bounds all its attempts and backoffs;
// each attempt is also bounded by Config.RequestTimeout. A call fails with
// an *Error for an answer other than success (after its retries for 5xx
// and 429), with an error wrapping the context's error when the context
// ended it, or with a transport error (refused connection, timeout) after
// the retries.

// subjectPath returns "/subjects/<subject>" with the subject escaped as
// one path segment (a Protobuf import's subject holds slashes).
func subjectPath(prefix, subject string) string {
	return prefix + url.PathEscape(subject)
}

func query(normalize bool) string {
	if normalize {
		return "?normalize=true"
	}
	return ""
}

// Register registers s under subject (POST /subjects/{subject}/versions)
// and returns its id. A schema already registered under the subject gets
// its existing id (the registry does not add a version), so Register is
// safe to repeat. normalize asks the registry to normalize the schema
// first (Confluent's normalize.schemas). An incompatible schema fails with
// an *Error of Code CodeIncompatibleSchema (HTTP 409), an invalid one with
// CodeInvalidSchema (HTTP 422).
//
// The id is cached: registering the same schema under the same subject
// again makes no request.
func (c *Client) Register(ctx context.Context, subject string, s Schema, normalize bool) (int, error) {
	key := subjectKey{subject: subject, schema: s.key(), normalize: normalize}
	c.mu.Lock()
	got, ok := c.bySchema.get(key)
	c.mu.Unlock()
	if ok {
		return got.ID, nil
	}
	var out struct {
		ID      int `json:"id"`
		Version int `json:"version"`
	}
	if err := c.call(ctx, http.MethodPost, subjectPath("/subjects/", subject)+"/versions"+query(normalize), s.wire(), &out); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.bySchema.put(key, SubjectSchema{Subject: subject, ID: out.ID, Version: out.Version, Schema: s})
	if _, ok := c.byID.get(out.ID); !ok {
		c.byID.put(out.ID, s)
	}
	c.mu.Unlock()
	return out.ID, nil
}

// Lookup finds s among the versions of subject (POST /subjects/{subject})
// and returns it with its id and version, without registering anything. A
// subject without the schema fails with an *Error of Code
// CodeSchemaNotFound, a missing subject with CodeSubjectNotFound (both
// HTTP 404; see IsNotFound). Found schemas are cached.
func (c *Client) Lookup(ctx context.Context, subject string, s Schema, normalize bool) (SubjectSchema, error) {
	key := subjectKey{subject: subject, schema: s.key(), normalize: normalize}
	c.mu.Lock()
	got, ok := c.bySchema.get(key)
	c.mu.Unlock()
	if ok && got.Version > 0 {
		return got, nil
	}
	var out SubjectSchema
	if err := c.call(ctx, http.MethodPost, subjectPath("/subjects/", subject)+query(normalize), s.wire(), &out); err != nil {
		return SubjectSchema{}, err
	}
	if out.Subject == "" {
		out.Subject = subject
	}
	if out.Schema.Schema == "" {
		out.Schema = s
	}
	c.mu.Lock()
	c.bySchema.put(key, out)
	c.mu.Unlock()
	return out, nil
}

// SchemaByID returns the schema of id (GET /schemas/ids/{id}), from the
// cache after the first call: a schema id never changes its schema.
func (c *Client) SchemaByID(ctx context.Context, id int) (Schema, error) {
	c.mu.Lock()
	got, ok := c.byID.get(id)
	c.mu.Unlock()
	if ok {
		return got, nil
	}
	var out Schema
	if err := c.call(ctx, http.MethodGet, "/schemas/ids/"+strconv.Itoa(id), nil, &out); err != nil {
		return Schema{}, err
	}
	c.mu.Lock()
	c.byID.put(id, out)
	c.mu.Unlock()
	return out, nil
}

// Subjects lists the registry's subjects (GET /subjects).
func (c *Client) Subjects(ctx context.Context) ([]string, error) {
	var out []string
	err := c.call(ctx, http.MethodGet, "/subjects", nil, &out)
	return out, err
}

// Versions lists the versions of subject (GET
// /subjects/{subject}/versions), oldest first.
func (c *Client) Versions(ctx context.Context, subject string) ([]int, error) {
	var out []int
	err := c.call(ctx, http.MethodGet, subjectPath("/subjects/", subject)+"/versions", nil, &out)
	return out, err
}

// SchemaByVersion returns version of subject (GET
// /subjects/{subject}/versions/{version}), cached: a version never
// changes.
func (c *Client) SchemaByVersion(ctx context.Context, subject string, version int) (SubjectSchema, error) {
	if version <= 0 {
		return SubjectSchema{}, fmt.Errorf("schemaregistry: version %d of %q: versions start at 1 (Latest gives the latest)", version, subject)
	}
	key := versionKey{subject: subject, version: version}
	c.mu.Lock()
	got, ok := c.byVersion.get(key)
	c.mu.Unlock()
	if ok {
		return got, nil
	}
	out, err := c.subjectVersion(ctx, subject, strconv.Itoa(version))
	if err != nil {
		return SubjectSchema{}, err
	}
	c.mu.Lock()
	c.byVersion.put(key, out)
	if _, ok := c.byID.get(out.ID); !ok {
		c.byID.put(out.ID, out.Schema)
	}
	c.mu.Unlock()
	return out, nil
}

// Latest returns the latest version of subject (GET
// /subjects/{subject}/versions/latest). It is never cached.
func (c *Client) Latest(ctx context.Context, subject string) (SubjectSchema, error) {
	return c.subjectVersion(ctx, subject, "latest")
}

func (c *Client) subjectVersion(ctx context.Context, subject, version string) (SubjectSchema, error) {
	var out SubjectSchema
	if err := c.call(ctx, http.MethodGet, subjectPath("/subjects/", subject)+"/versions/"+version, nil, &out); err != nil {
		return SubjectSchema{}, err
	}
	if out.Subject == "" {
		out.Subject = subject
	}
	return out, nil
}

// DeleteSubject deletes subject (DELETE /subjects/{subject}) and returns
// the versions it had; permanent deletes a soft-deleted subject for good
// (?permanent=true). The Client forgets what it cached for the subject.
func (c *Client) DeleteSubject(ctx context.Context, subject string, permanent bool) ([]int, error) {
	q := ""
	if permanent {
		q = "?permanent=true"
	}
	var out []int
	if err := c.call(ctx, http.MethodDelete, subjectPath("/subjects/", subject)+q, nil, &out); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.bySchema.deleteIf(func(k subjectKey) bool { return k.subject == subject })
	c.byVersion.deleteIf(func(k versionKey) bool { return k.subject == subject })
	c.mu.Unlock()
	return out, nil
}

// Compatible is the answer of CheckCompatibility.
type Compatible struct {
	// IsCompatible is the registry's verdict.
	IsCompatible bool `json:"is_compatible"`
	// Messages say why not, when the registry gives reasons (verbose).
	Messages []string `json:"messages,omitempty"`
}

// CheckCompatibility asks whether s could be registered under subject
// against version (0: the latest) under the subject's compatibility level
// (POST /compatibility/subjects/{subject}/versions/{version}?verbose=true).
// It registers nothing. A subject without versions fails with an *Error of
// Code CodeSubjectNotFound on Confluent's registry.
func (c *Client) CheckCompatibility(ctx context.Context, subject string, version int, s Schema) (Compatible, error) {
	v := "latest"
	if version > 0 {
		v = strconv.Itoa(version)
	}
	var out Compatible
	err := c.call(ctx, http.MethodPost, subjectPath("/compatibility/subjects/", subject)+"/versions/"+v+"?verbose=true", s.wire(), &out)
	return out, err
}

// SubjectConfig is a subject's configuration, or the registry's.
type SubjectConfig struct {
	// Compatibility is the compatibility level new versions are checked
	// against.
	Compatibility Compatibility
}

// GetConfig returns the configuration of subject (GET
// /config/{subject}?defaultToGlobal=true: the registry's own level when
// the subject has none), or the registry's for subject "" (GET /config).
func (c *Client) GetConfig(ctx context.Context, subject string) (SubjectConfig, error) {
	path := "/config"
	if subject != "" {
		path = subjectPath("/config/", subject) + "?defaultToGlobal=true"
	}
	// Confluent answers compatibilityLevel; some registries compatibility.
	var out struct {
		Level  Compatibility `json:"compatibilityLevel"`
		Level2 Compatibility `json:"compatibility"`
	}
	if err := c.call(ctx, http.MethodGet, path, nil, &out); err != nil {
		return SubjectConfig{}, err
	}
	if out.Level == "" {
		out.Level = out.Level2
	}
	return SubjectConfig{Compatibility: out.Level}, nil
}

// SetConfig sets the configuration of subject (PUT /config/{subject}), or
// the registry's for subject "" (PUT /config). An unknown compatibility
// level fails with an *Error of Code CodeInvalidCompatibility.
func (c *Client) SetConfig(ctx context.Context, subject string, cfg SubjectConfig) error {
	path := "/config"
	if subject != "" {
		path = subjectPath("/config/", subject)
	}
	body := struct {
		Compatibility Compatibility `json:"compatibility"`
	}{cfg.Compatibility}
	return c.call(ctx, http.MethodPut, path, body, nil)
}
