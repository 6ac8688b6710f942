package metadata

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/kerr"
)

func part(id, leader, epoch int32) Partition {
	return Partition{ID: id, Leader: leader, LeaderEpoch: epoch}
}

// TestMergeTopicLeaderEpochRule protects against stale brokers moving a
// leader back: older leader epochs never replace newer ones.
func TestMergeTopicLeaderEpochRule(t *testing.T) {
	id1, id2 := [16]byte{1}, [16]byte{2}
	usable := &Topic{Name: "t", ID: id1, Partitions: []Partition{part(0, 1, 5), part(1, 2, 7)}}
	cases := []struct {
		name      string
		old       *Topic
		fresh     *Topic
		wantTaken bool
		want      []Partition
		wantErr   error
	}{
		{
			name:      "first fetch",
			fresh:     &Topic{Name: "t", ID: id1, Partitions: []Partition{part(0, 1, 5)}},
			wantTaken: true,
			want:      []Partition{part(0, 1, 5)},
		},
		{
			name:      "newer epochs win",
			old:       usable,
			fresh:     &Topic{Name: "t", ID: id1, Partitions: []Partition{part(0, 3, 6), part(1, 2, 7)}},
			wantTaken: true,
			want:      []Partition{part(0, 3, 6), part(1, 2, 7)},
		},
		{
			name:      "older epoch from a stale broker is ignored per partition",
			old:       usable,
			fresh:     &Topic{Name: "t", ID: id1, Partitions: []Partition{part(0, 0, 4), part(1, 0, 8)}},
			wantTaken: true,
			want:      []Partition{part(0, 1, 5), part(1, 0, 8)},
		},
		{
			name:      "unknown epochs (old brokers) are taken",
			old:       usable,
			fresh:     &Topic{Name: "t", ID: id1, Partitions: []Partition{part(0, 0, -1), part(1, 0, -1)}},
			wantTaken: true,
			want:      []Partition{part(0, 0, -1), part(1, 0, -1)},
		},
		{
			name:      "recreated topic (new id) restarts epochs",
			old:       usable,
			fresh:     &Topic{Name: "t", ID: id2, Partitions: []Partition{part(0, 0, 0)}},
			wantTaken: true,
			want:      []Partition{part(0, 0, 0)},
		},
		{
			name:      "more partitions",
			old:       usable,
			fresh:     &Topic{Name: "t", ID: id1, Partitions: []Partition{part(0, 1, 5), part(1, 2, 7), part(2, 0, 0)}},
			wantTaken: true,
			want:      []Partition{part(0, 1, 5), part(1, 2, 7), part(2, 0, 0)},
		},
		{
			name:      "retriable topic error for a usable topic is stale",
			old:       usable,
			fresh:     &Topic{Name: "t", Err: kerr.UnknownTopicOrPartition},
			wantTaken: false,
			want:      usable.Partitions,
		},
		{
			name:      "non-retriable topic error replaces",
			old:       usable,
			fresh:     &Topic{Name: "t", Err: kerr.TopicAuthorizationFailed},
			wantTaken: true,
			wantErr:   kerr.TopicAuthorizationFailed,
		},
		{
			name:      "error for a topic never usable is taken",
			old:       &Topic{Name: "t", Err: kerr.UnknownTopicOrPartition},
			fresh:     &Topic{Name: "t", Err: kerr.UnknownTopicOrPartition},
			wantTaken: true,
			wantErr:   kerr.UnknownTopicOrPartition,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// mergeTopic may write into fresh; keep the table intact.
			fresh := *tc.fresh
			fresh.Partitions = append([]Partition(nil), tc.fresh.Partitions...)
			got, taken := mergeTopic(tc.old, &fresh)
			if taken != tc.wantTaken {
				t.Fatalf("taken = %v, want %v", taken, tc.wantTaken)
			}
			if !errors.Is(got.Err, tc.wantErr) || (tc.wantErr == nil && got.Err != nil) {
				t.Fatalf("Err = %v, want %v", got.Err, tc.wantErr)
			}
			if len(got.Partitions) != len(tc.want) {
				t.Fatalf("partitions %+v, want %+v", got.Partitions, tc.want)
			}
			for i := range tc.want {
				g, w := got.Partitions[i], tc.want[i]
				if g.ID != w.ID || g.Leader != w.Leader || g.LeaderEpoch != w.LeaderEpoch {
					t.Errorf("partition %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
	if usable.Partitions[0].Leader != 1 {
		t.Fatal("mergeTopic modified the published topic")
	}
}

func TestTopicFromResponse(t *testing.T) {
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = kmsg.StringPtr("t")
	rt.TopicID = [16]byte{9}
	for _, p := range []struct {
		id, leader, epoch int32
		code              int16
	}{{2, 1, 3, 0}, {0, 0, 1, 0}, {3, -1, 2, 5}, {1, 2, 1, 9}} {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch, mp.ErrorCode = p.id, p.leader, p.epoch, p.code
		mp.Replicas, mp.ISR = []int32{p.leader}, []int32{p.leader}
		rt.Partitions = append(rt.Partitions, mp)
	}
	top, err := topicFromResponse(&rt)
	if err != nil || top.Name != "t" || top.ID != rt.TopicID || top.Err != nil || len(top.Partitions) != 4 {
		t.Fatalf("topic %+v, %v", top, err)
	}
	cases := []struct {
		id      int32
		leader  int32
		epoch   int32
		err     error
		hasLead bool
	}{
		{0, 0, 1, nil, true},
		{1, 2, 1, kerr.ReplicaNotAvailable, true}, // informational
		{2, 1, 3, nil, true},
		{3, -1, 2, kerr.LeaderNotAvailable, false},
	}
	s := &Snapshot{Brokers: map[int32]Broker{0: {NodeID: 0}, 1: {NodeID: 1}, 2: {NodeID: 2}}, Topics: map[string]*Topic{"t": top}}
	for _, tc := range cases {
		p := top.Partitions[tc.id]
		if p.ID != tc.id || p.Leader != tc.leader || p.LeaderEpoch != tc.epoch || !errors.Is(p.Err, tc.err) || (tc.err == nil && p.Err != nil) {
			t.Errorf("partition %d = %+v", tc.id, p)
		}
		if _, ok := s.Leader("t", tc.id); ok != tc.hasLead {
			t.Errorf("Leader(t, %d) ok = %v", tc.id, ok)
		}
	}
	for _, bad := range []int32{-1, 4} {
		if _, ok := s.Leader("t", bad); ok {
			t.Errorf("Leader(t, %d) found a leader", bad)
		}
	}
	if _, ok := s.Leader("nope", 0); ok {
		t.Error("Leader of an unknown topic")
	}
}

func TestSnapshotLeaderDoesNotAllocate(t *testing.T) {
	s := &Snapshot{Brokers: map[int32]Broker{1: {NodeID: 1, Host: "h", Port: 1}}, Topics: map[string]*Topic{"t": {Partitions: []Partition{part(0, 1, 0)}}}}
	if n := testing.AllocsPerRun(100, func() { _, _ = s.Leader("t", 0) }); n != 0 {
		t.Fatalf("Leader allocates %v", n)
	}
}

// TestTopicFromResponseRefusesBrokenPartitionIDs: a topic's partitions are
// 0..n-1, each listed once; an answer with an id outside (a bogus 1<<20-1
// would make us allocate a million partitions), negative, or listed twice
// is refused whole, without allocating for the bogus id.
func TestTopicFromResponseRefusesBrokenPartitionIDs(t *testing.T) {
	for _, ids := range [][]int32{{0, 2}, {0, 1<<20 - 1}, {0, -1}, {0, 0}, {1, 1}, {math.MaxInt32}} {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr("t")
		for _, id := range ids {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = id
			rt.Partitions = append(rt.Partitions, mp)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		top, err := topicFromResponse(&rt)
		runtime.ReadMemStats(&after)
		if err == nil || top != nil {
			t.Errorf("ids %v: topic %+v, err %v", ids, top, err)
			continue
		}
		if !strings.Contains(err.Error(), `"t"`) {
			t.Errorf("ids %v: the error does not name the topic: %v", ids, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("ids %v: %d bytes allocated", ids, n)
		}
	}
}
