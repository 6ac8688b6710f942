package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/kerr"
)

// newUnreachableTxnProducer is a transactional producer whose brokers never
// answer: the state machine runs without a network.
func newUnreachableTxnProducer(t *testing.T) *Producer {
	t.Helper()
	p, err := New(Config{Brokers: []string{"127.0.0.1:1"}, TransactionalID: "tx-test", DialTimeout: 50 * time.Millisecond,
		RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// setState forces the state machine into st, with an error for the error
// states.
func setState(p *Producer, st txnState) {
	t := p.txn
	switch st {
	case txnAbortable:
		t.state.Store(int32(txnInTxn))
		t.fail(kerr.TopicAuthorizationFailed, false)
	case txnFatal:
		t.fail(fmt.Errorf("%w: test", ErrProducerFenced), true)
	default:
		t.state.Store(int32(st))
	}
}

func TestTransactionStateMachine(t *testing.T) {
	abortable := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		assert.True(t, IsAbortable(err), "abortable: %v", err)
		assert.False(t, IsFatal(err), "not fatal: %v", err)
		assert.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
	}
	fatal := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		assert.True(t, IsFatal(err), "fatal: %v", err)
		assert.False(t, IsAbortable(err), "not abortable: %v", err)
		assert.ErrorIs(t, err, ErrProducerFenced)
	}
	is := func(want error) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			t.Helper()
			assert.ErrorIs(t, err, want)
		}
	}
	ok := func(t *testing.T, err error) { t.Helper(); assert.NoError(t, err) }

	type check = func(*testing.T, error)
	tests := []struct {
		state                           txnState
		begin, send, commit, abort, off check
		after                           txnState // after Begin
	}{
		{txnUninit, ok, is(ErrNoTransaction), is(ErrNoTransaction), is(ErrNoTransaction), is(ErrNoTransaction), txnInTxn},
		{txnReady, ok, is(ErrNoTransaction), is(ErrNoTransaction), is(ErrNoTransaction), is(ErrNoTransaction), txnInTxn},
		{txnInTxn, is(ErrTransactionInProgress), nil, nil, nil, nil, txnInTxn},
		{txnAbortable, abortable, abortable, abortable, nil, abortable, txnAbortable},
		{txnFatal, fatal, fatal, fatal, fatal, fatal, txnFatal},
	}
	for _, tt := range tests {
		t.Run(tt.state.String(), func(t *testing.T) {
			p := newUnreachableTxnProducer(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			setState(p, tt.state)
			if tt.send != nil {
				_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}).Wait(ctx)
				tt.send(t, err)
				assert.Zero(t, bufferUsed(p), "a refused record takes no memory")
			}
			if tt.commit != nil {
				tt.commit(t, p.CommitTransaction(ctx))
				assert.Equal(t, tt.state, p.txn.load(), "a refused Commit changes nothing")
			}
			if tt.abort != nil {
				tt.abort(t, p.AbortTransaction(ctx))
				assert.Equal(t, tt.state, p.txn.load(), "a refused Abort changes nothing")
			}
			if tt.off != nil {
				tt.off(t, p.SendOffsetsToTransaction(ctx, nil, GroupMetadata{GroupID: "g"}))
			}
			tt.begin(t, p.BeginTransaction())
			assert.Equal(t, tt.after, p.txn.load())
		})
	}
}

// TestTransactionEmpty: a transaction without records or offsets commits
// and aborts without the coordinator (there is nothing to end), even when
// no broker is reachable, and the producer is ready again.
func TestTransactionEmpty(t *testing.T) {
	p := newUnreachableTxnProducer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.BeginTransaction())
	require.NoError(t, p.CommitTransaction(ctx))
	assert.Equal(t, txnReady, p.txn.load())
	require.NoError(t, p.BeginTransaction())
	require.NoError(t, p.AbortTransaction(ctx))
	assert.Equal(t, txnReady, p.txn.load())
}

// TestTransactionAbortFailsUnsent: records of a transaction that cannot be
// sent (no broker) fail with ErrTransactionAborted on Abort, each once, and
// take their memory back; a record failing inside a transaction makes it
// abortable, so Commit refuses.
func TestTransactionAbortFailsUnsent(t *testing.T) {
	p := newUnreachableTxnProducer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.BeginTransaction())
	var futs []*Future
	for i := range 50 {
		futs = append(futs, p.Send(ctx, &Record{Topic: "t", Value: fmt.Appendf(nil, "%d", i)}))
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	err := p.CommitTransaction(short)
	cancelShort()
	require.ErrorIs(t, err, context.DeadlineExceeded, "Commit waits for the records")
	require.ErrorIs(t, p.AbortTransaction(ctx), ErrTransactionInProgress, "no abort during a commit")
	assert.Equal(t, txnCommitting, p.txn.load())

	// The commit resumes; a failed record makes it abortable.
	p.txn.recordFailed(kerr.TopicAuthorizationFailed)
	err = p.CommitTransaction(ctx)
	require.True(t, IsAbortable(err), "%v", err)
	require.NoError(t, p.AbortTransaction(ctx))
	for i, f := range futs {
		_, err := f.Wait(ctx)
		require.ErrorIs(t, err, ErrTransactionAborted, "record %d", i)
	}
	assert.Zero(t, p.Metrics().Producer.BufferedRecords)
	assert.Equal(t, txnReady, p.txn.load())
	require.NoError(t, p.BeginTransaction())
}

func TestTransactionNotTransactional(t *testing.T) {
	p, err := New(Config{Brokers: []string{"127.0.0.1:1"}})
	require.NoError(t, err)
	defer p.Close(context.Background())
	ctx := context.Background()
	for name, err := range map[string]error{
		"Begin":       p.BeginTransaction(),
		"Commit":      p.CommitTransaction(ctx),
		"Abort":       p.AbortTransaction(ctx),
		"SendOffsets": p.SendOffsetsToTransaction(ctx, nil, GroupMetadata{GroupID: "g"}),
	} {
		assert.ErrorIs(t, err, ErrNoTransaction, name)
	}
}

func TestTransactionConfig(t *testing.T) {
	_, err := New(Config{Brokers: []string{"b:1"}, TransactionalID: "x", DisableIdempotence: true})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "TransactionalID")
	c, err := Config{Brokers: []string{"b:1"}, TransactionalID: "x"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 60*time.Second, c.TransactionTimeout)
}

func TestTransactionAfterClose(t *testing.T) {
	p := newUnreachableTxnProducer(t)
	require.NoError(t, p.BeginTransaction())
	require.NoError(t, p.Close(context.Background()))
	require.ErrorIs(t, p.BeginTransaction(), ErrClosed)
	require.ErrorIs(t, p.CommitTransaction(context.Background()), ErrClosed)
}

func TestClassifyTxn(t *testing.T) {
	for _, tt := range []struct {
		err   error
		fatal bool
		retry bool
	}{
		{kerr.ProducerFenced, true, false},
		{kerr.InvalidProducerEpoch, true, false},
		{kerr.TransactionalIDAuthorizationFailed, true, false},
		{kerr.ForCode(codeInvalidTxnState), true, false},
		{kerr.UnsupportedVersion, true, false},
		{kerr.TopicAuthorizationFailed, false, false},
		{kerr.ForCode(codeGroupAuthorizationFailed), false, false},
		{kerr.ForCode(codeIllegalGeneration), false, false},
		{kerr.ConcurrentTransactions, false, true},
		{kerr.ForCode(codeNotCoordinator), false, true},
		{kerr.ForCode(codeCoordinatorLoadInProgress), false, true},
		{kerr.ForCode(codeCoordinatorNotAvailable), false, true},
		{kerr.RequestTimedOut, false, true},
		{errors.New("connection reset"), false, true},
	} {
		te := classifyTxn("X", fmt.Errorf("wrapped: %w", tt.err))
		if tt.retry {
			assert.Nil(t, te, "%v is retried", tt.err)
			continue
		}
		require.NotNil(t, te, "%v", tt.err)
		assert.Equal(t, tt.fatal, te.fatal, "%v", tt.err)
		assert.Equal(t, tt.fatal, IsFatal(te), "%v", tt.err)
		assert.Equal(t, !tt.fatal, IsAbortable(te), "%v", tt.err)
	}
}

// TestTransactionRefusedRecordAborts: a record of the open transaction
// that Send refuses (too large) fails the commit, as in Java: the
// transaction would otherwise commit without it.
func TestTransactionRefusedRecordAborts(t *testing.T) {
	p := newUnreachableTxnProducer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "t", Value: make([]byte, 2<<20)}).Wait(ctx)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	err = p.CommitTransaction(ctx)
	require.True(t, IsAbortable(err), "%v", err)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	require.NoError(t, p.AbortTransaction(ctx))
	require.NoError(t, p.BeginTransaction())
}
