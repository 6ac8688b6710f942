package producer

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// storedOnce asserts that every record value in values is stored exactly
// once in topic, over its partitions.
func storedOnce(t *testing.T, c *testbroker.Cluster, topic string, partitions int32, values []string) {
	t.Helper()
	count := map[string]int{}
	for part := range partitions {
		recs, err := c.Records(topic, part)
		require.NoError(t, err)
		for _, r := range recs {
			count[string(r.Value)]++
		}
	}
	for _, v := range values {
		require.Equal(t, 1, count[v], "record %q stored %d times", v, count[v])
	}
}

// TestTooLargeBatchesAreSplit: when the broker rejects a batch of several
// records with MESSAGE_TOO_LARGE, the producer splits it and delivers every
// record.
func TestTooLargeBatchesAreSplit(t *testing.T) {
	c := newCluster(t, testbroker.Config{MaxMessageBytes: 3000})
	require.NoError(t, c.CreateTopic("split", 1))
	p := newProducer(t, c, Config{BatchSize: 64 << 10, Linger: 20 * time.Millisecond})
	var fs []*Future
	var values []string
	for i := range 200 {
		v := fmt.Sprintf("%03d-%s", i, bytes.Repeat([]byte("x"), 100))
		values = append(values, v)
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "split", Value: []byte(v)}))
	}
	mds := waitAll(t, fs)
	for i := 1; i < len(mds); i++ {
		require.Greater(t, mds[i].Offset, mds[i-1].Offset, "split halves keep their order")
	}
	storedOnce(t, c, "split", 1, values)
	n, err := c.NumBatches("split", 0)
	require.NoError(t, err)
	require.Greater(t, n, 200*110/3000, "batches were split below the broker's limit")
}

// TestSequenceErrorsBumpTheEpoch: OUT_OF_ORDER_SEQUENCE_NUMBER and
// INVALID_PRODUCER_EPOCH answers make the producer bump its epoch or get a new
// id (KIP-360), and every record is still stored exactly once.
func TestSequenceErrorsBumpTheEpoch(t *testing.T) {
	for _, code := range []int16{45, 47} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			require.NoError(t, c.CreateTopic("seq", 2))
			p := newProducer(t, c, Config{})
			var values []string
			var fs []*Future
			send := func(n int) {
				for range n {
					v := fmt.Sprint(len(values))
					values = append(values, v)
					fs = append(fs, p.Send(context.Background(), &Record{Topic: "seq", Value: []byte(v)}))
				}
			}
			send(100)
			waitAll(t, fs)
			remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: code})
			defer remove()
			send(100)
			waitAll(t, fs)
			storedOnce(t, c, "seq", 2, values)
			epochs := map[int16]bool{}
			for part := range int32(2) {
				recs, err := c.Records("seq", part)
				require.NoError(t, err)
				for _, r := range recs {
					epochs[r.ProducerEpoch] = true
				}
			}
			if code == 45 {
				require.Len(t, epochs, 2, "the epoch was bumped once")
			}
		})
	}
}

// TestAmbiguousOutcomeIsReported: when every attempt ends with
// REQUEST_TIMED_OUT after the broker appended, the record fails at
// DeliveryTimeout with ErrOutcomeUnknown, and it is stored exactly once.
func TestAmbiguousOutcomeIsReported(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("amb", 1))
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, After: true, ErrorCode: 7})
	defer remove()
	p := newProducer(t, c, Config{DeliveryTimeout: 500 * time.Millisecond, RequestTimeout: 400 * time.Millisecond, Linger: -1})
	_, err := p.Send(context.Background(), &Record{Topic: "amb", Value: []byte("maybe")}).Wait(context.Background())
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.ErrorIs(t, err, ErrOutcomeUnknown)
	remove()
	storedOnce(t, c, "amb", 1, []string{"maybe"})
}

// TestDefinitelyNotWrittenHasNoUnknownOutcome: a record the broker refused
// before appending fails without ErrOutcomeUnknown.
func TestDefinitelyNotWrittenHasNoUnknownOutcome(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("no", 1))
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, ErrorCode: 29}) // TOPIC_AUTHORIZATION_FAILED
	defer remove()
	p := newProducer(t, c, Config{})
	_, err := p.Send(context.Background(), &Record{Topic: "no", Value: []byte("v")}).Wait(context.Background())
	var ke *KafkaError
	require.ErrorAs(t, err, &ke)
	require.Equal(t, int16(29), ke.Code)
	require.NotErrorIs(t, err, ErrOutcomeUnknown)
	require.Contains(t, err.Error(), "no[0]")
}

// TestDataLossIsReported: when the log start offset moves past offsets the
// producer had acknowledged, OnDataLoss says so.
func TestDataLossIsReported(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("loss", 1))
	var mu sync.Mutex
	var events []*DataLossError
	p := newProducer(t, c, Config{OnDataLoss: func(e *DataLossError) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	var fs []*Future
	for i := range 10 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "loss", Value: []byte(fmt.Sprint(i))}))
	}
	waitAll(t, fs)
	require.NoError(t, c.DeleteRecordsBefore("loss", 0, 10))
	_, err := p.Send(context.Background(), &Record{Topic: "loss", Value: []byte("after")}).Wait(context.Background())
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, events, 1)
	require.Equal(t, int64(9), events[0].LastAcked)
	require.Equal(t, int64(10), events[0].LogStart)
	require.Contains(t, events[0].Error(), "loss[0]")
}

// TestNonIdempotentProducer: DisableIdempotence with acks=leader and
// acks=none delivers, without producer ids on the batches.
func TestNonIdempotentProducer(t *testing.T) {
	for _, acks := range []Acks{AcksLeader, AcksNone, AcksAll} {
		t.Run(acks.String(), func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			require.NoError(t, c.CreateTopic("plain", 1))
			p := newProducer(t, c, Config{DisableIdempotence: true, Acks: acks})
			var fs []*Future
			for i := range 50 {
				fs = append(fs, p.Send(context.Background(), &Record{Topic: "plain", Value: []byte(fmt.Sprint(i))}))
			}
			mds := waitAll(t, fs)
			if acks == AcksNone {
				require.Equal(t, int64(-1), mds[0].Offset, "acks=none has no offsets")
			}
			require.Eventually(t, func() bool {
				hw, err := c.HighWatermark("plain", 0)
				return err == nil && hw == 50
			}, 5*time.Second, 10*time.Millisecond)
			recs, err := c.Records("plain", 0)
			require.NoError(t, err)
			require.Equal(t, int64(-1), recs[0].ProducerID)
		})
	}
}

// TestIdempotenceConfigErrors: idempotence requires acks=all and at most 5
// requests in flight.
func TestIdempotenceConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Brokers: []string{"127.0.0.1:1"}, Acks: AcksLeader},
		{Brokers: []string{"127.0.0.1:1"}, MaxInFlight: 6},
	} {
		_, err := New(cfg)
		require.ErrorIs(t, err, ErrInvalidConfig)
	}
}

// TestEpochBumpKeepsOtherPartitionsRecords: a non-retriable error on one
// partition (a sequence gap, so an epoch bump) must not fail a healthy
// partition's batch whose last attempt was ambiguous while its
// DeliveryTimeout is far away: resent under the old epoch first, it would
// be settled (DUPLICATE_SEQUENCE_NUMBER or success) and stored exactly once.
func TestEpochBumpKeepsOtherPartitionsRecords(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 2})
	require.NoError(t, c.CreateTopic("t", 2))
	require.NoError(t, c.MoveLeader("t", 0, 0))
	require.NoError(t, c.MoveLeader("t", 1, 1))
	p := newProducer(t, c, Config{
		Partitioner: ManualPartitioner(), Linger: -1, DeliveryTimeout: 30 * time.Second,
		RetryBackoff: 300 * time.Millisecond, RetryBackoffMax: 300 * time.Millisecond,
	})
	// Warm up: producer id, metadata and connections.
	waitAll(t, []*Future{
		p.Send(context.Background(), &Record{Topic: "t", Partition: 0, Value: []byte("w0")}),
		p.Send(context.Background(), &Record{Topic: "t", Partition: 1, Value: []byte("w1")}),
	})
	// Partition 1's broker appends, then loses the connection (ambiguous);
	// partition 0's broker rejects its batch (INVALID_RECORD: a gap).
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Brokers: []int32{1}, Times: 1, After: true, Drop: true})
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Brokers: []int32{0}, Times: 1, ErrorCode: 87})
	bad := p.Send(context.Background(), &Record{Topic: "t", Partition: 0, Value: []byte("bad")})
	good := p.Send(context.Background(), &Record{Topic: "t", Partition: 1, Value: []byte("good")})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := bad.Wait(ctx)
	var ke *KafkaError
	require.ErrorAs(t, err, &ke, "partition 0's batch is rejected")
	require.Equal(t, int16(87), ke.Code)
	_, err = good.Wait(ctx)
	require.NoError(t, err, "partition 1's record was never refused and its broker is healthy")
	storedOnce(t, c, "t", 2, []string{"good"})
}
