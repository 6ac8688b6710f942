package sasl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/xdg-go/scram"
)

// ScramSHA256 returns the SCRAM-SHA-256 mechanism (RFC 7677) for user and
// pass. The password never goes on the wire, and the client verifies the
// server's signature too. An empty user or pass, or one that SASLprep
// rejects, makes every exchange fail at Start.
func ScramSHA256(user, pass string) Mechanism {
	return &scramMech{name: "SCRAM-SHA-256", hash: scram.SHA256, user: user, pass: pass}
}

// ScramSHA512 returns the SCRAM-SHA-512 mechanism for user and pass, as
// [ScramSHA256] does with SHA-512.
func ScramSHA512(user, pass string) Mechanism {
	return &scramMech{name: "SCRAM-SHA-512", hash: scram.SHA512, user: user, pass: pass}
}

type scramMech struct {
	name       string
	hash       scram.HashGeneratorFcn
	user, pass string
}

func (m *scramMech) Name() string { return m.name }

func (m *scramMech) Start(context.Context, string) (Session, []byte, error) {
	if m.user == "" || m.pass == "" {
		return nil, nil, fmt.Errorf("sasl: %s needs a user name and a password", m.name)
	}
	client, err := m.hash.NewClient(m.user, m.pass, "")
	if err != nil {
		// The library's error names the failing SASLprep step, never
		// the password.
		return nil, nil, fmt.Errorf("sasl: %s: invalid user name or password: %w", m.name, err)
	}
	conv := client.NewConversation()
	first, err := conv.Step("")
	if err != nil {
		return nil, nil, fmt.Errorf("sasl: %s: %w", m.name, err)
	}
	return &scramSession{name: m.name, conv: conv}, []byte(first), nil
}

type scramSession struct {
	name     string
	conv     *scram.ClientConversation
	sawFirst bool // the server-first message was checked
}

// maxScramIterations is the most PBKDF2 iterations a server may ask for:
// Kafka's own bound (ScramMechanism's maxIterations). The library checks
// only the minimum (4096), and a hostile broker asking for 2^31-1 would keep
// a dial (which Close waits for) computing for minutes.
const maxScramIterations = 16384

// checkIterations refuses a server-first message (RFC 5802 section 5.1:
// comma-separated attributes) whose iteration count is over
// maxScramIterations; the library parses and checks the rest.
func checkIterations(serverFirst []byte) error {
	for _, attr := range strings.Split(string(serverFirst), ",") {
		v, ok := strings.CutPrefix(attr, "i=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n > maxScramIterations {
			return fmt.Errorf("the server asks for %q PBKDF2 iterations, more than %d", v, maxScramIterations)
		}
	}
	return nil
}

// Step answers the server-first message with the client-final one, then
// verifies the server-final message.
func (s *scramSession) Step(challenge []byte) (bool, []byte, error) {
	if s.conv.Done() {
		return true, nil, nil
	}
	if !s.sawFirst {
		s.sawFirst = true
		if err := checkIterations(challenge); err != nil {
			return false, nil, fmt.Errorf("sasl: %s: %w", s.name, err)
		}
	}
	out, err := s.conv.Step(string(challenge))
	if err != nil {
		return false, nil, fmt.Errorf("sasl: %s: %w", s.name, err)
	}
	if s.conv.Done() {
		if !s.conv.Valid() {
			return false, nil, errors.New("sasl: " + s.name + ": the server's signature does not verify")
		}
		return true, nil, nil
	}
	return false, []byte(out), nil
}

// Secrets returns the password (SecretHolder): it never goes on the
// wire, but a broker may quote it from elsewhere all the same.
func (m *scramMech) Secrets() []string { return []string{m.pass} }

func (m *scramMech) String() string {
	return fmt.Sprintf("%s(user=%q, password=%s)", m.name, m.user, redacted)
}

func (m *scramMech) GoString() string { return fmt.Sprintf("sasl.Mechanism(%q)", m.String()) }

func (m *scramMech) Format(f fmt.State, verb rune) { formatMechanism(f, verb, m.String()) }
