package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
)

func TestConfigFromProperties(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]string
		want  Config
	}{
		{"empty", map[string]string{}, Config{}},
		{
			"KIP-794's partitioner keys",
			map[string]string{"partitioner.adaptive.partitioning.enable": "false", "partitioner.availability.timeout.ms": "250"},
			Config{DisableAdaptivePartitioning: true, PartitionerAvailabilityTimeout: 250 * time.Millisecond},
		},
		{
			"adaptive on, availability timeout off",
			map[string]string{"partitioner.adaptive.partitioning.enable": "true", "partitioner.availability.timeout.ms": "0"},
			Config{},
		},
		{
			"a typical Java config",
			map[string]string{
				"bootstrap.servers":                        "k1:9092, k2:9092,,",
				"client.id":                                "billing",
				"acks":                                     "all",
				"linger.ms":                                "20",
				"batch.size":                               "65536",
				"buffer.memory":                            "67108864",
				"max.block.ms":                             "5000",
				"max.request.size":                         "2097152",
				"compression.type":                         "zstd",
				"compression.zstd.level":                   "7",
				"compression.gzip.level":                   "3", // not the chosen codec: ignored
				"delivery.timeout.ms":                      "90000",
				"request.timeout.ms":                       "15000",
				"retry.backoff.ms":                         "200",
				"retry.backoff.max.ms":                     "2000",
				"max.in.flight.requests.per.connection":    "3",
				"metadata.max.age.ms":                      "60000",
				"metadata.max.idle.ms":                     "120000",
				"enable.idempotence":                       "true",
				"socket.connection.setup.timeout.ms":       "3000",
				"socket.connection.setup.timeout.max.ms":   "20000",
				"client.dns.lookup":                        "resolve_canonical_bootstrap_servers_only",
				"send.buffer.bytes":                        "131072",
				"receive.buffer.bytes":                     "-1",
				"key.serializer":                           "org.apache.kafka.common.serialization.StringSerializer",
				"value.serializer":                         "org.apache.kafka.common.serialization.ByteArraySerializer",
				"retries":                                  "2147483647",
				"partitioner.adaptive.partitioning.enable": "true",
				"security.protocol":                        "PLAINTEXT",
			},
			Config{
				Brokers:          []string{"k1:9092", "k2:9092"},
				ClientID:         "billing",
				Linger:           20 * time.Millisecond,
				BatchSize:        65536,
				BufferMemory:     64 << 20,
				MaxBlock:         5 * time.Second,
				MaxRequestSize:   2 << 20,
				Compression:      compression.Zstd,
				CompressionLevel: 7,
				DeliveryTimeout:  90 * time.Second,
				RequestTimeout:   15 * time.Second,
				RetryBackoff:     200 * time.Millisecond,
				RetryBackoffMax:  2 * time.Second,
				MaxInFlight:      3,
				MetadataMaxAge:   time.Minute,
				MetadataMaxIdle:  2 * time.Minute,
				DialTimeout:      3 * time.Second,
				DialTimeoutMax:   20 * time.Second,
				ClientDNSLookup:  DNSResolveCanonicalBootstrapServersOnly,
				SendBufferBytes:  131072,
				// Java's -1: the OS's size, as 0 is.
				ReceiveBufferBytes: -1,
				// Java classes: Go code serializes. retries=MAX_INT is
				// what samsa does, so it is not reported.
				ignoredProps: []string{"key.serializer", "value.serializer"},
			},
		},
		{
			"zero values keep their Java meaning",
			map[string]string{"linger.ms": "0", "max.block.ms": "0", "retry.backoff.ms": "0", "batch.size": "0"},
			Config{Linger: NoWait, MaxBlock: NoWait, RetryBackoff: NoWait, BatchSize: 1},
		},
		{
			"a typical librdkafka config",
			map[string]string{
				"metadata.broker.list":               "r1:9092",
				"request.required.acks":              "1",
				"queue.buffering.max.ms":             "10",
				"queue.buffering.max.kbytes":         "1024",
				"queue.buffering.max.messages":       "100000",
				"batch.num.messages":                 "10000",
				"compression.codec":                  "lz4",
				"compression.level":                  "5",
				"message.max.bytes":                  "1000000",
				"message.timeout.ms":                 "300000",
				"max.in.flight":                      "10",
				"topic.metadata.refresh.interval.ms": "30000",
				"message.send.max.retries":           "5",
				"partitioner":                        "murmur2_random",
			},
			Config{
				Brokers:            []string{"r1:9092"},
				Acks:               AcksLeader,
				Linger:             10 * time.Millisecond,
				BufferMemory:       1 << 20,
				Compression:        compression.LZ4,
				CompressionLevel:   5,
				MaxRequestSize:     1000000,
				DeliveryTimeout:    5 * time.Minute,
				MaxInFlight:        10,
				MetadataMaxAge:     30 * time.Second,
				DisableIdempotence: true, // acks=1 without enable.idempotence, as Java does
				ignoredProps:       []string{"batch.num.messages", "message.send.max.retries", "queue.buffering.max.messages"},
			},
		},
		{
			"acks spellings",
			map[string]string{"acks": "-1"},
			Config{Acks: AcksAll},
		},
		{
			"acks=0 turns idempotence off when not asked for",
			map[string]string{"acks": "0"},
			Config{Acks: AcksNone, DisableIdempotence: true},
		},
		{
			"librdkafka's max.in.flight above 5 turns idempotence off when not asked for",
			map[string]string{"max.in.flight": "10"},
			Config{MaxInFlight: 10, DisableIdempotence: true},
		},
		{
			"many in flight with idempotence off",
			map[string]string{"max.in.flight.requests.per.connection": "10", "enable.idempotence": "false"},
			Config{MaxInFlight: 10, DisableIdempotence: true},
		},
		{
			"idempotence off",
			map[string]string{"enable.idempotence": "FALSE"},
			Config{DisableIdempotence: true},
		},
		{
			"auto topic creation off",
			map[string]string{"allow.auto.create.topics": "false"},
			Config{DisableAutoTopicCreation: true},
		},
		{
			"auto topic creation on is the default",
			map[string]string{"allow.auto.create.topics": "true"},
			Config{},
		},
		{
			"metrics push off",
			map[string]string{"enable.metrics.push": "false"},
			Config{DisableMetricsPush: true},
		},
		{
			"metrics push on is the default",
			map[string]string{"enable.metrics.push": "true"},
			Config{},
		},
		{
			"gzip's Java default level -1 is our 0",
			map[string]string{"compression.type": "gzip", "compression.gzip.level": "-1"},
			Config{Compression: compression.Gzip},
		},
		{
			"values are trimmed",
			map[string]string{"linger.ms": " 7 ", "compression.type": " Snappy"},
			Config{Linger: 7 * time.Millisecond, Compression: compression.Snappy},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigFromProperties(tc.props)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestConfigFromPropertiesPartitioners(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]string
		check func(t *testing.T, p Partitioner)
	}{
		{"java round robin", map[string]string{"partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner"},
			func(t *testing.T, p Partitioner) { assert.IsType(t, &roundRobin{}, p) }},
		{"java default", map[string]string{"partitioner.class": "org.apache.kafka.clients.producer.internals.DefaultPartitioner"},
			func(t *testing.T, p Partitioner) { assert.Nil(t, p) }},
		{"ignore keys", map[string]string{"partitioner.ignore.keys": "true"},
			func(t *testing.T, p Partitioner) {
				got, err := p.Partition(&Record{Topic: "t", Key: []byte("k")}, 10)
				require.NoError(t, err)
				assert.Equal(t, UnknownPartition, got)
			}},
		{"do not ignore keys", map[string]string{"partitioner.ignore.keys": "false"},
			func(t *testing.T, p Partitioner) { assert.Nil(t, p) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ConfigFromProperties(tc.props)
			require.NoError(t, err)
			tc.check(t, c.Partitioner)
		})
	}
}

func TestConfigFromPropertiesErrors(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]string
		want  []string // substrings of the error, in order
	}{
		{
			"unknown keys listed sorted",
			map[string]string{"zz.unknown": "1", "linger.ms": "5", "aa.unknown": "2", "lingr.ms": "5"},
			[]string{`unknown properties: "aa.unknown", "lingr.ms" (did you mean linger.ms?), "zz.unknown"`},
		},
		{"not a number", map[string]string{"linger.ms": "5ms"}, []string{`linger.ms: "5ms" is not a number of milliseconds`}},
		{"negative ms", map[string]string{"request.timeout.ms": "-1"}, []string{"request.timeout.ms"}},
		{"zero request timeout", map[string]string{"request.timeout.ms": "0"}, []string{"request.timeout.ms: must be positive"}},
		{"infinite delivery timeout", map[string]string{"message.timeout.ms": "0"}, []string{"message.timeout.ms: 0 (no timeout) is not supported"}},
		{"float", map[string]string{"batch.size": "1.5"}, []string{`batch.size: "1.5" is not an integer`}},
		{"overflow", map[string]string{"max.request.size": "9999999999"}, []string{"max.request.size"}},
		{"bad bool", map[string]string{"enable.idempotence": "yes"}, []string{`enable.idempotence: "yes" is not true or false`}},
		{"bad acks", map[string]string{"acks": "2"}, []string{`acks: "2" is not one of all, -1, 1, 0`}},
		{"samsa spelling is not a property value", map[string]string{"acks": "leader"}, []string{`acks: "leader" is not one of all, -1, 1, 0`}},
		{"bad codec", map[string]string{"compression.type": "brotli"}, []string{`compression.type: "brotli" is not one of`}},
		{"no brokers", map[string]string{"bootstrap.servers": " , "}, []string{"bootstrap.servers: no broker"}},
		{
			"aliases conflict",
			map[string]string{"linger.ms": "5", "queue.buffering.max.ms": "10"},
			[]string{"queue.buffering.max.ms: conflicts with linger.ms (both set Linger)"},
		},
		{
			"custom java partitioner",
			map[string]string{"partitioner.class": "com.example.MyPartitioner"},
			[]string{`partitioner.class: "com.example.MyPartitioner" cannot be loaded in Go: set Config.Partitioner`},
		},
		{"librdkafka crc partitioner", map[string]string{"partitioner": "consistent_random"}, []string{"partitioner: \"consistent_random\" is not supported"}},
		{"adaptive not a boolean", map[string]string{"partitioner.adaptive.partitioning.enable": "no"}, []string{"partitioner.adaptive.partitioning.enable"}},
		{"availability timeout negative", map[string]string{"partitioner.availability.timeout.ms": "-1"}, []string{"partitioner.availability.timeout.ms"}},
		{"bad protocol", map[string]string{"security.protocol": "SSH"}, []string{`security.protocol: "SSH" is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL`}},
		{"ignored keys still parse", map[string]string{"retries": "many"}, []string{"retries"}},
		{"unknown DNS lookup", map[string]string{"client.dns.lookup": "default"}, []string{`client.dns.lookup: "default" is not use_all_dns_ips or resolve_canonical_bootstrap_servers_only`}},
		{"DNS lookup is case-sensitive, as Java's", map[string]string{"client.dns.lookup": "USE_ALL_DNS_IPS"}, []string{"client.dns.lookup: "}},
		{"zero send buffer", map[string]string{"send.buffer.bytes": "0"}, []string{"send.buffer.bytes: 0 is not a buffer size"}},
		{"receive buffer below -1", map[string]string{"receive.buffer.bytes": "-2"}, []string{`receive.buffer.bytes: "-2" is not an integer in [-1, 2147483647]`}},
		{"zero setup timeout max", map[string]string{"socket.connection.setup.timeout.max.ms": "0"}, []string{"socket.connection.setup.timeout.max.ms: must be positive"}},
		{
			"unknown keys first, then bad values",
			map[string]string{"nope": "1", "acks": "x", "linger.ms": "y"},
			[]string{`unknown properties: "nope"`, "acks:", "linger.ms:"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConfigFromProperties(tc.props)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			msg := err.Error()
			for _, w := range tc.want {
				i := strings.Index(msg, w)
				require.GreaterOrEqual(t, i, 0, "%q not in %q", w, msg)
				msg = msg[i+len(w):]
			}
		})
	}
}

// A Java config brought over unchanged gives a Config that New accepts.
func TestConfigFromPropertiesThenDefaults(t *testing.T) {
	c, err := ConfigFromProperties(map[string]string{
		"bootstrap.servers": "localhost:9092",
		"acks":              "1",
		"linger.ms":         "0",
	})
	require.NoError(t, err)
	c, err = c.withDefaults()
	require.NoError(t, err)
	assert.Zero(t, c.Linger)
	assert.True(t, c.DisableIdempotence)
}

func ExampleConfigFromProperties() {
	cfg, err := ConfigFromProperties(map[string]string{
		"bootstrap.servers": "localhost:9092",
		"linger.ms":         "10",
		"compression.type":  "lz4",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Brokers, cfg.Linger, cfg.Compression)

	_, err = ConfigFromProperties(map[string]string{"lingr.ms": "10", "acks": "2"})
	fmt.Println(err)
	// Output:
	// [localhost:9092] 10ms lz4
	// producer: invalid config: unknown properties: "lingr.ms" (did you mean linger.ms?); acks: "2" is not one of all, -1, 1, 0
}

// Any property, known or not, with any value, gives a Config or an error
// wrapping ErrInvalidConfig; never a panic.
func FuzzConfigFromProperties(f *testing.F) {
	f.Add("linger.ms", "5")
	f.Add("bootstrap.servers", "a:1,b:2")
	f.Add("acks", "all")
	f.Add("compression.type", "zstd")
	f.Add("compression.level", "-1")
	f.Add("batch.size", "0")
	f.Add("max.block.ms", "9223372036855")
	f.Add("partitioner.class", "")
	f.Add("unknown", "")
	f.Fuzz(func(t *testing.T, key, value string) {
		c, err := ConfigFromProperties(map[string]string{key: value, "bootstrap.servers": "localhost:9092"})
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error does not wrap ErrInvalidConfig: %v", err)
			}
			return
		}
		// What parses must not hold values the Config cannot represent.
		if c.Linger < -1 || c.MaxBlock < -1 || c.RetryBackoff < -1 || c.BatchSize < 0 || c.BufferMemory < 0 {
			t.Fatalf("bad config from %q=%q: %+v", key, value, c)
		}
		if _, err := c.withDefaults(); err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("withDefaults error does not wrap ErrInvalidConfig: %v", err)
		}
	})
}

// Java's documented producer keys that samsa has no setting for are
// accepted, and New logs them once at Warn; a non-empty
// interceptor.classes is refused; an unknown key names the
// nearest known one.
func TestConfigFromPropertiesJavaKeys(t *testing.T) {
	props := map[string]string{
		"bootstrap.servers":        "k1:9092",
		"connections.max.idle.ms":  "540000",
		"reconnect.backoff.ms":     "50",
		"reconnect.backoff.max.ms": "1000",
		"send.buffer.bytes":        "131072",
		"receive.buffer.bytes":     "32768",
		"client.dns.lookup":        "use_all_dns_ips",
		"metrics.recording.level":  "INFO",
		"interceptor.classes":      "",
		"key.serializer":           "org.apache.kafka.common.serialization.StringSerializer",
		"retries":                  "3",
		"ssl.truststore.password":  "changeit",
		"security.protocol":        "SSL", // ssl.* keys need it (else an error)
		"session.timeout.ms":       "45000",
	}
	cfg, err := ConfigFromProperties(props)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1:9092"}, cfg.Brokers)
	assert.Equal(t, 131072, cfg.SendBufferBytes)
	assert.Equal(t, 32768, cfg.ReceiveBufferBytes)
	assert.Equal(t, DNSUseAllIPs, cfg.ClientDNSLookup)
	assert.Equal(t, 9*time.Minute, cfg.ConnMaxIdle, "connections.max.idle.ms maps")
	want := []string{"key.serializer", "metrics.recording.level", "reconnect.backoff.max.ms",
		"reconnect.backoff.ms", "retries", "session.timeout.ms", "ssl.truststore.password"}
	assert.Equal(t, want, cfg.IgnoredProperties(), "sorted")
	cfg.IgnoredProperties()[0] = "changed"
	assert.Equal(t, want, cfg.IgnoredProperties(), "the slice is the caller's")
	assert.Empty(t, Config{}.IgnoredProperties())

	var logs strings.Builder
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Close(ctx))
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "are ignored"), "logged once: %s", out)
	assert.Contains(t, out, "level=WARN")
	assert.Contains(t, out, "key.serializer, metrics.recording.level, reconnect.backoff.max.ms")
	assert.NotContains(t, out, "changeit", "the value of a secret key is never logged")

	cases := []struct {
		name  string
		props map[string]string
		want  string
	}{
		{"transaction.timeout.ms 0", map[string]string{"transaction.timeout.ms": "0"}, "transaction.timeout.ms: must be positive"},
		{"interceptors", map[string]string{"interceptor.classes": "com.example.Audit"}, `interceptor.classes: "com.example.Audit" cannot be loaded in Go`},
		{"typo", map[string]string{"lingr.ms": "5"}, `unknown properties: "lingr.ms" (did you mean linger.ms?)`},
		{"typo in a long key", map[string]string{"reconnect.backof.max.ms": "5"}, `"reconnect.backof.max.ms" (did you mean reconnect.backoff.max.ms?)`},
		{"typo in a security key", map[string]string{"security.protocl": "SSL"}, `"security.protocl" (did you mean security.protocol?)`},
		{"nothing near", map[string]string{"zz": "1"}, `unknown properties: "zz"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConfigFromProperties(tc.props)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
			if tc.name == "nothing near" {
				assert.NotContains(t, err.Error(), "did you mean")
			}
		})
	}
}

// TestConfigFromPropertiesLeavesSerdeKeys: a Java producer's properties
// file also holds its Schema Registry serializer's keys; the producer
// accepts them silently (serde/schemaregistry reads them).
func TestConfigFromPropertiesLeavesSerdeKeys(t *testing.T) {
	cfg, err := ConfigFromProperties(map[string]string{
		"bootstrap.servers":                       "k1:9092",
		"schema.registry.url":                     "https://sr:8081",
		"schema.registry.ssl.truststore.location": "/nonexistent/ca.pem",
		"basic.auth.credentials.source":           "USER_INFO",
		"basic.auth.user.info":                    "u:p",
		"bearer.auth.logical.cluster":             "lsrc-1",
		"auto.register.schemas":                   "false",
		"use.latest.version":                      "true",
		"value.subject.name.strategy":             "io.confluent.kafka.serializers.subject.RecordNameStrategy",
		"max.retries":                             "3",
	})
	require.NoError(t, err)
	assert.Nil(t, cfg.TLS, "schema.registry.ssl.* is not the producer's ssl.*")
	assert.Empty(t, cfg.ignoredProps)
}

func TestEditDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"linger.ms", "linger.ms", 0},
		{"lingr.ms", "linger.ms", 1}, {"kitten", "sitting", 3}, {"acks", "ackss", 1},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, editDistance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		assert.Equal(t, tc.want, editDistance(tc.b, tc.a), "%q %q", tc.b, tc.a)
	}
}

// TestPropertiesZeroWaitReachesTheProducer: Java's linger.ms=0 (and
// max.block.ms=0, retry.backoff.ms=0) must mean no wait in the producer, not
// the default that a zero Config field means.
func TestPropertiesZeroWaitReachesTheProducer(t *testing.T) {
	cfg, err := ConfigFromProperties(map[string]string{
		"bootstrap.servers": "b:1", "linger.ms": "0", "max.block.ms": "0", "retry.backoff.ms": "0",
	})
	require.NoError(t, err)
	c, err := cfg.withDefaults()
	require.NoError(t, err)
	assert.Zero(t, c.Linger)
	assert.Zero(t, c.MaxBlock)
	assert.Zero(t, c.RetryBackoff)
}

// transactional.id and transaction.timeout.ms map to TransactionalID and
// TransactionTimeout; with acks other than all (idempotence then off)
// ConfigFromProperties refuses the transactional id, as Java's
// ProducerConfig does.
func TestConfigFromPropertiesTransactions(t *testing.T) {
	cfg, err := ConfigFromProperties(map[string]string{"bootstrap.servers": "k:9092",
		"transactional.id": "orders-1", "transaction.timeout.ms": "90000"})
	require.NoError(t, err)
	assert.Equal(t, "orders-1", cfg.TransactionalID)
	assert.Equal(t, 90*time.Second, cfg.TransactionTimeout)
	assert.Empty(t, cfg.ignoredProps)

	_, err = ConfigFromProperties(map[string]string{"bootstrap.servers": "k:9092", "transactional.id": "o", "acks": "1"})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "Cannot set a transactional.id without also enabling idempotence.")
}

// Every key of the Java producer's ProducerConfig (Apache Kafka 4.x) is
// either mapped to a setting or reported by IgnoredProperties: none is
// unknown, none is dropped silently. The table pins which.
func TestEveryJavaProducerKeyMapsOrIsReported(t *testing.T) {
	const (
		maps    = false
		ignored = true
	)
	keys := []struct {
		key, value string
		ignored    bool
	}{
		{"bootstrap.servers", "k:9092", maps}, {"client.dns.lookup", "use_all_dns_ips", maps},
		{"buffer.memory", "33554432", maps}, {"retries", "2147483647", maps}, {"retries", "5", ignored},
		{"acks", "all", maps}, {"compression.type", "zstd", maps}, {"compression.gzip.level", "5", maps},
		{"compression.lz4.level", "9", maps}, {"compression.zstd.level", "3", maps}, {"batch.size", "16384", maps},
		{"partitioner.adaptive.partitioning.enable", "true", maps}, {"partitioner.availability.timeout.ms", "0", maps},
		{"partitioner.ignore.keys", "false", maps}, {"linger.ms", "5", maps}, {"delivery.timeout.ms", "120000", maps},
		{"client.id", "c", maps}, {"send.buffer.bytes", "131072", maps}, {"receive.buffer.bytes", "32768", maps},
		{"max.request.size", "1048576", maps}, {"reconnect.backoff.ms", "50", ignored}, {"reconnect.backoff.max.ms", "1000", ignored},
		{"retry.backoff.ms", "100", maps}, {"retry.backoff.max.ms", "1000", maps}, {"enable.metrics.push", "true", maps},
		{"max.block.ms", "60000", maps}, {"request.timeout.ms", "30000", maps}, {"metadata.max.age.ms", "300000", maps},
		{"metadata.max.idle.ms", "300000", maps}, {"metrics.sample.window.ms", "30000", ignored}, {"metrics.num.samples", "2", ignored},
		{"metrics.recording.level", "INFO", ignored}, {"metric.reporters", "", ignored}, {"auto.include.jmx.reporter", "true", ignored},
		{"max.in.flight.requests.per.connection", "5", maps},
		{"key.serializer", "org.apache.kafka.common.serialization.StringSerializer", ignored},
		{"value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer", ignored},
		{"socket.connection.setup.timeout.ms", "10000", maps}, {"socket.connection.setup.timeout.max.ms", "30000", maps},
		{"connections.max.idle.ms", "540000", maps}, {"partitioner.class", "", maps}, {"interceptor.classes", "", maps},
		{"enable.idempotence", "true", maps}, {"transaction.timeout.ms", "60000", maps}, {"transactional.id", "tx", maps},
		{"transaction.two.phase.commit.enable", "false", ignored}, {"metadata.recovery.strategy", "rebootstrap", maps},
		{"metadata.recovery.rebootstrap.trigger.ms", "300000", maps}, {"metadata.cluster.check.enable", "true", maps},
		{"security.protocol", "PLAINTEXT", maps}, {"security.providers", "", ignored},
		{"ssl.protocol", "TLSv1.3", maps}, {"ssl.provider", "", ignored}, {"ssl.cipher.suites", "", ignored},
		{"ssl.enabled.protocols", "TLSv1.3", maps}, {"ssl.keystore.type", "PEM", maps}, {"ssl.keystore.location", "k.pem", maps},
		{"ssl.keystore.password", "x", ignored}, {"ssl.key.password", "x", maps}, {"ssl.keystore.key", "x", maps},
		{"ssl.keystore.certificate.chain", "x", maps}, {"ssl.truststore.certificates", "x", maps}, {"ssl.truststore.type", "PEM", maps},
		{"ssl.truststore.location", "t.pem", maps}, {"ssl.truststore.password", "x", ignored},
		{"ssl.keymanager.algorithm", "SunX509", ignored}, {"ssl.trustmanager.algorithm", "PKIX", ignored},
		{"ssl.endpoint.identification.algorithm", "https", maps}, {"ssl.secure.random.implementation", "", ignored},
		{"ssl.engine.factory.class", "", ignored},
		{"sasl.kerberos.service.name", "kafka", ignored}, {"sasl.kerberos.kinit.cmd", "/usr/bin/kinit", ignored},
		{"sasl.kerberos.ticket.renew.window.factor", "0.8", ignored}, {"sasl.kerberos.ticket.renew.jitter", "0.05", ignored},
		{"sasl.kerberos.min.time.before.relogin", "60000", ignored},
		{"sasl.login.refresh.window.factor", "0.8", ignored}, {"sasl.login.refresh.window.jitter", "0.05", ignored},
		{"sasl.login.refresh.min.period.seconds", "60", ignored}, {"sasl.login.refresh.buffer.seconds", "300", ignored},
		{"sasl.mechanism", "PLAIN", maps}, {"sasl.jaas.config", "x", maps}, {"sasl.client.callback.handler.class", "", ignored},
		{"sasl.login.callback.handler.class", "", ignored}, {"sasl.login.class", "", ignored},
		{"sasl.login.connect.timeout.ms", "10000", ignored}, {"sasl.login.read.timeout.ms", "10000", ignored},
		{"sasl.login.retry.backoff.max.ms", "10000", ignored}, {"sasl.login.retry.backoff.ms", "100", ignored},
		{"sasl.oauthbearer.scope.claim.name", "scope", ignored}, {"sasl.oauthbearer.sub.claim.name", "sub", ignored},
		{"sasl.oauthbearer.token.endpoint.url", "https://idp/token", ignored}, {"sasl.oauthbearer.jwks.endpoint.url", "", ignored},
		{"sasl.oauthbearer.jwks.endpoint.refresh.ms", "3600000", ignored},
		{"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "10000", ignored},
		{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "100", ignored}, {"sasl.oauthbearer.clock.skew.seconds", "30", ignored},
		{"sasl.oauthbearer.expected.audience", "", ignored}, {"sasl.oauthbearer.expected.issuer", "", ignored},
		{"sasl.oauthbearer.header.urlencode", "false", ignored}, {"sasl.oauthbearer.jwt.retriever.class", "", ignored},
		{"sasl.oauthbearer.jwt.validator.class", "", ignored},
		{"sasl.oauthbearer.client.credentials.client.id", "c", ignored},
		{"sasl.oauthbearer.client.credentials.client.secret", "s", ignored}, {"sasl.oauthbearer.scope", "kafka", ignored},
		{"sasl.oauthbearer.assertion.algorithm", "RS256", ignored}, {"sasl.oauthbearer.assertion.claim.aud", "", ignored},
		{"sasl.oauthbearer.assertion.claim.exp.seconds", "300", ignored}, {"sasl.oauthbearer.assertion.claim.iss", "", ignored},
		{"sasl.oauthbearer.assertion.claim.jti.include", "false", ignored},
		{"sasl.oauthbearer.assertion.claim.nbf.seconds", "60", ignored}, {"sasl.oauthbearer.assertion.claim.sub", "", ignored},
		{"sasl.oauthbearer.assertion.file", "", ignored}, {"sasl.oauthbearer.assertion.private.key.file", "", ignored},
		{"sasl.oauthbearer.assertion.private.key.passphrase", "", ignored},
		{"sasl.oauthbearer.assertion.template.file", "", ignored},
	}
	for _, k := range keys {
		props := map[string]string{k.key: k.value}
		if strings.HasPrefix(k.key, "ssl.") || strings.HasPrefix(k.key, "sasl.") {
			// Without a protocol that uses it, a TLS or SASL key is an
			// error naming security.protocol (Java ignores it).
			_, err := ConfigFromProperties(props)
			assert.ErrorContains(t, err, "security.protocol", "%s=%s", k.key, k.value)
			props["security.protocol"] = "SASL_SSL"
			if k.key != "sasl.mechanism" {
				props["sasl.mechanism"] = "AWS_MSK_IAM" // needs no other key
			}
		}
		cfg, err := ConfigFromProperties(props)
		if !k.ignored && err != nil {
			// A mapped key may need others (a file, credentials): it is
			// known all the same.
			assert.NotContains(t, err.Error(), "unknown", "%s=%s", k.key, k.value)
			continue
		}
		if !assert.NoError(t, err, "%s=%s", k.key, k.value) {
			continue
		}
		reported := slices.Contains(cfg.IgnoredProperties(), k.key)
		assert.Equal(t, k.ignored, reported, "%s=%s reported as ignored: %v", k.key, k.value, reported)
	}
}

// javaClientDefaults are the keys of kafka-clients 4.4.0's ConsumerConfig
// and AdminClientConfig (configDef().configKeys(), with their defaults)
// and CommonClientConfigs' default.list.* names, less the ssl.*, sasl.*,
// security.protocol and bootstrap.servers keys tested elsewhere: a
// consumer's or an admin client's properties, as a shared
// client.properties holds them.
var javaClientDefaults = []struct{ key, value string }{
	{"allow.auto.create.topics", "true"},
	{"auto.commit.interval.ms", "5000"},
	{"auto.offset.reset", "latest"},
	{"bootstrap.controllers", ""},
	{"bootstrap.resolve.timeout.ms", "0"},
	{"check.crcs", "true"},
	{"client.dns.lookup", "use_all_dns_ips"},
	{"client.id", ""},
	{"client.rack", ""},
	{"config.providers", ""},
	{"connections.max.idle.ms", "300000"},
	{"default.api.timeout.ms", "60000"},
	{"enable.auto.commit", "true"},
	{"enable.metrics.push", "false"},
	{"exclude.internal.topics", "true"},
	{"fetch.max.bytes", "52428800"},
	{"fetch.max.wait.ms", "500"},
	{"fetch.min.bytes", "1"},
	{"group.id", ""},
	{"group.instance.id", ""},
	{"group.protocol", "classic"},
	{"group.remote.assignor", ""},
	{"heartbeat.interval.ms", "3000"},
	{"interceptor.classes", ""},
	{"internal.throw.on.fetch.stable.offset.unsupported", "false"},
	{"isolation.level", "read_uncommitted"},
	{"key.deserializer", ""},
	{"max.partition.fetch.bytes", "1048576"},
	{"max.poll.interval.ms", "300000"},
	{"max.poll.records", "500"},
	{"metadata.cluster.check.enable", "true"},
	{"metadata.max.age.ms", "300000"},
	{"metadata.recovery.rebootstrap.trigger.ms", "300000"},
	{"metadata.recovery.strategy", "rebootstrap"},
	{"metric.reporters", "org.apache.kafka.common.metrics.JmxReporter"},
	{"metrics.num.samples", "2"},
	{"metrics.recording.level", "INFO"},
	{"metrics.sample.window.ms", "30000"},
	{"partition.assignment.strategy", "org.apache.kafka.clients.consumer.RangeAssignor,org.apache.kafka.clients.consumer.CooperativeStickyAssignor"},
	{"receive.buffer.bytes", "65536"},
	{"reconnect.backoff.max.ms", "1000"},
	{"reconnect.backoff.ms", "50"},
	{"request.timeout.ms", "30000"},
	{"retries", "2147483647"},
	{"retry.backoff.max.ms", "1000"},
	{"retry.backoff.ms", "100"},
	{"security.providers", ""},
	{"send.buffer.bytes", "131072"},
	{"session.timeout.ms", "45000"},
	{"share.acknowledgement.mode", "implicit"},
	{"share.acquire.mode", "BATCH_OPTIMIZED"},
	{"socket.connection.setup.timeout.max.ms", "30000"},
	{"socket.connection.setup.timeout.ms", "10000"},
	{"value.deserializer", ""},
	{"default.list.key.serde.inner", ""},
	{"default.list.key.serde.type", ""},
	{"default.list.value.serde.inner", ""},
	{"default.list.value.serde.type", ""},
}

// consumerAdminOnlyKeys are the keys of kafka-clients 4.4.0's consumer,
// admin and common configs that ProducerConfig does not have (and
// client.rack, which the producer has since 4.4 but samsa has no use for).
var consumerAdminOnlyKeys = []string{
	"auto.commit.interval.ms", "auto.offset.reset", "bootstrap.controllers", "check.crcs", "client.rack",
	"default.api.timeout.ms", "default.list.key.serde.inner", "default.list.key.serde.type",
	"default.list.value.serde.inner", "default.list.value.serde.type", "enable.auto.commit",
	"exclude.internal.topics", "fetch.max.bytes", "fetch.max.wait.ms", "fetch.min.bytes", "group.id",
	"group.instance.id", "group.protocol", "group.remote.assignor", "heartbeat.interval.ms",
	"internal.throw.on.fetch.stable.offset.unsupported", "isolation.level", "key.deserializer",
	"max.partition.fetch.bytes", "max.poll.interval.ms", "max.poll.records", "partition.assignment.strategy",
	"rebalance.timeout.ms", "share.acknowledgement.mode", "share.acquire.mode", "value.deserializer",
}

// TestSharedClientPropertiesAccepted: one client.properties serves Java's
// producers, consumers and admin clients. Its consumer and admin keys
// (group.id, auto.offset.reset, client.rack, ...) were unknown-key errors;
// they are accepted and reported by IgnoredProperties, as Java logs them
// ("supplied but isn't a known config"). The producer keys among them are
// mapped as before.
func TestSharedClientPropertiesAccepted(t *testing.T) {
	all := map[string]string{"bootstrap.servers": "k:9092", "metrics.context.team": "payments"}
	for _, kv := range javaClientDefaults {
		all[kv.key] = kv.value
		cfg, err := ConfigFromProperties(map[string]string{"bootstrap.servers": "k:9092", kv.key: kv.value})
		if !assert.NoError(t, err, "%s=%s", kv.key, kv.value) {
			continue
		}
		if slices.Contains(consumerAdminOnlyKeys, kv.key) {
			// No producer setting: reported. (The keys the producer
			// shares map, or are reported, as its own.)
			assert.Contains(t, cfg.IgnoredProperties(), kv.key, "reported as ignored")
		}
	}
	cfg, err := ConfigFromProperties(all)
	require.NoError(t, err)
	ignored := cfg.IgnoredProperties()
	for _, k := range []string{"group.id", "auto.offset.reset", "client.rack", "enable.auto.commit", "isolation.level",
		"key.deserializer", "max.poll.records", "partition.assignment.strategy", "group.protocol",
		"bootstrap.controllers", "default.api.timeout.ms", "share.acknowledgement.mode", "metrics.context.team",
		"default.list.key.serde.inner", "session.timeout.ms", "heartbeat.interval.ms"} {
		assert.Contains(t, ignored, k)
	}
	assert.NotContains(t, ignored, "config.providers", "used (empty: no provider), not ignored")
	assert.Equal(t, []string{"k:9092"}, cfg.Brokers)
}

// TestUnknownKeySuggestsAnyClientKey: a key no Kafka client knows stays
// an error (Java only warns; a typo that drops a setting silently is
// worse), naming the nearest key of any client.
func TestUnknownKeySuggestsAnyClientKey(t *testing.T) {
	cases := []struct{ key, want string }{
		{"linger.m", "linger.ms"},
		{"group.idd", "group.id"},
		{"auto.offset.rest", "auto.offset.reset"},
		{"client.rak", "client.rack"},
		{"config.provider", "config.providers"},
		{"max.poll.record", "max.poll.records"},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			_, err := ConfigFromProperties(map[string]string{"bootstrap.servers": "k:9092", tc.key: "1"})
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.ErrorContains(t, err, `unknown properties: "`+tc.key+`" (did you mean `+tc.want+`?)`)
		})
	}
}
