package testbroker

import (
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group offsets, enough of a group coordinator for transactions (KIP-98,
// KIP-447): TxnOffsetCommit stores a producer's offsets as pending, the
// transaction's commit marker makes them the group's committed offsets and
// its abort drops them, and OffsetFetch reads the committed ones (with
// RequireStable, v7+, a partition with pending offsets gets
// UNSTABLE_OFFSET_COMMIT instead, as in Kafka). The generation and member
// of TxnOffsetCommit (KIP-447) are checked against the group's members
// (groups.go, or [Cluster.SetGroupGeneration]).

// committedOffset is one partition's offset of a group.
type committedOffset struct {
	offset      int64
	leaderEpoch int32
	metadata    *string
}

// groupState is one group's offsets and membership.
type groupState struct {
	name      string
	committed map[topicPartition]committedOffset
	pending   map[int64]map[topicPartition]committedOffset // by producer id
	m         membership                                   // groups.go
}

// groupOffsets is the cluster's group state, shared by the brokers.
type groupOffsets struct {
	mu     sync.Mutex
	groups map[string]*groupState
}

func (g *groupOffsets) groupLocked(name string) *groupState {
	if g.groups == nil {
		g.groups = make(map[string]*groupState)
	}
	s := g.groups[name]
	if s == nil {
		s = &groupState{name: name, committed: make(map[topicPartition]committedOffset)}
		g.groups[name] = s
	}
	return s
}

// endTxn commits or drops the pending offsets of producer pid in group.
func (g *groupOffsets) endTxn(group string, pid int64, commit bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.groupLocked(group)
	if commit {
		for tp, o := range s.pending[pid] {
			s.committed[tp] = o
		}
	}
	delete(s.pending, pid)
}

// SetGroupGeneration makes a group Stable at generation with the given
// members, which never time out, as if they had joined: OffsetCommit and
// TxnOffsetCommit then check the generation id and member id of KIP-447
// against them (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION). A transactional
// commit with member id "" and generation -1 (a producer without group
// metadata) is always accepted. It replaces the group's members; a
// rebalance under way is left to finish with them.
func (c *Cluster) SetGroupGeneration(group string, generation int32, members ...string) {
	c.offsets.mu.Lock()
	defer c.offsets.mu.Unlock()
	s := c.offsets.groupLocked(group)
	g := &s.m
	g.generation, g.members = generation, make(map[string]*groupMember, len(members))
	for _, id := range members {
		g.members[id] = &groupMember{id: id}
	}
	if g.phase != groupPreparing {
		g.phase = groupStable
	}
}

// CommittedOffset returns a group's committed offset of a partition and
// whether there is one; pending transactional offsets are not committed.
func (c *Cluster) CommittedOffset(group, topic string, partition int32) (int64, bool) {
	c.offsets.mu.Lock()
	defer c.offsets.mu.Unlock()
	s := c.offsets.groups[group]
	if s == nil {
		return -1, false
	}
	o, ok := s.committed[topicPartition{topic, partition}]
	return o.offset, ok
}

// handleTxnOffsetCommit stores offsets of a transaction as pending, on the
// group coordinator. Before v5 the transaction must be Ongoing with the
// group added by AddOffsetsToTxn (else INVALID_TXN_STATE, or from v4
// TRANSACTION_ABORTABLE, as Kafka's KIP-890 verification answers); v5+
// adds the group itself (KIP-890 part 2; CONCURRENT_TRANSACTIONS while the
// last transaction's markers are written). The producer's epoch must be
// the current one (INVALID_PRODUCER_EPOCH), and the generation and member
// must match the group's (see SetGroupGeneration).
func handleTxnOffsetCommit(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	c := cn.c
	code := c.txnOffsetCommit(cn.b.id, req)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return result{resp: resp}
}

func (c *Cluster) txnOffsetCommit(self int32, req *kmsg.TxnOffsetCommitRequest) int16 {
	if !c.isCoordinator(self, CoordinatorGroup, req.Group) {
		return ecNotCoordinator
	}
	// v5+ (KIP-890 part 2) adds the group to the transaction itself:
	// the coordinator's state changes, under its lock for writing.
	implicit := req.Version >= 5
	if implicit {
		c.txn.mu.Lock()
		defer c.txn.mu.Unlock()
	} else {
		c.txn.mu.RLock()
		defer c.txn.mu.RUnlock()
	}
	m := c.txn.byID[req.TransactionalID]
	notAdded := ecInvalidTxnState
	if req.Version >= 4 {
		notAdded = ecTransactionAbortable // KIP-890 part 1's error for new clients
	}
	if m == nil || m.pid != req.ProducerID {
		return ecInvalidTxnState
	}
	_, added := m.groups[req.Group]
	switch {
	case m.epoch != req.ProducerEpoch:
		return ecInvalidProducerEpoch
	case implicit && (m.state == txnPrepareCommit || m.state == txnPrepareAbort):
		return ecConcurrentTransactions
	case !implicit && (m.state != txnOngoing || !added):
		return notAdded
	}
	g := &c.offsets
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.groupLocked(req.Group)
	if req.Version >= 3 {
		if code := s.checkMember(req.MemberID, req.Generation, true); code != 0 {
			return code
		}
	}
	if implicit && (m.state != txnOngoing || !added) {
		c.beginLocked(m)
		if m.groups == nil {
			m.groups = make(map[string]struct{})
		}
		m.groups[req.Group] = struct{}{}
	}
	if s.pending == nil {
		s.pending = make(map[int64]map[topicPartition]committedOffset)
	}
	pend := s.pending[req.ProducerID]
	if pend == nil {
		pend = make(map[topicPartition]committedOffset)
		s.pending[req.ProducerID] = pend
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			pend[topicPartition{t.Topic, p.Partition}] = committedOffset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: p.Metadata}
		}
	}
	return 0
}

// handleOffsetFetch reads committed offsets of one group (v0 to v7) or a
// batch of groups (v8+); null topics (v2+) ask for every committed
// partition. A partition without an offset answers -1.
func handleOffsetFetch(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	c := cn.c
	if req.Version < 8 {
		topics := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = t.Topic, t.Partitions
			topics = append(topics, gt)
		}
		if req.Topics == nil {
			topics = nil
		}
		rg := c.offsetFetch(cn.b.id, req.Group, topics, req.RequireStable)
		if req.Version >= 2 {
			resp.ErrorCode = rg.ErrorCode
		}
		for _, gt := range rg.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = gt.Topic
			for _, gp := range gt.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode
				if req.Version < 2 && rg.ErrorCode != 0 {
					rp.ErrorCode = rg.ErrorCode
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return result{resp: resp}
	}
	for _, g := range req.Groups {
		resp.Groups = append(resp.Groups, c.offsetFetch(cn.b.id, g.Group, g.Topics, req.RequireStable))
	}
	return result{resp: resp}
}

// offsetFetch answers one group of an OffsetFetch.
func (c *Cluster) offsetFetch(self int32, group string, topics []kmsg.OffsetFetchRequestGroupTopic, requireStable bool) kmsg.OffsetFetchResponseGroup {
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group = group
	if !c.isCoordinator(self, CoordinatorGroup, group) {
		rg.ErrorCode = ecNotCoordinator
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, ecNotCoordinator
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		return rg
	}
	g := &c.offsets
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.groups[group]
	if topics == nil && s != nil {
		byTopic := make(map[string][]int32)
		for tp := range s.committed {
			byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
		}
		for _, name := range sortedKeys(byTopic) {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = name, byTopic[name]
			slices.Sort(gt.Partitions)
			topics = append(topics, gt)
		}
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			if s != nil {
				tp := topicPartition{t.Topic, p}
				if o, ok := s.committed[tp]; ok {
					rp.Offset, rp.LeaderEpoch, rp.Metadata = o.offset, o.leaderEpoch, o.metadata
				}
				if requireStable && s.hasPending(tp) {
					rp.Offset, rp.LeaderEpoch, rp.Metadata = -1, -1, nil
					rp.ErrorCode = ecUnstableOffsetCommit
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		rg.Topics = append(rg.Topics, rt)
	}
	return rg
}

// hasPending reports whether a transaction holds a pending offset for tp.
func (s *groupState) hasPending(tp topicPartition) bool {
	for _, pend := range s.pending {
		if _, ok := pend[tp]; ok {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
