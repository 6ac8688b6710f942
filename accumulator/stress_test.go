package accumulator

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
)

// TestStressParkMoveAppendOrder: senders park and append concurrently
// (as producer.append does) while the IO side publishes the partitions
// mid-stream, moves parked records, drains and frees batches, in a pool
// small enough to starve. Every accepted record is seen exactly once, in
// each sender's order, and the pool ends exact.
func TestStressParkMoveAppendOrder(t *testing.T) {
	const batchSize = 1024
	pool, err := bufferpool.New(bufferpool.Options{Size: 16 << 10, PooledSize: batchSize, LeakDetection: true})
	require.NoError(t, err)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, InitialBatchSize: 512, MaxBatchSize: 1 << 20,
		Pool: pool, ChargeBookkeeping: true, MaxBlock: 20 * time.Millisecond})
	topic := a.NewTopic("t")
	part := a.NewPartition(topic, 0)
	const senders, perSender = 4, 3000
	var accepted [senders]atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	value := make([]byte, 40)
	for s := range senders {
		wg.Go(func() {
			for i := range perSender {
				c := s*perSender + i
				var err error
				if topic.Partitions() == nil {
					var parked bool
					parked, err = topic.Park(context.Background(), 0, nil, value, nil, -1, c, true)
					if err == nil && !parked {
						err = part.Append(context.Background(), 0, nil, value, nil, c, true)
					}
				} else {
					err = part.Append(context.Background(), 0, nil, value, nil, c, true)
				}
				if err == nil {
					accepted[s].Add(1)
				}
			}
		})
	}
	last := [senders]int{-1, -1, -1, -1}
	seen := 0
	check := func(b *Batch[int, struct{}, struct{}]) {
		for i := range b.Records.Len() {
			c := *b.Records.At(i)
			s, n := c/perSender, c%perSender
			require.Greater(t, n, last[s], "sender %d: record %d after %d", s, n, last[s])
			last[s] = n
			seen++
		}
		a.Free(b)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	published := false
	fail := func(int, error) { t.Error("no record fails to place") }
	place := func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) { return part, nil }
	for round := 0; ; round++ {
		if !published && round == 50 {
			topic.SetPartitions([]*Partition[int, struct{}, struct{}]{part})
			published = true
		}
		if published {
			topic.MoveParked(place, fail)
		}
		part.sealOpen()
		for b := part.NextSealed(); b != nil; b = part.NextSealed() {
			check(b)
		}
		select {
		case <-done:
			if !published {
				continue
			}
			if r, _ := topic.Parked(); r > 0 {
				continue
			}
			part.sealOpen()
			for b := part.NextSealed(); b != nil; b = part.NextSealed() {
				check(b)
			}
			close(stop)
			var total int64
			for s := range senders {
				total += accepted[s].Load()
			}
			require.Equal(t, int(total), seen, "every accepted record seen once")
			require.Equal(t, pool.Size(), pool.Available(), "the pool ends exact")
			return
		default:
			time.Sleep(100 * time.Microsecond)
		}
	}
}
