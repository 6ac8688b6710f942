// Producer.PartitionsFor: a topic's partitions, leaders and replicas, as
// Java's KafkaProducer.partitionsFor.

package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/metadata"
)

// Node is a broker as metadata names it (Java's org.apache.kafka.common.Node).
// A replica on a broker that the metadata does not list (it is down) has
// only its ID, with Host "" and Port -1, as in Java.
type Node struct {
	ID   int32
	Host string
	Port int32
	Rack string // "" when the broker has none
}

// PartitionInfo is one partition of a topic (Java's PartitionInfo).
type PartitionInfo struct {
	Topic     string
	Partition int32
	// Leader is the partition's leader, nil when it has none (Java's
	// leader() is null then).
	Leader *Node
	// Replicas, InSyncReplicas and OfflineReplicas are the broker's
	// lists, in its order (Java's replicas(), inSyncReplicas(),
	// offlineReplicas()); empty, not nil, when the broker lists none.
	Replicas, InSyncReplicas, OfflineReplicas []Node
}

// PartitionsFor returns the partitions of topic, ordered by partition, as
// Java's KafkaProducer.partitionsFor(topic): from the producer's metadata
// when it has the topic (the topic of a Send), else from a Metadata
// request for it alone, sent to any broker and asked again (after
// RetryBackoff, growing to RetryBackoffMax) while the topic is missing or
// has no partitions. A Metadata request may make the broker create the
// topic unless Config.DisableAutoTopicCreation or AutoCreateTopics is set,
// as the producer's own requests do. The topic is not added to the topics
// the producer refreshes: asking costs nothing after the call.
//
// It waits for the topic up to MaxBlock (max.block.ms, as Java) and until
// ctx ends, whichever comes first; then the error wraps
// context.DeadlineExceeded (or ctx's error) and the last cause (the
// kerr.Error UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist),
// and names the topic, as Java's TimeoutException "Topic t not present in
// metadata after 60000 ms". A refused topic fails at once with an error
// wrapping kerr.TopicAuthorizationFailed (Java's
// TopicAuthorizationException), an invalid name with ErrInvalidRecord or
// kerr.InvalidTopicException; after Close, ErrClosed.
func (p *Producer) PartitionsFor(ctx context.Context, topic string) ([]PartitionInfo, error) {
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	if p.closed.Load() {
		return nil, fmt.Errorf("%w: PartitionsFor after Close", ErrClosed)
	}
	snap := p.meta.Snapshot()
	if t := snap.Topics[topic]; t.Usable() {
		return partitionInfos(topic, t.Partitions, snap.Brokers), nil
	}
	start := time.Now()
	wait := p.cfg.MaxBlock
	if wait <= 0 {
		// MaxBlock NoWait: one request, as Java's max.block.ms=0 waits
		// for nothing it has not got.
		wait = p.cfg.RequestTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for attempt := 0; ; attempt++ {
		infos, cause := p.fetchPartitions(ctx, topic)
		if infos != nil {
			return infos, nil
		}
		if errors.Is(cause, ErrClosed) {
			return nil, fmt.Errorf("%w: Close ended PartitionsFor", ErrClosed)
		}
		retry := kerr.IsRetriable(cause) || errors.Is(cause, errNoPartitions) || ctx.Err() != nil
		var kerrErr *kerr.Error
		if !retry && errors.As(cause, &kerrErr) {
			return nil, fmt.Errorf("producer: PartitionsFor: topic %q: %w", topic, cause)
		}
		if p.cfg.MaxBlock <= 0 {
			return nil, fmt.Errorf("producer: PartitionsFor: topic %q not present in metadata (MaxBlock NoWait): %w", topic, cause)
		}
		backoff := conn.Backoff(attempt, p.cfg.RetryBackoff, p.cfg.RetryBackoffMax)
		timer := time.NewTimer(backoff)
		select {
		case <-timer.C:
			continue
		case <-ctx.Done():
			timer.Stop()
		case <-p.closing.Done():
			timer.Stop()
			return nil, fmt.Errorf("%w: Close ended PartitionsFor", ErrClosed)
		}
		limit := ""
		if context.Cause(ctx) == context.DeadlineExceeded && time.Since(start) >= wait {
			limit = fmt.Sprintf(" (MaxBlock %v)", wait)
		}
		return nil, fmt.Errorf("producer: PartitionsFor: topic %q not present in metadata after %v%s: %w: %w",
			topic, time.Since(start).Round(time.Millisecond), limit, ctx.Err(), cause)
	}
}

// errNoPartitions is the cause when a broker answers a topic without
// partitions (being created).
var errNoPartitions = errors.New("the broker lists no partitions for it")

// fetchPartitions asks any broker for topic's metadata: the partitions, or
// why there are none.
func (p *Producer) fetchPartitions(ctx context.Context, topic string) ([]PartitionInfo, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = !p.cfg.DisableAutoTopicCreation && !p.cfg.AutoCreateTopics
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	kresp, err := p.meta.Do(ctx, req)
	if err != nil {
		if p.closed.Load() {
			return nil, ErrClosed
		}
		return nil, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	if err := kerr.ForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	brokers := make(map[int32]metadata.Broker, len(resp.Brokers))
	for _, b := range resp.Brokers {
		// As the metadata client reads them (invariant 14): a host that
		// cannot be one leaves its broker out (its replicas show only
		// their id), a rack is bounded and cleaned.
		if conn.CheckHost(b.Host) != nil {
			continue
		}
		mb := metadata.Broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			mb.Rack = conn.BrokerText(p.cfg.SASL, *b.Rack)
		}
		brokers[b.NodeID] = mb
	}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		if rt.Topic == nil || *rt.Topic != topic {
			continue
		}
		if err := kerr.ForCode(rt.ErrorCode); err != nil {
			return nil, err
		}
		if len(rt.Partitions) == 0 {
			return nil, errNoPartitions
		}
		parts := make([]metadata.Partition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			leader := rp.Leader
			if errors.Is(kerr.ForCode(rp.ErrorCode), kerr.LeaderNotAvailable) {
				leader = -1
			}
			parts[j] = metadata.Partition{ID: rp.Partition, Leader: leader, Replicas: rp.Replicas, ISR: rp.ISR, Offline: rp.OfflineReplicas}
		}
		infos := partitionInfos(topic, parts, brokers)
		slices.SortFunc(infos, func(a, b PartitionInfo) int { return cmp.Compare(a.Partition, b.Partition) })
		return infos, nil
	}
	return nil, kerr.UnknownTopicOrPartition
}

// partitionInfos turns metadata partitions into PartitionInfos.
func partitionInfos(topic string, parts []metadata.Partition, brokers map[int32]metadata.Broker) []PartitionInfo {
	node := func(id int32) Node {
		if b, ok := brokers[id]; ok {
			return Node{ID: id, Host: b.Host, Port: b.Port, Rack: b.Rack}
		}
		return Node{ID: id, Port: -1}
	}
	nodes := func(ids []int32) []Node {
		out := make([]Node, len(ids))
		for i, id := range ids {
			out[i] = node(id)
		}
		return out
	}
	out := make([]PartitionInfo, len(parts))
	for i := range parts {
		mp := &parts[i]
		pi := PartitionInfo{Topic: topic, Partition: mp.ID, Replicas: nodes(mp.Replicas), InSyncReplicas: nodes(mp.ISR), OfflineReplicas: nodes(mp.Offline)}
		if _, known := brokers[mp.Leader]; mp.Leader >= 0 && known {
			n := node(mp.Leader)
			pi.Leader = &n
		}
		out[i] = pi
	}
	return out
}
