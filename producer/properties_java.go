package producer

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/samsa-go/samsa/internal/safetext"
)

// javaIgnoredKeys are the Java producer's documented configuration keys
// (Apache Kafka 4.x) that samsa has no setting for and that change nothing
// a record's delivery depends on: socket, reconnection, metrics and
// plugin knobs, Kerberos, the OAUTHBEARER keys samsa's client
// credentials login has no use for (JWT assertions, the broker's
// validation settings), and transaction tuning samsa has no setting for
// (transaction.two.phase.commit.enable); ConfigFromProperties's doc says
// why for each. ConfigFromProperties accepts them and reports them
// (Config.IgnoredProperties; New logs them once at Warn). Keys that
// ConfigFromProperties maps, or that properties_security.go and
// properties_oauth.go take, are not listed here.
var javaIgnoredKeys = map[string]bool{
	"auto.include.jmx.reporter":                           true,
	"bootstrap.resolve.timeout.ms":                        true,
	"metric.reporters":                                    true,
	"metrics.num.samples":                                 true,
	"metrics.recording.level":                             true,
	"metrics.sample.window.ms":                            true,
	"reconnect.backoff.max.ms":                            true,
	"reconnect.backoff.ms":                                true,
	"transaction.two.phase.commit.enable":                 true,
	"sasl.kerberos.kinit.cmd":                             true,
	"sasl.kerberos.min.time.before.relogin":               true,
	"sasl.kerberos.service.name":                          true,
	"sasl.kerberos.ticket.renew.jitter":                   true,
	"sasl.kerberos.ticket.renew.window.factor":            true,
	"sasl.login.class":                                    true,
	"sasl.oauthbearer.clock.skew.seconds":                 true,
	"sasl.oauthbearer.expected.audience":                  true,
	"sasl.oauthbearer.expected.issuer":                    true,
	"sasl.oauthbearer.jwks.endpoint.refresh.ms":           true,
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": true,
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":     true,
	"sasl.oauthbearer.jwks.endpoint.url":                  true,
	"sasl.oauthbearer.jwt.validator.class":                true,
	"sasl.oauthbearer.scope.claim.name":                   true,
	"sasl.oauthbearer.sub.claim.name":                     true,
	"security.providers":                                  true,
	"ssl.cipher.suites":                                   true,
	"ssl.engine.factory.class":                            true,
	"ssl.keymanager.algorithm":                            true,
	"ssl.provider":                                        true,
	"ssl.secure.random.implementation":                    true,
	"ssl.trustmanager.algorithm":                          true,
}

// serdeKeys are the keys of the Schema Registry serializers (module
// github.com/samsa-go/samsa/serde/schemaregistry, after Java's
// AbstractKafkaSchemaSerDeConfig) outside the prefixes of serdeKey.
var serdeKeys = map[string]bool{
	"auto.register.schemas":       true,
	"use.latest.version":          true,
	"latest.compatibility.strict": true,
	"key.subject.name.strategy":   true,
	"value.subject.name.strategy": true,
	"normalize.schemas":           true,
	"json.fail.invalid.schema":    true,
	"max.retries":                 true,
	"retries.wait.ms":             true,
	"retries.max.wait.ms":         true,
	"http.connect.timeout.ms":     true,
	"http.read.timeout.ms":        true,
	"max.schemas.per.subject":     true,
}

// serdeKey reports whether key belongs to the Schema Registry
// serializers, which read the producer's properties file too: the
// producer accepts it silently and leaves it to them.
func serdeKey(key string) bool {
	for _, p := range []string{"schema.registry.", "basic.auth.", "bearer.auth."} {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return serdeKeys[key]
}

// refusedKeys are Java producer keys that would silently change semantics
// samsa does not honour, with the reason ConfigFromProperties gives.
var refusedKeys = map[string]string{}

// mappedKeys are the keys ConfigFromProperties itself parses (its switch);
// with securityKeys and javaIgnoredKeys they are the known keys an unknown
// key is compared with.
var mappedKeys = []string{
	"bootstrap.servers", "metadata.broker.list", "client.id", "acks", "request.required.acks",
	"linger.ms", "queue.buffering.max.ms", "batch.size", "buffer.memory", "queue.buffering.max.kbytes",
	"max.block.ms", "max.request.size", "message.max.bytes", "compression.type", "compression.codec",
	"compression.gzip.level", "compression.lz4.level", "compression.zstd.level", "compression.level",
	"delivery.timeout.ms", "message.timeout.ms", "request.timeout.ms", "retry.backoff.ms",
	"retry.backoff.max.ms", "max.in.flight.requests.per.connection", "max.in.flight",
	"metadata.max.age.ms", "topic.metadata.refresh.interval.ms", "metadata.max.idle.ms",
	"enable.idempotence", "allow.auto.create.topics", "socket.connection.setup.timeout.ms",
	"socket.connection.setup.timeout.max.ms", "connections.max.idle.ms", "client.dns.lookup", "send.buffer.bytes", "receive.buffer.bytes",
	"partitioner.class", "partitioner", "partitioner.ignore.keys",
	"partitioner.adaptive.partitioning.enable", "partitioner.availability.timeout.ms", "retries", "message.send.max.retries",
	"batch.num.messages", "queue.buffering.max.messages", "key.serializer", "value.serializer",
	"interceptor.classes", "transactional.id", "transaction.timeout.ms",
}

// maxUnknownListed bounds the unknown keys an error lists (the first ones,
// sorted), and so the keys compared with the known ones.
const maxUnknownListed = 10

// unknownKeys describes the unknown keys (sorted) for the error: the first
// maxUnknownListed quoted (bounded, escaped: safetext.Quote), each with the
// nearest known key when one is close enough to be a likely typo, then how
// many more there are. Its time is linear in the keys listed, whatever
// their number and length.
func unknownKeys(keys []string) string {
	var b strings.Builder
	b.WriteString("unknown properties: ")
	for i, key := range keys[:min(len(keys), maxUnknownListed)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(safetext.Quote(key))
		if near := nearestKnownKey(key); near != "" {
			b.WriteString(" (did you mean " + near + "?)")
		}
	}
	if n := len(keys) - maxUnknownListed; n > 0 {
		fmt.Fprintf(&b, " (and %d more)", n)
	}
	return b.String()
}

// nearestKnownKey returns the known key nearest to key when it is a likely
// typo: a few edits, more for long keys (a fifth of the key), never half
// the key; "" when none is. Only known keys whose length is within reach
// are compared, with a distance that stops counting past the reach, so a
// long key costs nothing.
func nearestKnownKey(key string) string {
	reach := min(max(2, len(key)/5), (len(key)-1)/2)
	if reach <= 0 {
		return ""
	}
	best, bestD := "", reach+1
	consider := func(k string) {
		if k == key || len(k) < len(key)-reach || len(k) > len(key)+reach {
			return
		}
		if d := editDistanceWithin(key, k, reach); d < bestD || (d == bestD && d <= reach && k < best) {
			best, bestD = k, d
		}
	}
	for _, k := range mappedKeys {
		consider(k)
	}
	for k := range securityKeys {
		consider(k)
	}
	for k := range oauthKeys {
		consider(k)
	}
	for k := range javaIgnoredKeys {
		consider(k)
	}
	for k := range refusedKeys {
		consider(k)
	}
	for k := range otherClientKeys {
		consider(k)
	}
	consider(keyConfigProviders)
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int { return editDistanceWithin(a, b, max(len(a), len(b))) }

// editDistanceWithin is the Levenshtein distance between a and b, in bytes,
// when it is at most limit, and limit+1 otherwise: it computes only the
// diagonal band of width 2*limit+1 and stops as soon as a row exceeds
// limit, in O(len(a) * limit) time.
func editDistanceWithin(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	over := limit + 1
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = min(j, over)
	}
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-limit), min(len(b), i+limit)
		cur[0] = min(i, over)
		if lo > 1 {
			cur[lo-1] = over // outside the band
		}
		rowMin := cur[0]
		for j := lo; j <= hi; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost, over)
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if hi < len(b) {
			cur[hi+1] = over
		}
		if rowMin > limit {
			return over
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// logIgnoredProperties logs, once per producer, the properties that
// ConfigFromProperties accepted but samsa has no setting for.
func logIgnoredProperties(l *slog.Logger, keys []string) {
	if len(keys) == 0 {
		return
	}
	keys = slices.Clone(keys)
	slices.Sort(keys)
	l.Warn("producer: these properties have no meaning for samsa and are ignored",
		"properties", strings.Join(keys, ", "))
}

// otherClientKeys are the keys of Java's consumer and admin clients and of
// CommonClientConfigs that the producer has no use for, so that one
// client.properties serves producers, consumers and admin clients: as
// Java logs "supplied but isn't a known config" for them,
// ConfigFromProperties accepts them and reports them
// (Config.IgnoredProperties; New logs them once at Warn). The list is
// kafka-clients 4.4.0's ConsumerConfig.configNames(),
// AdminClientConfig.configNames() and CommonClientConfigs' *_CONFIG and
// default.list.* names, less ProducerConfig.configNames() (and less the
// keys ConfigFromProperties already knows); client.rack, common to all
// three and a producer key since 4.4 (rack-aware partitioning, which samsa
// does not do), is here too.
var otherClientKeys = map[string]bool{
	"auto.commit.interval.ms":                           true,
	"auto.offset.reset":                                 true,
	"bootstrap.controllers":                             true,
	"check.crcs":                                        true,
	"default.api.timeout.ms":                            true,
	"default.list.key.serde.inner":                      true,
	"default.list.key.serde.type":                       true,
	"default.list.value.serde.inner":                    true,
	"default.list.value.serde.type":                     true,
	"enable.auto.commit":                                true,
	"exclude.internal.topics":                           true,
	"fetch.max.bytes":                                   true,
	"fetch.max.wait.ms":                                 true,
	"fetch.min.bytes":                                   true,
	"group.id":                                          true,
	"group.instance.id":                                 true,
	"group.protocol":                                    true,
	"group.remote.assignor":                             true,
	"heartbeat.interval.ms":                             true,
	"internal.throw.on.fetch.stable.offset.unsupported": true,
	"isolation.level":                                   true,
	"key.deserializer":                                  true,
	"max.partition.fetch.bytes":                         true,
	"max.poll.interval.ms":                              true,
	"max.poll.records":                                  true,
	"partition.assignment.strategy":                     true,
	"rebalance.timeout.ms":                              true,
	"share.acknowledgement.mode":                        true,
	"share.acquire.mode":                                true,
	"value.deserializer":                                true,
	"client.rack":                                       true,
}

// otherClientKey reports whether key is one of otherClientKeys, or a
// metrics.context.* key (CommonClientConfigs.METRICS_CONTEXT_PREFIX: labels
// for metrics reporters).
func otherClientKey(key string) bool {
	return otherClientKeys[key] || strings.HasPrefix(key, "metrics.context.")
}
