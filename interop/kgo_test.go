package interop

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/internal/testbroker"
)

// Kafka error codes the tests expect.
const (
	codeUnknownTopicOrPartition = 3
	codeNotLeaderOrFollower     = 6
	codeUnsupportedVersion      = 35
	codeThrottlingQuotaExceeded = 89
)

// TestKgoProduceConsumeEveryCodec produces with kgo (every codec; idempotent
// with acks=all, acks=leader and acks=none; keyed records with headers) and
// consumes every record back with a kgo consumer (Metadata, InitProducerId,
// Produce, ListOffsets, Fetch).
func TestKgoProduceConsumeEveryCodec(t *testing.T) {
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		id    int8
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	}
	acks := []struct {
		name       string
		opts       []kgo.Opt
		idempotent bool
	}{
		{name: "idempotent-acks-all", idempotent: true},
		{name: "acks-leader", opts: []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		{name: "acks-none", opts: []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}},
	}
	const partitions, n = 3, 300
	c := startCluster(t, testbroker.Config{})
	for _, cc := range codecs {
		for _, ack := range acks {
			t.Run(cc.name+"/"+ack.name, func(t *testing.T) {
				topic := "codec-" + cc.name + "-" + ack.name
				require.NoError(t, c.CreateTopic(topic, partitions))
				opts := append([]kgo.Opt{kgo.ProducerBatchCompression(cc.codec), kgo.ProducerLinger(time.Millisecond)}, ack.opts...)
				cl := newClient(t, c, opts...)
				filler := strings.Repeat("compressible ", 8)
				recs := make([]*kgo.Record, n)
				for i := range recs {
					recs[i] = &kgo.Record{
						Topic: topic,
						Key:   []byte("key-" + strconv.Itoa(i%17)),
						Value: []byte(fmt.Sprintf("%d|%s", i, filler)),
						Headers: []kgo.RecordHeader{
							{Key: "i", Value: []byte(strconv.Itoa(i))},
							{Key: "codec", Value: []byte(cc.name)},
						},
					}
				}
				require.NoError(t, cl.ProduceSync(testContext(t), recs...).FirstErr())

				got := consumeN(t, c, topic, n)
				byIndex := make(map[int]*kgo.Record, n)
				lastInPartition := map[int32]int{}
				for _, r := range got {
					i, err := strconv.Atoi(strings.SplitN(string(r.Value), "|", 2)[0])
					require.NoError(t, err)
					require.NotContains(t, byIndex, i, "record %d consumed twice", i)
					byIndex[i] = r
					assert.Equal(t, "key-"+strconv.Itoa(i%17), string(r.Key))
					require.Len(t, r.Headers, 2)
					assert.Equal(t, strconv.Itoa(i), string(r.Headers[0].Value))
					assert.Equal(t, cc.name, string(r.Headers[1].Value))
					// Keyed records of one producer keep their order per partition.
					if last, ok := lastInPartition[r.Partition]; ok {
						assert.Greater(t, i, last, "partition %d out of order", r.Partition)
					}
					lastInPartition[r.Partition] = i
				}
				assert.Len(t, byIndex, n)

				// The broker's own view agrees, and saw the codec and the
				// producer id kgo used.
				total, compressed := 0, 0
				for _, prs := range brokerRecords(t, c, topic, partitions) {
					for _, r := range prs {
						total++
						if r.Compression == cc.id {
							compressed++
						}
						if ack.idempotent {
							assert.GreaterOrEqual(t, r.ProducerID, int64(0))
							assert.GreaterOrEqual(t, r.Sequence, int32(0))
						} else {
							assert.Equal(t, int64(-1), r.ProducerID)
						}
					}
				}
				assert.Equal(t, n, total)
				assert.Positive(t, compressed, "no batch arrived with codec %s", cc.name)
			})
		}
	}
}

// TestKgoListOffsets checks ListOffsets (earliest, latest, by timestamp) with
// kgo's raw requests and a kgo consumer that starts at a timestamp.
func TestKgoListOffsets(t *testing.T) {
	c := startCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("lo", 1))
	cl := newClient(t, c, kgo.DefaultProduceTopic("lo"))
	ctx := testContext(t)
	base := time.UnixMilli(1_700_000_000_000)
	// Three batches: offsets 0-1 at base, 2-3 at base+10s, 4-5 at base+20s.
	for b := 0; b < 3; b++ {
		ts := base.Add(time.Duration(b) * 10 * time.Second)
		require.NoError(t, cl.ProduceSync(ctx,
			&kgo.Record{Value: []byte(fmt.Sprintf("%d-a", b)), Timestamp: ts},
			&kgo.Record{Value: []byte(fmt.Sprintf("%d-b", b)), Timestamp: ts},
		).FirstErr())
	}
	require.NoError(t, c.DeleteRecordsBefore("lo", 0, 1))

	cases := []struct {
		name       string
		ts         int64
		wantOffset int64
	}{
		{"earliest", -2, 1},
		{"latest", -1, 6},
		{"first at or after a timestamp", base.Add(5 * time.Second).UnixMilli(), 2},
		{"exact timestamp", base.Add(20 * time.Second).UnixMilli(), 4},
		{"after every record", base.Add(time.Hour).UnixMilli(), -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "lo"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = 0, tc.ts
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			require.NoError(t, err)
			require.Len(t, resp.Topics, 1)
			require.Len(t, resp.Topics[0].Partitions, 1)
			p := resp.Topics[0].Partitions[0]
			assert.Equal(t, int16(0), p.ErrorCode)
			assert.Equal(t, tc.wantOffset, p.Offset)
		})
	}

	got := consumeN(t, c, "lo", 2, kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(base.Add(15*time.Second).UnixMilli())))
	assert.Equal(t, "2-a", string(got[0].Value))
	assert.Equal(t, int64(4), got[0].Offset)
	assert.Equal(t, base.Add(20*time.Second).UnixMilli(), got[0].Timestamp.UnixMilli())
}

// TestKgoAdminRequests drives CreateTopics, Metadata (topic ids, auto
// creation), CreatePartitions, DeleteTopics and InitProducerId with kgo's
// raw kmsg requests.
func TestKgoAdminRequests(t *testing.T) {
	c := startCluster(t, testbroker.Config{AllowAutoTopicCreation: true, DefaultPartitions: 2})
	cl := newClient(t, c)
	ctx := testContext(t)

	metadata := func(t *testing.T, autoCreate bool, topics ...string) *kmsg.MetadataResponse {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = autoCreate
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp
	}

	t.Run("CreateTopics", func(t *testing.T) {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 5000
		for _, name := range []string{"admin-a", "admin-b"} {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 6, 1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Len(t, resp.Topics, 2)
		for _, rt := range resp.Topics {
			assert.Equal(t, int16(0), rt.ErrorCode, "%s: %v", rt.Topic, rt.ErrorMessage)
			assert.NotEqual(t, [16]byte{}, rt.TopicID, "CreateTopics v7+ returns the topic id")
		}
		// Creating it again fails with TOPIC_ALREADY_EXISTS (36).
		resp, err = req.RequestWith(ctx, cl)
		require.NoError(t, err)
		assert.Equal(t, int16(36), resp.Topics[0].ErrorCode)
	})

	t.Run("Metadata with topic ids and spread leaders", func(t *testing.T) {
		resp := metadata(t, false, "admin-a")
		require.Len(t, resp.Topics, 1)
		mt := resp.Topics[0]
		require.Equal(t, int16(0), mt.ErrorCode)
		require.Len(t, mt.Partitions, 6)
		assert.NotEqual(t, [16]byte{}, mt.TopicID)
		leaders := map[int32]int{}
		for _, p := range mt.Partitions {
			leaders[p.Leader]++
		}
		assert.Len(t, leaders, 3, "6 partitions on 3 brokers: every broker leads some")
		assert.Len(t, resp.Brokers, 3)

		// Metadata v12+ can name a topic by id alone.
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = mt.TopicID
		req.Topics = append(req.Topics, rt)
		byID, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Len(t, byID.Topics, 1)
		assert.Equal(t, int16(0), byID.Topics[0].ErrorCode)
		assert.Equal(t, "admin-a", deref(byID.Topics[0].Topic))
	})

	t.Run("Metadata auto creation", func(t *testing.T) {
		resp := metadata(t, false, "auto-no")
		require.Len(t, resp.Topics, 1)
		assert.Equal(t, int16(codeUnknownTopicOrPartition), resp.Topics[0].ErrorCode)

		metadata(t, true, "auto-yes") // may answer LEADER_NOT_AVAILABLE while creating, as Kafka does
		resp = metadata(t, false, "auto-yes")
		require.Len(t, resp.Topics, 1)
		assert.Equal(t, int16(0), resp.Topics[0].ErrorCode)
		assert.Len(t, resp.Topics[0].Partitions, 2, "auto-created topics get DefaultPartitions")
	})

	t.Run("CreatePartitions", func(t *testing.T) {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "admin-b", 9
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Len(t, resp.Topics, 1)
		assert.Equal(t, int16(0), resp.Topics[0].ErrorCode, deref(resp.Topics[0].ErrorMessage))
		md := metadata(t, false, "admin-b")
		assert.Len(t, md.Topics[0].Partitions, 9)
	})

	t.Run("DeleteTopics", func(t *testing.T) {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr("admin-a")
		req.Topics = append(req.Topics, rt)
		req.TopicNames = append(req.TopicNames, "admin-a")
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Len(t, resp.Topics, 1)
		assert.Equal(t, int16(0), resp.Topics[0].ErrorCode)
		md := metadata(t, false, "admin-a")
		assert.Equal(t, int16(codeUnknownTopicOrPartition), md.Topics[0].ErrorCode)
	})

	t.Run("InitProducerId", func(t *testing.T) {
		// Without a transactional id Kafka's coordinator hands out a new
		// producer id with epoch 0 every time, even when the request names
		// the current id and epoch: an idempotent producer bumps its epoch
		// locally (KIP-360).
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = 60000
		first, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Equal(t, int16(0), first.ErrorCode)
		assert.GreaterOrEqual(t, first.ProducerID, int64(0))
		assert.Equal(t, int16(0), first.ProducerEpoch)

		again := kmsg.NewPtrInitProducerIDRequest()
		again.TransactionTimeoutMillis = 60000
		again.ProducerID, again.ProducerEpoch = first.ProducerID, first.ProducerEpoch
		second, err := again.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Equal(t, int16(0), second.ErrorCode)
		assert.NotEqual(t, first.ProducerID, second.ProducerID)
		assert.Equal(t, int16(0), second.ProducerEpoch)

		// With a transactional id, a request naming the current id and
		// epoch bumps the epoch (KIP-360). Sent to the id's coordinator
		// directly; the other brokers answer NOT_COORDINATOR.
		txn := kmsg.NewPtrInitProducerIDRequest()
		txn.TransactionalID = kmsg.StringPtr("txn")
		txn.TransactionTimeoutMillis = 60000
		coordinator := cl.Broker(int(c.Coordinator(testbroker.CoordinatorTransaction, "txn")))
		r, err := coordinator.Request(ctx, txn)
		require.NoError(t, err)
		tx1 := r.(*kmsg.InitProducerIDResponse)
		require.Equal(t, int16(0), tx1.ErrorCode)
		txn.ProducerID, txn.ProducerEpoch = tx1.ProducerID, tx1.ProducerEpoch
		r, err = coordinator.Request(ctx, txn)
		require.NoError(t, err)
		tx2 := r.(*kmsg.InitProducerIDResponse)
		require.Equal(t, int16(0), tx2.ErrorCode)
		assert.Equal(t, tx1.ProducerID, tx2.ProducerID)
		assert.Equal(t, tx1.ProducerEpoch+1, tx2.ProducerEpoch)
	})

	t.Run("kgo producer with auto creation", func(t *testing.T) {
		p := newClient(t, c, kgo.AllowAutoTopicCreation())
		require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "auto-by-produce", Value: []byte("x")}).FirstErr())
		got := consumeN(t, c, "auto-by-produce", 1)
		assert.Equal(t, "x", string(got[0].Value))
	})
}

// buildBatch makes one uncompressed batch with samsa's own record batch
// builder, for raw Produce requests.
func buildBatch(t *testing.T, values ...string) []byte {
	t.Helper()
	var b recordbatch.Builder
	b.Reset(make([]byte, 0, 4096))
	for _, v := range values {
		require.True(t, b.Append(time.Now().UnixMilli(), nil, []byte(v), nil))
	}
	batch, _, err := b.Finish(nil, nil)
	require.NoError(t, err)
	recordbatch.Stamp(batch, -1, -1, -1)
	return batch
}

// TestKgoNotLeader sends a Produce to a broker that does not lead the
// partition, then to the leader, and checks that a kgo producer follows a
// leader move.
func TestKgoNotLeader(t *testing.T) {
	c := startCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("nl", 1))
	cl := newClient(t, c)
	ctx := testContext(t)
	leader, _, err := c.Leader("nl", 0)
	require.NoError(t, err)
	wrong := (leader + 1) % 3

	// Produce v13+ names topics by id (KIP-516).
	mdReq := kmsg.NewPtrMetadataRequest()
	mdt := kmsg.NewMetadataRequestTopic()
	mdt.Topic = kmsg.StringPtr("nl")
	mdReq.Topics = append(mdReq.Topics, mdt)
	md, err := mdReq.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, md.Topics, 1)
	topicID := md.Topics[0].TopicID

	var brokers []kmsg.ProduceResponseBroker // node endpoints of the last response
	produce := func(broker int32) kmsg.ProduceResponseTopicPartition {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "nl", topicID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 0, buildBatch(t, "a", "b")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(broker)).Request(ctx, req)
		require.NoError(t, err)
		pr := resp.(*kmsg.ProduceResponse)
		brokers = pr.Brokers
		require.Len(t, pr.Topics, 1)
		require.Len(t, pr.Topics[0].Partitions, 1)
		return pr.Topics[0].Partitions[0]
	}

	p := produce(wrong)
	assert.Equal(t, int16(codeNotLeaderOrFollower), p.ErrorCode)
	// kgo negotiates the newest Produce version both sides know (>= 10):
	// the response names the current leader (KIP-951).
	assert.Equal(t, leader, p.CurrentLeader.LeaderID)
	assert.GreaterOrEqual(t, p.CurrentLeader.LeaderEpoch, int32(0))
	require.Len(t, brokers, 1, "v10+ NOT_LEADER responses carry the leader's endpoint")
	assert.Equal(t, leader, brokers[0].NodeID)
	assert.Equal(t, c.Addrs()[leader], net.JoinHostPort(brokers[0].Host, strconv.Itoa(int(brokers[0].Port))))

	p = produce(leader)
	assert.Equal(t, int16(0), p.ErrorCode)
	assert.Equal(t, int64(0), p.BaseOffset)

	// A kgo producer keeps working when the leader moves.
	prod := newClient(t, c, kgo.DefaultProduceTopic("nl"))
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr())
	require.NoError(t, c.MoveLeader("nl", 0, wrong))
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr())
	got := consumeN(t, c, "nl", 4)
	assert.Equal(t, []string{"a", "b", "before", "after"}, values(got))
}

func values(rs []*kgo.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

// throttleHook records the throttles kgo reports.
type throttleHook struct {
	mu        sync.Mutex
	throttles []time.Duration
	after     []bool
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, afterResponse bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.throttles = append(h.throttles, d)
	h.after = append(h.after, afterResponse)
}

func (h *throttleHook) max() (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var m time.Duration
	after := false
	for i, d := range h.throttles {
		if d > m {
			m, after = d, h.after[i]
		}
	}
	return m, after
}

// TestKgoSeesThrottles checks that kgo's HookBrokerThrottle sees the
// throttles of the produce quota, of an interceptor and of the KIP-599
// mutation quota.
func TestKgoSeesThrottles(t *testing.T) {
	t.Run("produce quota", func(t *testing.T) {
		c := startCluster(t, testbroker.Config{ProduceByteRate: 32 << 10})
		require.NoError(t, c.CreateTopic("pq", 1))
		hook := &throttleHook{}
		cl := newClient(t, c, kgo.WithHooks(hook), kgo.DefaultProduceTopic("pq"))
		// Random bytes: kgo compresses by default, and a compressible value
		// would stay under the quota.
		value := make([]byte, 1024)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range value {
			value[i] = byte(rng.Uint32())
		}
		ctx := testContext(t)
		for i := 0; i < 48; i++ { // 48 KiB against 32 KiB/s with a 32 KiB burst
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr())
		}
		d, after := hook.max()
		assert.Positive(t, d, "kgo saw no throttle")
		assert.True(t, after, "Produce v6+ throttles after the response (KIP-219)")
		hw, err := c.HighWatermark("pq", 0)
		require.NoError(t, err)
		assert.Equal(t, int64(48), hw)
	})
	t.Run("interceptor", func(t *testing.T) {
		c := startCluster(t, testbroker.Config{})
		require.NoError(t, c.CreateTopic("it", 1))
		hook := &throttleHook{}
		cl := newClient(t, c, kgo.WithHooks(hook), kgo.DefaultProduceTopic("it"))
		c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, Throttle: 300 * time.Millisecond})
		require.NoError(t, cl.ProduceSync(testContext(t), &kgo.Record{Value: []byte("x")}).FirstErr())
		d, _ := hook.max()
		assert.Equal(t, 300*time.Millisecond, d)
	})
	t.Run("mutation quota", func(t *testing.T) {
		c := startCluster(t, testbroker.Config{MutationRate: 1, MutationBurst: 5})
		hook := &throttleHook{}
		cl := newClient(t, c, kgo.WithHooks(hook))
		create := func(name string) int16 {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = 5000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 10, 1
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(testContext(t), cl)
			require.NoError(t, err)
			return resp.Topics[0].ErrorCode
		}
		assert.Equal(t, int16(0), create("m1"), "admitted while tokens > 0; tokens go negative")
		assert.Equal(t, int16(codeThrottlingQuotaExceeded), create("m2"))
		d, _ := hook.max()
		assert.GreaterOrEqual(t, d, 4*time.Second, "throttle until the bucket is positive again (5 tokens at 1/s)")
	})
}

// TestKgoIdempotentProducerSurvivesRestart produces with kgo's idempotent
// producer while a broker stops and restarts, leadership moves, and
// connections drop after appends (an ambiguous outcome that makes kgo resend
// batches the broker already has). Every record must be stored exactly
// once, in order.
func TestKgoIdempotentProducerSurvivesRestart(t *testing.T) {
	const partitions, n = 6, 3000
	c := startCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("chaos", partitions))
	var matched atomic.Int64
	c.Intercept(testbroker.Interceptor{
		Keys: []int16{0}, After: true, Drop: true, Probability: 0.1,
		Match: func(int32, kmsg.Request) bool { matched.Add(1); return true },
	})
	cl := newClient(t, c,
		kgo.DefaultProduceTopic("chaos"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond),
		kgo.ProducerBatchMaxBytes(2<<10),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	ctx := testContext(t)
	var failed atomic.Int64
	var firstErr atomic.Value
	pad := strings.Repeat("-", 100)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			r := &kgo.Record{Partition: int32(i % partitions), Value: []byte(strconv.Itoa(i) + pad)}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			})
		}
	}
	leader, _, err := c.Leader("chaos", 0)
	require.NoError(t, err)

	// kgo gets its producer id with the first record; a broker stopping
	// during that InitProducerId makes kgo give up on the id ("broker
	// closed the connection immediately after a request"), which is not
	// what this test is about. Then stop the leader with requests in flight.
	produce(0, 1)
	require.NoError(t, cl.Flush(ctx))
	produce(1, n/3)
	require.NoError(t, c.StopBroker(leader)) // with requests in flight
	produce(n/3, 2*n/3)
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, c.RestartBroker(leader))
	require.NoError(t, c.MoveLeader("chaos", 0, leader))
	produce(2*n/3, n)
	require.NoError(t, cl.Flush(ctx))
	require.Zero(t, failed.Load(), "first error: %v", firstErr.Load())

	for p, recs := range brokerRecords(t, c, "chaos", partitions) {
		want := int(p)
		for _, r := range recs {
			require.Equal(t, strconv.Itoa(want)+pad, string(r.Value), "partition %d: duplicate, loss or reorder at offset %d", p, r.Offset)
			want += partitions
		}
		assert.Equal(t, int(p)+n, want, "partition %d is missing records", p)
	}
	t.Logf("produce requests matched by the drop interceptor (10%% dropped): %d", matched.Load())
}

// TestApiVersionsFallback asks ApiVersions in a version the broker does not
// know, over a raw connection: the broker must answer in v0 with
// UNSUPPORTED_VERSION and its version ranges, which is how librdkafka and
// kgo find a usable version.
func TestApiVersionsFallback(t *testing.T) {
	c := startCluster(t, testbroker.Config{Brokers: 1})
	conn, err := net.DialTimeout("tcp", c.Addrs()[0], 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))

	// Request header v1: key, version, correlation id, client id; the body
	// of a version the broker does not know is opaque to it.
	body := binary.BigEndian.AppendUint16(nil, 18)
	body = binary.BigEndian.AppendUint16(body, 999)
	body = binary.BigEndian.AppendUint32(body, 42)
	body = binary.BigEndian.AppendUint16(body, 4)
	body = append(body, "test"...)
	body = append(body, 0) // empty tagged fields, as a flexible request would have
	_, err = conn.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
	require.NoError(t, err)
	_, err = conn.Write(body)
	require.NoError(t, err)

	r := bufio.NewReader(conn)
	var size, corr int32
	require.NoError(t, binary.Read(r, binary.BigEndian, &size))
	require.NoError(t, binary.Read(r, binary.BigEndian, &corr))
	assert.Equal(t, int32(42), corr)
	resp := make([]byte, size-4)
	_, err = io.ReadFull(r, resp)
	require.NoError(t, err)
	var av kmsg.ApiVersionsResponse
	av.Version = 0
	require.NoError(t, av.ReadFrom(resp))
	assert.Equal(t, int16(codeUnsupportedVersion), av.ErrorCode)
	keys := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range av.ApiKeys {
		keys[k.ApiKey] = k
	}
	require.Contains(t, keys, int16(18))
	require.Contains(t, keys, int16(0))
	assert.LessOrEqual(t, keys[0].MinVersion, int16(3))
	assert.GreaterOrEqual(t, keys[0].MaxVersion, int16(11), "Produce v3 to at least v11")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
