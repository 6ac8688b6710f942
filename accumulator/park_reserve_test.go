package accumulator

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
)

// TestFailedParkLeavesNoReservation: a Park whose bookkeeping block was
// reserved but whose parking chunk could not be allocated used to return
// ErrBufferExhausted with the block still charged to t.credit. Nothing is
// parked, so no event is posted and nothing calls resetLocked; once the
// topic's partitions are known Park is never called again, and the block
// stayed reserved for the producer's life (until Close's FailParked).
func TestFailedParkLeavesNoReservation(t *testing.T) {
	const batchSize = 1024
	probe := New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: mustPool(t, 1<<20, batchSize), ChargeBookkeeping: true})
	blk := chargeBlock * probe.ParkCharge()
	require.Positive(t, blk)

	size := int64(blk + batchSize/2) // room for the block, not for a chunk
	pool := mustPool(t, size, batchSize)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool, ChargeBookkeeping: true})
	topic := a.NewTopic("t")

	parked, err := topic.Park(context.Background(), 0, nil, []byte("v"), nil, 0, 1, false)
	require.ErrorIs(t, err, bufferpool.ErrBufferExhausted)
	require.False(t, parked)

	// The topic's partitions arrive; Sends append directly from now on.
	topic.SetPartitions([]*Partition[int, struct{}, struct{}]{a.NewPartition(topic, 0)})
	parked, err = topic.Park(context.Background(), 0, nil, []byte("v"), nil, 0, 2, false)
	require.NoError(t, err)
	require.False(t, parked)

	require.Equal(t, size, pool.Available(), "a failed Park left %d bytes reserved", size-pool.Available())
}

func mustPool(t *testing.T, size int64, pooled int) *bufferpool.SimplePool {
	t.Helper()
	p, err := bufferpool.New(bufferpool.Options{Size: size, PooledSize: pooled})
	require.NoError(t, err)
	return p
}
