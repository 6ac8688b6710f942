package producer

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// sendTo sends one record to topic's partition and waits for its outcome,
// up to wait.
func sendTo(t *testing.T, p *Producer, topic string, partition int32, wait time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	f := p.Send(context.Background(), &Record{Topic: topic, Partition: partition, ExplicitPartition: true, Value: []byte("v")})
	_, err := f.Wait(ctx)
	return err
}

// TestBugRecreatedTopicKeepsOldLeaderEpoch: a topic deleted and created
// again (a new topic id) restarts its leader epochs at 0. The metadata
// client takes the new topic as is (mergeTopic: a different id), but the
// IO goroutine's updatePartitions (sink_metadata.go) still compares the new
// epoch with the old incarnation's and skips every partition as "stale":
// once the old leader answers NOT_LEADER_OR_FOLLOWER the partition stays
// leaderless until its records fail with ErrDeliveryTimeout, although the
// new topic has a live leader all along.
func TestBugRecreatedTopicKeepsOldLeaderEpoch(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 2})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{DeliveryTimeout: 3 * time.Second, RequestTimeout: time.Second, MetadataMaxAge: 200 * time.Millisecond})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	// Elections: the partition's leader epoch grows to 3, and the
	// producer follows each move.
	for i := range 3 {
		leader, _, err := c.Leader("t", 0)
		require.NoError(t, err)
		require.NoError(t, c.MoveLeader("t", 0, 1-leader), "move %d", i)
		require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second), "after move %d", i)
	}
	oldLeader, epoch, err := c.Leader("t", 0)
	require.NoError(t, err)
	require.Equal(t, int32(3), epoch)
	// Recreate it: the new partition 0 is led by the other broker, epoch 0.
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 1))
	if l, _, _ := c.Leader("t", 0); l == oldLeader {
		require.NoError(t, c.MoveLeader("t", 0, 1-oldLeader)) // epoch 1, still < 3
	}
	err = sendTo(t, p, "t", 0, 10*time.Second)
	// The metadata client knows the live leader; only the IO goroutine
	// ignores it.
	newLeader, _, _ := c.Leader("t", 0)
	b, ok := p.meta.Snapshot().Leader("t", 0)
	require.True(t, ok)
	require.Equal(t, newLeader, b.NodeID, "the metadata snapshot has the new leader")
	require.NoError(t, err, "a record to the recreated topic's live partition failed")
}

// TestBugRecreatedTopicWithFewerPartitions: a topic deleted and created
// again with fewer partitions keeps its old partition count in the
// producer (updatePartitions in sink_metadata.go only grows t.parts and
// the accumulator's partitions), so the partitioner still spreads records
// over partitions that no longer exist: they go to the old leader, come
// back UNKNOWN_TOPIC_OR_PARTITION, and wait as leaderless until
// ErrDeliveryTimeout, for every record sent from then on, and keyed records
// hash over the wrong count (Java uses the current count).
func TestBugRecreatedTopicWithFewerPartitions(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 4))
	p := newProducer(t, c, Config{DeliveryTimeout: 2 * time.Second, RequestTimeout: time.Second, MetadataMaxAge: 200 * time.Millisecond})
	for part := range int32(4) {
		require.NoError(t, sendTo(t, p, "t", part, 10*time.Second))
	}
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 1))
	time.Sleep(time.Second) // several metadata refreshes
	var failed []error
	for i := range 8 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.Send(context.Background(), &Record{Topic: "t", Key: []byte{byte(i)}, Value: []byte("v")}).Wait(ctx)
		cancel()
		if err != nil {
			failed = append(failed, err)
		}
	}
	require.Empty(t, failed, "records to the recreated 1-partition topic failed")
}

// TestBugReplicaNotAvailableMakesPartitionLeaderless: a Metadata answer
// whose partition carries REPLICA_NOT_AVAILABLE (9) with a live leader
// (a replica is offline; metadata.Partition's own doc calls it
// "informational: the leader still works", and Java keeps the leader for
// any partition error) makes updatePartitions (sink_metadata.go:125,
// `mp.Err != nil` → leader -1) treat the partition as leaderless: its
// records never go out and fail with ErrDeliveryTimeout.
func TestBugReplicaNotAvailableMakesPartitionLeaderless(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	c.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Rewrite: func(resp kmsg.Response) {
		r := resp.(*kmsg.MetadataResponse)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				if r.Topics[i].Partitions[j].Leader >= 0 {
					r.Topics[i].Partitions[j].ErrorCode = 9 // REPLICA_NOT_AVAILABLE
				}
			}
		}
	}})
	p := newProducer(t, c, Config{DeliveryTimeout: 2 * time.Second, RequestTimeout: time.Second})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second), "a partition with a live leader and an offline replica")
}

// TestBugInitProducerIDWithoutIDSpins: an InitProducerId answer with no
// error but ProducerId -1 (a buggy broker or proxy) is taken as success by
// handleProducerID (idempotence.go:104-110): the id stays -1, failures and
// retryAt are reset, so ensureProducerID asks again at once, without
// backoff, on every IO loop turn, hammering the broker, and the records
// expire with a delivery timeout that does not name InitProducerId.
func TestBugInitProducerIDWithoutIDSpins(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var inits atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{22}, After: true, Rewrite: func(resp kmsg.Response) {
		inits.Add(1)
		r := resp.(*kmsg.InitProducerIDResponse)
		r.ErrorCode, r.ProducerID, r.ProducerEpoch = 0, -1, -1
	}})
	p := newProducer(t, c, Config{DeliveryTimeout: time.Second, RequestTimeout: 500 * time.Millisecond,
		RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond})
	err := sendTo(t, p, "t", 0, 10*time.Second)
	require.Error(t, err)
	t.Logf("record failed with: %v", err)
	n := inits.Load()
	// With a 100-200 ms backoff, one second allows about 8 attempts.
	require.LessOrEqual(t, n, int32(20), "%d InitProducerId requests in about a second", n)
	require.Contains(t, err.Error(), "InitProducerId", "the record's error names the cause")
}

// TestBugHugeMetadataThrottleFreezesMetadata: one Metadata answer with
// throttle_time_ms = MaxInt32 (about 24.8 days; a buggy broker, or a real
// request quota's long throttle) holds every later request on that
// connection in internal/conn's write queue (KIP-219), where RequestTimeout
// does not apply, and the metadata client waits for it with only its own
// lifetime as context (Client.fetch → do(c.ctx, ...), metadata/client.go):
// the refresh goroutine blocks, no other broker or connection is tried, and
// no topic wanted later ever gets metadata. Java caps nothing either, but
// its metadata requests time out (request.timeout.ms) and go to another
// node. InitProducerId goes through the same connection (meta.Do), so the
// idempotent producer never gets an id either and even the first record,
// to a topic the answer described, fails ("InitProducerId failed: context
// deadline exceeded").
func TestBugHugeMetadataThrottleFreezesMetadata(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	require.NoError(t, c.CreateTopic("u", 1))
	c.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Times: 1, Rewrite: func(resp kmsg.Response) {
		resp.(*kmsg.MetadataResponse).ThrottleMillis = math.MaxInt32
	}})
	p := newProducer(t, c, Config{DeliveryTimeout: 3 * time.Second, RequestTimeout: time.Second, MaxBlock: 3 * time.Second})
	errT := sendTo(t, p, "t", 0, 10*time.Second)
	errU := sendTo(t, p, "u", 0, 10*time.Second)
	t.Logf("t: %v; u: %v", errT, errU)
	require.NoError(t, errT, "a record to the topic of the throttled Metadata answer")
	require.NoError(t, errU, "a topic wanted after a throttled Metadata answer")
}

// TestBugHugePartitionIDGrowsHeapUnbounded: one Metadata answer that lists
// a partition with id 1<<20-1 (next to the real partition 0) makes
// topicFromResponse (metadata/metadata.go) allocate 2^20 Partitions
// (the "bound" it applies is a million), and the IO goroutine's
// updatePartitions (sink_metadata.go) creates an accumulator partition and
// an ioPart for each: hundreds of MB of live heap for one bogus number,
// none of it charged to the pool, outside the BufferMemory bound. The
// partitioner then spreads records over a million leaderless partitions.
func TestBugHugePartitionIDGrowsHeapUnbounded(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	c.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Rewrite: func(resp kmsg.Response) {
		r := resp.(*kmsg.MetadataResponse)
		for i := range r.Topics {
			if len(r.Topics[i].Partitions) > 0 {
				bogus := r.Topics[i].Partitions[0]
				bogus.Partition = 1<<20 - 1
				r.Topics[i].Partitions = append(r.Topics[i].Partitions, bogus)
			}
		}
	}})
	before := heapNow()
	p := newProducer(t, c, Config{DeliveryTimeout: 2 * time.Second, RequestTimeout: time.Second, BufferMemory: 1 << 20})
	_ = sendTo(t, p, "t", 0, 10*time.Second)
	grown := int64(heapNow()) - int64(before)
	t.Logf("live heap grew by %d MiB", grown>>20)
	require.Less(t, grown, int64(1<<20+bookkeepingSlack), "live heap grew by %d bytes with BufferMemory 1 MiB", grown)
}

// TestBugLeaderMissingFromBrokersWaitsForMaxAge: a Metadata answer whose
// brokers list lacks a partition's leader (an empty list, or a leader id
// it does not list: a broker mid-restart, a buggy proxy) leaves the
// partition leaderless, and nobody asks again: the metadata client counts
// the topic usable (it has partitions, no error) and waits MetadataMaxAge,
// so the records fail with ErrDeliveryTimeout although the next answer
// would be right.
func TestBugLeaderMissingFromBrokersWaitsForMaxAge(t *testing.T) {
	const maxAge = 5 * time.Minute // the default; with 500 ms the test passes
	for _, mode := range []string{"empty-brokers", "unknown-leader"} {
		t.Run(mode, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			c.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Times: 1, Rewrite: func(resp kmsg.Response) {
				r := resp.(*kmsg.MetadataResponse)
				if mode == "empty-brokers" {
					r.Brokers = nil
					return
				}
				for i := range r.Topics {
					for j := range r.Topics[i].Partitions {
						r.Topics[i].Partitions[j].Leader = 7
					}
				}
			}})
			p := newProducer(t, c, Config{DeliveryTimeout: 3 * time.Second, RequestTimeout: time.Second, MetadataMaxAge: maxAge})
			require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second), "the second Metadata answer is right")
		})
	}
}

// TestBugTxnInitProducerIDWithoutIDSpins: the transactional path has the
// same hole as the idempotent one (fixed in handleProducerID):
// txnClient.initProducerID (txn_coordinator.go) returns ProducerId -1 with
// no error, txnProducerID takes it, and txnEnsureProducerID asks again at
// once (producerID < 0, retryAt not moved), without backoff.
func TestBugTxnInitProducerIDWithoutIDSpins(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var inits atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{22}, After: true, Rewrite: func(resp kmsg.Response) {
		inits.Add(1)
		r := resp.(*kmsg.InitProducerIDResponse)
		r.ErrorCode, r.ProducerID, r.ProducerEpoch = 0, -1, -1
	}})
	p := newProducer(t, c, Config{TransactionalID: "tx", DeliveryTimeout: time.Second, RequestTimeout: 500 * time.Millisecond,
		RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond})
	require.NoError(t, p.BeginTransaction())
	err := sendTo(t, p, "t", 0, 10*time.Second)
	t.Logf("record: %v", err)
	n := inits.Load()
	require.LessOrEqual(t, n, int32(20), "%d InitProducerId requests in about a second", n)
}
