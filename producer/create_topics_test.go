package producer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestAutoCreateTopicsBatchesTopicsOneRequestAtATime: with AutoCreateTopics,
// the topics that are due share one CreateTopics request, at most one is in
// flight, and a topic once created is not asked for again while metadata
// catches up (each topic is asked for exactly once, never answered
// TOPIC_ALREADY_EXISTS). Found against a real Kafka: one request per topic,
// all at once, queued behind each other on a quota-muted connection until
// they timed out, and a created topic was asked for again within 28 ms.
func TestAutoCreateTopicsBatchesTopicsOneRequestAtATime(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	var (
		mu       sync.Mutex
		requests int
		inflight int
		maxIn    int
		asked    = map[string]int{}
	)
	c.Intercept(testbroker.Interceptor{
		Keys: []int16{19},
		Match: func(_ int32, req kmsg.Request) bool {
			mu.Lock()
			defer mu.Unlock()
			requests++
			inflight++
			maxIn = max(maxIn, inflight)
			for _, rt := range req.(*kmsg.CreateTopicsRequest).Topics {
				asked[rt.Topic]++
			}
			return true
		},
		Delay: 50 * time.Millisecond, // so that the other topics become due meanwhile
	})
	c.Intercept(testbroker.Interceptor{
		Keys:  []int16{19},
		After: true,
		Match: func(int32, kmsg.Request) bool {
			mu.Lock()
			inflight--
			mu.Unlock()
			return false
		},
	})
	// A created topic is asked for again only if its metadata has not
	// come RetryBackoffMax later: 2 s, so that a slow metadata refresh on
	// a loaded machine does not count as a second request.
	p := newProducer(t, c, Config{AutoCreateTopics: true, AutoCreatePartitions: 2, DisableAutoTopicCreation: true, RetryBackoffMax: 2 * time.Second})
	const topics = 20
	var fs []*Future
	for i := range topics {
		for j := range 10 {
			fs = append(fs, p.Send(context.Background(), &Record{Topic: fmt.Sprintf("batched-%02d", i), Value: []byte{byte(j)}}))
		}
	}
	waitAll(t, fs)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, asked, topics)
	for name, n := range asked {
		require.Equal(t, 1, n, "topic %s asked for %d times", name, n)
	}
	require.Less(t, requests, topics, "one CreateTopics request per topic")
	require.Equal(t, 1, maxIn, "CreateTopics requests in flight at once")
}
