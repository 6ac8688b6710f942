package testbroker

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newTxnProducerV2 is a transactional producer of transaction version 2:
// Produce v12 and EndTxn and TxnOffsetCommit v5.
func newTxnProducerV2(t *testing.T, c *Cluster, id string) *txnProducer {
	p := newTxnProducer(t, c, id)
	p.version, p.produceVersion = 5, 12
	return p
}

// TestTxnV2StateMachine walks the coordinator through KIP-890 part 2 as
// Kafka 4.4 answers it (checked against a real broker): Produce v12 adds
// its partition, EndTxn v5 bumps the epoch at every commit or abort, its
// retry with the old epoch gets the same answer, an empty abort bumps too,
// a commit without a transaction is INVALID_TXN_STATE, and older Produce
// versions to a partition not added get INVALID_TXN_STATE (before v11) or
// TRANSACTION_ABORTABLE (v11).
func TestTxnV2StateMachine(t *testing.T) {
	type step struct {
		name  string
		do    func(p *txnProducer) int16
		code  int16
		state string
		epoch int16 // the producer's epoch after the step
	}
	var (
		init     = func(p *txnProducer) int16 { return p.init() }
		produce0 = func(p *txnProducer) int16 { return p.produce(0, 2) }
		commit   = func(p *txnProducer) int16 { return p.end(true) }
		abort    = func(p *txnProducer) int16 { return p.end(false) }
		// retry sends EndTxn again with the epoch before the last bump.
		retry = func(commit bool) func(p *txnProducer) int16 {
			return func(p *txnProducer) int16 { p.epoch--; return p.end(commit) }
		}
		at = func(v int16, f func(*txnProducer) int16) func(*txnProducer) int16 {
			return func(p *txnProducer) int16 {
				old := p.produceVersion
				p.produceVersion = v
				defer func() { p.produceVersion = old }()
				return f(p)
			}
		}
		endV4 = func(commit bool) func(p *txnProducer) int16 {
			return func(p *txnProducer) int16 { p.version = 4; defer func() { p.version = 5 }(); return p.end(commit) }
		}
		offsets = func(p *txnProducer) int16 { return p.commitOffset("g", -1, "", 0, 7) }
		wait    = func(state string) func(p *txnProducer) int16 {
			return func(p *txnProducer) int16 { p.waitState(state); return 0 }
		}
	)
	cases := []struct {
		name  string
		delay time.Duration
		steps []step
	}{
		{"commit bumps", 0, []step{
			{"init", init, 0, "Empty", 0},
			{"produce adds", produce0, 0, "Ongoing", 0},
			{"produce again", produce0, 0, "Ongoing", 0},
			{"commit", commit, 0, "CompleteCommit", 1},
			{"commit retried", retry(true), 0, "CompleteCommit", 1},
			{"abort retried", retry(false), ecInvalidTxnState, "CompleteCommit", 0},
		}},
		{"next transaction", 0, []step{
			{"init", init, 0, "Empty", 0},
			{"produce", produce0, 0, "Ongoing", 0},
			{"commit", commit, 0, "CompleteCommit", 1},
			{"commit without a transaction", commit, ecInvalidTxnState, "CompleteCommit", 1},
			{"produce under the new epoch", produce0, 0, "Ongoing", 1},
			{"abort", abort, 0, "CompleteAbort", 2},
			{"abort retried", retry(false), 0, "CompleteAbort", 2},
			{"commit retried", retry(true), ecInvalidTxnState, "CompleteAbort", 1},
		}},
		{"empty abort", 0, []step{
			{"init", init, 0, "Empty", 0},
			{"commit", commit, ecInvalidTxnState, "Empty", 0},
			{"abort", abort, 0, "CompleteAbort", 1},
			{"abort retried", retry(false), 0, "CompleteAbort", 1},
			{"abort again", abort, 0, "CompleteAbort", 2},
		}},
		{"old epochs fenced", 0, []step{
			{"init", init, 0, "Empty", 0},
			{"init bumps", init, 0, "Empty", 1},
			{"abort, old epoch", retry(false), ecProducerFenced, "Empty", 0},
			{"produce", func(p *txnProducer) int16 { p.epoch++; return p.produce(0, 1) }, 0, "Ongoing", 1},
			{"end, old epoch", retry(true), ecProducerFenced, "Ongoing", 0},
			{"produce, old epoch", produce0, ecInvalidProducerEpoch, "Ongoing", 0},
			{"commit", func(p *txnProducer) int16 { p.epoch++; return p.end(true) }, 0, "CompleteCommit", 2},
			{"late batch of the old epoch", func(p *txnProducer) int16 { p.epoch--; return p.produce(0, 1) }, ecInvalidProducerEpoch, "CompleteCommit", 1},
		}},
		{"older produce versions", 0, []step{
			{"init", init, 0, "Empty", 0},
			{"v10 not added", at(10, produce0), ecInvalidTxnState, "Empty", 0},
			{"v11 not added", at(11, produce0), ecTransactionAbortable, "Empty", 0},
			{"v12 adds", produce0, 0, "Ongoing", 0},
			{"v11 once added", at(11, produce0), 0, "Ongoing", 0},
			{"EndTxn v4 keeps the epoch", endV4(true), 0, "CompleteCommit", 0},
		}},
		{"offsets", 0, []step{
			{"init", init, 0, "Empty", 0},
			{"TxnOffsetCommit v5 adds the group", offsets, 0, "Ongoing", 0},
			{"commit", commit, 0, "CompleteCommit", 1},
		}},
		{"prepare", 200 * time.Millisecond, []step{
			{"init", init, 0, "Empty", 0},
			{"produce", produce0, 0, "Ongoing", 0},
			{"commit", commit, 0, "PrepareCommit", 1},
			{"commit retried", retry(true), ecConcurrentTransactions, "PrepareCommit", 0},
			{"abort", func(p *txnProducer) int16 { p.epoch++; return p.end(false) }, ecConcurrentTransactions, "PrepareCommit", 1},
			{"produce cannot add yet", produce0, ecConcurrentTransactions, "PrepareCommit", 1},
			{"offsets cannot add yet", offsets, ecConcurrentTransactions, "PrepareCommit", 1},
			{"markers written", wait("CompleteCommit"), 0, "CompleteCommit", 1},
			{"produce", produce0, 0, "Ongoing", 1},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, Config{Brokers: 1, TransactionMarkerDelay: tc.delay})
			require.NoError(t, c.CreateTopic(txnTopic, 2))
			p := newTxnProducerV2(t, c, "v2")
			for _, s := range tc.steps {
				assert.Equal(t, s.code, s.do(p), "%s: code", s.name)
				assert.Equal(t, s.state, p.state(), "%s: state", s.name)
				assert.Equal(t, s.epoch, p.epoch, "%s: epoch", s.name)
			}
		})
	}
}

// TestTxnV2CommitIsReadCommitted: records added by Produce v12 and offsets
// added by TxnOffsetCommit v5 become visible together at the EndTxn v5
// commit; an aborted transaction's records never are.
func TestTxnV2CommitIsReadCommitted(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 1))
	p := newTxnProducerV2(t, c, "v2-rc")
	require.Zero(t, p.init())
	require.Zero(t, p.produce(0, 3))
	require.Zero(t, p.commitOffset("g", -1, "", 0, 3))
	f := fetchCommitted(t, p.w, 0, 0)
	assert.Equal(t, int64(0), f.LastStableOffset, "open")
	_, ok := c.CommittedOffset("g", txnTopic, 0)
	assert.False(t, ok, "offsets pending")
	require.Zero(t, p.end(true))
	off, ok := c.CommittedOffset("g", txnTopic, 0)
	assert.True(t, ok)
	assert.Equal(t, int64(3), off)

	require.Zero(t, p.produce(0, 2))
	require.Zero(t, p.end(false))
	f = fetchCommitted(t, p.w, 0, 0)
	assert.Equal(t, f.HighWatermark, f.LastStableOffset)
	assert.Equal(t, int64(7), f.HighWatermark, "3 records, a marker, 2 records, a marker")
	assert.Len(t, f.AbortedTransactions, 1)
}

// TestTxnV2EpochOverflow: an EndTxn v5 at the last usable epoch answers a
// new producer id at epoch 0 (the markers carry the old id's last epoch),
// and its retry gets the same answer.
func TestTxnV2EpochOverflow(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 1))
	p := newTxnProducerV2(t, c, "v2-overflow")
	require.Zero(t, p.init())
	c.txn.mu.Lock()
	c.txn.byID[p.id].epoch = math.MaxInt16 - 1
	c.txn.mu.Unlock()
	p.epoch = math.MaxInt16 - 1
	oldPID := p.pid
	require.Zero(t, p.produce(0, 1))
	require.Zero(t, p.end(true))
	assert.NotEqual(t, oldPID, p.pid, "a new producer id")
	assert.Equal(t, int16(0), p.epoch)
	_, pid, epoch, _ := c.TransactionState(p.id)
	assert.Equal(t, p.pid, pid)
	assert.Zero(t, epoch)

	newPID := p.pid
	p.pid, p.epoch = oldPID, math.MaxInt16-1
	require.Zero(t, p.end(true), "the retry")
	assert.Equal(t, newPID, p.pid)
	assert.Equal(t, int16(0), p.epoch)

	require.Zero(t, p.produce(0, 1), "the next transaction under the new id")
	require.Zero(t, p.end(true))
	assert.Equal(t, int16(1), p.epoch)
	p.pid, p.epoch = oldPID, math.MaxInt16
	assert.Equal(t, ecInvalidProducerIDMapping, p.produce(0, 1), "the old id is no transactional id's")
}

// TestTxnV2TimeoutAbortKeepsProducer: at level 2, a transaction the
// coordinator aborted after its timeout is ended by the producer's EndTxn
// v5 abort with its old epoch, which answers the bumped one: the producer
// goes on. At level 1 the old epoch is fenced.
func TestTxnV2TimeoutAbortKeepsProducer(t *testing.T) {
	for _, tc := range []struct {
		level int16
		code  int16
	}{{2, 0}, {1, ecProducerFenced}} {
		// The coordinator's clock moves only when the test moves it.
		var now atomic.Int64
		now.Store(time.Now().UnixNano())
		c := newTestCluster(t, Config{Brokers: 1, TransactionVersion: tc.level, Clock: func() time.Time { return time.Unix(0, now.Load()) }})
		require.NoError(t, c.CreateTopic(txnTopic, 1))
		p := newTxnProducerV2(t, c, "v2-slow")
		require.Zero(t, p.initTimeout(1000))
		require.Zero(t, p.produce(0, 2))
		now.Add(int64(2 * time.Second))
		p.waitState("CompleteAbort")
		assert.Equal(t, ecInvalidProducerEpoch, p.produce(0, 1), "level %d: fenced at the partition", tc.level)
		assert.Equal(t, tc.code, p.end(false), "level %d: the producer's abort", tc.level)
		if tc.code == 0 {
			assert.Equal(t, int16(1), p.epoch, "the coordinator's bumped epoch")
			assert.Zero(t, p.produce(0, 1))
			assert.Zero(t, p.end(true))
		}
	}
}

// TestFinalizedFeatures: ApiVersions v3+ reports transaction.version at
// the configured level with a FinalizedFeaturesEpoch that grows with each
// SetTransactionVersion; -1 reports none; older ApiVersions versions none.
func TestFinalizedFeatures(t *testing.T) {
	features := func(w *wireClient, version int16) (int64, map[string]int16) {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = version
		resp := w.request(req).(*kmsg.ApiVersionsResponse)
		levels := map[string]int16{}
		for _, f := range resp.FinalizedFeatures {
			levels[f.Name] = f.MaxVersionLevel
		}
		return resp.FinalizedFeaturesEpoch, levels
	}
	c := newTestCluster(t, Config{Brokers: 1})
	w := dialBroker(t, c.Addrs()[0], "features")
	e1, l := features(w, 3)
	assert.Equal(t, map[string]int16{"transaction.version": 2}, l, "the default, as Kafka 4.4")
	require.NoError(t, c.SetTransactionVersion(1))
	e2, l := features(w, 4)
	assert.Equal(t, map[string]int16{"transaction.version": 1}, l)
	assert.Greater(t, e2, e1)
	require.NoError(t, c.SetTransactionVersion(1))
	e3, _ := features(w, 4)
	assert.Equal(t, e2, e3, "no change, no new epoch")
	require.NoError(t, c.SetTransactionVersion(-1))
	_, l = features(w, 3)
	assert.Empty(t, l)
	_, l = features(w, 2)
	assert.Empty(t, l, "ApiVersions v2 has no features")
	require.ErrorIs(t, c.SetTransactionVersion(3), ErrInvalidConfig)

	for _, v := range []int16{-2, 3} {
		_, err := New(Config{TransactionVersion: v})
		require.ErrorIs(t, err, ErrInvalidConfig, "TransactionVersion %d", v)
	}
	c1 := newTestCluster(t, Config{Brokers: 1, TransactionVersion: 1})
	_, l = features(dialBroker(t, c1.Addrs()[0], "features"), 3)
	assert.Equal(t, map[string]int16{"transaction.version": 1}, l)
}
