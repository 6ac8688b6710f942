package testbroker

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestProduceFetchRoundTrip is the basic promise of the package: what a
// client produces to the leader, it reads back with Fetch.
func TestProduceFetchRoundTrip(t *testing.T) {
	c := newTestCluster(t, Config{})
	require.NoError(t, c.CreateTopic("orders", 3))
	for p := int32(0); p < 3; p++ {
		_, addr := leaderAddr(t, c, "orders", p)
		w := dialBroker(t, addr, "rt")
		b := testBatch{n: 5, ts: 1000}.build(t)
		resp := w.request(produceRequest(9, -1, "orders", map[int32][]byte{p: b})).(*kmsg.ProduceResponse)
		require.Len(t, resp.Topics, 1)
		rp := resp.Topics[0].Partitions[0]
		require.Zero(t, rp.ErrorCode)
		assert.EqualValues(t, 0, rp.BaseOffset)

		fetch := kmsg.NewPtrFetchRequest()
		fetch.Version = 11
		fetch.MaxBytes = 1 << 20
		fetch.MaxWaitMillis = 100
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "orders"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
		fr := w.request(fetch).(*kmsg.FetchResponse)
		frp := fr.Topics[0].Partitions[0]
		require.Zero(t, frp.ErrorCode)
		assert.EqualValues(t, 5, frp.HighWatermark)
		var batch kmsg.RecordBatch
		require.NoError(t, batch.ReadFrom(frp.RecordBatches))
		assert.EqualValues(t, 5, batch.NumRecords)

		recs, err := c.Records("orders", p)
		require.NoError(t, err)
		require.Len(t, recs, 5)
		assert.Equal(t, []byte("value-4"), recs[4].Value)
	}
}

func TestConfigValidation(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
	}{
		{"negative brokers", Config{Brokers: -1}},
		{"queued.max.bytes not above socket.request.max.bytes", Config{QueuedMaxBytes: 1 << 20, SocketRequestMaxBytes: 1 << 20}},
		{"negative mutation rate", Config{MutationRate: -1}},
		{"negative produce rate", Config{ProduceByteRate: -1}},
		{"port range overflow", Config{BasePort: 65535, Brokers: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrInvalidConfig), "%v", err)
		})
	}
}
