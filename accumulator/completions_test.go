package accumulator

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompletionsKeepOrderAndRecycleChunks(t *testing.T) {
	for _, n := range []int{0, 1, inlineCompletions, inlineCompletions + 1, inlineCompletions + chunkCompletions, inlineCompletions + 3*chunkCompletions + 7} {
		var f chunkFree[*int]
		f.free.Max = maxFreeChunks
		var r Completions[*int]
		vals := make([]int, n)
		for round := range 2 { // the second round runs on recycled chunks
			for i := range n {
				r.push(&f, &vals[i])
			}
			require.Equal(t, n, r.Len())
			for i := range n {
				require.Same(t, &vals[i], *r.At(i), "n=%d round=%d i=%d", n, round, i)
			}
			chunks := (max(n-inlineCompletions, 0) + chunkCompletions - 1) / chunkCompletions
			require.Len(t, r.chunks, chunks)
			r.reset(&f)
			require.Zero(t, r.Len())
			require.Equal(t, chunks, f.free.Len(), "every chunk goes back")
			var back []*[chunkCompletions]*int
			for c, ok := f.free.Get(); ok; c, ok = f.free.Get() {
				for _, p := range c {
					require.Nil(t, p, "a recycled chunk holds no pointers")
				}
				back = append(back, c)
			}
			f.put(back)
			for _, p := range r.inline {
				require.Nil(t, p)
			}
		}
	}
}

func TestCompletionsPushAllocatesNothingInSteadyState(t *testing.T) {
	var f chunkFree[int]
	f.free.Max = maxFreeChunks
	var r Completions[int]
	fill := func() {
		for i := range 3 * chunkCompletions {
			r.push(&f, i)
		}
		r.reset(&f)
	}
	fill()
	require.Zero(t, testing.AllocsPerRun(20, fill))
}
