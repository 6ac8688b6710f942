package interop

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKfakeRoundTrip checks that kfake builds with the franz-go and kmsg
// versions this repository pins, and that a kgo producer and consumer work
// against it: the producer's tests use kfake as a second, independent
// broker implementation.
func TestKfakeRoundTrip(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(3, "kf"))
	require.NoError(t, err)
	t.Cleanup(c.Close)

	ctx := testContext(t)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("kf"),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	require.NoError(t, err)
	t.Cleanup(prod.Close)
	const n = 100
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))})
	}
	require.NoError(t, prod.ProduceSync(ctx, recs...).FirstErr())

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("kf"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	t.Cleanup(cons.Close)
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d records", len(seen), n)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			assert.False(t, seen[string(r.Value)], "record %s consumed twice", r.Value)
			seen[string(r.Value)] = true
		}
	}
}
