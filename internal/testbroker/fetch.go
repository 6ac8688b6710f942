package testbroker

import (
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleFetch returns stored batches, enough of Fetch for kgo and
// librdkafka consumers: full fetches only (no KIP-227 sessions: SessionID
// is always 0, so clients keep sending full requests), both isolation
// levels (read_committed stops at the last stable offset and lists the
// aborted transactions, see txnlog.go), MaxBytes and PartitionMaxBytes
// honored with KIP-74's first-batch exception, leader and leader-epoch
// checks, and long polling: when fewer than MinBytes are ready the request
// waits up to MaxWaitMillis for an append.
func handleFetch(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.FetchRequest)
	c := cn.c
	if req.Version >= 7 && req.SessionID != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = ecFetchSessionIDNotFound
		return result{resp: resp}
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	deadline := time.Now().Add(wait)
	for {
		var signal <-chan struct{}
		done := func() {}
		if wait > 0 && req.MinBytes > 0 {
			signal, done = c.appended.wait() // before building: no lost wake-up
		}
		resp, n, failed := c.buildFetch(cn, req)
		left := time.Until(deadline)
		if failed || n >= int(req.MinBytes) || left <= 0 || signal == nil {
			done()
			return result{resp: resp}
		}
		t := time.NewTimer(left)
		select {
		case <-signal:
		case <-t.C:
		case <-cn.ctx.Done():
		case <-c.closed:
		}
		t.Stop()
		done()
		if cn.ctx.Err() != nil || c.isClosed() {
			return result{resp: resp}
		}
	}
}

// noRecords is the empty record set of a partition without data: Kafka
// sends an empty, not a null, byte array, and librdkafka rejects a null
// one ("invalid MessageSetSize -1").
var noRecords = []byte{}

// buildFetch builds one fetch response for cn's broker; n is the bytes of
// records in it, failed whether a partition got an error.
func (c *Cluster) buildFetch(cn *conn, req *kmsg.FetchRequest) (resp *kmsg.FetchResponse, n int, failed bool) {
	self := cn.b.id
	resp = req.ResponseKind().(*kmsg.FetchResponse)
	remaining := int64(math.MaxInt32)
	if req.Version >= 3 {
		remaining = int64(req.MaxBytes)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		tp, parts := c.topicByNameOrID(req.Version >= 13, t.Topic, t.TopicID)
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.RecordBatches = noRecords
			switch {
			case tp == nil && req.Version >= 13:
				rp.ErrorCode = ecUnknownTopicID
			case p.Partition < 0 || int(p.Partition) >= len(parts):
				rp.ErrorCode = ecUnknownTopicOrPartition
			default:
				part := parts[p.Partition]
				leader, epoch := part.leader.Load(), part.epoch.Load()
				switch {
				case leader != self:
					rp.ErrorCode = ecNotLeaderOrFollower
					if req.Version >= 12 {
						rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leader, epoch
					}
					if req.Version >= 16 {
						resp.Brokers = appendBrokerEndpoint(cn, resp.Brokers, leader,
							func(b *kmsg.FetchResponseBroker) int32 { return b.NodeID }, fetchBroker)
					}
				case p.CurrentLeaderEpoch >= 0 && p.CurrentLeaderEpoch < epoch:
					rp.ErrorCode = ecFencedLeaderEpoch
				case p.CurrentLeaderEpoch > epoch:
					rp.ErrorCode = ecUnknownLeaderEpoch
				default:
					maxBytes := max(min(int64(p.PartitionMaxBytes), remaining), 0)
					var batches [][]byte
					if req.IsolationLevel == isolationReadCommitted {
						f := part.log.fetchCommitted(p.FetchOffset, int32(maxBytes))
						batches, rp.ErrorCode = f.batches, f.errCode
						rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = f.hw, f.lso, f.logStart
						rp.AbortedTransactions = abortedTransactions(f.aborted)
					} else {
						var hw, logStart int64
						batches, hw, logStart, rp.ErrorCode = part.log.fetch(p.FetchOffset, int32(maxBytes))
						rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw, part.log.lastStableOffset(), logStart
					}
					size := 0
					for _, b := range batches {
						size += len(b)
					}
					// KIP-74: only the first data of the response may
					// exceed the limits.
					if size > 0 && (n == 0 || int64(size) <= remaining) {
						rp.RecordBatches = make([]byte, 0, size)
						for _, b := range batches {
							rp.RecordBatches = append(rp.RecordBatches, b...)
						}
						n += size
						remaining -= int64(size)
					}
				}
			}
			if rp.ErrorCode != 0 {
				failed = true
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, n, failed
}

func fetchBroker(id int32, host string, port int32) kmsg.FetchResponseBroker {
	b := kmsg.NewFetchResponseBroker()
	b.NodeID, b.Host, b.Port = id, host, port
	return b
}

// handleListOffsets answers each partition with the offset for its
// timestamp: -1 the high watermark (the last stable offset at
// read_committed), -2 (and -4, -5: earliest local and
// tiered) the log start, -3 the record with the largest timestamp, else the
// first record with a timestamp at or after it.
func handleListOffsets(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.ListOffsetsRequest)
	c := cn.c
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		c.mu.RLock()
		var parts []*partition
		if tp := c.topics[t.Topic]; tp != nil {
			parts = tp.partitions
		}
		c.mu.RUnlock()
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			if p.Partition < 0 || int(p.Partition) >= len(parts) {
				rp.ErrorCode = ecUnknownTopicOrPartition
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			part := parts[p.Partition]
			leader, epoch := part.leader.Load(), part.epoch.Load()
			switch {
			case leader != cn.b.id:
				rp.ErrorCode = ecNotLeaderOrFollower
			case p.CurrentLeaderEpoch >= 0 && p.CurrentLeaderEpoch < epoch:
				rp.ErrorCode = ecFencedLeaderEpoch
			case p.CurrentLeaderEpoch > epoch:
				rp.ErrorCode = ecUnknownLeaderEpoch
			default:
				ts := p.Timestamp
				if ts == -4 || ts == -5 {
					ts = -2
				}
				rp.Offset, rp.Timestamp = part.log.offsetForTimestamp(ts)
				if ts == listOffsetsLatest && req.Version >= 2 && req.IsolationLevel == isolationReadCommitted {
					rp.Offset = part.log.lastStableOffset()
				}
				rp.LeaderEpoch = epoch
				if req.Version == 0 {
					rp.OldStyleOffsets = []int64{rp.Offset}
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return result{resp: resp}
}
