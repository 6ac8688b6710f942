package producer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/samsa-go/samsa/internal/safetext"
)

// LoadProperties reads a Java .properties file (a producer.properties or a
// client.properties) for ConfigFromProperties:
//
//	props, err := producer.LoadProperties("client.properties")
//	if err != nil { ... }
//	cfg, err := producer.ConfigFromProperties(props)
//
// It reads the format of java.util.Properties: one key and value per line,
// as key=value, key: value or key value; lines starting with # or ! are
// comments; a line ending in an odd number of backslashes continues on the
// next one (whose leading spaces are dropped); escapes \t, \n, \r, \f,
// \uXXXX and \ before any other character stand for themselves. A key
// given twice keeps its last value, as in Java. The file is read as UTF-8.
// A line, or a property continued over several lines, may be up to 1 MiB.
// Errors name the file and line, and the key quoted (bounded to 256 bytes),
// but never a value, which may be a secret.
func LoadProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	defer f.Close()
	props, err := ParseProperties(f)
	if err != nil {
		return nil, fmt.Errorf("producer: %s: %w", path, err)
	}
	return props, nil
}

// maxPropertyLine bounds a line of a properties file, and a property
// continued over several lines, in bytes.
const maxPropertyLine = 1 << 20

// ParseProperties reads properties in the format LoadProperties reads, from
// r. A line, or a property continued over several lines, may be up to
// 1 MiB long; a longer one is an error naming its line. Every error
// names its line (the first line of a continued property) and quotes
// the key, bounded, if it names one.
func ParseProperties(r io.Reader) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(r)
	// Room for the longest line and its line end ("\r\n"); a longer
	// line stops the scanner once it has read this much of it.
	sc.Buffer(make([]byte, 64<<10), maxPropertyLine+2)
	sc.Split(scanPropertyLines)
	lineNo := 0
	var logical strings.Builder
	start := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if len(line) > maxPropertyLine {
			return nil, errLongLine(lineNo)
		}
		if lineNo == 1 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		if logical.Len() == 0 {
			trimmed := strings.TrimLeft(line, " \t\f")
			if trimmed == "" || trimmed[0] == '#' || trimmed[0] == '!' {
				continue
			}
			start = lineNo
			line = trimmed
		} else {
			line = strings.TrimLeft(line, " \t\f")
		}
		if logical.Len()+len(line) > maxPropertyLine {
			return nil, fmt.Errorf("line %d: the property continues past 1 MiB, the longest ParseProperties reads", start)
		}
		if continues(line) {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		k, v, err := splitProperty(logical.String())
		logical.Reset()
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		props[k] = v
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, errLongLine(lineNo + 1)
		}
		return nil, fmt.Errorf("line %d: %w", lineNo+1, err)
	}
	if logical.Len() > 0 {
		k, v, err := splitProperty(logical.String())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		props[k] = v
	}
	return props, nil
}

func errLongLine(n int) error {
	return fmt.Errorf("line %d: longer than 1 MiB, the longest line ParseProperties reads", n)
}

// continues reports whether line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line into its unescaped key and value.
func splitProperty(line string) (string, string, error) {
	// The key ends at the first unescaped '=', ':' or white space.
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	rawKey, rest := line[:end], line[end:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	key, err := unescapeProperty(rawKey)
	if err != nil {
		return "", "", fmt.Errorf("key: %w", err)
	}
	val, err := unescapeProperty(rest)
	if err != nil {
		return "", "", fmt.Errorf("value of %s: %w", safetext.Quote(key), err)
	}
	return key, val, nil
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("a truncated \\u escape")
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("a malformed \\u escape")
			}
			r := rune(n)
			// A UTF-16 surrogate pair spells one rune.
			if r >= 0xD800 && r < 0xDC00 && i+11 <= len(s) && s[i+5] == '\\' && s[i+6] == 'u' {
				if lo, err := strconv.ParseUint(s[i+7:i+11], 16, 16); err == nil && lo >= 0xDC00 && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (rune(lo) - 0xDC00)
					i += 6
				}
			}
			if !utf8.ValidRune(r) {
				r = utf8.RuneError
			}
			b.WriteRune(r)
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// scanPropertyLines is a bufio.SplitFunc for the lines of a properties
// file, as java.util.Properties.load ends them: at "\n", "\r" or "\r\n"
// (bufio.ScanLines ends them only at "\n", so an old Mac file's "\r" would
// join its lines). A "\r" ending the buffer waits for the next byte,
// unless the input ends there.
func scanPropertyLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // "\r\n" may be split across reads
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
