package producer

import (
	"context"
	"fmt"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/lifetime"
	"github.com/samsa-go/samsa/sasl"
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

// ownedMechanism is the producer's view of Config.SASL: every exchange's
// context carries the producer's lifetime.Group, so that a goroutine the
// mechanism starts on the producer's behalf (sasl.ClientCredentials'
// background token refresh) is the producer's: Close ends it and waits for
// it. It prints as the mechanism does (redacted).
type ownedMechanism struct {
	sasl.Mechanism
	owner *lifetime.Group
}

// ownMechanism returns m with exchanges owned by g; nil for nil.
func ownMechanism(m sasl.Mechanism, g *lifetime.Group) sasl.Mechanism {
	if m == nil {
		return nil
	}
	return ownedMechanism{m, g}
}

func (m ownedMechanism) Start(ctx context.Context, addr string) (sasl.Session, []byte, error) {
	return m.Mechanism.Start(lifetime.With(ctx, m.owner), addr)
}

// Secrets passes on the wrapped mechanism's secrets (sasl.SecretHolder), so
// that broker text is scrubbed of them.
func (m ownedMechanism) Secrets() []string {
	if h, ok := m.Mechanism.(sasl.SecretHolder); ok {
		return h.Secrets()
	}
	return nil
}

func (m ownedMechanism) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), m.Mechanism)
}
