package testbroker

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeClock is a settable clock for the quota tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// TestMutationQuotaKIPExample reproduces KIP-599's worked example: R = 5
// mutations/s, B = 500. A request creating 7 topics × 80 partitions is
// admitted (K = 500 > 0) and leaves K = -60; the next request is refused
// with a throttle of -K/R = 12 s, and is admitted once K > 0 again.
func TestMutationQuotaKIPExample(t *testing.T) {
	clock := newFakeClock()
	s := newBucketSet(5, 500, clock.Now)

	ok, _ := s.admit("client", 7*80)
	require.True(t, ok, "K = 500 > 0: admitted")
	assert.InDelta(t, -60, s.tokens("client"), 1e-9)

	steps := []struct {
		advance time.Duration
		ok      bool
		wait    time.Duration
	}{
		{0, false, 12 * time.Second},
		{6 * time.Second, false, 6 * time.Second},
		{6 * time.Second, false, time.Millisecond}, // K = 0: not > 0 yet
		{200 * time.Millisecond, true, 0},          // K = 1
		{0, false, 11800 * time.Millisecond},       // K = 1 - 60 = -59
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		ok, wait := s.admit("client", 60)
		assert.Equal(t, st.ok, ok, "step %d", i)
		assert.Equal(t, st.wait, wait, "step %d", i)
	}
	// Another client has its own full bucket.
	ok, _ = s.admit("other", 1000)
	assert.True(t, ok)

	// The bucket never holds more than the burst.
	clock.Advance(time.Hour)
	assert.InDelta(t, 500, s.tokens("client"), 1e-9)
}

// createTopicsRequest asks for n topics of partitions partitions each.
func createTopicsRequest(version int16, prefix string, n int, partitions int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = version
	req.TimeoutMillis = 5000
	for i := range n {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = fmt.Sprintf("%s-%d", prefix, i)
		rt.NumPartitions, rt.ReplicationFactor = partitions, -1
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestMutationQuotaOverTheWire: the KIP example through CreateTopics v6
// (refusal with THROTTLING_QUOTA_EXCEEDED), CreatePartitions v3 and
// DeleteTopics v5.
func TestMutationQuotaOverTheWire(t *testing.T) {
	clock := newFakeClock()
	c := newTestCluster(t, Config{Brokers: 1, MutationRate: 5, MutationBurst: 500, Clock: clock.Now})

	w := dialBroker(t, c.Addrs()[0], "admin")
	resp := w.request(createTopicsRequest(6, "a", 7, 80)).(*kmsg.CreateTopicsResponse)
	for _, rt := range resp.Topics {
		assert.Zero(t, rt.ErrorCode, rt.Topic)
	}
	assert.Zero(t, resp.ThrottleMillis)

	resp = w.request(createTopicsRequest(6, "b", 2, 1)).(*kmsg.CreateTopicsResponse)
	for _, rt := range resp.Topics {
		assert.Equal(t, ecThrottlingQuotaExceeded, rt.ErrorCode, rt.Topic)
	}
	assert.EqualValues(t, 12000, resp.ThrottleMillis)
	_, err := c.HighWatermark("b-0", 0)
	assert.ErrorIs(t, err, ErrUnknownTopic, "refused topics are not created")
	// The connection is now muted for 12 s (KIP-219); go on with others.

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 3
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "a-0", 81
	cp.Topics = append(cp.Topics, cpt)
	cpr := dialBroker(t, c.Addrs()[0], "admin").request(cp).(*kmsg.CreatePartitionsResponse)
	assert.Equal(t, ecThrottlingQuotaExceeded, cpr.Topics[0].ErrorCode)

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version = 5
	dt.TopicNames = []string{"a-1"}
	dtr := dialBroker(t, c.Addrs()[0], "admin").request(dt).(*kmsg.DeleteTopicsResponse)
	assert.Equal(t, ecThrottlingQuotaExceeded, dtr.Topics[0].ErrorCode)

	// Another client id is not throttled.
	resp = dialBroker(t, c.Addrs()[0], "other").request(createTopicsRequest(6, "c", 1, 1)).(*kmsg.CreateTopicsResponse)
	assert.Zero(t, resp.Topics[0].ErrorCode)

	// After 12.4 s, K = 2: each of the two 1-partition topics finds
	// K > 0 in turn (12.2 s, K = 1, would admit only the first).
	clock.Advance(12*time.Second + 400*time.Millisecond)
	resp = dialBroker(t, c.Addrs()[0], "admin").request(createTopicsRequest(6, "b", 2, 1)).(*kmsg.CreateTopicsResponse)
	for _, rt := range resp.Topics {
		assert.Zero(t, rt.ErrorCode, rt.Topic)
	}
}

// TestMutationQuotaOldVersions: versions that do not know error 89 are
// accepted and throttled, as KIP-599 says: CreateTopics v3-v5 get the
// throttle time and a muted connection, v0-v2 a delayed response.
func TestMutationQuotaOldVersions(t *testing.T) {
	clock := newFakeClock() // frozen: throttle times are exact
	c := newTestCluster(t, Config{Brokers: 1, MutationRate: 100, MutationBurst: 10, Clock: clock.Now})

	// 30 partitions with K = 10 > 0: K = -20, a debt of 200 ms.
	resp := dialBroker(t, c.Addrs()[0], "old").request(createTopicsRequest(5, "a", 1, 30)).(*kmsg.CreateTopicsResponse)
	assert.Zero(t, resp.Topics[0].ErrorCode)

	// v5: accepted although over quota, throttle time in the response,
	// then the connection is muted.
	w := dialBroker(t, c.Addrs()[0], "old")
	resp = w.request(createTopicsRequest(5, "b", 1, 1)).(*kmsg.CreateTopicsResponse)
	assert.Zero(t, resp.Topics[0].ErrorCode, "accepted")
	assert.EqualValues(t, 210, resp.ThrottleMillis) // K = -21
	start := time.Now()
	w.request(kmsg.NewPtrApiVersionsRequest())
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "muted")

	// v2: the response itself is delayed.
	start = time.Now()
	resp = dialBroker(t, c.Addrs()[0], "old").request(createTopicsRequest(2, "c", 1, 1)).(*kmsg.CreateTopicsResponse)
	assert.Zero(t, resp.Topics[0].ErrorCode, "accepted")
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "delayed")
	_, err := c.HighWatermark("c-0", 0)
	assert.NoError(t, err)
}

// TestProduceQuota: KIP-219 semantics for the produce byte-rate quota.
func TestProduceQuota(t *testing.T) {
	clock := newFakeClock()
	c := newTestCluster(t, Config{Brokers: 1, ProduceByteRate: 10_000, Clock: clock.Now})
	require.NoError(t, c.CreateTopic("t", 1))
	batch := testBatch{n: 10, valueSize: 1000}.build(t) // ~10 KiB: over the 1 s burst

	// v9: answered at once with a throttle time, records appended, then
	// the connection is not read until the throttle passes.
	w := dialBroker(t, c.Addrs()[0], "p")
	resp := w.request(produceRequest(9, 1, "t", map[int32][]byte{0: batch})).(*kmsg.ProduceResponse)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	throttle := time.Duration(resp.ThrottleMillis) * time.Millisecond
	assert.Greater(t, throttle, time.Duration(0))
	start := time.Now()
	w.request(kmsg.NewPtrApiVersionsRequest())
	assert.GreaterOrEqual(t, time.Since(start), throttle-5*time.Millisecond, "connection muted")

	// v5 (before KIP-219): the response is delayed.
	w = dialBroker(t, c.Addrs()[0], "p")
	start = time.Now()
	resp = w.request(produceRequest(5, 1, "t", map[int32][]byte{0: batch})).(*kmsg.ProduceResponse)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	assert.Greater(t, resp.ThrottleMillis, int32(0))
	assert.GreaterOrEqual(t, time.Since(start), time.Duration(resp.ThrottleMillis-5)*time.Millisecond, "delayed")

	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	assert.EqualValues(t, 20, hw, "throttled requests are still appended")
}

// TestMutationQuotaPerTopic: KIP-599 admits the topics of one request one
// by one while K > 0. With K = 100 and three topics of 60 partition
// mutations each, the first two are admitted (K = 100-60-60 = -20) and the
// third is refused with THROTTLING_QUOTA_EXCEEDED and a throttle of
// -K/R = 20 s, for each of the three APIs; a version older than error 89
// admits all three and throttles the client for the whole debt instead.
func TestMutationQuotaPerTopic(t *testing.T) {
	names := []string{"x-0", "x-1", "x-2"}
	cases := []struct {
		name string
		// setup creates what the request needs, outside the quota.
		setup func(t *testing.T, c *Cluster)
		req   kmsg.Request
		// codes returns the per-topic error codes and the throttle.
		codes func(kmsg.Response) ([]int16, int32)
		// done reports whether topic i was mutated.
		done func(c *Cluster, i int) bool
		// strict: refusals (v6+, v3+, v5+); else all admitted.
		strict   bool
		throttle int32
	}{
		{
			name:  "CreateTopics v6",
			setup: func(*testing.T, *Cluster) {},
			req:   createTopicsRequest(6, "x", 3, 60),
			codes: createTopicsCodes, done: topicExists, strict: true, throttle: 20000,
		},
		{
			name:  "CreateTopics v5",
			setup: func(*testing.T, *Cluster) {},
			req:   createTopicsRequest(5, "x", 3, 60),
			codes: createTopicsCodes, done: topicExists, throttle: 80000,
		},
		{
			name: "CreatePartitions v3",
			setup: func(t *testing.T, c *Cluster) {
				for _, n := range names {
					require.NoError(t, c.CreateTopic(n, 1))
				}
			},
			req:   createPartitionsRequest(3, names, 61),
			codes: createPartitionsCodes, strict: true, throttle: 20000,
			done: func(c *Cluster, i int) bool {
				_, err := c.HighWatermark(names[i], 60)
				return err == nil
			},
		},
		{
			name: "DeleteTopics v5",
			setup: func(t *testing.T, c *Cluster) {
				for _, n := range names {
					require.NoError(t, c.CreateTopic(n, 60))
				}
			},
			req:   deleteTopicsRequest(5, names),
			codes: deleteTopicsCodes, strict: true, throttle: 20000,
			done: func(c *Cluster, i int) bool { return !topicExists(c, i) },
		},
		{
			name: "DeleteTopics v4",
			setup: func(t *testing.T, c *Cluster) {
				for _, n := range names {
					require.NoError(t, c.CreateTopic(n, 60))
				}
			},
			req:   deleteTopicsRequest(4, names),
			codes: deleteTopicsCodes, throttle: 80000,
			done: func(c *Cluster, i int) bool { return !topicExists(c, i) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock() // frozen: K and throttles are exact
			c := newTestCluster(t, Config{Brokers: 1, DefaultPartitions: 1, MutationRate: 1, MutationBurst: 100, Clock: clock.Now})
			tc.setup(t, c)
			w := dialBroker(t, c.Addrs()[0], "admin")
			resp := w.request(tc.req)
			codes, throttle := tc.codes(resp)
			want := []int16{0, 0, 0}
			if tc.strict {
				want[2] = ecThrottlingQuotaExceeded
			}
			assert.Equal(t, want, codes)
			for i := range names {
				assert.Equal(t, want[i] == 0, tc.done(c, i), "topic %d mutated", i)
			}
			assert.Equal(t, tc.throttle, throttle, "throttle time -K/R")
			wantK := -20.0
			if !tc.strict {
				wantK = -80
			}
			assert.InDelta(t, wantK, c.mutations.tokens(bucketKey(false, true, "", "admin")), 1e-9)
		})
	}
}

func topicExists(c *Cluster, i int) bool {
	_, err := c.HighWatermark(fmt.Sprintf("x-%d", i), 0)
	return err == nil
}

func createTopicsCodes(r kmsg.Response) ([]int16, int32) {
	resp := r.(*kmsg.CreateTopicsResponse)
	var codes []int16
	for _, t := range resp.Topics {
		codes = append(codes, t.ErrorCode)
	}
	return codes, resp.ThrottleMillis
}

func createPartitionsRequest(version int16, topics []string, count int32) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = version
	for _, n := range topics {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = n, count
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func createPartitionsCodes(r kmsg.Response) ([]int16, int32) {
	resp := r.(*kmsg.CreatePartitionsResponse)
	var codes []int16
	for _, t := range resp.Topics {
		codes = append(codes, t.ErrorCode)
	}
	return codes, resp.ThrottleMillis
}

func deleteTopicsRequest(version int16, topics []string) *kmsg.DeleteTopicsRequest {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = version
	req.TopicNames = topics
	return req
}

func deleteTopicsCodes(r kmsg.Response) ([]int16, int32) {
	resp := r.(*kmsg.DeleteTopicsResponse)
	var codes []int16
	for _, t := range resp.Topics {
		codes = append(codes, t.ErrorCode)
	}
	return codes, resp.ThrottleMillis
}
