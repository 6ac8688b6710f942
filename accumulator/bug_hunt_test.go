package accumulator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
)

// Tests that prove bugs found by review (h-accum). Each fails on the code it
// was written against; the comment says the interleaving.

// TestBugAppendBlocksLongerThanMaxBlock: MaxBlock is "how long Send may
// block waiting for buffer memory" (producer.Config.MaxBlock), but an
// Append that opens a batch waits twice, each time for a full MaxBlock: once
// in allocate for the buffer, then in reserve for the batch's bookkeeping
// (Partition.Append, partition.go: a.allocate, then a.reserve, each given
// a.cfg.MaxBlock). Interleaving: the pool is full; Append waits for its
// buffer; just before MaxBlock a buffer's worth is released, exactly enough
// for the buffer and nothing for its first charge; Append then waits a
// second MaxBlock for the charge, and fails with ErrBufferExhausted after
// about 1.7×MaxBlock. (Java's RecordAccumulator passes the remaining time of
// max.block.ms to every wait.)
func TestBugAppendBlocksLongerThanMaxBlock(t *testing.T) {
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
		"Append blocked %v with MaxBlock %v (two waits of MaxBlock each)", took.Round(time.Millisecond), maxBlock)
}

// TestBugParkBlocksLongerThanMaxBlock: the same in Topic.Park (topic.go):
// it waits up to MaxBlock for its bookkeeping block (a.reserve), then up to
// MaxBlock again for a parking chunk (t.acc.allocate), and loops when
// another Park took the chunk's room meanwhile. Interleaving: the pool is
// full; Park waits for a block; just before MaxBlock exactly a block is
// released; Park then waits a second MaxBlock for the chunk.
func TestBugParkBlocksLongerThanMaxBlock(t *testing.T) {
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
		"Park blocked %v with MaxBlock %v (two waits of MaxBlock each)", took.Round(time.Millisecond), maxBlock)
}

// TestBugSplitHalvesAreNotCharged: with ChargeBookkeeping, every batch and
// every record in it holds pool credit for its bookkeeping (DESIGN.md
// "Memory bound": 504 bytes per batch, 64 per record). The producer's split
// after MESSAGE_TOO_LARGE (producer/sink_response.go, sink.split) builds
// the halves with NewDetachedBatch and AddCompletion, which reserve
// nothing (accumulator.go: NewDetachedBatch, newBatch leaves credit 0),
// then Frees the original batch, which gives its whole credit back. So the
// halves' records and structs are live but no longer charged: the pool
// hands their bookkeeping's bytes to new Sends. Interleaving: a batch of
// 100 records is sealed and taken; it is split into two halves; the
// original is freed.
func TestBugSplitHalvesAreNotCharged(t *testing.T) {
	const batchSize = 16 << 10
	pool := mustPool(t, 1<<20, batchSize)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool,
		ChargeBookkeeping: true, MaxBlock: time.Second})
	_, ps := known(a, "t", 1)
	ctx := context.Background()
	const n = 100
	for i := range n {
		require.NoError(t, ps[0].Append(ctx, 0, nil, []byte("v"), nil, i, false))
	}
	require.True(t, ps[0].sealOpen())
	b := ps[0].NextSealed()
	require.Equal(t, n, b.Records.Len())

	// sink.split, without the decoding: two detached halves take the
	// records' completions, then the original is freed.
	var halves []*Batch[int, struct{}, struct{}]
	bufs := 0
	for h := range 2 {
		nb := a.NewDetachedBatch(ps[0], 1024)
		bufs += cap(nb.buf)
		for j := range n / 2 {
			a.AddCompletion(nb, *b.Records.At(h*n/2 + j))
		}
		halves = append(halves, nb)
	}
	a.Free(b)

	outstanding := int(pool.Size() - pool.Available())
	bookkeeping := 2*a.BatchCharge() + n*a.RecordCharge()
	require.GreaterOrEqual(t, outstanding, bufs+bookkeeping,
		"the split halves hold %d records in 2 batches, but only their %d buffer bytes are charged, not their %d bytes of bookkeeping",
		n, bufs, bookkeeping)
	for _, h := range halves {
		a.Free(h)
	}
}
