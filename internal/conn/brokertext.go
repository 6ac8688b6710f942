package conn

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/samsa-go/samsa/internal/safetext"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/sasl"
)

// BrokerText returns s, text a broker sent (an error message, a rack, a
// cluster id), fit for an error or a log line: the secrets of m (a
// sasl.SecretHolder; m may be nil) and their base64 and hex forms replaced
// with "[redacted]", then bounded to 256 bytes and escaped
// (safetext.Scrub). Only as much of s as is shown is read.
func BrokerText(m sasl.Mechanism, s string) string {
	return safetext.Scrub(s, secretForms(m))
}

// BrokerError returns the error of a response's code, nil for 0, carrying
// the broker's ErrorMessage (msg, nil or empty for none) cleaned as
// BrokerText cleans it.
func BrokerError(m sasl.Mechanism, code int16, msg *string) error {
	err := kerr.ForCode(code)
	var ke *kerr.Error
	if err == nil || msg == nil || *msg == "" || !errors.As(err, &ke) {
		return err
	}
	return ke.WithMessage(BrokerText(m, *msg))
}

// BrokerTexts prints a list a broker sent (SaslHandshake's mechanisms) as
// %q does, cleaned as BrokerText cleans text: each item bounded, the list
// bounded to 256 bytes, the items past it counted, not read.
func BrokerTexts(m sasl.Mechanism, list []string) string {
	return safetext.QuoteList(list, secretForms(m))
}

// CheckHost refuses a host name a broker advertised (Metadata,
// FindCoordinator) that cannot be one: empty, longer than 255 bytes (DNS's
// limit), or holding spaces, control characters or invalid UTF-8. Such a
// host would otherwise be dialed and printed in every error and log line
// about its broker. The error quotes it bounded (safetext.Quote).
func CheckHost(host string) error {
	bad := len(host) == 0 || len(host) > 255
	for i := 0; !bad && i < len(host); {
		r, size := utf8.DecodeRuneInString(host[i:])
		bad = r == utf8.RuneError && size == 1 || r == ' ' || !strconv.IsPrint(r)
		i += size
	}
	if bad {
		return fmt.Errorf("invalid broker host %s: a host name is 1 to 255 bytes of printable text without spaces", safetext.Quote(host))
	}
	return nil
}

// secretForms returns the forms of m's secrets to scrub from broker text,
// nil when m names none.
func secretForms(m sasl.Mechanism) []string {
	h, ok := m.(sasl.SecretHolder)
	if !ok {
		return nil
	}
	return safetext.SecretForms(h.Secrets()...)
}

// cleanErr returns err with its text cleaned as BrokerText cleans text:
// for an error that may quote the broker (a SASL session's Step error: the
// SCRAM library quotes the server's messages). A text that cleaning
// changed comes without its chain, which would reach the raw text; nil
// stays nil.
func cleanErr(m sasl.Mechanism, err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if clean := BrokerText(m, text); clean != text {
		return errors.New(clean)
	}
	return err
}
