package testbroker

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// replicationFactor is how many replicas Metadata reports per partition
// (capped by the number of running brokers); the log is shared, so
// replicas are only reported, never copied.
const replicationFactor = 3

// handleMetadata answers with the running brokers and the requested topics
// (all of them for a null list, or an empty one before v1). Unknown topics
// are auto-created when Config.AllowAutoTopicCreation is set and the
// request allows it (always before v4): the response then says
// LEADER_NOT_AVAILABLE for them, as Kafka does while a topic is being
// created, and the next Metadata shows its partitions. Auto-creation
// counts against the KIP-599 mutation quota without being refused: the
// response carries the throttle time instead.
func handleMetadata(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.MetadataRequest)
	c := cn.c
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.ClusterID = kmsg.StringPtr(c.cfg.ClusterID)
	// The brokers and the leaders below come from one view: under c.mu,
	// which StopBroker holds while it stops a broker and moves its
	// partitions.
	c.mu.Lock()
	running := c.runningBrokers()
	for _, b := range running {
		host, port := b.advertised(cn)
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.id, host, port
		resp.Brokers = append(resp.Brokers, rb)
	}
	resp.ControllerID = -1
	if len(running) > 0 {
		resp.ControllerID = running[0].id
	}

	all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	autoCreate := c.cfg.AllowAutoTopicCreation && (req.Version < 4 || req.AllowAutoTopicCreation)
	var created int32
	if all {
		names := make([]string, 0, len(c.topics))
		for name := range c.topics {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			resp.Topics = append(resp.Topics, c.metadataTopicLocked(c.topics[name]))
		}
	}
	for _, rt := range req.Topics {
		if all {
			break
		}
		var t *topic
		switch {
		case rt.Topic != nil:
			t = c.topics[*rt.Topic]
		case rt.TopicID != [16]byte{}:
			t = c.topicIDs[rt.TopicID]
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = ecUnknownTopicID
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		if t != nil {
			resp.Topics = append(resp.Topics, c.metadataTopicLocked(t))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = rt.Topic
		mt.ErrorCode = ecUnknownTopicOrPartition
		switch {
		case rt.Topic == nil || validTopicName(*rt.Topic) != nil:
			mt.ErrorCode = ecInvalidTopic
		case autoCreate && c.roomLocked(int64(c.cfg.DefaultPartitions)):
			c.createTopicLocked(*rt.Topic, c.cfg.DefaultPartitions, c.defaultReplicationFactor(), nil)
			created += c.cfg.DefaultPartitions
			mt.ErrorCode = ecLeaderNotAvailable
		}
		resp.Topics = append(resp.Topics, mt)
	}
	c.mu.Unlock()

	var throttle time.Duration
	if l, key, ok := c.quotaFor(quotaKeyMutationRate, cn); ok && created > 0 {
		throttle = c.mutations.recordWith(key, float64(created), l)
	}
	return result{resp: resp, throttle: throttle}
}

// metadataTopicLocked describes t; the caller holds c.mu.
func (c *Cluster) metadataTopicLocked(t *topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.name)
	mt.TopicID = t.id
	for i, p := range t.partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = p.leader.Load()
		mp.LeaderEpoch = p.epoch.Load()
		if mp.Leader < 0 {
			mp.ErrorCode = ecLeaderNotAvailable
		} else {
			mp.Replicas = c.replicasLocked(mp.Leader, t.state.rf)
			mp.ISR = mp.Replicas
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// replicasLocked lists the leader and the next running brokers after it,
// rf in all at most.
func (c *Cluster) replicasLocked(leader int32, rf int16) []int32 {
	n := int32(len(c.brokers))
	rs := []int32{leader}
	for i := int32(1); i < n && len(rs) < int(rf); i++ {
		id := (leader + i) % n
		if c.brokers[id].running() {
			rs = append(rs, id)
		}
	}
	return rs
}
