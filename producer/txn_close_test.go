package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// Close ends the transaction it finds, as Java's producer does: an open
// one is aborted (records sent are behind an abort marker, records not
// sent fail with ErrTransactionAborted), and a commit left in progress is
// finished. Without it the coordinator keeps the transaction Ongoing until
// its timeout, and read_committed consumers stall behind it.
func TestCloseEndsOpenTransaction(t *testing.T) {
	sendAcked := func(t *testing.T, p *Producer, _ *testbroker.Cluster) *Future {
		f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("rec")})
		_, err := f.Wait(context.Background())
		require.NoError(t, err)
		return f
	}
	for _, tc := range []struct {
		name   string
		linger time.Duration
		// run sends a record "rec" in the transaction and leaves the
		// transaction as Close finds it.
		run     func(t *testing.T, p *Producer, c *testbroker.Cluster) *Future
		wantErr error // the record's outcome
		// wantCommit is the marker after "rec"; nil: "rec" is not written.
		wantCommit *bool
		wantState  []string // the coordinator's state after Close, one of ("": unknown id)
	}{
		{
			name:       "open, record acknowledged",
			linger:     time.Millisecond,
			run:        sendAcked,
			wantCommit: new(false),
			wantState:  []string{"CompleteAbort"},
		},
		{
			name:   "open, record never sent",
			linger: time.Hour,
			run: func(_ *testing.T, p *Producer, _ *testbroker.Cluster) *Future {
				return p.Send(context.Background(), &Record{Topic: "t", Value: []byte("rec")})
			},
			wantErr: ErrTransactionAborted,
			// No partition was added: the coordinator never heard of the
			// transaction (or of the producer: ""), or aborted it.
			wantState: []string{"", "Empty", "CompleteAbort"},
		},
		{
			name:   "abortable",
			linger: time.Millisecond,
			run: func(t *testing.T, p *Producer, c *testbroker.Cluster) *Future {
				f := sendAcked(t, p, c)
				setState(p, txnAbortable)
				return f
			},
			wantCommit: new(false),
			wantState:  []string{"CompleteAbort"},
		},
		{
			name:   "commit left in progress",
			linger: time.Millisecond,
			run: func(t *testing.T, p *Producer, c *testbroker.Cluster) *Future {
				c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, Delay: 500 * time.Millisecond})
				f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("rec")})
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				require.ErrorIs(t, p.CommitTransaction(ctx), context.DeadlineExceeded)
				return f
			},
			wantCommit: new(true),
			wantState:  []string{"CompleteCommit"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			p := newProducer(t, c, Config{TransactionalID: "tx", Linger: tc.linger})
			require.NoError(t, p.BeginTransaction())
			f := tc.run(t, p, c)
			require.NoError(t, p.Close(context.Background()))
			_, err := f.Wait(context.Background())
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			st, _, _, _ := c.TransactionState("tx")
			require.Contains(t, tc.wantState, st)
			recs, err := c.Records("t", 0)
			require.NoError(t, err)
			commit, ok := markerAfter(recs, "rec")
			if tc.wantCommit == nil {
				require.Empty(t, recs, "nothing of the transaction is written")
				return
			}
			require.True(t, ok, "a marker follows the transaction's record")
			require.Equal(t, *tc.wantCommit, commit)
		})
	}
}

func coordinatorState(c *testbroker.Cluster) string {
	st, _, _, _ := c.TransactionState("tx")
	return st
}

// A Send refused with ErrClosed while Close finishes a commit left in
// progress does not make the transaction abortable (it did: Close then
// neither committed nor aborted, and the coordinator stayed Ongoing).
func TestCloseFinishesCommitDespiteRefusedSends(t *testing.T) {
	bg := context.Background()
	c, p := beginTxn(t, Config{}, true)
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, Delay: 800 * time.Millisecond})
	f := p.Send(bg, &Record{Topic: "t", Value: []byte("rec")})
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.CommitTransaction(ctx), context.DeadlineExceeded)
	done := make(chan error, 1)
	go func() { done <- p.Close(bg) }()
	for !p.closed.Load() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	_, err := p.Send(bg, &Record{Topic: "t", Value: []byte("late")}).Wait(bg)
	require.ErrorIs(t, err, ErrClosed)
	cerr := <-done
	_, ferr := f.Wait(bg)
	t.Logf("Close: %v; record: %v; coordinator: %q", cerr, ferr, coordinatorState(c))
	require.NoError(t, cerr)
	require.Equal(t, "CompleteCommit", coordinatorState(c))
}

// Close while SendOffsetsToTransaction runs on another goroutine waits for
// it, then aborts the transaction it leaves open (it used to skip the
// abort, leaving the coordinator Ongoing).
func TestCloseDuringSendOffsetsAbortsAfterIt(t *testing.T) {
	forEachTxnVersion(t, func(t *testing.T, level int16) {
		bg := context.Background()
		c, p := beginTxnAt(t, level, Config{}, true)
		_, err := p.Send(bg, &Record{Topic: "t", Value: []byte("rec")}).Wait(bg)
		require.NoError(t, err)
		arrived := requestArrived(c, addsGroupKey(level), 500*time.Millisecond)
		so := make(chan error, 1)
		go func() {
			so <- p.SendOffsetsToTransaction(bg, map[string]map[int32]TxnOffset{"t": {0: {Offset: 1, LeaderEpoch: -1}}}, GroupMetadata{GroupID: "g"})
		}()
		require.Eventually(t, arrived, 5*time.Second, time.Millisecond)
		cerr := p.Close(bg)
		t.Logf("Close: %v; SendOffsets: %v; coordinator: %q", cerr, <-so, coordinatorState(c))
		require.Equal(t, "CompleteAbort", coordinatorState(c))
	})
}

// Close while CommitTransaction waits for EndTxn on another goroutine
// waits for it: the commit succeeds (it used to race Close's teardown).
func TestCloseDuringCommitWaitsForEndTxn(t *testing.T) {
	bg := context.Background()
	c, p := beginTxn(t, Config{}, true)
	_, err := p.Send(bg, &Record{Topic: "t", Value: []byte("rec")}).Wait(bg)
	require.NoError(t, err)
	arrived := requestArrived(c, 26, 500*time.Millisecond)
	cm := make(chan error, 1)
	go func() { cm <- p.CommitTransaction(bg) }()
	require.Eventually(t, arrived, 5*time.Second, time.Millisecond)
	cerr := p.Close(bg)
	cmErr := <-cm
	time.Sleep(600 * time.Millisecond)
	t.Logf("Close: %v; Commit: %v; coordinator: %q", cerr, cmErr, coordinatorState(c))
	require.NoError(t, cmErr)
}

// Close with a coordinator that keeps answering AddPartitionsToTxn
// (transaction version 1) with a retriable error returns by
// TransactionTimeout, not only when its ctx
// ends (the abort would wait for the add forever), and says why.
func TestCloseBoundedByTransactionTimeout(t *testing.T) {
	bg := context.Background()
	c, p := beginTxnAt(t, 1, Config{RequestTimeout: time.Second, DeliveryTimeout: 2 * time.Second, TransactionTimeout: 1500 * time.Millisecond}, false)
	var adds atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{24}, ErrorCode: 14, // AddPartitionsToTxn: COORDINATOR_LOAD_IN_PROGRESS, forever
		Match: func(int32, kmsg.Request) bool { adds.Add(1); return true }})
	require.NoError(t, p.BeginTransaction())
	f := p.Send(bg, &Record{Topic: "t", Value: []byte("rec")})
	require.Eventually(t, func() bool { return adds.Load() > 0 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	err := p.Close(bg)
	require.Less(t, time.Since(start), 5*time.Second)
	// Said as such, not as context.DeadlineExceeded: the caller's ctx did
	// not end.
	require.Error(t, err)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "TransactionTimeout")
	_, ferr := f.Wait(bg)
	require.Error(t, ferr)
}

// Close while CommitTransaction waits for its records on another goroutine
// lets the commit finish.
func TestCloseDuringCommitWaitingForRecords(t *testing.T) {
	bg := context.Background()
	c, p := beginTxn(t, Config{}, true)
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, Delay: 500 * time.Millisecond})
	f := p.Send(bg, &Record{Topic: "t", Value: []byte("rec")})
	cm := make(chan error, 1)
	go func() { cm <- p.CommitTransaction(bg) }()
	require.Eventually(t, func() bool { return p.txn.load() == txnCommitting }, 5*time.Second, time.Millisecond)
	cerr := p.Close(bg)
	cmErr := <-cm
	_, ferr := f.Wait(bg)
	t.Logf("Close: %v; Commit: %v; record: %v; coordinator: %q", cerr, cmErr, ferr, coordinatorState(c))
	require.NoError(t, cmErr)
	require.Equal(t, "CompleteCommit", coordinatorState(c))
}

// A commit left in progress whose record then fails (an abortable error)
// cannot succeed: Close aborts it, and says so with ErrTransactionAborted
// (not with the abortable error, which asks for an AbortTransaction that
// Close already made).
func TestCloseAbortsACommitThatCannotSucceed(t *testing.T) {
	bg := context.Background()
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{TransactionalID: "tx", Linger: time.Millisecond})
	epochs := recordTxnEpochs(c)
	require.NoError(t, p.BeginTransaction())
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, Delay: 300 * time.Millisecond, ErrorCode: 29}) // TOPIC_AUTHORIZATION_FAILED
	f := p.Send(bg, &Record{Topic: "t", Value: []byte("rec")})
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.CommitTransaction(ctx), context.DeadlineExceeded)
	err := p.Close(bg)
	require.ErrorIs(t, err, ErrTransactionAborted)
	require.False(t, IsAbortable(err), "%v", err)
	_, ferr := f.Wait(bg)
	require.Error(t, ferr)
	// Aborted; the failed batch's sequence then asks for an epoch bump
	// (InitProducerId), which may run before the producer stops: Empty.
	require.Contains(t, []string{"CompleteAbort", "Empty"}, coordinatorState(c), "requests: %v", epochs())
}

// beginTxn starts a one-broker cluster with topic "t" (1 partition) and a
// producer with transactional id "tx" (Linger 1 ms unless cfg says
// otherwise); begin opens its transaction.
func beginTxn(t *testing.T, cfg Config, begin bool) (*testbroker.Cluster, *Producer) {
	t.Helper()
	return beginTxnAt(t, 0, cfg, begin)
}

// beginTxnAt is beginTxn with the cluster at transaction version level (0:
// the test broker's default, 2).
func beginTxnAt(t *testing.T, level int16, cfg Config, begin bool) (*testbroker.Cluster, *Producer) {
	t.Helper()
	c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: level})
	require.NoError(t, c.CreateTopic("t", 1))
	cfg.TransactionalID = "tx"
	if cfg.Linger == 0 {
		cfg.Linger = time.Millisecond
	}
	p := newProducer(t, c, cfg)
	if begin {
		require.NoError(t, p.BeginTransaction())
	}
	return c, p
}

// requestArrived delays the first request of API key key that c receives
// by delay, and returns a function that reports whether it arrived: a
// transaction method sending it is then running, holding its lock.
func requestArrived(c *testbroker.Cluster, key int16, delay time.Duration) func() bool {
	var n atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{key}, Times: 1, Delay: delay,
		Match: func(int32, kmsg.Request) bool { n.Add(1); return true }})
	return func() bool { return n.Load() > 0 }
}
