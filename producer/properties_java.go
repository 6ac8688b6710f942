package producer

import (
	"log/slog"
	"slices"
	"strings"
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
	"connections.max.idle.ms":                             true,
	"metadata.cluster.check.enable":                       true,
	"metadata.recovery.rebootstrap.trigger.ms":            true,
	"metadata.recovery.strategy":                          true,
	"metric.reporters":                                    true,
	"metrics.num.samples":                                 true,
	"metrics.recording.level":                             true,
	"metrics.sample.window.ms":                            true,
	"partitioner.availability.timeout.ms":                 true,
	"reconnect.backoff.max.ms":                            true,
	"reconnect.backoff.ms":                                true,
	"transaction.two.phase.commit.enable":                 true,
	"sasl.kerberos.kinit.cmd":                             true,
	"sasl.kerberos.min.time.before.relogin":               true,
	"sasl.kerberos.service.name":                          true,
	"sasl.kerberos.ticket.renew.jitter":                   true,
	"sasl.kerberos.ticket.renew.window.factor":            true,
	"sasl.login.class":                                    true,
	"sasl.oauthbearer.assertion.algorithm":                true,
	"sasl.oauthbearer.assertion.claim.aud":                true,
	"sasl.oauthbearer.assertion.claim.exp.seconds":        true,
	"sasl.oauthbearer.assertion.claim.iss":                true,
	"sasl.oauthbearer.assertion.claim.jti.include":        true,
	"sasl.oauthbearer.assertion.claim.nbf.seconds":        true,
	"sasl.oauthbearer.assertion.claim.sub":                true,
	"sasl.oauthbearer.assertion.file":                     true,
	"sasl.oauthbearer.assertion.private.key.file":         true,
	"sasl.oauthbearer.assertion.private.key.passphrase":   true,
	"sasl.oauthbearer.assertion.template.file":            true,
	"sasl.oauthbearer.clock.skew.seconds":                 true,
	"sasl.oauthbearer.expected.audience":                  true,
	"sasl.oauthbearer.expected.issuer":                    true,
	"sasl.oauthbearer.jwks.endpoint.refresh.ms":           true,
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": true,
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":     true,
	"sasl.oauthbearer.jwks.endpoint.url":                  true,
	"sasl.oauthbearer.jwt.retriever.class":                true,
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
	"socket.connection.setup.timeout.max.ms", "client.dns.lookup", "send.buffer.bytes", "receive.buffer.bytes",
	"partitioner.class", "partitioner", "partitioner.ignore.keys",
	"partitioner.adaptive.partitioning.enable", "retries", "message.send.max.retries",
	"batch.num.messages", "queue.buffering.max.messages", "key.serializer", "value.serializer",
	"interceptor.classes", "transactional.id", "transaction.timeout.ms",
}

// unknownKey describes key for the error: with the nearest known key when
// one is close enough to be a likely typo.
func unknownKey(key string) string {
	best, bestD := "", -1
	consider := func(k string) {
		d := editDistance(key, k)
		if bestD < 0 || d < bestD || (d == bestD && k < best) {
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
	// A typo is a few edits; allow more for long keys, never half the key.
	if bestD > 0 && bestD <= max(2, len(key)/5) && bestD < len(key)/2 {
		return key + " (did you mean " + best + "?)"
	}
	return key
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
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
