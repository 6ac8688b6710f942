package accumulator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
)

// MaxBlock bounds an append's waits for memory in all (Java's
// remainingWaitMs), however many it takes: Partition.Append waits for its
// batch's buffer and then for the batch's bookkeeping, Topic.Park for a
// bookkeeping block and then for a parking chunk, and each used to get a
// full MaxBlock of its own.

// TestAppendWaitsAtMostMaxBlockInAll: the pool is full; Append waits for
// its batch's buffer; two thirds into MaxBlock exactly a buffer's worth is
// released, nothing for the batch's first bookkeeping charge. Append's
// second wait gets only the third left, and it fails with
// ErrBufferExhausted at MaxBlock, not at about 1.7×MaxBlock.
func TestAppendWaitsAtMostMaxBlockInAll(t *testing.T) {
	const batchSize = 1024
	const maxBlock = 300 * time.Millisecond
	pool := mustPool(t, 64<<10, batchSize)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool,
		ChargeBookkeeping: true, MaxBlock: maxBlock})
	_, ps := known(a, "t", 1)

	buf := pool.TryAllocate(batchSize) // released later: exactly the batch's buffer
	filler := pool.TryAllocate(int(pool.Available()))
	require.NotNil(t, buf)
	require.NotNil(t, filler)
	defer pool.Release(filler)

	go func() {
		time.Sleep(maxBlock * 2 / 3)
		pool.Release(buf)
	}()
	start := time.Now()
	err := ps[0].Append(context.Background(), 0, nil, []byte("v"), nil, 1, true)
	took := time.Since(start)
	require.ErrorIs(t, err, bufferpool.ErrBufferExhausted)
	require.LessOrEqual(t, took, maxBlock+maxBlock/4,
		"Append blocked %v with MaxBlock %v", took.Round(time.Millisecond), maxBlock)
	require.Equal(t, int64(batchSize), pool.Available(), "the failed Append gave its buffer back")
}

// TestAppendSucceedsWhenMemoryComesWithinMaxBlock: the shared deadline
// still lets a second wait succeed: the buffer comes a third into
// MaxBlock, the bookkeeping two thirds into it.
func TestAppendSucceedsWhenMemoryComesWithinMaxBlock(t *testing.T) {
	const batchSize = 1024
	const maxBlock = 2 * time.Second
	pool := mustPool(t, 64<<10, batchSize)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool,
		ChargeBookkeeping: true, MaxBlock: maxBlock})
	_, ps := known(a, "t", 1)

	buf := pool.TryAllocate(batchSize)
	charge := pool.TryAllocate(a.firstCharge())
	filler := pool.TryAllocate(int(pool.Available()))
	require.NotNil(t, buf)
	require.NotNil(t, charge)
	require.NotNil(t, filler)
	defer pool.Release(filler)

	go func() {
		time.Sleep(maxBlock / 6)
		pool.Release(buf)
		time.Sleep(maxBlock / 6)
		pool.Release(charge)
	}()
	require.NoError(t, ps[0].Append(context.Background(), 0, nil, []byte("v"), nil, 1, true))
}

// TestParkWaitsAtMostMaxBlockInAll: the same in Topic.Park. The pool is
// full; Park waits for its bookkeeping block; two thirds into MaxBlock
// exactly a block is released; its wait for a parking chunk gets only the
// third left.
func TestParkWaitsAtMostMaxBlockInAll(t *testing.T) {
	const batchSize = 1024
	const maxBlock = 300 * time.Millisecond
	pool := mustPool(t, 64<<10, batchSize)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool,
		ChargeBookkeeping: true, MaxBlock: maxBlock})
	topic := a.NewTopic("unknown")
	blk := chargeBlock * a.ParkCharge()

	require.True(t, pool.TryReserve(blk)) // released later: exactly Park's block
	filler := pool.TryAllocate(int(pool.Available()))
	require.NotNil(t, filler)
	defer pool.Release(filler)

	go func() {
		time.Sleep(maxBlock * 2 / 3)
		pool.Unreserve(blk)
	}()
	start := time.Now()
	_, err := topic.Park(context.Background(), 0, nil, []byte("v"), nil, -1, 1, true)
	took := time.Since(start)
	require.ErrorIs(t, err, bufferpool.ErrBufferExhausted)
	require.LessOrEqual(t, took, maxBlock+maxBlock/4,
		"Park blocked %v with MaxBlock %v", took.Round(time.Millisecond), maxBlock)
	require.Equal(t, int64(blk), pool.Available(), "the failed Park gave its block back")
}
