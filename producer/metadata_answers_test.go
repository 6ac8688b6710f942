package producer

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
)

// rewriteMetadata has the cluster's Metadata answers rewritten by f:
// times of them, or every one for 0.
func rewriteMetadata(c *testbroker.Cluster, times int, f func(*kmsg.MetadataResponse)) {
	c.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Times: times,
		Rewrite: func(resp kmsg.Response) { f(resp.(*kmsg.MetadataResponse)) }})
}

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

// TestRecreatedTopicRestartsLeaderEpochs: a topic deleted and created
// again (a new topic id) restarts its leader epochs at 0; the IO goroutine
// forgets the old incarnation's epochs (updatePartitions would skip the new,
// lower ones as stale and leave the partition leaderless), so records to
// the new topic's partition go to its live leader.
func TestRecreatedTopicRestartsLeaderEpochs(t *testing.T) {
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
	id := oldID(t, p, "t")
	// Recreate it: the new partition 0 is led by the other broker, epoch 0.
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 1))
	if l, _, _ := c.Leader("t", 0); l == oldLeader {
		require.NoError(t, c.MoveLeader("t", 0, 1-oldLeader)) // epoch 1, still < 3
	}
	// A record made while the producer still knows the old topic id fails
	// (TestRecreatedTopicNeverGetsOldRecords): send once it knows the new.
	waitTopicID(t, p, "t", id)
	err = sendTo(t, p, "t", 0, 10*time.Second)
	// The metadata client knows the live leader; only the IO goroutine
	// ignores it.
	newLeader, _, _ := c.Leader("t", 0)
	b, ok := p.meta.Snapshot().Leader("t", 0)
	require.True(t, ok)
	require.Equal(t, newLeader, b.NodeID, "the metadata snapshot has the new leader")
	require.NoError(t, err, "a record to the recreated topic's live partition failed")
}

// TestRecreatedTopicWithFewerPartitionsUsesNewCount: a topic deleted and
// created again with fewer partitions is partitioned over the new count (as
// Java does), not over the old partitions, which no longer exist.
func TestRecreatedTopicWithFewerPartitionsUsesNewCount(t *testing.T) {
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

// TestReplicaNotAvailableKeepsLeader: a Metadata answer whose partition
// carries REPLICA_NOT_AVAILABLE (9) with a live leader (a follower is
// offline; informational, and Java keeps the leader for any partition
// error) leaves the partition led: its records go out.
func TestReplicaNotAvailableKeepsLeader(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	rewriteMetadata(c, 0, func(r *kmsg.MetadataResponse) {
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				if r.Topics[i].Partitions[j].Leader >= 0 {
					r.Topics[i].Partitions[j].ErrorCode = 9 // REPLICA_NOT_AVAILABLE
				}
			}
		}
	})
	p := newProducer(t, c, Config{DeliveryTimeout: 2 * time.Second, RequestTimeout: time.Second})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second), "a partition with a live leader and an offline replica")
}

// TestHugeMetadataThrottleDoesNotFreezeMetadata: one Metadata answer with
// throttle_time_ms = MaxInt32 (about 24.8 days; a buggy broker) would hold
// every later request on that connection (KIP-219). The metadata client
// honours throttles up to RequestTimeout and otherwise reconnects, and
// bounds each attempt, so later topics get metadata and InitProducerId
// (through meta.Do) an id.
func TestHugeMetadataThrottleDoesNotFreezeMetadata(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	require.NoError(t, c.CreateTopic("u", 1))
	rewriteMetadata(c, 1, func(r *kmsg.MetadataResponse) {
		r.ThrottleMillis = math.MaxInt32
	})
	p := newProducer(t, c, Config{DeliveryTimeout: 3 * time.Second, RequestTimeout: time.Second, MaxBlock: 3 * time.Second})
	errT := sendTo(t, p, "t", 0, 10*time.Second)
	errU := sendTo(t, p, "u", 0, 10*time.Second)
	t.Logf("t: %v; u: %v", errT, errU)
	require.NoError(t, errT, "a record to the topic of the throttled Metadata answer")
	require.NoError(t, errU, "a topic wanted after a throttled Metadata answer")
}

// TestHugePartitionIDIsRefused: a Metadata answer that lists a partition
// with id 1<<20-1 next to the real partition 0 is broken (a topic's
// partitions are 0..n-1) and ignored for that topic: no million partitions
// in the metadata client, the accumulator or the IO goroutine, so the live
// heap stays within BufferMemory plus bookkeeping.
func TestHugePartitionIDIsRefused(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	rewriteMetadata(c, 0, func(r *kmsg.MetadataResponse) {
		for i := range r.Topics {
			if len(r.Topics[i].Partitions) > 0 {
				bogus := r.Topics[i].Partitions[0]
				bogus.Partition = 1<<20 - 1
				r.Topics[i].Partitions = append(r.Topics[i].Partitions, bogus)
			}
		}
	})
	before := heapNow()
	p := newProducer(t, c, Config{DeliveryTimeout: 2 * time.Second, RequestTimeout: time.Second, BufferMemory: 1 << 20})
	_ = sendTo(t, p, "t", 0, 10*time.Second)
	grown := int64(heapNow()) - int64(before)
	t.Logf("live heap grew by %d MiB", grown>>20)
	require.Less(t, grown, int64(1<<20+bookkeepingSlack), "live heap grew by %d bytes with BufferMemory 1 MiB", grown)
}

// TestLeaderMissingFromBrokersRefetchesSoon: a Metadata answer whose
// brokers list lacks a partition's leader (an empty list, or a leader id
// it does not list: a broker mid-restart, a buggy proxy) leaves the
// partition leaderless; its batches ask for metadata again (with backoff)
// instead of waiting MetadataMaxAge, and the next, right, answer lets them
// go.
func TestLeaderMissingFromBrokersRefetchesSoon(t *testing.T) {
	const maxAge = 5 * time.Minute // the default
	for _, mode := range []string{"empty-brokers", "unknown-leader"} {
		t.Run(mode, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			rewriteMetadata(c, 1, func(r *kmsg.MetadataResponse) {
				if mode == "empty-brokers" {
					r.Brokers = nil
					return
				}
				for i := range r.Topics {
					for j := range r.Topics[i].Partitions {
						r.Topics[i].Partitions[j].Leader = 7
					}
				}
			})
			p := newProducer(t, c, Config{DeliveryTimeout: 3 * time.Second, RequestTimeout: time.Second, MetadataMaxAge: maxAge})
			require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second), "the second Metadata answer is right")
		})
	}
}

// TestHugeProduceThrottleFailsAtDeliveryTimeout: a Produce answer with
// throttle_time_ms = MaxInt32 holds the connection's later writes (KIP-219,
// honoured as Java does); the records behind it fail with
// ErrDeliveryTimeout at their deadline, not in 24 days, and Close returns
// within its context.
func TestHugeProduceThrottleFailsAtDeliveryTimeout(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, After: true, Times: 1, Rewrite: func(resp kmsg.Response) {
		resp.(*kmsg.ProduceResponse).ThrottleMillis = math.MaxInt32
	}})
	const delivery = 2 * time.Second
	p := newProducer(t, c, Config{DeliveryTimeout: delivery, RequestTimeout: time.Second})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second), "the throttled answer itself")
	start := time.Now()
	err := sendTo(t, p, "t", 0, 10*time.Second)
	took := time.Since(start)
	t.Logf("after %v: %v", took, err)
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.Less(t, took, delivery+2*time.Second)
	f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	cerr := p.Close(ctx)
	took = time.Since(start)
	t.Logf("Close after %v: %v", took, cerr)
	require.Less(t, took, 3*time.Second, "Close is bounded by its context")
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	_, err = f.Wait(wctx)
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "the record buffered at Close completes: %v", err)
}

// TestRecreatedTopicWithFewerPartitionsFailsGoneRecords: records buffered
// for partitions that a recreated topic no longer has fail once each, with
// an error naming the topic and the recreation (wrapping
// UNKNOWN_TOPIC_OR_PARTITION), and give their memory back; a record sent to
// such a partition afterwards is out of range (ErrInvalidRecord); the
// partition that remains works for new records (its records buffered for
// the old topic fail with UNKNOWN_TOPIC_ID: they never go to the new one).
func TestRecreatedTopicWithFewerPartitionsFailsGoneRecords(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 4))
	p := newProducer(t, c, Config{Linger: 30 * time.Second, DeliveryTimeout: time.Minute, RequestTimeout: time.Second, MetadataMaxAge: 100 * time.Millisecond})
	// Partitions known (a parked record would be placed, and refused as
	// out of range, only once the new count is known).
	warm := p.Send(context.Background(), &Record{Topic: "t", Partition: 3, ExplicitPartition: true, Value: []byte("v")})
	require.NoError(t, p.Flush(context.Background()))
	_, err := warm.Wait(context.Background())
	require.NoError(t, err)
	var fs []*Future
	for part := range int32(4) {
		for range 10 {
			fs = append(fs, p.Send(context.Background(), &Record{Topic: "t", Partition: part, ExplicitPartition: true, Value: []byte("v")}))
		}
	}
	require.True(t, waitFor(5*time.Second, func() bool { return bufferUsed(p) > 0 }))
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, f := range fs[10:] {
		_, err := f.Wait(ctx)
		require.Error(t, err, "record %d", i+10)
		require.ErrorIs(t, err, kerr.UnknownTopicOrPartition)
		require.Contains(t, err.Error(), `recreated with 1 partitions`)
		require.Contains(t, err.Error(), "t[")
	}
	for _, f := range fs[:10] {
		_, err := f.Wait(ctx)
		require.ErrorIs(t, err, kerr.UnknownTopicID, "a record made for the old topic")
		require.Contains(t, err.Error(), "deleted and recreated")
	}
	require.True(t, waitFor(5*time.Second, func() bool { return bufferUsed(p) == 0 }), "%d bytes still in use", bufferUsed(p))
	err = sendTo(t, p, "t", 2, 10*time.Second)
	require.ErrorIs(t, err, ErrInvalidRecord)
	f := p.Send(ctx, &Record{Topic: "t", Key: []byte("k"), Value: []byte("v")})
	require.NoError(t, p.Flush(ctx))
	md, err := f.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, int32(0), md.Partition, "keys hash over the new count")
}

// TestLeaderlessPartitionRefetchesWithBackoff: a partition that stays
// leaderless (all replicas offline) with a batch waiting asks for
// metadata with backoff growing to RetryBackoffMax while answers bring no
// leader, as Java's metadata does (Metadata.equivalentResponseCount): with
// 100 ms / 1 s about 6 fetches in 3 s. It used to fetch every RetryBackoff
// forever.
func TestLeaderlessPartitionRefetchesWithBackoff(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var metas atomic.Int32
	rewriteMetadata(c, 0, func(r *kmsg.MetadataResponse) {
		metas.Add(1)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].Leader = -1
				r.Topics[i].Partitions[j].ErrorCode = 5 // LEADER_NOT_AVAILABLE
			}
		}
	})
	p := newProducer(t, c, Config{DeliveryTimeout: 5 * time.Second, RequestTimeout: time.Second,
		RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: time.Second})
	f := p.Send(context.Background(), &Record{Topic: "t", Partition: 0, ExplicitPartition: true, Value: []byte("v")})
	time.Sleep(500 * time.Millisecond) // warm up: the record is sealed and waits
	start := metas.Load()
	time.Sleep(3 * time.Second)
	n := metas.Load() - start
	t.Logf("%d Metadata requests in 3 s with one leaderless partition", n)
	_, done, _ := f.Result()
	require.False(t, done)
	require.LessOrEqual(t, n, int32(12), "Metadata requests every RetryBackoff without backoff growth")
}

// TestRecreatedTopicForgetsPartitionConfirmation: a recreated topic's
// partitions have no producer state on the broker (it accepts any first
// sequence), the case DESIGN's send gate ("only one until a batch of the
// partition has been acknowledged under the current producer id and
// epoch") guards, so a recreate forgets the confirmation, not only the
// leader epochs.
func TestRecreatedTopicForgetsPartitionConfirmation(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{DeliveryTimeout: 3 * time.Second, RequestTimeout: time.Second, MetadataMaxAge: 100 * time.Millisecond})
	for range 5 {
		require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	}
	s := p.txnSink
	ctx := context.Background()
	var oldID [16]byte
	require.NoError(t, s.callIO(ctx, func() { oldID = s.topics["t"].id }))
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 1))
	require.True(t, waitFor(5*time.Second, func() bool {
		var id [16]byte
		_ = s.callIO(ctx, func() { id = s.topics["t"].id })
		return id != oldID
	}), "the IO goroutine never saw the new topic id")
	var confirmed bool
	var lastAcked int64
	require.NoError(t, s.callIO(ctx, func() {
		ip := s.topics["t"].parts[0]
		confirmed, lastAcked = ip.confirmed, ip.lastAcked
	}))
	require.False(t, confirmed, "the new partition counts as confirmed: 5 batches may go before the broker has producer state")
	require.Equal(t, int64(-1), lastAcked, "the old incarnation's last acked offset is kept")
}

// TestRecreatedTopicReportsDataLossOfItsOwnOffsets: acked records of a
// recreated topic deleted from its log are reported to OnDataLoss: the
// old incarnation's last acknowledged offset, higher, is forgotten.
func TestRecreatedTopicReportsDataLossOfItsOwnOffsets(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var losses atomic.Int32
	p := newProducer(t, c, Config{DeliveryTimeout: 3 * time.Second, RequestTimeout: time.Second, MetadataMaxAge: 100 * time.Millisecond,
		OnDataLoss: func(*DataLossError) { losses.Add(1) }})
	for range 20 {
		require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	}
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 1))
	// A few MetadataMaxAge: the producer sees the new topic id before it
	// writes to the new incarnation (Produce names topics, not their ids,
	// so nothing else tells it).
	time.Sleep(500 * time.Millisecond)
	// Until the producer writes to the new incarnation.
	require.True(t, waitFor(10*time.Second, func() bool {
		hw, err := c.HighWatermark("t", 0)
		if err == nil && hw > 0 {
			return true
		}
		_ = sendTo(t, p, "t", 0, 2*time.Second)
		return false
	}))
	for range 3 {
		require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	}
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	require.Less(t, hw, int64(20))
	require.NoError(t, c.DeleteRecordsBefore("t", 0, hw)) // our acked records leave the log
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	require.Positive(t, losses.Load(), "acked records deleted from the recreated topic were not reported (log start %d)", hw)
}

// TestShrunkTopicIgnoresFewerPartitionsUnderSameID: once a topic was
// recreated with fewer partitions, an answer listing still fewer under the
// same topic id (a broker or proxy with partial metadata; Kafka never
// removes partitions of a topic id) fails nothing: only a new topic id
// lowers the count.
func TestShrunkTopicIgnoresFewerPartitionsUnderSameID(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 4))
	p := newProducer(t, c, Config{Linger: 30 * time.Second, DeliveryTimeout: time.Minute, RequestTimeout: time.Second, MetadataMaxAge: 100 * time.Millisecond})
	warm := p.Send(context.Background(), &Record{Topic: "t", Partition: 3, ExplicitPartition: true, Value: []byte("v")})
	require.NoError(t, p.Flush(context.Background()))
	_, err := warm.Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 2))
	require.True(t, waitFor(5*time.Second, func() bool { return p.txnSink.p.topicCount("t") == 2 }))
	f := p.Send(context.Background(), &Record{Topic: "t", Partition: 1, ExplicitPartition: true, Value: []byte("v")})
	var cut atomic.Bool
	rewriteMetadata(c, 1, func(r *kmsg.MetadataResponse) {
		for i := range r.Topics {
			if len(r.Topics[i].Partitions) > 1 {
				r.Topics[i].Partitions = r.Topics[i].Partitions[:1]
				cut.Store(true)
			}
		}
	})
	require.True(t, waitFor(5*time.Second, cut.Load))
	time.Sleep(500 * time.Millisecond) // later, sound answers
	_, done, err := f.Result()
	require.False(t, done, "a record of the live partition 1 failed: %v", err)
}

// oldID returns the topic id the IO goroutine knows for topic.
func oldID(t *testing.T, p *Producer, topic string) [16]byte {
	t.Helper()
	var id [16]byte
	require.NoError(t, p.txnSink.callIO(context.Background(), func() { id = p.txnSink.topics[topic].id }))
	return id
}

// waitTopicID waits until the IO goroutine knows topic under an id other
// than old (and not zero).
func waitTopicID(t *testing.T, p *Producer, topic string, old [16]byte) {
	t.Helper()
	require.True(t, waitFor(10*time.Second, func() bool {
		var id [16]byte
		_ = p.txnSink.callIO(context.Background(), func() {
			if it := p.txnSink.topics[topic]; it != nil {
				id = it.id
			}
		})
		return id != old && id != [16]byte{}
	}), "the IO goroutine never saw a new topic id for %q", topic)
}

func (p *Producer) topicCount(name string) int32 {
	ts, _ := p.topic(name)
	return ts.count.Load()
}
