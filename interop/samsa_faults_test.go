package interop

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/producer"
)

// notLeaderResponse answers a Produce request with NOT_LEADER_OR_FOLLOWER for
// every partition it carries, without appending anything.
func notLeaderResponse(kr kmsg.Request) kmsg.Response {
	req := kr.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// controlProduce makes kfake answer its next n Produce requests with answer
// (an error closes the connection instead), and returns how many it has
// answered so far. (kfake's KeepControl, once called, keeps a control for
// good; DropControl ends it.)
func controlProduce(c *kfake.Cluster, n int64, answer func(kmsg.Request) (kmsg.Response, error)) (struck func() int) {
	var hits atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if hits.Add(1) >= n {
			c.DropControl()
		}
		resp, err := answer(kr)
		return resp, err, true
	})
	return func() int { return int(hits.Load()) }
}

// TestSamsaKfakeFaults runs a samsa producer (idempotent, unless a case
// says otherwise) against kfake while kfake misbehaves on Produce, through
// its own fault control (code we did not write, so it cannot share a
// misunderstanding with samsa), and reads the topic back with kgo: every
// record must be stored exactly once, intact, in its partition, in Send
// order.
func TestSamsaKfakeFaults(t *testing.T) {
	const n = 1000
	cases := []struct {
		name string
		// fault installs the misbehaviour and returns how many times it
		// has struck so far; the test checks it struck at least once.
		fault func(t *testing.T, c *kfake.Cluster) (struck func() int)
		// midway, when set, runs after the first half of the records was
		// sent and acknowledged.
		midway func(t *testing.T, c *kfake.Cluster)
		// cfg is the producer's configuration; Compression is set to zstd.
		cfg producer.Config
	}{
		{
			name: "NOT_LEADER_OR_FOLLOWER once",
			fault: func(t *testing.T, c *kfake.Cluster) func() int {
				var hits atomic.Int64
				c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
					hits.Add(1)
					return notLeaderResponse(kr), nil, true // handled: the control is dropped
				})
				return func() int { return int(hits.Load()) }
			},
		},
		{
			name: "NOT_LEADER_OR_FOLLOWER on five requests",
			fault: func(t *testing.T, c *kfake.Cluster) func() int {
				return controlProduce(c, 5, func(kr kmsg.Request) (kmsg.Response, error) {
					return notLeaderResponse(kr), nil
				})
			},
		},
		{
			name: "Produce slept 300ms once",
			fault: func(t *testing.T, c *kfake.Cluster) func() int {
				var hits atomic.Int64
				c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
					hits.Add(1)
					c.DropControl()
					c.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
					return nil, nil, false // then handled as usual
				})
				return func() int { return int(hits.Load()) }
			},
		},
		{
			name: "connection closed instead of an answer",
			fault: func(t *testing.T, c *kfake.Cluster) func() int {
				return controlProduce(c, 3, func(kmsg.Request) (kmsg.Response, error) {
					return nil, errDropConnection
				})
			},
		},
		{
			// The ambiguous outcome: kfake appends the batch, then
			// answers REQUEST_TIMED_OUT. samsa retries with the same
			// sequence, and kfake must recognise the duplicate.
			name: "REQUEST_TIMED_OUT after the append",
			fault: func(t *testing.T, c *kfake.Cluster) func() int {
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: 3})
				return h.Hits
			},
		},
		{
			name: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
			fault: func(t *testing.T, c *kfake.Cluster) func() int {
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicasAfterAppend, Count: 2})
				return h.Hits
			},
		},
		{
			name: "NOT_ENOUGH_REPLICAS before the append",
			fault: func(t *testing.T, c *kfake.Cluster) func() int {
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: 3})
				return h.Hits
			},
		},
		{
			// Without idempotence a retry is safe only when the broker
			// did not append: NOT_LEADER_OR_FOLLOWER is such a case.
			// Order holds only with one request in flight, as in the
			// Java client (max.in.flight.requests.per.connection=1):
			// with more, a retried batch lands after the batches sent
			// behind it.
			name: "acks=leader without idempotence, one in flight, NOT_LEADER_OR_FOLLOWER on three requests",
			fault: func(t *testing.T, c *kfake.Cluster) func() int {
				return controlProduce(c, 3, func(kr kmsg.Request) (kmsg.Response, error) {
					return notLeaderResponse(kr), nil
				})
			},
			cfg: producer.Config{DisableIdempotence: true, Acks: producer.AcksLeader, MaxInFlight: 1},
		},
		{
			name: "partition leaders shuffled midway",
			midway: func(t *testing.T, c *kfake.Cluster) {
				c.ShufflePartitionLeaders()
			},
		},
		{
			name: "partition 0 moved to another broker midway",
			midway: func(t *testing.T, c *kfake.Cluster) {
				to := (c.LeaderFor("faults", 0) + 1) % 3
				require.NoError(t, c.MoveTopicPartition("faults", 0, to))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := startKfake(t)
			const topic = "faults"
			b.createTopic(t, topic, samsaPartitions)
			var struck func() int
			if tc.fault != nil {
				struck = tc.fault(t, b.kf)
			}
			cfg := tc.cfg
			cfg.Compression = compression.Zstd
			p := newSamsaProducer(t, b.addrs, cfg)
			recs := makeSamsaRecords(topic, n)
			mds := sendAll(t, p, recs[:n/2])
			if tc.midway != nil {
				tc.midway(t, b.kf)
			}
			mds = append(mds, sendAll(t, p, recs[n/2:])...)
			require.NoError(t, p.Close(testContext(t)))
			if struck != nil {
				require.Positive(t, struck(), "the fault never struck")
			}

			got := consumeAll(t, b.addrs, topic, samsaPartitions, n)
			checkDelivered(t, recs, mds, got, samsaPartitions, compression.Zstd)
		})
	}
}

// errDropConnection makes a kfake control close the client's connection
// instead of answering.
var errDropConnection = errors.New("interop: drop the connection")
