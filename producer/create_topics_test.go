package producer

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/metadata"
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

// TestAutoCreatePartitionsWinOverBrokerAutoCreation (issue 22): with
// AutoCreateTopics, a new topic gets AutoCreatePartitions and
// AutoCreateReplicationFactor even on a broker that auto-creates topics
// (auto.create.topics.enable with num.partitions=1): the producer's Metadata
// requests never allow auto-creation, so the broker cannot create the topic
// with its own count before the producer's CreateTopics. Found with the
// example's -partitions 6 against a real Kafka: the topic had 1 partition.
func TestAutoCreatePartitionsWinOverBrokerAutoCreation(t *testing.T) {
	cases := []struct {
		name        string
		partitions  int32
		rf          int16
		wantParts   int
		wantReplica int
	}{
		{"partitions asked", 6, 0, 6, 3},
		{"partitions and replication factor asked", 6, 2, 6, 2},
		{"replication factor asked", 0, 2, 1, 2},
		{"broker defaults", -1, -1, 1, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{AllowAutoTopicCreation: true, DefaultPartitions: 1})
			var (
				mu       sync.Mutex
				allowed  int // Metadata requests that allowed auto-creation
				metadata int
				creates  int
			)
			c.Intercept(testbroker.Interceptor{
				Keys: []int16{3, 19},
				Match: func(_ int32, req kmsg.Request) bool {
					mu.Lock()
					defer mu.Unlock()
					switch r := req.(type) {
					case *kmsg.MetadataRequest:
						metadata++
						if r.AllowAutoTopicCreation {
							allowed++
						}
					case *kmsg.CreateTopicsRequest:
						creates++
					}
					return false
				},
			})
			var logs testutil.SyncBuffer
			p := newProducer(t, c, Config{
				AutoCreateTopics:            true,
				AutoCreatePartitions:        tc.partitions,
				AutoCreateReplicationFactor: tc.rf,
				Logger:                      slog.New(slog.NewTextHandler(&logs, nil)),
			})
			const topic = "asked-for"
			var fs []*Future
			for i := range 60 {
				fs = append(fs, p.Send(context.Background(), &Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}))
			}
			parts := map[int32]bool{}
			for _, md := range waitAll(t, fs) {
				parts[md.Partition] = true
			}

			mt := clusterTopic(t, c, topic)
			require.Len(t, mt.Partitions, tc.wantParts, "partitions of the topic in the broker's metadata")
			for _, mp := range mt.Partitions {
				require.Len(t, mp.Replicas, tc.wantReplica, "replicas of partition %d", mp.ID)
			}
			require.Len(t, parts, tc.wantParts, "partitions the records went to")
			mu.Lock()
			defer mu.Unlock()
			require.Positive(t, metadata)
			require.Zero(t, allowed, "Metadata requests that allowed auto-creation, of %d", metadata)
			require.Positive(t, creates, "no CreateTopics request")
			require.NotContains(t, logs.String(), "level=WARN", "a topic the producer created as asked")
		})
	}
}

// TestExistingTopicWithOtherPartitionCountWarnsOnce: a topic that exists
// already keeps its partitions whatever AutoCreatePartitions asks, and the
// producer says so once (Warn, naming the topic, its count and the count
// asked), not per record nor per metadata refresh; no warning when the
// counts agree or none was asked.
func TestExistingTopicWithOtherPartitionCountWarnsOnce(t *testing.T) {
	cases := []struct {
		name     string
		existing int32
		asked    int32
		warnings int
	}{
		{"other count", 2, 6, 1},
		{"same count", 6, 6, 0},
		{"no count asked", 2, -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{AllowAutoTopicCreation: true})
			const topic = "made-before"
			require.NoError(t, c.CreateTopic(topic, tc.existing))
			var logs testutil.SyncBuffer
			p := newProducer(t, c, Config{
				AutoCreateTopics:     true,
				AutoCreatePartitions: tc.asked,
				MetadataMaxAge:       20 * time.Millisecond, // refreshes between the rounds
				Logger:               slog.New(slog.NewTextHandler(&logs, nil)),
			})
			parts := map[int32]bool{}
			for round := range 3 {
				var fs []*Future
				for i := range 40 {
					fs = append(fs, p.Send(context.Background(), &Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte{byte(round)}}))
				}
				for _, md := range waitAll(t, fs) {
					parts[md.Partition] = true
				}
				time.Sleep(50 * time.Millisecond) // a few metadata refreshes
			}
			require.Len(t, parts, int(tc.existing), "partitions the records went to")
			require.Len(t, clusterTopic(t, c, topic).Partitions, int(tc.existing))

			warnings := logs.LinesWith("level=WARN")
			require.Len(t, warnings, tc.warnings, "warnings:\n%s", strings.Join(warnings, ""))
			for _, w := range warnings {
				require.Contains(t, w, "topic="+topic)
				require.Contains(t, w, fmt.Sprintf("partitions=%d", tc.existing))
				require.Contains(t, w, fmt.Sprintf("asked=%d", tc.asked))
			}
		})
	}
}

// clusterTopic returns topic as the cluster's Metadata shows it, read by a
// metadata client of its own that never creates topics.
func clusterTopic(t *testing.T, c *testbroker.Cluster, topic string) *metadata.Topic {
	t.Helper()
	md, err := metadata.New(metadata.Config{Bootstrap: c.Addrs()})
	require.NoError(t, err)
	defer md.Close()
	md.Want(topic)
	deadline := time.After(10 * time.Second)
	for {
		if mt := md.Snapshot().Topics[topic]; mt != nil && mt.Err == nil && len(mt.Partitions) > 0 {
			return mt
		}
		select {
		case <-md.Updates():
		case <-deadline:
			t.Fatalf("no metadata for topic %s: %+v", topic, md.Snapshot().Topics[topic])
		}
	}
}
