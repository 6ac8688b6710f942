package accumulator

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
)

// fatCompletion is larger than the producer's completion (32 bytes; 56
// before issue 26): the charges must hold for any completion size.
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

// splitInTwo does what the producer's split does after MESSAGE_TOO_LARGE,
// without the decoding: two detached halves take b's completions, take
// over its bookkeeping charge (MoveCredit), and b is freed.
func splitInTwo(a *Accumulator[int, struct{}, struct{}], b *Batch[int, struct{}, struct{}]) (halves []*Batch[int, struct{}, struct{}], bufs int) {
	n := b.Records.Len()
	for h := range 2 {
		nb := a.NewDetachedBatch(b.Partition, 1024)
		if !nb.heap {
			bufs += cap(nb.buf)
		}
		for j := range n / 2 {
			a.AddCompletion(nb, *b.Records.At(h*n/2 + j))
		}
		halves = append(halves, nb)
	}
	a.MoveCredit(b, halves...)
	a.Free(b)
	return halves, bufs
}

// chargedAcc returns an accumulator of 16 KiB batches charging its
// bookkeeping to a 1 MiB pool.
func chargedAcc(t *testing.T) (*Accumulator[int, struct{}, struct{}], *bufferpool.SimplePool) {
	const batchSize = 16 << 10
	pool := mustPool(t, 1<<20, batchSize)
	return New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool,
		ChargeBookkeeping: true, MaxBlock: time.Second}), pool
}

// sealedBatch appends n records to a new partition of a and returns its
// sealed batch.
func sealedBatch(t *testing.T, a *Accumulator[int, struct{}, struct{}], n int) *Batch[int, struct{}, struct{}] {
	_, ps := known(a, "t", 1)
	for i := range n {
		require.NoError(t, ps[0].Append(context.Background(), 0, nil, []byte("v"), nil, i, false))
	}
	require.True(t, ps[0].sealOpen())
	b := ps[0].NextSealed()
	require.Equal(t, n, b.Records.Len())
	return b
}

// TestSplitHalvesKeepTheirBookkeepingCharged: with ChargeBookkeeping, the
// halves of a split batch (NewDetachedBatch, AddCompletion) are charged
// for their structs and records like any batch, so freeing the batch they
// were split from does not hand their bookkeeping's bytes to new Sends
// (they used to reserve nothing while the original gave its whole charge
// back). Freeing the halves leaves the pool exact.
func TestSplitHalvesKeepTheirBookkeepingCharged(t *testing.T) {
	a, pool := chargedAcc(t)
	const n = 100
	halves, bufs := splitInTwo(a, sealedBatch(t, a, n))

	outstanding := int(pool.Size() - pool.Available())
	bookkeeping := 2*a.BatchCharge() + n*a.RecordCharge()
	require.GreaterOrEqual(t, outstanding, bufs+bookkeeping,
		"the split halves hold %d records in 2 batches, but only %d bytes are charged, not their %d buffer bytes and %d bytes of bookkeeping",
		n, outstanding, bufs, bookkeeping)
	for _, h := range halves {
		a.Free(h)
	}
	require.Equal(t, pool.Size(), pool.Available())
}

// TestSplitHalvesTakeTheChargeOfAFullPoolsBatch: when the pool has no room
// for the halves' own charges (nor their buffers: they are heap memory),
// MoveCredit gives them the charge of the batch they were split from,
// which the pool has counted all along; the pool stays exact.
func TestSplitHalvesTakeTheChargeOfAFullPoolsBatch(t *testing.T) {
	a, pool := chargedAcc(t)
	const n = 100
	b := sealedBatch(t, a, n)
	require.GreaterOrEqual(t, b.credit, a.BatchCharge()+n*a.RecordCharge())
	charged, bufCap := b.credit, cap(b.buf)
	filler := pool.TryAllocate(int(pool.Available())) // the rest of the pool is taken
	require.NotNil(t, filler)
	rest := pool.Available()
	require.True(t, pool.TryReserve(int(rest)))

	halves, bufs := splitInTwo(a, b)
	require.Zero(t, bufs, "a full pool gives the halves heap buffers")
	got := halves[0].credit + halves[1].credit
	require.Equal(t, min(charged, 2*a.BatchCharge()+n*a.RecordCharge()), got,
		"the halves took the split batch's charge")
	require.Equal(t, int64(bufCap), pool.Available(), "only the split batch's buffer went back")
	for _, h := range halves {
		a.Free(h)
	}
	pool.Unreserve(int(rest))
	pool.Release(filler)
	require.Equal(t, pool.Size(), pool.Available())
}

// TestFailedParkedRecordsKeepTheirChargeUntilReleased: under
// KeepFailedCharge a parked record failed by ExpireParked, MoveParked's
// place or FailParked keeps its ParkCharge reserved (its outcome is not
// delivered yet) while its body's memory goes back at once; ReleaseFailed
// gives it back, leaving the pool exact.
func TestFailedParkedRecordsKeepTheirChargeUntilReleased(t *testing.T) {
	pool := mustPool(t, 1<<20, 1024)
	a := New[int, struct{}, struct{}](Config{BatchSize: 1024, MaxBatchSize: 1 << 20, Pool: pool,
		ChargeBookkeeping: true, KeepFailedCharge: true, MaxBlock: time.Second})
	var topic *Topic[int, struct{}, struct{}]
	park := func(from, to int) {
		for i := from; i < to; i++ {
			parked, err := topic.Park(context.Background(), 0, nil, make([]byte, 100), nil, 0, i, false)
			require.NoError(t, err)
			require.True(t, parked)
		}
	}
	failed := 0
	requireKept := func(what string) {
		t.Helper()
		require.Equal(t, int64(failed*a.ParkCharge()), pool.Size()-pool.Available(),
			"%s: exactly the failed records' charges stay reserved", what)
	}

	topic = a.NewTopic("t")
	park(0, 70)
	topic.ExpireParked(time.Now(), func(int, time.Time) { failed++ })
	requireKept("ExpireParked")

	park(70, 140)
	p := a.NewPartition(topic, 0)
	topic.SetPartitions([]*Partition[int, struct{}, struct{}]{p})
	require.True(t, topic.MoveParked(func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) {
		return nil, errors.New("refused")
	}, func(int, error) { failed++ }))
	requireKept("MoveParked")

	topic = a.NewTopic("u")
	park(140, 200)
	topic.FailParked(func(int) { failed++ })
	require.Equal(t, 200, failed)
	requireKept("FailParked")

	a.ReleaseFailed(failed)
	require.Equal(t, pool.Size(), pool.Available())
}
