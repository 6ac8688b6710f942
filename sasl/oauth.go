package sasl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Token is an OAuth 2 bearer token for [OAuthBearer].
type Token struct {
	// Value is the token itself (for example a JWT). It never prints.
	Value string
	// Extensions are SASL extensions (KIP-342) sent with the token, for
	// example Confluent Cloud's logicalCluster and identityPoolId. Keys are
	// letters only and "auth" is reserved (RFC 7628); values are printable
	// ASCII, spaces and tabs.
	Extensions map[string]string
}

// String prints the extensions' keys and a redacted value.
func (t Token) String() string {
	return fmt.Sprintf("sasl.Token{Value: %s, Extensions: %v}", redacted, slices.Sorted(maps.Keys(t.Extensions)))
}

// GoString is String: %#v does not print the token either.
func (t Token) GoString() string { return t.String() }

// Format prints String for every verb.
func (t Token) Format(f fmt.State, verb rune) { fmt.Fprint(f, t.String()) }

// OAuthBearer returns the OAUTHBEARER mechanism (RFC 7628, KIP-255).
// token is called for every exchange, that is for every new connection and
// every re-authentication (KIP-368), with the dial's context: it should
// return a cached token while it stays valid and fetch a new one before it
// expires. An error from token, or an empty token, fails the exchange; the
// error is reported as an authentication failure, so it must not hold the
// token or a client secret.
//
// The broker's session lasts no longer than the token (Kafka caps
// session_lifetime_ms by the token's expiry), so the connection
// re-authenticates, calling token again, before the token expires.
func OAuthBearer(token func(context.Context) (Token, error)) Mechanism {
	return &oauth{token: token}
}

type oauth struct {
	token func(context.Context) (Token, error)

	mu   sync.Mutex
	sent [2]string // the last two tokens sent, newest first (Secrets)
}

func (*oauth) Name() string { return "OAUTHBEARER" }

func (m *oauth) Start(ctx context.Context, _ string) (Session, []byte, error) {
	if m.token == nil {
		return nil, nil, errors.New("sasl: OAUTHBEARER: no token callback")
	}
	t, err := m.token(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("sasl: OAUTHBEARER: token callback: %w", err)
	}
	msg, err := oauthMessage(t)
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	if m.sent[0] != t.Value {
		m.sent = [2]string{t.Value, m.sent[0]}
	}
	m.mu.Unlock()
	return &oauthSession{}, msg, nil
}

// Secrets returns the last two tokens sent (SecretHolder): the current one
// and the one before it, which connections not yet re-authenticated still
// use.
func (m *oauth) Secrets() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, t := range m.sent {
		if t != "" {
			out = append(out, t)
		}
	}
	return out
}

// oauthMessage is the client's initial response (RFC 7628 section 3.1):
// the GS2 header "n,," then kvsep-separated auth=Bearer <token> and the
// extensions, closed by two kvseps.
func oauthMessage(t Token) ([]byte, error) {
	if t.Value == "" {
		return nil, errors.New("sasl: OAUTHBEARER: the token callback returned an empty token")
	}
	if !printableToken(t.Value) {
		return nil, errors.New("sasl: OAUTHBEARER: the token holds a character outside printable ASCII")
	}
	if err := validExtensions(t.Extensions); err != nil {
		return nil, err
	}
	keys := slices.Sorted(maps.Keys(t.Extensions))
	msg := []byte("n,,\x01auth=Bearer ")
	msg = append(msg, t.Value...)
	for _, k := range keys {
		msg = append(msg, 1)
		msg = append(msg, k...)
		msg = append(msg, '=')
		msg = append(msg, t.Extensions[k]...)
	}
	return append(msg, 1, 1), nil
}

// validExtensions checks SASL extensions (RFC 7628 section 3.1): keys of
// letters other than "auth", values of printable ASCII, spaces and tabs.
// Its errors name the key, never a value.
func validExtensions(ext map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(ext)) {
		if k == "" || k == "auth" {
			return fmt.Errorf("sasl: OAUTHBEARER: invalid extension key %q", k)
		}
		for _, c := range []byte(k) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return fmt.Errorf("sasl: OAUTHBEARER: invalid extension key %q", k)
			}
		}
		for _, c := range []byte(ext[k]) {
			if (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' {
				return fmt.Errorf("sasl: OAUTHBEARER: extension %q has an invalid value", k)
			}
		}
	}
	return nil
}

type oauthSession struct{}

// Step: an empty answer is success. A non-empty one is the server's JSON
// error (RFC 7628 section 3.2.2), to which the client must answer with a
// single kvsep; the broker then fails the exchange.
func (*oauthSession) Step(challenge []byte) (bool, []byte, error) {
	if len(challenge) == 0 {
		return true, nil, nil
	}
	return true, []byte{1}, nil
}

func (*oauth) String() string { return "OAUTHBEARER(token=" + redacted + ")" }

func (m *oauth) GoString() string { return fmt.Sprintf("sasl.Mechanism(%q)", m.String()) }

func (m *oauth) Format(f fmt.State, verb rune) { formatMechanism(f, verb, m.String()) }
