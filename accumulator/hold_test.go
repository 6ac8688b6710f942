package accumulator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
)

// TestHeldMemoryGoesToMovesNotToNewSends: while parked records cannot move
// for lack of memory, the IO goroutine holds the pool (sink.hold) so that
// released memory goes to MoveParked. A Send that arrives meanwhile, here
// one parking yet another record of the starved topic, must not take it:
// every Send tries TryAllocate first (Accumulator.allocate), which used to
// pass a hold, so the parked records still could not move and expired. It
// now waits in the pool's queue, MoveParked takes the held memory
// (TryAllocateHeld) and moves every record, and the Send is served when the
// hold ends. Pool full (two parking chunks of topic A, one batch of topic
// B), the one overdraft batch in use; A's partitions arrive; MoveParked
// starves; Hold(true); B's batch is freed (1 KiB held); a Send parks a
// record for A.
func TestHeldMemoryGoesToMovesNotToNewSends(t *testing.T) {
	const batchSize = 1024
	pool := mustPool(t, 3*batchSize, batchSize)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool, MaxBlock: 5 * time.Second})
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
	_, err := topicA.Park(ctx, 0, nil, value, nil, -1, 4, false)
	require.ErrorIs(t, err, bufferpool.ErrBufferExhausted, "a Send that may not wait took held memory")
	type result struct {
		parked bool
		err    error
	}
	send := make(chan result, 1)
	go func() {
		parked, err := topicA.Park(ctx, 0, nil, value, nil, -1, 5, true)
		send <- result{parked, err}
	}()
	require.Eventually(t, func() bool { return pool.Stats().Waiters == 1 || len(send) > 0 }, 5*time.Second, time.Millisecond)
	require.Empty(t, send, "a Send took the memory held for MoveParked")
	require.True(t, topicA.MoveParked(place, fail),
		"the memory held for MoveParked did not go to it; %d bytes available", pool.Available())
	require.Equal(t, 1, pool.Stats().Waiters, "the Send waits while the pool is held")
	pool.Hold(false) // sink.hold(false): nothing starves
	r := <-send
	require.NoError(t, r.err)
	require.False(t, r.parked, "every parked record moved: the Send appends to a partition")
	var got []int
	for _, b := range drain(pa) {
		for i := range b.Records.Len() {
			got = append(got, *b.Records.At(i))
		}
		a.Free(b)
	}
	require.Equal(t, []int{0, 1, 2, 3}, got)
}

// TestHoldServesWaitingSendsFirst: while the pool is held, a Send that
// arrives after others queued in Allocate must not get released memory
// ahead of them (TryAllocate used to pass a hold): the earlier Send could
// fail with ErrBufferExhausted after MaxBlock though memory was released
// after it queued, to a later Send. Pool full; Send W waits for a new
// batch; Hold(true) (parked records starving); a batch is freed; Send N
// (later, not waiting) fails at once; Hold(false) serves W.
func TestHoldServesWaitingSendsFirst(t *testing.T) {
	const batchSize = 1024
	const maxBlock = 5 * time.Second
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
	require.Eventually(t, func() bool { return pool.Stats().Waiters == 1 }, 5*time.Second, time.Millisecond)
	pool.Hold(true)
	for _, b := range drain(ps[1]) {
		a.Free(b)
	}
	errN := ps[1].Append(ctx, 0, nil, []byte("later"), nil, 3, false) // TrySend-like: never waits
	require.ErrorIs(t, errN, bufferpool.ErrBufferExhausted, "a later Send got memory released while the pool was held")
	start := time.Now()
	pool.Hold(false)
	require.NoError(t, <-w, "the waiting Send was not served when the hold ended")
	require.Less(t, time.Since(start), maxBlock/2)
}

// TestMovesWorkWithAPoolWithoutHeldAllocator: HeldAllocator and
// HeldReserver are optional: with a pluggable pool that has only the Pool
// methods, parked records move with TryAllocate.
func TestMovesWorkWithAPoolWithoutHeldAllocator(t *testing.T) {
	const batchSize = 1024
	pool := struct{ bufferpool.Pool }{mustPool(t, 4*batchSize, batchSize)}
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool,
		ChargeBookkeeping: true, MaxBlock: time.Second})
	require.Nil(t, a.heldAlloc)
	require.Nil(t, a.heldRes)
	ctx := context.Background()
	topic := a.NewTopic("a")
	for i := range 3 {
		parked, err := topic.Park(ctx, 0, nil, make([]byte, 400), nil, -1, i, false)
		require.NoError(t, err)
		require.True(t, parked)
	}
	p := a.NewPartition(topic, 0)
	topic.SetPartitions([]*Partition[int, struct{}, struct{}]{p})
	require.True(t, topic.MoveParked(func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) { return p, nil },
		func(int, error) { t.Fatal("no record fails") }))
	n := 0
	for _, b := range drain(p) {
		n += b.Records.Len()
		a.Free(b)
	}
	require.Equal(t, 3, n)
	require.Equal(t, pool.Size(), pool.Available())
}
