// Package safetext makes text that comes from outside the program fit for
// an error or a log line: a broker's error message, its list of SASL
// mechanisms, a host name or rack from Metadata, a key of a properties
// file. Such text may be megabytes long, hold newlines or NULs that forge
// log lines, be invalid UTF-8, or quote the client's own credentials back.
//
// Every function here bounds its output to MaxLen bytes (a cut text ends
// with "… (N bytes)", N being the whole text's length), escapes what is not
// printable (newlines, NUL and other control characters, Unicode line
// separators and format characters, invalid UTF-8) as strconv.Quote does,
// and reads only as much of its input as it shows: a text is never copied
// whole before it is cut. Scrub and QuoteList also replace secrets (see
// SecretForms) with "[redacted]" before cutting, so a secret straddling the
// cut never shows in part.
//
// The package imports nothing of samsa: kerr, the connection layer,
// metadata and the producer all use it.
package safetext

import (
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxLen bounds every text this package returns, in bytes.
const MaxLen = 256

// Redacted replaces a secret.
const Redacted = "[redacted]"

// maxItemLen bounds one item of QuoteList.
const maxItemLen = 64

// Bound returns s escaped and bounded to MaxLen bytes. Printable text that
// fits is returned as is, without allocating, so Bound of its own output
// returns it unchanged. A backslash is not escaped: an escape Bound writes
// reads the same as one the text held, but neither can end a line.
func Bound(s string) string { return Scrub(s, nil) }

// Scrub is Bound after replacing every occurrence of each secret with
// Redacted. secrets are matched as given, longest first; pass the result
// of SecretForms.
func Scrub(s string, secrets []string) string {
	if len(s) <= MaxLen && len(secrets) == 0 && printableASCII(s) {
		return s
	}
	return string(appendBounded(nil, s, MaxLen, false, secrets))
}

// Quote returns s as strconv.Quote does (the same text for a printable s of
// up to MaxLen-2 bytes), bounded to MaxLen bytes: a longer s is cut, and
// "… (N bytes)" follows the closing quote.
func Quote(s string) string {
	return string(appendBounded(nil, s, MaxLen, true, nil))
}

// QuoteList prints list as fmt's %q does (["a" "b"]), each item bounded to
// 64 bytes and cleaned of secrets as Scrub does, the whole bounded to
// MaxLen bytes: items that do not fit are counted ("… (N more)"), never
// read.
func QuoteList(list []string, secrets []string) string {
	out := make([]byte, 0, MaxLen)
	out = append(out, '[')
	for i, item := range list {
		q := appendBounded(nil, item, maxItemLen, true, secrets)
		if i > 0 {
			q = append([]byte{' '}, q...)
		}
		// Room for this item and what may follow it: "]" after the
		// last one, else the marker counting the items left.
		tail := "]"
		if left := len(list) - i - 1; left > 0 {
			tail = moreMarker(left)
		}
		if len(out)+len(q)+len(tail) > MaxLen {
			return string(append(out, moreMarker(len(list)-i)...))
		}
		out = append(out, q...)
	}
	return string(append(out, ']'))
}

// moreMarker ends a list cut with n items left.
func moreMarker(n int) string { return "… (" + strconv.Itoa(n) + " more)]" }

// SecretForms returns the forms in which secrets may show in a text:
// each secret itself, its base64 encodings (standard and URL alphabets,
// padded or not) and its hex encodings (lower and upper case); empty
// secrets are dropped, duplicates removed, longest first (so that a
// secret containing another is replaced whole).
func SecretForms(secrets ...string) []string {
	var out []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		b := []byte(s)
		out = append(out, s,
			base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
			base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
			hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b)))
	}
	slices.SortFunc(out, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(out)
}

// printableASCII reports whether s is all printable ASCII (space
// included).
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// appendBounded appends s to dst, escaped (and quoted with quote), its
// secrets replaced, in at most limit bytes: when all of it does not fit,
// it appends what fits in limit less the marker "… (N bytes)", then the
// marker. Escapes, runes and Redacted are never cut. It stops reading s
// once the output is full.
func appendBounded(dst []byte, s string, limit int, quote bool, secrets []string) []byte {
	start := len(dst)
	if quote {
		dst = append(dst, '"')
		limit-- // the closing quote
	}
	marker := "… (" + strconv.Itoa(len(s)) + " bytes)"
	soft := start + limit - len(marker) // the content's end when cut
	hard := start + limit               // the content's end when whole
	cut := -1
	var esc [10]byte
	for i := 0; i < len(s); {
		piece, adv := nextPiece(s, i, quote, secrets, &esc)
		if cut < 0 && len(dst)+len(piece) > soft {
			cut = len(dst)
		}
		if len(dst)+len(piece) > hard {
			dst = dst[:max(cut, start)]
			if quote {
				dst = append(dst, '"')
			}
			return append(dst, marker...)
		}
		dst = append(dst, piece...)
		i += adv
	}
	if quote {
		dst = append(dst, '"')
	}
	return dst
}

// nextPiece returns what s[i:] starts with, as it is printed (a secret's
// Redacted, a rune or its escape), and how many bytes of s it stands for.
func nextPiece(s string, i int, quote bool, secrets []string, esc *[10]byte) (string, int) {
	for _, sec := range secrets {
		if sec != "" && strings.HasPrefix(s[i:], sec) {
			return Redacted, len(sec)
		}
	}
	c := s[i]
	if c >= 0x20 && c < 0x7f {
		if quote && (c == '"' || c == '\\') {
			esc[0], esc[1] = '\\', c
			return string(esc[:2]), 1
		}
		return s[i : i+1], 1
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size == 1 {
		return escapeByte(esc, c), 1
	}
	if strconv.IsPrint(r) {
		return s[i : i+size], size
	}
	switch r {
	case '\a':
		return `\a`, size
	case '\b':
		return `\b`, size
	case '\f':
		return `\f`, size
	case '\n':
		return `\n`, size
	case '\r':
		return `\r`, size
	case '\t':
		return `\t`, size
	case '\v':
		return `\v`, size
	}
	switch {
	case r < ' ' || r == 0x7f:
		return escapeByte(esc, byte(r)), size
	case r < 0x10000:
		return escapeHex(esc, 'u', uint32(r), 4), size
	default:
		return escapeHex(esc, 'U', uint32(r), 8), size
	}
}

const hexDigits = "0123456789abcdef"

func escapeByte(esc *[10]byte, c byte) string {
	esc[0], esc[1], esc[2], esc[3] = '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf]
	return string(esc[:4])
}

func escapeHex(esc *[10]byte, kind byte, v uint32, digits int) string {
	esc[0], esc[1] = '\\', kind
	for j := digits - 1; j >= 0; j-- {
		esc[2+j] = hexDigits[v&0xf]
		v >>= 4
	}
	return string(esc[:2+digits])
}
