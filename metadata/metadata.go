package metadata

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/kerr"
)

// Broker is a broker as Metadata describes it.
type Broker struct {
	NodeID int32
	Host   string
	Port   int32
	// Rack is empty when the broker has no rack. It is the broker's text
	// bounded to 256 bytes and escaped, as every broker text samsa keeps
	// (a cut one ends with "… (N bytes)").
	Rack string
}

// Addr returns "host:port".
func (b Broker) Addr() string { return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) }

// Partition is one partition of a topic.
type Partition struct {
	ID int32
	// Leader is the leader's node id, or -1 while there is none (an
	// election, or every replica offline).
	Leader int32
	// LeaderEpoch is the leader's epoch (Metadata v7+), -1 if unknown.
	LeaderEpoch int32
	// Replicas, ISR and Offline are node ids.
	Replicas, ISR, Offline []int32
	// Err is the partition's Kafka error, as kerr errors: typically
	// LEADER_NOT_AVAILABLE (Leader is -1; keep the records waiting) or
	// REPLICA_NOT_AVAILABLE (informational: the leader still works).
	Err error
}

// Topic is one topic in a Snapshot.
type Topic struct {
	Name string
	// ID is the topic id (Metadata v10+), zero if unknown.
	ID [16]byte
	// Partitions are indexed by partition id.
	Partitions []Partition
	// Err is the topic's Kafka error, as kerr errors:
	// UNKNOWN_TOPIC_OR_PARTITION (the topic does not exist yet; it stays
	// wanted and is fetched again with backoff), TOPIC_AUTHORIZATION_FAILED,
	// INVALID_TOPIC_EXCEPTION (not retriable), LEADER_NOT_AVAILABLE (being
	// created). When Err is set, Partitions holds the last good partitions,
	// if any.
	Err error
	// FirstWanted is when Want was first called for the topic (since it
	// was last dropped by MaxIdle).
	FirstWanted time.Time
	// Attempts counts the metadata fetches since FirstWanted, or since the
	// topic was last usable, that did not return it usable (with no topic
	// error and at least one partition). 0 once the topic is usable.
	Attempts int
}

// Usable reports whether the topic exists and has partitions (some may
// still lack a leader).
func (t *Topic) Usable() bool { return t != nil && t.Err == nil && len(t.Partitions) > 0 }

// Snapshot is the cluster as last fetched. It is immutable once published:
// readers never lock, and must not modify it.
type Snapshot struct {
	// Brokers are the live brokers by node id. A broker whose host cannot
	// be one (empty, over 255 bytes, with spaces, control characters or
	// invalid UTF-8) is left out, and logged at Warn.
	Brokers map[int32]Broker
	// Topics are the wanted topics fetched at least once.
	Topics map[string]*Topic
	// ControllerID is the controller's node id (with KRaft, a random
	// broker that forwards to the controller), -1 if unknown.
	ControllerID int32
	// ClusterID is the cluster's id (Metadata v2+), bounded and escaped
	// as Broker.Rack is.
	ClusterID string
	// At is when the snapshot was published (zero for the empty snapshot
	// before the first fetch).
	At time.Time
}

var emptySnapshot = &Snapshot{Brokers: map[int32]Broker{}, Topics: map[string]*Topic{}, ControllerID: -1}

// Leader returns the broker leading topic's partition, and false if the
// topic or partition is unknown, has no leader, or the leader is not among
// the live brokers. It does not allocate.
func (s *Snapshot) Leader(topic string, partition int32) (Broker, bool) {
	t := s.Topics[topic]
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return Broker{}, false
	}
	p := &t.Partitions[partition]
	if p.Leader < 0 {
		return Broker{}, false
	}
	b, ok := s.Brokers[p.Leader]
	return b, ok
}

// topicFromResponse converts one topic of a Metadata response. A topic's
// partitions are 0..n-1, each listed once; an answer listing an id outside
// that range (negative, or not below the count it lists) or twice is broken
// (a buggy broker or proxy, or a bogus id that would make us allocate for
// ids never listed): it returns the error saying so, and the caller keeps
// the topic's old state.
func topicFromResponse(t *kmsg.MetadataResponseTopic) (*Topic, error) {
	out := &Topic{ID: t.TopicID, Err: kerr.ForCode(t.ErrorCode)}
	if t.Topic != nil {
		out.Name = *t.Topic
	}
	if len(t.Partitions) == 0 {
		return out, nil
	}
	n := len(t.Partitions)
	parts := make([]Partition, n)
	seen := make([]bool, n)
	for i := range t.Partitions {
		p := &t.Partitions[i]
		if p.Partition < 0 || int(p.Partition) >= n || seen[p.Partition] {
			return nil, fmt.Errorf("metadata: broken Metadata answer for topic %q: partition id %d among %d partitions (ids must be 0..%d, each once)", out.Name, p.Partition, n, n-1)
		}
		seen[p.Partition] = true
		parts[p.Partition] = Partition{
			ID:          p.Partition,
			Leader:      p.Leader,
			LeaderEpoch: p.LeaderEpoch,
			Replicas:    p.Replicas,
			ISR:         p.ISR,
			Offline:     p.OfflineReplicas,
			Err:         kerr.ForCode(p.ErrorCode),
		}
		if errors.Is(parts[p.Partition].Err, kerr.LeaderNotAvailable) {
			parts[p.Partition].Leader = -1
		}
	}
	out.Partitions = parts
	return out, nil
}

// mergeTopic combines a freshly fetched topic with the published one and
// reports whether the fresh answer was kept (false: it was stale and old is
// kept whole).
//
// Leader-epoch rule: a partition whose new LeaderEpoch is older than the one
// we have comes from a broker with stale metadata; we keep ours. A different
// topic id means the topic was deleted and recreated, and epochs restart, so
// the new topic is taken as is (the caller first drops an answer naming an
// id the topic has retired: topicState.retiredAnswer). A retriable topic error (UNKNOWN_TOPIC_OR_PARTITION,
// LEADER_NOT_AVAILABLE) for a topic we know as usable is also treated as
// stale, and the caller fetches again soon; a non-retriable one replaces it.
func mergeTopic(old, fresh *Topic) (*Topic, bool) {
	if old == nil {
		return fresh, true
	}
	if fresh.Err != nil || len(fresh.Partitions) == 0 {
		if old.Usable() && (fresh.Err == nil || kerr.IsRetriable(fresh.Err)) {
			return old, false
		}
		return fresh, true
	}
	if old.ID != fresh.ID && old.ID != ([16]byte{}) && fresh.ID != ([16]byte{}) {
		return fresh, true
	}
	for i := range fresh.Partitions {
		if i >= len(old.Partitions) {
			break
		}
		np, op := &fresh.Partitions[i], &old.Partitions[i]
		if np.LeaderEpoch >= 0 && op.LeaderEpoch >= 0 && np.LeaderEpoch < op.LeaderEpoch {
			*np = *op
		}
	}
	return fresh, true
}

// sortedNames returns the keys of m in order, for deterministic requests.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
