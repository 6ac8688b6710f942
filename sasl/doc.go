// Package sasl holds the SASL mechanisms a producer authenticates with:
// [Plain], [ScramSHA256], [ScramSHA512] and [OAuthBearer], with
// [ClientCredentials] as an OIDC token source for the last. Set one as
// producer.Config.SASL; every broker connection (bootstrap, metadata and
// produce, including brokers learned from metadata) then authenticates
// with it right after the ApiVersions handshake, with SaslHandshake v1 and
// SaslAuthenticate (KIP-152), and again before the broker's session
// lifetime ends (KIP-368). Use SASL over TLS (producer.Config.TLS): PLAIN
// sends the password as it is.
//
// # OIDC client credentials (KIP-768)
//
// [ClientCredentials] is the token source of Kafka's built-in OAuth login
// (Kafka 3.1+, sasl.oauthbearer.token.endpoint.url): it asks an OIDC
// provider's token endpoint (Confluent Cloud, Okta, Keycloak, Azure AD)
// for a token with the client credentials grant, caches it, and fetches
// the next one before the current one expires, by Java's refresh rule.
// Plug it into [OAuthBearer]:
//
//	tokens, err := sasl.ClientCredentials(sasl.ClientCredentialsConfig{
//		TokenURL:     "https://idp.example.com/oauth2/token",
//		ClientID:     id,
//		ClientSecret: secret,
//		Extensions:   map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-1"},
//	})
//
// producer.ConfigFromProperties builds the same from Java properties,
// for a token URL that the environment variable
// SAMSA_OAUTHBEARER_ALLOWED_URLS lists (Kafka 4.0+'s allowed.urls rule:
// properties may come from someone who must not pick where the
// credentials go). ClientCredentials itself checks no list: code that
// calls it chooses the URL and is trusted with it. A
// failed fetch is a [*TokenEndpointError], which the producer reports as
// an authentication failure; it never holds the client secret or a token.
// The package stays on the standard library for it (net/http,
// encoding/json).
//
// # Without a client secret (KIP-1139, KIP-1258)
//
// A client may prove itself with a JWT signed by its own key instead of a
// secret, as Entra ID, Okta and Keycloak accept: set
// [ClientCredentialsConfig.Assertion] for the client credentials grant
// with a client assertion (private_key_jwt), or use [JWTBearer] for the
// jwt-bearer grant. [AssertionConfig] either reads a finished assertion
// from a file or signs one (RS256 or ES256, a PEM key, encrypted PKCS#8
// included) for every request, with Java's claims (iss, sub, aud, iat,
// exp, nbf, jti) and template file. producer.ConfigFromProperties builds
// both from Kafka's sasl.oauthbearer.assertion.* keys and
// sasl.oauthbearer.jwt.retriever.class.
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
// GSSAPI (Kerberos) lives in the module
// github.com/samsa-go/samsa/sasl/kerberos, over gokrb5. A module like it
// registers a [MechanismFactory] from its package's init with
// [RegisterMechanismFactory], so that producer.ConfigFromProperties builds
// its mechanism from properties once the program imports the package
// (import _ "github.com/samsa-go/samsa/sasl/kerberos").
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
// log; [ClientCredentialsConfig] and [Token] print their secret redacted.
// Errors never include them either.
//
// This package imports nothing of samsa: internal/conn depends on it.
package sasl
