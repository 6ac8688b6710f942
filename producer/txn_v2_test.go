package producer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
)

// Transaction version 2 (KIP-890 part 2) against the test broker, whose
// coordinator serves both versions by request version as Kafka 4.4 does.

// wireLog records the transaction requests a cluster receives: API key and
// version, in arrival order.
type wireLog struct {
	mu   sync.Mutex
	reqs []string
}

func logTxnRequests(c *testbroker.Cluster) *wireLog {
	w := &wireLog{}
	names := map[int16]string{0: "Produce", 22: "InitProducerId", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit"}
	c.Intercept(testbroker.Interceptor{Keys: []int16{0, 22, 24, 25, 26, 28}, Match: func(_ int32, r kmsg.Request) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.reqs = append(w.reqs, fmt.Sprintf("%s v%d", names[r.Key()], r.GetVersion()))
		return false
	}})
	return w
}

// counts returns how many requests of each name and version arrived.
func (w *wireLog) counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, r := range w.reqs {
		out[r]++
	}
	return out
}

// only returns the requests of the given names in arrival order.
func (w *wireLog) only(names ...string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.reqs {
		for _, n := range names {
			if len(r) > len(n) && r[:len(n)+1] == n+" " {
				out = append(out, r)
			}
		}
	}
	return out
}

// committedValues returns the values a read_committed consumer of topic's
// partitions sees, per partition in offset order: a transaction is the run
// of one producer id's transactional records up to its next marker.
func committedValues(t *testing.T, c *testbroker.Cluster, topic string, partitions int32) map[int32][]string {
	t.Helper()
	out := map[int32][]string{}
	for part := range partitions {
		recs, err := c.Records(topic, part)
		require.NoError(t, err)
		open := map[int64][]string{}
		for _, r := range recs {
			switch {
			case r.Control:
				if len(r.Key) == 4 && r.Key[3] == 1 {
					out[part] = append(out[part], open[r.ProducerID]...)
				}
				delete(open, r.ProducerID)
			case r.Transactional:
				open[r.ProducerID] = append(open[r.ProducerID], string(r.Value))
			default:
				out[part] = append(out[part], string(r.Value))
			}
		}
	}
	return out
}

// TestTransactionVersionFlows runs the same transactions at each finalized
// transaction.version and checks what goes on the wire: at 2 no
// AddPartitionsToTxn or AddOffsetsToTxn, Produce v13 (by topic id, as
// Java 4.4 under version 2), TxnOffsetCommit v5
// and EndTxn v5, and the epoch bumped by each commit and abort; at 1 (and
// on a broker that reports no level) the explicit flow at Produce v11,
// TxnOffsetCommit v4 and EndTxn v4, one epoch. Either way read_committed
// sees exactly the committed records and the group its offsets.
func TestTransactionVersionFlows(t *testing.T) {
	cases := []struct {
		level int16
		v2    bool
	}{{2, true}, {1, false}, {-1, false}}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("transaction.version %d", tc.level), func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 3, TransactionVersion: tc.level})
			require.NoError(t, c.CreateTopic("t", 3))
			w := logTxnRequests(c)
			p := newProducer(t, c, Config{TransactionalID: "flows", Linger: time.Millisecond})
			ctx := testCtx(t)
			offsets := map[string]map[int32]TxnOffset{"in": {0: {Offset: 5, LeaderEpoch: -1}}}
			var want []string
			for i, commit := range []bool{true, false, true} {
				require.NoError(t, p.BeginTransaction())
				var fs []*Future
				for part := range int32(3) {
					v := fmt.Sprintf("t%d-p%d", i, part)
					fs = append(fs, p.Send(ctx, &Record{Topic: "t", Partition: part, ExplicitPartition: true, Value: []byte(v)}))
					if commit {
						want = append(want, v)
					}
				}
				require.NoError(t, p.SendOffsetsToTransaction(ctx, offsets, GroupMetadata{GroupID: "g"}))
				if commit {
					require.NoError(t, p.CommitTransaction(ctx), "transaction %d", i)
				} else {
					require.NoError(t, p.AbortTransaction(ctx), "transaction %d", i)
				}
				for _, f := range fs {
					if _, err := f.Wait(ctx); commit {
						require.NoError(t, err)
					}
				}
			}
			got := committedValues(t, c, "t", 3)
			require.ElementsMatch(t, want, slices.Concat(got[0], got[1], got[2]))
			off, ok := c.CommittedOffset("g", "in", 0)
			require.True(t, ok)
			require.Equal(t, int64(5), off)

			n := w.counts()
			_, _, epoch, _ := c.TransactionState("flows")
			if tc.v2 {
				require.Zero(t, n["AddPartitionsToTxn v3"], "no AddPartitionsToTxn at version 2: %v", n)
				require.Zero(t, n["AddOffsetsToTxn v3"]+n["AddOffsetsToTxn v4"], "no AddOffsetsToTxn at version 2: %v", n)
				require.Zero(t, n["Produce v11"]+n["Produce v12"], "every Produce at v13: %v", n)
				require.Positive(t, n["Produce v13"], "%v", n)
				require.Equal(t, map[string]int{"EndTxn v5": 3, "TxnOffsetCommit v5": 3}, map[string]int{"EndTxn v5": n["EndTxn v5"], "TxnOffsetCommit v5": n["TxnOffsetCommit v5"]}, "%v", n)
				require.Equal(t, int16(3), epoch, "three EndTxn, three bumps")
				return
			}
			require.Positive(t, n["AddPartitionsToTxn v3"], "%v", n)
			require.Zero(t, n["Produce v12"]+n["Produce v13"], "%v", n)
			require.Positive(t, n["Produce v11"], "%v", n)
			require.Equal(t, map[string]int{"EndTxn v4": 3, "TxnOffsetCommit v4": 3}, map[string]int{"EndTxn v4": n["EndTxn v4"], "TxnOffsetCommit v4": n["TxnOffsetCommit v4"]}, "%v", n)
			require.Equal(t, int16(0), epoch, "version 1 keeps the epoch")
		})
	}
}

// TestTxnV2EpochOverflowGivesNewProducerID: an EndTxn v5 at the last
// usable epoch answers a new producer id at epoch 0, which the producer
// adopts: its next transaction commits under the new id.
func TestTxnV2EpochOverflowGivesNewProducerID(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	require.NoError(t, c.SetProducerEpoch("overflow", math.MaxInt16-2)) // InitProducerId bumps to 32766
	_, oldPID, _, _ := c.TransactionState("overflow")
	p := newProducer(t, c, Config{TransactionalID: "overflow", Linger: time.Millisecond})
	ctx := testCtx(t)
	for i := range 3 {
		commitOne(t, ctx, p, fmt.Sprint("v", i))
		_, pid, epoch, _ := c.TransactionState("overflow")
		require.NotEqual(t, oldPID, pid, "transaction %d: a new producer id", i)
		require.Equal(t, int16(i), epoch, "transaction %d: epoch 0 after the overflow, then bumped by each commit", i)
	}
	got := committedValues(t, c, "t", 1)
	require.Equal(t, []string{"v0", "v1", "v2"}, got[0])
	var id int64
	var ep int16
	require.NoError(t, p.txnSink.callIO(ctx, func() { id, ep = p.txnSink.idem.producerID, p.txnSink.idem.epoch }))
	_, pid, epoch, _ := c.TransactionState("overflow")
	require.Equal(t, pid, id)
	require.Equal(t, epoch, ep)
}

// commitOne commits a transaction of one record with value v to "t".
func commitOne(t *testing.T, ctx context.Context, p *Producer, v string) {
	t.Helper()
	require.NoError(t, p.BeginTransaction())
	f := p.Send(ctx, &Record{Topic: "t", Value: []byte(v)})
	require.NoError(t, p.CommitTransaction(ctx))
	_, err := f.Wait(ctx)
	require.NoError(t, err)
}

// TestTransactionVersionSwitchAtRunTime: the cluster's transaction.version
// changes while the producer runs (FeatureCommand upgrade, then
// downgrade); the producer reads it again at the end of a transaction once
// MetadataMaxAge has passed, and its next transaction runs the new flow:
// from 1 to 2 after an epoch bump (InitProducerId), back to 1 at once.
// Every transaction commits.
func TestTransactionVersionSwitchAtRunTime(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	w := logTxnRequests(c)
	p := newProducer(t, c, Config{TransactionalID: "switch", Linger: time.Millisecond, MetadataMaxAge: 50 * time.Millisecond})
	ctx := testCtx(t)
	commitOne(t, ctx, p, "at 1")
	require.NoError(t, c.SetTransactionVersion(2))
	time.Sleep(100 * time.Millisecond)
	commitOne(t, ctx, p, "upgraded") // begun at 1; its end reads the new level
	commitOne(t, ctx, p, "at 2")
	commitOne(t, ctx, p, "still 2")
	require.NoError(t, c.SetTransactionVersion(1))
	time.Sleep(100 * time.Millisecond)
	commitOne(t, ctx, p, "downgraded")
	commitOne(t, ctx, p, "at 1 again")
	require.Equal(t, []string{
		"InitProducerId v5", "AddPartitionsToTxn v3", "Produce v11", "EndTxn v4", // at 1
		"AddPartitionsToTxn v3", "Produce v11", "EndTxn v4", // upgraded
		"InitProducerId v5", "Produce v13", "EndTxn v5", // the bump, then at 2
		"Produce v13", "EndTxn v5", // still 2
		"Produce v13", "EndTxn v5", // downgraded
		"AddPartitionsToTxn v3", "Produce v11", "EndTxn v4", // at 1 again
	}, w.only("InitProducerId", "AddPartitionsToTxn", "Produce", "EndTxn"))
	got := committedValues(t, c, "t", 1)
	require.Equal(t, []string{"at 1", "upgraded", "at 2", "still 2", "downgraded", "at 1 again"}, got[0])
}

// TestTxnV2EndTxnAnswerLost: the coordinator commits and bumps, but the
// connection drops before its answer; the producer's retry carries the
// old epoch, which the coordinator recognizes as the retry of the commit
// and answers again with the new epoch. The producer goes on.
func TestTxnV2EndTxnAnswerLost(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	w := logTxnRequests(c)
	c.Intercept(testbroker.Interceptor{Keys: []int16{26}, After: true, Times: 1, Drop: true})
	p := newProducer(t, c, Config{TransactionalID: "lost", Linger: time.Millisecond})
	ctx := testCtx(t)
	commitOne(t, ctx, p, "first")
	commitOne(t, ctx, p, "second")
	require.Equal(t, 3, w.counts()["EndTxn v5"], "the lost answer's EndTxn was sent again")
	_, _, epoch, _ := c.TransactionState("lost")
	require.Equal(t, int16(2), epoch)
	require.Equal(t, []string{"first", "second"}, committedValues(t, c, "t", 1)[0])
}

// TestTxnV2AbortAfterFailedProduce: a transaction whose only Produce was
// refused (TOPIC_AUTHORIZATION_FAILED, before the coordinator added the
// partition) is abortable; its abort still sends EndTxn, since a Produce
// went out, and the coordinator takes it as an empty abort (a bump). The
// next transaction commits.
func TestTxnV2AbortAfterFailedProduce(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	w := logTxnRequests(c)
	p := newProducer(t, c, Config{TransactionalID: "refused", Linger: time.Millisecond})
	ctx := testCtx(t)
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 29})
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("refused")}).Wait(ctx)
	require.Error(t, err)
	cerr := p.CommitTransaction(ctx)
	require.True(t, IsAbortable(cerr), "%v", cerr)
	require.NoError(t, p.AbortTransaction(ctx))
	require.Equal(t, 1, w.counts()["EndTxn v5"])
	commitOne(t, ctx, p, "ok")
	require.Equal(t, []string{"ok"}, committedValues(t, c, "t", 1)[0])
	// Nothing sent, nothing to end: an abort without a Produce sends no
	// EndTxn.
	require.NoError(t, p.BeginTransaction())
	require.NoError(t, p.AbortTransaction(ctx))
	require.Equal(t, 2, w.counts()["EndTxn v5"])
}

// TestTxnV2ProduceWhileMarkersPending: the next transaction's first
// Produce arrives while the coordinator still writes the last one's
// markers; Kafka 4.x cannot add the partition yet and answers
// CONCURRENT_TRANSACTIONS (a Produce v12+), which the producer retries
// until it can, as Java (ConcurrentTransactionsException is retriable):
// the transaction must not become abortable. Found by the soak
// (interop's TestRealKafkaSoak, a commit then the next transaction at
// once on Kafka 4.4).
func TestTxnV2ProduceWhileMarkersPending(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, TransactionMarkerDelay: 200 * time.Millisecond})
	require.NoError(t, c.CreateTopic("t", 1))
	var refused atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, After: true, Rewrite: func(r kmsg.Response) {
		for _, rt := range r.(*kmsg.ProduceResponse).Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == 51 {
					refused.Add(1)
				}
			}
		}
	}})
	p := newProducer(t, c, Config{TransactionalID: "pending", Linger: time.Millisecond})
	ctx := testCtx(t)
	commitOne(t, ctx, p, "first")
	commitOne(t, ctx, p, "second")
	require.Positive(t, refused.Load(), "the second transaction's Produce came while the markers were pending")
	require.Eventually(t, func() bool {
		return slices.Equal([]string{"first", "second"}, committedValues(t, c, "t", 1)[0])
	}, 5*time.Second, 10*time.Millisecond)
}

// TestTxnV2ProduceConcurrentTransactionsRetried: Kafka 4.4 answers a
// transactional Produce v12+ whose partition it cannot add yet (the
// coordinator still writes the last transaction's markers) with
// CONCURRENT_TRANSACTIONS, as interop's rolling upgrade test saw on every
// 15th transaction or so. Java's ConcurrentTransactionsException is
// retriable, so the batch is retried and the transaction commits; it
// used to fail the record and make the transaction abortable.
func TestTxnV2ProduceConcurrentTransactionsRetried(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	w := logTxnRequests(c)
	p := newProducer(t, c, Config{TransactionalID: "concurrent", Linger: time.Millisecond})
	ctx := testCtx(t)
	commitOne(t, ctx, p, "first")
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 2, ErrorCode: 51}) // CONCURRENT_TRANSACTIONS
	commitOne(t, ctx, p, "second")
	require.Equal(t, 4, w.counts()["Produce v13"], "the refused Produce was sent again, twice (v13 by topic id, transaction version 2)")
	require.Equal(t, 2, w.counts()["EndTxn v5"], "no abort")
	require.Equal(t, []string{"first", "second"}, committedValues(t, c, "t", 1)[0])
}

// TestTxnV2AbortAfterCoordinatorTimeout: at version 2, a transaction the
// coordinator aborted past its timeout (bumping the epoch) is abortable
// for the producer, not fatal: its records fail with
// INVALID_PRODUCER_EPOCH, its abort's EndTxn v5 with the old epoch gets
// the new one, and the next transaction commits. (At version 1 the
// coordinator fences the old epoch: TestSamsaTransactionTimeoutKfake.)
func TestTxnV2AbortAfterCoordinatorTimeout(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	c := newCluster(t, testbroker.Config{Brokers: 1, Clock: func() time.Time { return time.Unix(0, now.Load()) }})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{TransactionalID: "timeout", Linger: time.Millisecond, TransactionTimeout: time.Second})
	ctx := testCtx(t)
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("early")}).Wait(ctx)
	require.NoError(t, err)
	now.Add(int64(time.Minute)) // the coordinator's reaper aborts it
	require.Eventually(t, func() bool { s, _, _, _ := c.TransactionState("timeout"); return s == "CompleteAbort" }, 5*time.Second, 5*time.Millisecond)
	_, err = p.Send(ctx, &Record{Topic: "t", Value: []byte("late")}).Wait(ctx)
	require.True(t, IsAbortable(err), "%v", err)
	require.NoError(t, p.AbortTransaction(ctx))
	commitOne(t, ctx, p, "after")
	require.Equal(t, []string{"after"}, committedValues(t, c, "t", 1)[0])
}

// TestTxnBumpPendingAtCommit: an epoch bump asked for between two
// transactions (txnPickVersion at a switch from version 1 to 2) that the
// IO goroutine had not started yet when CommitTransaction came (the
// caller's Begin, Send and Commit raced its next step): the commit's
// records wait for the bump (mayDrain), so the bump must go while the
// transaction commits, or the commit never ends. The race is forced: the
// bump is asked for and the state moved to committing in one IO step.
func TestTxnBumpPendingAtCommit(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{TransactionalID: "pending-bump", Linger: time.Hour})
	ctx := testCtx(t)
	commitOne(t, ctx, p, "first")
	require.NoError(t, p.BeginTransaction())
	f := p.Send(ctx, &Record{Topic: "t", Value: []byte("second")}) // open until the commit's flush
	require.NoError(t, p.txnSink.callIO(ctx, func() {
		p.txnSink.idem.needBump = true
		p.txn.state.Store(int32(txnCommitting)) // as CommitTransaction's transition
	}))
	require.NoError(t, p.CommitTransaction(ctx))
	_, err := f.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"first", "second"}, committedValues(t, c, "t", 1)[0])
}

// TestTxnV2RecreatedTopicGetsNoInFlightBatch: under transaction version 2
// a transactional producer sends Produce v13 (by topic id), so its batch
// in flight while the topic is deleted and recreated under the same name
// fails with UNKNOWN_TOPIC_ID instead of landing in the new topic. At
// Produce v12, by name, the broker wrote it into the new topic.
func TestTxnV2RecreatedTopicGetsNoInFlightBatch(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: 2})
	require.NoError(t, c.CreateTopic("t", 1))
	w := logTxnRequests(c)
	p := newProducer(t, c, Config{TransactionalID: "recreated", Linger: time.Millisecond,
		DeliveryTimeout: 30 * time.Second, RequestTimeout: 20 * time.Second, MetadataMaxAge: 100 * time.Millisecond})
	ctx := testCtx(t)
	commitOne(t, ctx, p, "before")
	old := oldID(t, p, "t")
	unstall := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, Stall: true})
	defer unstall()
	require.NoError(t, p.BeginTransaction())
	f := p.Send(ctx, &Record{Topic: "t", Partition: 0, ExplicitPartition: true, Value: []byte("in flight")})
	require.True(t, waitFor(5*time.Second, func() bool {
		n := 0
		_ = p.txnSink.callIO(ctx, func() { n = len(p.txnSink.topics["t"].parts[0].inflight) })
		return n > 0
	}), "the batch not in flight")
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 1))
	waitTopicID(t, p, "t", old)
	unstall()
	_, err := f.Wait(ctx)
	require.ErrorIs(t, err, kerr.UnknownTopicID)
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	require.Zero(t, hw, "the recreated topic got the transaction's batch")
	require.NoError(t, p.AbortTransaction(ctx))
	n := w.counts()
	require.Zero(t, n["Produce v11"]+n["Produce v12"], "%v", n)
	require.Positive(t, n["Produce v13"], "%v", n)
}
