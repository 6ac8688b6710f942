package accumulator

import (
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/internal/recordbatch"
)

// Batch is one record batch of one partition: its pool buffer, its builder,
// one completion (C) per record, and the IO goroutine's state (B). A Batch is open (records are appended under
// its partition's lock), then sealed (no more records), then owned by the IO
// goroutine, which finishes, sends and completes it, and finally Frees it.
type Batch[C, P, B any] struct {
	Partition *Partition[C, P, B]
	// What an append touches comes first, together: the builder, the
	// credit and the completions' count and first slots. With thousands
	// of partitions every batch is cold when a record comes, and each
	// cache line more is a miss more.
	Builder recordbatch.Builder
	credit  int // pool bytes reserved for the batch's bookkeeping (Accumulator.credit)
	// Records holds one completion per record, in offset order.
	Records Completions[C]
	// Created is when the batch was opened: linger and delivery timeout
	// count from it.
	Created time.Time

	// IO is the IO goroutine's own state for the batch once it is sealed
	// (the finished bytes, attempts, sequence, ...). The accumulator never
	// reads it; it is the zero B in a new batch, and zeroed again by Free.
	IO B

	buf       []byte
	gen       atomic.Uint64 // bumped each time the struct is reused
	overdraft bool          // buf is the one batch outside the pool (see Partition.appendBody)
	heap      bool          // buf is heap memory of a split batch (see NewDetachedBatch)
}

// Gen returns the batch's generation: it changes every time the struct is
// reused, so that a stale reference can be told from the current batch.
func (b *Batch[C, P, B]) Gen() uint64 { return b.gen.Load() }

// NumRecords returns the number of records in the batch.
func (b *Batch[C, P, B]) NumRecords() int { return b.Records.n }
