package accumulator

import (
	"sync"

	"github.com/samsa-go/samsa/internal/freelist"
)

// Completions is a batch's list of per-record completions, in offset order.
//
// A batch of few records keeps them inline; a bigger one adds fixed-size
// chunks from its accumulator's free list. The list never moves what it
// holds, so appending costs no copy, and a producer in a steady state
// allocates no completion memory: chunks go back to the free list when the
// batch is freed. (A slice would double and copy up to the largest batch,
// and a large idle slice per free batch would pin memory.)
type Completions[C any] struct {
	n      int // first, next to the first inline slots: one cache line for a small batch
	inline [inlineCompletions]C
	chunks []*[chunkCompletions]C
}

const (
	// inlineCompletions covers the batches of a producer spread over many
	// partitions, which mostly hold a record or two.
	inlineCompletions = 4
	// chunkCompletions is the size of every further chunk.
	chunkCompletions = 32
	// maxFreeChunks bounds the idle chunks an accumulator keeps.
	maxFreeChunks = 8192
)

// Len returns the number of completions.
func (r *Completions[C]) Len() int { return r.n }

// At returns the i-th completion, 0 ≤ i < Len.
func (r *Completions[C]) At(i int) *C {
	if i < inlineCompletions {
		return &r.inline[i]
	}
	i -= inlineCompletions
	return &r.chunks[i/chunkCompletions][i%chunkCompletions]
}

// chunkFree is an accumulator's list of idle chunks (at most maxFreeChunks,
// set by New).
type chunkFree[C any] struct {
	mu   sync.Mutex
	free freelist.List[*[chunkCompletions]C]
}

func (f *chunkFree[C]) get() *[chunkCompletions]C {
	f.mu.Lock()
	c, ok := f.free.Get()
	f.mu.Unlock()
	if !ok {
		c = new([chunkCompletions]C)
	}
	return c
}

// put takes back chunks, which must be cleared.
func (f *chunkFree[C]) put(chunks []*[chunkCompletions]C) {
	f.mu.Lock()
	for _, c := range chunks {
		if !f.free.Put(c) {
			break
		}
	}
	f.mu.Unlock()
}

// push appends c, taking a chunk from f when the last one is full.
func (r *Completions[C]) push(f *chunkFree[C], c C) {
	i := r.n
	if i < inlineCompletions {
		r.inline[i] = c
		r.n++
		return
	}
	i -= inlineCompletions
	if i/chunkCompletions == len(r.chunks) {
		r.chunks = append(r.chunks, f.get())
	}
	r.chunks[i/chunkCompletions][i%chunkCompletions] = c
	r.n++
}

// reset empties the list, giving its chunks back to f.
func (r *Completions[C]) reset(f *chunkFree[C]) {
	clear(r.inline[:min(r.n, inlineCompletions)])
	for j, c := range r.chunks {
		clear(c[:min(chunkCompletions, r.n-inlineCompletions-j*chunkCompletions)])
	}
	f.put(r.chunks)
	clear(r.chunks)
	r.chunks = r.chunks[:0]
	r.n = 0
}
