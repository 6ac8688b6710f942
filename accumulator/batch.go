package accumulator

import (
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/internal/recordbatch"
)

// Batch is one record batch of one partition: its pool buffer, its builder
// and one completion per record. A Batch is open (records are appended under
// its partition's lock), then sealed (no more records), then owned by the IO
// goroutine, which finishes, sends and completes it, and finally Frees it.
type Batch[C any] struct {
	Partition *Partition[C]
	Builder   recordbatch.Builder
	// Records holds one completion per record, in offset order.
	Records Completions[C]
	// Created is when the batch was opened: linger and delivery timeout
	// count from it.
	Created time.Time

	// Fields below belong to the IO goroutine once the batch is sealed.

	// Raw is the finished batch (Builder.Finish); nil until then.
	Raw []byte
	// Attempts counts the Produce requests that carried this batch.
	Attempts int
	// BaseSequence is the idempotent sequence of the first record, or -1.
	BaseSequence int32
	// Uncompressed is the size of the records before compression.
	Uncompressed int
	// Ambiguous is set when an attempt ended without a clear answer (a
	// timeout, a broken connection): the batch may have been written.
	Ambiguous bool
	// Expired is set when the batch's records were failed at their
	// delivery timeout while a request carried it: the batch stays until
	// that request's answer is in, which then only releases it.
	Expired bool

	buf       []byte
	credit    int           // pool bytes reserved for the batch's bookkeeping (Accumulator.credit)
	gen       atomic.Uint64 // bumped each time the struct is reused
	overdraft bool          // buf is the one batch outside the pool (see Partition.appendBody)
	heap      bool          // buf is heap memory of a split batch (see NewDetachedBatch)
}

// Gen returns the batch's generation: it changes every time the struct is
// reused, so that a stale reference can be told from the current batch.
func (b *Batch[C]) Gen() uint64 { return b.gen.Load() }

// NumRecords returns the number of records in the batch.
func (b *Batch[C]) NumRecords() int { return b.Records.n }
