package producer

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/safetext"
	"github.com/samsa-go/samsa/spool"
)

// javaIntMs are the millisecond keys that Java's ProducerConfig defines as
// int, not long: larger values are refused, as Java refuses them.
var javaIntMs = map[string]bool{
	"delivery.timeout.ms":    true,
	"request.timeout.ms":     true,
	"transaction.timeout.ms": true,
}

// maxMillis is the largest millisecond value a long key takes: larger
// ones (Long.MAX_VALUE) mean it, about 73 years.
const maxMillis = math.MaxInt64 / 4 / int64(time.Millisecond)

// ConfigFromProperties builds a Config from the Java client's producer
// property names, or librdkafka's, so that an existing configuration can be
// brought over unchanged. Values are parsed strictly: whole decimal numbers,
// "true" or "false", and durations as integer milliseconds; surrounding
// spaces are ignored. A value of 0 keeps its Java meaning: linger.ms=0,
// max.block.ms=0, retry.backoff.ms=0 and
// metadata.recovery.rebootstrap.trigger.ms=0 become NoWait (no linger, no
// blocking, no backoff, rebootstrap at once), and a 0 where Java has no
// such meaning is refused.
//
// Keys it maps (librdkafka aliases in parentheses):
//
//	bootstrap.servers (metadata.broker.list)         Brokers, comma-separated
//	client.id                                        ClientID
//	acks (request.required.acks)                     Acks: all, -1, 1, 0
//	linger.ms (queue.buffering.max.ms)               Linger
//	batch.size                                       BatchSize; 0 means 1 (a batch per record)
//	buffer.memory                                    BufferMemory
//	queue.buffering.max.kbytes                       BufferMemory, in KiB
//	max.block.ms                                     MaxBlock
//	max.request.size (message.max.bytes)             MaxRequestSize
//	compression.type (compression.codec)             Compression: none, gzip, snappy, lz4, zstd
//	compression.gzip.level, compression.lz4.level,
//	compression.zstd.level (compression.level)       CompressionLevel, for the codec chosen; each key
//	                                                 given is checked as in Java: gzip 1..9 or -1,
//	                                                 lz4 1..17, zstd -131072..22
//	delivery.timeout.ms (message.timeout.ms)         DeliveryTimeout
//	request.timeout.ms                               RequestTimeout
//	retry.backoff.ms, retry.backoff.max.ms           RetryBackoff, RetryBackoffMax
//	max.in.flight.requests.per.connection
//	  (max.in.flight)                                MaxInFlight
//	metadata.max.age.ms
//	  (topic.metadata.refresh.interval.ms)           MetadataMaxAge
//	metadata.max.idle.ms                             MetadataMaxIdle
//	metadata.recovery.strategy                       MetadataRecoveryStrategy: rebootstrap or none, in
//	                                                 any case, as in Java
//	metadata.recovery.rebootstrap.trigger.ms         MetadataRecoveryRebootstrapTrigger
//	metadata.cluster.check.enable                    DisableMetadataClusterCheck, inverted
//	enable.idempotence                               DisableIdempotence, inverted
//	allow.auto.create.topics                         DisableAutoTopicCreation, inverted
//	enable.metrics.push                              DisableMetricsPush, inverted
//	socket.connection.setup.timeout.ms               DialTimeout
//	socket.connection.setup.timeout.max.ms           DialTimeoutMax
//	connections.max.idle.ms                          ConnMaxIdle; -1 (any negative) is never, 0 is refused
//	client.dns.lookup                                ClientDNSLookup: use_all_dns_ips or
//	                                                 resolve_canonical_bootstrap_servers_only
//	send.buffer.bytes, receive.buffer.bytes          SendBufferBytes, ReceiveBufferBytes; -1 is the
//	                                                 operating system's size (samsa's default)
//	transactional.id                                 TransactionalID (not empty, as in Java)
//	transaction.timeout.ms                           TransactionTimeout
//	partitioner.class                                Java's RoundRobinPartitioner, DefaultPartitioner
//	                                                 (the default), UniformStickyPartitioner (sticky
//	                                                 for keyed records too, as partitioner.ignore.keys)
//	partitioner (librdkafka)                         murmur2_random only (the default)
//	partitioner.ignore.keys                          true: every record uses the sticky partitioner
//	partitioner.adaptive.partitioning.enable         DisableAdaptivePartitioning, inverted
//	partitioner.availability.timeout.ms              PartitionerAvailabilityTimeout (0: off)
//
// samsa's own keys, with no Java counterpart, set Config.Spool (any of
// them sets it; samsa.spool.dir is then required):
//
//	samsa.spool.dir                                  Spool.Dir
//	samsa.spool.mode                                 Spool.Mode: write-ahead, overflow
//	samsa.spool.sync                                 Spool.Sync: none, interval, always
//	samsa.spool.sync.interval.ms                     Spool.SyncInterval
//	samsa.spool.segment.bytes                        Spool.SegmentBytes
//	samsa.spool.max.bytes                            Spool.MaxBytes
//	samsa.spool.header.enable                        Spool.DisableHeader, inverted
//	samsa.spool.exactly.once.enable                  Spool.ExactlyOnce
//	samsa.spool.progress.topic                       Spool.ProgressTopic
//	samsa.spool.commit.interval.ms                   Spool.CommitInterval
//
// Idempotence conflicts are read as kafka-clients 4.4's ProducerConfig
// reads them (checked against it, interop/javaconfig_test.go), and
// refused with its words:
//   - enable.idempotence not given: max.in.flight.requests.per.connection
//     above 5 is an error ("To use the idempotent producer,
//     max.in.flight.requests.per.connection must be set to at most 5.
//     Current value is 6."); otherwise acks other than all (1, 0) or
//     retries=0 turn idempotence off, silently;
//   - enable.idempotence=true: retries=0 ("Must set retries to non-zero
//     when using the idempotent producer."), then acks other than all
//     ("Must set acks to all in order to use the idempotent producer.
//     Otherwise we cannot guarantee idempotence."), then
//     max.in.flight.requests.per.connection above 5 (as above) are errors,
//     the first that applies reported, as Java throws the first;
//   - transactional.id with idempotence off, asked for or turned off by
//     the rules above: "Cannot set a transactional.id without also
//     enabling idempotence.".
//
// librdkafka's max.in.flight (whose client is not idempotent by default)
// above 5 without enable.idempotence still turns idempotence off. Millisecond keys
// take what Java's do: delivery.timeout.ms, request.timeout.ms and
// transaction.timeout.ms are ints (at most 2147483647), the others longs,
// where Long.MAX_VALUE (or anything past 73 years) means 73 years.
//
// interceptor.classes is accepted only empty.
//
// Keys it accepts without a setting to map them to are reported: they are
// listed by Config.IgnoredProperties, and New logs them once, at Warn, to
// Config.Logger (set Logger on the returned Config to see it). They are,
// with why:
// key.serializer and value.serializer (Java classes: Go code serializes,
// see TypedProducer); retries and message.send.max.retries unless
// 2147483647 (samsa retries until DeliveryTimeout, as Java does by
// default; retries=0 still turns idempotence off, above);
// batch.num.messages and queue.buffering.max.messages (librdkafka's:
// batches and the buffer are bounded in bytes, by batch.size and
// buffer.memory); and the keys named below.
//
// TLS and SASL keys (properties_security.go, properties_oauth.go). A value of a secret key
// (a password, the JAAS line) never appears in an error:
//
//	security.protocol                       PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL: sets TLS and SASL
//	sasl.mechanism (sasl.mechanisms)        PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM;
//	                                        GSSAPI and any other mechanism whose module registered a
//	                                        sasl.MechanismFactory (below)
//	sasl.username, sasl.password            the credentials (librdkafka)
//	sasl.jaas.config                        the credentials (Java): PlainLoginModule or ScramLoginModule
//	                                        with username and password options; OAuthBearerLoginModule
//	                                        with clientId, clientSecret, scope and extension_NAME options
//	sasl.oauthbearer.token.endpoint.url     OAUTHBEARER by the OIDC client credentials grant (KIP-768):
//	                                        https://, http://, or file: (a file holding the token, read
//	                                        again when it changes); see sasl.ClientCredentials. Only a
//	                                        URL listed in the environment variable
//	                                        SAMSA_OAUTHBEARER_ALLOWED_URLS (EnvAllowedTokenURLs) is
//	                                        taken, as Kafka 4.0+ asks of the system property
//	                                        org.apache.kafka.sasl.oauthbearer.allowed.urls
//	sasl.oauthbearer.client.credentials.client.id,
//	  ...client.secret, sasl.oauthbearer.scope
//	                                        Kafka 4.1's keys for clientId, clientSecret and scope (they
//	                                        win over the JAAS options, as in Java)
//	sasl.oauthbearer.header.urlencode       URL-encode the client id and secret in the Basic header
//	sasl.oauthbearer.jwt.retriever.class    Java's retrievers in org.apache.kafka.common.security.oauthbearer:
//	                                        DefaultJwtRetriever (default), ClientCredentialsJwtRetriever,
//	                                        JwtBearerJwtRetriever (KIP-1139's jwt-bearer grant, by
//	                                        sasl.JWTBearer), FileJwtRetriever; another class is an error
//	sasl.oauthbearer.assertion.file,
//	  ...assertion.private.key.file,
//	  ...assertion.private.key.passphrase,
//	  ...assertion.algorithm (RS256, ES256),
//	  ...assertion.claim.aud, .iss, .sub,
//	  ...assertion.claim.exp.seconds (300),
//	  ...assertion.claim.nbf.seconds (60),
//	  ...assertion.claim.jti.include (false),
//	  ...assertion.template.file            the JWT assertion (sasl.AssertionConfig) of the jwt-bearer
//	                                        grant, or of the client credentials grant instead of the
//	                                        secret (KIP-1258: when .claim.iss or .assertion.file is set);
//	                                        the files must be listed in SAMSA_OAUTHBEARER_ALLOWED_FILES
//	                                        (EnvAllowedFiles; unset: none, as Java's allowed.files)
//	sasl.login.callback.handler.class       with a token endpoint: Kafka's OAuthBearerLoginCallbackHandler
//	                                        (either package) or unset; another class is an error
//	sasl.login.connect.timeout.ms,
//	  sasl.login.read.timeout.ms            the token endpoint's timeouts (default 10s each; 0: none)
//	sasl.login.retry.backoff.ms,
//	  sasl.login.retry.backoff.max.ms       retries of a token fetch (100ms doubling, for up to 10s)
//	sasl.login.refresh.window.factor,
//	  sasl.login.refresh.window.jitter,
//	  sasl.login.refresh.min.period.seconds,
//	  sasl.login.refresh.buffer.seconds     when a token is refreshed (0.8, 0.05, 60, 300, as in Java)
//	ssl.ca.location, ssl.truststore.location
//	  (ssl.truststore.type PEM)             the CAs to trust, a PEM file; default: the system's
//	ssl.truststore.certificates             the CAs to trust, as PEM text
//	ssl.certificate.location,
//	  ssl.key.location, ssl.key.password    a client certificate (mutual TLS): PEM files; the key
//	                                        PKCS#8, PKCS#1 or SEC 1, encrypted or not
//	ssl.keystore.location
//	  (ssl.keystore.type PEM)               a client certificate and its key in one PEM file
//	ssl.keystore.certificate.chain,
//	  ssl.keystore.key                      the same as PEM text
//	ssl.endpoint.identification.algorithm   https (default) or empty (librdkafka: none): empty
//	                                        skips the host name check; the chain is still verified
//	enable.ssl.certificate.verification     false skips every certificate check (librdkafka)
//	ssl.protocol, ssl.enabled.protocols     TLSv1.2 or TLSv1.3: the lowest version allowed
//
// JKS and PKCS12 stores are refused with an error that says how to convert
// them to PEM. The token endpoint of OAUTHBEARER is verified against the
// system's roots plus, with SSL or SASL_SSL, the CAs of ssl.ca.location or
// ssl.truststore.* (Java uses the JVM's trust there); the brokers'
// verification switches and client certificate do not apply to it. Its
// failed background refreshes are logged at Warn to slog.Default() (no
// Config.Logger is known yet; build sasl.ClientCredentials in code to
// choose the logger).
// AWS_MSK_IAM, and OAUTHBEARER without sasl.oauthbearer.token.endpoint.url,
// need code: ConfigFromProperties then sets a Config.SASL that fails every
// connection with a message saying so; replace it with
// sasl.OAuthBearer(...) or the mechanism of the module
// github.com/samsa-go/samsa/sasl/awsmskiam. The sasl.login.* and
// sasl.oauthbearer.* keys above are reported as ignored when they
// configure no login.
//
// GSSAPI (Kerberos) lives in the module
// github.com/samsa-go/samsa/sasl/kerberos, which registers a
// sasl.MechanismFactory when imported (import _ "github.com/samsa-go/samsa/sasl/kerberos"):
// ConfigFromProperties then builds it from sasl.jaas.config
// (Krb5LoginModule), sasl.kerberos.* and the keys that module documents,
// and, as in Java, takes GSSAPI when sasl.mechanism is not set. Without the
// import, GSSAPI is an error saying so. A factory registered for another
// name (not PLAIN, SCRAM or OAUTHBEARER) builds that mechanism the same
// way, with every property, and the keys it declares are accepted.
//
// Also reported as ignored:
// ssl.truststore.password and ssl.keystore.password (PEM files have none),
// session.timeout.ms (a consumer setting that Confluent Cloud's templates
// include), sasl.client.callback.handler.class (Java classes cannot be
// loaded), and sasl.login.callback.handler.class without a token endpoint.
//
// The rest of the Java producer's documented keys (Apache Kafka 4.x) are
// reported as ignored too, because samsa has no setting for them and none
// changes what is delivered: reconnect.backoff.ms and
// reconnect.backoff.max.ms (reconnections wait RetryBackoff, doubled up to
// RetryBackoffMax), bootstrap.resolve.timeout.ms, the metrics keys
// (metric.reporters, metrics.*, auto.include.jmx.reporter: see
// Producer.Metrics and Hooks), the Java security
// plumbing (security.providers, ssl.provider, ssl.cipher.suites,
// ssl.engine.factory.class, ssl.keymanager.algorithm,
// ssl.trustmanager.algorithm, ssl.secure.random.implementation,
// sasl.login.class), sasl.kerberos.* (unless GSSAPI is built by the
// factory the sasl/kerberos module registers), the
// sasl.oauthbearer.* keys of the broker's token validation, and transaction.two.phase.commit.enable. javaIgnoredKeys
// lists them.
//
// The Schema Registry serializers' keys (schema.registry.*, basic.auth.*,
// bearer.auth.*, auto.register.schemas, use.latest.version,
// key.subject.name.strategy, value.subject.name.strategy and the others of
// module github.com/samsa-go/samsa/serde/schemaregistry) are accepted
// without a word, so that one properties file serves both: that module's
// ConfigFromProperties reads them, and reports their typos.
//
// One client.properties may serve Java's producers, consumers and admin
// clients: the keys of kafka-clients 4.4's ConsumerConfig,
// AdminClientConfig and CommonClientConfigs that the producer has no use
// for (group.id, auto.offset.reset, client.rack, enable.auto.commit,
// isolation.level, key.deserializer, max.poll.records,
// partition.assignment.strategy, bootstrap.controllers, metrics.context.*
// and the others of otherClientKeys) are accepted and reported as
// ignored, as Java logs them ("supplied but isn't a known config").
//
// Config providers (KIP-297, KIP-887; properties_providers.go) run first,
// as in Java: with config.providers=NAME and config.providers.NAME.class
// one of Java's FileConfigProvider, DirectoryConfigProvider or
// EnvVarConfigProvider, a placeholder ${NAME:path:key} (${NAME:VAR} for
// environment variables) in any value is replaced with what the provider
// reads, so that a password kept in a Kubernetes secret file reaches
// sasl.jaas.config. Their allowed.paths and allowlist.pattern parameters
// are honoured, and the environment variable SAMSA_AUTOMATIC_CONFIG_PROVIDERS
// (EnvAutomaticConfigProviders; Java's system property
// org.apache.kafka.automatic.config.providers) or ConfigFromPropertiesWith
// restricts which classes may run. A placeholder that cannot be resolved
// (no such provider, no such key, a path not allowed) is an error naming
// the key and the provider; Java would leave it in the value. A value a
// provider filled in never appears in an error. A file a provider reads
// may be up to 1 MiB, a filled-in value too, and 16 MiB are read in all.
//
// ssl.* keys (and enable.ssl.certificate.verification) without
// security.protocol SSL or SASL_SSL, and sasl.* keys without
// SASL_PLAINTEXT or SASL_SSL, are an error naming security.protocol: Java
// ignores them with a warning, and its client then connects without TLS
// or without authenticating.
//
// Any other key is an error, naming the nearest known key when it looks like a typo
// (`"lingr.ms" (did you mean linger.ms?)`). The returned error wraps
// ErrInvalidConfig and lists every problem: the unknown keys, sorted (the
// first 10, then how many more), then every bad value. Keys and values are
// quoted in it as strconv.Quote does, each cut at 256 bytes, so that
// neither a newline nor a megabyte in the input reaches an error or a log
// line. Its time is linear in the size of props.
// ConfigFromProperties does not apply defaults or check settings against
// each other; New does.
func ConfigFromProperties(props map[string]string) (Config, error) {
	return configFromProperties(props, PropertiesOptions{})
}

func configFromProperties(props map[string]string, opts PropertiesOptions) (Config, error) {
	// Config providers first (properties_providers.go), as in Java.
	res := resolveConfigProviders(props, opts)
	if len(res.bad) > 0 {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(res.bad, "; "))
	}
	props = res.props
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	var (
		c       Config
		unknown []string
		ignored []string
		bad     []string
		setBy   = map[string]string{} // Config field -> the key that set it
		idemSet bool
		// retriesKey: the key that said retries=0, which turns
		// idempotence off unless enable.idempotence=true, which it
		// contradicts (Java's rules).
		retriesKey string
		sec        securityProps // TLS and SASL keys (properties_security.go)
		// spoolCfg collects the samsa.spool.* keys; spoolKey is one of
		// them (Config.Spool is set when there is one).
		spoolCfg SpoolConfig
		spoolKey string
	)
	fail := func(key, format string, args ...any) {
		if name, ok := res.from[key]; ok {
			// A provider's value may be a secret: never printed.
			for i, a := range args {
				if _, ok := a.(string); ok {
					args[i] = "(the value from config provider " + name + ")"
				}
			}
		}
		for i, a := range args {
			// Values are printed with %q: bounded (untrusted).
			if v, ok := a.(string); ok {
				args[i] = untrusted(v)
			}
		}
		bad = append(bad, key+": "+fmt.Sprintf(format, args...))
	}
	// claim reports whether key may set field: false (with an error) when
	// another key (an alias) already set it.
	claim := func(key, field string) bool {
		if prev, ok := setBy[field]; ok {
			fail(key, "conflicts with %s (both set %s)", prev, field)
			return false
		}
		setBy[field] = key
		return true
	}
	ms := func(key, v string) (time.Duration, bool) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			fail(key, "%q is not a number of milliseconds", v)
			return 0, false
		}
		// Java's int keys stop at Integer.MAX_VALUE (24.8 days), as
		// there; its long keys take Long.MAX_VALUE (a common "forever"),
		// which is 73 years here: a quarter of the largest Duration, so
		// that the sums and doublings of timeouts cannot overflow.
		if javaIntMs[key] && n > math.MaxInt32 {
			fail(key, "%q is more than Java's int allows (2147483647 ms)", v)
			return 0, false
		}
		if n > maxMillis {
			n = maxMillis
		}
		return time.Duration(n) * time.Millisecond, true
	}
	// positiveMS is ms for a key that must not be 0 (the spool's
	// intervals).
	positiveMS := func(key, v string) (time.Duration, bool) {
		d, ok := ms(key, v)
		if ok && d == 0 {
			fail(key, "must be positive")
			return 0, false
		}
		return d, ok
	}
	// msZero is ms where 0 means no wait, which Config spells NoWait.
	msZero := func(key, v string) (time.Duration, bool) {
		d, ok := ms(key, v)
		if ok && d == 0 {
			d = NoWait
		}
		return d, ok
	}
	// positiveMs sets *dst (field, for alias conflicts) to a duration that
	// must not be 0.
	positiveMs := func(key, v, field string, dst *time.Duration) {
		d, ok := ms(key, v)
		if ok && d == 0 {
			fail(key, "must be positive")
			return
		}
		if ok && claim(key, field) {
			*dst = d
		}
	}
	integer := func(key, v string, lo, hi int64) (int64, bool) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			fail(key, "%q is not an integer in [%d, %d]", v, lo, hi)
			return 0, false
		}
		return n, true
	}
	boolean := func(key, v string) (bool, bool) {
		switch strings.ToLower(v) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
		fail(key, "%q is not true or false", v)
		return false, false
	}

	var levelKeys = map[string]compression.Type{
		"compression.gzip.level": compression.Gzip,
		"compression.lz4.level":  compression.LZ4,
		"compression.zstd.level": compression.Zstd,
	}
	levelRanges := map[compression.Type][2]int64{
		compression.Gzip: {-1, 9},
		compression.LZ4:  {1, 17},
		compression.Zstd: {-131072, 22},
	}
	levels := map[compression.Type]int{}
	genericLevel, genericLevelSet := 0, false

	for _, key := range keys {
		v := strings.TrimSpace(props[key])
		switch key {
		case "bootstrap.servers", "metadata.broker.list":
			if !claim(key, "Brokers") {
				continue
			}
			for _, b := range strings.Split(v, ",") {
				if b = strings.TrimSpace(b); b != "" {
					c.Brokers = append(c.Brokers, b)
				}
			}
			if len(c.Brokers) == 0 {
				fail(key, "no broker in %q", v)
			}
		case "client.id":
			if claim(key, "ClientID") {
				c.ClientID = v
			}
		case "acks", "request.required.acks":
			if !claim(key, "Acks") {
				continue
			}
			// Java's values only (samsa's "leader" and "none" are not
			// property values): ParseAcks accepts both.
			if a, err := ParseAcks(v); err == nil && !slices.Contains([]string{"leader", "none"}, strings.ToLower(strings.TrimSpace(v))) {
				c.Acks = a
			} else {
				fail(key, "%q is not one of all, -1, 1, 0", v)
			}
		case "linger.ms", "queue.buffering.max.ms":
			if d, ok := msZero(key, v); ok && claim(key, "Linger") {
				c.Linger = d
			}
		case "batch.size":
			if n, ok := integer(key, v, 0, math.MaxInt32); ok && claim(key, "BatchSize") {
				c.BatchSize = max(int(n), 1)
			}
		case "buffer.memory":
			if n, ok := integer(key, v, 1, math.MaxInt64); ok && claim(key, "BufferMemory") {
				c.BufferMemory = n
			}
		case "queue.buffering.max.kbytes":
			if n, ok := integer(key, v, 1, math.MaxInt64>>10); ok && claim(key, "BufferMemory") {
				c.BufferMemory = n << 10
			}
		case "max.block.ms":
			if d, ok := msZero(key, v); ok && claim(key, "MaxBlock") {
				c.MaxBlock = d
			}
		case "max.request.size", "message.max.bytes":
			if n, ok := integer(key, v, 1, math.MaxInt32); ok && claim(key, "MaxRequestSize") {
				c.MaxRequestSize = int(n)
			}
		case "compression.type", "compression.codec":
			if !claim(key, "Compression") {
				continue
			}
			t, err := compression.ParseType(v)
			if err != nil {
				fail(key, "%q is not one of none, gzip, snappy, lz4, zstd", v)
				continue
			}
			c.Compression = t
		case "compression.gzip.level", "compression.lz4.level", "compression.zstd.level":
			// Java checks each key given, whatever compression.type is
			// (KIP-390's ranges): gzip 1..9 or -1 (its default), lz4
			// 1..17, zstd -131072..22.
			r := levelRanges[levelKeys[key]]
			n, ok := integer(key, v, r[0], r[1])
			if ok && levelKeys[key] == compression.Gzip && n == 0 {
				fail(key, "%q is not an integer in [1, 9] or -1", v)
				ok = false
			}
			if ok {
				levels[levelKeys[key]] = int(n)
			}
		case "compression.level":
			if n, ok := integer(key, v, -1, 22); ok {
				genericLevel, genericLevelSet = int(n), true
			}
		case "delivery.timeout.ms", "message.timeout.ms":
			d, ok := ms(key, v)
			if ok && d == 0 {
				fail(key, "0 (no timeout) is not supported: records always have a delivery timeout")
				continue
			}
			if ok && claim(key, "DeliveryTimeout") {
				c.DeliveryTimeout = d
			}
		case "request.timeout.ms":
			positiveMs(key, v, "RequestTimeout", &c.RequestTimeout)
		case "retry.backoff.ms":
			if d, ok := msZero(key, v); ok && claim(key, "RetryBackoff") {
				c.RetryBackoff = d
			}
		case "retry.backoff.max.ms":
			positiveMs(key, v, "RetryBackoffMax", &c.RetryBackoffMax)
		case "max.in.flight.requests.per.connection", "max.in.flight":
			if n, ok := integer(key, v, 1, math.MaxInt32); ok && claim(key, "MaxInFlight") {
				c.MaxInFlight = int(n)
			}
		case "metadata.max.age.ms", "topic.metadata.refresh.interval.ms":
			positiveMs(key, v, "MetadataMaxAge", &c.MetadataMaxAge)
		case "metadata.max.idle.ms":
			positiveMs(key, v, "MetadataMaxIdle", &c.MetadataMaxIdle)
		case "metadata.recovery.strategy":
			// Java's CaseInsensitiveValidString: none or rebootstrap,
			// in any case.
			switch l := MetadataRecoveryStrategy(strings.ToLower(v)); l {
			case MetadataRecoveryRebootstrap, MetadataRecoveryNone:
				c.MetadataRecoveryStrategy = l
			default:
				fail(key, "%q is not %s or %s", v, MetadataRecoveryRebootstrap, MetadataRecoveryNone)
			}
		case "metadata.recovery.rebootstrap.trigger.ms":
			if d, ok := msZero(key, v); ok {
				c.MetadataRecoveryRebootstrapTrigger = d
			}
		case "metadata.cluster.check.enable":
			if b, ok := boolean(key, v); ok {
				c.DisableMetadataClusterCheck = !b
			}
		case "enable.idempotence":
			if b, ok := boolean(key, v); ok {
				c.DisableIdempotence, idemSet = !b, true
			}
		case "allow.auto.create.topics":
			if b, ok := boolean(key, v); ok {
				c.DisableAutoTopicCreation = !b
			}
		case "enable.metrics.push":
			if b, ok := boolean(key, v); ok {
				c.DisableMetricsPush = !b
			}
		case "socket.connection.setup.timeout.ms":
			positiveMs(key, v, "DialTimeout", &c.DialTimeout)
		case "socket.connection.setup.timeout.max.ms":
			positiveMs(key, v, "DialTimeoutMax", &c.DialTimeoutMax)
		case "connections.max.idle.ms":
			// Java: a long; a negative value turns idle closing off.
			// 0 would close every connection the moment it goes
			// idle: refused, as Config's 0 means the default.
			n, err := strconv.ParseInt(v, 10, 64)
			switch {
			case err != nil:
				fail(key, "%q is not a number of milliseconds (-1 for never)", v)
			case n < 0:
				c.ConnMaxIdle = -time.Millisecond
			case n == 0:
				fail(key, "0 would close every connection as soon as it is idle: give a positive time, or -1 for never")
			default:
				c.ConnMaxIdle = time.Duration(min(n, maxMillis)) * time.Millisecond
			}
		case "client.dns.lookup":
			// Java's ConfigDef: these two values, exactly (3.0 removed
			// "default").
			switch l := DNSLookup(v); l {
			case DNSUseAllIPs, DNSResolveCanonicalBootstrapServersOnly:
				c.ClientDNSLookup = l
			default:
				fail(key, "%q is not %s or %s", v, DNSUseAllIPs, DNSResolveCanonicalBootstrapServersOnly)
			}
		case "send.buffer.bytes", "receive.buffer.bytes":
			// Java: at least -1, the OS default; 0 passes its ConfigDef
			// but fails every connection (Socket refuses a 0 size).
			n, ok := integer(key, v, -1, math.MaxInt32)
			if ok && n == 0 {
				fail(key, "0 is not a buffer size: give a positive size, or -1 for the operating system's")
				continue
			}
			if ok && key == "send.buffer.bytes" {
				c.SendBufferBytes = int(n)
			} else if ok {
				c.ReceiveBufferBytes = int(n)
			}
		case "transactional.id":
			if v == "" {
				// Java: NonEmptyString (leave the key out for none).
				fail(key, "must not be empty (leave it out for a producer without transactions)")
				continue
			}
			c.TransactionalID = v
		case "transaction.timeout.ms":
			positiveMs(key, v, "TransactionTimeout", &c.TransactionTimeout)
		case "partitioner.class":
			if !claim(key, "Partitioner") {
				continue
			}
			switch v {
			case "org.apache.kafka.clients.producer.RoundRobinPartitioner":
				c.Partitioner = RoundRobinPartitioner()
			case "org.apache.kafka.clients.producer.internals.DefaultPartitioner", "":
				// The default: KIP-794 sticky with murmur2 for keys.
			case "org.apache.kafka.clients.producer.UniformStickyPartitioner":
				// Sticky for every record, keyed or not (Java's
				// replacement is partitioner.ignore.keys=true).
				c.Partitioner = ignoreKeysPartitioner{}
			default:
				fail(key, "%q cannot be loaded in Go: set Config.Partitioner instead", v)
			}
		case "partitioner":
			if !claim(key, "Partitioner") {
				continue
			}
			if v != "murmur2_random" {
				fail(key, "%q is not supported: samsa's default partitioner is murmur2_random (Java's); set Config.Partitioner for others", v)
			}
		case "partitioner.ignore.keys":
			if b, ok := boolean(key, v); ok && b && claim(key, "Partitioner") {
				c.Partitioner = ignoreKeysPartitioner{}
			}
		case "partitioner.adaptive.partitioning.enable":
			if b, ok := boolean(key, v); ok {
				c.DisableAdaptivePartitioning = !b
			}
		case "partitioner.availability.timeout.ms":
			if d, ok := ms(key, v); ok {
				c.PartitionerAvailabilityTimeout = d // 0: off, Java's default
			}
		case "retries", "message.send.max.retries":
			// Retries run until DeliveryTimeout whatever the count (as
			// Java's default, 2147483647, does; Java recommends
			// delivery.timeout.ms over retries): another count is
			// reported as ignored. 0 also asks for no idempotence, as in
			// Java.
			n, ok := integer(key, v, 0, math.MaxInt32)
			if ok && n == 0 {
				retriesKey = key
			}
			if ok && n != math.MaxInt32 {
				ignored = append(ignored, key)
			}
		case "batch.num.messages", "queue.buffering.max.messages":
			// Accepted and reported as ignored (see the doc comment),
			// once the value parses, so that a typo does not pass
			// silently.
			if _, ok := integer(key, v, 0, math.MaxInt32); ok {
				ignored = append(ignored, key)
			}
		case "key.serializer", "value.serializer":
			// Java class names: reported as ignored; Go code uses
			// TypedProducer.
			ignored = append(ignored, key)
		case "samsa.spool.dir":
			spoolKey, spoolCfg.Dir = key, v
			if v == "" {
				fail(key, "must not be empty")
			}
		case "samsa.spool.mode":
			spoolKey = key
			switch SpoolMode(v) {
			case SpoolWriteAhead, SpoolOverflow:
				spoolCfg.Mode = SpoolMode(v)
			default:
				fail(key, "%q is not %s or %s", v, string(SpoolWriteAhead), string(SpoolOverflow))
			}
		case "samsa.spool.sync":
			spoolKey = key
			if pol, err := spool.ParseSyncPolicy(strings.ToLower(v)); err == nil && v != "" {
				spoolCfg.Sync = pol
			} else {
				fail(key, "%q is not none, interval or always", v)
			}
		case "samsa.spool.sync.interval.ms":
			spoolKey = key
			if d, ok := positiveMS(key, v); ok {
				spoolCfg.SyncInterval = d
			}
		case "samsa.spool.segment.bytes":
			spoolKey = key
			if n, ok := integer(key, v, 1, math.MaxInt64); ok {
				spoolCfg.SegmentBytes = n
			}
		case "samsa.spool.max.bytes":
			spoolKey = key
			if n, ok := integer(key, v, 1, math.MaxInt64); ok {
				spoolCfg.MaxBytes = n
			}
		case "samsa.spool.header.enable":
			spoolKey = key
			if b, ok := boolean(key, v); ok {
				spoolCfg.DisableHeader = !b
			}
		case "samsa.spool.exactly.once.enable":
			spoolKey = key
			if b, ok := boolean(key, v); ok {
				spoolCfg.ExactlyOnce = b
			}
		case "samsa.spool.progress.topic":
			spoolKey, spoolCfg.ProgressTopic = key, v
			if v == "" {
				fail(key, "must not be empty")
			}
		case "samsa.spool.commit.interval.ms":
			spoolKey = key
			if d, ok := positiveMS(key, v); ok {
				spoolCfg.CommitInterval = d
			}
		case "interceptor.classes":
			if v != "" {
				fail(key, "%q cannot be loaded in Go, and interceptors may change what is sent: wrap Send instead", v)
			}
		default:
			switch {
			case refusedKeys[key] != "":
				bad = append(bad, key+": "+refusedKeys[key])
			case javaIgnoredKeys[key]:
				ignored = append(ignored, key)
			case serdeKey(key):
				// Read by serde/schemaregistry from the same file.
			case sec.take(key, v):
			case otherClientKey(key):
				ignored = append(ignored, key)
			default:
				unknown = append(unknown, key)
			}
		}
	}
	if spoolKey != "" {
		if spoolCfg.Dir == "" && props["samsa.spool.dir"] == "" {
			fail(spoolKey, "needs samsa.spool.dir")
		}
		c.Spool = &spoolCfg
	}
	sec.props = props
	ignored = append(ignored, sec.apply(&c, fail)...)
	ignored = slices.DeleteFunc(ignored, sec.usedByFactory)

	if genericLevelSet && genericLevel != -1 {
		if _, ok := levels[c.Compression]; ok {
			fail("compression.level", "conflicts with compression.%v.level", c.Compression)
		} else {
			levels[c.Compression] = genericLevel
		}
	}
	if l, ok := levels[c.Compression]; ok && !(c.Compression == compression.Gzip && l == -1) {
		// Java's gzip default is spelled -1; ours is 0.
		c.CompressionLevel = l
	}
	if idemBad := idempotenceConflict(&c, idemSet, setBy, retriesKey); idemBad != "" {
		bad = append(bad, idemBad)
	} else if c.TransactionalID != "" && c.DisableIdempotence {
		bad = append(bad, "transactional.id: "+javaTxnWithoutIdempotence)
	}

	if len(unknown) > 0 {
		bad = append([]string{unknownKeys(unknown)}, bad...)
	}
	if len(bad) > 0 {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(bad, "; "))
	}
	ignored = append(ignored, res.ignored...)
	slices.Sort(ignored)
	c.ignoredProps = slices.Compact(ignored)
	return c, nil
}

// IgnoredProperties returns the keys that ConfigFromProperties accepted
// without a setting to map them to (its doc lists them, with why), sorted,
// so that a program can check or print them; New also logs them once at
// Warn. It is empty for a Config not built by ConfigFromProperties, or
// built from keys that all map. The slice is the caller's.
func (c Config) IgnoredProperties() []string {
	return slices.Clone(c.ignoredProps)
}

// untrusted is a string argument of an error of ConfigFromProperties:
// with %q, as every value of the input is printed, it is quoted as
// strconv.Quote does and cut at 256 bytes (safetext.Quote); other verbs
// print it as is (names and hints of our own).
type untrusted string

func (u untrusted) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		io.WriteString(f, safetext.Quote(string(u)))
		return
	}
	io.WriteString(f, string(u))
}

// Java's ConfigException messages for the idempotence conflicts
// (kafka-clients 4.4, ProducerConfig), which ConfigFromProperties repeats
// word for word after the key.
const (
	javaIdempotenceRetries     = "Must set retries to non-zero when using the idempotent producer."
	javaIdempotenceAcks        = "Must set acks to all in order to use the idempotent producer. Otherwise we cannot guarantee idempotence."
	javaIdempotenceMaxInFlight = "To use the idempotent producer, max.in.flight.requests.per.connection must be set to at most 5. Current value is %d."
	javaTxnWithoutIdempotence  = "Cannot set a transactional.id without also enabling idempotence."
	javaMaxInFlightKey         = "max.in.flight.requests.per.connection"
)

// idempotenceConflict applies kafka-clients 4.4's rules (see
// ConfigFromProperties) to c once every key is read: it turns idempotence
// off where Java does, or returns the error Java throws first, after the
// key that caused it ("" when none). idemSet says enable.idempotence was
// given; setBy names the key that set each field; retriesKey is the key
// that said retries=0 ("" when none did).
func idempotenceConflict(c *Config, idemSet bool, setBy map[string]string, retriesKey string) string {
	mifTooMany := c.MaxInFlight > idempotenceMaxInFlight
	mifKey := setBy["MaxInFlight"]
	if !idemSet {
		if mifTooMany && mifKey == javaMaxInFlightKey {
			return mifKey + ": " + fmt.Sprintf(javaIdempotenceMaxInFlight, c.MaxInFlight)
		}
		if c.Acks != AcksAll || mifTooMany || retriesKey != "" {
			c.DisableIdempotence = true
		}
		return ""
	}
	if c.DisableIdempotence {
		return ""
	}
	switch {
	case retriesKey != "":
		return retriesKey + ": " + javaIdempotenceRetries
	case c.Acks != AcksAll:
		return setBy["Acks"] + ": " + javaIdempotenceAcks
	case mifTooMany:
		return mifKey + ": " + fmt.Sprintf(javaIdempotenceMaxInFlight, c.MaxInFlight)
	}
	return ""
}
