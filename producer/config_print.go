// How a Config prints: readable, and never with a secret.

package producer

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/sasl"
)

// printedField is one field of a printed Config: its text for String and
// its value for LogValue.
type printedField struct {
	name string
	text string
	val  slog.Value
}

// printedFields lists c's fields that are not at their zero value (their
// default), in declaration order, then TLS and SASL always. Nothing of a
// secret is read: TLS prints as enabled or disabled with its server name,
// version floor and switches, SASL by its mechanism's name, functions and
// interfaces by whether they are set or by type.
func (c Config) printedFields() []printedField {
	var out []printedField
	add := func(name, text string, val slog.Value) {
		out = append(out, printedField{name, text, val})
	}
	str := func(name, v string) {
		if v != "" {
			add(name, strconv.Quote(v), slog.StringValue(v))
		}
	}
	num := func(name string, v int64) {
		if v != 0 {
			add(name, strconv.FormatInt(v, 10), slog.Int64Value(v))
		}
	}
	dur := func(name string, d time.Duration) {
		switch d {
		case 0:
		case NoWait:
			add(name, "NoWait", slog.StringValue("NoWait"))
		default:
			add(name, d.String(), slog.DurationValue(d))
		}
	}
	flag := func(name string, b bool) {
		if b {
			add(name, "true", slog.BoolValue(true))
		}
	}
	set := func(name string, isSet bool, what string) {
		if isSet {
			add(name, what, slog.StringValue(what))
		}
	}

	if len(c.Brokers) > 0 {
		add("Brokers", "["+strings.Join(c.Brokers, " ")+"]", slog.AnyValue(append([]string(nil), c.Brokers...)))
	}
	str("ClientID", c.ClientID)
	if c.Acks != AcksAll {
		add("Acks", c.Acks.String(), slog.StringValue(c.Acks.String()))
	}
	dur("Linger", c.Linger)
	num("BatchSize", int64(c.BatchSize))
	num("BufferMemory", c.BufferMemory)
	dur("MaxBlock", c.MaxBlock)
	num("MaxRequestSize", int64(c.MaxRequestSize))
	if c.Compression != compression.None {
		add("Compression", c.Compression.String(), slog.StringValue(c.Compression.String()))
	}
	num("CompressionLevel", int64(c.CompressionLevel))
	num("CompressionConcurrency", int64(c.CompressionConcurrency))
	dur("DeliveryTimeout", c.DeliveryTimeout)
	dur("RequestTimeout", c.RequestTimeout)
	dur("RetryBackoff", c.RetryBackoff)
	dur("RetryBackoffMax", c.RetryBackoffMax)
	num("MaxInFlight", int64(c.MaxInFlight))
	dur("MetadataMaxAge", c.MetadataMaxAge)
	dur("MetadataMaxIdle", c.MetadataMaxIdle)
	flag("DisableIdempotence", c.DisableIdempotence)
	str("TransactionalID", c.TransactionalID)
	dur("TransactionTimeout", c.TransactionTimeout)
	flag("DisableAutoTopicCreation", c.DisableAutoTopicCreation)
	flag("AutoCreateTopics", c.AutoCreateTopics)
	num("AutoCreatePartitions", int64(c.AutoCreatePartitions))
	num("AutoCreateReplicationFactor", int64(c.AutoCreateReplicationFactor))
	dur("DialTimeout", c.DialTimeout)
	dur("DialTimeoutMax", c.DialTimeoutMax)
	dur("ConnMaxIdle", c.ConnMaxIdle)
	set("Dialer", c.Dialer != nil, "set")
	if c.ClientDNSLookup != "" {
		add("ClientDNSLookup", string(c.ClientDNSLookup), slog.StringValue(string(c.ClientDNSLookup)))
	}
	num("SendBufferBytes", int64(c.SendBufferBytes))
	num("ReceiveBufferBytes", int64(c.ReceiveBufferBytes))
	set("Partitioner", c.Partitioner != nil, fmt.Sprintf("%T", c.Partitioner))
	flag("DisableAdaptivePartitioning", c.DisableAdaptivePartitioning)
	dur("PartitionerAvailabilityTimeout", c.PartitionerAvailabilityTimeout)
	set("BufferPool", c.BufferPool != nil, fmt.Sprintf("%T", c.BufferPool))
	set("Logger", c.Logger != nil, "set")
	if len(c.Hooks) > 0 {
		types := make([]string, len(c.Hooks))
		for i, h := range c.Hooks {
			types[i] = fmt.Sprintf("%T", h)
		}
		text := "[" + strings.Join(types, " ") + "]"
		add("Hooks", text, slog.StringValue(text))
	}
	flag("DisableMetricsPush", c.DisableMetricsPush)
	set("OnDataLoss", c.OnDataLoss != nil, "set")
	if c.Spool != nil {
		text := fmt.Sprintf("{Dir=%q Mode=%s Sync=%v}", c.Spool.Dir, c.Spool.Mode, c.Spool.Sync)
		if c.Spool.ExactlyOnce {
			text = fmt.Sprintf("{Dir=%q Mode=%s Sync=%v ExactlyOnce=true ProgressTopic=%q CommitInterval=%v}",
				c.Spool.Dir, c.Spool.Mode, c.Spool.Sync, c.Spool.ProgressTopic, c.Spool.CommitInterval)
		}
		add("Spool", text, slog.StringValue(text))
	}
	if len(c.ignoredProps) > 0 {
		add("IgnoredProperties", "["+strings.Join(c.ignoredProps, " ")+"]", slog.AnyValue(c.IgnoredProperties()))
	}
	t := tlsSummary(c.TLS)
	add("TLS", t, slog.StringValue(t))
	m := saslSummary(c.SASL)
	add("SASL", m, slog.StringValue(m))
	return out
}

// tlsSummary is how a TLS config prints: "disabled", or "enabled" with
// what says how the brokers are verified; never a key, a certificate's
// content or a session ticket key.
func tlsSummary(t *tls.Config) string {
	if t == nil {
		return "disabled"
	}
	var parts []string
	if t.ServerName != "" {
		parts = append(parts, "ServerName="+strconv.Quote(t.ServerName))
	}
	if t.MinVersion != 0 {
		parts = append(parts, "MinVersion="+tls.VersionName(t.MinVersion))
	}
	if t.RootCAs != nil {
		parts = append(parts, "RootCAs=custom")
	}
	if len(t.Certificates) > 0 || t.GetClientCertificate != nil {
		parts = append(parts, "client certificate")
	}
	if t.InsecureSkipVerify {
		parts = append(parts, "InsecureSkipVerify")
	}
	if len(parts) == 0 {
		return "enabled"
	}
	return "enabled(" + strings.Join(parts, ", ") + ")"
}

// saslSummary is how a SASL mechanism prints: its name only ("none"
// without one). Name is the mechanism's code: a panic of it prints as
// such.
func saslSummary(m sasl.Mechanism) (s string) {
	if m == nil {
		return "none"
	}
	defer func() {
		if recover() != nil {
			s = "(its Name panicked)"
		}
	}()
	return m.Name()
}

// String returns c's fields that are not at their zero value (their
// default), as "producer.Config{Brokers=[k1:9092] Compression=zstd ...
// TLS=enabled(ServerName=\"kafka\") SASL=PLAIN}", TLS and SASL always. It
// never prints a secret: SASL by its mechanism's name, TLS as enabled or
// disabled with its server name and how certificates are checked, never
// keys, passwords or tokens. It is safe to log; %v, %+v, %s and every
// other verb print it (see Format).
func (c Config) String() string {
	var b strings.Builder
	b.WriteString("producer.Config{")
	for i, f := range c.printedFields() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.name)
		b.WriteByte('=')
		b.WriteString(f.text)
	}
	b.WriteByte('}')
	return b.String()
}

// GoString returns String, so that %#v prints no secret either.
func (c Config) GoString() string { return c.String() }

// Format prints String for every verb (%v, %+v, %#v, %s, %q quoted, %x...),
// so that no verb reaches the fields themselves (a TLS config's keys).
func (c Config) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprint(f, strconv.Quote(c.String()))
	default:
		fmt.Fprint(f, c.String())
	}
}

// LogValue makes c a group of the fields String prints, for log/slog:
// slog.Any("config", cfg) logs them under "config", durations as
// durations, with the same redaction as String.
func (c Config) LogValue() slog.Value {
	fields := c.printedFields()
	attrs := make([]slog.Attr, len(fields))
	for i, f := range fields {
		attrs[i] = slog.Attr{Key: f.name, Value: f.val}
	}
	return slog.GroupValue(attrs...)
}

var (
	_ fmt.Stringer   = Config{}
	_ fmt.GoStringer = Config{}
	_ fmt.Formatter  = Config{}
	_ slog.LogValuer = Config{}
)
