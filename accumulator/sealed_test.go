package accumulator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The sealed queue hands batches out in the order they were pushed,
// whatever the mix of pushes and pops, and keeps its array when it
// empties (no allocation per batch) unless the array grew past
// maxKeptSealed.
func TestSealedQueue(t *testing.T) {
	type batch = Batch[int, struct{}, struct{}]
	cases := []struct {
		name string
		ops  []int // > 0: push that many, < 0: pop that many
	}{
		{"one at a time", []int{1, -1, 1, -1, 1, -1}},
		{"two then one", []int{2, -1, 1, -2}},
		{"fill, pop some, refill past the end", []int{4, -3, 6, -7}},
		{"burst past the kept size", []int{maxKeptSealed + 10, -(maxKeptSealed + 10), 3, -3}},
		{"pop from empty", []int{-1, 2, -3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var q sealedQueue[int, struct{}, struct{}]
			var want []*batch
			for _, op := range tc.ops {
				for range max(op, 0) {
					b := new(batch)
					q.push(b)
					want = append(want, b)
				}
				for range max(-op, 0) {
					got := q.pop()
					if len(want) == 0 {
						require.Nil(t, got)
						continue
					}
					require.Same(t, want[0], got)
					want = want[1:]
				}
				require.Equal(t, len(want), q.len())
				if len(want) > 0 {
					require.Same(t, want[0], q.peek())
				} else {
					require.Nil(t, q.peek())
					require.LessOrEqual(t, cap(q.q), maxKeptSealed, "an emptied queue keeps at most maxKeptSealed slots")
				}
				for _, b := range q.q[:q.head] {
					require.Nil(t, b, "a popped slot still points to its batch")
				}
			}
		})
	}

	var q sealedQueue[int, struct{}, struct{}]
	b := new(batch)
	q.push(b)
	q.pop()
	if n := testing.AllocsPerRun(100, func() { q.push(b); q.pop() }); n != 0 {
		t.Errorf("a batch sealed and drained allocates %v times, want 0", n)
	}
	q.push(new(batch))
	q.push(b)
	q.push(new(batch))
	q.pop() // takeAll with head > 0
	got := q.takeAll(nil)
	require.Len(t, got, 2)
	require.Same(t, b, got[0])
	require.Zero(t, q.len())
	require.Nil(t, q.peek())
}

// PopSealed says whether another sealed batch follows, and clears the
// flag when it takes the last one, so that the next seal posts a Sealed
// event (the IO goroutine, told there is no more, waits for that event).
func TestPopSealedMore(t *testing.T) {
	a, _ := newAcc(t, 1<<20, 1024, time.Second)
	_, ps := known(a, "t", 1)
	p := ps[0]
	for i := range 2 {
		require.NoError(t, p.Append(context.Background(), int64(i), nil, []byte("v"), nil, i, true))
		require.True(t, p.sealOpen())
	}
	sealedEvents := func() (n int) {
		for _, e := range a.Events(nil) {
			if e.Kind == Sealed {
				n++
			}
		}
		return n
	}
	require.Equal(t, 1, sealedEvents(), "one Sealed event for two seals in a row")
	b, more := p.PopSealed()
	require.NotNil(t, b)
	require.True(t, more)
	b, more = p.PopSealed()
	require.NotNil(t, b)
	require.False(t, more)
	b, more = p.PopSealed()
	require.Nil(t, b)
	require.False(t, more)
	require.NoError(t, p.Append(context.Background(), 2, nil, []byte("v"), nil, 2, true))
	require.True(t, p.sealOpen())
	require.Equal(t, 1, sealedEvents(), "a seal after the queue emptied is announced")
}

// RewriteSealedIf hands fn only the sealed batches match picks, keeps the
// others in order, and leaves a queue where match picks none untouched,
// without allocating: failEnded calls it for every partition of a watched
// topic whenever a Send context ends. Before, every call took the whole
// queue into a new slice and pushed it back.
func TestRewriteSealedIf(t *testing.T) {
	a, _ := newAcc(t, 1<<20, 1024, time.Second)
	_, ps := known(a, "t", 1)
	p := ps[0]
	for i := range 4 {
		require.NoError(t, p.Append(context.Background(), int64(i), nil, []byte("v"), nil, i, true))
		require.True(t, p.sealOpen())
	}
	first := func(b *Batch[int, struct{}, struct{}]) int { return *b.Records.At(0) }
	none := func(*Batch[int, struct{}, struct{}]) bool { return false }
	called := 0
	fn := func(b *Batch[int, struct{}, struct{}]) *Batch[int, struct{}, struct{}] { called++; return b }
	if n := testing.AllocsPerRun(100, func() { p.RewriteSealedIf(none, fn) }); n != 0 {
		t.Errorf("a rewrite with no batch to rewrite allocates %v times, want 0", n)
	}
	require.Zero(t, called)
	require.Equal(t, 4, p.sealed.len())

	var gave []int
	p.RewriteSealedIf(func(b *Batch[int, struct{}, struct{}]) bool { return first(b)%2 == 1 },
		func(b *Batch[int, struct{}, struct{}]) *Batch[int, struct{}, struct{}] {
			gave = append(gave, first(b))
			if first(b) == 1 {
				a.Free(b)
				return nil // left out
			}
			return b
		})
	require.Equal(t, []int{1, 3}, gave)
	var left []int
	for _, b := range drain(p) {
		left = append(left, first(b))
		a.Free(b)
	}
	require.Equal(t, []int{0, 2, 3}, left)
}
