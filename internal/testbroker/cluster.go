package testbroker

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/bufferpool"
)

// Defaults applied by [New] to the zero fields of [Config].
const (
	// DefaultBrokers is the number of brokers of a cluster.
	DefaultBrokers = 3
	// DefaultMaxMessageBytes is Kafka's message.max.bytes default
	// (1 MiB plus the 12 bytes of a log entry's overhead).
	DefaultMaxMessageBytes = 1048588
	// DefaultSocketRequestMaxBytes is Kafka's socket.request.max.bytes
	// default (100 MiB).
	DefaultSocketRequestMaxBytes = 100 << 20
	// DefaultConnectionsMaxIdle is Kafka's connections.max.idle.ms
	// default (10 minutes).
	DefaultConnectionsMaxIdle = 10 * time.Minute
)

// Errors returned by the runtime operations of a [Cluster].
var (
	// ErrUnknownTopic is returned for a topic or partition the cluster does
	// not have.
	ErrUnknownTopic = errors.New("testbroker: unknown topic or partition")
	// ErrTopicExists is returned by [Cluster.CreateTopic] for a topic that
	// already exists.
	ErrTopicExists = errors.New("testbroker: topic already exists")
	// ErrUnknownBroker is returned for a broker id outside [0, Brokers).
	ErrUnknownBroker = errors.New("testbroker: unknown broker")
	// ErrBrokerStopped is returned when a stopped broker is asked to lead
	// a partition.
	ErrBrokerStopped = errors.New("testbroker: broker stopped")
	// ErrClosed is returned by operations on a closed cluster.
	ErrClosed = errors.New("testbroker: cluster closed")
	// ErrInvalidConfig wraps every error of [New] about a bad [Config]
	// field.
	ErrInvalidConfig = errors.New("testbroker: invalid config")
)

// Config configures a [Cluster]. The zero value is a working 3-broker
// cluster on random loopback ports.
type Config struct {
	// Brokers is the number of brokers, with ids 0 to Brokers-1
	// (default 3).
	Brokers int
	// Host is the address the listeners bind to and that Metadata
	// advertises (default 127.0.0.1).
	Host string
	// BasePort, when not 0, makes broker i listen on BasePort+i; 0 picks
	// random free ports. Either way a restarted broker keeps its port.
	BasePort int
	// DefaultPartitions is the partition count of auto-created topics and
	// of CreateTopics requests asking for -1 (default 1, like Kafka's
	// num.partitions). A topic has at most 16384 partitions.
	DefaultPartitions int32
	// AllowAutoTopicCreation lets a Metadata request create the unknown
	// topics it names when the request allows it (Kafka's
	// auto.create.topics.enable; default false here, true in Kafka).
	AllowAutoTopicCreation bool
	// Sink makes every partition validate and acknowledge produced batches
	// without keeping them, for long benchmarks: offsets still advance,
	// but Fetch returns no records.
	Sink bool
	// UnknownProducerIDErrors makes every partition answer
	// UNKNOWN_PRODUCER_ID to a batch of a producer id it has no state for
	// (never seen, or expired: ExpireProducerIDs) whose first sequence is
	// not 0, as Kafka brokers before 2.5 did. Default false: such a batch
	// is accepted, as current Kafka does.
	UnknownProducerIDErrors bool
	// MaxMessageBytes is the largest record batch a partition accepts;
	// a bigger one gets MESSAGE_TOO_LARGE (default 1048588, Kafka's
	// message.max.bytes).
	MaxMessageBytes int32
	// SocketRequestMaxBytes is the largest request a connection accepts;
	// a bigger size prefix closes the connection (default 100 MiB, Kafka's
	// socket.request.max.bytes).
	SocketRequestMaxBytes int32
	// QueuedMaxBytes bounds the bytes of requests read from sockets and
	// not yet answered, across all brokers (KIP-72's queued.max.bytes).
	// When it is reached, connections stop reading until memory is
	// released. It must be larger than SocketRequestMaxBytes, or <= 0 to
	// turn the bound off (the default).
	QueuedMaxBytes int64
	// MemoryPool, when set, is the pool request memory comes from
	// (KIP-72's memory.pool.class.name): any bufferpool.Pool, for example
	// a bufferpool.SimplePool with LeakDetection to reclaim buffers that
	// were never released. Its Size is queued.max.bytes: QueuedMaxBytes
	// must then be 0 or equal to it, and it must exceed
	// SocketRequestMaxBytes. Default nil: with QueuedMaxBytes > 0 the
	// broker makes a bufferpool.SimplePool in KIP-72's over-allocating
	// mode.
	MemoryPool bufferpool.Pool
	// MutationRate and MutationBurst configure the KIP-599 controller
	// mutation quota of every client id that no quota set with
	// AlterClientQuotas matches: a token bucket per client id filled at
	// MutationRate partition mutations per second up to MutationBurst
	// tokens (default burst: MutationRate × MutationSamples ×
	// MutationWindow). MutationRate 0 leaves only the quotas set with
	// AlterClientQuotas (the default: none).
	MutationRate, MutationBurst float64
	// MutationWindow and MutationSamples are Kafka's
	// controller.quota.window.size.seconds and controller.quota.window.num:
	// a quota R holds a burst of R × MutationSamples × MutationWindow
	// tokens (KIP-599: "Samples = B / R"). Defaults 1 s and 100, the KIP's
	// example; Kafka's own default window count is 11.
	MutationWindow  time.Duration
	MutationSamples int
	// ProduceByteRate is the Produce quota (producer_byte_rate) of every
	// client id that no quota set with AlterClientQuotas matches, in bytes
	// per second, with KIP-219 semantics: Produce v6+ is answered at once
	// with ThrottleTimeMs and the connection is not read until the
	// throttle passes; older versions get a delayed response. The burst
	// is one second of the rate. 0 turns the quota off (the default).
	ProduceByteRate int64
	// ConnectionsMaxIdle is Kafka's connections.max.idle.ms: a broker
	// closes a connection that has sent it no request for that long since
	// it was opened or its last request was answered (default 10 minutes,
	// Kafka's; negative: never). The connection is closed as Kafka's
	// broker does, without a word to the client; Stats.IdleClosed counts
	// these closes. A connection whose request is being handled is never
	// closed for idleness.
	ConnectionsMaxIdle time.Duration
	// ClusterID is the cluster id Metadata reports (default
	// "samsa-testbroker"). An ApiVersions v5 request that names another
	// cluster id or another broker (KIP-1242) is answered
	// REBOOTSTRAP_REQUIRED.
	ClusterID string
	// Logger receives connection errors and lifecycle events (default:
	// discarded).
	Logger *slog.Logger
	// Clock is the time source of the quotas, of append timestamps and of
	// transaction timeouts, for tests (default time.Now). Delays are still
	// waited in real time.
	Clock func() time.Time
	// Security adds TLS and SASL listeners (security.go); nil: one
	// PLAINTEXT listener per broker.
	Security *Security
	// TransactionMaxTimeout is Kafka's transaction.max.timeout.ms: an
	// InitProducerId asking for a longer transaction timeout gets
	// INVALID_TRANSACTION_TIMEOUT (default 15 minutes).
	TransactionMaxTimeout time.Duration
	// TransactionMarkerDelay delays the writing of a transaction's commit
	// or abort markers after EndTxn has answered, as a busy coordinator
	// would: meanwhile the transaction stays in PrepareCommit or
	// PrepareAbort, its partitions' last stable offset does not move, and
	// the producer's next transactional request gets
	// CONCURRENT_TRANSACTIONS. 0 (the default) writes the markers before
	// EndTxn answers.
	TransactionMarkerDelay time.Duration
	// TransactionVersion is the cluster's finalized transaction.version
	// feature (KIP-890), which ApiVersions v3+ answers report with a
	// FinalizedFeaturesEpoch: 2 (the default, as a new Kafka 4.4
	// cluster), 1, or -1 for none reported (a cluster that never set it,
	// or a broker before Kafka 4.0). As in Kafka, the coordinator follows
	// each request's version, whatever the level: a transactional Produce
	// v12+ adds its partition to the transaction itself, TxnOffsetCommit
	// v5+ its group, and EndTxn v5+ bumps the producer epoch and answers
	// it (a new producer id at epoch 0 once the epoch is exhausted); the
	// level tells clients which versions to send. A transaction the
	// coordinator aborts after its timeout at level 2 may then be aborted
	// by the client with EndTxn v5 and its old epoch, which gets the
	// bumped one. SetTransactionVersion changes the level at run time.
	TransactionVersion int16
	// Telemetry, when set, serves KIP-714 client metrics with its
	// subscription (telemetry.go); nil (the default): the brokers do not
	// advertise GetTelemetrySubscriptions and PushTelemetry, as Kafka
	// without a metrics reporter plugin.
	Telemetry *Telemetry
}

func (cfg *Config) setDefaults() error {
	if cfg.Brokers == 0 {
		cfg.Brokers = DefaultBrokers
	}
	if cfg.Brokers < 0 || cfg.Brokers > 1000 {
		return fmt.Errorf("%w: Brokers %d is not in [1, 1000]", ErrInvalidConfig, cfg.Brokers)
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.BasePort < 0 || cfg.BasePort+cfg.Brokers > 65536 {
		return fmt.Errorf("%w: BasePort %d leaves no room for %d brokers", ErrInvalidConfig, cfg.BasePort, cfg.Brokers)
	}
	if cfg.DefaultPartitions == 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.DefaultPartitions < 0 || cfg.DefaultPartitions > maxTopicPartitions {
		return fmt.Errorf("%w: DefaultPartitions %d is not in [1, %d]", ErrInvalidConfig, cfg.DefaultPartitions, maxTopicPartitions)
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxMessageBytes < 0 {
		return fmt.Errorf("%w: MaxMessageBytes %d < 0", ErrInvalidConfig, cfg.MaxMessageBytes)
	}
	if cfg.SocketRequestMaxBytes == 0 {
		cfg.SocketRequestMaxBytes = DefaultSocketRequestMaxBytes
	}
	if cfg.SocketRequestMaxBytes < 64 {
		return fmt.Errorf("%w: SocketRequestMaxBytes %d < 64", ErrInvalidConfig, cfg.SocketRequestMaxBytes)
	}
	if cfg.MemoryPool != nil {
		size := cfg.MemoryPool.Size()
		if cfg.QueuedMaxBytes != 0 && cfg.QueuedMaxBytes != size {
			return fmt.Errorf("%w: QueuedMaxBytes %d differs from the MemoryPool's size %d", ErrInvalidConfig, cfg.QueuedMaxBytes, size)
		}
		cfg.QueuedMaxBytes = size
	}
	if cfg.QueuedMaxBytes > 0 && cfg.QueuedMaxBytes <= int64(cfg.SocketRequestMaxBytes) {
		// KIP-72: the pool must hold the largest single request.
		return fmt.Errorf("%w: QueuedMaxBytes %d must be larger than SocketRequestMaxBytes %d, or <= 0",
			ErrInvalidConfig, cfg.QueuedMaxBytes, cfg.SocketRequestMaxBytes)
	}
	if cfg.MemoryPool != nil && cfg.QueuedMaxBytes <= 0 {
		return fmt.Errorf("%w: the MemoryPool has no room (size %d)", ErrInvalidConfig, cfg.QueuedMaxBytes)
	}
	if cfg.MutationRate < 0 || cfg.MutationBurst < 0 {
		return fmt.Errorf("%w: MutationRate %g and MutationBurst %g must be >= 0", ErrInvalidConfig, cfg.MutationRate, cfg.MutationBurst)
	}
	if cfg.MutationWindow == 0 {
		cfg.MutationWindow = time.Second
	}
	if cfg.MutationSamples == 0 {
		cfg.MutationSamples = 100
	}
	if cfg.MutationWindow < 0 || cfg.MutationSamples < 0 {
		return fmt.Errorf("%w: MutationWindow %v and MutationSamples %d must be >= 0", ErrInvalidConfig, cfg.MutationWindow, cfg.MutationSamples)
	}
	if cfg.MutationRate > 0 && cfg.MutationBurst == 0 {
		cfg.MutationBurst = cfg.MutationRate * float64(cfg.MutationSamples) * cfg.MutationWindow.Seconds()
	}
	if cfg.ProduceByteRate < 0 {
		return fmt.Errorf("%w: ProduceByteRate %d < 0", ErrInvalidConfig, cfg.ProduceByteRate)
	}
	if cfg.ConnectionsMaxIdle == 0 {
		cfg.ConnectionsMaxIdle = DefaultConnectionsMaxIdle
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "samsa-testbroker"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.TransactionMaxTimeout == 0 {
		cfg.TransactionMaxTimeout = DefaultTransactionMaxTimeout
	}
	switch cfg.TransactionVersion {
	case 0:
		cfg.TransactionVersion = 2
	case -1, 1, 2:
	default:
		return fmt.Errorf("%w: TransactionVersion %d is not 1, 2 or -1 (none)", ErrInvalidConfig, cfg.TransactionVersion)
	}
	if cfg.TransactionMaxTimeout < 0 || cfg.TransactionMarkerDelay < 0 {
		return fmt.Errorf("%w: TransactionMaxTimeout %v and TransactionMarkerDelay %v must be >= 0",
			ErrInvalidConfig, cfg.TransactionMaxTimeout, cfg.TransactionMarkerDelay)
	}
	return nil
}

// Cluster is an in-process Kafka cluster: Brokers brokers, each with its own
// loopback listener, sharing one set of topics. Create it with [New] and
// stop it with [Cluster.Close]. All methods are safe for concurrent use.
type Cluster struct {
	cfg Config
	log *slog.Logger

	brokers []*broker

	mu         sync.RWMutex // guards topics, topicIDs, nextLeader, the leaders of partitions
	topics     map[string]*topic
	topicIDs   map[[16]byte]*topic
	nextLeader int32
	numParts   int // partitions of all topics, at most maxClusterPartitions

	pids    producerIDs
	coord   coordinators   // coordinator placement (coordinator.go)
	txn     txnCoordinator // transactions (txn.go)
	offsets groupOffsets   // group offsets (txnoffsets.go)
	// txnVersion is the finalized transaction.version (-1: none), and
	// featuresEpoch the FinalizedFeaturesEpoch ApiVersions reports, bumped
	// by every change of it (apis.go).
	txnVersion    atomic.Int32
	featuresEpoch atomic.Int64

	mem       *requestMemory
	icpt      interceptors
	mutations *bucketSet
	quotas    clientQuotas
	sec       *clusterSecurity // nil without Config.Security
	produceQ  *bucketSet
	tel       telemetryState // KIP-714 (telemetry.go)

	appended appendSignal

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup // every goroutine the cluster started
}

type topic struct {
	name       string
	id         [16]byte
	partitions []*partition
	state      topicState // configs and replication factor (topicconfig.go)
}

// partition is one partition's leadership and log. leader and epoch are
// written under Cluster.mu and read atomically by the hot path.
type partition struct {
	leader atomic.Int32 // broker id, -1 when no broker is alive
	epoch  atomic.Int32 // leader epoch, bumped on every leader change
	log    *partitionLog
}

// setLeader moves leadership to id (-1: none) and bumps the leader epoch,
// which the log stamps into the batches appended from now on. The caller
// holds Cluster.mu.
func (p *partition) setLeader(id int32) {
	p.leader.Store(id)
	p.log.setLeaderEpoch(p.epoch.Add(1))
}

// New starts a cluster configured by cfg: every broker listens before New
// returns. Errors wrap [ErrInvalidConfig] for a bad field, or come from
// net.Listen.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	c := &Cluster{
		cfg:      cfg,
		log:      cfg.Logger,
		topics:   make(map[string]*topic),
		topicIDs: make(map[[16]byte]*topic),
		closed:   make(chan struct{}),
		txn:      txnCoordinator{byID: make(map[string]*txnMeta), byPID: make(map[int64]*txnMeta)},
	}
	c.txnVersion.Store(int32(cfg.TransactionVersion))
	c.featuresEpoch.Store(1)
	var err error
	if c.mem, err = newRequestMemory(cfg.MemoryPool, cfg.QueuedMaxBytes); err != nil {
		return nil, fmt.Errorf("%w: QueuedMaxBytes: %v", ErrInvalidConfig, err)
	}
	if err := c.initSecurity(); err != nil {
		return nil, err
	}
	// The buckets exist even with no quota configured: AlterClientQuotas
	// can add one at any time.
	c.mutations = newBucketSet(cfg.MutationRate, cfg.MutationBurst, cfg.Clock)
	c.produceQ = newBucketSet(float64(cfg.ProduceByteRate), float64(cfg.ProduceByteRate), cfg.Clock)
	if cfg.Telemetry != nil {
		c.tel.cfg.Store(cfg.Telemetry.withDefaults())
	}
	for i := 0; i < cfg.Brokers; i++ {
		port := 0
		if cfg.BasePort != 0 {
			port = cfg.BasePort + i
		}
		b := &broker{c: c, id: int32(i), host: cfg.Host, conns: make(map[*conn]struct{})}
		if err := b.listen(port); err != nil {
			c.Close()
			return nil, err
		}
		c.brokers = append(c.brokers, b)
	}
	c.wg.Add(1)
	go c.reapTransactions()
	c.log.Info("testbroker cluster started", "brokers", c.Addrs())
	return c, nil
}

// Addrs returns the host:port of every broker, indexed by broker id,
// including stopped brokers.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.brokers))
	for i, b := range c.brokers {
		addrs[i] = net.JoinHostPort(b.host, strconv.Itoa(int(b.port)))
	}
	return addrs
}

// Close stops every broker, closes every connection, releases every stalled
// request and waits for all goroutines of the cluster to end. It is
// idempotent and returns nil.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		for _, b := range c.brokers {
			b.stop()
		}
		c.icpt.releaseAll()
		c.appended.broadcast()
		c.wg.Wait()
		c.log.Info("testbroker cluster closed")
	})
	return nil
}

func (c *Cluster) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// CreateTopic creates a topic with the given number of partitions (<= 0:
// Config.DefaultPartitions; at most 16384), with leaders spread round-robin
// across the running brokers. It returns [ErrTopicExists] for an existing
// topic and an error for an invalid name or partition count. Producers see the topic at their next Metadata
// request.
func (c *Cluster) CreateTopic(name string, partitions int32) error {
	return c.CreateTopicWithID(name, partitions, [16]byte{})
}

// CreateTopicWithID is CreateTopic with the topic id id (all zero: a new
// random one), as a cluster moved to new brokers with its data keeps its
// topics' ids. It returns an error for an id another topic has.
func (c *Cluster) CreateTopicWithID(name string, partitions int32, id [16]byte) error {
	if err := validTopicName(name); err != nil {
		return err
	}
	if partitions <= 0 {
		partitions = c.cfg.DefaultPartitions
	}
	if partitions > maxTopicPartitions {
		return fmt.Errorf("testbroker: %d partitions for topic %q: at most %d", partitions, name, maxTopicPartitions)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[name]; ok {
		return fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	if !c.roomLocked(int64(partitions)) {
		return fmt.Errorf("testbroker: topic %q: the cluster holds at most %d partitions", name, maxClusterPartitions)
	}
	if _, dup := c.topicIDs[id]; dup && id != ([16]byte{}) {
		return fmt.Errorf("testbroker: topic %q: another topic has id %x", name, id)
	}
	t := c.createTopicLocked(name, partitions, c.defaultReplicationFactor(), nil)
	if id != ([16]byte{}) {
		delete(c.topicIDs, t.id)
		t.id = id
		c.topicIDs[id] = t
	}
	return nil
}

// TopicID returns topic name's id, or ErrUnknownTopic.
func (c *Cluster) TopicID(name string) ([16]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	if !ok {
		return [16]byte{}, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	return t.id, nil
}

// defaultReplicationFactor is the replication factor of a topic created
// without one: 3, capped by the brokers.
func (c *Cluster) defaultReplicationFactor() int16 {
	return int16(min(replicationFactor, len(c.brokers)))
}

// createTopicLocked creates a topic with validated configs (nil: none).
func (c *Cluster) createTopicLocked(name string, partitions int32, rf int16, configs map[string]string) *topic {
	t := &topic{name: name, state: topicState{configs: configs, rf: rf}}
	c.applyConfigsLocked(t)
	for {
		_, _ = rand.Read(t.id[:])
		if _, dup := c.topicIDs[t.id]; !dup && t.id != [16]byte{} {
			break
		}
	}
	c.addPartitionsLocked(t, partitions)
	c.topics[name] = t
	c.topicIDs[t.id] = t
	return t
}

// maxClusterPartitions caps the partitions of all topics, so that no
// sequence of requests can make the broker allocate without bound.
const maxClusterPartitions = 1 << 16

// roomLocked reports whether n more partitions fit in the cluster.
func (c *Cluster) roomLocked(n int64) bool {
	return int64(c.numParts)+n <= maxClusterPartitions
}

// deleteTopicLocked removes t.
func (c *Cluster) deleteTopicLocked(t *topic) {
	delete(c.topics, t.name)
	delete(c.topicIDs, t.id)
	c.numParts -= len(t.partitions)
}

// addPartitionsLocked grows t to n partitions, spreading the new leaders.
func (c *Cluster) addPartitionsLocked(t *topic, n int32) {
	for int32(len(t.partitions)) < n {
		c.numParts++
		p := &partition{log: newPartitionLog(logConfig{
			Sink:                    c.cfg.Sink,
			MaxMessageBytes:         c.cfg.MaxMessageBytes,
			UnknownProducerIDErrors: c.cfg.UnknownProducerIDErrors,
		})}
		if s := t.state.settings.Load(); s != nil {
			p.log.setSettings(s.log)
		}
		p.leader.Store(c.pickLeaderLocked())
		t.partitions = append(t.partitions, p)
	}
}

// pickLeaderLocked returns the next running broker round-robin, or -1.
func (c *Cluster) pickLeaderLocked() int32 {
	n := int32(len(c.brokers))
	for range n {
		id := c.nextLeader % n
		c.nextLeader++
		if c.brokers[id].running() {
			return id
		}
	}
	return -1
}

// DeleteTopic deletes a topic and its records, or returns [ErrUnknownTopic].
func (c *Cluster) DeleteTopic(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	c.deleteTopicLocked(t)
	return nil
}

// AddPartitions grows a topic to count partitions, like CreatePartitions.
// It returns [ErrUnknownTopic], or an error when count is not larger than
// the current count.
func (c *Cluster) AddPartitions(name string, count int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	if count <= int32(len(t.partitions)) || count > maxTopicPartitions || !c.roomLocked(int64(count)-int64(len(t.partitions))) {
		return fmt.Errorf("testbroker: topic %q has %d partitions, cannot grow to %d", name, len(t.partitions), count)
	}
	c.addPartitionsLocked(t, count)
	return nil
}

// MoveLeader makes broker to the leader of a partition and bumps the
// partition's leader epoch, as a leader election would. Produce requests on
// the old leader then get NOT_LEADER_OR_FOLLOWER. It returns
// [ErrUnknownTopic], [ErrUnknownBroker] or [ErrBrokerStopped].
func (c *Cluster) MoveLeader(topic string, partition, to int32) error {
	if to < 0 || int(to) >= len(c.brokers) {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, to)
	}
	if !c.brokers[to].running() {
		return fmt.Errorf("%w: %d", ErrBrokerStopped, to)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.partitionLocked(topic, partition)
	if err != nil {
		return err
	}
	if p.leader.Load() != to {
		p.setLeader(to)
	}
	return nil
}

// Leader returns the broker leading a partition (-1 when none is running)
// and its leader epoch, or [ErrUnknownTopic].
func (c *Cluster) Leader(topic string, partition int32) (leader, epoch int32, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, err := c.partitionLocked(topic, partition)
	if err != nil {
		return -1, -1, err
	}
	return p.leader.Load(), p.epoch.Load(), nil
}

// StopBroker stops a broker as a controlled shutdown would: its listener
// and connections close, and the partitions it led move to the next
// running broker with a bumped leader epoch (records are kept: they are
// "replicated"). Stopping a stopped broker does nothing. It returns
// [ErrUnknownBroker].
func (c *Cluster) StopBroker(id int32) error {
	if id < 0 || int(id) >= len(c.brokers) {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, id)
	}
	b := c.brokers[id]
	// Stopped and its partitions moved under c.mu, which Metadata holds
	// while it lists the running brokers and the leaders: no answer names a
	// leader it does not list (franz-go fails records on such a leader with
	// "unknown broker"). stop only closes listeners and connections.
	c.mu.Lock()
	defer c.mu.Unlock()
	b.stop()
	for _, t := range c.topics {
		for _, p := range t.partitions {
			if p.leader.Load() == id {
				p.setLeader(c.pickLeaderLocked())
			}
		}
	}
	// Partitions left without a leader while every broker was down.
	return nil
}

// RestartBroker starts a stopped broker again on the same port (tried for
// up to 2 s while something else holds it). Leadership
// does not move back by itself (use [Cluster.MoveLeader]), except for
// partitions that had no running leader at all. Restarting a running broker
// does nothing. It returns [ErrUnknownBroker], [ErrClosed] or the listen
// error.
func (c *Cluster) RestartBroker(id int32) error {
	if id < 0 || int(id) >= len(c.brokers) {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, id)
	}
	if c.isClosed() {
		return ErrClosed
	}
	b := c.brokers[id]
	if b.running() {
		return nil
	}
	_, port := b.addr()
	if err := b.listen(int(port)); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.topics {
		for _, p := range t.partitions {
			if p.leader.Load() < 0 {
				p.setLeader(id)
			}
		}
	}
	return nil
}

// Records returns the decoded records of a partition in offset order, from
// the log start offset on. In sink mode it returns no records. It returns
// [ErrUnknownTopic].
func (c *Cluster) Records(topic string, partition int32) ([]Record, error) {
	p, err := c.partition(topic, partition)
	if err != nil {
		return nil, err
	}
	return p.log.records()
}

// NumBatches returns the number of record batches a partition holds, or
// [ErrUnknownTopic].
func (c *Cluster) NumBatches(topic string, partition int32) (int, error) {
	p, err := c.partition(topic, partition)
	if err != nil {
		return 0, err
	}
	return p.log.numBatches(), nil
}

// HighWatermark returns the offset the next appended record of a partition
// will get, or [ErrUnknownTopic].
func (c *Cluster) HighWatermark(topic string, partition int32) (int64, error) {
	p, err := c.partition(topic, partition)
	if err != nil {
		return 0, err
	}
	return p.log.highWatermark(), nil
}

// DeleteRecordsBefore moves a partition's log start offset to offset,
// dropping the batches wholly before it, as DeleteRecords or retention
// would. Consumers then get OFFSET_OUT_OF_RANGE below it. It returns
// [ErrUnknownTopic].
func (c *Cluster) DeleteRecordsBefore(topic string, partition int32, offset int64) error {
	p, err := c.partition(topic, partition)
	if err != nil {
		return err
	}
	p.log.deleteRecordsBefore(offset)
	return nil
}

// Stats is a snapshot of cluster-wide counters, from [Cluster.Stats].
type Stats struct {
	// InFlightRequestBytes is the size of the requests read and not yet
	// answered; PeakInFlightRequestBytes is its maximum since [New]. With
	// QueuedMaxBytes on, the peak never exceeds QueuedMaxBytes +
	// SocketRequestMaxBytes (KIP-72).
	InFlightRequestBytes, PeakInFlightRequestBytes int64
	// MutedReads counts the times a connection had to wait for request
	// memory (KIP-72 muting).
	MutedReads int64
	// Requests counts the requests handled, by API key.
	Requests map[int16]int64
	// Connections is the number of open client connections.
	Connections int
	// IdleClosed counts the connections the brokers closed because they
	// sent no request for Config.ConnectionsMaxIdle.
	IdleClosed int64
	// Batches and Records count the produced batches the brokers
	// appended (in sink mode too) and the records in them; a batch
	// answered as a duplicate is not counted again.
	Batches, Records int64
	// Bytes is the summed length of those batches as produced (the
	// Records field of each Produce partition: the whole batch, its
	// 61-byte header included, compressed records as sent), duplicates
	// not counted. Bytes/Records is the wire size of a record.
	Bytes int64
}

// Stats returns the cluster's counters.
func (c *Cluster) Stats() Stats {
	s := Stats{Requests: make(map[int16]int64)}
	s.InFlightRequestBytes, s.PeakInFlightRequestBytes, s.MutedReads = c.mem.stats()
	for _, b := range c.brokers {
		b.mu.Lock()
		s.Connections += len(b.conns)
		b.mu.Unlock()
		s.IdleClosed += b.idleClosed.Load()
		s.Batches += b.batches.Load()
		s.Records += b.records.Load()
		s.Bytes += b.bytes.Load()
		for k := range b.requests {
			if n := b.requests[k].Load(); n > 0 {
				s.Requests[int16(k)] += n
			}
		}
	}
	return s
}

// topicByNameOrID finds a topic of a Produce or Fetch request, by its id
// (v13 and later) or by name, and returns it with its partitions; nil when
// unknown.
func (c *Cluster) topicByNameOrID(byID bool, name string, id [16]byte) (*topic, []*partition) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t := c.topics[name]
	if byID {
		t = c.topicIDs[id]
	}
	if t == nil {
		return nil, nil
	}
	return t, t.partitions
}

func (c *Cluster) partition(topic string, partition int32) (*partition, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.partitionLocked(topic, partition)
}

func (c *Cluster) partitionLocked(topic string, partition int32) (*partition, error) {
	t, ok := c.topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.partitions) {
		return nil, fmt.Errorf("%w: %s[%d]", ErrUnknownTopic, topic, partition)
	}
	return t.partitions[partition], nil
}

// runningBrokers returns the running brokers in id order.
func (c *Cluster) runningBrokers() []*broker {
	bs := make([]*broker, 0, len(c.brokers))
	for _, b := range c.brokers {
		if b.running() {
			bs = append(bs, b)
		}
	}
	return bs
}

// validTopicName applies Kafka's topic name rules.
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("testbroker: invalid topic name %q", name)
	}
	if len(name) > 249 {
		return fmt.Errorf("testbroker: topic name %q longer than 249 characters", name)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			return fmt.Errorf("testbroker: topic name %q has an illegal character %q", name, ch)
		}
	}
	return nil
}

// producerIDs allocates producer ids for InitProducerId.
type producerIDs struct {
	mu   sync.Mutex
	next int64
}

// allocate returns a producer id never handed out before.
func (ids *producerIDs) allocate() int64 {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.next++
	return ids.next
}

// appendSignal wakes Fetch requests waiting for new records. The append
// path pays only an atomic load when nobody waits.
type appendSignal struct {
	waiters atomic.Int32
	mu      sync.Mutex
	ch      chan struct{}
}

// wait returns a channel closed at the next broadcast; call done after.
func (s *appendSignal) wait() (ch <-chan struct{}, done func()) {
	s.waiters.Add(1)
	s.mu.Lock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	ch = s.ch
	s.mu.Unlock()
	return ch, func() { s.waiters.Add(-1) }
}

func (s *appendSignal) notify() {
	if s.waiters.Load() > 0 {
		s.broadcast()
	}
}

func (s *appendSignal) broadcast() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}
