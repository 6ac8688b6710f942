package testbroker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-599 applies its strict quota (refusal with THROTTLING_QUOTA_EXCEEDED)
// from these versions on. Older versions cannot be refused gracefully: as
// the KIP says, they are always accepted, the mutations are recorded, and
// the client is throttled instead (the response carries the throttle time
// and the connection is muted, or, before KIP-219, the response is
// delayed).
const (
	createTopicsStrictVersion     = 6
	createPartitionsStrictVersion = 3
	deleteTopicsStrictVersion     = 5
)

// mutationGate applies the KIP-599 controller mutation quota to one
// CreateTopics, CreatePartitions or DeleteTopics request, topic by topic.
//
// KIP-599's admission rule: a mutation of N partitions is admitted only
// while the bucket holds tokens (K > 0), and then costs N tokens (K may go
// negative); a mutation arriving at K <= 0 is refused. The unit of
// admission is one topic: the topics of a request are taken in order, each
// admitted while tokens remain, and once they are spent the remaining
// topics of the request fail with THROTTLING_QUOTA_EXCEEDED. So with
// K = 100, three topics of 60 partitions create two (K = 100-60-60 = -20)
// and refuse the third. Versions that predate error 89 are never refused:
// every topic is recorded and the client throttled.
type mutationGate struct {
	c        *Cluster
	key      string // the bucket of the connection's quota entity
	l        limit
	on       bool
	strict   bool
	throttle time.Duration // the response's throttle time
}

func (c *Cluster) mutationGate(cn *conn, strict bool) mutationGate {
	l, key, ok := c.quotaFor(quotaKeyMutationRate, cn)
	return mutationGate{c: c, key: key, l: l, on: ok, strict: strict}
}

// admit decides one topic mutating n partitions.
func (g *mutationGate) admit(n int64) bool {
	if !g.on || n <= 0 {
		return true
	}
	if !g.strict {
		g.throttle = max(g.throttle, g.c.mutations.recordWith(g.key, float64(n), g.l))
		return true
	}
	ok, wait := g.c.mutations.admitWith(g.key, float64(n), g.l)
	if !ok {
		g.throttle = max(g.throttle, wait)
	}
	return ok
}

// maxTopicPartitions caps the partitions of a topic, so that no request
// can make the broker allocate without bound.
const maxTopicPartitions = 1 << 14

func msgPtr(s string) *string { return &s }

// handleCreateTopics creates topics with Kafka's validation: INVALID_REQUEST
// for a name repeated in the request, INVALID_TOPIC_EXCEPTION,
// TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS (0 or below -1 partitions),
// INVALID_REPLICATION_FACTOR (more than the brokers), INVALID_CONFIG (an
// unknown topic config or a bad value; see topicconfig.go). -1 partitions means
// Config.DefaultPartitions; ValidateOnly creates nothing and costs no
// quota. Each valid topic is then admitted or refused by the mutation
// quota (see mutationGate).
func handleCreateTopics(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.CreateTopicsRequest)
	c := cn.c
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := make(map[string]int, len(req.Topics))
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var mutations int64
	valid := make([]bool, len(req.Topics))
	nparts := make([]int32, len(req.Topics))
	rfs := make([]int16, len(req.Topics))
	configs := make([]map[string]string, len(req.Topics))
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		n := t.NumPartitions
		if n == -1 {
			n = int32(len(t.ReplicaAssignment))
			if n == 0 {
				n = c.cfg.DefaultPartitions
			}
		}
		rf := t.ReplicationFactor
		if rf == -1 {
			rf = c.defaultReplicationFactor()
		}
		cfgs, cfgErr := parseTopicConfigs(t.Configs)
		switch {
		case seen[t.Topic] > 1:
			rt.ErrorCode, rt.ErrorMessage = ecInvalidRequest, msgPtr("topic named more than once in the request")
		case validTopicName(t.Topic) != nil:
			rt.ErrorCode, rt.ErrorMessage = ecInvalidTopic, msgPtr(validTopicName(t.Topic).Error())
		case c.topics[t.Topic] != nil:
			rt.ErrorCode, rt.ErrorMessage = ecTopicAlreadyExists, msgPtr("topic "+t.Topic+" already exists")
		case n <= 0 || n > maxTopicPartitions:
			rt.ErrorCode, rt.ErrorMessage = ecInvalidPartitions, msgPtr("number of partitions must be between 1 and 16384")
		case !c.roomLocked(mutations + int64(n)):
			rt.ErrorCode, rt.ErrorMessage = ecInvalidPartitions, msgPtr("the cluster holds at most 65536 partitions")
		case rf <= 0 || int(rf) > len(c.brokers):
			rt.ErrorCode, rt.ErrorMessage = ecInvalidReplicationFact, msgPtr("replication factor must be between 1 and the number of brokers")
		case cfgErr != nil:
			rt.ErrorCode, rt.ErrorMessage = ecInvalidConfig, msgPtr(cfgErr.Error())
		default:
			valid[i], nparts[i], rfs[i], configs[i] = true, n, rf, cfgs
			mutations += int64(n)
			rt.NumPartitions, rt.ReplicationFactor = n, rf
			if req.Version >= 5 {
				// As Kafka does, v5+ answers with every config of
				// the topic, set or default.
				rt.Configs = c.createTopicConfigsLocked(&topic{state: topicState{configs: cfgs, rf: rf}})
			}
		}
		if req.Version < 1 {
			rt.ErrorMessage = nil
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ValidateOnly {
		return result{resp: resp}
	}
	gate := c.mutationGate(cn, req.Version >= createTopicsStrictVersion)
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		switch {
		case !valid[i]:
		case !gate.admit(int64(nparts[i])):
			rt.ErrorCode, rt.ErrorMessage = ecThrottlingQuotaExceeded, msgPtr("controller mutation quota exceeded")
			rt.NumPartitions, rt.ReplicationFactor, rt.Configs = -1, -1, nil
		default:
			t := c.createTopicLocked(rt.Topic, nparts[i], rfs[i], configs[i])
			rt.TopicID = t.id
		}
	}
	return result{resp: resp, throttle: gate.throttle}
}

// handleCreatePartitions grows topics: UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_PARTITIONS when the count does not grow, INVALID_REQUEST for a
// repeated topic. The mutation count is the number of new partitions.
func handleCreatePartitions(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	c := cn.c
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := make(map[string]int, len(req.Topics))
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var mutations int64
	valid := make([]bool, len(req.Topics))
	added := make([]int64, len(req.Topics))
	for i, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		tp := c.topics[t.Topic]
		switch {
		case seen[t.Topic] > 1:
			rt.ErrorCode, rt.ErrorMessage = ecInvalidRequest, msgPtr("topic named more than once in the request")
		case tp == nil:
			rt.ErrorCode, rt.ErrorMessage = ecUnknownTopicOrPartition, msgPtr("unknown topic "+t.Topic)
		case t.Count <= int32(len(tp.partitions)) || t.Count > maxTopicPartitions:
			rt.ErrorCode, rt.ErrorMessage = ecInvalidPartitions, msgPtr("the partition count can only grow, up to 16384")
		case !c.roomLocked(mutations + int64(t.Count) - int64(len(tp.partitions))):
			rt.ErrorCode, rt.ErrorMessage = ecInvalidPartitions, msgPtr("the cluster holds at most 65536 partitions")
		default:
			valid[i] = true
			added[i] = int64(t.Count) - int64(len(tp.partitions))
			mutations += added[i]
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ValidateOnly {
		return result{resp: resp}
	}
	gate := c.mutationGate(cn, req.Version >= createPartitionsStrictVersion)
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		switch {
		case !valid[i]:
		case !gate.admit(added[i]):
			rt.ErrorCode, rt.ErrorMessage = ecThrottlingQuotaExceeded, msgPtr("controller mutation quota exceeded")
		default:
			c.addPartitionsLocked(c.topics[t.Topic], t.Count)
		}
	}
	return result{resp: resp, throttle: gate.throttle}
}

// handleDeleteTopics deletes topics by name (or by id from v6):
// UNKNOWN_TOPIC_OR_PARTITION or UNKNOWN_TOPIC_ID otherwise. The mutation
// count is the number of partitions deleted.
func handleDeleteTopics(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	c := cn.c
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	targets := req.Topics
	if req.Version < 6 {
		targets = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i, name := range req.TopicNames {
			targets[i] = kmsg.NewDeleteTopicsRequestTopic()
			targets[i].Topic = kmsg.StringPtr(name)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	found := make([]*topic, len(targets))
	for i, t := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		switch {
		case t.Topic != nil:
			found[i] = c.topics[*t.Topic]
		case t.TopicID != [16]byte{}:
			found[i] = c.topicIDs[t.TopicID]
		}
		if tp := found[i]; tp == nil {
			rt.ErrorCode = ecUnknownTopicOrPartition
			if t.Topic == nil {
				rt.ErrorCode = ecUnknownTopicID
			}
		} else {
			rt.Topic, rt.TopicID = kmsg.StringPtr(tp.name), tp.id
		}
		resp.Topics = append(resp.Topics, rt)
	}
	gate := c.mutationGate(cn, req.Version >= deleteTopicsStrictVersion)
	for i, tp := range found {
		rt := &resp.Topics[i]
		switch {
		case tp == nil:
		case c.topics[tp.name] != tp: // named twice: deleted once, costs once
		case !gate.admit(int64(len(tp.partitions))):
			rt.ErrorCode, rt.ErrorMessage = ecThrottlingQuotaExceeded, msgPtr("controller mutation quota exceeded")
		default:
			c.deleteTopicLocked(tp)
		}
	}
	return result{resp: resp, throttle: gate.throttle}
}

// handleInitProducerID allocates producer ids. Without a transactional id
// it always returns a new producer id with epoch 0, whatever id and epoch
// the request carries, as Kafka's transaction coordinator does: an
// idempotent producer bumps its epoch itself (KIP-360) and asks for a new id
// only when the epoch is exhausted. With a transactional id the
// transaction coordinator answers (txn.go).
func handleInitProducerID(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID == nil {
		resp.ProducerID, resp.ProducerEpoch = cn.c.pids.allocate(), 0
		return result{resp: resp}
	}
	cn.c.initTransactional(cn.b.id, req, resp)
	return result{resp: resp}
}
