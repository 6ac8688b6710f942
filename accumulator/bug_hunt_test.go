package accumulator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Tests that prove bugs found by review (h-accum). Each fails on the code it
// was written against; the comment says the interleaving.

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
