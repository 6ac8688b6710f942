package harness

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// createTopic makes a topic of more partitions than one request may create
// on Kafka (KAFKA-17870) in steps, grows a smaller existing topic (an
// earlier run stopped while growing it), and refuses a larger one.
func TestCreateTopicInStepsAndGrowing(t *testing.T) {
	ctx, addr, cl := kafkaStandIn(t)

	big := maxPartitionsPerRequest + 3
	require.NoError(t, createTopic(ctx, addr, "big", big))
	ps, err := topicPartitions(ctx, cl, "big")
	require.NoError(t, err)
	assert.Len(t, ps, big, "made in two steps")

	require.NoError(t, createTopic(ctx, addr, "grown", 3))
	require.NoError(t, createTopic(ctx, addr, "grown", 7), "an existing smaller topic is grown")
	ps, err = topicPartitions(ctx, cl, "grown")
	require.NoError(t, err)
	assert.Len(t, ps, 7)

	require.ErrorContains(t, createTopic(ctx, addr, "grown", 5), "exists with 7 partitions, not 5")
}

// On a cluster the harness launched, a workload's topic is deleted when
// the workload ends (its log would otherwise stay on disk for the whole
// run); on a user's cluster (-kafka-bootstrap) it is left.
func TestKafkaTopicDeletedAfterItsWorkload(t *testing.T) {
	ctx, addr, cl := kafkaStandIn(t)

	spec, err := workload.ByName("100B", 10)
	require.NoError(t, err)
	for _, launched := range []bool{true, false} {
		b, err := startKafka(ctx, Options{KafkaBootstrap: addr}, spec, launched)
		require.NoError(t, err)
		_, err = topicPartitions(ctx, cl, spec.Topic())
		require.NoError(t, err, "the workload's topic exists while it runs")
		require.NoError(t, b.stop())
		_, err = topicPartitions(ctx, cl, spec.Topic())
		if launched {
			assert.Error(t, err, "the launched cluster's topic is deleted after its workload")
		} else {
			assert.NoError(t, err, "a user's cluster keeps the topic")
		}
	}
}

// kafkaStandIn starts a one-broker kfake cluster standing in for Kafka and
// returns a context bounding the test, its address and a client of it;
// all are closed when the test ends.
func kafkaStandIn(t *testing.T) (context.Context, string, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return ctx, addr, cl
}
