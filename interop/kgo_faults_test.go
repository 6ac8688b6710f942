package interop

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// Kafka error codes injected by the fault tests.
const (
	codeRequestTimedOut = 7
)

// TestKgoFaults runs kgo producers through the test broker's fault
// injection, as the producer's reliability tests will: every fault must be
// one a real client recovers from, and leave each record stored once.
func TestKgoFaults(t *testing.T) {
	cases := []struct {
		name string
		// fault is applied to the cluster before producing.
		fault func(t *testing.T, c *testbroker.Cluster)
		opts  []kgo.Opt
	}{
		{
			// The ambiguous outcome: the batch is appended, the client is
			// told it timed out and resends it; the broker answers the
			// resend as a duplicate with the original offset.
			name: "REQUEST_TIMED_OUT after append",
			fault: func(t *testing.T, c *testbroker.Cluster) {
				c.Intercept(testbroker.Interceptor{Keys: []int16{0}, After: true, ErrorCode: codeRequestTimedOut, Times: 3})
			},
		},
		{
			name: "NOT_LEADER_OR_FOLLOWER before append",
			fault: func(t *testing.T, c *testbroker.Cluster) {
				c.Intercept(testbroker.Interceptor{Keys: []int16{0}, ErrorCode: codeNotLeaderOrFollower, Times: 3})
			},
		},
		{
			name: "connection dropped before the request is handled",
			fault: func(t *testing.T, c *testbroker.Cluster) {
				c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Drop: true, Times: 2})
			},
		},
		{
			name: "slow metadata",
			fault: func(t *testing.T, c *testbroker.Cluster) {
				c.Intercept(testbroker.Interceptor{Keys: []int16{3}, Delay: 200 * time.Millisecond, Times: 2})
			},
		},
		{
			name: "failing metadata",
			fault: func(t *testing.T, c *testbroker.Cluster) {
				c.Intercept(testbroker.Interceptor{Keys: []int16{3}, ErrorCode: 5, Times: 2}) // LEADER_NOT_AVAILABLE
			},
		},
		{
			name: "produce stalled, then released",
			fault: func(t *testing.T, c *testbroker.Cluster) {
				remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true})
				time.AfterFunc(200*time.Millisecond, remove)
			},
		},
		{
			name: "non-idempotent, REQUEST_TIMED_OUT before append",
			fault: func(t *testing.T, c *testbroker.Cluster) {
				c.Intercept(testbroker.Interceptor{Keys: []int16{0}, ErrorCode: codeRequestTimedOut, Times: 2})
			},
			opts: []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck())},
		},
	}
	const n = 50
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, testbroker.Config{})
			require.NoError(t, c.CreateTopic("f", 1))
			tc.fault(t, c)
			opts := append([]kgo.Opt{kgo.DefaultProduceTopic("f"), kgo.ProducerLinger(0)}, tc.opts...)
			cl := newClient(t, c, opts...)
			ctx := testContext(t)
			for i := 0; i < n; i += 10 {
				var recs []*kgo.Record
				for j := i; j < i+10; j++ {
					recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(j))})
				}
				require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
			}
			recs, err := c.Records("f", 0)
			require.NoError(t, err)
			require.Len(t, recs, n, "every record stored exactly once")
			for i, r := range recs {
				assert.Equal(t, strconv.Itoa(i), string(r.Value))
			}
		})
	}
}

// TestKgoProducesBeforeTopicExists sends before the topic exists (no auto
// creation); the producer waits, retrying metadata, until the topic is
// created.
func TestKgoProducesBeforeTopicExists(t *testing.T) {
	c := startCluster(t, testbroker.Config{})
	cl := newClient(t, c, kgo.DefaultProduceTopic("later"), kgo.UnknownTopicRetries(-1))
	ctx := testContext(t)
	done := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Value: []byte("early")}, func(_ *kgo.Record, err error) { done <- err })
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("produce finished before the topic existed: %v", err)
	default:
	}
	require.NoError(t, c.CreateTopic("later", 1))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("produce did not finish after the topic was created")
	}
	got := consumeN(t, c, "later", 1)
	assert.Equal(t, "early", string(got[0].Value))
}

// TestKgoSinkMode produces to a sink cluster: offsets advance, nothing is
// kept, and a consumer reads nothing.
func TestKgoSinkMode(t *testing.T) {
	c := startCluster(t, testbroker.Config{Sink: true})
	require.NoError(t, c.CreateTopic("sink", 1))
	cl := newClient(t, c, kgo.DefaultProduceTopic("sink"))
	ctx := testContext(t)
	var recs []*kgo.Record
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	res := cl.ProduceSync(ctx, recs...)
	require.NoError(t, res.FirstErr())
	assert.Equal(t, int64(99), res[99].Record.Offset)
	hw, err := c.HighWatermark("sink", 0)
	require.NoError(t, err)
	assert.Equal(t, int64(100), hw)
	stored, err := c.Records("sink", 0)
	require.NoError(t, err)
	assert.Empty(t, stored)
	batches, err := c.NumBatches("sink", 0)
	require.NoError(t, err)
	assert.Positive(t, batches)
}
