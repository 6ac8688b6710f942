package testbroker

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAPIVersions(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	w := dialBroker(t, c.Addrs()[0], "av")

	for _, v := range []int16{0, 3, new(kmsg.ApiVersionsRequest).MaxVersion()} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		resp := w.request(req).(*kmsg.ApiVersionsResponse)
		require.Zero(t, resp.ErrorCode, "v%d", v)
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		assert.Equal(t, [2]int16{3, new(kmsg.ProduceRequest).MaxVersion()}, got[produceKey], "v%d", v)
		assert.GreaterOrEqual(t, got[produceKey][1], int16(11), "Produce v3 to at least v11")
		assert.Contains(t, got, metadataKey)
		assert.Contains(t, got, initProducerIDKey)
	}
}

// TestAPIVersionsFallback: a client asking an ApiVersions version the
// broker does not know gets a v0 answer with UNSUPPORTED_VERSION and the
// supported versions, which is what kgo and librdkafka retry with.
func TestAPIVersionsFallback(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	w := dialBroker(t, c.Addrs()[0], "av")
	// A future version, written by hand: kmsg cannot encode it.
	raw := []byte{0, 0, 0, 0, 0, 18, 0, 99, 0, 0, 0, 7, 0, 2, 'i', 'd', 0, 0, 0}
	binary.BigEndian.PutUint32(raw, uint32(len(raw)-4))
	_, err := w.nc.Write(raw)
	require.NoError(t, err)
	var size [4]byte
	_, err = io.ReadFull(w.br, size[:])
	require.NoError(t, err)
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(w.br, buf)
	require.NoError(t, err)
	assert.EqualValues(t, 7, binary.BigEndian.Uint32(buf), "correlation id")
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	require.NoError(t, resp.ReadFrom(buf[4:]))
	assert.Equal(t, ecUnsupportedVersion, resp.ErrorCode)
	assert.NotEmpty(t, resp.ApiKeys)

	// The connection stays usable.
	req := kmsg.NewPtrApiVersionsRequest()
	w.corr = 7
	assert.Zero(t, w.request(req).(*kmsg.ApiVersionsResponse).ErrorCode)
}

func TestMetadata(t *testing.T) {
	c := newTestCluster(t, Config{AllowAutoTopicCreation: true, DefaultPartitions: 2})
	require.NoError(t, c.CreateTopic("a", 4))
	w := dialBroker(t, c.Addrs()[1], "md")

	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := w.request(req).(*kmsg.MetadataResponse)
	require.Len(t, resp.Brokers, 3)
	require.Len(t, resp.Topics, 1)
	ta := resp.Topics[0]
	assert.Equal(t, "a", *ta.Topic)
	assert.NotEqual(t, [16]byte{}, ta.TopicID, "topic id")
	leaders := map[int32]bool{}
	for _, p := range ta.Partitions {
		leaders[p.Leader] = true
		assert.Zero(t, p.ErrorCode)
		assert.Len(t, p.Replicas, 3)
	}
	assert.Len(t, leaders, 3, "leaders spread across the brokers")

	// By topic id.
	req = kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = ta.TopicID
	req.Topics = append(req.Topics, rt)
	resp = w.request(req).(*kmsg.MetadataResponse)
	require.Len(t, resp.Topics, 1)
	assert.Equal(t, "a", *resp.Topics[0].Topic)

	cases := []struct {
		name      string
		topic     string
		allowAuto bool
		code      int16
		exists    bool
	}{
		{"unknown, auto creation not allowed by the request", "b", false, ecUnknownTopicOrPartition, false},
		{"auto-created", "c", true, ecLeaderNotAvailable, true},
		{"invalid name", "bad/name", true, ecInvalidTopic, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 12
			req.AllowAutoTopicCreation = tc.allowAuto
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(tc.topic)
			req.Topics = append(req.Topics, rt)
			resp := w.request(req).(*kmsg.MetadataResponse)
			require.Len(t, resp.Topics, 1)
			assert.Equal(t, tc.code, resp.Topics[0].ErrorCode)
			_, err := c.HighWatermark(tc.topic, 0)
			assert.Equal(t, tc.exists, err == nil)
		})
	}
	// The auto-created topic has DefaultPartitions partitions.
	_, err := c.HighWatermark("c", 1)
	assert.NoError(t, err)
}

// TestProduceNotLeader: Produce to a broker that does not lead the
// partition gets NOT_LEADER_OR_FOLLOWER, and v10+ names the leader with
// its endpoint (KIP-951).
func TestProduceNotLeader(t *testing.T) {
	c := newTestCluster(t, Config{})
	require.NoError(t, c.CreateTopic("t", 1))
	leader, _ := leaderAddr(t, c, "t", 0)
	other := (leader + 1) % 3
	w := dialBroker(t, c.Addrs()[other], "nl")
	for _, v := range []int16{9, 10, new(kmsg.ProduceRequest).MaxVersion() - 1} {
		resp := w.request(produceRequest(v, -1, "t", map[int32][]byte{0: testBatch{}.build(t)})).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		assert.Equal(t, ecNotLeaderOrFollower, p.ErrorCode, "v%d", v)
		if v >= 10 {
			assert.Equal(t, leader, p.CurrentLeader.LeaderID)
			require.Len(t, resp.Brokers, 1)
			assert.Equal(t, leader, resp.Brokers[0].NodeID)
		} else {
			assert.Empty(t, resp.Brokers)
		}
	}
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	assert.Zero(t, hw, "nothing appended")
}

// TestNotLeaderEndpointOnRequestListener: KIP-951's NodeEndpoints name
// the leader on the listener the request came in on, as Kafka answers with
// the request's listener name (a client that follows a hint to a broker it
// does not know must reach it there).
func TestNotLeaderEndpointOnRequestListener(t *testing.T) {
	c := newTestCluster(t, Config{Security: &Security{Listeners: []Listener{
		{Name: "A", Protocol: Plaintext}, {Name: "B", Protocol: Plaintext}}}})
	require.NoError(t, c.CreateTopic("t", 1))
	leader, _ := leaderAddr(t, c, "t", 0)
	other := (leader + 1) % 3
	for _, name := range []string{"A", "B"} {
		addrs := c.ListenerAddrs(name)
		w := dialBroker(t, addrs[other], "nl")
		resp := w.request(produceRequest(10, -1, "t", map[int32][]byte{0: testBatch{}.build(t)})).(*kmsg.ProduceResponse)
		require.Equal(t, ecNotLeaderOrFollower, resp.Topics[0].Partitions[0].ErrorCode)
		require.Len(t, resp.Brokers, 1)
		b := resp.Brokers[0]
		assert.Equal(t, addrs[leader], net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), "listener %s", name)
	}
}

func TestProduceByTopicID(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	w := dialBroker(t, c.Addrs()[0], "v13")
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	id := w.request(md).(*kmsg.MetadataResponse).Topics[0].TopicID

	req := produceRequest(13, -1, "", map[int32][]byte{0: testBatch{n: 2}.build(t)})
	req.Topics[0].TopicID = id
	resp := w.request(req).(*kmsg.ProduceResponse)
	assert.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	assert.Equal(t, id, resp.Topics[0].TopicID)

	req.Topics[0].TopicID = [16]byte{1}
	resp = w.request(req).(*kmsg.ProduceResponse)
	assert.Equal(t, ecUnknownTopicID, resp.Topics[0].Partitions[0].ErrorCode)
}

func TestProduceAcks(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	w := dialBroker(t, c.Addrs()[0], "acks")

	resp := w.request(produceRequest(9, 2, "t", map[int32][]byte{0: testBatch{}.build(t)})).(*kmsg.ProduceResponse)
	assert.Equal(t, ecInvalidRequiredAcks, resp.Topics[0].Partitions[0].ErrorCode)

	// acks=0 gets no response: the next response on the connection
	// answers the next request.
	w.corr++
	_, err := w.nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, produceRequest(9, 0, "t", map[int32][]byte{0: testBatch{n: 3}.build(t)}), w.corr))
	require.NoError(t, err)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	w.request(md)
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	assert.EqualValues(t, 3, hw)

	// acks=0 with an error closes the connection, as Kafka does.
	w.corr++
	_, err = w.nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, produceRequest(9, 0, "nope", map[int32][]byte{0: testBatch{}.build(t)}), w.corr))
	require.NoError(t, err)
	_ = w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = w.br.ReadByte()
	assert.ErrorIs(t, err, io.EOF)
}

func TestInitProducerID(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	w := dialBroker(t, c.Addrs()[0], "pid")
	init := func(v int16, txn *string, id int64, epoch int16) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = v
		req.TransactionalID = txn
		req.ProducerID, req.ProducerEpoch = id, epoch
		req.TransactionTimeoutMillis = 60000
		return w.request(req).(*kmsg.InitProducerIDResponse)
	}
	a := init(4, nil, -1, -1)
	b := init(4, nil, a.ProducerID, a.ProducerEpoch)
	assert.Zero(t, a.ErrorCode)
	assert.NotEqual(t, a.ProducerID, b.ProducerID, "idempotent producers always get a new id")
	assert.Zero(t, b.ProducerEpoch)

	txn := kmsg.StringPtr("tx")
	t1 := init(4, txn, -1, -1)
	t2 := init(4, txn, t1.ProducerID, t1.ProducerEpoch)
	assert.Equal(t, t1.ProducerID, t2.ProducerID)
	assert.Equal(t, t1.ProducerEpoch+1, t2.ProducerEpoch, "epoch bump")
	retry := init(4, txn, t1.ProducerID, t1.ProducerEpoch)
	assert.Equal(t, t2.ProducerEpoch, retry.ProducerEpoch, "a retry of the last bump gets its answer again (KIP-360)")
	t3 := init(4, txn, -1, -1) // a new instance fences the others
	assert.Equal(t, t2.ProducerEpoch+1, t3.ProducerEpoch)
	assert.Equal(t, ecProducerFenced, init(4, txn, t2.ProducerID, t2.ProducerEpoch).ErrorCode, "fenced epoch")
	assert.Equal(t, ecInvalidProducerEpoch, init(3, txn, t2.ProducerID, t2.ProducerEpoch).ErrorCode, "fenced epoch before KIP-588")
}

func TestAdminRequests(t *testing.T) {
	c := newTestCluster(t, Config{DefaultPartitions: 2})
	require.NoError(t, c.CreateTopic("exists", 1))
	w := dialBroker(t, c.Addrs()[0], "admin")

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	for _, tc := range []struct {
		name string
		n    int32
		rf   int16
	}{{"new", 3, -1}, {"dflt", -1, 1}, {"exists", 1, -1}, {"bad name!", 1, -1}, {"zero", 0, -1}, {"rf", 1, 4}, {"dup", 1, 1}, {"dup", 1, 1}} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.name, tc.n, tc.rf
		ct.Topics = append(ct.Topics, rt)
	}
	resp := w.request(ct).(*kmsg.CreateTopicsResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.ErrorCode
		if rt.ErrorCode == 0 {
			assert.NotEqual(t, [16]byte{}, rt.TopicID)
		}
	}
	assert.Equal(t, map[string]int16{"new": 0, "dflt": 0, "exists": ecTopicAlreadyExists, "bad name!": ecInvalidTopic,
		"zero": ecInvalidPartitions, "rf": ecInvalidReplicationFact, "dup": ecInvalidRequest}, codes)
	_, err := c.HighWatermark("new", 2)
	assert.NoError(t, err)
	_, err = c.HighWatermark("dflt", 1)
	assert.NoError(t, err, "-1 partitions means DefaultPartitions")

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 3
	for _, tc := range []struct {
		name  string
		count int32
	}{{"new", 5}, {"dflt", 1}, {"missing", 3}} {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = tc.name, tc.count
		cp.Topics = append(cp.Topics, rt)
	}
	cpr := w.request(cp).(*kmsg.CreatePartitionsResponse)
	require.Len(t, cpr.Topics, 3)
	assert.Zero(t, cpr.Topics[0].ErrorCode)
	assert.Equal(t, ecInvalidPartitions, cpr.Topics[1].ErrorCode)
	assert.Equal(t, ecUnknownTopicOrPartition, cpr.Topics[2].ErrorCode)
	_, err = c.HighWatermark("new", 4)
	assert.NoError(t, err)

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version = 6
	for _, name := range []string{"new", "missing"} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		dt.Topics = append(dt.Topics, rt)
	}
	dtr := w.request(dt).(*kmsg.DeleteTopicsResponse)
	require.Len(t, dtr.Topics, 2)
	assert.Zero(t, dtr.Topics[0].ErrorCode)
	assert.Equal(t, ecUnknownTopicOrPartition, dtr.Topics[1].ErrorCode)
	_, err = c.HighWatermark("new", 0)
	assert.ErrorIs(t, err, ErrUnknownTopic)
}

func TestListOffsets(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	w := dialBroker(t, c.Addrs()[0], "lo")
	w.request(produceRequest(9, 1, "t", map[int32][]byte{0: testBatch{n: 4, ts: 100}.build(t)}))
	w.request(produceRequest(9, 1, "t", map[int32][]byte{0: testBatch{n: 4, ts: 200}.build(t)}))
	require.NoError(t, c.DeleteRecordsBefore("t", 0, 2))

	cases := []struct {
		ts, offset int64
	}{{-1, 8}, {-2, 2}, {150, 4}, {100, 2}, {999, -1}}
	for _, tc := range cases {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = tc.ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := w.request(req).(*kmsg.ListOffsetsResponse)
		p := resp.Topics[0].Partitions[0]
		assert.Zero(t, p.ErrorCode)
		assert.Equal(t, tc.offset, p.Offset, "timestamp %d", tc.ts)
	}
}

func fetchRequest(version int16, topic string, partition int32, offset int64, epoch int32, maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxBytes = 1 << 20
	req.MinBytes = 1
	req.MaxWaitMillis = maxWait
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = partition
	fp.FetchOffset = offset
	fp.CurrentLeaderEpoch = epoch
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}

func TestFetchErrors(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 2})
	require.NoError(t, c.CreateTopic("t", 1))
	require.NoError(t, c.MoveLeader("t", 0, 1)) // epoch 1
	w := dialBroker(t, c.Addrs()[1], "fe")
	w.request(produceRequest(9, 1, "t", map[int32][]byte{0: testBatch{n: 2}.build(t)}))

	cases := []struct {
		name   string
		broker int
		offset int64
		epoch  int32
		code   int16
	}{
		{"ok", 1, 0, 1, 0},
		{"no epoch", 1, 1, -1, 0},
		{"fenced", 1, 0, 0, ecFencedLeaderEpoch},
		{"unknown epoch", 1, 0, 2, ecUnknownLeaderEpoch},
		{"out of range", 1, 3, 1, codeOffsetOutOfRange},
		{"not leader", 0, 0, 1, ecNotLeaderOrFollower},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := dialBroker(t, c.Addrs()[tc.broker], "fe")
			resp := w.request(fetchRequest(12, "t", 0, tc.offset, tc.epoch, 0)).(*kmsg.FetchResponse)
			p := resp.Topics[0].Partitions[0]
			assert.Equal(t, tc.code, p.ErrorCode)
			if tc.code == ecNotLeaderOrFollower {
				assert.EqualValues(t, 1, p.CurrentLeader.LeaderID)
			}
		})
	}
}

// TestFetchLongPoll: a Fetch at the end of the log waits for an append
// instead of returning empty at once (clients would spin otherwise).
func TestFetchLongPoll(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	w := dialBroker(t, c.Addrs()[0], "lp")
	require.NoError(t, w.send(fetchRequest(11, "t", 0, 0, -1, 10_000)))
	time.Sleep(50 * time.Millisecond) // let the fetch start waiting
	p := dialBroker(t, c.Addrs()[0], "prod")
	p.request(produceRequest(9, 1, "t", map[int32][]byte{0: testBatch{n: 3}.build(t)}))
	resp, err := w.recv()
	require.NoError(t, err)
	fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	assert.EqualValues(t, 3, fp.HighWatermark)
	assert.NotEmpty(t, fp.RecordBatches)
}

// TestUnsupportedRequestClosesConnection: an API the broker does not serve
// closes the connection, and the broker keeps serving others.
func TestUnsupportedRequestClosesConnection(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	w := dialBroker(t, c.Addrs()[0], "x")
	req := kmsg.NewPtrDescribeGroupsRequest() // not served
	require.NoError(t, w.send(req))
	_, err := w.recv()
	assert.Error(t, err)

	w2 := dialBroker(t, c.Addrs()[0], "y")
	assert.Zero(t, w2.request(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode)
}

// TestIdempotentProduceOverTheWire: a retried idempotent batch is answered
// with its original offset and not appended twice; a gap in sequences gets
// OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestIdempotentProduceOverTheWire(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	w := dialBroker(t, c.Addrs()[0], "idem")
	init := w.request(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	require.Zero(t, init.ErrorCode)
	pid, epoch := init.ProducerID, init.ProducerEpoch

	steps := []struct {
		seq, n     int32
		code       int16
		baseOffset int64
		appended   bool // appended, not a duplicate nor refused
	}{
		{seq: 0, n: 3, baseOffset: 0, appended: true},
		{seq: 3, n: 2, baseOffset: 3, appended: true},
		{seq: 0, n: 3, baseOffset: 0}, // retry of the first batch
		{seq: 7, n: 1, code: codeOutOfOrderSequence, baseOffset: -1},
		{seq: 5, n: 1, baseOffset: 5, appended: true},
	}
	var appendedBytes int64
	for i, st := range steps {
		b := testBatch{n: int(st.n), idem: true, pid: pid, epoch: epoch, seq: st.seq}.build(t)
		if st.appended {
			appendedBytes += int64(len(b))
		}
		resp := w.request(produceRequest(11, -1, "t", map[int32][]byte{0: b})).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		assert.Equal(t, st.code, p.ErrorCode, "step %d", i)
		assert.Equal(t, st.baseOffset, p.BaseOffset, "step %d", i)
	}
	n, err := c.NumBatches("t", 0)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	st := c.Stats()
	assert.Equal(t, int64(3), st.Batches, "the retry and the refused batch are not counted")
	assert.Equal(t, int64(6), st.Records)
	assert.Equal(t, appendedBytes, st.Bytes, "the lengths of the 3 appended batches")
	assert.Greater(t, appendedBytes, int64(3*61), "3 headers and their records")
}

// TestFetchEmptyRecordsNotNull: a partition without data gets an empty
// record set, not a null one, which librdkafka rejects ("invalid
// MessageSetSize -1") and then never reaches the end of the partition.
func TestFetchEmptyRecordsNotNull(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	w := dialBroker(t, c.Addrs()[0], "empty")
	for _, v := range []int16{4, 11, 12} {
		resp := w.request(fetchRequest(v, "t", 0, 0, -1, 0)).(*kmsg.FetchResponse)
		fp := resp.Topics[0].Partitions[0]
		require.Zero(t, fp.ErrorCode)
		assert.NotNil(t, fp.RecordBatches, "v%d: null record set", v)
		assert.Empty(t, fp.RecordBatches)
	}
}

// A request whose body arrives after ConnectionsMaxIdle's deadline, set for
// its size, is read and answered: a connection in the middle of a request
// is not idle (the deadline is not cleared once the size has come).
func TestConnectionsMaxIdleSlowBody(t *testing.T) {
	const maxIdle = 100 * time.Millisecond
	c := newTestCluster(t, Config{Brokers: 1, ConnectionsMaxIdle: maxIdle})
	w := dialBroker(t, c.Addrs()[0], "slow")
	w.corr++
	frame := w.fmt.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), w.corr)
	_, err := w.nc.Write(frame[:6])
	require.NoError(t, err)
	time.Sleep(maxIdle + 100*time.Millisecond)
	_, err = w.nc.Write(frame[6:])
	require.NoError(t, err)
	w.sent = append(w.sent, kmsg.NewPtrApiVersionsRequest())
	_ = w.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := w.recv()
	require.NoError(t, err, "the request was cut")
	assert.Zero(t, resp.(*kmsg.ApiVersionsResponse).ErrorCode)
	assert.Zero(t, c.Stats().IdleClosed)
}

// ConnectionsMaxIdle (Kafka's connections.max.idle.ms): a connection that
// sent no request for that long is closed without a word, one whose
// request is being handled is not (however long that takes), and
// Stats.IdleClosed counts the closes.
func TestConnectionsMaxIdle(t *testing.T) {
	const maxIdle = 150 * time.Millisecond
	c := newTestCluster(t, Config{Brokers: 1, ConnectionsMaxIdle: maxIdle})
	c.Intercept(Interceptor{Keys: []int16{apiVersionsKey}, Times: 1, Delay: 3 * maxIdle})
	w := dialBroker(t, c.Addrs()[0], "idle")
	start := time.Now()
	resp := w.request(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	require.Zero(t, resp.ErrorCode, "answered after three times ConnectionsMaxIdle")
	require.GreaterOrEqual(t, time.Since(start), 3*maxIdle)
	answered := time.Now()
	assert.Zero(t, c.Stats().IdleClosed)

	_ = w.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := w.br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the broker closes the idle connection")
	assert.GreaterOrEqual(t, time.Since(answered), maxIdle-10*time.Millisecond, "not before ConnectionsMaxIdle")
	assert.Equal(t, int64(1), c.Stats().IdleClosed)
	require.Eventually(t, func() bool { return c.Stats().Connections == 0 }, 5*time.Second, 5*time.Millisecond)

	// Negative: never.
	never := newTestCluster(t, Config{Brokers: 1, ConnectionsMaxIdle: -1})
	w = dialBroker(t, never.Addrs()[0], "kept")
	time.Sleep(2 * maxIdle)
	assert.Zero(t, w.request(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode)
	assert.Zero(t, never.Stats().IdleClosed)
}

// TestCreateTopicWithID: a topic made with a given id answers Metadata
// with it (a cluster moved with its data keeps its topics' ids); an id
// another topic has is refused; TopicID reads it back.
func TestCreateTopicWithID(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	id := [16]byte{1, 2, 3}
	require.NoError(t, c.CreateTopicWithID("kept", 2, id))
	got, err := c.TopicID("kept")
	require.NoError(t, err)
	assert.Equal(t, id, got)
	assert.Error(t, c.CreateTopicWithID("other", 1, id), "a second topic with the same id")
	require.NoError(t, c.CreateTopic("random", 1))
	rid, err := c.TopicID("random")
	require.NoError(t, err)
	assert.NotEqual(t, [16]byte{}, rid)
	_, err = c.TopicID("missing")
	assert.ErrorIs(t, err, ErrUnknownTopic)

	w := dialBroker(t, c.Addrs()[0], "md")
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12 // topic ids since v10
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("kept")
	req.Topics = append(req.Topics, rt)
	resp := w.request(req).(*kmsg.MetadataResponse)
	require.Len(t, resp.Topics, 1)
	assert.Equal(t, id, resp.Topics[0].TopicID)
}
