package testbroker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleProduce appends each partition's batch to its log when this broker
// leads the partition. The response reuses the connection's struct and
// slices: the hot path allocates nothing per request once warm.
func handleProduce(cn *conn, h *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.ProduceRequest)
	c := cn.c
	resp := &cn.produceResp
	resp.Version = req.Version
	resp.ThrottleMillis = 0
	resp.Brokers = resp.Brokers[:0]
	resp.UnknownTags = kmsg.Tags{}
	topics := resp.Topics[:0]

	acksValid := req.Acks == -1 || req.Acks == 0 || req.Acks == 1
	failed := false
	now := c.cfg.Clock()
	for i := range req.Topics {
		t := &req.Topics[i]
		var rt *kmsg.ProduceResponseTopic
		topics, rt = growTopics(topics)
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		parts := rt.Partitions[:0]

		tp, tparts := c.topicByNameOrID(req.Version >= 13, t.Topic, t.TopicID)

		for j := range t.Partitions {
			p := &t.Partitions[j]
			var rp *kmsg.ProduceResponseTopicPartition
			parts, rp = growPartitions(parts)
			rp.Partition = p.Partition
			rp.BaseOffset = -1
			switch {
			case !acksValid:
				rp.ErrorCode = ecInvalidRequiredAcks
			case tp == nil && req.Version >= 13:
				rp.ErrorCode = ecUnknownTopicID
			case p.Partition < 0 || int(p.Partition) >= len(tparts):
				rp.ErrorCode = ecUnknownTopicOrPartition
			default:
				part := tparts[p.Partition]
				if leader := part.leader.Load(); leader != cn.b.id {
					rp.ErrorCode = ecNotLeaderOrFollower
					if req.Version >= 10 { // KIP-951: point at the new leader
						rp.CurrentLeader.LeaderID = leader
						rp.CurrentLeader.LeaderEpoch = part.epoch.Load()
						resp.Brokers = appendBrokerEndpoint(cn, resp.Brokers, leader,
							func(b *kmsg.ProduceResponseBroker) int32 { return b.NodeID }, produceBroker)
					}
					break
				}
				if req.Acks == -1 {
					if s := tp.state.settings.Load(); s.minInsync > 1 && c.inSyncReplicas(tp) < s.minInsync {
						rp.ErrorCode = ecNotEnoughReplicas
						if req.Version >= 8 {
							rp.ErrorMessage = msgPtr("fewer in-sync replicas than min.insync.replicas")
						}
						break
					}
				}
				var res appendResult
				if isTransactionalBatch(p.Records) {
					res = c.appendTransactional(tp.name, p.Partition, req.Version, req.TransactionID, part.log, p.Records, now)
				} else {
					res = part.log.appendBatch(p.Records, now)
				}
				rp.ErrorCode = res.ErrorCode
				rp.LogStartOffset = res.LogStartOffset
				if res.ErrorCode == 0 {
					rp.BaseOffset = res.BaseOffset
					rp.LogAppendTime = res.LogAppendTime
					if !res.Duplicate {
						cn.b.batches.Add(1)
						cn.b.records.Add(int64(res.NumRecords))
						cn.b.bytes.Add(int64(len(p.Records)))
						c.appended.notify()
					}
				} else if req.Version >= 8 && res.ErrorMessage != "" {
					msg := res.ErrorMessage
					rp.ErrorMessage = &msg
				}
			}
			if rp.ErrorCode != 0 {
				failed = true
			}
		}
		rt.Partitions = parts
	}
	resp.Topics = topics

	var throttle time.Duration
	if l, key, ok := c.quotaFor(quotaKeyProducerByteRate, cn); ok {
		throttle = c.produceQ.recordWith(key, float64(h.size), l)
	}
	if req.Acks == 0 {
		// No response; Kafka closes the connection on an error so that
		// the client refreshes its metadata.
		return result{closeConn: failed}
	}
	return result{resp: resp, throttle: throttle}
}

// growTopics appends a reset element to s, reusing the old element's
// partition slice.
func growTopics(s []kmsg.ProduceResponseTopic) ([]kmsg.ProduceResponseTopic, *kmsg.ProduceResponseTopic) {
	if len(s) < cap(s) {
		s = s[:len(s)+1]
		e := &s[len(s)-1]
		parts := e.Partitions[:0]
		*e = kmsg.ProduceResponseTopic{Partitions: parts}
		return s, e
	}
	s = append(s, kmsg.NewProduceResponseTopic())
	return s, &s[len(s)-1]
}

func growPartitions(s []kmsg.ProduceResponseTopicPartition) ([]kmsg.ProduceResponseTopicPartition, *kmsg.ProduceResponseTopicPartition) {
	if len(s) < cap(s) {
		s = s[:len(s)+1]
	} else {
		s = append(s, kmsg.ProduceResponseTopicPartition{})
	}
	e := &s[len(s)-1]
	e.ErrorRecords = e.ErrorRecords[:0]
	*e = kmsg.ProduceResponseTopicPartition{ErrorRecords: e.ErrorRecords}
	e.Default()
	return s, e
}

// appendBrokerEndpoint adds broker id's endpoint to a KIP-951 list once
// (Produce and Fetch responses have each their own broker type): on cn's
// listener, as Kafka answers with the request's listener name.
func appendBrokerEndpoint[B any](cn *conn, bs []B, id int32, nodeID func(*B) int32, newBroker func(id int32, host string, port int32) B) []B {
	c := cn.c
	if id < 0 || int(id) >= len(c.brokers) {
		return bs
	}
	for i := range bs {
		if nodeID(&bs[i]) == id {
			return bs
		}
	}
	host, port := c.brokers[id].advertised(cn)
	return append(bs, newBroker(id, host, port))
}

func produceBroker(id int32, host string, port int32) kmsg.ProduceResponseBroker {
	b := kmsg.NewProduceResponseBroker()
	b.NodeID, b.Host, b.Port = id, host, port
	return b
}
