// Package producer is samsa's asynchronous, non-blocking Kafka producer.
//
// # Sending
//
//	p, err := producer.New(producer.Config{Brokers: []string{"127.0.0.1:9092"}})
//	f := p.Send(ctx, &producer.Record{Topic: "events", Key: k, Value: v})
//	md, err := f.Wait(ctx) // RecordMetadata{Topic, Partition, Offset, Timestamp}
//	err = p.Close(ctx)     // flush, then release connections and goroutines
//
// Send returns a Future at once. It never waits for metadata (KIP-286): when
// the topic's partitions are not known yet, the record is parked in the
// topic's queue and sent, in Send order, once they are. The only time Send
// blocks is while the buffer pool (Config.BufferMemory) is full, and then for
// at most Config.MaxBlock; TrySend never blocks. Every error, including bad
// input, comes back through the Future, which completes exactly once.
//
// The other ways to learn a record's outcome are SendCallback (no allocation
// per record; callbacks run on the producer's completion goroutine), SendTo
// (a delivery channel) and TypedProducer (generic serialization).
//
// # Configuration
//
// Config holds the Java client's settings as Go fields, each with its Java
// default; ConfigFromProperties reads Java or librdkafka property names.
// Idempotence is on by default (KIP-679): retries never duplicate or reorder
// records within a partition.
//
// # Transactions
//
// With Config.TransactionalID the producer writes transactions (KIP-98):
// BeginTransaction, Send as usual, optionally SendOffsetsToTransaction for
// consume-transform-produce (KIP-447), then CommitTransaction or
// AbortTransaction. IsAbortable and IsFatal tell what an error asks for:
// abort and go on, or Close (ErrProducerFenced).
//
// # Partitioning
//
// The default partitioner is the Java client's: a record with a key goes to
// (murmur2(key) & 0x7fffffff) % partitions (KeyPartition computes it), so
// Java, librdkafka's murmur2_random and samsa agree on where a key lands; a
// record without a key goes to a sticky partition that changes after about
// BatchSize bytes, preferring partitions with shorter queues (KIP-794;
// Config.DisableAdaptivePartitioning draws uniformly instead, and
// Config.PartitionerAvailabilityTimeout leaves out the partitions of a
// leader that took no request for that long). PartitionsFor lists a
// topic's partitions with their leaders and replicas, as Java's
// partitionsFor.
// RoundRobinPartitioner, ManualPartitioner (each record goes to its
// Record.Partition, 0 included) and PartitionerFunc are the alternatives; a
// custom partitioner may return UnknownPartition to leave a record to the
// sticky partitioner. A record with ExplicitPartition goes to its Partition
// whatever the partitioner, as a Java ProducerRecord with a partition; a
// non-zero Partition without it, under a partitioner other than
// ManualPartitioner, fails with ErrInvalidRecord instead of being ignored.
//
// # Memory
//
// Every record byte lives in Config.BufferPool (BufferMemory bytes by
// default): Send copies key, value and headers into a batch there, or into
// its topic's parking queue while the topic's partitions are unknown. A
// partition's first batch starts small (512 bytes by default) and doubles up
// to BatchSize as records come; its next batches start as large as the last
// one got. A batch's memory returns to the pool once its records are
// completed. When the pool is full Send waits, at most MaxBlock.
// Reuse Record values or build one per Send as you like: Send, TrySend and
// SendCallback do not keep the Record (SendTo does, until its Result is
// delivered).
//
// # Goroutines
//
// A producer runs one IO goroutine, which owns all network state: it seals
// batches that have lingered, moves parked records, compresses batches,
// groups them per leader into Produce requests and handles the answers; with
// a codec, up to CompressionConcurrency-1 helper goroutines compress a
// request's batches alongside it; and one completion goroutine, which
// completes futures and runs callbacks. Each broker connection has a reader
// and a writer goroutine. Close stops them all.
//
// # When the cluster cannot be reached
//
// New does no network I/O. The first failure to reach a broker is logged at
// once at Warn to Config.Logger (by default slog.Default(), Warn and above
// only), naming the broker and the cause: "cannot connect to broker
// 127.0.0.1:9: connection refused (nothing is listening there)", a host
// with no address, "timed out after 10s"; while it lasts, once a minute.
// Records wait for MaxBlock or DeliveryTimeout, as in Java (a refused
// connection may be a broker restarting), and then fail with that cause.
// A listener that does not speak the client's protocol (TLS on one side
// only) fails records at once with ErrAuthentication, saying which
// security.protocol to set. Ping checks the cluster at start-up or in a
// readiness probe and returns the same causes at once.
//
// # Errors
//
// Futures fail with errors that match the sentinels of this package with
// errors.Is (ErrInvalidRecord, ErrRecordTooLarge, ErrBufferExhausted,
// ErrDeliveryTimeout, ErrClosed, ErrAuthentication), or with a broker's
// error code, matched with errors.Is against the values of package kerr
// (kerr.TopicAuthorizationFailed) and read with errors.As as a *KafkaError.
// ErrOutcomeUnknown accompanies ErrDeliveryTimeout or ErrClosed when the
// record may have been written. IsRetriable tells whether sending a failed
// record again may succeed.
package producer
