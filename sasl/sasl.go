package sasl

import (
	"context"
	"fmt"
)

// Mechanism is a SASL mechanism. Implementations must be safe for
// concurrent use: every broker connection starts its own exchange.
//
// The session's lifetime is the broker's to say: SaslAuthenticate v1+
// returns session_lifetime_ms (connections.max.reauth.ms, capped by an
// OAuth token's expiry), and the connection re-authenticates, calling Start
// again, before it ends (KIP-368). A broker that returns none never expires
// the session, so a mechanism need not track lifetimes itself.
type Mechanism interface {
	// Name is the mechanism's name as Kafka knows it ("PLAIN",
	// "SCRAM-SHA-256", "OAUTHBEARER", ...), sent in SaslHandshake.
	Name() string

	// Start begins one exchange with the broker at addr (host:port) and
	// returns its session and the client's first message. ctx bounds
	// work such as fetching a token; the connection's dial timeout
	// bounds it too. Start is called again for every re-authentication
	// (KIP-368), so a mechanism with expiring credentials fetches fresh
	// ones there.
	Start(ctx context.Context, addr string) (Session, []byte, error)
}

// Session is one authentication exchange.
type Session interface {
	// Step takes the server's answer to the client's last message. It
	// returns done once the client has nothing left to verify, and the
	// client's next message, if any. A message returned with done true is
	// still sent (its answer tells success or failure); with done true
	// and no message the exchange ends. An error ends the exchange as an
	// authentication failure.
	Step(challenge []byte) (done bool, response []byte, err error)
}

// redacted is how a secret prints.
const redacted = "[redacted]"

// formatMechanism writes the redacted form of a mechanism for every verb.
func formatMechanism(f fmt.State, verb rune, s string) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprintf(f, "sasl.Mechanism(%q)", s)
		return
	}
	fmt.Fprint(f, s)
}
