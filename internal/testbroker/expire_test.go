package testbroker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestExpireTransactionalIDs: a transactional id expired at the
// coordinator answers every request of its old producer id with
// INVALID_PRODUCER_ID_MAPPING, and InitProducerId with the old id and
// epoch a new producer id at epoch 0, as Kafka's coordinator does once
// transactional.id.expiration.ms passed; an open transaction's id stays.
func TestExpireTransactionalIDs(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 2))
	p := newTxnProducer(t, c, "expiring")
	require.Equal(t, int16(0), p.init())
	require.Equal(t, int16(0), p.add(0))
	require.Equal(t, int16(0), p.produce(0, 2))
	require.Equal(t, int16(0), p.end(true))

	open := newTxnProducer(t, c, "open")
	require.Equal(t, int16(0), open.init())
	require.Equal(t, int16(0), open.add(0))

	require.Equal(t, 1, c.ExpireTransactionalIDs(), "only the idle id expires")
	_, _, _, ok := c.TransactionState("expiring")
	require.False(t, ok)
	require.Equal(t, "Ongoing", open.state())

	for _, tc := range []struct {
		name string
		do   func() int16
	}{
		{"AddPartitionsToTxn", func() int16 { return p.add(1) }},
		{"AddOffsetsToTxn", func() int16 { return p.addOffsets("g") }},
		{"EndTxn", func() int16 { return p.end(false) }},
		{"EndTxn v5", func() int16 { p.version = 5; defer func() { p.version = 3 }(); return p.end(false) }},
		{"Produce v12", func() int16 { p.produceVersion = 12; defer func() { p.produceVersion = 9 }(); return p.produce(1, 1) }},
	} {
		assert.Equal(t, ecInvalidProducerIDMapping, tc.do(), tc.name)
	}

	oldPID := p.pid
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = kmsg.StringPtr(p.id)
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = p.pid, p.epoch
	resp := p.w.request(req).(*kmsg.InitProducerIDResponse)
	require.Equal(t, int16(0), resp.ErrorCode)
	require.NotEqual(t, oldPID, resp.ProducerID, "a new producer id")
	require.Equal(t, int16(0), resp.ProducerEpoch)
}

// TestExpireProducerIDs: a partition that forgot an idle producer id takes
// its next batch, whatever its sequence, as its first (Kafka 2.5+), or
// answers UNKNOWN_PRODUCER_ID like brokers before 2.5; a retry of a batch
// written before expiry is no longer a duplicate. A producer id with an
// open transaction on the partition keeps its state.
func TestExpireProducerIDs(t *testing.T) {
	for _, tc := range []struct {
		name          string
		unknownErrors bool
		wantCode      int16
	}{
		{"any sequence accepted", false, 0},
		{"UNKNOWN_PRODUCER_ID", true, codeUnknownProducerID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, Config{Brokers: 1, UnknownProducerIDErrors: tc.unknownErrors})
			require.NoError(t, c.CreateTopic("t", 1))
			w := dialBroker(t, c.Addrs()[0], "idem")
			produce := func(seq int32) kmsg.ProduceResponseTopicPartition {
				b := testBatch{n: 2, idem: true, pid: 7, epoch: 0, seq: seq}.build(t)
				return w.request(produceRequest(9, -1, "t", map[int32][]byte{0: b})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
			}
			require.Equal(t, int16(0), produce(0).ErrorCode)
			require.Equal(t, int16(0), produce(2).ErrorCode)
			dup := produce(2)
			require.Equal(t, int16(0), dup.ErrorCode)
			require.Equal(t, int64(2), dup.BaseOffset, "a duplicate before expiry")

			open := newTxnProducer(t, c, "open")
			require.Equal(t, int16(0), open.init())

			require.Equal(t, 1, c.ExpireProducerIDs())
			got := produce(2) // the retry of a written batch, now unrecognized
			require.Equal(t, tc.wantCode, got.ErrorCode)
			if tc.wantCode == 0 {
				require.Equal(t, int64(4), got.BaseOffset, "written again: the broker forgot it")
				require.Equal(t, int16(0), produce(4).ErrorCode, "tracking restarted from the accepted batch")
			}
		})
	}
}

// TestExpireProducerIDsKeepsOpenTransactions: a producer id with an open
// transaction on a partition is not expired there, as in Kafka.
func TestExpireProducerIDsKeepsOpenTransactions(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(txnTopic, 2))
	p := newTxnProducer(t, c, "open")
	require.Equal(t, int16(0), p.init())
	require.Equal(t, int16(0), p.add(0, 1))
	require.Equal(t, int16(0), p.produce(0, 2))
	require.Equal(t, int16(0), p.produce(1, 2))
	require.Equal(t, int16(0), p.end(true))
	require.Equal(t, int16(0), p.add(0))
	require.Equal(t, int16(0), p.produce(0, 2))
	require.Equal(t, 1, c.ExpireProducerIDs(), "partition 1 only: partition 0 has the open transaction")
}
