package testbroker

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupClient is one group member over the wire.
type groupClient struct {
	t  *testing.T
	w  *wireClient
	id string
	// generation of the last join
	generation int32
}

func (g *groupClient) join(group string, session, rebalance time.Duration) *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 7
	req.Group, req.MemberID, req.ProtocolType = group, g.id, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(session/time.Millisecond), int32(rebalance/time.Millisecond)
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("meta")}}
	resp := g.w.request(req).(*kmsg.JoinGroupResponse)
	g.id = resp.MemberID
	if resp.ErrorCode == 0 {
		g.generation = resp.Generation
	}
	return resp
}

func (g *groupClient) sync(group string, assign map[string][]byte) *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.Generation, req.MemberID = group, g.generation, g.id
	for id, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
	}
	return g.w.request(req).(*kmsg.SyncGroupResponse)
}

func (g *groupClient) heartbeat(group string) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.Generation, req.MemberID = group, g.generation, g.id
	return g.w.request(req).(*kmsg.HeartbeatResponse).ErrorCode
}

func (g *groupClient) leave(group string) int16 {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 5
	req.Group = group
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: g.id}}
	return g.w.request(req).(*kmsg.LeaveGroupResponse).Members[0].ErrorCode
}

func (g *groupClient) commit(group string, generation int32, member string, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation, req.MemberID = group, generation, member
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset}}}}
	return g.w.request(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// TestGroupMembership walks a group through a first member's join
// (MEMBER_ID_REQUIRED, then the leader's sync), a second member's join
// (the first learns of the rebalance by heartbeat and rejoins), offset
// commits checked by generation and member, a leave and a session expiry.
func TestGroupMembership(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	const group = "g"
	a := &groupClient{t: t, w: dialBroker(t, c.Addrs()[0], "a")}
	b := &groupClient{t: t, w: dialBroker(t, c.Addrs()[0], "b")}

	r := a.join(group, time.Minute, 5*time.Second)
	require.Equal(t, ecMemberIDRequired, r.ErrorCode, "KIP-394")
	require.NotEmpty(t, r.MemberID)
	r = a.join(group, time.Minute, 5*time.Second)
	require.Zero(t, r.ErrorCode)
	assert.Equal(t, int32(1), r.Generation)
	assert.Equal(t, a.id, r.LeaderID)
	assert.Len(t, r.Members, 1)
	assert.Equal(t, "range", *r.Protocol)
	s := a.sync(group, map[string][]byte{a.id: []byte("all")})
	require.Zero(t, s.ErrorCode)
	assert.Equal(t, []byte("all"), s.MemberAssignment)
	assert.Zero(t, a.heartbeat(group))

	stale := &groupClient{t: t, w: a.w, id: "nobody"}
	cases := []struct {
		name string
		code int16
		got  int16
	}{
		{"member commits", 0, a.commit(group, 1, a.id, 10)},
		{"old generation", ecIllegalGeneration, a.commit(group, 0, a.id, 11)},
		{"unknown member", ecUnknownMemberID, a.commit(group, 1, "nobody", 11)},
		{"outside the group while it has members", ecUnknownMemberID, a.commit(group, -1, "", 11)},
		{"unknown member heartbeat", ecUnknownMemberID, stale.heartbeat(group)},
		{"unknown member join", ecUnknownMemberID, stale.join(group, time.Minute, time.Second).ErrorCode},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.code, tc.got, tc.name)
	}
	off, _ := c.CommittedOffset(group, "t", 0)
	assert.Equal(t, int64(10), off)

	// b joins: its JoinGroup waits until a rejoins.
	require.Equal(t, ecMemberIDRequired, b.join(group, time.Minute, 5*time.Second).ErrorCode)
	var wg sync.WaitGroup
	var rb *kmsg.JoinGroupResponse
	wg.Add(1)
	go func() {
		defer wg.Done()
		rb = b.join(group, time.Minute, 5*time.Second)
	}()
	require.Eventually(t, func() bool { return a.heartbeat(group) == ecRebalanceInProgress }, 5*time.Second, 5*time.Millisecond)
	ra := a.join(group, time.Minute, 5*time.Second)
	wg.Wait()
	require.Zero(t, ra.ErrorCode)
	require.Zero(t, rb.ErrorCode)
	assert.Equal(t, int32(2), ra.Generation)
	assert.Equal(t, a.id, ra.LeaderID, "the leader stays")
	assert.Len(t, ra.Members, 2)
	assert.Empty(t, rb.Members, "only the leader gets the members")

	var sb *kmsg.SyncGroupResponse
	wg.Add(1)
	go func() {
		defer wg.Done()
		sb = b.sync(group, nil) // waits for the leader
	}()
	time.Sleep(20 * time.Millisecond)
	require.Zero(t, a.sync(group, map[string][]byte{a.id: []byte("p0"), b.id: []byte("p1")}).ErrorCode)
	wg.Wait()
	require.Zero(t, sb.ErrorCode)
	assert.Equal(t, []byte("p1"), sb.MemberAssignment)

	// a leaves: b rebalances alone, and becomes the leader.
	require.Zero(t, a.leave(group))
	assert.Equal(t, ecRebalanceInProgress, b.heartbeat(group))
	rb = b.join(group, time.Second, time.Second) // a session long enough for the sync below on a loaded machine
	require.Zero(t, rb.ErrorCode)
	assert.Equal(t, b.id, rb.LeaderID)
	require.Zero(t, b.sync(group, map[string][]byte{b.id: []byte("all")}).ErrorCode)

	// b stops heartbeating: its session expires and the group is empty.
	require.Eventually(t, func() bool {
		return b.commit(group, b.generation, b.id, 12) == ecUnknownMemberID
	}, 5*time.Second, 50*time.Millisecond)
	assert.Zero(t, a.commit(group, -1, "", 13), "an empty group takes commits from outside")
}

// TestGroupRebalanceTimeout: a member that does not rejoin within the
// rebalance timeout is dropped, and the others' JoinGroup completes.
func TestGroupRebalanceTimeout(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	const group = "slow"
	a := &groupClient{t: t, w: dialBroker(t, c.Addrs()[0], "a")}
	b := &groupClient{t: t, w: dialBroker(t, c.Addrs()[0], "b")}
	a.join(group, time.Minute, 300*time.Millisecond)
	require.Zero(t, a.join(group, time.Minute, 300*time.Millisecond).ErrorCode)
	require.Zero(t, a.sync(group, nil).ErrorCode)
	b.join(group, time.Minute, 300*time.Millisecond)
	start := time.Now()
	r := b.join(group, time.Minute, 300*time.Millisecond) // a never rejoins
	require.Zero(t, r.ErrorCode)
	assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond)
	assert.Equal(t, b.id, r.LeaderID)
	assert.Len(t, r.Members, 1)
	assert.Equal(t, ecUnknownMemberID, a.heartbeat(group))
}
