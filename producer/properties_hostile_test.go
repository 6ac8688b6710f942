package producer_test

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
)

// Properties are untrusted input: a file from elsewhere, keys from a
// template. These tests hold the parser and ConfigFromProperties to linear
// time, errors with line numbers, and keys quoted and bounded in errors.
// The time bounds are generous (a loaded machine under -race); before, the
// 1 MiB key took about 10 s and 200 000 keys 23 to 39 s.
const untrustedInputBudget = 5 * time.Second

// TestParsePropertiesLongLineNamesItsLine: a line (or a line continued over
// several) longer than the parser takes fails at once with its line number
// and the limit, not with bufio's "token too long".
func TestParsePropertiesLongLineNamesItsLine(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"20 MiB line", "a=1\n# comment\nhuge=" + strings.Repeat("v", 20<<20) + "\nb=2\n", "line 3: "},
		{"20 MiB line without a line end", "a=1\n\nhuge=" + strings.Repeat("v", 20<<20), "line 3: "},
		{"20 MiB of CR-ended continuations", "a=1\nk=\\\r" + strings.Repeat(strings.Repeat("w", 1000)+"\\\r", 20<<10), "line 2: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := producer.ParseProperties(strings.NewReader(tc.in))
			took := time.Since(start)
			t.Logf("took %v", took)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "1 MiB")
			assert.NotContains(t, err.Error(), "token too long")
			assert.Less(t, len(err.Error()), 512)
			assert.Less(t, took, untrustedInputBudget)
		})
	}
	// Just under the limit still parses.
	props, err := producer.ParseProperties(strings.NewReader("k=" + strings.Repeat("v", 1<<20-3) + "\nj=1"))
	require.NoError(t, err)
	assert.Len(t, props["k"], 1<<20-3)
}

// TestUnknownPropertiesInLinearTime: a megabyte-long unknown key, or
// hundreds of thousands of them, are reported quickly (suggestions only
// for keys that can be near a known one, and a bounded list), in an error
// of a few hundred bytes that quotes them; a megabyte-long bad value is
// quoted bounded too.
func TestUnknownPropertiesInLinearTime(t *testing.T) {
	many := map[string]string{}
	for i := range 200_000 {
		many[fmt.Sprintf("unknown.key.%06d", i)] = "1"
	}
	typos := map[string]string{}
	for i := range 200_000 {
		typos[fmt.Sprintf("linger.m%d", i)] = "1" // each near linger.ms
	}
	cases := []struct {
		name  string
		props map[string]string
		want  []string
	}{
		{"1 MiB unknown key", map[string]string{strings.Repeat("k", 1<<20): "1"}, []string{`unknown properties: "kkkk`, `… (1048576 bytes)`}},
		{"200 000 unknown keys", many, []string{`unknown properties: "unknown.key.000000", "unknown.key.000001"`, "and 199990 more"}},
		{"200 000 typos", typos, []string{`"linger.m0" (did you mean linger.ms?)`, "and 199990 more"}},
		{"1 MiB bad value", map[string]string{"linger.ms": strings.Repeat("v", 1<<20)}, []string{`linger.ms: "vvvv`, `"… (1048576 bytes) is not a number`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := producer.ConfigFromProperties(tc.props)
			took := time.Since(start)
			t.Logf("took %v, error of %d bytes", took, len(err.Error()))
			require.ErrorIs(t, err, producer.ErrInvalidConfig)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Less(t, len(err.Error()), 4096)
			assert.Less(t, took, untrustedInputBudget)
		})
	}
}

// TestPropertyKeysQuotedInErrors: a key holding a newline or a NUL is
// quoted in the error (it cannot forge a log line that prints it), in
// ConfigFromProperties and in ParseProperties.
func TestPropertyKeysQuotedInErrors(t *testing.T) {
	for _, key := range []string{"evil\nlevel=ERROR msg=forged", "nul\x00key", "bad\xffutf8", "bidi\u202e"} {
		_, err := producer.ConfigFromProperties(map[string]string{key: "1"})
		require.ErrorIs(t, err, producer.ErrInvalidConfig)
		assert.Contains(t, err.Error(), "unknown properties: "+strconv.Quote(key))
		assert.NotContains(t, err.Error(), key)
	}
	// A bad escape in a value names the key, quoted.
	_, err := producer.ParseProperties(strings.NewReader("ok=1\nevil\\nlevel\\u0000=\\u12"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `line 2: value of "evil\nlevel\x00"`)
	assert.NotContains(t, err.Error(), "\n")
}

// FuzzParseProperties: any input gives properties or an error naming a
// line; never a panic. What parses is written back in the format and read
// again to the same properties.
func FuzzParseProperties(f *testing.F) {
	f.Add("bootstrap.servers=localhost:9092\nlinger.ms = 5\n")
	f.Add("# comment\n! also\n\nk: v\nj v\n")
	f.Add("k=one, \\\n    two\r\nnext=x\rlast")
	f.Add(`k=tab\there\u00e9 \ud83d\ude00 \=\:`)
	f.Add("\uFEFFa=1\r\n")
	f.Add("k=\\u12")
	f.Add("k=\\")
	f.Fuzz(func(t *testing.T, in string) {
		props, err := producer.ParseProperties(strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("error without a line number: %v", err)
			}
			if strings.Contains(err.Error(), "\n") || len(err.Error()) > 1024 {
				t.Fatalf("error not quoted or bounded: %q", err)
			}
			return
		}
		var b strings.Builder
		for k, v := range props {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return // raw bytes that no escape spells
			}
			b.WriteString(escapeProperty(k, true) + "=" + escapeProperty(v, false) + "\n")
		}
		again, err := producer.ParseProperties(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("written back %q: %v", b.String(), err)
		}
		if !maps.Equal(again, props) {
			t.Fatalf("read %q as %q, written back and read as %q", in, props, again)
		}
	})
}

// escapeProperty writes s as java.util.Properties.store does: \uXXXX for
// what is not printable ASCII, backslashes before separators and, in keys,
// spaces.
func escapeProperty(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\' || r == '=' || r == ':' || r == '#' || r == '!':
			b.WriteString(`\` + string(r))
		case r == ' ' && (key || i == 0):
			b.WriteString(`\ `)
		case r < 0x20 || r > 0x7e:
			for _, u := range utf16(r) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func utf16(r rune) []uint16 {
	if r < 0x10000 {
		return []uint16{uint16(r)}
	}
	r -= 0x10000
	return []uint16{uint16(0xD800 + r>>10), uint16(0xDC00 + r&0x3FF)}
}
