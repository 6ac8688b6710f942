package samsatest

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/producer"
)

// Errors of the [Cluster] methods, for errors.Is.
var (
	// ErrUnknownTopic is returned for a topic or partition the cluster does
	// not have.
	ErrUnknownTopic = errors.New("samsatest: unknown topic or partition")
	// ErrTopicExists is returned by [Cluster.CreateTopic] for a topic that
	// exists already.
	ErrTopicExists = errors.New("samsatest: topic already exists")
	// ErrUnknownBroker is returned for a broker id outside [0, Brokers).
	ErrUnknownBroker = errors.New("samsatest: unknown broker")
	// ErrBrokerStopped is returned by [Cluster.MoveLeader] for a stopped
	// broker.
	ErrBrokerStopped = errors.New("samsatest: broker stopped")
	// ErrClosed is returned by [Cluster.RestartBroker] on a closed cluster.
	ErrClosed = errors.New("samsatest: cluster closed")
	// ErrInvalidConfig wraps the errors of [NewCluster] about a bad
	// [Config] field.
	ErrInvalidConfig = errors.New("samsatest: invalid config")
)

// Config configures a [Cluster]. The zero value is a 3-broker cluster on
// random loopback ports with no topics, which creates a topic when a
// Metadata request names it, as a Kafka broker does by default.
type Config struct {
	// Brokers is the number of brokers, with ids 0 to Brokers-1. Default 3;
	// at most 1000.
	Brokers int
	// Topics are created before NewCluster returns: topic name to
	// partition count (0 or less: DefaultPartitions). Default none.
	Topics map[string]int32
	// DefaultPartitions is the partition count of a topic created with 0
	// partitions, by Metadata (auto-creation) or by a CreateTopics
	// request asking for the broker's default. Default 1, as Kafka's
	// num.partitions. A topic has at most 16384 partitions.
	DefaultPartitions int32
	// DisableAutoTopicCreation keeps a Metadata request from creating the
	// unknown topics it names, as Kafka's auto.create.topics.enable=false
	// does on a broker: a producer then waits for a topic that the test
	// did not create, and fails after its MaxBlock, as against such a
	// cluster. Default false: a Metadata request whose client allows it
	// (producer.Config.DisableAutoTopicCreation unset, Java's
	// allow.auto.create.topics) creates the topic with DefaultPartitions,
	// Kafka's default. The producer's Config.AutoCreateTopics is another
	// thing: the producer sending CreateTopics itself.
	DisableAutoTopicCreation bool
	// MaxMessageBytes is the largest record batch a partition accepts; a
	// larger one gets MESSAGE_TOO_LARGE. Default 1048588, Kafka's
	// message.max.bytes.
	MaxMessageBytes int32
	// Logger receives the brokers' connection errors and lifecycle events.
	// Default: discarded.
	Logger *slog.Logger
}

// Cluster is a running in-process Kafka cluster, from [NewCluster] or
// [Start]. Its methods are safe for concurrent use.
type Cluster struct {
	c *testbroker.Cluster
}

// NewCluster starts a cluster: every broker listens, and every topic of
// cfg.Topics exists, when it returns. Call [Cluster.Close] when done. The
// error wraps [ErrInvalidConfig] for a bad field or a bad topic, or is the
// listener's.
func NewCluster(cfg Config) (*Cluster, error) {
	if cfg.Brokers < 0 || cfg.Brokers > 1000 {
		return nil, fmt.Errorf("%w: Brokers %d is not in [0, 1000]", ErrInvalidConfig, cfg.Brokers)
	}
	if cfg.DefaultPartitions < 0 {
		return nil, fmt.Errorf("%w: DefaultPartitions %d is negative", ErrInvalidConfig, cfg.DefaultPartitions)
	}
	if cfg.MaxMessageBytes < 0 {
		return nil, fmt.Errorf("%w: MaxMessageBytes %d is negative", ErrInvalidConfig, cfg.MaxMessageBytes)
	}
	tc, err := testbroker.New(testbroker.Config{
		Brokers:                cfg.Brokers,
		DefaultPartitions:      cfg.DefaultPartitions,
		AllowAutoTopicCreation: !cfg.DisableAutoTopicCreation,
		MaxMessageBytes:        cfg.MaxMessageBytes,
		Logger:                 cfg.Logger,
	})
	if err != nil {
		return nil, translate(err)
	}
	c := &Cluster{c: tc}
	// Sorted, so that leaders are spread the same way in every run.
	for _, name := range slices.Sorted(maps.Keys(cfg.Topics)) {
		if err := c.CreateTopic(name, cfg.Topics[name]); err != nil {
			c.Close()
			return nil, fmt.Errorf("%w: Topics: %v", ErrInvalidConfig, strings.TrimPrefix(err.Error(), "samsatest: "))
		}
	}
	return c, nil
}

// Start is [NewCluster] for a test: it fails the test at once (t.Fatal) if
// the cluster does not start, and closes the cluster when the test and
// its subtests end (t.Cleanup). Cleanups run after the test's deferred
// calls, so a producer closed with defer is closed first.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	c, err := NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
		return nil
	}
	t.Cleanup(c.Close)
	return c
}

// Addrs returns the "host:port" of every broker, indexed by broker id
// (stopped brokers included): the bootstrap servers of a client.
func (c *Cluster) Addrs() []string { return c.c.Addrs() }

// Close stops every broker, closes every client connection, releases
// every stalled request and waits for the cluster's goroutines to end.
// Clients connected to it then see broken connections. Close is
// idempotent.
func (c *Cluster) Close() { _ = c.c.Close() }

// CreateTopic creates a topic of partitions partitions (0 or less:
// [Config].DefaultPartitions), with leaders spread round-robin over the
// running brokers. Clients see it at their next Metadata request. The
// error wraps [ErrTopicExists] for an existing topic, or names what is
// wrong with the name (Kafka's rules: 1 to 249 characters of
// [a-zA-Z0-9._-], not "." or "..") or the partition count.
func (c *Cluster) CreateTopic(name string, partitions int32) error {
	return translate(c.c.CreateTopic(name, partitions))
}

// Record is one record as the cluster stored it, for a test's assertions.
type Record struct {
	// Partition and Offset say where the record is.
	Partition int32
	Offset    int64
	// Timestamp is the record's create time as the producer set it (or
	// the append time, for a batch that says LogAppendTime), with
	// millisecond precision.
	Timestamp time.Time
	// Key and Value are nil for a null key or value, and non-nil
	// (possibly empty) otherwise.
	Key, Value []byte
	// Headers are the record's headers in the order they were sent; nil
	// when it has none. A null header value is nil.
	Headers []producer.Header
	// Compression is the codec of the batch the record came in. A
	// producer sends a batch uncompressed when its codec would not make it
	// smaller, as samsa does.
	Compression compression.Type
	// Transactional is set for a record a transactional producer sent
	// (in a transaction), and Control for a commit or abort marker the
	// transaction coordinator wrote at a transaction's end: [Cluster.Records]
	// returns markers and the records of aborted and ongoing transactions
	// too, [Cluster.CommittedRecords] neither.
	Transactional, Control bool
}

// Records returns the records of every partition of topic: partition 0's
// in offset order, then partition 1's, and so on; with the markers and
// the records of aborted transactions of a transactional producer (see
// [Cluster.CommittedRecords] for what a read_committed consumer sees).
// Records sent with
// acks=none may be appended a moment after the producer completed them:
// wait for [Cluster.HighWatermark] first. The error wraps
// [ErrUnknownTopic].
func (c *Cluster) Records(topic string) ([]Record, error) {
	var all []Record
	for part := int32(0); ; part++ {
		recs, err := c.PartitionRecords(topic, part)
		if errors.Is(err, ErrUnknownTopic) && part > 0 {
			return all, nil
		}
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
}

// CommittedRecords returns what a read_committed consumer reading topic
// from the start would see now, in the order of [Cluster.Records]: the
// records of non-transactional producers and of committed transactions.
// It leaves out the commit and abort markers, the records of aborted
// transactions, and, in each partition, every record from the first one
// of a transaction still open (the last stable offset) on, as a
// read_committed consumer waits for its end. The error wraps
// [ErrUnknownTopic].
func (c *Cluster) CommittedRecords(topic string) ([]Record, error) {
	var all []Record
	for part := int32(0); ; part++ {
		recs, err := c.PartitionCommittedRecords(topic, part)
		if errors.Is(err, ErrUnknownTopic) && part > 0 {
			return all, nil
		}
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
}

// PartitionCommittedRecords is [Cluster.CommittedRecords] for one
// partition. The error wraps [ErrUnknownTopic].
func (c *Cluster) PartitionCommittedRecords(topic string, partition int32) ([]Record, error) {
	stored, err := c.c.Records(topic, partition)
	if err != nil {
		return nil, translate(err)
	}
	idx := committed(stored)
	recs := make([]Record, len(idx))
	for i, j := range idx {
		recs[i] = record(partition, stored[j])
	}
	return recs, nil
}

// committed returns the indexes, in offset order, of the records of one
// partition that a read_committed consumer sees (see
// [Cluster.CommittedRecords]). A transaction is the run of transactional
// records of one producer id up to that producer's next marker.
func committed(recs []testbroker.Record) []int {
	keep := make([]bool, len(recs))
	open := map[int64][]int{} // producer id: its open transaction's records
	for i, r := range recs {
		switch {
		case r.Control:
			// A marker's key is its version (int16) then its type
			// (int16): 0 abort, 1 commit.
			commit := len(r.Key) == 4 && r.Key[3] == 1
			for _, j := range open[r.ProducerID] {
				keep[j] = commit
			}
			delete(open, r.ProducerID)
		case r.Transactional:
			open[r.ProducerID] = append(open[r.ProducerID], i)
		default:
			keep[i] = true
		}
	}
	stable := len(recs) // index of the first record of an open transaction
	for _, idx := range open {
		stable = min(stable, idx[0])
	}
	var out []int
	for i := range stable {
		if keep[i] {
			out = append(out, i)
		}
	}
	return out
}

// PartitionRecords returns the records of one partition in offset order,
// markers and the records of aborted transactions included (see
// [Record].Control). The error wraps [ErrUnknownTopic].
func (c *Cluster) PartitionRecords(topic string, partition int32) ([]Record, error) {
	stored, err := c.c.Records(topic, partition)
	if err != nil {
		return nil, translate(err)
	}
	recs := make([]Record, len(stored))
	for i, s := range stored {
		recs[i] = record(partition, s)
	}
	return recs, nil
}

// record converts a record of the internal cluster.
func record(partition int32, s testbroker.Record) Record {
	r := Record{
		Partition:     partition,
		Offset:        s.Offset,
		Timestamp:     time.UnixMilli(s.Timestamp),
		Key:           s.Key,
		Value:         s.Value,
		Compression:   compression.Type(s.Compression),
		Transactional: s.Transactional,
		Control:       s.Control,
	}
	if len(s.Headers) > 0 {
		r.Headers = make([]producer.Header, len(s.Headers))
		for j, h := range s.Headers {
			r.Headers[j] = producer.Header{Key: h.Key, Value: h.Value}
		}
	}
	return r
}

// HighWatermark returns the offset the next record appended to a
// partition will get: the number of records it holds. The error wraps
// [ErrUnknownTopic].
func (c *Cluster) HighWatermark(topic string, partition int32) (int64, error) {
	hw, err := c.c.HighWatermark(topic, partition)
	return hw, translate(err)
}

// Leader returns the id of the broker that leads a partition, or -1 while
// no broker is running. The error wraps [ErrUnknownTopic].
func (c *Cluster) Leader(topic string, partition int32) (int32, error) {
	leader, _, err := c.c.Leader(topic, partition)
	return leader, translate(err)
}

// MoveLeader makes broker the leader of a partition, as a leader election
// would: requests for the partition that reach the old leader get
// NOT_LEADER_OR_FOLLOWER, and clients find the new leader in metadata. The
// error wraps [ErrUnknownTopic], [ErrUnknownBroker] or [ErrBrokerStopped].
func (c *Cluster) MoveLeader(topic string, partition, broker int32) error {
	return translate(c.c.MoveLeader(topic, partition, broker))
}

// StopBroker stops a broker as a controlled shutdown would: its listener
// and connections close, and the partitions it led move to the other
// running brokers with their records. Stopping a stopped broker does
// nothing. The error wraps [ErrUnknownBroker].
func (c *Cluster) StopBroker(broker int32) error {
	return translate(c.c.StopBroker(broker))
}

// RestartBroker starts a stopped broker again, on the same port.
// Partitions do not move back to it by themselves (see
// [Cluster.MoveLeader]), except those that had no running leader.
// Restarting a running broker does nothing. The error wraps
// [ErrUnknownBroker] or [ErrClosed], or is the listener's.
func (c *Cluster) RestartBroker(broker int32) error {
	return translate(c.c.RestartBroker(broker))
}

// translate presents an error of the internal cluster as this package's:
// its message says samsatest, and it wraps the matching sentinel of this
// package instead of the internal one. Other errors (a listener's) are
// wrapped as they are.
func translate(err error) error {
	if err == nil {
		return nil
	}
	const prefix = "testbroker:"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return fmt.Errorf("samsatest: %w", err)
	}
	t := &translated{msg: "samsatest:" + strings.TrimPrefix(msg, prefix)}
	for _, m := range []struct{ internal, public error }{
		{testbroker.ErrUnknownTopic, ErrUnknownTopic},
		{testbroker.ErrTopicExists, ErrTopicExists},
		{testbroker.ErrUnknownBroker, ErrUnknownBroker},
		{testbroker.ErrBrokerStopped, ErrBrokerStopped},
		{testbroker.ErrClosed, ErrClosed},
		{testbroker.ErrInvalidConfig, ErrInvalidConfig},
	} {
		if errors.Is(err, m.internal) {
			t.public = m.public
			break
		}
	}
	return t
}

// translated is an error of the internal cluster, wrapping public (nil:
// nothing).
type translated struct {
	msg    string
	public error
}

func (e *translated) Error() string { return e.msg }
func (e *translated) Unwrap() error { return e.public }
