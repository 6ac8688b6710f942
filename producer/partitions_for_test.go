package producer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
)

// TestPartitionsForListsLeadersAndReplicas: PartitionsFor returns what
// Java's partitionsFor does, per partition: the leader (nil without one),
// replicas, in-sync and offline replicas as nodes with host, port and
// rack; a replica on a broker the metadata does not list has only its id.
func TestPartitionsForListsLeadersAndReplicas(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 3})
	require.NoError(t, c.CreateTopic("pf", 3))
	c.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Rewrite: func(r kmsg.Response) {
		resp := r.(*kmsg.MetadataResponse)
		for i := range resp.Brokers {
			if resp.Brokers[i].NodeID == 0 {
				resp.Brokers[i].Rack = kmsg.StringPtr("rack-a")
			}
			if resp.Brokers[i].NodeID == 1 {
				resp.Brokers[i].Rack = kmsg.StringPtr("rack\nb") // escaped, as every broker text
			}
		}
		for i := range resp.Topics {
			if resp.Topics[i].Topic == nil || *resp.Topics[i].Topic != "pf" {
				continue
			}
			ps := resp.Topics[i].Partitions
			for j := range ps {
				switch ps[j].Partition {
				case 0:
					ps[j].Leader, ps[j].Replicas, ps[j].ISR, ps[j].OfflineReplicas = 0, []int32{0, 1}, []int32{0, 1}, nil
				case 1:
					ps[j].ErrorCode, ps[j].Leader = kerr.LeaderNotAvailable.Code, -1
					ps[j].Replicas, ps[j].ISR, ps[j].OfflineReplicas = []int32{1, 2}, []int32{}, []int32{1, 2}
				case 2:
					ps[j].Leader, ps[j].Replicas, ps[j].ISR, ps[j].OfflineReplicas = 2, []int32{2, 99}, []int32{2}, []int32{99}
				}
			}
			// Out of order: PartitionsFor sorts.
			ps[0], ps[2] = ps[2], ps[0]
		}
	}})
	p := newProducer(t, c, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := p.PartitionsFor(ctx, "pf")
	require.NoError(t, err)

	addrs := c.Addrs()
	node := func(id int32, rack string) Node {
		host, port := splitAddr(t, addrs[id])
		return Node{ID: id, Host: host, Port: port, Rack: rack}
	}
	n0, n1, n2 := node(0, "rack-a"), node(1, `rack\nb`), node(2, "")
	unknown := Node{ID: 99, Port: -1}
	want := []PartitionInfo{
		{Topic: "pf", Partition: 0, Leader: &n0, Replicas: []Node{n0, n1}, InSyncReplicas: []Node{n0, n1}, OfflineReplicas: []Node{}},
		{Topic: "pf", Partition: 1, Leader: nil, Replicas: []Node{n1, n2}, InSyncReplicas: []Node{}, OfflineReplicas: []Node{n1, n2}},
		{Topic: "pf", Partition: 2, Leader: &n2, Replicas: []Node{n2, unknown}, InSyncReplicas: []Node{n2}, OfflineReplicas: []Node{unknown}},
	}
	assert.Equal(t, want, got)

	// Once the producer has the topic (a Send), it answers from its own
	// metadata, the same.
	require.Zero(t, sendN(t, p, "pf", 3))
	again, err := p.PartitionsFor(ctx, "pf")
	require.NoError(t, err)
	assert.Equal(t, want, again)
}

func splitAddr(t *testing.T, addr string) (string, int32) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	require.Positive(t, i)
	var port int32
	for _, ch := range addr[i+1:] {
		port = port*10 + ch - '0'
	}
	return addr[:i], port
}

// TestPartitionsForErrors: a topic that never appears fails after MaxBlock
// (or ctx) naming the topic, wrapping context.DeadlineExceeded and
// UNKNOWN_TOPIC_OR_PARTITION (Java's TimeoutException "not present in
// metadata"); a refused topic fails at once (Java's
// TopicAuthorizationException); so does an invalid name, and a closed
// producer.
func TestPartitionsForErrors(t *testing.T) {
	cases := []struct {
		name      string
		cfg       Config
		ctx       time.Duration
		intercept *testbroker.Interceptor
		topic     string
		close     bool
		want      []error
		within    time.Duration
		text      string
	}{
		{name: "missing after MaxBlock", cfg: Config{MaxBlock: 300 * time.Millisecond}, ctx: time.Minute, topic: "ghost",
			want: []error{context.DeadlineExceeded, kerr.UnknownTopicOrPartition}, within: 5 * time.Second, text: `topic "ghost" not present in metadata after`},
		{name: "missing until ctx", cfg: Config{}, ctx: 300 * time.Millisecond, topic: "ghost",
			want: []error{context.DeadlineExceeded, kerr.UnknownTopicOrPartition}, within: 5 * time.Second, text: `"ghost"`},
		{name: "not authorized", cfg: Config{}, ctx: time.Minute, topic: "secret",
			intercept: &testbroker.Interceptor{Keys: []int16{3}, ErrorCode: kerr.TopicAuthorizationFailed.Code},
			want:      []error{kerr.TopicAuthorizationFailed}, within: 5 * time.Second, text: `"secret"`},
		{name: "invalid name", cfg: Config{}, ctx: time.Minute, topic: "", want: []error{ErrInvalidRecord}, within: time.Second},
		{name: "closed", cfg: Config{}, ctx: time.Minute, topic: "pf", close: true, want: []error{ErrClosed}, within: time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			if tc.intercept != nil {
				c.Intercept(*tc.intercept)
			}
			p := newProducer(t, c, tc.cfg)
			if tc.close {
				require.NoError(t, p.Close(context.Background()))
			}
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
			defer cancel()
			start := time.Now()
			got, err := p.PartitionsFor(ctx, tc.topic)
			require.Error(t, err)
			assert.Nil(t, got)
			for _, w := range tc.want {
				assert.True(t, errors.Is(err, w), "%v does not wrap %v", err, w)
			}
			assert.Contains(t, err.Error(), tc.text)
			assert.Less(t, time.Since(start), tc.within)
		})
	}
}
