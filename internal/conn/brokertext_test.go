package conn

import (
	"errors"
	"strings"
	"testing"

	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/sasl"
)

// TestCheckHost: a host a broker advertises is refused when it cannot be
// one, and the refusal quotes it bounded.
func TestCheckHost(t *testing.T) {
	cases := []struct {
		host string
		ok   bool
	}{
		{"broker-1.example.com", true},
		{"127.0.0.1", true},
		{"::1", true},
		{"fe80::1%eth0", true},
		{"bröker.example", true},
		{"", false},
		{strings.Repeat("h", 256), false},
		{"a b", false},
		{"evil\nERROR forged", false},
		{"nul\x00", false},
		{"bad\xff", false},
		{"rtl\u202eoverride", false},
	}
	for _, tc := range cases {
		err := CheckHost(tc.host)
		if (err == nil) != tc.ok {
			t.Errorf("CheckHost(%q) = %v, want ok %v", tc.host, err, tc.ok)
		}
		if err != nil && (len(err.Error()) > 512 || strings.Contains(err.Error(), "\n")) {
			t.Errorf("CheckHost(%q) = %q: not bounded or escaped", tc.host, err)
		}
	}
	if err := CheckHost(strings.Repeat("h", 1<<20)); len(err.Error()) > 512 {
		t.Fatalf("a 1 MiB host gave a %d-byte error", len(err.Error()))
	}
}

// TestBrokerErrorIsCleaned: a broker's ErrorMessage reaches the error
// bounded, escaped and without the mechanism's secrets; the code still
// matches.
func TestBrokerErrorIsCleaned(t *testing.T) {
	mech := sasl.Plain("alice", "alice-secret")
	msg := "Authentication failed for \x00alice\x00alice-secret\nERROR forged" + strings.Repeat("x", 1<<20)
	cases := []struct {
		name string
		mech sasl.Mechanism
		code int16
		msg  *string
		want string
	}{
		{"no error", mech, 0, &msg, ""},
		{"no message", mech, 58, nil, "SASL_AUTHENTICATION_FAILED: SASL authentication failed"},
		{"empty message", nil, 58, new(string), "SASL_AUTHENTICATION_FAILED: SASL authentication failed"},
		{"hostile message", mech, 58, &msg, `SASL_AUTHENTICATION_FAILED: Authentication failed for [redacted]\nERROR forged` + strings.Repeat("x", 256-len(`Authentication failed for [redacted]\nERROR forged`)-len("… (1048634 bytes)")) + "… (1048634 bytes)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := BrokerError(tc.mech, tc.code, tc.msg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("BrokerError = %v, want nil", err)
				}
				return
			}
			if err.Error() != tc.want {
				t.Fatalf("BrokerError =\n%q, want\n%q", err, tc.want)
			}
			if !errors.Is(err, kerr.SASLAuthenticationFailed) {
				t.Fatalf("%v does not match its code", err)
			}
		})
	}
}

// TestStepErrorsAreCleaned: a mechanism's Step error may quote the broker
// (the SCRAM library prints the server's error attribute): it is cleaned
// too, and keeps its chain only when cleaning changed nothing.
func TestStepErrorsAreCleaned(t *testing.T) {
	mech := sasl.ScramSHA256("bob", "bob-secret")
	plain := errors.New("server validation failed")
	if got := cleanErr(mech, plain); got != plain {
		t.Fatalf("a clean error was replaced: %v", got)
	}
	hostile := errors.New("sasl: SCRAM-SHA-256: server error: bob-secret\n" + strings.Repeat("e", 1<<20))
	got := cleanErr(mech, hostile)
	if s := got.Error(); len(s) > 256 || strings.Contains(s, "bob-secret") || strings.Contains(s, "\n") || errors.Unwrap(got) != nil {
		t.Fatalf("cleanErr = %q (unwraps to %v)", s, errors.Unwrap(got))
	}
}
