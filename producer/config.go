package producer

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/logging"
	"github.com/samsa-go/samsa/sasl"
)

// Acks says how many replicas must have a record before the broker
// acknowledges it (the Java client's acks). Its values are AcksAll,
// AcksLeader and AcksNone; the zero value is AcksAll, the default. Acks is
// opaque, so that Java's numbers cannot be converted to it by mistake (Java's
// acks=0 is AcksNone, not the zero value): ParseAcks reads Java's spellings
// ("all", "-1", "1", "0"), and Wire returns Java's number. Acks values are
// comparable with ==.
type Acks struct {
	// code is 0 for all (so that the zero value is the default), 1 for
	// leader, 2 for none.
	code int8
}

var (
	// AcksAll waits for all in-sync replicas (acks=all, -1): the default,
	// and the only setting idempotence allows.
	AcksAll = Acks{}
	// AcksLeader waits for the partition leader only (acks=1).
	AcksLeader = Acks{code: 1}
	// AcksNone waits for nothing (acks=0): the broker sends no response,
	// and records complete with Offset -1 once written to the connection.
	AcksNone = Acks{code: 2}
)

// ParseAcks returns the Acks that s names, in the Java client's spelling
// ("all", "-1", "1", "0") or in String's ("all", "leader", "none"), case
// and surrounding spaces ignored: ParseAcks("0") is AcksNone, like Java's
// acks=0. Any other s is an error.
func ParseAcks(s string) (Acks, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "all", "-1":
		return AcksAll, nil
	case "leader", "1":
		return AcksLeader, nil
	case "none", "0":
		return AcksNone, nil
	}
	return Acks{}, fmt.Errorf("acks %q is not one of all, -1, 1, 0 (or leader, none)", s)
}

// Wire returns Java's number for a, which is also the Produce request's
// Acks field: -1 for AcksAll, 1 for AcksLeader, 0 for AcksNone.
func (a Acks) Wire() int16 {
	switch a {
	case AcksLeader:
		return 1
	case AcksNone:
		return 0
	default:
		return -1
	}
}

// String returns "all", "leader" or "none" (which ParseAcks accepts).
func (a Acks) String() string {
	switch a {
	case AcksLeader:
		return "leader"
	case AcksNone:
		return "none"
	default:
		return "all"
	}
}

// MetadataRecoveryStrategy is Config.MetadataRecoveryStrategy, the Java
// client's metadata.recovery.strategy, whose values it takes.
type MetadataRecoveryStrategy string

const (
	// MetadataRecoveryRebootstrap goes back to the bootstrap brokers when
	// the known ones cannot give metadata: the default (rebootstrap).
	// The zero value means it too.
	MetadataRecoveryRebootstrap MetadataRecoveryStrategy = "rebootstrap"
	// MetadataRecoveryNone never goes back to them after the first
	// answer (none).
	MetadataRecoveryNone MetadataRecoveryStrategy = "none"
)

// DNSLookup is how broker host names are resolved: Config.ClientDNSLookup,
// the Java client's client.dns.lookup, whose values it takes.
type DNSLookup string

const (
	// DNSUseAllIPs resolves a host at each connection attempt and tries
	// each of its addresses in turn until one connects: the default
	// (use_all_dns_ips). The zero value means it too.
	DNSUseAllIPs DNSLookup = "use_all_dns_ips"
	// DNSResolveCanonicalBootstrapServersOnly replaces each bootstrap host
	// with the canonical names of its addresses (reverse lookups), for
	// Kerberos (resolve_canonical_bootstrap_servers_only).
	DNSResolveCanonicalBootstrapServersOnly DNSLookup = "resolve_canonical_bootstrap_servers_only"
)

// Default values, the Java producer's (Kafka 4.x) unless stated.
const (
	defaultClientID        = "samsa"
	defaultLinger          = 5 * time.Millisecond
	defaultBatchSize       = 16384
	defaultBufferMemory    = 32 << 20
	defaultMaxBlock        = 60 * time.Second
	defaultMaxRequestSize  = 1 << 20
	defaultDeliveryTimeout = 120 * time.Second
	defaultRequestTimeout  = 30 * time.Second
	defaultRetryBackoff    = 100 * time.Millisecond
	defaultRetryBackoffMax = time.Second
	defaultMaxInFlight     = 5
	defaultMetadataMaxAge  = 5 * time.Minute
	defaultMetadataMaxIdle = 5 * time.Minute
	defaultDialTimeout     = 10 * time.Second // socket.connection.setup.timeout.ms
	defaultDialTimeoutMax  = 30 * time.Second // socket.connection.setup.timeout.max.ms
	defaultConnMaxIdle     = 9 * time.Minute  // connections.max.idle.ms, a minute under Kafka's broker default

	defaultRebootstrapTrigger = 5 * time.Minute // metadata.recovery.rebootstrap.trigger.ms

	// maxDefaultCompressionConcurrency caps the default of
	// CompressionConcurrency (ours, no Java equivalent).
	maxDefaultCompressionConcurrency = 4

	// idempotenceMaxInFlight is the number of batches per partition a broker
	// remembers for duplicate detection (KIP-98).
	idempotenceMaxInFlight = 5
)

// NoWait, in Config.Linger, Config.MaxBlock, Config.RetryBackoff or
// Config.MetadataRecoveryRebootstrapTrigger, asks for no wait at all: no
// linger (linger.ms=0), never block for memory (max.block.ms=0), no
// backoff before a retry (retry.backoff.ms=0), rebootstrap as soon as a
// fetch got no answer (metadata.recovery.rebootstrap.trigger.ms=0).
// Zero cannot say that, since a zero field means its default. Other
// duration fields refuse it.
const NoWait time.Duration = -1

// Config configures a Producer. The zero value of every field means its
// documented default, which is the Java producer's; only Brokers is
// required. New validates the whole Config at once and returns an error
// wrapping ErrInvalidConfig that names every bad field.
//
// Every time.Duration field follows one rule: 0 means the field's default,
// a positive value is used as it is, and a negative value is an error from
// New, except NoWait in the four fields where Java's 0 means "no wait"
// (Linger, MaxBlock, RetryBackoff, MetadataRecoveryRebootstrapTrigger):
// there NoWait asks for none; and ConnMaxIdle, where any negative value
// means "never", as Java's -1.
//
// ConfigFromProperties builds a Config from Java or librdkafka property
// names.
type Config struct {
	// Brokers are the bootstrap brokers as "host:port" (bootstrap.servers).
	// Required. The producer discovers the rest of the cluster from them.
	Brokers []string

	// ClientID names the producer to the brokers, for their logs and
	// quotas (client.id). Default "samsa".
	ClientID string

	// Acks is how many replicas must have a record before it counts as
	// written (acks). Default AcksAll. Anything else requires
	// DisableIdempotence.
	Acks Acks

	// Linger is how long a batch waits for more records before it is sent,
	// unless it is full (linger.ms). If its leader has a Produce request in
	// flight by then, the batch keeps taking records until that broker's
	// next answer (within RequestTimeout), so that a loaded producer sends
	// fewer, fuller batches. 0 means the default, 5ms; NoWait means no
	// linger (linger.ms=0): send as soon as possible. Other negative values
	// are an error.
	Linger time.Duration

	// BatchSize is the size in bytes of a partition's batch buffer
	// (batch.size). A batch is sent when it is full or has lingered (see
	// Linger). Batches start smaller and grow up to BatchSize as records
	// come (see BufferPool).
	// A record larger than BatchSize gets a batch of its own. The sticky
	// partitioner also switches partitions after about BatchSize bytes.
	// A BatchSize above MaxRequestSize acts as MaxRequestSize: a batch never
	// outgrows a request. Default 16384.
	BatchSize int

	// BufferMemory bounds the bytes of records buffered and in flight
	// (buffer.memory). Send blocks for up to MaxBlock when it is used up.
	// Default 32 MiB. Ignored when BufferPool is set (the pool's Size
	// counts instead).
	BufferMemory int64

	// MaxBlock is how long Send may block waiting for buffer memory
	// (max.block.ms), in all: a Send that waits more than once (for a
	// batch's buffer, then for its bookkeeping) shares one deadline, set
	// when it first waits, between its waits; then it returns an error
	// wrapping ErrBufferExhausted.
	// 0 means the default, 60s; NoWait means never block
	// (max.block.ms=0). Other negative values are an error. Send never
	// blocks on metadata. While records parked for a topic's metadata
	// cannot move into batches for lack of memory, the pool keeps what is
	// released for them (bufferpool.Holder): Sends then wait their turn,
	// and a Send that cannot wait (NoWait, TrySend, a Send from a
	// callback) fails even if a little memory is free.
	MaxBlock time.Duration

	// MaxRequestSize bounds the size in bytes of one Produce request, and
	// so of one record (max.request.size): a larger record fails with
	// ErrRecordTooLarge. Default 1 MiB.
	MaxRequestSize int

	// Compression is the codec for record batches (compression.type).
	// Default compression.None. Zstd needs Kafka 2.1 or later.
	Compression compression.Type

	// CompressionLevel is the codec's level (compression.gzip.level,
	// compression.lz4.level, compression.zstd.level). Default 0, the
	// codec's default level. Ranges, as in the Java client: gzip 1..9, lz4
	// 1..17, zstd -131072..22; snappy and none have no levels (see
	// compression.NewCompressor).
	CompressionLevel int

	// CompressionConcurrency is how many goroutines compress batches at
	// once: the IO goroutine and CompressionConcurrency-1 helpers, started
	// with the producer, that compress the batches of the coming requests
	// alongside it. With a costly codec (zstd, gzip) one goroutine bounds
	// the throughput to one core's encoding speed. Default
	// min(GOMAXPROCS, 4) (each zstd helper keeps an encoder of a few MiB);
	// 1 compresses on the IO goroutine only; at most GOMAXPROCS are used.
	// No helper is started without compression. No Java equivalent (the Java client compresses on the
	// threads that call send).
	CompressionConcurrency int

	// DeliveryTimeout bounds the time from Send to the record's success or
	// failure, retries included (delivery.timeout.ms); then the record
	// fails with ErrDeliveryTimeout. It must be at least Linger +
	// RequestTimeout. 0 means the default, 120s, raised to Linger +
	// RequestTimeout if those add up to more; a negative value (NoWait
	// included: a record always has a deadline) is an error.
	DeliveryTimeout time.Duration

	// RequestTimeout is how long the producer waits for a broker's answer
	// to a request before it gives up on the connection and retries
	// (request.timeout.ms). 0 means the default, 30s; a negative value
	// (NoWait included) is an error.
	RequestTimeout time.Duration

	// RetryBackoff is the first wait before retrying a failed batch or
	// metadata request (retry.backoff.ms); the wait doubles, with jitter,
	// up to RetryBackoffMax (KIP-580). 0 means the default, 100ms (or
	// RetryBackoffMax if that is smaller); NoWait means no wait before
	// retrying a batch (retry.backoff.ms=0), while failed metadata requests
	// still wait 10ms (or RetryBackoffMax if smaller), so that a broker
	// that is down is not polled in a loop. Other negative values are an
	// error. Records
	// are retried until DeliveryTimeout, never a fixed number of times.
	RetryBackoff time.Duration

	// RetryBackoffMax caps the retry backoff (retry.backoff.max.ms).
	// 0 means the default, 1s, or RetryBackoff if that is larger. If set
	// below RetryBackoff, RetryBackoff is lowered to it, as in the Java
	// client. A negative value (NoWait included) is an error.
	RetryBackoffMax time.Duration

	// MaxInFlight is the number of Produce requests that may await an
	// answer on one broker connection
	// (max.in.flight.requests.per.connection). At most 5 with idempotence.
	// Default 5.
	MaxInFlight int

	// MetadataMaxAge is how often metadata is refreshed even without a
	// reason (metadata.max.age.ms), and how often a transactional producer
	// reads the cluster's transaction.version again. 0 means the default,
	// 5m; a negative value (NoWait included) is an error.
	MetadataMaxAge time.Duration

	// MetadataMaxIdle is how long a topic not produced to stays in the
	// metadata cache (metadata.max.idle.ms). 0 means the default, 5m; a
	// negative value (NoWait included) is an error.
	MetadataMaxIdle time.Duration

	// MetadataRecoveryStrategy says what metadata does when the brokers it
	// knows cannot tell it anything (metadata.recovery.strategy).
	// MetadataRecoveryRebootstrap, the default (also the zero value, as
	// in Java 4.x): rebootstrap (KIP-899, KIP-1102) when no known broker
	// can be reached, when none answered for
	// MetadataRecoveryRebootstrapTrigger, and at once when a broker
	// answers REBOOTSTRAP_REQUIRED: forget the known brokers for that
	// fetch and ask the Brokers addresses, their names resolved again (a
	// cluster that moved behind the same names is found there).
	// MetadataRecoveryNone: Brokers serve only until the first answer;
	// if every known broker goes away, records wait and fail at
	// DeliveryTimeout, as in Java. Another value is an error from New.
	// Either way the producer stays with the cluster of its first
	// answer: see ErrClusterMismatch.
	MetadataRecoveryStrategy MetadataRecoveryStrategy

	// MetadataRecoveryRebootstrapTrigger is how long metadata fetches
	// may go without an answer before the producer rebootstraps, even
	// while known brokers accept connections
	// (metadata.recovery.rebootstrap.trigger.ms, KIP-1102); a fetch held
	// by a known broker is given up then. 0 means the default, 5m; NoWait
	// rebootstraps as soon as a fetch got no answer (the next one asks
	// Brokers); another negative value is an error. Unused with
	// MetadataRecoveryNone.
	MetadataRecoveryRebootstrapTrigger time.Duration

	// DisableMetadataClusterCheck stops the KIP-1242 check of each
	// connection to a known broker (metadata.cluster.check.enable=false;
	// on by default, as in Java 4.4): ApiVersions v5 names the cluster id
	// of the producer's first Metadata answer and the node dialed, and a
	// broker of Kafka 4.4+ that is not that node of that cluster answers
	// REBOOTSTRAP_REQUIRED: the connection is closed before any request,
	// records wait for the right broker (failing at DeliveryTimeout with
	// an error wrapping ErrClusterMismatch), and the producer
	// rebootstraps. The transaction coordinator's connections name the
	// node of FindCoordinator's answer. Unlike Java, the check stays on
	// with MetadataRecoveryNone. A broker before Kafka 4.4 answers
	// ApiVersions v4: each new connection of the producer's to a known
	// broker or coordinator asks it for Metadata of no topic first (one
	// round trip per connection) and is refused the same way when the
	// answer names another cluster id. Metadata answers, and the
	// connections of InitProducerId, CreateTopics, FindCoordinator and
	// telemetry, are checked by their cluster id either way.
	DisableMetadataClusterCheck bool

	// DisableIdempotence turns off the idempotent producer
	// (enable.idempotence=false). Idempotence is on by default (KIP-679):
	// retries never duplicate or reorder records within a partition. It
	// requires Acks = AcksAll and MaxInFlight <= 5.
	DisableIdempotence bool

	// TransactionalID makes the producer transactional (transactional.id,
	// KIP-98): its records are written in transactions that
	// BeginTransaction opens and CommitTransaction or AbortTransaction end,
	// and a new producer with the same id fences this one
	// (ErrProducerFenced). Empty (the default): no transactions. It
	// requires idempotence (DisableIdempotence false).
	//
	// The producer runs the transaction version the cluster finalizes
	// (transaction.version, KIP-890; Kafka 4.4 finalizes 2 on a new
	// cluster), as Java's producer does: at 2 a partition joins the
	// transaction with its first Produce (no AddPartitionsToTxn round
	// trip), and every commit or abort bumps the producer epoch, which
	// fences a zombie's late records; at 1, or with a broker that reports
	// no level, the explicit flow of KIP-98. The level is read from the
	// producer's connections, and again from the transaction coordinator
	// once per MetadataMaxAge; a change applies from the next transaction.
	TransactionalID string

	// TransactionTimeout is how long the transaction coordinator lets a
	// transaction stay open before it aborts it (transaction.timeout.ms).
	// 0 means the default, 60s; a negative value is an error. Only used
	// with TransactionalID; it must not exceed the broker's
	// transaction.max.timeout.ms (15 minutes by default).
	TransactionTimeout time.Duration

	// DisableAutoTopicCreation stops the producer from asking brokers to
	// create the topics it produces to (allow.auto.create.topics=false).
	// By default, as in the Java producer, every Metadata request allows
	// auto-creation: a broker with auto.create.topics.enable=true (Kafka's
	// default) creates a missing topic with its num.partitions and
	// default.replication.factor. A broker that does not auto-create
	// answers UNKNOWN_TOPIC_OR_PARTITION either way; see AutoCreateTopics
	// for that case. With AutoCreateTopics set, Metadata requests never
	// allow auto-creation, whatever this field says.
	DisableAutoTopicCreation bool

	// AutoCreateTopics makes the producer create a topic that does not
	// exist itself, with CreateTopics (AutoCreatePartitions partitions,
	// AutoCreateReplicationFactor replicas), on every broker: those that
	// auto-create topics (auto.create.topics.enable=true, Kafka's
	// default) and those that do not. Its Metadata requests then never
	// allow auto-creation (as if DisableAutoTopicCreation were set, even
	// when the counts are the broker's defaults), so that a broker cannot
	// create the topic with its own num.partitions before the
	// CreateTopics request arrives. A failed creation is logged at Warn
	// and retried with backoff; the records wait for the topic up to
	// MaxBlock. Default false: records for an unknown topic wait up to
	// MaxBlock for it to appear (created by the broker unless
	// DisableAutoTopicCreation), and then fail naming the topic.
	AutoCreateTopics bool

	// AutoCreatePartitions is the partition count of the topics that
	// AutoCreateTopics creates. Default (0) or -1: the broker's
	// num.partitions (needs Kafka 2.4+, CreateTopics v4; older brokers
	// get 1). It applies only to a topic the producer creates: a topic
	// that exists already keeps its partitions, and when their count
	// differs from a positive AutoCreatePartitions the producer logs it
	// once per topic at Warn (topic, partitions, asked) and produces to
	// the partitions the topic has. Without AutoCreateTopics it is unused.
	AutoCreatePartitions int32

	// AutoCreateReplicationFactor is the replication factor of the topics
	// that AutoCreateTopics creates. Default (0) or -1: the broker's
	// default.replication.factor (needs Kafka 2.4+; older brokers get
	// 1). Like AutoCreatePartitions, it applies only to a topic the
	// producer creates; without AutoCreateTopics it is unused.
	AutoCreateReplicationFactor int16

	// DialTimeout bounds connecting to a broker, including the TLS,
	// ApiVersions and SASL handshakes (socket.connection.setup.timeout.ms),
	// on a first attempt and after a success. 0 means the default, 10s; a
	// negative value (NoWait included) is an error.
	DialTimeout time.Duration

	// DialTimeoutMax caps the setup timeout of a broker whose connection
	// attempts keep failing (socket.connection.setup.timeout.max.ms): as in
	// the Java client, each consecutive failed attempt to an address
	// doubles DialTimeout for the next one, with ±20% jitter, up to
	// DialTimeoutMax, and a success starts again from DialTimeout. 0 means
	// the default, 30s, or DialTimeout if that is larger; set below
	// DialTimeout, it lowers DialTimeout to itself (Java's rule too). A
	// negative value (NoWait included) is an error.
	DialTimeoutMax time.Duration

	// ConnMaxIdle closes a broker connection that has carried no request and
	// no answer for that long, with nothing in flight
	// (connections.max.idle.ms): Produce, metadata and transaction
	// coordinator connections alike; the next request to that broker dials
	// again. A connection is never closed while a request is being written
	// or awaits its answer, however long that takes; a request that finds a
	// connection open just as it closes is never written to it, and goes to
	// a new connection to the same broker at once, without backoff or retry.
	// Closing first (Kafka's brokers close connections idle for 10 minutes,
	// and NATs and load balancers drop them) keeps a request from being
	// written into a connection that is gone. A connection the broker or the
	// network closed (FIN or RST) while nothing was in flight costs a
	// reconnect too, never a retry or ErrOutcomeUnknown, once the close has
	// reached the producer (a request written as it arrives is retried like
	// one on any broken connection); one a NAT or load balancer forgot
	// without a word is only found out when a request to it times out
	// (RequestTimeout, an ambiguous outcome): set ConnMaxIdle below such a
	// device's idle timeout (Azure Event Hubs: 4 minutes). 0 means the
	// default, 9m, as Java's; a negative value (NoWait or -1ms, say) means
	// never: a connection stays open until it breaks or the producer closes.
	ConnMaxIdle time.Duration

	// Dialer opens the network connection of every connection the
	// producer makes (bootstrap and metadata, Produce, the transaction
	// and group coordinators, CreateTopics): for a proxy, a tunnel or your
	// own name resolution. It gets network "tcp" and the address as given
	// ("host:port", from Brokers or from metadata), resolved by nothing
	// before it, unless ClientDNSLookup is
	// DNSResolveCanonicalBootstrapServersOnly, which hands it the
	// bootstrap brokers' canonical names instead of Brokers; TLS, when set,
	// runs over the connection it returns, and SendBufferBytes and
	// ReceiveBufferBytes are set on it when it is a *net.TCPConn or has a
	// NetConn method returning one (as a *tls.Conn has). Its context
	// carries the setup timeout. Default
	// nil: a net.Dialer that tries each address the host resolves to (see
	// ClientDNSLookup). It is user code: a panic is recovered and logged
	// at Error, and fails that connection attempt as an error does (it is
	// retried with backoff).
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

	// ClientDNSLookup says how broker host names are resolved
	// (client.dns.lookup). DNSUseAllIPs, the default (also the zero
	// value): a host is resolved at each connection attempt, and each of
	// its addresses is tried in turn until one connects, sharing the setup
	// timeout (DialTimeout). DNSResolveCanonicalBootstrapServersOnly: each
	// bootstrap host (Brokers) is resolved when the bootstrap brokers are
	// needed, each address looked up in reverse, and its canonical host
	// name used as a bootstrap broker with the same port (an address
	// without a name is used as it is); Kerberos (GSSAPI) needs this when
	// Brokers name an alias or a load balancer. Brokers learned from
	// metadata are used as advertised either way. Any other value is an
	// error from New.
	ClientDNSLookup DNSLookup

	// SendBufferBytes and ReceiveBufferBytes set each broker connection's
	// socket send and receive buffers, SO_SNDBUF and SO_RCVBUF
	// (send.buffer.bytes, receive.buffer.bytes). 0, the default, or -1
	// (Java's spelling) keeps the operating system's: unlike Java, whose
	// defaults are 131072 and 32768, samsa sets no size unless asked,
	// because a fixed size turns off Linux's buffer autotuning
	// (net.ipv4.tcp_rmem, tcp_wmem), which grows each connection's buffers
	// to its bandwidth-delay product: a fixed 32 KiB receive buffer caps a
	// connection with 10 ms of round trip near 3 MiB/s. Set them for a
	// link autotuning serves badly. Linux caps them at net.core.rmem_max
	// and wmem_max. Other negative values are an error.
	SendBufferBytes, ReceiveBufferBytes int

	// Partitioner chooses each record's partition. Default
	// DefaultPartitioner(): murmur2 of the key like the Java client, and
	// KIP-794's uniform sticky partitioner for records without a key.
	Partitioner Partitioner

	// DisableAdaptivePartitioning makes the uniform sticky partitioner
	// (records that the Partitioner leaves to it: those without a key, by
	// default) switch partitions uniformly
	// (partitioner.adaptive.partitioning.enable=false): each next
	// partition is drawn with equal chances among the partitions with a
	// leader, and each gets BatchSize bytes in turn. By default, as in
	// Java (true), the draw is adaptive (KIP-794): a partition weighs
	// (longest queue + 1 - its queue of batches), so partitions on faster
	// brokers get more records, and PartitionerAvailabilityTimeout
	// applies.
	DisableAdaptivePartitioning bool

	// PartitionerAvailabilityTimeout leaves out of the adaptive sticky
	// partitioner's choice the partitions whose leader has had batches to
	// send but could not take a request for longer than this
	// (partitioner.availability.timeout.ms, KIP-794): its connection is
	// not up (a broker unreachable), or MaxInFlight requests wait for its
	// answers (a slow broker). The partitions come back once their leader
	// takes a request again. When every partition is left out, the choice
	// is among them all. Default 0: off, as in Java. It has no effect
	// with DisableAdaptivePartitioning (as in Java) and on records whose
	// partition the Partitioner chose; a negative value is an error.
	PartitionerAvailabilityTimeout time.Duration

	// BufferPool provides the memory for batches (KIP-72's pluggable
	// pool). A partition's first batch starts with min(BatchSize, 16 KiB)
	// halved while it stays even and at least 512 bytes (512 for the
	// default and any power of two), its next ones with the size the last
	// one reached, and a batch doubles up to BatchSize. Default:
	// bufferpool.New with Size BufferMemory, recycling every one of those
	// sizes. A pool given here that reports a PooledSize (as
	// bufferpool.SimplePool does) sets the starting size instead, so give
	// it a MaxPooledSize of BatchSize to recycle the doublings too. It may
	// be shared between producers; the producer does not close it.
	//
	// A pool other than a *bufferpool.SimplePool is called through a guard
	// that recovers its panics, since the producer calls it with its own
	// locks held and on its own goroutines: a panicking TryAllocate or
	// TryReserve counts as no memory, a panicking Allocate or Reserve
	// fails the Send with an error wrapping ErrBufferExhausted ("the
	// buffer pool panicked in Allocate: ..."), a panicking Release,
	// Unreserve or Hold is dropped (the memory it was to free stays
	// taken), and a panicking Size, Available or IsOutOfMemory reports
	// the Size read by New, 0 and true. The first panic of each method is
	// logged at Error, with its stack, to Logger.
	BufferPool bufferpool.Pool

	// Logger receives the producer's logs. Default: slog.Default() (the
	// logger set when a line is logged) at Warn and above only, so that a
	// first failure (a broker that cannot be reached, a listener that does
	// not speak the client's protocol) is seen at once; Info and Debug
	// lines are dropped even if slog.Default() enables them. Silence it
	// with a discarding logger: slog.New(slog.DiscardHandler). Nothing is
	// logged per record or per request above Debug, and a failure that
	// lasts is logged at Warn (or Error) when it starts and then at most
	// once a minute per broker (or topic) while it lasts, at Debug in
	// between:
	//   - Error: a panicking callback, hook or BufferPool (a hook's once
	//     per hook and event kind, a pool's once per method), a broker
	//     without Produce v3+, an authentication failure or listener
	//     mismatch;
	//   - Warn: a broker connection that broke or cannot be set up, with
	//     its cause (connection refused, no such host, timed out), a
	//     failed metadata fetch, a topic that fails its records fast, a
	//     failed CreateTopics or InitProducerId, a fenced producer id,
	//     acknowledged records gone from the log (see OnDataLoss), Close
	//     leaving a blocked callback, Java properties ignored, a pool
	//     buffer leaked;
	//   - Info: a broker reachable again, a connection's first KIP-219
	//     throttle, a topic created or its creation throttled, a topic
	//     usable again, metadata working again after failures, a topic
	//     whose metadata is not usable yet (its 1st, 10th, 20th...
	//     attempt), an epoch bump and the sequence error that caused it;
	//   - Debug: everything per batch or request (sent, acked, retried),
	//     later throttles, dials.
	Logger *slog.Logger

	// Hooks observe the producer (see Hook): each implements any subset
	// of the Hook* interfaces (HookRecordBuffered, HookBatchWritten, ...)
	// and is called, in the order given, on the goroutine each interface
	// names, with no samsa lock held. A hook's panic is recovered and
	// logged at Error once per hook and event kind. Default none; with
	// none, Send pays nothing for them. New fails with ErrInvalidConfig
	// for a nil hook or one that implements no Hook* interface.
	Hooks []Hook

	// DisableMetricsPush stops the producer from pushing its metrics to
	// the cluster (enable.metrics.push=false). By default, as Java's
	// producer (enable.metrics.push=true), it takes part in KIP-714
	// client metrics: when a broker advertises GetTelemetrySubscriptions
	// and PushTelemetry (Kafka 3.7+ with a client metrics plugin; Kafka
	// without one advertises neither, and then nothing is sent), the
	// producer asks it for a subscription at start and, if the cluster
	// subscribes it to any metric, pushes the metrics of Metrics that the
	// subscription names, under Java's names
	// (org.apache.kafka.producer.record.send.total, ...) as OTLP, every
	// push interval and once more on Close (bounded by Close's ctx). A
	// push costs one small request on the metadata connection per
	// interval, on a goroutine of its own; Send pays nothing. Failures are
	// logged at Debug and never affect records.
	DisableMetricsPush bool

	// OnDataLoss, when set, is called (on the IO goroutine: it must return
	// quickly) when a broker reports a log start offset beyond an offset it
	// had acknowledged to this producer: records that were acknowledged are
	// no longer in the partition (deleted by retention or DeleteRecords, or
	// lost by the cluster). It is called once per partition each time the
	// log start moves past the last acknowledged offset. Close called from
	// it closes in the background (see Close). Default: the event is only
	// logged at Warn level.
	OnDataLoss func(*DataLossError)

	// TLS, if not nil, makes every broker connection use TLS (bootstrap,
	// metadata and produce connections, and brokers learned from
	// metadata). Certificates are verified; a config without ServerName
	// verifies each broker's certificate against the host it is dialed
	// by. Default nil: plaintext. See security.go for what fails how.
	TLS *tls.Config

	// SASL, if not nil, authenticates every broker connection with this
	// mechanism (package sasl: Plain, ScramSHA256, ScramSHA512,
	// OAuthBearer, or your own), and re-authenticates before the broker's
	// session ends (KIP-368). Use it with TLS. Default nil: no SASL. A
	// Config prints it by its mechanism's name only, and TLS as enabled or
	// disabled (see Config.String), so %v of a Config is safe to log.
	SASL sasl.Mechanism

	// Spool, if not nil, makes every record accepted by Send go through a
	// durable log on disk first (SpoolConfig; the samsa.spool.*
	// properties), so that it survives a crash, a restart and an outage
	// of any length: see Future.Persisted and README's "Durable spool".
	// With a spool, DeliveryTimeout does not apply (a spooled record is
	// retried until it is delivered or Close), and New sends again the
	// records that a previous producer on the directory left
	// unacknowledged. Default nil: records are kept in memory only.
	Spool *SpoolConfig

	// ignoredProps are the properties ConfigFromProperties accepted without
	// a setting to map them to; New logs them once at Warn to Logger.
	ignoredProps []string
}

// withDefaults validates c and returns it with every default applied and
// NoWait normalized: in the result, Linger, MaxBlock and RetryBackoff of 0
// mean no linger, no blocking and no backoff;
// AutoCreatePartitions and AutoCreateReplicationFactor are -1 or positive;
// Partitioner, BufferPool and Logger are set. The error wraps
// ErrInvalidConfig and names every bad field.
func (c Config) withDefaults() (Config, error) {
	var bad []string
	fail := func(field, format string, args ...any) {
		bad = append(bad, field+": "+fmt.Sprintf(format, args...))
	}

	if len(c.Brokers) == 0 {
		fail("Brokers", "at least one bootstrap broker is required")
	}
	for i, b := range c.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" || port == "" {
			fail(fmt.Sprintf("Brokers[%d]", i), "%q is not host:port", b)
			continue
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			fail(fmt.Sprintf("Brokers[%d]", i), "%q has an invalid port", b)
		}
	}
	if c.ClientID == "" {
		c.ClientID = defaultClientID
	}

	c.Linger = duration("Linger", c.Linger, defaultLinger, true, fail)
	switch {
	case c.BatchSize == 0:
		c.BatchSize = defaultBatchSize
	case c.BatchSize < 0:
		fail("BatchSize", "must not be negative, got %d", c.BatchSize)
	}
	if c.BufferPool != nil {
		c.BufferMemory = c.BufferPool.Size()
	}
	switch {
	case c.BufferMemory == 0:
		c.BufferMemory = defaultBufferMemory
	case c.BufferMemory < 0:
		fail("BufferMemory", "must not be negative, got %d", c.BufferMemory)
	}
	if c.BatchSize > 0 && c.BufferMemory > 0 && int64(c.BatchSize) > c.BufferMemory {
		fail("BatchSize", "%d is larger than BufferMemory (%d)", c.BatchSize, c.BufferMemory)
	}
	c.MaxBlock = duration("MaxBlock", c.MaxBlock, defaultMaxBlock, true, fail)
	switch {
	case c.MaxRequestSize == 0:
		c.MaxRequestSize = defaultMaxRequestSize
	case c.MaxRequestSize < 0:
		fail("MaxRequestSize", "must not be negative, got %d", c.MaxRequestSize)
	}

	checkCompression(c.Compression, c.CompressionLevel, fail)

	c.RequestTimeout = duration("RequestTimeout", c.RequestTimeout, defaultRequestTimeout, false, fail)
	c.DeliveryTimeout = duration("DeliveryTimeout", c.DeliveryTimeout,
		max(defaultDeliveryTimeout, c.Linger+c.RequestTimeout), false, fail)
	if c.DeliveryTimeout > 0 && c.DeliveryTimeout < c.Linger+c.RequestTimeout {
		fail("DeliveryTimeout", "%v is less than Linger + RequestTimeout (%v + %v)",
			c.DeliveryTimeout, c.Linger, c.RequestTimeout)
	}
	c.RetryBackoffMax = duration("RetryBackoffMax", c.RetryBackoffMax,
		max(defaultRetryBackoffMax, c.RetryBackoff), false, fail)
	c.RetryBackoff = duration("RetryBackoff", c.RetryBackoff, min(defaultRetryBackoff, c.RetryBackoffMax), true, fail)
	if c.RetryBackoffMax > 0 && c.RetryBackoff > c.RetryBackoffMax {
		c.RetryBackoff = c.RetryBackoffMax
	}
	switch {
	case c.MaxInFlight == 0:
		c.MaxInFlight = defaultMaxInFlight
	case c.MaxInFlight < 0:
		fail("MaxInFlight", "must not be negative, got %d", c.MaxInFlight)
	}
	switch {
	case c.CompressionConcurrency == 0:
		c.CompressionConcurrency = min(runtime.GOMAXPROCS(0), maxDefaultCompressionConcurrency)
	case c.CompressionConcurrency < 0:
		fail("CompressionConcurrency", "must not be negative, got %d", c.CompressionConcurrency)
	}
	if !c.DisableIdempotence {
		if c.Acks != AcksAll {
			fail("Acks", "idempotence requires AcksAll, got %v (set DisableIdempotence to use it)", c.Acks)
		}
		if c.MaxInFlight > idempotenceMaxInFlight {
			fail("MaxInFlight", "idempotence allows at most %d, got %d (set DisableIdempotence to use more)",
				idempotenceMaxInFlight, c.MaxInFlight)
		}
	}
	c.TransactionTimeout = duration("TransactionTimeout", c.TransactionTimeout, defaultTransactionTimeout, false, fail)
	if c.TransactionalID != "" && c.DisableIdempotence {
		fail("TransactionalID", "transactions require idempotence (DisableIdempotence is set)")
	}
	c.checkSpool(fail)
	c.MetadataMaxAge = duration("MetadataMaxAge", c.MetadataMaxAge, defaultMetadataMaxAge, false, fail)
	c.PartitionerAvailabilityTimeout = duration("PartitionerAvailabilityTimeout", c.PartitionerAvailabilityTimeout, 0, false, fail)
	c.MetadataMaxIdle = duration("MetadataMaxIdle", c.MetadataMaxIdle, defaultMetadataMaxIdle, false, fail)
	switch {
	case c.AutoCreatePartitions == 0:
		c.AutoCreatePartitions = -1
	case c.AutoCreatePartitions < -1:
		fail("AutoCreatePartitions", "must be positive, or -1 for the broker's default, got %d", c.AutoCreatePartitions)
	}
	switch {
	case c.AutoCreateReplicationFactor == 0:
		c.AutoCreateReplicationFactor = -1
	case c.AutoCreateReplicationFactor < -1:
		fail("AutoCreateReplicationFactor", "must be positive, or -1 for the broker's default, got %d",
			c.AutoCreateReplicationFactor)
	}
	if c.ConnMaxIdle == 0 {
		c.ConnMaxIdle = defaultConnMaxIdle
	} // negative: never close an idle connection
	c.DialTimeoutMax = duration("DialTimeoutMax", c.DialTimeoutMax, max(defaultDialTimeoutMax, c.DialTimeout), false, fail)
	c.DialTimeout = duration("DialTimeout", c.DialTimeout, min(defaultDialTimeout, c.DialTimeoutMax), false, fail)
	if c.DialTimeoutMax > 0 && c.DialTimeout > c.DialTimeoutMax {
		c.DialTimeout = c.DialTimeoutMax
	}
	switch c.MetadataRecoveryStrategy {
	case "":
		c.MetadataRecoveryStrategy = MetadataRecoveryRebootstrap
	case MetadataRecoveryRebootstrap, MetadataRecoveryNone:
	default:
		fail("MetadataRecoveryStrategy", "%q is not %s or %s", string(c.MetadataRecoveryStrategy), MetadataRecoveryRebootstrap, MetadataRecoveryNone)
	}
	c.MetadataRecoveryRebootstrapTrigger = duration("MetadataRecoveryRebootstrapTrigger", c.MetadataRecoveryRebootstrapTrigger, defaultRebootstrapTrigger, true, fail)
	switch c.ClientDNSLookup {
	case "":
		c.ClientDNSLookup = DNSUseAllIPs
	case DNSUseAllIPs, DNSResolveCanonicalBootstrapServersOnly:
	default:
		fail("ClientDNSLookup", "%q is not %s or %s", string(c.ClientDNSLookup), DNSUseAllIPs, DNSResolveCanonicalBootstrapServersOnly)
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"SendBufferBytes", c.SendBufferBytes}, {"ReceiveBufferBytes", c.ReceiveBufferBytes}} {
		if f.n < -1 {
			fail(f.name, "must be positive, or 0 or -1 for the operating system's size, got %d", f.n)
		}
	}

	if len(bad) > 0 {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(bad, "; "))
	}

	if c.Partitioner == nil {
		c.Partitioner = DefaultPartitioner()
	}
	if c.Logger == nil {
		c.Logger = logging.Default()
	}
	if c.BufferPool == nil {
		pool, err := bufferpool.New(bufferpool.Options{
			Size: c.BufferMemory, PooledSize: initialBatchSize(c.BatchSize), MaxPooledSize: c.BatchSize, Logger: c.Logger,
		})
		if err != nil {
			return Config{}, fmt.Errorf("%w: BufferPool: %w", ErrInvalidConfig, err)
		}
		c.BufferPool = pool
	}
	return c, nil
}

// duration applies Config's rule for duration fields to d, the value of
// field: 0 is def, a positive d is kept, NoWait is 0 where noWait allows it,
// and any other negative value is reported through fail.
func duration(field string, d, def time.Duration, noWait bool, fail func(field, format string, args ...any)) time.Duration {
	switch {
	case d == 0:
		return def
	case d > 0:
		return d
	case d == NoWait && noWait:
		return 0
	case noWait:
		fail(field, "must not be negative, got %v (NoWait, -1ns, asks for no wait)", d)
	case d == NoWait:
		fail(field, "must not be negative: NoWait is not allowed here (0 means the default)")
	default:
		fail(field, "must not be negative, got %v", d)
	}
	return d
}

// checkCompression validates a codec and its level with the compression
// package's own rules (Kafka's ranges), so the two cannot drift apart.
func checkCompression(t compression.Type, level int, fail func(field, format string, args ...any)) {
	if _, err := compression.NewCompressor(t, level); err != nil {
		field := "CompressionLevel"
		if _, terr := compression.NewCompressor(t, 0); terr != nil {
			field = "Compression"
		}
		fail(field, "%s", strings.TrimPrefix(err.Error(), "compression: ")) // the field names the package
	}
}
