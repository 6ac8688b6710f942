package producer

import (
	"context"
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

// A batch of transaction N expires in flight; Abort(N) sends EndTxn while
// the Produce is still in flight; transaction N+1 adds the same partition
// with the same epoch; the late Produce then lands in N+1 and commits.
func TestTxnLateProduceStaysOutOfNextTxn(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var produces atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 19}) // NOT_ENOUGH_REPLICAS: retried
	second := func(int32, kmsg.Request) bool { return produces.Add(1) == 1 }
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Match: second, Delay: 900 * time.Millisecond})
	p := newProducer(t, c, Config{TransactionalID: "tx", Linger: -1, RequestTimeout: time.Second, DeliveryTimeout: time.Second,
		RetryBackoff: 400 * time.Millisecond, RetryBackoffMax: 400 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("aborted-N")}).Wait(ctx)
	t.Logf("N's record: %v", err)
	require.Error(t, err)
	t.Logf("abort: %v", p.AbortTransaction(ctx))
	require.NoError(t, p.BeginTransaction())
	_, err = p.Send(ctx, &Record{Topic: "t", Value: []byte("committed-N+1")}).Wait(ctx)
	require.NoError(t, err, "N+1's record")
	require.NoError(t, p.CommitTransaction(ctx))
	recs, err := c.Records("t", 0)
	require.NoError(t, err)
	commit, ok := markerAfter(recs, "committed-N+1")
	require.True(t, ok, "N+1's record and a marker after it are in the log")
	require.True(t, commit, "N+1's record is committed by its marker")
	if commit, ok := markerAfter(recs, "aborted-N"); ok {
		require.False(t, commit, "the record of aborted transaction N was committed by N+1's marker")
	}
}

// The answer of an expired in-flight batch fails (a gap) around Abort(N):
// the epoch must be bumped before transaction N+1 sends, else the send
// gate holds N+1's records until they expire.
func TestTxnGapAfterAbortBumpsEpoch(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var produces atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 19})
	second := func(int32, kmsg.Request) bool { return produces.Add(1) == 1 }
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Match: second, Delay: 1500 * time.Millisecond})
	p := newProducer(t, c, Config{TransactionalID: "tx", Linger: -1, RequestTimeout: time.Second, DeliveryTimeout: time.Second,
		RetryBackoff: 400 * time.Millisecond, RetryBackoffMax: 400 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("aborted-N")}).Wait(ctx)
	t.Logf("N's record: %v", err)
	t.Logf("abort: %v", p.AbortTransaction(ctx))
	time.Sleep(600 * time.Millisecond) // the request times out: gap, needBump
	var nb bool
	var infl int
	require.NoError(t, p.txnSink.callIO(ctx, func() { nb, infl = p.txnSink.idem.needBump, p.txnSink.inflight }))
	t.Logf("needBump %v inflight %d", nb, infl)
	require.NoError(t, p.BeginTransaction())
	_, err = p.Send(ctx, &Record{Topic: "t", Value: []byte("N+1")}).Wait(ctx)
	t.Logf("N+1's record: %v", err)
	require.NoError(t, err, "N+1's record should go after an epoch bump")
}

// A gap found once no transaction is open (as the late answer of a batch
// of an aborted transaction would leave) bumps the epoch before the next
// transaction adds a partition, and that transaction then sends: the bump
// used to be decided only when the abort ended. At transaction version 2
// the commits bump the epoch too (EndTxn v5), and nothing is added
// explicitly.
func TestTxnBumpAfterLateGap(t *testing.T) {
	want := map[int16][]string{
		1: {"InitProducerId(-1)", "AddPartitionsToTxn(0)", "InitProducerId(0)", "AddPartitionsToTxn(1)"},
		2: {"InitProducerId(-1)", "InitProducerId(1)"},
	}
	forEachTxnVersion(t, func(t *testing.T, level int16) {
		c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: level})
		require.NoError(t, c.CreateTopic("t", 1))
		epochs := recordTxnEpochs(c)
		p := newProducer(t, c, Config{TransactionalID: "tx", Linger: -1, RequestTimeout: time.Second, DeliveryTimeout: 3 * time.Second})
		ctx := context.Background()
		for i := range 2 {
			if i == 1 {
				require.NoError(t, p.txnSink.callIO(ctx, func() { p.txnSink.idem.needBump = true }))
			}
			require.NoError(t, p.BeginTransaction())
			_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}).Wait(ctx)
			require.NoError(t, err, "transaction %d", i)
			require.NoError(t, p.CommitTransaction(ctx))
		}
		require.Equal(t, want[level], epochs())
	})
}

// A callback of a record Send refuses runs on Send's goroutine, counted in
// pending until it returns: AbortTransaction from it waits for itself.
func TestTxnAbortFromRejectCallback(t *testing.T) {
	p := newUnreachableTxnProducer(t)
	require.NoError(t, p.BeginTransaction())
	setState(p, txnAbortable)
	var abortErr error
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	p.SendCallback(ctx, &Record{Topic: "t", Value: []byte("v")}, func(_ RecordMetadata, err error) {
		abortErr = p.AbortTransaction(ctx)
	})
	t.Logf("abort from the callback: %v after %v", abortErr, time.Since(start))
	require.NoError(t, abortErr)
}

// Abort(N) ends with needBump set and a Produce still in flight: the bump
// waits for it, so it lands inside transaction N+1, after N+1 added its
// partition under the old epoch.
func TestTxnBumpBeforeNextTxnAdds(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 2})
	require.NoError(t, c.CreateTopic("a", 1))
	require.NoError(t, c.CreateTopic("b", 1))
	require.NoError(t, c.MoveLeader("a", 0, 0))
	require.NoError(t, c.MoveLeader("b", 0, 1))
	var produces atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Brokers: []int32{0}, Times: 1, ErrorCode: 19})
	second := func(int32, kmsg.Request) bool { return produces.Add(1) == 1 }
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Brokers: []int32{0}, Match: second, Delay: 900 * time.Millisecond})
	removeB := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Brokers: []int32{1}, ErrorCode: 19})
	p := newProducer(t, c, Config{TransactionalID: "tx", Linger: -1, RequestTimeout: time.Second, DeliveryTimeout: time.Second,
		RetryBackoff: 400 * time.Millisecond, RetryBackoffMax: 400 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, p.BeginTransaction())
	fa := p.Send(ctx, &Record{Topic: "a", Value: []byte("a-N")})
	fb := p.Send(ctx, &Record{Topic: "b", Value: []byte("b-N")})
	_, erra := fa.Wait(ctx)
	_, errb := fb.Wait(ctx)
	t.Logf("N: a %v; b %v", erra, errb)
	t.Logf("abort: %v", p.AbortTransaction(ctx))
	removeB()
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "b", Value: []byte("b-N+1")}).Wait(ctx)
	t.Logf("N+1's record: %v", err)
	cerr := p.CommitTransaction(ctx)
	t.Logf("commit: %v (abortable %v fatal %v)", cerr, IsAbortable(cerr), IsFatal(cerr))
	require.NoError(t, err)
	require.NoError(t, cerr)
}

// An epoch bump that must wait (a Produce still in flight, faked here)
// holds the open transaction's AddPartitionsToTxn: the bump goes first, and
// the partition is added under the new epoch. Added under the old one, the
// bump (InitProducerId with the current epoch) would have made the
// coordinator abort the transaction and fence the producer.
func TestTxnAddWaitsForDeferredBump(t *testing.T) {
	type want struct{ waiting, after []string }
	wants := map[int16]want{
		1: {[]string{"InitProducerId(-1)", "AddPartitionsToTxn(0)"}, []string{"InitProducerId(-1)", "AddPartitionsToTxn(0)", "InitProducerId(0)", "AddPartitionsToTxn(1)"}},
		// No explicit add; the commit's EndTxn v5 bumped to 1.
		2: {[]string{"InitProducerId(-1)"}, []string{"InitProducerId(-1)", "InitProducerId(1)"}},
	}
	forEachTxnVersion(t, func(t *testing.T, level int16) {
		c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: level})
		require.NoError(t, c.CreateTopic("t", 1))
		epochs := recordTxnEpochs(c)
		p := newProducer(t, c, Config{TransactionalID: "tx", Linger: -1, RequestTimeout: time.Second, DeliveryTimeout: 3 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, p.BeginTransaction())
		_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}).Wait(ctx)
		require.NoError(t, err)
		require.NoError(t, p.CommitTransaction(ctx))
		s := p.txnSink
		require.NoError(t, s.callIO(ctx, func() { s.idem.needBump = true; s.inflight++ }))
		var faked atomic.Bool
		faked.Store(true)
		unfake := func() error {
			if !faked.Swap(false) {
				return nil
			}
			return s.callIO(ctx, func() { s.inflight-- })
		}
		t.Cleanup(func() { _ = unfake() }) // before Close, which waits for it
		require.NoError(t, p.BeginTransaction())
		f := p.Send(ctx, &Record{Topic: "t", Value: []byte("v")})
		time.Sleep(300 * time.Millisecond)
		t.Logf("waiting: %v", epochs())
		require.Equal(t, wants[level].waiting, epochs(), "nothing is added while the bump waits")
		require.NoError(t, unfake())
		_, err = f.Wait(ctx)
		require.NoError(t, err)
		require.NoError(t, p.CommitTransaction(ctx))
		require.Equal(t, wants[level].after, epochs())
	})
}

// The abort fails a record parked for a topic the cluster does not have,
// and unparks the topic: HookTopicUnparked reports the record.
func TestTxnAbortUnparksParkedRecords(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	h := newRecordingHook()
	p := newProducer(t, c, Config{TransactionalID: "tx", Hooks: []Hook{h}, MaxBlock: time.Minute, DeliveryTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.BeginTransaction())
	f := p.Send(ctx, &Record{Topic: "missing", Value: []byte("v")})
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, p.AbortTransaction(ctx))
	_, err := f.Wait(ctx)
	require.ErrorIs(t, err, ErrTransactionAborted)
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.unparked) == 1
	}, 5*time.Second, 10*time.Millisecond)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, []string{"missing"}, h.parked)
	require.Equal(t, 1, h.unparked[0].Records)
	require.ErrorIs(t, h.unparked[0].Err, ErrTransactionAborted)
}

// recordTxnEpochs records the InitProducerId and AddPartitionsToTxn
// requests c receives, with the producer epoch each carries, and returns a
// function that gives them so far, in order.
func recordTxnEpochs(c *testbroker.Cluster) func() []string {
	var mu sync.Mutex
	var reqs []string
	c.Intercept(testbroker.Interceptor{Keys: []int16{22, 24}, Match: func(_ int32, r kmsg.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		switch r := r.(type) {
		case *kmsg.InitProducerIDRequest:
			reqs = append(reqs, fmt.Sprintf("InitProducerId(%d)", r.ProducerEpoch))
		case *kmsg.AddPartitionsToTxnRequest:
			reqs = append(reqs, fmt.Sprintf("AddPartitionsToTxn(%d)", r.ProducerEpoch))
		}
		return false
	}})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(reqs)
	}
}

// markerAfter finds the last data record with value in recs and reports
// whether the first control record after it commits (ok: both exist).
func markerAfter(recs []testbroker.Record, value string) (commit, ok bool) {
	at := -1
	for i, r := range recs {
		if string(r.Value) == value && !r.Control {
			at = i
		}
	}
	if at < 0 {
		return false, false
	}
	for _, r := range recs[at+1:] {
		if r.Control {
			return r.Key[len(r.Key)-1] == 1, true // the key's type: 0 abort, 1 commit
		}
	}
	return false, false
}
