package accumulator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/recordbatch"

	"github.com/samsa-go/samsa/internal/freelist"
)

// Config configures an Accumulator. Every field is required; the producer
// fills them from its own Config.
type Config struct {
	// BatchSize is the largest size of a batch buffer (batch.size). A
	// record larger than a batch gets a buffer of its own, sized to fit it.
	BatchSize int

	// InitialBatchSize is the size of a new batch's buffer; a batch that
	// fills it grows (doubling, memory permitting, without waiting) up to
	// BatchSize. With many partitions and a large BatchSize, batches then
	// hold only the memory their records need. 0 means BatchSize.
	InitialBatchSize int

	// MaxBatchSize is the largest batch a single record may need
	// (max.request.size); a bigger record fails with ErrRecordTooLarge.
	MaxBatchSize int

	// Pool provides every byte of batch and parking memory.
	Pool bufferpool.Pool

	// MaxBlock bounds how long an append (Partition.Append, Topic.Park)
	// waits for pool memory (max.block.ms), in all: its waits for a
	// batch's buffer, a parking chunk and bookkeeping share one deadline,
	// set when it first waits. 0 means it never waits.
	MaxBlock time.Duration

	// Closing, when done, ends every wait for pool memory with an error
	// wrapping ErrClosing (the producer is closing). Optional.
	Closing context.Context

	// ChargeBookkeeping charges the heap memory a record costs besides
	// its bytes (its completion, its batch, its place in a parking queue)
	// to the pool too, when the pool implements bufferpool.Reserver, so
	// that the pool's size bounds that memory as well (see RecordCharge).
	ChargeBookkeeping bool

	// ExtraRecordCharge is charged with each record on top of its
	// completion when ChargeBookkeeping is on: heap memory the caller keeps
	// per record elsewhere (the producer's per-record hook state). 0 by
	// default.
	ExtraRecordCharge int

	// KeepFailedCharge, with ChargeBookkeeping, keeps a parked record's
	// bookkeeping charge (ParkCharge) reserved when ExpireParked,
	// FailParked or MoveParked fails it, so that the pool still accounts
	// for its outcome while it waits to be delivered: the caller gives it
	// back with ReleaseFailed once it is. Off, the charge goes back with
	// the record, as its body's memory always does.
	KeepFailedCharge bool

	// MayWait, when set, is asked before an append waits for pool memory
	// (only when the pool has none at once); false makes the append fail
	// at once, as if it had not been allowed to wait. The producer uses
	// it so that a Send from its completion goroutine, the one that frees
	// memory, never waits for memory. Optional.
	MayWait func() bool

	// OnWaited, when set, is called on the appending goroutine after an
	// append waited for pool memory (the pool had none at once), with the
	// record's topic, the time waited and the wait's error (nil when the
	// memory came). Appends that did not wait do not call it. Optional.
	OnWaited func(topic string, waited time.Duration, err error)
}

// ErrClosing is returned (wrapped) by appends whose wait for memory was
// ended by Config.Closing.
var ErrClosing = errors.New("accumulator: closing")

// Accumulator holds the records that Send has accepted and the IO goroutine
// has not yet sent. It is generic over C, the per-record completion the
// producer keeps (a future, a callback or a channel): a batch keeps one C per
// record, in append order, without allocating per record. P and B are slots
// for the IO goroutine's own state, which the accumulator never reads: P per
// partition (Partition.IO, set by the IO goroutine) and B per batch
// (Batch.IO, the zero B in a new batch).
//
// Send-side methods (Topic.Park, Partition.Append) are safe for concurrent
// use and lock only the topic or the partition they touch. Everything else
// (Events, Partition.Seal, Partition.NextSealed, Topic.MoveParked,
// Topic.ExpireParked) is called by the producer's IO goroutine only.
type Accumulator[C, P, B any] struct {
	cfg Config

	mu     sync.Mutex // guards events
	events []Event[C, P, B]
	kick   chan struct{}

	// free holds batch structs for reuse, and chunks the completion
	// chunks of bigger batches: lists of our own rather than sync.Pools,
	// which the garbage collector empties, so that a steady producer
	// allocates neither. At most maxFreeBatches and maxFreeChunks.
	freeMu sync.Mutex
	free   freelist.List[*Batch[C, P, B]]
	chunks chunkFree[C]

	// overdraft is set while a batch of moved parked records lives outside
	// the pool (at most one at a time).
	overdraft atomic.Bool

	// res charges the bookkeeping of records to the pool, when the pool
	// implements bufferpool.Reserver (nil: not charged): recCharge bytes
	// per record in a batch (its completion and its share of a chunk),
	// batchCharge per batch, parkCharge per parked record, reserved in
	// blocks of chargeBlock records.
	res                                bufferpool.Reserver
	recCharge, batchCharge, parkCharge int

	// heldAlloc and heldRes take memory for the IO goroutine's own
	// progress (moving parked records, splitting), past the pool's hold
	// (bufferpool.HeldAllocator, HeldReserver); nil when the pool lacks
	// them, and TryAllocate and TryReserve are used instead.
	heldAlloc bufferpool.HeldAllocator
	heldRes   bufferpool.HeldReserver
	// startMax bounds the buffer a new batch starts with (bufferFor): the
	// pool's size less the batch's first bookkeeping charge, so that
	// both fit in the pool together.
	startMax int
}

// chargeBlock is how many records' bookkeeping is reserved at once, so that
// the pool's lock is taken once per chargeBlock records, not per record.
const chargeBlock = 32

// New returns an accumulator.
func New[C, P, B any](cfg Config) *Accumulator[C, P, B] {
	if cfg.InitialBatchSize <= 0 || cfg.InitialBatchSize > cfg.BatchSize {
		cfg.InitialBatchSize = cfg.BatchSize
	}
	a := &Accumulator[C, P, B]{cfg: cfg, kick: make(chan struct{}, 1)}
	a.free.Max = maxFreeBatches
	a.chunks.free.Max = maxFreeChunks
	a.heldAlloc, _ = cfg.Pool.(bufferpool.HeldAllocator)
	if r, ok := cfg.Pool.(bufferpool.Reserver); ok && cfg.ChargeBookkeeping {
		var c C
		a.res = r
		// A record: its completion, plus its share of a completion
		// chunk. A batch: its struct, plus the IO goroutine's linger
		// and expiry entries.
		a.recCharge = int(unsafe.Sizeof(c)) + 8 + max(cfg.ExtraRecordCharge, 0)
		a.batchCharge = int(unsafe.Sizeof(Batch[C, P, B]{})) + 64
		// A parked record also keeps the caller's extra state, and when
		// it moves into a full pool it hands its batch recCharge of its
		// own charge (Partition.appendBody): it must have that much.
		a.parkCharge = max(int(unsafe.Sizeof(parkedRecord[C]{}))+max(cfg.ExtraRecordCharge, 0), a.recCharge)
		a.heldRes, _ = cfg.Pool.(bufferpool.HeldReserver)
	}
	a.startMax = math.MaxInt32
	if cfg.Pool != nil { // nil only in tests that never append
		a.startMax = int(min(max(cfg.Pool.Size()-int64(a.firstCharge()), 1), math.MaxInt32))
		// A record whose batch and its bookkeeping cannot fit in the
		// pool together could never be sent: CheckSize refuses it.
		a.cfg.MaxBatchSize = min(a.cfg.MaxBatchSize, a.startMax)
	}
	return a
}

// RecordCharge, BatchCharge and ParkCharge return the bytes of pool memory
// charged for the bookkeeping of a record in a batch, of a batch, and of a
// parked record; 0 when the pool is not a bufferpool.Reserver.
func (a *Accumulator[C, P, B]) RecordCharge() int { return a.recCharge }

// BatchCharge: see RecordCharge.
func (a *Accumulator[C, P, B]) BatchCharge() int { return a.batchCharge }

// ParkCharge: see RecordCharge.
func (a *Accumulator[C, P, B]) ParkCharge() int { return a.parkCharge }

// credit makes sure b's reservation covers one more record, reserving a
// block without waiting if needed (past the pool's hold with held: the IO
// goroutine moving a parked record); false if the pool has no room (the
// caller then treats b as full). The caller holds b's partition lock.
func (a *Accumulator[C, P, B]) credit(b *Batch[C, P, B], held bool) bool {
	if a.res == nil || b.credit >= a.batchCharge+(b.Records.n+1)*a.recCharge {
		return true
	}
	if n := chargeBlock * a.recCharge; a.tryReserve(n, held) {
		b.credit += n
		return true
	}
	return false
}

// tryAllocate takes size bytes from the pool without waiting; with held
// past the pool's hold (bufferpool.HeldAllocator), for the IO goroutine's
// own progress only: moving parked records, splitting a batch. Sends never
// pass held, so memory the pool holds for the moves is not theirs.
func (a *Accumulator[C, P, B]) tryAllocate(size int, held bool) []byte {
	if held && a.heldAlloc != nil {
		return a.heldAlloc.TryAllocateHeld(size)
	}
	return a.cfg.Pool.TryAllocate(size)
}

// tryReserve is tryAllocate for bookkeeping: a.res must be set.
func (a *Accumulator[C, P, B]) tryReserve(n int, held bool) bool {
	if held && a.heldRes != nil {
		return a.heldRes.TryReserveHeld(n)
	}
	return a.res.TryReserve(n)
}

// firstCharge is what a new batch reserves: itself and the records its
// inline completions hold. Further records reserve blocks of chargeBlock
// (credit). With thousands of partitions most batches hold a record or
// two, and a block per new batch would fill the pool with bookkeeping
// reserved for records that never come (about 2.5 KiB per 512-byte batch).
func (a *Accumulator[C, P, B]) firstCharge() int {
	if a.res == nil {
		return 0
	}
	return a.batchCharge + inlineCompletions*a.recCharge
}

// reserve reserves n bytes of bookkeeping in the pool, waiting as allocate
// does (from the same deadline).
func (a *Accumulator[C, P, B]) reserve(ctx context.Context, topic string, n int, wait bool, deadline *time.Time) error {
	if a.res == nil || n <= 0 || a.res.TryReserve(n) {
		return nil
	}
	if wait && a.cfg.MaxBlock > 0 && (a.cfg.MayWait == nil || a.cfg.MayWait()) {
		maxWait, err := a.remaining(deadline, n)
		if err != nil {
			return err
		}
		start := time.Now()
		if a.cfg.Closing == nil {
			err = a.res.Reserve(ctx, n, maxWait)
		} else {
			ctx, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(a.cfg.Closing, cancel)
			err = a.res.Reserve(ctx, n, maxWait)
			stop()
			cancel()
			if err != nil && a.cfg.Closing.Err() != nil {
				err = fmt.Errorf("%w: %w", ErrClosing, err)
			}
		}
		a.waited(topic, start, err)
		return err
	}
	return fmt.Errorf("%w: %d bytes of record bookkeeping requested without waiting, %d available",
		bufferpool.ErrBufferExhausted, n, a.cfg.Pool.Available())
}

// remaining returns how long an append may still wait for n bytes of pool
// memory: MaxBlock in all, counted from its first wait, which sets
// *deadline (Java's remainingWaitMs). An append waits up to three times
// (its batch's buffer, the batch's bookkeeping, a record's bookkeeping),
// and Park loops; each wait gets what is left. Once nothing is left it
// returns the error a pool's MaxBlock timeout gives (matching
// ErrBufferExhausted), or ErrClosing's once Closing is done. The pool
// would take a maxWait <= 0 for no limit: it is never passed one.
func (a *Accumulator[C, P, B]) remaining(deadline *time.Time, n int) (time.Duration, error) {
	now := time.Now()
	if deadline.IsZero() {
		*deadline = now.Add(a.cfg.MaxBlock)
		return a.cfg.MaxBlock, nil
	}
	if left := deadline.Sub(now); left > 0 {
		return left, nil
	}
	err := fmt.Errorf("accumulator: waited MaxBlock (%v) in all for memory, still %d bytes short, %d of %d available: %w",
		a.cfg.MaxBlock, n, a.cfg.Pool.Available(), a.cfg.Pool.Size(), bufferpool.ErrBufferExhausted)
	if a.cfg.Closing != nil && a.cfg.Closing.Err() != nil {
		err = fmt.Errorf("%w: %w", ErrClosing, err)
	}
	return 0, err
}

// waited reports a wait for pool memory that began at start to OnWaited.
func (a *Accumulator[C, P, B]) waited(topic string, start time.Time, err error) {
	if a.cfg.OnWaited != nil {
		a.cfg.OnWaited(topic, time.Since(start), err)
	}
}

func (a *Accumulator[C, P, B]) unreserve(n int) {
	if a.res != nil && n > 0 {
		a.res.Unreserve(n)
	}
}

// ReleaseFailed gives back the bookkeeping charge that n parked records
// failed by ExpireParked, FailParked or MoveParked kept reserved under
// Config.KeepFailedCharge, once their outcomes are delivered. Exactly once
// per failed record; any goroutine.
func (a *Accumulator[C, P, B]) ReleaseFailed(n int) {
	if a.cfg.KeepFailedCharge {
		a.unreserve(n * a.parkCharge)
	}
}

// Pool returns the pool the accumulator allocates from.
func (a *Accumulator[C, P, B]) Pool() bufferpool.Pool { return a.cfg.Pool }

// EventKind says what happened in an Event.
type EventKind uint8

const (
	// Opened: a partition opened a new batch. The IO goroutine uses it to
	// seal the batch when it has lingered, and to expire it.
	Opened EventKind = iota + 1
	// Sealed: a partition has sealed batches ready to send.
	Sealed
	// Parked: a topic whose partitions are unknown has parked records.
	Parked
)

// Event is a change on the Send side that the IO goroutine must react to.
type Event[C, P, B any] struct {
	Kind      EventKind
	Topic     *Topic[C, P, B]     // Parked
	Partition *Partition[C, P, B] // Opened, Sealed
	Batch     *Batch[C, P, B]     // Opened
	Gen       uint64              // Opened: the batch's generation when opened
	At        time.Time           // Opened: when the batch was opened
}

// Wake returns the channel that receives (coalesced) when events are
// pending. The IO goroutine selects on it.
func (a *Accumulator[C, P, B]) Wake() <-chan struct{} { return a.kick }

// Kick wakes the IO goroutine without an event (for example after Flush).
func (a *Accumulator[C, P, B]) Kick() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

func (a *Accumulator[C, P, B]) post(e Event[C, P, B]) {
	a.mu.Lock()
	a.events = append(a.events, e)
	a.mu.Unlock()
	a.Kick()
}

// Events moves the pending events into dst (which it resets) and returns it.
// Handing back the previous slice lets the two swap without allocating.
func (a *Accumulator[C, P, B]) Events(dst []Event[C, P, B]) []Event[C, P, B] {
	clear(dst)
	dst = dst[:0]
	a.mu.Lock()
	dst, a.events = a.events, dst
	a.mu.Unlock()
	return dst
}

// RecordTooLargeError is returned by appends for a record that could never
// fit in a batch of MaxBatchSize bytes.
type RecordTooLargeError struct {
	Size, Max int
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("record of %d bytes in its batch is larger than the maximum of %d (max.request.size)", e.Size, e.Max)
}

// CheckSize returns a *RecordTooLargeError if a record whose body is
// bodySize bytes can never be sent.
func (a *Accumulator[C, P, B]) CheckSize(bodySize int) error {
	if n := recordbatch.SingleRecordBatchSize(bodySize); n > a.cfg.MaxBatchSize {
		return &RecordTooLargeError{Size: n, Max: a.cfg.MaxBatchSize}
	}
	return nil
}

// bufferFor returns the buffer size a new batch of a partition whose last
// batch reached last bytes starts with, for a record with a body of bodySize
// bytes: the smallest doubling of InitialBatchSize that held the last batch
// (so that a busy partition does not regrow every batch), at most BatchSize,
// and always enough for the record. It is also at most the pool's size less
// the batch's first bookkeeping charge: with BufferMemory close to
// BatchSize, a batch started as large as the last one would take the whole
// pool, and its bookkeeping would wait for MaxBlock with nothing to free.
func (a *Accumulator[C, P, B]) bufferFor(last, bodySize int) int {
	size := a.cfg.InitialBatchSize
	for size < last && size < a.cfg.BatchSize {
		size = min(2*size, a.cfg.BatchSize)
	}
	return max(min(size, a.startMax), recordbatch.SingleRecordBatchSize(bodySize))
}

// allocate takes n bytes from the pool: waiting, when wait is set, until
// *deadline (see remaining: MaxBlock in all for every wait of one append),
// failing at once otherwise.
func (a *Accumulator[C, P, B]) allocate(ctx context.Context, topic string, n int, wait bool, deadline *time.Time) ([]byte, error) {
	if buf := a.cfg.Pool.TryAllocate(n); buf != nil {
		return buf, nil
	}
	// MaxBlock 0 is max.block.ms=0: never wait (the pool's maxWait of 0
	// would wait without limit).
	if wait && a.cfg.MaxBlock > 0 && (a.cfg.MayWait == nil || a.cfg.MayWait()) {
		maxWait, err := a.remaining(deadline, n)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		var buf []byte
		if a.cfg.Closing == nil {
			buf, err = a.cfg.Pool.Allocate(ctx, n, maxWait)
		} else {
			// Waiting is the slow path: it may allocate.
			ctx, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(a.cfg.Closing, cancel)
			buf, err = a.cfg.Pool.Allocate(ctx, n, maxWait)
			stop()
			cancel()
			if err != nil && a.cfg.Closing.Err() != nil {
				buf, err = nil, fmt.Errorf("%w: %w", ErrClosing, err)
			}
		}
		a.waited(topic, start, err)
		return buf, err
	}
	return nil, fmt.Errorf("%w: %d bytes requested without waiting, %d available",
		bufferpool.ErrBufferExhausted, n, a.cfg.Pool.Available())
}

func (a *Accumulator[C, P, B]) newBatch(p *Partition[C, P, B], buf []byte, created time.Time) *Batch[C, P, B] {
	a.freeMu.Lock()
	b, ok := a.free.Get()
	a.freeMu.Unlock()
	if !ok {
		b = new(Batch[C, P, B])
	}
	b.gen.Add(1)
	b.Partition = p
	b.buf = buf
	b.Builder.Reset(a.builderBuf(buf))
	b.Created = created
	return b
}

// builderBuf is the part of a pool buffer a batch's builder may fill: all
// of it, but not past BatchSize (or past the size asked for, when a record
// needed more). A pool may hand out a larger recycled buffer than asked
// (bufferpool.SimplePool does, up to twice): its extra room is accounted,
// so the batch uses it, but a batch past BatchSize could pass
// MaxRequestSize. The batch keeps the whole buffer (Batch.buf), which is
// what goes back to the pool.
func (a *Accumulator[C, P, B]) builderBuf(buf []byte) []byte {
	return buf[:len(buf):min(cap(buf), max(len(buf), a.cfg.BatchSize))]
}

// Free returns a completed batch's memory to the pool and the batch to the
// accumulator's free list. The caller must be done with every field of b,
// its Records included.
func (a *Accumulator[C, P, B]) Free(b *Batch[C, P, B]) {
	switch {
	case b.overdraft:
		a.overdraft.Store(false)
	case !b.heap:
		a.cfg.Pool.Release(b.buf)
	}
	a.unreserve(b.credit)
	b.credit = 0
	b.Records.reset(&a.chunks)
	b.gen.Add(1) // stale references (the IO goroutine's queues) see it is gone
	b.Partition, b.Builder, b.Created = nil, recordbatch.Builder{}, time.Time{}
	b.IO = *new(B)
	b.buf, b.overdraft, b.heap = nil, false, false
	a.freeMu.Lock()
	a.free.Put(b)
	a.freeMu.Unlock()
}

// maxFreeBatches bounds the batch structs kept for reuse.
const maxFreeBatches = 8192

// AddCompletion appends c to the completions of b, a batch the caller owns
// (a detached one being filled), and charges its bookkeeping (RecordCharge)
// to the pool when the pool has room at once; it never waits. What the
// pool could not give, MoveCredit takes from the batch being split.
func (a *Accumulator[C, P, B]) AddCompletion(b *Batch[C, P, B], c C) {
	a.credit(b, true) // the IO goroutine's split; false: MoveCredit makes up for it
	b.Records.push(&a.chunks, c)
}

// NewDetachedBatch returns an empty batch of partition p with a buffer of
// size bytes. It is not queued anywhere: the IO goroutine uses it to split a
// batch the broker found too large. The buffer comes from the pool when it
// has memory; otherwise from the heap, outside the pool's accounting (like
// the Java client's split batches), since the batch being split gives its
// own pool memory back at once. Its bookkeeping (BatchCharge) is charged
// to the pool when the pool has room at once; it never waits. Once its
// completions are added, MoveCredit makes up, from the batch being split,
// what the pool could not give.
func (a *Accumulator[C, P, B]) NewDetachedBatch(p *Partition[C, P, B], size int) *Batch[C, P, B] {
	buf := a.tryAllocate(size, true) // the IO goroutine's: past the pool's hold
	heap := buf == nil
	if heap {
		buf = make([]byte, size)
	}
	b := a.newBatch(p, buf, time.Now())
	b.heap = heap
	if a.res != nil && a.tryReserve(a.batchCharge, true) {
		b.credit = a.batchCharge
	}
	return b
}

// MoveCredit tops up the bookkeeping charge of the detached batches to,
// which took over the completions of from (a split), to what their structs
// and records are charged (BatchCharge + RecordCharge per completion),
// taking it from from's charge, so that the pool keeps accounting for them
// after from is freed even when NewDetachedBatch and AddCompletion found
// the pool full; from keeps the rest, which Free gives back. What from
// lacks is reserved without waiting; when the pool has no room for it
// either, the last batches get less (like the heap buffers of halves the
// pool could not hold). IO goroutine only, before from is freed.
func (a *Accumulator[C, P, B]) MoveCredit(from *Batch[C, P, B], to ...*Batch[C, P, B]) {
	if a.res == nil {
		return
	}
	for _, b := range to {
		need := a.batchCharge + b.Records.Len()*a.recCharge - b.credit
		if need <= 0 {
			continue
		}
		if from.credit < need && a.tryReserve(need-from.credit, true) {
			from.credit = need
		}
		n := min(need, from.credit)
		from.credit -= n
		b.credit += n
	}
}
