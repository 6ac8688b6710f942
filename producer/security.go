package producer

import (
	"github.com/samsa-go/samsa/internal/conn"
)

// ErrAuthentication is wrapped by the errors of records that could not be
// sent because a broker and the producer do not trust each other: the
// broker rejected the SASL credentials (SASL_AUTHENTICATION_FAILED), does
// not enable the SASL mechanism, or a mechanism failed on the client; or
// the TLS handshake failed on the broker's certificate (unknown CA, wrong
// host name, expired) or on a TLS alert from the broker; or the listener
// does not speak the client's protocol, as Java reports a failed TLS
// handshake (SslAuthenticationException): a plaintext client on a TLS
// listener ("the listener speaks TLS ... set security.protocol=SSL or
// SASL_SSL"), a TLS client on a plaintext one ("the listener does not speak
// TLS ... set security.protocol=PLAINTEXT or SASL_PLAINTEXT"). The error
// names the broker and the cause, and never a password or token.
//
// These failures are not retried: records waiting for that broker, and
// records waiting for metadata while no broker can be reached, fail within
// a few seconds instead of at DeliveryTimeout, and Send fails fast with it
// while the condition lasts (the producer keeps trying to connect in the
// background, with backoff, so that fixed credentials or certificates are
// picked up). A broker that closes the connection during the handshake is
// not an authentication failure: it is retried like any broken connection.
var ErrAuthentication = conn.ErrAuthentication
