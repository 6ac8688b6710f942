package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestAddPartitionsMissingFromAnswerAreNotAdded: an AddPartitionsToTxn
// answer that leaves out a partition of the request (a partial answer) is
// not success for that partition: the request is retried, and the
// partition's batches wait for an answer naming it. It used to be read as
// success for every partition asked for, so they were sent although the
// coordinator never confirmed them. (Here the coordinator did add it and
// only the answer is cut, so the test watches the requests: a Produce to
// the partition goes out with no AddPartitionsToTxn answer naming it.) A
// coordinator that did not add it makes a broker without KIP-890
// verification write the batch with no marker ever following it: a hanging
// transaction, read_committed consumers stalled behind it. Java adds only
// the partitions of the answer (AddPartitionsToTxnHandler: partitionsInTransaction.addAll(errors.keySet())).
func TestAddPartitionsMissingFromAnswerAreNotAdded(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: 1}) // AddPartitionsToTxn's flow
	require.NoError(t, c.CreateTopic("t", 2))
	var mu sync.Mutex
	var events []string
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Match: func(_ int32, r kmsg.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range r.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				events = append(events, fmt.Sprintf("Produce t[%d]", rp.Partition))
			}
		}
		return false
	}})
	// Both partitions are queued before the id arrives: one add asks for both.
	c.Intercept(testbroker.Interceptor{Keys: []int16{22}, Times: 1, Delay: 200 * time.Millisecond})
	c.Intercept(testbroker.Interceptor{Keys: []int16{24}, After: true, Rewrite: func(r kmsg.Response) {
		mu.Lock()
		defer mu.Unlock()
		resp := r.(*kmsg.AddPartitionsToTxnResponse)
		for i := range resp.Topics {
			ps := resp.Topics[i].Partitions[:0]
			for _, p := range resp.Topics[i].Partitions {
				if p.Partition != 1 || slices.Contains(events, "answered t[0]") {
					ps = append(ps, p) // only the first answer leaves t[1] out
				}
			}
			resp.Topics[i].Partitions = ps
			for _, p := range ps {
				events = append(events, fmt.Sprintf("answered t[%d]", p.Partition))
			}
		}
	}})
	p := newProducer(t, c, Config{TransactionalID: "tx", Linger: 10 * time.Millisecond, RequestTimeout: time.Second, DeliveryTimeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.BeginTransaction())
	f0 := p.Send(ctx, &Record{Topic: "t", Partition: 0, ExplicitPartition: true, Value: []byte("p0")})
	f1 := p.Send(ctx, &Record{Topic: "t", Partition: 1, ExplicitPartition: true, Value: []byte("p1")})
	_, err0 := f0.Wait(ctx)
	_, err1 := f1.Wait(ctx)
	t.Logf("records: %v, %v; commit: %v", err0, err1, p.CommitTransaction(ctx))
	mu.Lock()
	defer mu.Unlock()
	t.Logf("requests: %v", events)
	at := slices.Index(events, "Produce t[1]")
	require.GreaterOrEqual(t, at, 0, "t[1] was produced to")
	require.Contains(t, events[:at], "answered t[1]", "Produce to t[1] before any AddPartitionsToTxn answer confirmed t[1]")
}

// TestSendOffsetsTimeoutStillEndsCoordinatorTxn: SendOffsetsToTransaction
// whose ctx ends while AddOffsetsToTxn (transaction version 1) or
// TxnOffsetCommit (version 2, which adds the group itself) is in flight
// returns ctx.Err(), but the coordinator may have added the group and
// opened the transaction (Ongoing). The outcome is unknown, so the
// producer records that the transaction may have started
// (txnIO.maybeStarted) and its Commit or Abort sends EndTxn. It used to
// record the start only after a successful answer, so a Commit of that
// transaction without records skipped EndTxn and returned nil while the
// coordinator kept it Ongoing until TransactionTimeout, whose abort then
// fenced the next transaction.
func TestSendOffsetsTimeoutStillEndsCoordinatorTxn(t *testing.T) {
	forEachTxnVersion(t, func(t *testing.T, level int16) {
		c, p := beginTxnAt(t, level, Config{TransactionTimeout: time.Second}, false)
		ctx := testCtx(t)
		sendOffsetsTimesOut(t, c, p, ctx, testbroker.Interceptor{Keys: []int16{addsGroupKey(level)}, After: true, Times: 1, Delay: 400 * time.Millisecond})
		time.Sleep(500 * time.Millisecond) // the coordinator has handled it
		t.Logf("coordinator after the timed-out SendOffsets: %s", coordinatorState(c))
		require.NoError(t, p.CommitTransaction(ctx))
		require.NotEqual(t, "Ongoing", coordinatorState(c), "CommitTransaction returned nil but the coordinator's transaction is still open (no EndTxn)")
	})
}

// forEachTxnVersion runs f as a subtest at transaction versions 1 and 2
// (the test broker's finalized transaction.version).
func forEachTxnVersion(t *testing.T, f func(t *testing.T, level int16)) {
	for _, level := range []int16{1, 2} {
		t.Run(fmt.Sprintf("transaction version %d", level), func(t *testing.T) { f(t, level) })
	}
}

// addsGroupKey is the API key of the request that adds a group to the
// transaction at a transaction version: AddOffsetsToTxn (25), or at 2
// TxnOffsetCommit (28) itself.
func addsGroupKey(level int16) int16 {
	if level >= 2 {
		return 28
	}
	return 25
}

// sendOffsetsTimesOut commits a first transaction (the producer gets its
// id), then, with intercept set, begins a second one whose
// SendOffsetsToTransaction (for group "g") ends by its ctx, 100 ms in,
// while the request adding the group is out.
func sendOffsetsTimesOut(t *testing.T, c *testbroker.Cluster, p *Producer, ctx context.Context, intercept testbroker.Interceptor) {
	t.Helper()
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}).Wait(ctx)
	require.NoError(t, err)
	require.NoError(t, p.CommitTransaction(ctx))

	c.Intercept(intercept)
	require.NoError(t, p.BeginTransaction())
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = p.SendOffsetsToTransaction(short, map[string]map[int32]TxnOffset{"t": {0: {Offset: 1, LeaderEpoch: -1}}}, GroupMetadata{GroupID: "g"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// testCtx is a context for one test, cancelled when it ends, at most 10 s.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSendOffsetsTimeoutDoesNotFenceNextTransaction is the consequence of
// TestSendOffsetsTimeoutStillEndsCoordinatorTxn: a transaction left open
// at the coordinator would time out there, be aborted with an epoch bump,
// and fence the producer's next transaction.
func TestSendOffsetsTimeoutDoesNotFenceNextTransaction(t *testing.T) {
	forEachTxnVersion(t, func(t *testing.T, level int16) {
		c, p := beginTxnAt(t, level, Config{TransactionTimeout: time.Second, RequestTimeout: time.Second, DeliveryTimeout: 3 * time.Second}, false)
		ctx := testCtx(t)
		sendOffsetsTimesOut(t, c, p, ctx, testbroker.Interceptor{Keys: []int16{addsGroupKey(level)}, After: true, Times: 1, Delay: 400 * time.Millisecond})
		require.NoError(t, p.AbortTransaction(ctx))
		time.Sleep(1500 * time.Millisecond) // past TransactionTimeout: the coordinator aborts with a bump
		require.NoError(t, p.BeginTransaction())
		_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("next")}).Wait(ctx)
		cerr := p.CommitTransaction(ctx)
		t.Logf("next transaction: record %v; commit %v (fatal %v)", err, cerr, IsFatal(cerr))
		require.NoError(t, err, "the next transaction's record")
		require.False(t, errors.Is(cerr, ErrProducerFenced), "fenced: %v", cerr)
		require.NoError(t, cerr)
	})
}

// TestAbortWithSendBlockedOnMemoryKeepsPoolUsable: with BufferMemory equal
// to BatchSize, a partition's last batch had grown to the whole pool, and
// the next batch started as large (Accumulator.bufferFor): it took every
// byte, and its first bookkeeping charge then waited MaxBlock with
// nothing left to free, so every Send failed with ErrBufferExhausted
// (here after an abort that failed a Send blocked on memory). A new batch
// now starts at most at the pool's size less that charge.
func TestAbortWithSendBlockedOnMemoryKeepsPoolUsable(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{TransactionalID: "tx", Linger: time.Hour, BufferMemory: 8192, BatchSize: 8192,
		MaxBlock: time.Second, DeliveryTimeout: 2 * time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.BeginTransaction())
	for range 3 {
		p.Send(ctx, &Record{Topic: "t", Value: make([]byte, 1000)})
	}
	blocked := make(chan *Future)
	go func() { blocked <- p.Send(ctx, &Record{Topic: "t", Value: make([]byte, 6000)}) }()
	time.Sleep(200 * time.Millisecond) // the Send waits for memory
	require.NoError(t, p.AbortTransaction(ctx))
	_, err := (<-blocked).Wait(ctx)
	require.ErrorIs(t, err, ErrTransactionAborted)
	require.Eventually(t, func() bool { return bufferUsed(p) == 0 }, 5*time.Second, 5*time.Millisecond, "the aborted records' memory returns")
	require.NoError(t, p.BeginTransaction())
	wctx, wcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer wcancel()
	_, err = p.Send(ctx, &Record{Topic: "t", Value: []byte("next")}).Wait(wctx)
	require.NotErrorIs(t, err, ErrBufferExhausted, "the pool lost its memory: %v", err)
}

// TestSendOffsetsTimeoutBeforeTheCoordinatorCommitsCleanly: when the
// AddOffsetsToTxn whose ctx ended never reached the coordinator, the
// EndTxn that Commit sends anyway (the transaction may have started) finds
// no transaction (INVALID_TXN_STATE), which means there is nothing to end:
// Commit succeeds and the producer goes on.
func TestSendOffsetsTimeoutBeforeTheCoordinatorCommitsCleanly(t *testing.T) {
	forEachTxnVersion(t, testSendOffsetsTimeoutBeforeTheCoordinatorCommitsCleanly)
}

func testSendOffsetsTimeoutBeforeTheCoordinatorCommitsCleanly(t *testing.T, level int16) {
	c, p := beginTxnAt(t, level, Config{}, false)
	ctx := testCtx(t)
	// Held before the coordinator sees it, then dropped: never handled.
	sendOffsetsTimesOut(t, c, p, ctx, testbroker.Interceptor{Keys: []int16{addsGroupKey(level)}, Times: 1, Delay: 400 * time.Millisecond, ErrorCode: 15})
	time.Sleep(500 * time.Millisecond)
	require.NotEqual(t, "Ongoing", coordinatorState(c), "the request adding the group must not have reached the coordinator")
	// Kafka answers an EndTxn without a transaction open INVALID_TXN_STATE
	// (or, the same as the last one ended, success: a retry), here forced.
	var ends atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{26}, After: true, Times: 1, Rewrite: func(resp kmsg.Response) {
		ends.Add(1)
		resp.(*kmsg.EndTxnResponse).ErrorCode = 48 // INVALID_TXN_STATE
	}})
	require.NoError(t, p.CommitTransaction(ctx), "EndTxn finding no transaction is nothing to end")
	require.Equal(t, int32(1), ends.Load(), "Commit sends EndTxn: the transaction may have started")
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("next")}).Wait(ctx)
	require.NoError(t, err)
	require.NoError(t, p.CommitTransaction(ctx))
}
