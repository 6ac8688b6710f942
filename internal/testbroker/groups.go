package testbroker

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer groups of the classic protocol (KIP-62, KIP-394), enough for
// kgo's and librdkafka's group consumers and kgo's GroupTransactSession:
// JoinGroup, SyncGroup, Heartbeat, LeaveGroup and OffsetCommit, on the
// group's coordinator. Static membership (KIP-345) is not implemented: an
// instance id is kept and reported, nothing more. The broker picks no
// assignment itself: the leader's SyncGroup carries it, as in Kafka.
//
// A group is Empty, PreparingRebalance, CompletingRebalance or Stable. A
// JoinGroup starts a rebalance (Kafka's initial rebalance delay is 0
// here) and waits until every known member has joined again or the
// longest rebalance timeout has passed; the members that did not rejoin
// are removed. The generation is then bumped, the first protocol of the
// leader that every member supports chosen, and each waiting JoinGroup
// answered (the leader with the member list). The leader's SyncGroup
// makes the group Stable and answers the others' waiting SyncGroup with
// their assignment. Heartbeat answers REBALANCE_IN_PROGRESS while a
// rebalance runs, so that members rejoin; a member that sends nothing for
// its session timeout is removed, which starts a rebalance.

// Kafka error codes of the group coordinator.
const (
	ecInconsistentGroupProtocol int16 = 23
	ecRebalanceInProgress       int16 = 27
	ecMemberIDRequired          int16 = 79
)

// groupPhase is a group's state.
type groupPhase int8

const (
	groupEmpty groupPhase = iota
	groupPreparing
	groupCompleting
	groupStable
)

// groupMember is one member of a group.
type groupMember struct {
	id         string
	instanceID *string
	protocols  []kmsg.JoinGroupRequestProtocol
	// session and rebalance are the member's timeouts; session 0 never
	// expires (the members of SetGroupGeneration).
	session, rebalance time.Duration
	lastSeen           time.Time
	joined             bool // joined the rebalance under way
	assignment         []byte
	// joinResult is this member's answer to the join phase that closed
	// joinResultOf, fixed when that phase completed: a rebalance started
	// right after does not change it.
	joinResult   *kmsg.JoinGroupResponse
	joinResultOf chan struct{}
}

// membership is a group's members and rebalance state; groupOffsets.mu
// guards it.
type membership struct {
	phase        groupPhase
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*groupMember
	// pendingIDs are the ids handed out by MEMBER_ID_REQUIRED, each with
	// the time it expires unless the member joins (its session timeout,
	// as in Kafka).
	pendingIDs map[string]time.Time
	nextID     int
	// joinDone is closed when the join phase of a rebalance completes,
	// syncDone when the leader's assignment arrives or a new rebalance
	// starts.
	joinDone, syncDone chan struct{}
	deadline           time.Time // of the join phase
}

// checkMember is the generation and member check of OffsetCommit and
// TxnOffsetCommit (KIP-447), as Kafka's validateOffsetCommit: generation
// -1 with no member id is a client outside the group, accepted while the
// group has no members, and always for a transactional commit; otherwise
// the member must be in the group (UNKNOWN_MEMBER_ID) at the current
// generation (ILLEGAL_GENERATION).
func (s *groupState) checkMember(member string, generation int32, transactional bool) int16 {
	g := &s.m
	switch {
	case generation < 0 && member == "":
		if len(g.members) > 0 && !transactional {
			return ecUnknownMemberID
		}
		return 0
	case g.members[member] == nil:
		return ecUnknownMemberID
	case generation != g.generation:
		return ecIllegalGeneration
	}
	return 0
}

// startRebalanceLocked moves the group to PreparingRebalance.
func (s *groupState) startRebalanceLocked(now time.Time) {
	g := &s.m
	if g.phase == groupPreparing {
		return
	}
	if g.syncDone != nil {
		close(g.syncDone) // waiting SyncGroups answer REBALANCE_IN_PROGRESS
		g.syncDone = nil
	}
	g.phase = groupPreparing
	g.joinDone = make(chan struct{})
	longest := time.Duration(0)
	for _, m := range g.members {
		m.joined = false
		longest = max(longest, m.rebalance)
	}
	g.deadline = now.Add(longest)
}

// extendDeadlineLocked makes the join phase last at least d more.
func (s *groupState) extendDeadlineLocked(now time.Time, d time.Duration) {
	if t := now.Add(d); t.After(s.m.deadline) {
		s.m.deadline = t
	}
}

// maybeCompleteJoinLocked completes the join phase once every member has
// joined, or, with force, drops those that have not.
func (s *groupState) maybeCompleteJoinLocked(force bool) {
	g := &s.m
	if g.phase != groupPreparing {
		return
	}
	for id, m := range g.members {
		if !m.joined {
			if !force {
				return
			}
			delete(g.members, id)
		}
	}
	done := g.joinDone
	close(done)
	g.joinDone = nil
	g.generation++
	if len(g.members) == 0 {
		g.phase, g.protocol, g.leader = groupEmpty, "", ""
		return
	}
	if g.members[g.leader] == nil {
		g.leader = ""
		for id := range g.members {
			if g.leader == "" || id < g.leader {
				g.leader = id
			}
		}
	}
	g.protocol = ""
	for _, p := range g.members[g.leader].protocols {
		if s.allSupportLocked(p.Name) {
			g.protocol = p.Name
			break
		}
	}
	g.phase = groupCompleting
	g.syncDone = make(chan struct{})
	var all []kmsg.JoinGroupResponseMember
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID = id, m.instanceID
		for _, p := range m.protocols {
			if p.Name == g.protocol {
				rm.ProtocolMetadata = p.Metadata
			}
		}
		all = append(all, rm)
	}
	for id, m := range g.members {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Generation, r.LeaderID, r.MemberID = g.generation, g.leader, id
		r.Protocol, r.ProtocolType = kmsg.StringPtr(g.protocol), kmsg.StringPtr(g.protocolType)
		if id == g.leader {
			r.Members = all
		}
		m.joinResult, m.joinResultOf = r, done
	}
}

func (s *groupState) allSupportLocked(protocol string) bool {
	for _, m := range s.m.members {
		ok := false
		for _, p := range m.protocols {
			ok = ok || p.Name == protocol
		}
		if !ok {
			return false
		}
	}
	return true
}

// removeMemberLocked drops a member (LeaveGroup, session expiry) and
// rebalances the others.
func (s *groupState) removeMemberLocked(id string, now time.Time) {
	g := &s.m
	delete(g.members, id)
	switch {
	case len(g.members) == 0 && g.phase != groupPreparing:
		if g.syncDone != nil {
			close(g.syncDone)
			g.syncDone = nil
		}
		g.phase, g.protocol, g.leader = groupEmpty, "", ""
		g.generation++
	case g.phase == groupPreparing:
		s.maybeCompleteJoinLocked(false)
	default:
		s.startRebalanceLocked(now)
	}
}

// waitFor waits for ch to close, until the deadline, the connection's end
// or the cluster's; it reports whether ch closed.
func (cn *conn) waitFor(ch <-chan struct{}, deadline time.Time) bool {
	if ch == nil {
		return true
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-cn.ctx.Done():
	case <-cn.c.closed:
	}
	return false
}

// handleJoinGroup joins a member to its group and answers once the
// rebalance's join phase completes.
func handleJoinGroup(cn *conn, h *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	c := cn.c
	switch {
	case req.Group == "":
		resp.ErrorCode = ecInvalidGroupID
		return result{resp: resp}
	case !c.isCoordinator(cn.b.id, CoordinatorGroup, req.Group):
		resp.ErrorCode = ecNotCoordinator
		return result{resp: resp}
	case len(req.Protocols) == 0 || req.ProtocolType == "":
		resp.ErrorCode = ecInconsistentGroupProtocol
		return result{resp: resp}
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := session
	if req.Version >= 1 {
		rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	now := c.cfg.Clock()
	gs := &c.offsets
	gs.mu.Lock()
	s := gs.groupLocked(req.Group)
	g := &s.m
	if len(g.members) > 0 && req.ProtocolType != g.protocolType {
		gs.mu.Unlock()
		resp.ErrorCode = ecInconsistentGroupProtocol
		return result{resp: resp}
	}
	id := req.MemberID
	if id == "" {
		g.nextID++
		id = fmt.Sprintf("%s-%d-%d", cn.clientID, cn.b.id, g.nextID)
		if req.Version >= 4 { // KIP-394: the client joins again with its id
			if g.pendingIDs == nil {
				g.pendingIDs = make(map[string]time.Time)
			}
			g.pendingIDs[id] = now.Add(session)
			gs.mu.Unlock()
			resp.MemberID, resp.ErrorCode = id, ecMemberIDRequired
			return result{resp: resp}
		}
	} else if _, pending := g.pendingIDs[id]; g.members[id] == nil && !pending {
		gs.mu.Unlock()
		resp.MemberID, resp.ErrorCode = id, ecUnknownMemberID
		return result{resp: resp}
	}
	delete(g.pendingIDs, id)
	if g.members == nil {
		g.members = make(map[string]*groupMember)
	}
	m := g.members[id]
	if m == nil {
		m = &groupMember{id: id}
		g.members[id] = m
	}
	g.protocolType = req.ProtocolType
	m.instanceID, m.protocols, m.session, m.rebalance, m.lastSeen = req.InstanceID, req.Protocols, session, rebalance, now
	s.startRebalanceLocked(now)
	s.extendDeadlineLocked(now, rebalance)
	m.joined = true
	done := g.joinDone
	s.maybeCompleteJoinLocked(false)
	deadline := g.deadline
	gs.mu.Unlock()

	if !cn.waitFor(done, deadline) && cn.ctx.Err() == nil && !c.isClosed() {
		gs.mu.Lock()
		if g.joinDone == done {
			s.maybeCompleteJoinLocked(true)
		}
		gs.mu.Unlock()
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	resp.MemberID = id
	m = g.members[id]
	switch {
	case m == nil:
		resp.ErrorCode = ecUnknownMemberID // dropped by the rebalance timeout
	case m.joinResultOf != done || m.joinResult == nil:
		resp.ErrorCode = ecRebalanceInProgress // the connection or cluster closed meanwhile
	default:
		r := m.joinResult
		resp.Generation, resp.LeaderID, resp.Protocol, resp.Members = r.Generation, r.LeaderID, r.Protocol, r.Members
		if req.Version >= 7 {
			resp.ProtocolType = r.ProtocolType
		}
	}
	return result{resp: resp}
}

// lockGroup locks the groups and returns group's state (an empty one,
// not stored, for an unknown group: its members are all unknown), or
// false, with nothing locked, when broker self does not coordinate it.
func (c *Cluster) lockGroup(self int32, group string) (*groupState, bool) {
	if !c.isCoordinator(self, CoordinatorGroup, group) {
		return nil, false
	}
	c.offsets.mu.Lock()
	if s := c.offsets.groups[group]; s != nil {
		return s, true
	}
	return &groupState{name: group}, true
}

// memberCheckLocked is the check of SyncGroup and Heartbeat.
func (s *groupState) memberCheckLocked(id string, generation int32) int16 {
	g := &s.m
	switch {
	case g.members[id] == nil:
		return ecUnknownMemberID
	case generation != g.generation:
		return ecIllegalGeneration
	case g.phase == groupPreparing:
		return ecRebalanceInProgress
	}
	return 0
}

// handleSyncGroup takes the leader's assignment and answers each member
// with its own, waiting for the leader if needed.
func handleSyncGroup(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	c := cn.c
	s, ok := c.lockGroup(cn.b.id, req.Group)
	if !ok {
		resp.ErrorCode = ecNotCoordinator
		return result{resp: resp}
	}
	gs := &c.offsets
	defer gs.mu.Unlock()
	g := &s.m
	for {
		if resp.ErrorCode = s.memberCheckLocked(req.MemberID, req.Generation); resp.ErrorCode != 0 {
			return result{resp: resp}
		}
		g.members[req.MemberID].lastSeen = c.cfg.Clock()
		if g.phase == groupStable {
			break
		}
		if req.MemberID == g.leader {
			for _, a := range req.GroupAssignment {
				if m := g.members[a.MemberID]; m != nil {
					m.assignment = a.MemberAssignment
				}
			}
			g.phase = groupStable
			close(g.syncDone)
			g.syncDone = nil
			break
		}
		done := g.syncDone
		wait := g.members[req.MemberID].rebalance
		gs.mu.Unlock()
		ok := cn.waitFor(done, time.Now().Add(wait))
		gs.mu.Lock()
		if !ok {
			resp.ErrorCode = ecRebalanceInProgress
			return result{resp: resp}
		}
	}
	resp.MemberAssignment = g.members[req.MemberID].assignment
	if req.Version >= 5 {
		resp.ProtocolType, resp.Protocol = kmsg.StringPtr(g.protocolType), kmsg.StringPtr(g.protocol)
	}
	return result{resp: resp}
}

// handleHeartbeat keeps a member alive and tells it about rebalances.
func handleHeartbeat(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	c := cn.c
	s, ok := c.lockGroup(cn.b.id, req.Group)
	if !ok {
		resp.ErrorCode = ecNotCoordinator
		return result{resp: resp}
	}
	defer c.offsets.mu.Unlock()
	if m := s.m.members[req.MemberID]; m != nil {
		m.lastSeen = c.cfg.Clock()
	}
	resp.ErrorCode = s.memberCheckLocked(req.MemberID, req.Generation)
	return result{resp: resp}
}

// handleLeaveGroup removes members (one before v3, a batch since).
func handleLeaveGroup(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	c := cn.c
	s, ok := c.lockGroup(cn.b.id, req.Group)
	if !ok {
		resp.ErrorCode = ecNotCoordinator
		return result{resp: resp}
	}
	defer c.offsets.mu.Unlock()
	now := c.cfg.Clock()
	leave := func(id string) int16 {
		if s.m.members[id] == nil {
			return ecUnknownMemberID
		}
		s.removeMemberLocked(id, now)
		return 0
	}
	if req.Version < 3 {
		resp.ErrorCode = leave(req.MemberID)
		return result{resp: resp}
	}
	for _, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, leave(m.MemberID)
		resp.Members = append(resp.Members, rm)
	}
	return result{resp: resp}
}

// handleOffsetCommit commits offsets of a group's member, or of a client
// outside the group (generation -1, no member id) while it has no members.
func handleOffsetCommit(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	c := cn.c
	code := int16(0)
	if !c.isCoordinator(cn.b.id, CoordinatorGroup, req.Group) {
		code = ecNotCoordinator
	}
	gs := &c.offsets
	gs.mu.Lock()
	s := gs.groupLocked(req.Group)
	if code == 0 && req.Version >= 1 {
		if code = s.checkMember(req.MemberID, req.Generation, false); code == 0 && s.m.phase == groupCompleting {
			code = ecRebalanceInProgress
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			if code == 0 {
				s.committed[topicPartition{t.Topic, p.Partition}] = committedOffset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: p.Metadata}
			}
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	gs.mu.Unlock()
	return result{resp: resp}
}

// expireMembers removes the members whose session timed out; the
// coordinator's ticker calls it.
func (c *Cluster) expireMembers(now time.Time) {
	g := &c.offsets
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.groups {
		for id, m := range s.m.members {
			if m.session > 0 && now.Sub(m.lastSeen) > m.session && !(m.joined && s.m.phase == groupPreparing) {
				c.log.Info("testbroker: group member session expired", "group", s.name, "member", id)
				s.removeMemberLocked(id, now)
			}
		}
		for id, expiry := range s.m.pendingIDs {
			if now.After(expiry) {
				delete(s.m.pendingIDs, id)
			}
		}
		if s.m.phase == groupPreparing && now.After(s.m.deadline) {
			s.maybeCompleteJoinLocked(true)
		}
	}
}
