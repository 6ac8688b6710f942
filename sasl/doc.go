// Package sasl holds the SASL mechanisms a producer authenticates with:
// [Plain], [ScramSHA256], [ScramSHA512] and [OAuthBearer]. Set one as
// producer.Config.SASL; every broker connection (bootstrap, metadata and
// produce, including brokers learned from metadata) then authenticates
// with it right after the ApiVersions handshake, with SaslHandshake v1 and
// SaslAuthenticate (KIP-152), and again before the broker's session
// lifetime ends (KIP-368). Use SASL over TLS (producer.Config.TLS): PLAIN
// sends the password as it is.
//
// # Your own mechanism
//
// [Mechanism] is small so that other mechanisms can live elsewhere (AWS MSK
// IAM lives in the module github.com/samsa-go/samsa/sasl/awsmskiam, so the
// core never downloads the AWS SDK). Start opens an exchange for one broker
// and returns its first message; [Session.Step] takes each server message
// until the exchange is done. The connection reports a failure of either,
// or the broker's SASL_AUTHENTICATION_FAILED, as an authentication error
// that is not retried.
//
// # SCRAM
//
// SCRAM (RFC 5802, RFC 7677) is done by github.com/xdg-go/scram, the
// implementation the Go MongoDB driver and franz-go also use: it is small,
// maintained, has no dependency outside stringprep (SASLprep of user names
// and passwords, RFC 4013), and ships the server side the test broker
// needs. The standard library has the primitives (HMAC, PBKDF2) but no
// SCRAM, and a hand-written one is exactly what this package must not be.
//
// # Secrets
//
// The values these constructors return never print their password or
// token: String, GoString and Format show the mechanism and the user name
// only, so %v, %+v and %#v of a producer.Config holding one are safe to
// log. Errors never include them either.
//
// This package imports nothing of samsa: internal/conn depends on it.
package sasl
