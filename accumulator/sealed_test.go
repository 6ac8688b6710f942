package accumulator

import (
	"testing"

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
	q.push(b)
	q.push(new(batch))
	got := q.takeAll(nil)
	require.Len(t, got, 2)
	require.Same(t, b, got[0])
	require.Zero(t, q.len())
}
