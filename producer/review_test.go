package producer

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/accumulator"
	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/kerr"
	"github.com/samsa-go/samsa/internal/testbroker"
)

// Tests from the review of the producer pipeline. Each protects one property
// the design promises; the ones that reproduce an open bug start with t.Skip.

// goroutineStacks returns the stacks of every goroutine.
func goroutineStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitFor polls cond every 5ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// TestReadyListHoldsPartitionOnce: a partition whose leader moves away and
// back before the old broker's ready list was served must not be listed
// twice there, or sendOne puts two batches of one partition in one Produce
// request (Kafka keeps only one of them per partition).
func TestReadyListHoldsPartitionOnce(t *testing.T) {

	s := newSink(&Producer{cfg: Config{DisableIdempotence: true}}, conn.Config{})
	s.timer.Stop()
	br1, br2 := &ioBroker{id: 1}, &ioBroker{id: 2}
	s.brokers[1], s.brokers[2] = br1, br2
	ip := &ioPart{leader: 1, readyOn: -1, hasSealed: true}

	s.markReady(ip) // listed on broker 1; broker 1 is dialing or at MaxInFlight
	ip.leader = 2   // metadata, or a KIP-951 CurrentLeader hint
	s.markReady(ip)
	ip.leader = 1 // and back, before broker 1 served its list
	s.markReady(ip)

	n := 0
	for _, x := range br1.ready {
		if x == ip && x.readyOn == br1.id {
			n++
		}
	}
	require.Equal(t, 1, n, "partition listed %d times, live, on broker 1's ready list", n)
}

// TestSplitHalvesExpireAfterDeliveryTimeout: the halves of a batch split
// after MESSAGE_TOO_LARGE are not in expireQ (the original batch's entry dies
// with its generation), so when their broker becomes unreachable nothing
// expires them: their futures must still fail with ErrDeliveryTimeout.
func TestSplitHalvesExpireAfterDeliveryTimeout(t *testing.T) {

	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("split", 1))
	p := newProducer(t, c, Config{
		Linger: 50 * time.Millisecond, RequestTimeout: 300 * time.Millisecond,
		DeliveryTimeout: time.Second, RetryBackoff: 200 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond,
	})
	var produces atomic.Int32
	count := func(int32, kmsg.Request) bool { produces.Add(1); return false }
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Match: count})
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 10}) // MESSAGE_TOO_LARGE: split
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, ErrorCode: 19})           // NOT_ENOUGH_REPLICAS: retry with backoff
	var fs []*Future
	for i := range 10 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "split", Value: []byte(fmt.Sprint(i))}))
	}
	require.True(t, waitFor(5*time.Second, func() bool { return produces.Load() >= 2 }), "the halves were sent")
	require.NoError(t, c.StopBroker(0)) // the only broker: no dial, no metadata, no answer from now on
	for i, f := range fs {
		select {
		case <-f.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("record %d: not completed 5s after its 1s DeliveryTimeout", i)
		}
		_, err := f.Wait(context.Background())
		require.ErrorIs(t, err, ErrDeliveryTimeout, "record %d", i)
	}
}

// TestCloseFromCallbackReturns: a callback that calls Close (a common way to
// stop on the first error) must not deadlock the producer: Close waits for
// every record to complete, including the one whose callback is running.
func TestCloseFromCallbackReturns(t *testing.T) {

	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 1))
	p, err := New(Config{Brokers: c.Addrs()}) // no cleanup Close: it would hang with the bug
	require.NoError(t, err)
	closed := make(chan error, 1)
	p.SendCallback(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(RecordMetadata, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		closed <- p.Close(ctx)
	})
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close called from a callback did not return within 5s (its ctx ended after 0.5s)")
	}
}

// TestCloseLeavesNoDialGoroutine: Close promises that the producer's
// goroutines have exited when it returns; a dial started by the IO goroutine
// must end (and its connection be closed) by then, not after DialTimeout.
func TestCloseLeavesNoDialGoroutine(t *testing.T) {

	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var apiVersions atomic.Int32
	// The metadata client's connection comes first; the IO goroutine's
	// own connection to the leader handshakes slowly.
	slow := func(int32, kmsg.Request) bool { return apiVersions.Add(1) >= 2 }
	c.Intercept(testbroker.Interceptor{Keys: []int16{18}, Match: slow, Delay: 1500 * time.Millisecond})
	p, err := New(Config{Brokers: c.Addrs(), DisableIdempotence: true, Linger: -1})
	require.NoError(t, err)
	p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")})
	require.True(t, waitFor(5*time.Second, func() bool {
		return strings.Contains(goroutineStacks(), "producer.(*sink).dial.func")
	}), "the IO goroutine started dialing the leader")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.Close(ctx)
	assert.False(t, strings.Contains(goroutineStacks(), "producer.(*sink).dial.func"), "a dial goroutine outlived Close")
	// Once the slow handshake ends, nothing of the producer may hold a
	// connection to the broker.
	require.True(t, waitFor(5*time.Second, func() bool {
		return !strings.Contains(goroutineStacks(), "producer.(*sink).dial.func")
	}))
	require.True(t, waitFor(2*time.Second, func() bool { return c.Stats().Connections == 0 }),
		"%d connections left open after Close", c.Stats().Connections)
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

// TestParkedTopicWithErrorDoesNotSpin: while a parked topic's metadata has
// an error other than UNKNOWN_TOPIC_OR_PARTITION (LEADER_NOT_AVAILABLE while
// a topic is being created, an authorization error), the IO goroutine must
// sleep until something is due, not spin: resetTimer takes the zero createAt
// of a topic that maybeCreateTopic will never create as a deadline, so with
// AutoCreateTopics on the timer fires at once, step changes nothing, and
// the loop repeats until DeliveryTimeout.
func TestParkedTopicWithErrorDoesNotSpin(t *testing.T) {

	p := &Producer{cfg: Config{AutoCreateTopics: true, DisableIdempotence: true, Linger: 5 * time.Millisecond, DeliveryTimeout: time.Minute}}
	s := newSink(p, conn.Config{})
	acc := accumulator.New[completion, *ioPart, sendState](accumulator.Config{})
	topic := &ioTopic{name: "creating", ts: &topicState{acc: acc.NewTopic("creating")}, err: kerr.LeaderNotAvailable}
	s.parked[topic] = struct{}{}
	for range 3 {
		s.now = time.Now()
		s.moveParked() // len(parts) == 0: maybeCreateTopic, which does nothing for this error
		s.resetTimer()
		select {
		case <-s.timer.C:
			t.Fatal("the IO goroutine's timer fired at once although nothing is due")
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.timer.Stop()
}

// TestParkedRecordsSeeTheirHeadersInThePartitioner: a custom Partitioner
// must see the same record whether or not the topic was known at Send: a
// parked record is partitioned later from its encoded body, and must still
// carry its headers (routing by a tenant header is common).
func TestParkedRecordsSeeTheirHeadersInThePartitioner(t *testing.T) {

	c := newCluster(t, testbroker.Config{})
	byHeader := PartitionerFunc(func(rec *Record, n int32) (int32, error) {
		for _, h := range rec.Headers {
			if h.Key == "p" {
				return int32(h.Value[0]) % n, nil
			}
		}
		return 0, fmt.Errorf("record %q has no header p", rec.Value)
	})
	p := newProducer(t, c, Config{Partitioner: byHeader})
	var fs []*Future
	for i := range 20 {
		fs = append(fs, p.Send(context.Background(), &Record{
			Topic: "later", Value: []byte(fmt.Sprint(i)), Headers: []Header{{Key: "p", Value: []byte{byte(i)}}},
		}))
	}
	time.Sleep(100 * time.Millisecond) // parked: the topic does not exist yet
	require.NoError(t, c.CreateTopic("later", 2))
	for i, md := range waitAll(t, fs) {
		require.Equal(t, int32(i%2), md.Partition, "record %d", i)
	}
}

// TestDeliveryTimeoutCountsParkedTime: DeliveryTimeout bounds the time from
// Send to the outcome; a record that waited parked for its topic must not
// get a fresh DeliveryTimeout when it moves into a batch.
func TestDeliveryTimeoutCountsParkedTime(t *testing.T) {

	c := newCluster(t, testbroker.Config{})
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true}) // no Produce is ever answered
	const dt = time.Second
	p := newProducer(t, c, Config{Linger: -1, RequestTimeout: 300 * time.Millisecond, DeliveryTimeout: dt})
	start := time.Now()
	f := p.Send(context.Background(), &Record{Topic: "later", Value: []byte("v")})
	time.Sleep(700 * time.Millisecond)
	require.NoError(t, c.CreateTopic("later", 1))
	select {
	case <-f.Done():
	case <-time.After(3 * dt):
		t.Fatal("no outcome after three DeliveryTimeouts")
	}
	took := time.Since(start)
	_, err := f.Wait(context.Background())
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.Less(t, took, dt+400*time.Millisecond, "the record failed %v after Send, DeliveryTimeout is %v", took, dt)
}

// TestSplitSucceedsWithAFullPool: a full buffer pool is the normal state
// under back-pressure (Send waits in MaxBlock); a batch the broker finds too
// large must still be split and delivered then, not failed with
// MESSAGE_TOO_LARGE because split could not take pool memory at once (the
// Java client builds split batches outside the pool).
func TestSplitSucceedsWithAFullPool(t *testing.T) {

	c := newCluster(t, testbroker.Config{MaxMessageBytes: 3000})
	require.NoError(t, c.CreateTopic("split", 1))
	p := newProducer(t, c, Config{BufferMemory: 64 << 10, BatchSize: 16 << 10, Linger: time.Millisecond, MaxInFlight: 1})
	var fs []*Future
	for i := range 2000 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "split", Value: []byte(fmt.Sprintf("%04d-%0100d", i, 0))}))
	}
	waitAll(t, fs)
}

// TestSendsRacingCloseCompleteOnce: Sends from many goroutines racing with
// Close (to known and unknown topics, some waiting for memory) all complete
// exactly once (Future.complete panics on a second completion), with
// success or an error wrapping ErrClosed, and Close returns.
func TestSendsRacingCloseCompleteOnce(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 3))
	p := newProducer(t, c, Config{BufferMemory: 256 << 10, BatchSize: 16 << 10})
	const senders, each = 8, 400
	futures := make([][]*Future, senders)
	start := make(chan struct{})
	done := make(chan struct{})
	for g := range senders {
		go func() {
			defer func() { done <- struct{}{} }()
			<-start
			for i := range each {
				topic := "t"
				if i%5 == 0 {
					topic = "unknown"
				}
				futures[g] = append(futures[g], p.Send(context.Background(), &Record{Topic: topic, Value: make([]byte, 500)}))
			}
		}()
	}
	close(start)
	time.Sleep(2 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_ = p.Close(ctx)
	for range senders {
		<-done
	}
	for g := range futures {
		for i, f := range futures[g] {
			md, ok, err := f.Result()
			require.True(t, ok, "sender %d record %d not completed after Close", g, i)
			if err != nil {
				require.ErrorIs(t, err, ErrClosed, "sender %d record %d", g, i)
			} else {
				require.Equal(t, "t", md.Topic)
			}
		}
	}
}
