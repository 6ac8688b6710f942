package schemaregistry

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Error is an answer of the registry other than success: its HTTP status
// and, when the body is Confluent's error JSON ({"error_code": 40401,
// "message": "Subject 'x' not found."}), its error code and message. Every
// Client call returns one, wrapped, for such an answer; match it with
// errors.As:
//
//	var se *schemaregistry.Error
//	if errors.As(err, &se) && se.Code == schemaregistry.CodeIncompatibleSchema { ... }
//
// The message is the registry's, with any credential of the Client
// replaced by "[redacted]" (a hostile or buggy server could echo one).
type Error struct {
	// Method and Path are the request's ("POST", "/subjects/t-value/versions"),
	// without the base URL.
	Method, Path string
	// StatusCode is the HTTP status (404, 409, 422, 500...).
	StatusCode int
	// Code is the registry's error_code (40401, 409, 42201...), 0 when the
	// body did not hold one.
	Code int
	// Message is the registry's message, or the start of a body that is
	// not Confluent's error JSON.
	Message string
}

// Error codes of Confluent's API (Apicurio's ccompat API returns the same
// for these cases).
const (
	CodeSubjectNotFound       = 40401
	CodeVersionNotFound       = 40402
	CodeSchemaNotFound        = 40403
	CodeIncompatibleSchema    = 409
	CodeInvalidSchema         = 42201
	CodeInvalidVersion        = 42202
	CodeInvalidCompatibility  = 42203
	CodeBackendStoreError     = 50001
	CodeOperationTimeout      = 50002
	CodeForwardingError       = 50003
	CodeUnauthorized          = 40101
	CodeSubjectSoftDeleted    = 40404
	CodeSubjectNotSoftDeleted = 40405
)

// maxMessage bounds the registry message an Error prints.
const maxMessage = 1024

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schemaregistry: %s %s: HTTP %d", e.Method, e.Path, e.StatusCode)
	if e.Code != 0 {
		fmt.Fprintf(&b, ", error code %d", e.Code)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(truncate(e.Message, maxMessage))
	}
	return b.String()
}

// NotFound reports whether the registry said the subject, version or
// schema does not exist (HTTP 404).
func (e *Error) NotFound() bool { return e.StatusCode == 404 }

// truncate cuts s to at most n bytes, at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// IsNotFound reports whether err holds an *Error for a missing subject,
// version or schema.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.NotFound()
}
