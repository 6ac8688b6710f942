package accumulator

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
)

// fatCompletion is as large as the producer's completion (56 bytes).
type fatCompletion struct{ a, b, c, d, e, f, g uintptr }

// TestParkedMoveWithExtraChargeKeepsThePoolExact: with a per-record extra
// charge (the producer's recordObs, 48 bytes, with HookRecordCompleted
// hooks) a parked record's charge still covers what it hands its batch
// when it moves into a full pool, so freeing the batch gives back exactly
// what was reserved (it used to unreserve more, and the pool panicked).
func TestParkedMoveWithExtraChargeKeepsThePoolExact(t *testing.T) {
	const batchSize = 1024
	pool := mustPool(t, 64<<10, batchSize)
	a := New[fatCompletion, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool,
		ChargeBookkeeping: true, ExtraRecordCharge: 48})
	require.GreaterOrEqual(t, a.ParkCharge(), a.RecordCharge(), "a parked record pays for what it hands its batch")
	topic := a.NewTopic("t")
	for i := range chargeBlock {
		parked, err := topic.Park(context.Background(), 0, nil, []byte("v"), nil, 0, fatCompletion{a: uintptr(i)}, false)
		require.NoError(t, err)
		require.True(t, parked)
	}
	filler := pool.TryAllocate(int(pool.Available()) - 100) // the rest of the pool is taken
	require.NotNil(t, filler)
	p := a.NewPartition(topic, 0)
	topic.SetPartitions([]*Partition[fatCompletion, struct{}, struct{}]{p})
	require.True(t, topic.MoveParked(func(ParkedRecord) (*Partition[fatCompletion, struct{}, struct{}], error) { return p, nil }, nil))
	pool.Release(filler)
	require.True(t, p.sealOpen())
	b := p.NextSealed()
	require.Equal(t, chargeBlock, b.Records.Len())
	a.Free(b)
	require.Equal(t, pool.Size(), pool.Available())
}

// TestBatchNeverOutgrowsItsRequestWithALargerRecycledBuffer: a pool may
// hand out a recycled buffer larger than asked (up to twice; a pool
// shared with a producer of a larger batch.size has them), but a batch
// fills only what it asked for, so it never passes BatchSize (and so
// MaxRequestSize), and the whole buffer still goes back to the pool.
func TestBatchNeverOutgrowsItsRequestWithALargerRecycledBuffer(t *testing.T) {
	const batchSize = 4096
	pool, err := bufferpool.New(bufferpool.Options{Size: 1 << 20, PooledSize: batchSize, MaxPooledSize: 2 * batchSize})
	require.NoError(t, err)
	pool.Release(pool.TryAllocate(2 * batchSize)) // the other producer's batch
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, InitialBatchSize: 1024, MaxBatchSize: batchSize, Pool: pool})
	_, ps := known(a, "t", 1)
	for i := range 100 {
		require.NoError(t, ps[0].Append(context.Background(), 0, nil, make([]byte, 100), nil, i, true))
	}
	require.True(t, ps[0].sealOpen())
	batches := drain(ps[0])
	require.NotEmpty(t, batches)
	n := 0
	for _, b := range batches {
		require.LessOrEqual(t, b.Builder.Len(), batchSize)
		n += b.Records.Len()
		a.Free(b)
	}
	require.Equal(t, 100, n)
	require.Equal(t, pool.Size(), pool.Available())
}

// TestBatchUsesALargerRecycledBuffer: the room of a larger recycled buffer
// is accounted to the batch, so the batch fills it (up to BatchSize)
// instead of asking the pool for more while it sits half empty.
func TestBatchUsesALargerRecycledBuffer(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Options{Size: 8 << 10, PooledSize: 512, MaxPooledSize: 4096})
	require.NoError(t, err)
	pool.Release(pool.TryAllocate(1024))                     // one recycled 1 KiB buffer
	filler := pool.TryAllocate(int(pool.Available()) - 1024) // and nothing else free
	require.NotNil(t, filler)
	a := New[int, struct{}, struct{}](Config{BatchSize: 4096, InitialBatchSize: 512, MaxBatchSize: 4096, Pool: pool})
	_, ps := known(a, "t", 1)
	n := 0
	for ; n < 100; n++ {
		if ps[0].Append(context.Background(), 0, nil, make([]byte, 100), nil, n, false) != nil {
			break
		}
	}
	require.GreaterOrEqual(t, n, 8, "a 512-byte request served with 1 KiB holds about 9 records of 107 bytes, not 4")
	require.True(t, ps[0].sealOpen())
	for _, b := range drain(ps[0]) {
		a.Free(b)
	}
	pool.Release(filler)
	require.Equal(t, pool.Size(), pool.Available())
}

// TestAppendLackingOnlyBookkeepingWaitsForThatOnly: when the pool is full
// and the open batch has room for the record but no bookkeeping credit
// left, Append waits for a block of credit, not for a whole new batch's
// buffer. It used to allocate a buffer (waiting until a batch's worth of
// memory was free), then give it back: here, with less than a buffer
// freed, it stayed blocked until MaxBlock.
func TestAppendLackingOnlyBookkeepingWaitsForThatOnly(t *testing.T) {
	const batchSize = 16 << 10
	pool := mustPool(t, 256<<10, batchSize)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, InitialBatchSize: batchSize, MaxBatchSize: batchSize,
		Pool: pool, ChargeBookkeeping: true, MaxBlock: 5 * time.Second})
	_, ps := known(a, "t", 1)
	ctx := context.Background()
	value := []byte("v")
	// Open the batch and use up its first charge (the inline completions).
	for i := range inlineCompletions {
		require.NoError(t, ps[0].Append(ctx, 0, nil, value, nil, i, true))
	}
	// The pool is full: freeing small, the piece that is released later,
	// takes more than a block of credit and much less than a buffer.
	need := chargeBlock * a.RecordCharge()
	require.Less(t, 2*need, batchSize)
	small := pool.TryAllocate(2 * need)
	filler := pool.TryAllocate(int(pool.Available()))
	require.NotNil(t, small)
	require.NotNil(t, filler)
	done := make(chan error, 1)
	go func() { done <- ps[0].Append(ctx, 0, nil, value, nil, inlineCompletions, true) }()
	select {
	case err := <-done:
		t.Fatalf("Append returned %v with a full pool", err)
	case <-time.After(50 * time.Millisecond):
	}
	pool.Release(small)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("Append still waits for a whole buffer when only bookkeeping was missing")
	}
	pool.Release(filler)
	require.True(t, ps[0].sealOpen())
	b := ps[0].NextSealed()
	require.Equal(t, inlineCompletions+1, b.Records.Len(), "the record went into the open batch")
	require.Nil(t, ps[0].NextSealed(), "no second batch was opened")
	a.Free(b)
	require.Equal(t, pool.Size(), pool.Available())
}

// Concurrent appends into a pool full most of the time, with a drainer
// sealing, taking and freeing batches: the credit invariant holds for
// every batch freed, and the pool ends exact.
func TestAppendCreditInvariantUnderPressure(t *testing.T) {
	const batchSize = 4 << 10
	pool, err := bufferpool.New(bufferpool.Options{Size: 48 << 10, PooledSize: batchSize, LeakDetection: true})
	require.NoError(t, err)
	a := New[int, struct{}, struct{}](Config{BatchSize: batchSize, InitialBatchSize: 512, MaxBatchSize: batchSize,
		Pool: pool, ChargeBookkeeping: true, MaxBlock: 200 * time.Millisecond})
	_, ps := known(a, "t", 2)
	var stop atomic.Bool
	var bad atomic.Int64
	var appended, failed atomic.Int64
	check := func(b *Batch[int, struct{}, struct{}]) {
		if b.credit < a.batchCharge+b.Records.Len()*a.recCharge {
			bad.Add(1)
		}
		a.Free(b)
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; !stop.Load(); i++ {
				v := make([]byte, 1+r.IntN(300))
				if r.IntN(50) == 0 {
					v = make([]byte, 2000)
				}
				if err := ps[r.IntN(2)].Append(context.Background(), 0, nil, v, nil, i, r.IntN(4) != 0); err != nil {
					failed.Add(1)
				} else {
					appended.Add(1)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(99, 1))
		var all []*Batch[int, struct{}, struct{}]
		for !stop.Load() {
			time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
			p := ps[r.IntN(2)]
			switch r.IntN(3) {
			case 0:
				all = p.TakeAll(all[:0])
				for _, b := range all {
					check(b)
				}
			default:
				p.sealOpen()
				for b := p.NextSealed(); b != nil; b = p.NextSealed() {
					check(b)
				}
			}
		}
	}()
	time.Sleep(3 * time.Second)
	stop.Store(true)
	wg.Wait()
	for _, p := range ps {
		for _, b := range p.TakeAll(nil) {
			check(b)
		}
	}
	t.Logf("appended %d, failed %d", appended.Load(), failed.Load())
	require.Zero(t, bad.Load(), "batches freed with less credit than the invariant")
	require.Equal(t, pool.Size(), pool.Available())
}

// With room for one record's charge but not for a block of credit, an
// Append that must not wait (TrySend) takes the record's charge (a version
// of appendWithCredit that asked for a whole block failed here).
func TestAppendWithCreditTakesOneRecordsCharge(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Options{Size: 64 << 10, PooledSize: 512})
	require.NoError(t, err)
	a := New[int, struct{}, struct{}](Config{BatchSize: 16 << 10, InitialBatchSize: 512, MaxBatchSize: 16 << 10,
		Pool: pool, ChargeBookkeeping: true, ExtraRecordCharge: 48, MaxBlock: time.Second})
	_, ps := known(a, "t", 1)
	for i := range inlineCompletions {
		require.NoError(t, ps[0].Append(context.Background(), 0, nil, []byte("v"), nil, i, false))
	}
	room := 512 + a.firstCharge() + 16
	block := chargeBlock * a.recCharge
	t.Logf("room %d block %d", room, block)
	require.Less(t, room, block)
	filler := pool.TryAllocate(int(pool.Available()) - room)
	require.NotNil(t, filler)
	err = ps[0].Append(context.Background(), 0, nil, []byte("v"), nil, inlineCompletions, false)
	t.Logf("wait=false: %v", err)
	require.NoError(t, err)
}
