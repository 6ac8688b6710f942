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

// TestBugHeldMemoryGoesToNewSendsNotToMoves: while parked records cannot
// move for lack of memory, the IO goroutine turns on the pool's Hold
// (producer/sink_metadata.go, sink.hold) so that released memory is kept
// for MoveParked. But Hold keeps it only from callers already waiting in
// Allocate: bufferpool.SimplePool.TryAllocate (and TryReserve) hand it to
// anyone while held, and every Send's first try is TryAllocate
// (Accumulator.allocate, Partition.growLocked, Accumulator.credit). So the
// next Send, here one parking yet another record of the starved topic,
// takes the held memory, and the parked records still cannot move (and
// eventually expire): exactly what the hold is documented to prevent
// (DESIGN.md "Memory bound", TestParkedRecordsMoveWhileSendsWaitForMemory
// only has Sends that wait, none that arrive while memory is held).
// Interleaving: pool full (two parking chunks of topic A, one batch of
// topic B), the one overdraft batch in use; A's partitions arrive;
// MoveParked starves; Hold(true); B's batch is freed (1 KiB held); a Send
// parks a record for A, taking that 1 KiB through TryAllocate; MoveParked
// starves again.
func TestBugHeldMemoryGoesToNewSendsNotToMoves(t *testing.T) {
	const batchSize = 1024
	pool := mustPool(t, 3*batchSize, batchSize)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool, MaxBlock: time.Second})
	ctx := context.Background()
	value := make([]byte, 400) // two per parking chunk
	topicA := a.NewTopic("a")
	for i := range 4 {
		parked, err := topicA.Park(ctx, 0, nil, value, nil, -1, i, false)
		require.NoError(t, err)
		require.True(t, parked)
	}
	_, psB := known(a, "b", 1)
	require.NoError(t, psB[0].Append(ctx, 0, nil, []byte("b"), nil, 100, false))
	require.Zero(t, pool.Available(), "the pool is full")
	a.overdraft.Store(true) // the one batch outside the pool is in use (another topic's moved records)

	pa := a.NewPartition(topicA, 0)
	topicA.SetPartitions([]*Partition[int, struct{}, struct{}]{pa})
	place := func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) { return pa, nil }
	fail := func(int, error) { t.Fatal("no record fails") }
	require.False(t, topicA.MoveParked(place, fail), "starved: no memory for a batch")
	pool.Hold(true) // sink.hold(true)

	for _, b := range drain(psB[0]) {
		a.Free(b) // 1 KiB released: held for the moves
	}
	parked, err := topicA.Park(ctx, 0, nil, value, nil, -1, 4, true)
	require.NoError(t, err)
	require.True(t, parked)
	require.True(t, topicA.MoveParked(place, fail),
		"the memory held for MoveParked went to a Send that arrived meanwhile (TryAllocate ignores Hold); %d bytes available", pool.Available())
}

// TestBugHoldLetsNewSendsOvertakeWaitingOnes: while the pool is held, a
// Send that arrives after others queued in Allocate gets the released
// memory at once through TryAllocate (SimplePool.TryAllocate skips its
// "waiters first" check when held), so Sends are no longer served first
// in, first out: the waiting Send can fail with ErrBufferExhausted after
// MaxBlock although memory was released after it queued, to a later Send.
// Interleaving: pool full; Send W waits for a new batch; Hold(true) (parked
// records starving); a batch is freed; Send N (later) appends to another
// partition and gets the memory; Hold(false); W times out.
func TestBugHoldLetsNewSendsOvertakeWaitingOnes(t *testing.T) {
	const batchSize = 1024
	const maxBlock = 300 * time.Millisecond
	pool := mustPool(t, 2*batchSize, batchSize)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool, MaxBlock: maxBlock})
	ctx := context.Background()
	_, ps := known(a, "t", 2)
	half := make([]byte, 500) // two do not fit in a batch
	require.NoError(t, ps[0].Append(ctx, 0, nil, half, nil, 0, false))
	require.NoError(t, ps[1].Append(ctx, 0, nil, []byte("y"), nil, 1, false))
	require.Zero(t, pool.Available())

	w := make(chan error, 1)
	go func() { w <- ps[0].Append(ctx, 0, nil, half, nil, 2, true) }()
	require.Eventually(t, func() bool { return pool.Stats().Waiters == 1 }, time.Second, time.Millisecond)
	pool.Hold(true)
	for _, b := range drain(ps[1]) {
		a.Free(b)
	}
	errN := ps[1].Append(ctx, 0, nil, []byte("later"), nil, 3, false) // TrySend-like: never waits
	pool.Hold(false)
	errW := <-w
	require.False(t, errN == nil && errW != nil,
		"a later Send got the released memory (%v) while the earlier one, waiting, failed: %v", errN, errW)
}
