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

// SecretHolder is implemented by a Mechanism that names its secrets: the
// strings that must never appear in an error or a log line. samsa's
// connections, metadata client and producer replace each of them, and its
// base64 and hex encodings, with "[redacted]" in every text a broker sends
// (an error message, a list of mechanisms, a rack) before that text reaches
// an error or a log line, so that a broker (or a proxy) that quotes the
// client's credentials back does not print them. Plain, ScramSHA256,
// ScramSHA512 and OAuthBearer implement it; a custom Mechanism may, and a
// Mechanism that wraps one of these should pass its Secrets on.
type SecretHolder interface {
	// Secrets returns the secrets the mechanism sends or derives its
	// messages from: a password, the PLAIN message that carries it, the
	// OAUTHBEARER tokens sent lately. It is called from any goroutine,
	// only when broker text is printed, and must be safe for concurrent
	// use.
	Secrets() []string
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
