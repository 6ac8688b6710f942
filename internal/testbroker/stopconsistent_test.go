package testbroker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetadataNeverNamesAStoppedLeader: while brokers stop, every Metadata
// answer is consistent: a partition's leader is one of the brokers it
// lists, as Kafka's are. (StopBroker used to stop the broker before moving
// its partitions, and an answer in between named a leader it did not list:
// franz-go then failed records with "unknown broker".)
func TestMetadataNeverNamesAStoppedLeader(t *testing.T) {
	const topic, partitions = "stop-consistent", 48
	c := newTestCluster(t, Config{Brokers: 3})
	require.NoError(t, c.CreateTopic(topic, partitions))
	w := dialBroker(t, c.Addrs()[0], "metadata-loop") // broker 0 never stops

	var stop atomic.Bool
	var bad, answers atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(9)
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, ok := w.request(req).(*kmsg.MetadataResponse)
			if !ok {
				return
			}
			answers.Add(1)
			listed := map[int32]bool{}
			for _, b := range resp.Brokers {
				listed[b.NodeID] = true
			}
			for _, mt := range resp.Topics {
				for _, mp := range mt.Partitions {
					if mp.Leader >= 0 && !listed[mp.Leader] {
						bad.Add(1)
					}
				}
			}
		}
	})
	for range 40 {
		for _, id := range []int32{1, 2} {
			for p := range int32(partitions) {
				if p%3 == id {
					require.NoError(t, c.MoveLeader(topic, p, id))
				}
			}
			// Stop while answers are being built.
			for seen := answers.Load(); answers.Load() < seen+2; {
				time.Sleep(50 * time.Microsecond)
			}
			require.NoError(t, c.StopBroker(id))
			require.NoError(t, c.RestartBroker(id))
		}
	}
	stop.Store(true)
	wg.Wait()
	assert.Positive(t, answers.Load())
	assert.Zero(t, bad.Load(), "partitions whose leader the same answer did not list")
}
