package interop

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// cluster and client a test starts must be closed by its cleanup.
func TestMain(m *testing.M) {
	// Producers without a Logger log Warn and above to slog.Default():
	// the tests' deliberate failures stay out of the output.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every test of this package; nothing here should come
// near it on a healthy machine.
const testTimeout = 60 * time.Second

// testContext returns a context that ends with the test or after
// testTimeout.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// startCluster starts a test broker cluster that the test's cleanup closes.
func startCluster(t *testing.T, cfg testbroker.Config) *testbroker.Cluster {
	t.Helper()
	c, err := testbroker.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// newClient returns a kgo client seeded with the cluster's brokers, with
// short backoffs so that retries do not slow the tests down. The test's
// cleanup closes it (before the cluster, as cleanups run last in, first
// out).
func newClient(t *testing.T, c *testbroker.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(c.Addrs()...),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.MetadataMinAge(20 * time.Millisecond),
		kgo.RetryTimeout(20 * time.Second),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// consumeN reads records of topic from the start with a fresh kgo consumer
// until it has n of them, and fails the test if they do not come within the
// test's context or if a fetch fails.
func consumeN(t *testing.T, c *testbroker.Cluster, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	ctx := testContext(t)
	opts = append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}, opts...)
	cl := newClient(t, c, opts...)
	defer cl.Close()
	out := pollN(ctx, t, cl, topic, n)
	require.Len(t, out, n, "more records than produced")
	return out
}

// pollN polls cl until it has at least n records of topic, failing the test
// on a fetch error or when ctx ends first.
func pollN(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, n int) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records of %s before the deadline: %v", len(out), n, topic, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch error on %s/%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}

// brokerRecords returns every record the cluster stores for topic, across
// its partitions.
func brokerRecords(t *testing.T, c *testbroker.Cluster, topic string, partitions int32) map[int32][]testbroker.Record {
	t.Helper()
	out := make(map[int32][]testbroker.Record)
	for p := int32(0); p < partitions; p++ {
		recs, err := c.Records(topic, p)
		require.NoError(t, err)
		out[p] = recs
	}
	return out
}

// valuePad pads the values of produceValues so that every codec shrinks
// them (kgo sends a batch uncompressed when compressing does not help).
var valuePad = strings.Repeat("x", 100)

// produceValues produces values "v0"+valuePad to "v<n-1>"+valuePad, each
// with a header i=<index>, to partition 0 of topic with kgo, five records
// per batch.
func produceValues(t *testing.T, c *testbroker.Cluster, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	opts = append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)
	cl := newClient(t, c, opts...)
	defer cl.Close()
	ctx := testContext(t)
	for i := 0; i < n; i += 5 {
		var recs []*kgo.Record
		for j := i; j < i+5 && j < n; j++ {
			recs = append(recs, &kgo.Record{
				Value:   []byte("v" + strconv.Itoa(j) + valuePad),
				Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(j))}},
			})
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
}
