package sasl

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Plain returns the PLAIN mechanism (RFC 4616) for user and pass, with no
// authorization identity. PLAIN sends the password in the clear: use it
// over TLS. Empty user or pass, or either holding a NUL byte, makes every
// exchange fail at Start.
func Plain(user, pass string) Mechanism {
	return &plain{user: user, pass: pass}
}

type plain struct{ user, pass string }

func (*plain) Name() string { return "PLAIN" }

func (m *plain) Start(context.Context, string) (Session, []byte, error) {
	if m.user == "" || m.pass == "" {
		return nil, nil, errors.New("sasl: PLAIN needs a user name and a password")
	}
	if strings.ContainsRune(m.user, 0) || strings.ContainsRune(m.pass, 0) {
		return nil, nil, errors.New("sasl: PLAIN user name or password holds a NUL byte")
	}
	return plainSession{}, []byte(m.message()), nil
}

// message is PLAIN's only message: authzid (empty), NUL, user, NUL,
// password.
func (m *plain) message() string { return "\x00" + m.user + "\x00" + m.pass }

// Secrets returns the password and the message that carries it
// (SecretHolder).
func (m *plain) Secrets() []string { return []string{m.pass, m.message()} }

// plainSession: the broker's answer (empty on success; some brokers send
// data) ends the exchange.
type plainSession struct{}

func (plainSession) Step([]byte) (bool, []byte, error) { return true, nil, nil }

func (m *plain) String() string {
	return fmt.Sprintf("PLAIN(user=%q, password=%s)", m.user, redacted)
}

func (m *plain) GoString() string { return fmt.Sprintf("sasl.Mechanism(%q)", m.String()) }

func (m *plain) Format(f fmt.State, verb rune) { formatMechanism(f, verb, m.String()) }
