package interop

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/producer"
)

// TestSamsaRecreatedTopicGetsNoOldRecords (issue 32, KIP-516): against
// kfake and the test broker, records buffered for a topic that is then
// deleted and recreated under its name fail with UNKNOWN_TOPIC_ID naming
// the recreation, and a consumer of the new topic reads only the records
// sent after it, from offset 0. Produce goes at v13, by topic id.
func TestSamsaRecreatedTopicGetsNoOldRecords(t *testing.T) {
	for _, sb := range samsaBrokers {
		t.Run(sb.name, func(t *testing.T) {
			b := sb.start(t)
			var mu sync.Mutex
			versions := map[int16]int{}
			if b.kf != nil {
				b.kf.ControlKey(0, func(req kmsg.Request) (kmsg.Response, error, bool) {
					b.kf.KeepControl()
					mu.Lock()
					versions[req.GetVersion()]++
					mu.Unlock()
					return nil, nil, false
				})
			}
			const topic = "recreated"
			b.createTopic(t, topic, 1)
			p := newSamsaProducer(t, b.addrs, producer.Config{Linger: 30 * time.Second, MetadataMaxAge: 100 * time.Millisecond})
			ctx := testContext(t)
			send := func(v string) *producer.Future {
				return p.Send(ctx, &producer.Record{Topic: topic, Value: []byte(v)})
			}
			warm := send("warm")
			require.NoError(t, p.Flush(ctx))
			_, err := warm.Wait(ctx)
			require.NoError(t, err)
			var olds []*producer.Future
			for i := range 10 {
				olds = append(olds, send(fmt.Sprint("old-", i)))
			}
			deleteTopic(t, b, topic)
			b.createTopic(t, topic, 1)
			for i, f := range olds {
				wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				_, err := f.Wait(wctx)
				cancel()
				require.ErrorIs(t, err, kerr.UnknownTopicID, "record old-%d", i)
				require.Contains(t, err.Error(), "deleted and recreated", "record old-%d", i)
			}
			var news []*producer.Future
			for i := range 3 {
				news = append(news, send(fmt.Sprint("new-", i)))
			}
			require.NoError(t, p.Flush(ctx))
			for _, f := range news {
				_, err := f.Wait(ctx)
				require.NoError(t, err)
			}
			got := consumeAll(t, b.addrs, topic, 1, 3)
			for i, r := range got {
				require.Equal(t, fmt.Sprint("new-", i), string(r.Value), "record %d of the recreated topic", i)
				require.Equal(t, int64(i), r.Offset)
			}
			if b.kf != nil {
				mu.Lock()
				defer mu.Unlock()
				require.NotZero(t, versions[13], "Produce versions kfake saw: %v", versions)
				require.Len(t, versions, 1, "Produce versions kfake saw: %v", versions)
			}
		})
	}
}

// deleteTopic deletes topic through the broker's DeleteTopics, as an admin
// tool would (the test broker's own call for it).
func deleteTopic(t *testing.T, b *samsaBroker, topic string) {
	t.Helper()
	if b.tb != nil {
		require.NoError(t, b.tb.DeleteTopic(topic))
		return
	}
	cl := newKgoClient(t, b.addrs)
	defer cl.Close()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 5000
	req.TopicNames = []string{topic}
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Zero(t, resp.Topics[0].ErrorCode, "DeleteTopics %s", topic)
}

// TestSamsaLeaderHintOnKfake (KIP-951): kfake moves a partition's leader
// while it holds every Metadata request; the NOT_LEADER_OR_FOLLOWER
// answer's CurrentLeader and NodeEndpoints take the record to the new
// leader without a Metadata answer.
func TestSamsaLeaderHintOnKfake(t *testing.T) {
	b := startKfake(t)
	kf := b.kf
	const topic = "hinted"
	b.createTopic(t, topic, 1)
	p := newSamsaProducer(t, b.addrs, producer.Config{DeliveryTimeout: 20 * time.Second})
	ctx := testContext(t)
	send := func() error {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("v")}).Wait(wctx)
		return err
	}
	require.NoError(t, send())
	var mu sync.Mutex
	var nodes []int32
	kf.ControlKey(0, func(kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		mu.Lock()
		nodes = append(nodes, kf.CurrentNode())
		mu.Unlock()
		return nil, nil, false
	})
	release := make(chan struct{})
	var held sync.Once
	defer held.Do(func() { close(release) })
	kf.ControlKey(3, func(kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		kf.SleepControl(func() { <-release })
		return nil, nil, false
	})
	leader := kf.LeaderFor(topic, 0)
	to := (leader + 1) % 3
	require.NoError(t, kf.MoveTopicPartition(topic, 0, to))
	require.NoError(t, send(), "the record did not reach the new leader while Metadata was held")
	held.Do(func() { close(release) })
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int32{leader, to}, nodes, "Produce requests by broker")
}
