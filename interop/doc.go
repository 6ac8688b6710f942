// Package interop tests samsa's components against Kafka implementations
// that samsa did not write: franz-go's kgo client and kfake broker, and
// librdkafka through kcat. It has no code of its own, only tests.
//
// # Why a separate module
//
// interop has its own go.mod (module github.com/samsa-go/samsa/interop, with
// a replace directive pointing at the repository root), so that franz-go's
// client and kfake never become dependencies of the library's users. Being
// under github.com/samsa-go/samsa/, it may import the library's internal
// packages, such as internal/testbroker. kfake builds only with franz-go
// v1.22.3 and kmsg v1.15.1, the versions both modules pin.
//
// # Running
//
//	cd interop && go test -race ./...
//
// The root Makefile's test target runs it with every other module. The
// librdkafka tests need the kcat binary (Debian: apt-get install kcat):
// without it they are skipped, except when the CI environment variable is
// set, where they fail; .ci/run installs kcat.
//
// # What is covered
//
//   - kgo against internal/testbroker, one test per API: Produce with every
//     codec and acks=all (idempotent), acks=leader and acks=none, Fetch and
//     ListOffsets through kgo consumers, Metadata (topic ids, auto
//     creation), CreateTopics, CreatePartitions, DeleteTopics,
//     InitProducerId, ApiVersions (including the v0 fallback),
//     NOT_LEADER_OR_FOLLOWER with the KIP-951 current leader, throttling
//     (produce quota, KIP-599 mutation quota) seen by kgo's throttle hook,
//     and the fault injection the producer's tests rely on.
//   - An idempotent kgo producer through a broker restart, leader moves
//     and connections dropped after appends: every record stored once, in
//     order.
//   - kcat producing (every codec, plain and idempotent) and consuming
//     (every codec, from the start and from an offset) against the test
//     broker.
//   - Transactions against the test broker (kgo_txn_test.go): kgo's
//     transactional producer commits and aborts, also with late markers,
//     coordinator moves and stops, and one-off coordinator errors; kgo and
//     kcat consumers at read_committed see exactly the committed records
//     and at read_uncommitted every data record; a second producer fences
//     the first; kgo's GroupTransactSession consumes, transforms and
//     produces exactly once.
//   - A kgo round trip against kfake.
//   - TLS and SASL (security_*_test.go): samsa produces to kfake over TLS
//     with SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 and kgo reads every
//     record back; kcat produces and consumes through the test broker's
//     SASL_SSL listener with each of them, verifying its certificate.
//   - franz-go's own pkg/kgo integration tests against a 3-broker test
//     broker process (kgo_conformance_test.go, about 80 s; -short or
//     SAMSA_KGO_CONFORMANCE=0 skips it), compared with a list of tests
//     expected to fail (now only TestConsumeRegex, which needs a
//     __consumer_offsets topic); and
//     kadm setting client quotas and topic configs that the broker
//     enforces.
//   - samsa's producer against kfake and internal/testbroker, read back by a
//     kgo consumer: every codec, idempotent and not, keys (checked against
//     the murmur2 partition), null and empty keys and values, headers,
//     timestamps, order per partition, exactly once; records sent before
//     their topic exists; and kfake's faults (NOT_LEADER, sleeps, dropped
//     connections, errors after the append, leader moves).
//   - samsa's producer against real Apache Kafka (realkafka_*_test.go,
//     clusters from interop/kafka/start.sh given by SAMSA_KAFKA_BROKERS and
//     SAMSA_KAFKA3_BROKERS; skipped without them; fewer records with CI
//     set): every codec read back by kgo and by kcat field by field, keyed
//     partitions checked against kgo's Java murmur2; KIP-286 (Sends before
//     the topic exists stay in microseconds, records arrive in order); the
//     broker auto-creating a topic, and a missing topic failing after
//     MaxBlock when it does not; idempotence through the stop (and the
//     kill) and restart of a partition leader (0 lost, duplicated or
//     reordered, every callback once); NOT_ENOUGH_REPLICAS retried until the ISR is back;
//     KIP-599 THROTTLING_QUOTA_EXCEEDED retried after its throttle time;
//     TOPIC_AUTHORIZATION_FAILED failing at once; samsa over the SASL_SSL
//     listener with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, read back by kgo,
//     and a wrong password failing fast with ErrAuthentication;
//     transactions (realkafka_txn_test.go): committed and aborted ones read
//     back by kgo at read_committed and read_uncommitted, and fencing by a
//     second producer with the same transactional id; and the bytes the
//     broker stores for each codec and payload (random letters, JSON,
//     random bytes) no more than 2 % above what the Java client stores for
//     the same batches (realkafka_compression_test.go, with
//     kafka/JavaCompressionProducer.java run from Kafka's jars).
//   - KIP-794's partitioner against kafka-clients 4.4 itself
//     (javapartitioner_test.go, javapartitioner/JavaPartitionerSchedule.java
//     with the jars mvn fetches; skipped without java, javac or mvn, failing
//     when CI is set): both producers on one schedule of broker 1's Produce
//     latency against the test broker (all fast, slow, never answering past
//     partitioner.availability.timeout.ms), adaptive partitioning on and
//     off, at one fixed rate; the slow broker's share within 0.1 of Java's,
//     broker 1's partitions left out by both past the timeout, none with
//     adaptive off; partitionsFor against PartitionsFor.
//   - where samsa departs from kafka-clients 4.4 on purpose, both clients
//     on the same case (javadiff_test.go, javadiff/JavaDiffProducer.java;
//     skipped without java, javac or mvn, failing when CI is set): the
//     bootstrap address and the known broker's address leading to another
//     cluster id (two test broker clusters on one port), with
//     metadata.cluster.check.enable on and off: Java takes the new cluster
//     and writes there, samsa writes nothing there and fails the records
//     with ErrClusterMismatch; and, on real Kafka 4.4, a topic deleted and
//     recreated while records wait or are in flight: Java writes them into
//     the new topic (Produce v13 under the new id, read from its log),
//     samsa fails them with UNKNOWN_TOPIC_ID.
//   - samsa's Schema Registry serializers against a real Apicurio Registry
//     and real Kafka (realregistry_test.go, the registry from
//     interop/registry/start.sh given by SAMSA_SCHEMA_REGISTRY_URL; skipped
//     without it, failing when CI is set): Avro, Protobuf and JSON Schema
//     records read back by samsa's deserializers and decoded in Java
//     (Apicurio's serdes in Confluent mode; Protobuf by hand from the
//     registry's schema), Avro written by the Java serializer read by
//     samsa, the registry's 409 under BACKWARD failing a constructor, a
//     constructor bounded by its context with the registry down, and Sends
//     going on once the registry is gone.
//
// Every test but the real-Kafka ones starts its own in-process cluster on
// random loopback ports, closes it, and is bounded by timeouts; the
// real-Kafka tests share the clusters and name their topics with a random
// suffix. TestMain checks that no goroutine is left behind.
package interop
