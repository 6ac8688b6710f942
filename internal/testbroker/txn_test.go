package testbroker

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/recordbatch"
)

// txnProducer drives one transactional producer over the wire against a
// one-broker cluster (which coordinates and leads everything).
type txnProducer struct {
	t     *testing.T
	c     *Cluster
	w     *wireClient
	id    string
	pid   int64
	epoch int16
	seq   map[int32]int32
	// version is the version of the coordinator requests (default 3),
	// produceVersion of Produce requests (default 9).
	version, produceVersion int16
}

const txnTopic = "txn"

func newTxnProducer(t *testing.T, c *Cluster, id string) *txnProducer {
	return &txnProducer{t: t, c: c, w: dialBroker(t, c.Addrs()[0], id), id: id, pid: -1, epoch: -1, seq: map[int32]int32{}, version: 3, produceVersion: 9}
}

func (p *txnProducer) initTimeout(ms int32) int16 {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = kmsg.StringPtr(p.id)
	req.TransactionTimeoutMillis = ms
	resp := p.w.request(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode == 0 {
		if resp.ProducerEpoch != p.epoch || resp.ProducerID != p.pid {
			p.seq = map[int32]int32{}
		}
		p.pid, p.epoch = resp.ProducerID, resp.ProducerEpoch
	}
	return resp.ErrorCode
}

func (p *txnProducer) init() int16 { return p.initTimeout(60000) }

func (p *txnProducer) add(partitions ...int32) int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = p.version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = p.id, p.pid, p.epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = txnTopic, partitions
	req.Topics = append(req.Topics, rt)
	resp := p.w.request(req).(*kmsg.AddPartitionsToTxnResponse)
	code := int16(0)
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if rp.ErrorCode != 0 {
				code = rp.ErrorCode
			}
		}
	}
	return code
}

// produce writes a transactional batch of n records to partition.
func (p *txnProducer) produce(partition int32, n int) int16 {
	b := testBatch{n: n, idem: true, txn: true, pid: p.pid, epoch: p.epoch, seq: p.seq[partition]}.build(p.t)
	req := produceRequest(p.produceVersion, -1, txnTopic, map[int32][]byte{partition: b})
	req.TransactionID = &p.id
	resp := p.w.request(req).(*kmsg.ProduceResponse)
	code := resp.Topics[0].Partitions[0].ErrorCode
	if code == 0 {
		p.seq[partition] += int32(n)
	}
	return code
}

// end sends EndTxn; at v5 a success answers the producer id and epoch of
// the next transaction, which p adopts (its sequences start again).
func (p *txnProducer) end(commit bool) int16 {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = p.version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.id, p.pid, p.epoch, commit
	resp := p.w.request(req).(*kmsg.EndTxnResponse)
	if resp.ErrorCode == 0 && req.Version >= 5 {
		require.GreaterOrEqual(p.t, resp.ProducerID, int64(0), "EndTxn v5 answers the producer id")
		p.pid, p.epoch, p.seq = resp.ProducerID, resp.ProducerEpoch, map[int32]int32{}
	}
	return resp.ErrorCode
}

func (p *txnProducer) addOffsets(group string) int16 {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.Version = p.version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = p.id, p.pid, p.epoch, group
	return p.w.request(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
}

func (p *txnProducer) commitOffset(group string, generation int32, member string, partition int32, offset int64) int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = max(3, p.version)
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = p.id, group, p.pid, p.epoch
	req.Generation, req.MemberID = generation, member
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = txnTopic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return p.w.request(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func (p *txnProducer) state() string {
	s, _, _, _ := p.c.TransactionState(p.id)
	return s
}

// waitState waits for the transaction to reach state.
func (p *txnProducer) waitState(state string) {
	p.t.Helper()
	require.Eventually(p.t, func() bool { return p.state() == state }, 5*time.Second, 5*time.Millisecond, "state %s, want %s", p.state(), state)
}

// fetchCommitted fetches partition from offset at read_committed.
func fetchCommitted(t *testing.T, w *wireClient, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchRequest(11, txnTopic, partition, offset, -1, 0)
	req.IsolationLevel = 1
	return w.request(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// TestTxnStateMachine walks the coordinator through every legal and
// illegal transition of transaction version 1, checking the code of each
// request and the state after it.
func TestTxnStateMachine(t *testing.T) {
	type step struct {
		name  string
		do    func(p *txnProducer) int16
		code  int16
		state string
	}
	var (
		init      = func(p *txnProducer) int16 { return p.init() }
		add       = func(p *txnProducer) int16 { return p.add(0) }
		addOff    = func(p *txnProducer) int16 { return p.addOffsets("g") }
		produce0  = func(p *txnProducer) int16 { return p.produce(0, 2) }
		produce1  = func(p *txnProducer) int16 { return p.produce(1, 2) }
		commit    = func(p *txnProducer) int16 { return p.end(true) }
		abort     = func(p *txnProducer) int16 { return p.end(false) }
		wrongPID  = func(p *txnProducer) int16 { p.pid++; defer func() { p.pid-- }(); return p.add(0) }
		oldEpoch  = func(p *txnProducer) int16 { p.epoch--; defer func() { p.epoch++ }(); return p.add(0) }
		oldEpochE = func(p *txnProducer) int16 { p.epoch--; defer func() { p.epoch++ }(); return p.end(true) }
		v1        = func(f func(*txnProducer) int16) func(*txnProducer) int16 {
			return func(p *txnProducer) int16 { p.version = 1; defer func() { p.version = 3 }(); return f(p) }
		}
		sleep = func(p *txnProducer) int16 { p.waitState("CompleteCommit"); return 0 }
	)
	cases := []struct {
		name  string
		delay time.Duration
		steps []step
	}{
		{"commit", 0, []step{
			{"init", init, 0, "Empty"},
			{"add", add, 0, "Ongoing"},
			{"add again", add, 0, "Ongoing"},
			{"produce", produce0, 0, "Ongoing"},
			{"commit", commit, 0, "CompleteCommit"},
			{"commit retried", commit, 0, "CompleteCommit"},
			{"abort after commit", abort, ecInvalidTxnState, "CompleteCommit"},
			{"produce after commit", produce0, ecInvalidTxnState, "CompleteCommit"},
			{"next transaction", add, 0, "Ongoing"},
			{"produce in it", produce0, 0, "Ongoing"},
			{"commit it", commit, 0, "CompleteCommit"},
			{"init again", init, 0, "Empty"},
		}},
		{"abort", 0, []step{
			{"init", init, 0, "Empty"},
			{"add offsets", addOff, 0, "Ongoing"},
			{"abort", abort, 0, "CompleteAbort"},
			{"abort retried", abort, 0, "CompleteAbort"},
			{"commit after abort", commit, ecInvalidTxnState, "CompleteAbort"},
		}},
		{"empty", 0, []step{
			{"init", init, 0, "Empty"},
			{"commit", commit, ecInvalidTxnState, "Empty"},
			{"abort", abort, ecInvalidTxnState, "Empty"},
			{"produce", produce0, ecInvalidTxnState, "Empty"},
		}},
		{"unadded partition", 0, []step{
			{"init", init, 0, "Empty"},
			{"add 0", add, 0, "Ongoing"},
			{"produce 1", produce1, ecInvalidTxnState, "Ongoing"},
			{"produce 0", produce0, 0, "Ongoing"},
		}},
		{"unknown producer", 0, []step{
			{"init", init, 0, "Empty"},
			{"add with another id", wrongPID, ecInvalidProducerIDMapping, "Empty"},
		}},
		{"fenced epoch", 0, []step{
			{"init", init, 0, "Empty"},
			{"init bumps", init, 0, "Empty"},
			{"add, old epoch", oldEpoch, ecProducerFenced, "Empty"},
			{"add, old epoch, v1", v1(oldEpoch), ecInvalidProducerEpoch, "Empty"},
			{"add", add, 0, "Ongoing"},
			{"end, old epoch", oldEpochE, ecProducerFenced, "Ongoing"},
			{"end, old epoch, v1", v1(oldEpochE), ecInvalidProducerEpoch, "Ongoing"},
		}},
		{"prepare", 200 * time.Millisecond, []step{
			{"init", init, 0, "Empty"},
			{"add", add, 0, "Ongoing"},
			{"produce", produce0, 0, "Ongoing"},
			{"commit", commit, 0, "PrepareCommit"},
			{"commit again", commit, ecConcurrentTransactions, "PrepareCommit"},
			{"abort", abort, ecInvalidTxnState, "PrepareCommit"},
			{"add", add, ecConcurrentTransactions, "PrepareCommit"},
			{"add offsets", addOff, ecConcurrentTransactions, "PrepareCommit"},
			{"produce", produce0, ecInvalidTxnState, "PrepareCommit"},
			{"init", init, ecConcurrentTransactions, "PrepareCommit"},
			{"markers written", sleep, 0, "CompleteCommit"},
			{"init", init, 0, "Empty"},
		}},
		{"init while ongoing", 0, []step{
			{"init", init, 0, "Empty"},
			{"add", add, 0, "Ongoing"},
			{"produce", produce0, 0, "Ongoing"},
			{"init aborts", init, ecConcurrentTransactions, "CompleteAbort"},
			{"init retried", init, 0, "Empty"},
		}},
		{"timeouts", 0, []step{
			{"zero", func(p *txnProducer) int16 { return p.initTimeout(0) }, ecInvalidTransactionTimeout, ""},
			{"above max", func(p *txnProducer) int16 {
				return p.initTimeout(int32(DefaultTransactionMaxTimeout/time.Millisecond) + 1)
			}, ecInvalidTransactionTimeout, ""},
			{"max", func(p *txnProducer) int16 {
				return p.initTimeout(int32(DefaultTransactionMaxTimeout / time.Millisecond))
			}, 0, "Empty"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, Config{Brokers: 1, TransactionMarkerDelay: tc.delay})
			require.NoError(t, c.CreateTopic(txnTopic, 2))
			p := newTxnProducer(t, c, "sm")
			for _, s := range tc.steps {
				assert.Equal(t, s.code, s.do(p), "%s: code", s.name)
				assert.Equal(t, s.state, p.state(), "%s: state", s.name)
			}
		})
	}
}

// TestTxnFencedBySecondInit: a second producer's InitProducerId aborts the
// first one's transaction with a bumped epoch; the first is then fenced at
// the coordinator and at the partition.
func TestTxnFencedBySecondInit(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 1))
	a := newTxnProducer(t, c, "fence")
	require.Zero(t, a.init())
	require.Zero(t, a.add(0))
	require.Zero(t, a.produce(0, 3))

	b := newTxnProducer(t, c, "fence")
	require.Equal(t, ecConcurrentTransactions, b.init(), "the open transaction is aborted first")
	require.Zero(t, b.init())
	assert.Equal(t, a.pid, b.pid)
	assert.Equal(t, a.epoch+2, b.epoch)

	assert.Equal(t, ecProducerFenced, a.add(0))
	assert.Equal(t, ecProducerFenced, a.end(true))
	assert.Equal(t, ecInvalidProducerEpoch, a.produce(0, 1), "the abort marker moved the partition's epoch")

	f := fetchCommitted(t, a.w, 0, 0)
	assert.Equal(t, f.HighWatermark, f.LastStableOffset)
	assert.Equal(t, []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: a.pid, FirstOffset: 0}}, f.AbortedTransactions)
}

// TestTxnTimeout: a transaction Ongoing longer than its timeout is aborted
// by the coordinator with a bumped epoch, so the producer is fenced.
func TestTxnTimeout(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 1))
	p := newTxnProducer(t, c, "slow")
	require.Zero(t, p.initTimeout(100))
	require.Zero(t, p.add(0))
	require.Zero(t, p.produce(0, 2))
	p.waitState("CompleteAbort")
	_, _, epoch, _ := c.TransactionState("slow")
	assert.Equal(t, p.epoch+1, epoch)
	assert.Equal(t, ecProducerFenced, p.end(true))
	assert.Equal(t, ecInvalidProducerEpoch, p.produce(0, 1))
	f := fetchCommitted(t, p.w, 0, 0)
	assert.Equal(t, int64(3), f.LastStableOffset, "two records and the abort marker")
	assert.Len(t, f.AbortedTransactions, 1)
}

// TestTxnLastStableOffset interleaves a plain batch and two producers'
// transactions on one partition and checks the LSO, the batches a
// read_committed Fetch returns, its aborted transactions and ListOffsets.
func TestTxnLastStableOffset(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 1))
	a, b := newTxnProducer(t, c, "a"), newTxnProducer(t, c, "b")
	w := a.w
	require.Zero(t, a.init())
	require.Zero(t, b.init())
	plain := testBatch{n: 2}.build(t)
	require.Zero(t, w.request(produceRequest(9, -1, txnTopic, map[int32][]byte{0: plain})).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	require.Zero(t, a.add(0))
	require.Zero(t, a.produce(0, 2)) // 2-3
	require.Zero(t, b.add(0))
	require.Zero(t, b.produce(0, 2)) // 4-5

	listCommitted := func() int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.IsolationLevel = 4, 1
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = txnTopic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		return w.request(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
	}
	batchOffsets := func(f kmsg.FetchResponseTopicPartition) []int64 {
		var out []int64
		for raw := f.RecordBatches; len(raw) > 0; {
			h, err := recordbatch.ParseHeader(raw)
			require.NoError(t, err)
			out = append(out, h.BaseOffset)
			raw = raw[12+int(h.Length):]
		}
		return out
	}
	type want struct {
		lso     int64
		batches []int64
		aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction
	}
	check := func(name string, wt want) {
		f := fetchCommitted(t, w, 0, 0)
		assert.Equal(t, wt.lso, f.LastStableOffset, "%s: LSO", name)
		assert.Equal(t, wt.lso, listCommitted(), "%s: ListOffsets read_committed", name)
		assert.Equal(t, wt.batches, batchOffsets(f), "%s: batches", name)
		if wt.aborted == nil {
			wt.aborted = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		}
		assert.Equal(t, wt.aborted, f.AbortedTransactions, "%s: aborted", name)
	}
	check("both open", want{lso: 2, batches: []int64{0}})
	require.Zero(t, a.end(false)) // marker 6
	check("a aborted", want{lso: 4, batches: []int64{0, 2}, aborted: []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: a.pid, FirstOffset: 2}}})
	require.Zero(t, b.end(true)) // marker 7
	check("b committed", want{lso: 8, batches: []int64{0, 2, 4, 6, 7}, aborted: []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: a.pid, FirstOffset: 2}}})

	// From past the aborted transaction, it is no longer listed.
	f := fetchCommitted(t, w, 0, 7)
	assert.Empty(t, f.AbortedTransactions)
	// read_uncommitted sees everything and the LSO, without a list.
	uf := w.request(fetchRequest(11, txnTopic, 0, 0, -1, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	assert.Equal(t, []int64{0, 2, 4, 6, 7}, batchOffsets(uf))
	assert.Equal(t, int64(8), uf.LastStableOffset)
	assert.Nil(t, uf.AbortedTransactions)
}

// TestTxnControlRecords decodes the markers the coordinator writes: the
// transactional and control attributes, the producer id and epoch, base
// sequence -1, and one record with Kafka's EndTransactionMarker key and
// value.
func TestTxnControlRecords(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 2))
	p := newTxnProducer(t, c, "markers")
	require.Zero(t, p.init())
	for _, commit := range []bool{true, false} {
		require.Zero(t, p.add(0, 1))
		require.Zero(t, p.produce(0, 1))
		require.Zero(t, p.end(commit))
	}
	uf := p.w.request(fetchRequest(11, txnTopic, 1, 0, -1, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	raw := uf.RecordBatches
	var kinds []int16
	for len(raw) > 0 {
		h0, err := recordbatch.ParseHeader(raw)
		require.NoError(t, err)
		b, err := recordbatch.Decode(raw[:12+int(h0.Length)], 1<<20)
		require.NoError(t, err)
		raw = raw[12+int(h0.Length):]
		h := b.Header
		assert.True(t, h.Control() && h.Transactional(), "partition 1 holds only markers")
		assert.Equal(t, p.pid, h.ProducerID)
		assert.Equal(t, p.epoch, h.ProducerEpoch)
		assert.Equal(t, int32(-1), h.BaseSequence)
		require.Len(t, b.Records, 1)
		r := b.Records[0]
		require.Len(t, r.Key, 4)
		assert.Equal(t, uint16(0), binary.BigEndian.Uint16(r.Key), "key version")
		kinds = append(kinds, int16(binary.BigEndian.Uint16(r.Key[2:])))
		assert.Equal(t, []byte{0, 0, 0, 0, 0, 0}, r.Value, "value version 0, coordinator epoch 0")
	}
	assert.Equal(t, []int16{controlTypeCommit, controlTypeAbort}, kinds)

	recs, err := c.Records(txnTopic, 0)
	require.NoError(t, err)
	var control []bool
	for _, r := range recs {
		assert.True(t, r.Transactional)
		control = append(control, r.Control)
	}
	assert.Equal(t, []bool{false, true, false, true}, control)
}

// TestTxnOffsetCommit: offsets sent to the transaction are visible to
// OffsetFetch only once it commits, and dropped when it aborts; the
// KIP-447 generation and member are checked against the group.
func TestTxnOffsetCommit(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 1))
	p := newTxnProducer(t, c, "offsets")
	require.Zero(t, p.init())
	fetch := func(version int16, stable bool) (int64, int16) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.RequireStable = version, stable
		if version >= 8 {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g"
			g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: txnTopic, Partitions: []int32{0}}}
			req.Groups = append(req.Groups, g)
			rp := p.w.request(req).(*kmsg.OffsetFetchResponse).Groups[0].Topics[0].Partitions[0]
			return rp.Offset, rp.ErrorCode
		}
		req.Group = "g"
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: txnTopic, Partitions: []int32{0}}}
		rp := p.w.request(req).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
		return rp.Offset, rp.ErrorCode
	}
	assert.Equal(t, ecInvalidTxnState, p.commitOffset("g", -1, "", 0, 5), "before AddOffsetsToTxn")
	require.Zero(t, p.addOffsets("g"))
	require.Zero(t, p.commitOffset("g", -1, "", 0, 5))
	for _, v := range []int16{1, 7, 8} {
		off, code := fetch(v, false)
		assert.Equal(t, int64(-1), off, "v%d: pending", v)
		assert.Zero(t, code)
	}
	_, code := fetch(7, true)
	assert.Equal(t, ecUnstableOffsetCommit, code, "RequireStable")
	require.Zero(t, p.end(true))
	for _, v := range []int16{1, 7, 8} {
		off, _ := fetch(v, true)
		assert.Equal(t, int64(5), off, "v%d: committed", v)
	}

	require.Zero(t, p.addOffsets("g"))
	require.Zero(t, p.commitOffset("g", -1, "", 0, 9))
	require.Zero(t, p.end(false))
	off, ok := c.CommittedOffset("g", txnTopic, 0)
	assert.True(t, ok)
	assert.Equal(t, int64(5), off, "aborted offsets are dropped")

	c.SetGroupGeneration("g", 3, "m1")
	require.Zero(t, p.addOffsets("g"))
	for _, tc := range []struct {
		name   string
		gen    int32
		member string
		code   int16
	}{
		{"current", 3, "m1", 0},
		{"old generation", 2, "m1", ecIllegalGeneration},
		{"unknown member", 3, "m2", ecUnknownMemberID},
		{"no group metadata", -1, "", 0},
	} {
		assert.Equal(t, tc.code, p.commitOffset("g", tc.gen, tc.member, 0, 11), tc.name)
	}
	p.epoch--
	assert.Equal(t, ecInvalidProducerEpoch, p.commitOffset("g", 3, "m1", 0, 12), "fenced epoch")
	p.epoch++
	require.Zero(t, p.end(true))
	off, _ = c.CommittedOffset("g", txnTopic, 0)
	assert.Equal(t, int64(11), off)
}

// TestFindCoordinator: every version finds the broker the key hashes to,
// other brokers answer NOT_COORDINATOR, and the coordinator moves (with
// its state) when its broker stops or MoveCoordinator pins it.
func TestFindCoordinator(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 3})
	require.NoError(t, c.CreateTopic(txnTopic, 1))
	w := dialBroker(t, c.Addrs()[0], "fc")
	find := func(v int16, keyType int8, key string) (int32, int16) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType = v, keyType
		if v >= 4 {
			req.CoordinatorKeys = []string{key}
			rc := w.request(req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
			assert.Equal(t, key, rc.Key)
			return rc.NodeID, rc.ErrorCode
		}
		req.CoordinatorKey = key
		resp := w.request(req).(*kmsg.FindCoordinatorResponse)
		return resp.NodeID, resp.ErrorCode
	}
	const id = "txn-a"
	want := c.Coordinator(CoordinatorTransaction, id)
	assert.Equal(t, statePartition(id)%3, want)
	for v := int16(0); v <= new(kmsg.FindCoordinatorRequest).MaxVersion(); v++ {
		keyType := CoordinatorTransaction
		if v == 0 {
			keyType = CoordinatorGroup
		}
		node, code := find(v, keyType, id)
		assert.Zero(t, code, "v%d", v)
		assert.Equal(t, c.Coordinator(keyType, id), node, "v%d", v)
	}
	_, code := find(4, 2, "share")
	assert.Equal(t, ecInvalidRequest, code, "unknown key type")
	_, code = find(3, CoordinatorTransaction, "")
	assert.Equal(t, ecInvalidRequest, code, "empty transactional id")

	initOn := func(broker int32) (*kmsg.InitProducerIDResponse, *wireClient) {
		wc := dialBroker(t, c.Addrs()[broker], "init")
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, kmsg.StringPtr(id), 60000
		return wc.request(req).(*kmsg.InitProducerIDResponse), wc
	}
	other := (want + 1) % 3
	resp, _ := initOn(other)
	assert.Equal(t, ecNotCoordinator, resp.ErrorCode)
	resp, _ = initOn(want)
	require.Zero(t, resp.ErrorCode)

	require.NoError(t, c.StopBroker(want))
	moved, code := find(4, CoordinatorTransaction, id)
	require.Zero(t, code)
	assert.NotEqual(t, want, moved)
	resp2, _ := initOn(moved)
	require.Zero(t, resp2.ErrorCode)
	assert.Equal(t, resp.ProducerID, resp2.ProducerID, "the state moved with the coordinator")
	assert.Equal(t, resp.ProducerEpoch+1, resp2.ProducerEpoch)

	require.NoError(t, c.RestartBroker(want))
	require.NoError(t, c.MoveCoordinator(CoordinatorTransaction, id, other))
	node, _ := find(4, CoordinatorTransaction, id)
	assert.Equal(t, other, node)
	assert.ErrorIs(t, c.MoveCoordinator(CoordinatorTransaction, id, 7), ErrUnknownBroker)
}

// TestTxnInterceptors: an interceptor's ErrorCode reaches the client in
// every new API's response, before the handler and after it.
func TestTxnInterceptors(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 1))
	p := newTxnProducer(t, c, "icpt")
	require.Zero(t, p.init())
	const denied int16 = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	cases := []struct {
		name string
		key  int16
		do   func() int16
	}{
		{"InitProducerId", initProducerIDKey, p.init},
		{"AddPartitionsToTxn", addPartitionsTxnKey, func() int16 { return p.add(0) }},
		{"AddOffsetsToTxn", addOffsetsTxnKey, func() int16 { return p.addOffsets("g") }},
		{"TxnOffsetCommit", txnOffsetCommitKey, func() int16 { return p.commitOffset("g", -1, "", 0, 1) }},
		{"EndTxn", endTxnKey, func() int16 { return p.end(true) }},
		{"FindCoordinator", findCoordinatorKey, func() int16 {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorType, req.CoordinatorKeys = 4, CoordinatorTransaction, []string{"icpt"}
			return p.w.request(req).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode
		}},
		{"JoinGroup", joinGroupKey, func() int16 {
			g := &groupClient{t: t, w: p.w}
			return g.join("icpt", time.Minute, time.Second).ErrorCode
		}},
		{"SyncGroup", syncGroupKey, func() int16 { return (&groupClient{t: t, w: p.w}).sync("icpt", nil).ErrorCode }},
		{"Heartbeat", heartbeatKey, func() int16 { return (&groupClient{t: t, w: p.w}).heartbeat("icpt") }},
		{"LeaveGroup", leaveGroupKey, func() int16 { return (&groupClient{t: t, w: p.w}).leave("icpt") }},
		{"OffsetCommit", offsetCommitKey, func() int16 { return (&groupClient{t: t, w: p.w}).commit("icpt", -1, "", 1) }},
		{"OffsetFetch", offsetFetchKey, func() int16 {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version, req.Group = 5, "g"
			req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: txnTopic, Partitions: []int32{0}}}
			return p.w.request(req).(*kmsg.OffsetFetchResponse).ErrorCode
		}},
	}
	for _, after := range []bool{false, true} {
		for _, tc := range cases {
			remove := c.Intercept(Interceptor{Keys: []int16{tc.key}, Times: 1, After: after, ErrorCode: denied})
			assert.Equal(t, denied, tc.do(), "%s (after %v)", tc.name, after)
			remove()
		}
	}
}

// TestTxnAPIVersions pins the versions advertised for the transaction APIs.
func TestTxnAPIVersions(t *testing.T) {
	got := map[int16][2]int16{}
	for _, k := range apiVersionsKeys(new(Cluster)) {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	assert.Equal(t, map[int16][2]int16{
		offsetCommitKey:     {0, 8},
		joinGroupKey:        {0, 9},
		syncGroupKey:        {0, 5},
		heartbeatKey:        {0, 4},
		leaveGroupKey:       {0, 5},
		offsetFetchKey:      {1, 9},
		findCoordinatorKey:  {0, 6},
		initProducerIDKey:   {0, 5},
		addPartitionsTxnKey: {0, 5},
		addOffsetsTxnKey:    {0, 4},
		endTxnKey:           {0, 5},
		txnOffsetCommitKey:  {0, 5},
	}, map[int16][2]int16{
		offsetCommitKey:     got[offsetCommitKey],
		joinGroupKey:        got[joinGroupKey],
		syncGroupKey:        got[syncGroupKey],
		heartbeatKey:        got[heartbeatKey],
		leaveGroupKey:       got[leaveGroupKey],
		offsetFetchKey:      got[offsetFetchKey],
		findCoordinatorKey:  got[findCoordinatorKey],
		initProducerIDKey:   got[initProducerIDKey],
		addPartitionsTxnKey: got[addPartitionsTxnKey],
		addOffsetsTxnKey:    got[addOffsetsTxnKey],
		endTxnKey:           got[endTxnKey],
		txnOffsetCommitKey:  got[txnOffsetCommitKey],
	})
}

// TestAddPartitionsToTxnBatched: the v4+ broker path answers a batch of
// transactions, and VerifyOnly checks membership without adding (KIP-890
// part 1).
func TestAddPartitionsToTxnBatched(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 2))
	a, b := newTxnProducer(t, c, "batch-a"), newTxnProducer(t, c, "batch-b")
	require.Zero(t, a.init())
	require.Zero(t, b.init())
	require.Zero(t, a.add(0))
	send := func(verify bool, txns ...*txnProducer) map[string][]int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 5
		for _, p := range txns {
			req.Transactions = append(req.Transactions, kmsg.AddPartitionsToTxnRequestTransaction{
				TransactionalID: p.id, ProducerID: p.pid, ProducerEpoch: p.epoch, VerifyOnly: verify,
				Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: txnTopic, Partitions: []int32{0, 1}}},
			})
		}
		resp := a.w.request(req).(*kmsg.AddPartitionsToTxnResponse)
		out := map[string][]int16{}
		for _, rx := range resp.Transactions {
			for _, rp := range rx.Topics[0].Partitions {
				out[rx.TransactionalID] = append(out[rx.TransactionalID], rp.ErrorCode)
			}
		}
		return out
	}
	assert.Equal(t, map[string][]int16{
		"batch-a": {0, ecInvalidTxnState},
		"batch-b": {ecInvalidTxnState, ecInvalidTxnState},
	}, send(true, a, b), "verify only")
	assert.Equal(t, "Empty", b.state(), "verifying adds nothing")
	assert.Equal(t, map[string][]int16{"batch-a": {0, 0}, "batch-b": {0, 0}}, send(false, a, b))
	assert.Equal(t, "Ongoing", b.state())
	assert.Equal(t, map[string][]int16{"batch-a": {0, 0}, "batch-b": {0, 0}}, send(true, a, b))
}
