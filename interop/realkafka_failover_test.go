package interop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/producer"
)

// TestRealKafkaIdempotenceLeaderStop produces continuously with the
// idempotent producer (the default) to a replication-factor-3 topic of the
// 3-node cluster while the broker leading partition 0 goes down, and later
// restarts, after which a preferred leader election moves its partitions
// back to it: two leader changes under load, with requests in flight to the
// old leader. The broker goes down in two ways: "stop" is a controlled
// shutdown (SIGTERM: leadership moves first, and the old leader answers
// NOT_LEADER_OR_FOLLOWER), "kill" a crash (SIGKILL: requests in flight get
// no answer, so their outcome is unknown until the controller fences the
// broker, and their retries reach a new leader that may already hold them).
// The real broker de-duplicates by producer id and sequence, so the
// read-back must find every record once, in Send order per partition, at
// the offset samsa reported (0 lost, 0 duplicated, 0 reordered), and every
// record's callback must run exactly once, without error.
func TestRealKafkaIdempotenceLeaderStop(t *testing.T) {
	c := realKafka3(t)
	for _, down := range []string{"stop", "kill"} {
		if !t.Run(down, func(t *testing.T) { testLeaderDown(t, c, down) }) {
			return
		}
	}
}

// testLeaderDown is TestRealKafkaIdempotenceLeaderStop with the leader of
// partition 0 taken down by kafka/node.sh's verb down (stop or kill).
func testLeaderDown(t *testing.T, c *realCluster, down string) {
	n := recordCount(200_000, 30_000)
	// Stopping a node, restarting it and moving leaders back takes about
	// half a minute on a small machine: the records are spread over more,
	// so that all of it happens under load.
	const sendFor = 45 * time.Second
	topic := uniqueTopic("samsa-failover-" + down)
	c.createTopic(t, topic, samsaPartitions, 3, nil)
	leader, _ := c.partitionInfo(t, topic, 0)

	p := newSamsaProducer(t, c.addrs, producer.Config{Compression: compression.LZ4, DeliveryTimeout: 2 * time.Minute})
	recs := makeSamsaRecords(topic, n)
	mds := make([]producer.RecordMetadata, n)
	errs := make([]error, n)
	calls := make([]atomic.Int32, n)
	var sent atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		start := time.Now()
		for i, r := range recs {
			if wait := time.Duration(i)*sendFor/time.Duration(n) - time.Since(start); wait > 0 {
				time.Sleep(wait)
			}
			p.SendCallback(ctx, r, func(md producer.RecordMetadata, err error) {
				calls[i].Add(1)
				mds[i], errs[i] = md, err
			})
			sent.Store(int64(i + 1))
		}
	}()
	// Whatever happens, stop and wait for the sender before the producer
	// closes.
	t.Cleanup(func() { cancel(); <-senderDone })

	waitFor(t, time.Minute, "the first tenth of the records was not sent", func() bool { return sent.Load() >= int64(n/10) })
	t0 := time.Now()
	c.stopNode(t, down, leader)
	// After a kill, the controller moves the leadership once the broker's
	// session times out.
	waitFor(t, 30*time.Second, "partition 0 still led by the node that went down", func() bool {
		moved, _ := c.partitionInfo(t, topic, 0)
		return moved != leader
	})
	t.Logf("%s node %d, the leader of partition 0, after %d records were sent; new leader after %v",
		down, leader, sent.Load(), time.Since(t0).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // producing to the new leaders only
	t0 = time.Now()
	c.startNode(t, leader)
	restarted := time.Since(t0)
	c.electPreferredLeaders(t, topic, samsaPartitions)
	back, _ := c.partitionInfo(t, topic, 0)
	assert.Equal(t, leader, back, "partition 0's leader after the preferred leader election")
	t.Logf("restarted node %d in %v; it leads partition 0 again %v later, after %d records were sent",
		leader, restarted.Round(time.Millisecond), (time.Since(t0) - restarted).Round(time.Millisecond), sent.Load())
	if sent.Load() == int64(n) {
		t.Logf("warning: every record was sent before the leaders moved back; the second leader change happened without load")
	}

	<-senderDone
	require.NoError(t, p.Flush(ctx))
	stats := p.Metrics().Producer
	require.NoError(t, p.Close(ctx))
	failed := 0
	for i := range recs {
		if k := calls[i].Load(); k != 1 {
			t.Fatalf("record %d completed %d times", i, k)
		}
		if errs[i] != nil && failed < 10 {
			failed++
			t.Errorf("record %d failed: %v", i, errs[i])
		}
	}
	require.Zero(t, failed, "records failed")
	t.Logf("%d records, %d batches, %d batch retries", n, stats.BatchAckTotal, stats.BatchRetryTotal)

	got := consumeAll(t, c.addrs, topic, samsaPartitions, n)
	checkDelivered(t, recs, mds, got, samsaPartitions, compression.LZ4)
}

// TestRealKafkaNotEnoughReplicas checks that NOT_ENOUGH_REPLICAS is retried
// until the cluster can take the records again, and that they are then
// written exactly once.
//
// Design: acks=all fails with NOT_ENOUGH_REPLICAS only while the partition's
// in-sync replicas are fewer than min.insync.replicas. With RF 3 and
// min.insync.replicas=2, one broker down leaves 2 in sync, which is enough,
// and two down would take the 3-voter controller quorum (on the same nodes)
// with them. So the topic gets RF 3 and min.insync.replicas=3, one
// partition, and the test stops one of its followers, never its leader: the
// ISR shrinks to 2 < 3, the leader stays and answers every Produce with
// NOT_ENOUGH_REPLICAS (proved by the exception in the leader's log), and no
// record may complete. Then the follower is restarted, catches up and
// rejoins the ISR, and every record must be delivered once, in order.
func TestRealKafkaNotEnoughReplicas(t *testing.T) {
	c := realKafka3(t)
	if c.dir == "" {
		t.Skipf("%s is not set: the test stops a node and reads the broker log", c.dirVar)
	}
	const n = 2000
	topic := uniqueTopic("samsa-minisr")
	c.createTopic(t, topic, 1, 3, map[string]string{"min.insync.replicas": "3"})
	leader, isr := c.partitionInfo(t, topic, 0)
	require.Len(t, isr, 3, "ISR of %s-0 before a follower stops", topic)
	follower := (leader + 1) % 3
	logBefore := len(c.nodeLog(leader))
	c.stopNode(t, "stop", follower)
	waitFor(t, time.Minute, "the stopped follower is still in the ISR", func() bool {
		views, err := c.topicMetadataFromEach(testContext(t), t, topic)
		if err != nil {
			return false
		}
		for _, v := range views {
			if len(v.Partitions) != 1 || len(v.Partitions[0].ISR) != 2 {
				return false
			}
		}
		return len(views) == 2
	})

	p := newSamsaProducer(t, c.addrs, producer.Config{DeliveryTimeout: 2 * time.Minute})
	recs := makeSamsaRecords(topic, n)
	ctx := realContext(t, 3*time.Minute)
	futs := make([]*producer.Future, n)
	for i, r := range recs[:n/2] {
		futs[i] = p.Send(ctx, r)
	}
	var nerLine string
	waitFor(t, 30*time.Second, "the leader's log shows no NotEnoughReplicasException for "+topic, func() bool {
		nerLine = findLine(c.nodeLog(leader)[logBefore:], "NotEnoughReplicasException", topic+"-0")
		return nerLine != ""
	})
	t.Logf("node %d (leader) answered NOT_ENOUGH_REPLICAS: %s", leader, nerLine)
	for i, r := range recs[n/2:] {
		futs[n/2+i] = p.Send(ctx, r)
	}
	time.Sleep(time.Second) // more retries, all failing
	for i, f := range futs {
		if _, done, err := f.Result(); done {
			t.Fatalf("record %d completed while the ISR was below min.insync.replicas: %v", i, err)
		}
	}
	retries := p.Metrics().Producer.BatchRetryTotal
	assert.Positive(t, retries, "NOT_ENOUGH_REPLICAS must be retried")

	c.startNode(t, follower)
	mds := waitAll(t, p, futs)
	require.NoError(t, p.Close(ctx))
	t.Logf("%d batch retries while the follower was down", retries)
	got := consumeAll(t, c.addrs, topic, 1, n)
	checkDelivered(t, recs, mds, got, 1, compression.None)
}

// findLine returns the first line of log holding every one of subs, or "".
func findLine(log string, subs ...string) string {
	for line := range strings.Lines(log) {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// stopNode stops node n with kafka/node.sh's verb ("stop": controlled
// shutdown, or "kill"), and makes the test's cleanup start it again if the
// test has not: the cluster is shared with the other tests.
func (c *realCluster) stopNode(t *testing.T, verb string, n int32) {
	t.Helper()
	c.node(t, verb, n)
	if c.stopped == nil {
		c.stopped = make(map[int32]bool)
		t.Cleanup(func() {
			for n, down := range c.stopped {
				if down {
					c.startNode(t, n)
				}
			}
		})
	}
	c.stopped[n] = true
}

// startNode restarts node n with kafka/node.sh, which waits until the node
// is back in the cluster's metadata.
func (c *realCluster) startNode(t *testing.T, n int32) {
	t.Helper()
	c.node(t, "start", n)
	c.stopped[n] = false
}

// electPreferredLeaders moves the leadership of every partition of topic
// back to its preferred replica (the first of its assignment), retrying
// while the replica is not yet back in sync.
func (c *realCluster) electPreferredLeaders(t *testing.T, topic string, partitions int32) {
	t.Helper()
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	ctx := testContext(t)
	// After a kill, the restarted broker recovers its log and catches up
	// before it is back in sync: on a loaded machine that can take a while.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := electPreferred(ctx, cl, topic, partitions)
		if err == nil {
			// The election is done on the controller; the broker answering
			// Metadata may not have the new leaders yet, and an election
			// that found the replica out of sync moved nothing.
			err = c.preferredLeadersLead(t, topic)
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("preferred leader election of %s: %v", topic, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// preferredLeadersLead returns an error naming the first partition of topic
// whose leader, as Metadata from any of the cluster's brokers tells, is not
// its preferred replica. Every broker is asked: each learns the election
// from the controller on its own, and a broker that has not yet would show
// the old leader to the next test step asking it.
func (c *realCluster) preferredLeadersLead(t *testing.T, topic string) error {
	t.Helper()
	views, err := c.topicMetadataFromEach(testContext(t), t, topic)
	if err != nil {
		return err
	}
	for _, v := range views {
		for _, p := range v.Partitions {
			if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
				return fmt.Errorf("%s: partition %d is led by %d, not its preferred replica %d", v.addr, p.Partition, p.Leader, p.Replicas[0])
			}
		}
	}
	return nil
}

// electPreferred sends one ElectLeaders request (preferred) for every
// partition of topic; ELECTION_NOT_NEEDED counts as success.
func electPreferred(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = 0 // preferred
	req.TimeoutMillis = 10000
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && !errors.Is(err, kerr.ElectionNotNeeded) {
				return fmt.Errorf("partition %d: %w", rp.Partition, err)
			}
		}
	}
	return nil
}
