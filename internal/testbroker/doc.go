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
// CreateTopics, CreatePartitions, DeleteTopics, DescribeConfigs,
// IncrementalAlterConfigs, DescribeClientQuotas, AlterClientQuotas,
// FindCoordinator, JoinGroup, SyncGroup, Heartbeat and LeaveGroup, each up
// to the highest version kmsg knows, OffsetCommit v0-v8 and OffsetFetch
// v1-v9, and the transaction APIs up to transaction version 1 (see
// Transactions below): InitProducerId v0-v5, AddPartitionsToTxn v0-v5,
// AddOffsetsToTxn v0-v4, EndTxn v0-v4 and TxnOffsetCommit v0-v4. Other
// API keys (DescribeGroups, ListGroups and KIP-848's
// ConsumerGroupHeartbeat among them), or an unsupported version of them,
// close the connection, as a Kafka broker does. A malformed or truncated
// request closes its connection with a logged error and never affects the
// other connections.
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
// and its flags reach both KIPs below (-queued-max-bytes,
// -socket-request-max-bytes, -mutation-rate, -mutation-burst,
// -mutation-window, -mutation-samples, -produce-byte-rate); -v logs every
// connection.
//
// # Topics
//
// Topics are created with [Cluster.CreateTopic], with CreateTopics requests,
// or by Metadata when Config.AllowAutoTopicCreation is set. Each topic has a
// random topic id; partition leaders are spread round-robin across the
// running brokers, and a Produce, Fetch or ListOffsets sent to another
// broker gets NOT_LEADER_OR_FOLLOWER (Produce v10+ and Fetch v12+ also name
// the current leader, KIP-951, with its endpoint on the request's
// listener). Produce and Fetch v13 address topics by id: an id no topic has
// (deleted, or recreated with a new id) gets UNKNOWN_TOPIC_ID. [Cluster.Records], [Cluster.NumBatches] and
// [Cluster.HighWatermark] read a partition back for assertions.
//
// Topic configs given to CreateTopics are validated (INVALID_CONFIG for an
// unknown name or a bad value), kept, echoed by CreateTopics v5+, shown by
// DescribeConfigs and changed by IncrementalAlterConfigs. max.message.bytes,
// min.insync.replicas, message.timestamp.type and retention.bytes change
// what Produce and Fetch do (see topicconfig.go); cleanup.policy,
// retention.ms and segment.bytes are only kept.
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
// removing the interceptor. The transaction APIs take interceptors the same
// way (FindCoordinator 10, InitProducerId 22, AddPartitionsToTxn 24,
// AddOffsetsToTxn 25, EndTxn 26, TxnOffsetCommit 28, OffsetFetch 9): an
// ErrorCode lands in the top-level code and in every partition or key, so
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or CONCURRENT_TRANSACTIONS
// once, or an EndTxn committed and then answered with an error (After),
// are one interceptor each.
//
// Runtime operations: [Cluster.StopBroker] (its partitions move to the
// other running brokers, as a controlled shutdown would, and so do the
// coordinators it held), [Cluster.RestartBroker] (same port),
// [Cluster.MoveLeader] (bumps the leader epoch),
// [Cluster.MoveCoordinator], [Cluster.AddPartitions],
// [Cluster.DeleteTopic] and [Cluster.DeleteRecordsBefore].
//
// # Consumer groups
//
// The group coordinator runs the classic protocol (groups.go): JoinGroup
// with KIP-394's MEMBER_ID_REQUIRED, a rebalance that waits for every
// member to rejoin or its rebalance timeout, the leader's assignment
// handed out by SyncGroup, Heartbeat's REBALANCE_IN_PROGRESS, LeaveGroup,
// session expiry, and OffsetCommit and OffsetFetch checked by generation
// and member. kgo's group consumer and GroupTransactSession run against
// it; static membership (KIP-345) and KIP-848's protocol do not.
// [Cluster.CommittedOffset] reads an offset back; the groups are not
// visible as a __consumer_offsets topic.
//
// # Transactions
//
// The cluster has a transaction coordinator and enough of a group
// coordinator for transactional offsets (KIP-98, KIP-360, KIP-447, KIP-588,
// and KIP-890 part 1's verification), so that kgo's and librdkafka's
// transactional producers and read_committed consumers run against it:
//
//   - FindCoordinator (key types 0 group and 1 transaction; v4+ batched)
//     places a key on the broker its __consumer_offsets or
//     __transaction_state partition (Java's hashCode, 50 partitions) maps
//     to, or on the next running broker when that one is stopped;
//     [Cluster.MoveCoordinator] pins it elsewhere and
//     [Cluster.Coordinator] reports it. The other brokers answer
//     NOT_COORDINATOR; the state is shared, so it survives a move.
//   - InitProducerId with a transactional id keeps a producer id per id and
//     bumps the epoch on every call, fencing the older epoch
//     (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH before KIP-588's
//     versions); with the current producer id and epoch (v3+, KIP-360) it
//     bumps them, and repeats its answer to a retry. It aborts a
//     transaction left Ongoing and answers CONCURRENT_TRANSACTIONS first,
//     and refuses a timeout <= 0 or above Config.TransactionMaxTimeout
//     (INVALID_TRANSACTION_TIMEOUT).
//   - The state machine Empty → Ongoing → PrepareCommit/PrepareAbort →
//     CompleteCommit/CompleteAbort of txn.go, with INVALID_TXN_STATE for
//     the illegal transitions and CONCURRENT_TRANSACTIONS while markers
//     are pending (Config.TransactionMarkerDelay makes that window
//     visible). A transaction Ongoing longer than its timeout is aborted
//     by the coordinator with a bumped epoch: the producer is fenced.
//     [Cluster.TransactionState] reads the state for assertions.
//   - Produce of a transactional batch (attribute bit 4) needs its
//     partition added to the producer's Ongoing transaction, else
//     INVALID_TXN_STATE, and the current epoch, else
//     INVALID_PRODUCER_EPOCH.
//   - EndTxn writes a control batch (attributes transactional and control,
//     one record: key version 0 and type 0 abort or 1 commit, value version
//     0 and coordinator epoch 0) to every partition of the transaction and
//     commits or drops the offsets sent with TxnOffsetCommit. OffsetFetch
//     shows committed offsets only (RequireStable: UNSTABLE_OFFSET_COMMIT
//     while some are pending). TxnOffsetCommit checks KIP-447's generation
//     and member against the group's (its real members, or those set with
//     [Cluster.SetGroupGeneration]).
//   - Each partition keeps its last stable offset (the first offset of its
//     earliest open transaction, else the high watermark) and its aborted
//     transactions: Fetch at read_committed returns batches below the LSO
//     with LastStableOffset and AbortedTransactions set, and ListOffsets
//     at read_committed answers the LSO for latest.
//
// KIP-890 part 2 (transaction version 2: Produce v12's implicit add,
// EndTxn v5's per-transaction epoch bump) is not implemented: ApiVersions
// advertises no transaction.version feature, so clients use the explicit
// AddPartitionsToTxn path, and EndTxn and TxnOffsetCommit stop at v4.
// There are no ACLs: an [Interceptor] with ErrorCode 53
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) on the transaction keys stands in
// for a denied transactional id.
//
// # Quotas
//
// Quotas are set per entity, as Kafka's are (KIP-55): a user (the
// connection's principal: ANONYMOUS until SASL authenticates it), a client
// id, both, or the <default> of either, through AlterClientQuotas (kadm,
// kafka-configs.sh) and read back with DescribeClientQuotas. A connection
// gets the most specific quota in Kafka's order: user and client id, user
// and default client, user, default user and client id, default user and
// default client, default user, client id, default client.
// Config.MutationRate and Config.ProduceByteRate apply to the client ids
// no entity matches. Two keys are enforced, and others are refused:
//
//   - controller_mutation_rate, KIP-599's controller mutation quota: a
//     token bucket (rate R, burst R × MutationSamples × MutationWindow) that
//     may go negative. The topics of a CreateTopics (v6+), CreatePartitions
//     (v3+) or DeleteTopics (v5+) request are admitted one by one while the
//     bucket holds tokens, each taking its partition count; once it is
//     empty the remaining topics get THROTTLING_QUOTA_EXCEEDED, and
//     ThrottleTimeMs says when tokens are back. Older versions, and topics
//     auto-created by Metadata, are always accepted and throttled instead.
//   - producer_byte_rate, with KIP-219 semantics: a client over the rate
//     gets a Produce v6+ response at once with ThrottleTimeMs, and its
//     connection is not read until the throttle passes; older versions get
//     their response delayed.
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
// stays within QueuedMaxBytes + SocketRequestMaxBytes, and so does the live
// heap those requests hold: nothing keeps a request once it is released,
// and nothing is read off a socket ahead of its pool memory.
// QueuedMaxBytes must exceed SocketRequestMaxBytes, or be <= 0 to turn the
// bound off. Config.MemoryPool plugs in another bufferpool.Pool.
//
// # TLS and SASL
//
// Config.Security gives each broker several listeners (PLAINTEXT, SSL,
// SASL_PLAINTEXT, SASL_SSL; [Cluster.ListenerAddrs]), and Metadata
// advertises to a connection the ports of the listener it came in on. TLS
// uses a certificate from a [TestCA] the test makes. SASL serves PLAIN,
// SCRAM-SHA-256/512 (the server side of github.com/xdg-go/scram; it also
// accepts the doubled nonce of librdkafka before 2.6.1, as Kafka 3.8.1 to
// 3.9.0 do) and OAUTHBEARER with a user list; bad credentials get
// SASL_AUTHENTICATION_FAILED and a closed connection, as in Kafka. With
// Security.SessionLifetime the session expires (KIP-368): a request other
// than SaslHandshake after it closes the connection, so clients must
// re-authenticate in time. [Cluster.SecurityStats] counts the exchanges.
// The command takes -secure-protocol, -secure-port, -sasl-users, -tls-dir
// and -sasl-session-lifetime.
//
// # The seeds, requirement by requirement
//
// KIP-72 (queued.max.bytes, memory.pool.class.name):
//
//   - "a limit on the volume of requests that can be held in memory":
//     requestMemory (memory.go), sized by Config.QueuedMaxBytes; the live
//     heap is checked by TestQueuedMaxBytesLiveHeapFlood
//     (memory_heap_test.go).
//   - "memory would be released at the end of request processing":
//     conn.serve releases after the response is written, and
//     conn.forgetRequest first drops the reusable Produce structs'
//     references into the buffer (TestQueuedMaxBytesIdleConnsRetainNothing).
//   - "allocate memory when reading requests out of sockets": conn.serve
//     reads the 4-byte size alone, then the body straight into pool memory,
//     with no read-ahead.
//   - non-blocking TryAllocate, muting when out of memory, no deadlock
//     (a muted connection holds no request memory), single request per
//     channel, no starvation (FIFO waiters): requestMemory.acquire and the
//     bufferpool's Allocate queue.
//   - the bound is queued.max.bytes + socket.request.max.bytes (the pool
//     over-allocates): bufferpool.Options.OverAllocate; Stats and the
//     live-heap tests.
//   - queued.max.bytes must be larger than socket.request.max.bytes, or
//     <= 0: Config.setDefaults.
//   - memory.pool.class.name: Config.MemoryPool, any bufferpool.Pool.
//   - "reclaiming buffers that were never released": the tests' clusters
//     use a bufferpool.SimplePool with LeakDetection and fail on a leak
//     (newTestCluster in client_test.go).
//
// KIP-599 (controller mutation quota):
//
//   - K = min(K + (now - T) × R, B): bucketSet.refillLocked (quota.go).
//   - "admitted iff K > 0, and updates K = K - N", tokens may go negative:
//     bucketSet.admitWith, applied per topic by mutationGate (admin.go).
//   - the throttle time: waitLocked, -K/R as the KIP's worked example
//     (its formula line "R * (-K + 1)" is ambiguous; see the comment).
//   - Samples = B / R, the window: Config.MutationSamples and
//     Config.MutationWindow.
//   - THROTTLING_QUOTA_EXCEEDED only from CreateTopics v6, CreatePartitions
//     v3, DeleteTopics v5; older versions accepted and throttled:
//     the *StrictVersion constants and mutationGate.
//   - the quota as a client quota of Kafka's entities
//     (controller_mutation_rate): clientQuotas.resolve (clientquota.go),
//     DescribeClientQuotas and AlterClientQuotas.
package testbroker
