package safetext

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBound(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	cases := []struct {
		name, in, want string
	}{
		{"short text unchanged", "Invalid username or password", "Invalid username or password"},
		{"empty", "", ""},
		{"newline escaped", "bad\nlevel=ERROR msg=forged", `bad\nlevel=ERROR msg=forged`},
		{"NUL and CR escaped", "a\x00b\rc", `a\x00b\rc`},
		{"invalid UTF-8 escaped", "a\xffb", `a\xffb`},
		{"line separator escaped", "a\u2028b", `a\u2028b`},
		{"printable Unicode kept", "héllo ✓", "héllo ✓"},
		{"backslash kept", `C:\path`, `C:\path`},
		{"long text cut", long, strings.Repeat("x", MaxLen-len("… (1048576 bytes)")) + "… (1048576 bytes)"},
		{"exactly MaxLen kept", strings.Repeat("y", MaxLen), strings.Repeat("y", MaxLen)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Bound(tc.in)
			if got != tc.want {
				t.Fatalf("Bound = %q, want %q", got, tc.want)
			}
			if len(got) > MaxLen {
				t.Fatalf("Bound returned %d bytes, over %d", len(got), MaxLen)
			}
			if again := Bound(got); again != got {
				t.Fatalf("Bound is not idempotent: %q then %q", got, again)
			}
		})
	}
}

// TestBoundNeverCutsAnEscapeOrARune: the cut falls between pieces, so the
// output stays valid UTF-8 with whole escapes.
func TestBoundNeverCutsAnEscapeOrARune(t *testing.T) {
	for _, unit := range []string{"\n", "é", "\x00", "\u2028", "ab\xff", "✓"} {
		got := Bound(strings.Repeat(unit, 1000))
		if !utf8.ValidString(got) || len(got) > MaxLen || strings.ContainsAny(got, "\n\x00\u2028") {
			t.Fatalf("Bound(%q × 1000) = %q", unit, got)
		}
		body, _, _ := strings.Cut(got, "… (")
		if strings.HasSuffix(body, `\`) || strings.HasSuffix(body, `\x`) || strings.HasSuffix(body, `\u2`) {
			t.Fatalf("an escape was cut: %q", got)
		}
	}
}

func TestQuote(t *testing.T) {
	for _, in := range []string{"lingr.ms", "evil\nlevel=ERROR", "nul\x00", `q"b\s`, "\xff\xfe", "tab\t", "\u0085", "\U0001F600", "\U000E0001"} {
		if got, want := Quote(in), strconv.Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	got := Quote(strings.Repeat("k", 1<<20))
	if len(got) > MaxLen || !strings.HasPrefix(got, `"kkk`) || !strings.HasSuffix(got, `"… (1048576 bytes)`) {
		t.Fatalf("Quote of 1 MiB = %q (%d bytes)", got, len(got))
	}
	if _, err := strconv.Unquote(got[:strings.LastIndex(got, `"`)+1]); err != nil {
		t.Fatalf("the quoted part of %q does not unquote: %v", got, err)
	}
}

func TestScrub(t *testing.T) {
	pass := "alice-secret"
	payload := "\x00alice\x00" + pass
	forms := SecretForms(pass, payload, "")
	cases := []struct {
		name, in string
	}{
		{"raw password", "Authentication failed for password " + pass},
		{"PLAIN payload", "Authentication failed: bad message " + payload},
		{"base64 payload", "got " + base64.StdEncoding.EncodeToString([]byte(payload))},
		{"base64 password, URL alphabet", "got " + base64.RawURLEncoding.EncodeToString([]byte(pass))},
		{"hex password", "got " + strings.ToUpper("616c6963652d736563726574")},
		{"password at the cut", strings.Repeat("x", MaxLen-40) + pass + strings.Repeat("y", 1<<20)},
		{"password after many redactions", strings.Repeat(pass, 1000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Scrub(tc.in, forms)
			if len(got) > MaxLen {
				t.Fatalf("%d bytes", len(got))
			}
			for _, frag := range []string{"secret", "c2VjcmV0", "736563726574", "736563726574"} {
				if strings.Contains(strings.ToLower(got), strings.ToLower(frag)) {
					t.Fatalf("Scrub left %q in %q", frag, got)
				}
			}
			if !strings.Contains(got, Redacted) {
				t.Fatalf("no %s in %q", Redacted, got)
			}
		})
	}
}

func TestQuoteList(t *testing.T) {
	if got, want := QuoteList([]string{"PLAIN", "SCRAM-SHA-256"}, nil), `["PLAIN" "SCRAM-SHA-256"]`; got != want {
		t.Fatalf("QuoteList = %s, want %s", got, want)
	}
	if got := QuoteList(nil, nil); got != "[]" {
		t.Fatalf("QuoteList(nil) = %s", got)
	}
	many := make([]string, 1<<20)
	for i := range many {
		many[i] = "MECH-" + strconv.Itoa(i)
	}
	huge := []string{strings.Repeat("M", 24<<20), "PLAIN\nlevel=ERROR", "tok"}
	for _, list := range [][]string{many, huge} {
		got := QuoteList(list, SecretForms("tok"))
		if len(got) > MaxLen || strings.Contains(got, "\n") || strings.Contains(got, `"tok"`) || !strings.HasSuffix(got, "]") {
			t.Fatalf("QuoteList = %q (%d bytes)", got, len(got))
		}
	}
}

// FuzzBound: whatever the text and secret, the output is bounded, valid
// UTF-8 without a line break or NUL, holds no secret of 4 bytes or more,
// and Bound leaves it unchanged.
func FuzzBound(f *testing.F) {
	f.Add("hello\nworld", "secret")
	f.Add("\xff\x00\u2028", "")
	f.Add(strings.Repeat("ab", 300), "ba")
	f.Fuzz(func(t *testing.T, s, secret string) {
		got := Scrub(s, SecretForms(secret))
		if len(got) > MaxLen || !utf8.ValidString(got) || strings.ContainsAny(got, "\n\r\x00\u2028\u2029") {
			t.Fatalf("Scrub(%q) = %q", s, got)
		}
		if Bound(got) != got {
			t.Fatalf("Bound(%q) changed it", got)
		}
		// Escapes and the marker print letters and digits of their own:
		// check printable texts, without the marker.
		if content, _, _ := strings.Cut(got, "… ("); len(secret) >= 4 && alnum(secret) && printableASCII(s) &&
			!strings.Contains(Redacted, secret) && strings.Contains(content, secret) {
			t.Fatalf("Scrub(%q, %q) = %q shows the secret", s, secret, got)
		}
		q := Quote(s)
		if len(q) > MaxLen || !utf8.ValidString(q) {
			t.Fatalf("Quote(%q) = %q", s, q)
		}
	})
}

func alnum(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
