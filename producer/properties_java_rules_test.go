package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// propsNew runs ConfigFromProperties and then New's validation
// (withDefaults), so a test sees an error from either stage, as a Java user
// sees a ConfigException from new KafkaProducer(props).
func propsNew(props map[string]string) (Config, error) {
	props["bootstrap.servers"] = "127.0.0.1:9092"
	c, err := ConfigFromProperties(props)
	if err != nil {
		return Config{}, err
	}
	return c.withDefaults()
}

// TestUniformStickyPartitionerClassIgnoresKeys: Java's
// org.apache.kafka.clients.producer.UniformStickyPartitioner does not use
// the key ("NOTE: In contrast to the DefaultPartitioner, the record key is
// NOT used as part of the partitioning strategy in this partitioner",
// https://kafka.apache.org/35/javadoc/org/apache/kafka/clients/producer/UniformStickyPartitioner.html;
// its deprecation note says the replacement is partitioner.ignore.keys=true).
// ConfigFromProperties used to map it to the default partitioner, which
// hashes keys with murmur2.
func TestUniformStickyPartitionerClassIgnoresKeys(t *testing.T) {
	c, err := propsNew(map[string]string{
		"partitioner.class": "org.apache.kafka.clients.producer.UniformStickyPartitioner",
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Partitioner.Partition(&Record{Topic: "t", Key: []byte("foobar")}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if p != UnknownPartition {
		t.Errorf("UniformStickyPartitioner placed a keyed record by its key on partition %d; Java ignores the key (want UnknownPartition, the sticky choice)", p)
	}
}

// TestRetriesZeroDisablesImplicitIdempotence: Java's
// ProducerConfig.postProcessAndValidateIdempotenceConfigs (apache/kafka,
// clients/.../producer/ProducerConfig.java): with retries=0 and
// enable.idempotence not set, "Idempotence will be disabled because retries
// is set to 0" (the user asked for at-most-once: no retry, no producer id).
// ConfigFromProperties used to ignore retries and keep idempotence on.
func TestRetriesZeroDisablesImplicitIdempotence(t *testing.T) {
	c, err := propsNew(map[string]string{"retries": "0"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.DisableIdempotence {
		t.Errorf("retries=0 without enable.idempotence: DisableIdempotence = false; Java disables idempotence")
	}
}

// TestRetriesZeroWithExplicitIdempotenceRefused: in the same Java method,
// enable.idempotence=true given explicitly with retries=0 throws
// ConfigException("Must set retries to non-zero when using the idempotent
// producer."). samsa used to accept the pair.
func TestRetriesZeroWithExplicitIdempotenceRefused(t *testing.T) {
	_, err := propsNew(map[string]string{"retries": "0", "enable.idempotence": "true"})
	if err == nil {
		t.Errorf("retries=0 with enable.idempotence=true accepted; Java throws ConfigException (retries must be non-zero for the idempotent producer)")
	}
}

// TestIdempotenceConflictsRefusedInJavaWords: kafka-clients 4.4's
// ProducerConfig (run on the same files in
// interop/javaconfig_test.go) refuses max.in.flight.requests.per.connection
// above 5 even without enable.idempotence, refuses acks other than all
// with enable.idempotence=true, checks retries=0 before acks and acks
// before max.in.flight, and refuses a transactional.id whose idempotence
// its rules turned off; it says why in words ConfigFromProperties now
// repeats. samsa used to turn idempotence off for the first, accept the
// others until New (in its own words), and word the retries error its own
// way.
func TestIdempotenceConflictsRefusedInJavaWords(t *testing.T) {
	const (
		mif     = "To use the idempotent producer, max.in.flight.requests.per.connection must be set to at most 5. Current value is 6."
		acks    = "Must set acks to all in order to use the idempotent producer. Otherwise we cannot guarantee idempotence."
		retries = "Must set retries to non-zero when using the idempotent producer."
		txn     = "Cannot set a transactional.id without also enabling idempotence."
	)
	for _, tc := range []struct {
		props map[string]string
		want  string // the key, ": ", Java's message
	}{
		{map[string]string{"max.in.flight.requests.per.connection": "6"}, "max.in.flight.requests.per.connection: " + mif},
		{map[string]string{"max.in.flight.requests.per.connection": "6", "acks": "1"}, "max.in.flight.requests.per.connection: " + mif},
		{map[string]string{"max.in.flight.requests.per.connection": "6", "retries": "0"}, "max.in.flight.requests.per.connection: " + mif},
		{map[string]string{"max.in.flight.requests.per.connection": "6", "enable.idempotence": "true"}, "max.in.flight.requests.per.connection: " + mif},
		{map[string]string{"acks": "1", "enable.idempotence": "true"}, "acks: " + acks},
		{map[string]string{"acks": "0", "max.in.flight.requests.per.connection": "6", "enable.idempotence": "true"}, "acks: " + acks},
		{map[string]string{"retries": "0", "enable.idempotence": "true"}, "retries: " + retries},
		{map[string]string{"retries": "0", "acks": "1", "enable.idempotence": "true"}, "retries: " + retries},
		{map[string]string{"transactional.id": "t", "acks": "1"}, "transactional.id: " + txn},
		{map[string]string{"transactional.id": "t", "retries": "0"}, "transactional.id: " + txn},
		{map[string]string{"transactional.id": "t", "enable.idempotence": "false"}, "transactional.id: " + txn},
		{map[string]string{"transactional.id": "t", "max.in.flight.requests.per.connection": "6"}, "max.in.flight.requests.per.connection: " + mif},
	} {
		t.Run(fmt.Sprint(tc.props), func(t *testing.T) {
			tc.props["bootstrap.servers"] = "127.0.0.1:9092"
			_, err := ConfigFromProperties(tc.props)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("ConfigFromProperties: %v; Java refuses with %q", err, tc.want)
			}
			if !strings.HasSuffix(err.Error(), ": "+tc.want) {
				t.Errorf("ConfigFromProperties: %v\nwant Java's reason: %s", err, tc.want)
			}
		})
	}
}

// TestCompressionLevelsOutsideJavaRangesRefused: KIP-390's level keys are
// validated by Java's ConfigDef for every key given, whatever
// compression.type is (ProducerConfig defines each with its codec's
// levelValidator): gzip accepts 1..9 or -1 (GzipCompression.Builder:
// "gzip doesn't support given compression level"), lz4 1..17, zstd
// -131072..22. samsa used to take gzip/lz4 level 0 as "the default" and
// ignore the level keys of codecs not chosen.
func TestCompressionLevelsOutsideJavaRangesRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]string
	}{
		{"gzip level 0", map[string]string{"compression.type": "gzip", "compression.gzip.level": "0"}},
		{"lz4 level 0", map[string]string{"compression.type": "lz4", "compression.lz4.level": "0"}},
		{"gzip level 10, codec none", map[string]string{"compression.gzip.level": "10"}},
		{"lz4 level 18, codec zstd", map[string]string{"compression.type": "zstd", "compression.lz4.level": "18"}},
		{"zstd level 23, codec gzip", map[string]string{"compression.type": "gzip", "compression.zstd.level": "23"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := propsNew(tc.props)
			if err == nil {
				t.Errorf("%v accepted (Compression %v, CompressionLevel %d); Java throws ConfigException", tc.props, c.Compression, c.CompressionLevel)
			}
		})
	}
}

// TestLongMaxValueMillisecondsAccepted: max.block.ms, linger.ms,
// metadata.max.age.ms, retry.backoff.ms and retry.backoff.max.ms are
// Type.LONG atLeast(0) in ProducerConfig, so Java takes
// 9223372036854775807 (Long.MAX_VALUE, a common "block forever" setting
// for max.block.ms). ConfigFromProperties used to refuse any value above
// MaxInt64/1e6 ms instead of saturating.
func TestLongMaxValueMillisecondsAccepted(t *testing.T) {
	long := []string{"max.block.ms", "linger.ms", "metadata.max.age.ms", "metadata.max.idle.ms",
		"retry.backoff.ms", "retry.backoff.max.ms", "socket.connection.setup.timeout.ms"}
	for _, key := range long {
		t.Run(key, func(t *testing.T) {
			c, err := propsNew(map[string]string{key: "9223372036854775807"})
			if err != nil {
				t.Fatalf("%s=Long.MAX_VALUE refused (%v); Java accepts it", key, err)
			}
			if c.DeliveryTimeout <= 0 {
				t.Errorf("%s=Long.MAX_VALUE: DeliveryTimeout %v (a sum overflowed)", key, c.DeliveryTimeout)
			}
		})
	}
	// Java's int keys stop at Integer.MAX_VALUE.
	for _, key := range []string{"delivery.timeout.ms", "request.timeout.ms", "transaction.timeout.ms"} {
		t.Run(key, func(t *testing.T) {
			if _, err := propsNew(map[string]string{key: "2147483648"}); err == nil {
				t.Errorf("%s=2147483648 accepted; Java's int refuses it", key)
			}
		})
	}
	// A producer whose long timeouts are all Long.MAX_VALUE still connects
	// and delivers (sums such as DialTimeout + 1 s and twice
	// RequestTimeout used to overflow into timeouts already past).
	c := newCluster(t, testbroker.Config{Brokers: 1})
	if err := c.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	props := map[string]string{"bootstrap.servers": strings.Join(c.Addrs(), ",")}
	for _, key := range long {
		if key != "linger.ms" && key != "retry.backoff.ms" {
			props[key] = "9223372036854775807"
		}
	}
	props["delivery.timeout.ms"] = "2147483647" // Java's largest int
	cfg, err := ConfigFromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer p.Close(ctx)
	if _, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}).Wait(ctx); err != nil {
		t.Fatalf("a producer with Long.MAX_VALUE timeouts did not deliver: %v", err)
	}
}

// TestEmptyTransactionalIDRefused: ProducerConfig defines
// transactional.id with new ConfigDef.NonEmptyString(), so
// "transactional.id=" is a ConfigException in Java ("String must be
// non-empty"); ConfigFromProperties used to make a non-transactional
// producer quietly.
func TestEmptyTransactionalIDRefused(t *testing.T) {
	_, err := propsNew(map[string]string{"transactional.id": " "})
	if err == nil {
		t.Errorf("transactional.id=\"\" accepted; Java refuses an empty transactional.id")
	}
}

// TestPropertiesLoneCRIsALineTerminator: java.util.Properties.load: "A
// natural line is defined as a line of characters that is terminated either
// by a set of line terminator characters (\n or \r or \r\n) or by the end of
// the stream." ParseProperties used to split only on \n (and \r\n), so a
// file with classic-Mac line ends became one property holding the rest.
func TestPropertiesLoneCRIsALineTerminator(t *testing.T) {
	props, err := ParseProperties(strings.NewReader("acks=all\rlinger.ms=7\r"))
	if err != nil {
		t.Fatal(err)
	}
	if props["acks"] != "all" || props["linger.ms"] != "7" {
		t.Errorf("ParseProperties(%q) = %q; Java reads acks=all and linger.ms=7", "acks=all\rlinger.ms=7\r", props)
	}
}

// TestTimestampsOutOfRangeRefused: Java's ProducerRecord constructor throws
// IllegalArgumentException("Invalid timestamp: ... Timestamp should always
// be non-negative or null.") for a timestamp below 0, so no Java producer
// writes one (and -1 is the wire's "no timestamp"). samsa's Send takes a
// Timestamp before 1970, where samsa used to write its negative milliseconds.
func TestTimestampsOutOfRangeRefused(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	if err := c.CreateTopic("ts", 1); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, c, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ms := range []int64{-1, -5} {
		md, err := p.Send(ctx, &Record{Topic: "ts", Value: []byte("v"), Timestamp: time.UnixMilli(ms)}).Wait(ctx)
		if !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("Timestamp %d ms: Send gave (%v, %v); Java refuses a negative timestamp (want ErrInvalidRecord)", ms, md.Timestamp.UnixMilli(), err)
		}
	}
	// A timestamp that does not fit a completion's 60 bits is refused as
	// well (compared as a time: UnixMilli wraps around); the largest that
	// fits is sent and echoed.
	for _, ts := range []time.Time{
		time.UnixMilli(maxTimestampMillis + 1),
		time.Unix(18446744073709552, 0), // UnixMilli wraps around to 384
		time.Unix(1<<62, 0),
	} {
		_, err := p.Send(ctx, &Record{Topic: "ts", Value: []byte("v"), Timestamp: ts}).Wait(ctx)
		if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), "2^60 ms or more after 1970") {
			t.Errorf("timestamp %v: got %v, want ErrInvalidRecord for a time too far", ts, err)
		}
	}
	md, err := p.Send(ctx, &Record{Topic: "ts", Value: []byte("v"), Timestamp: time.UnixMilli(maxTimestampMillis)}).Wait(ctx)
	if err != nil || md.Timestamp.UnixMilli() != maxTimestampMillis {
		t.Errorf("timestamp 2^60-1 ms: got %v, %v", md.Timestamp.UnixMilli(), err)
	}
}
