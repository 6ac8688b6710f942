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

	// After 12 s and a bit, K > 0 and the client is admitted again.
	clock.Advance(12*time.Second + 200*time.Millisecond)
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
