// Package testbroker is an in-process Kafka cluster for tests, benchmarks
// and the example's default: several brokers in one process, each on a real
// loopback TCP listener, speaking the Kafka wire protocol through
// github.com/twmb/franz-go/pkg/kmsg. Real clients (kgo, librdkafka through
// kcat, samsa's producer) can produce to it and consume every record back.
//
// # Starting a cluster
//
// [New] starts the brokers and returns once they listen; [Cluster.Close]
// stops them and waits for every goroutine:
//
//	c, err := testbroker.New(testbroker.Config{}) // 3 brokers, random ports
//	if err != nil { ... }
//	defer c.Close()
//	seeds := c.Addrs() // "127.0.0.1:port" per broker id
//
// The served APIs are ApiVersions (with the v0 fallback: a version the
// broker does not know gets a v0 answer with UNSUPPORTED_VERSION and the
// supported ranges), Metadata, Produce v3+, Fetch, ListOffsets,
// InitProducerId, CreateTopics, CreatePartitions and DeleteTopics, each up
// to the highest version kmsg knows. Other API keys, or an unsupported
// version of them, close the connection, as a Kafka broker does. A
// malformed or truncated request closes its connection with a logged error
// and never affects the other connections.
//
// Produce is validated as Kafka does (framing, magic 2, CRC-32C,
// decompression, record count and offset deltas, max message bytes, acks,
// idempotent sequences), then appended to the partition's in-memory log.
// With Config.Sink the broker validates the header and CRC and acknowledges,
// but keeps nothing: that is the mode for throughput benchmarks.
//
// A standalone process runs the cluster with
//
//	go run ./internal/testbroker/cmd/testbroker -brokers 3 -port 9092
//
// # Topics
//
// Topics are created with [Cluster.CreateTopic], with CreateTopics requests,
// or by Metadata when Config.AllowAutoTopicCreation is set. Each topic has a
// random topic id; partition leaders are spread round-robin across the
// running brokers, and a Produce, Fetch or ListOffsets sent to another
// broker gets NOT_LEADER_OR_FOLLOWER (Produce v10+ and Fetch v12+ also name
// the current leader, KIP-951). [Cluster.Records], [Cluster.NumBatches] and
// [Cluster.HighWatermark] read a partition back for assertions.
//
// Creating a topic later (after a producer's first send) is how a test
// makes metadata unavailable for a while: the producer sees
// UNKNOWN_TOPIC_OR_PARTITION until [Cluster.CreateTopic] runs.
//
// # Faults
//
// An [Interceptor] registered with [Cluster.Intercept] delays a request,
// stalls it until removed, drops the connection, replies with an error
// code, or throttles, before the handler runs or after it (then the request
// has taken effect: a Produce appended and answered REQUEST_TIMED_OUT, or a
// dropped connection, is an ambiguous outcome). It matches by API key,
// broker, predicate and probability, once, N times or until removed.
// Metadata is made slow with Delay on key 3, and failing with Drop (the
// client sees a network error) or ErrorCode (every topic it names gets the
// code); Produce is stalled entirely with Stall on key 0, and released by
// removing the interceptor.
//
// Runtime operations: [Cluster.StopBroker] (its partitions move to the
// other running brokers, as a controlled shutdown would),
// [Cluster.RestartBroker] (same port), [Cluster.MoveLeader] (bumps the leader
// epoch), [Cluster.AddPartitions], [Cluster.DeleteTopic] and
// [Cluster.DeleteRecordsBefore].
//
// # Quotas
//
// Config.MutationRate and Config.MutationBurst enable KIP-599's controller
// mutation quota per client id: a token bucket that may go negative. A
// CreateTopics (v6+), CreatePartitions (v3+) or DeleteTopics (v5+) request
// mutating N partitions is admitted iff the bucket holds more than zero
// tokens, and then takes N; otherwise each of its topics gets
// THROTTLING_QUOTA_EXCEEDED and ThrottleTimeMs says when tokens are back.
// Older versions, and topics auto-created by Metadata, are always accepted
// and throttled instead.
//
// Config.ProduceByteRate is a produce quota per client id with KIP-219
// semantics: a client over the rate gets a Produce v6+ response at once
// with ThrottleTimeMs, and its connection is not read until the throttle
// passes; older versions get their response delayed.
//
// # Memory bound
//
// Config.QueuedMaxBytes is KIP-72's queued.max.bytes: the bytes of requests
// read from sockets and not yet answered, across the cluster, come from a
// bufferpool pool through its non-blocking TryAllocate, and are released
// once the response is written. When the pool is out of memory, connections
// stop reading (they are muted) and wait, first in first out and without
// spinning, holding no request memory meanwhile. Like Kafka's pool it grants
// a request whenever any memory is free, so [Stats].PeakInFlightRequestBytes
// stays within QueuedMaxBytes + SocketRequestMaxBytes. QueuedMaxBytes must
// exceed SocketRequestMaxBytes, or be <= 0 to turn the bound off.
package testbroker
