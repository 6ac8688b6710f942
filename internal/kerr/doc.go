// Package kerr is the table of Kafka protocol error codes: code, name and
// whether the protocol documentation marks the code retriable.
//
// # Use
//
// Decode a response's ErrorCode with ForCode, which returns nil for 0 and a
// shared *Error otherwise (no allocation for known codes). Compare with
// errors.Is against the exported variables; comparison is by code, so an
// error made by WithMessage (carrying a broker's ErrorMessage) still matches:
//
//	err := kerr.ForCode(resp.ErrorCode)
//	if errors.Is(err, kerr.NotLeaderOrFollower) { ... refresh metadata ... }
//	if kerr.IsRetriable(err) { ... retry ... }
//
// # Layering
//
// kerr is internal and imported by internal/conn, metadata and producer. The
// producer package re-exports what users need to name.
package kerr
