package producer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// stalledShares sends keyless records for two phases of phase each while
// Produce requests to broker 1 are never answered, and returns the share
// of each phase's records that went to broker 1's partitions (Leader
// from the test broker), once the stall is lifted and every record is
// acknowledged.
func stalledShares(t *testing.T, cfg Config, phase time.Duration) (first, second float64) {
	t.Helper()
	c := newCluster(t, testbroker.Config{Brokers: 3})
	require.NoError(t, c.CreateTopic("avail", 6))
	stallBroker1 := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Brokers: []int32{1}, Stall: true})
	cfg.BatchSize = 1000
	cfg.Linger = time.Millisecond
	cfg.DeliveryTimeout = time.Minute
	p := newProducer(t, c, cfg)
	ctx := context.Background()
	// The topic's metadata first, so that the phases are about
	// partitioning, not waiting for metadata.
	ps, err := p.PartitionsFor(ctx, "avail")
	require.NoError(t, err)
	require.Len(t, ps, 6)

	var mu sync.Mutex
	parts := map[int]int32{}
	var wg sync.WaitGroup
	start := time.Now()
	var phaseOf []int
	for i := 0; time.Since(start) < 2*phase; i++ {
		ph := 0
		if time.Since(start) >= phase {
			ph = 1
		}
		phaseOf = append(phaseOf, ph)
		wg.Add(1)
		p.SendCallback(ctx, &Record{Topic: "avail", Value: make([]byte, 100)}, func(md RecordMetadata, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("record %d: %v", i, err)
				return
			}
			mu.Lock()
			parts[i] = md.Partition
			mu.Unlock()
		})
		if i%50 == 0 {
			time.Sleep(time.Millisecond) // a steady rate, not one burst
		}
	}
	stallBroker1()
	wg.Wait()
	var on1, all [2]int
	for i, ph := range phaseOf {
		leader, _, err := c.Leader("avail", parts[i])
		require.NoError(t, err)
		all[ph]++
		if leader == 1 {
			on1[ph]++
		}
	}
	require.Positive(t, all[0])
	require.Positive(t, all[1])
	return float64(on1[0]) / float64(all[0]), float64(on1[1]) / float64(all[1])
}

// TestPartitionerAvailabilityTimeoutLeavesOutAStalledBroker: with
// partitioner.availability.timeout.ms, once a broker has not taken a
// Produce request for that long, the adaptive sticky partitioner gives its
// partitions no more records (KIP-794); with adaptive partitioning off the
// timeout does nothing (as in Java) and the stalled broker keeps its
// uniform third.
func TestPartitionerAvailabilityTimeoutLeavesOutAStalledBroker(t *testing.T) {
	const phase = 800 * time.Millisecond
	t.Run("adaptive with the timeout", func(t *testing.T) {
		_, second := stalledShares(t, Config{PartitionerAvailabilityTimeout: 150 * time.Millisecond}, phase)
		// Without the timeout the queues alone leave broker 1 a share
		// of about 2%: the timeout leaves it none.
		assert.Zero(t, second, "broker 1's share once past the timeout")
	})
	t.Run("adaptive off", func(t *testing.T) {
		first, second := stalledShares(t, Config{DisableAdaptivePartitioning: true, PartitionerAvailabilityTimeout: 150 * time.Millisecond}, phase)
		assert.InDelta(t, 1.0/3, first, 0.12, "uniform: a third, stalled or not")
		assert.InDelta(t, 1.0/3, second, 0.12, "uniform: a third, stalled or not")
	})
}
