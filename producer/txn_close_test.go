package producer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
