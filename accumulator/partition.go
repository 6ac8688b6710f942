package accumulator

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/internal/recordbatch"
)

// Partition is one partition's queue: the open batch that Send appends to,
// and the sealed batches waiting for the IO goroutine.
type Partition[C, P, B any] struct {
	Topic *Topic[C, P, B]
	ID    int32

	// IO is the IO goroutine's own state for this partition (leader,
	// in-flight batches, sequences). Only that goroutine touches it; the
	// accumulator never reads it.
	IO P

	acc *Accumulator[C, P, B]

	mu      sync.Mutex
	open    *Batch[C, P, B]
	sealed  sealedQueue[C, P, B]
	flagged bool // a Sealed event is pending
	// lastSize is the size recent sealed batches reached: the last one's,
	// or half the previous lastSize if that is more, so that one small
	// batch (a sticky partitioner moving on) does not make the next big
	// one regrow from the smallest buffer. The next batch starts with a
	// buffer that holds as much.
	lastSize int

	queued atomic.Int32 // batches open or sealed, not yet taken by the IO goroutine
	// unusable holds the IO goroutine's reasons for partitioners to avoid
	// the partition: leaderlessBit while it has no leader, unreadyBit
	// while its leader is excluded by partitioner.availability.timeout.ms.
	// One word, so that Load reads one atomic.
	unusable atomic.Uint32
}

const (
	leaderlessBit uint32 = 1 << iota
	unreadyBit
)

// NewPartition returns the queue of partition id of t. The IO goroutine
// creates partitions when metadata arrives and publishes them with
// Topic.SetPartitions.
func (a *Accumulator[C, P, B]) NewPartition(t *Topic[C, P, B], id int32) *Partition[C, P, B] {
	return &Partition[C, P, B]{Topic: t, ID: id, acc: a}
}

// Load returns the partition's queue length for the adaptive partitioner,
// -1 while the partition has no known leader, or -2 while its leader is
// not ready (SetUnready).
func (p *Partition[C, P, B]) Load() int {
	if u := p.unusable.Load(); u != 0 {
		if u&leaderlessBit != 0 {
			return -1
		}
		return -2
	}
	return int(p.queued.Load())
}

// SetLeaderless records whether the partition lacks a leader (IO goroutine).
func (p *Partition[C, P, B]) SetLeaderless(v bool) { p.setBit(leaderlessBit, v) }

// SetUnready records whether the partition's leader has not been ready to
// take requests for longer than the partitioner's availability timeout
// (KIP-794's partitioner.availability.timeout.ms), so that the adaptive
// partitioner leaves the partition out (IO goroutine).
func (p *Partition[C, P, B]) SetUnready(v bool) { p.setBit(unreadyBit, v) }

func (p *Partition[C, P, B]) setBit(bit uint32, v bool) {
	if v {
		p.unusable.Or(bit)
	} else {
		p.unusable.And(^bit)
	}
}

// Append appends a record to the partition's open batch. When the open batch
// is full (or there is none) it seals it and opens a new one, with memory from
// the pool: waiting up to MaxBlock in all if wait is set, however many
// waits it takes (only the pool waits honor ctx), or failing at once with an error matching ErrBufferExhausted if not.
// The caller has checked the record's size with CheckSize. On success c is
// the record's completion, kept in the batch.
func (p *Partition[C, P, B]) Append(ctx context.Context, ts int64, key, value []byte, headers []recordbatch.Header, c C, wait bool) error {
	a := p.acc
	var deadline time.Time // of every wait for memory: see Accumulator.remaining
	p.mu.Lock()
	if b := p.open; b != nil {
		if !a.credit(b, false) {
			if b.Builder.Len()+b.Builder.RecordSize(ts, recordbatch.BodySize(key, value, headers)) <= b.Builder.Cap() {
				// The record fits: only its bookkeeping is missing, so
				// wait for that, not for a whole new batch's buffer.
				p.mu.Unlock()
				done, err := p.appendWithCredit(ctx, ts, key, value, headers, c, wait, &deadline)
				if done || err != nil {
					return err
				}
				p.mu.Lock()
			}
		} else if b.Builder.Append(ts, key, value, headers) ||
			(p.growLocked(b, b.Builder.RecordSize(ts, recordbatch.BodySize(key, value, headers)), false) && b.Builder.Append(ts, key, value, headers)) {
			b.Records.push(&p.acc.chunks, c)
			p.mu.Unlock()
			return nil
		}
	}
	last := p.lastSize
	p.mu.Unlock()

	// Allocate outside the lock: other appends to this partition go on while
	// this one waits for memory. The new batch's bookkeeping is charged to
	// the pool too (see Accumulator.credit).
	buf, err := a.allocate(ctx, p.Topic.Name, a.bufferFor(last, recordbatch.BodySize(key, value, headers)), wait, &deadline)
	if err != nil {
		return err
	}
	charge := a.firstCharge()
	if err := a.reserve(ctx, p.Topic.Name, charge, wait, &deadline); err != nil {
		a.cfg.Pool.Release(buf)
		return err
	}

	p.mu.Lock()
	// Another append opened a batch while we waited, or the open one only
	// lacked bookkeeping room: our reservation goes to it if the record
	// fits.
	if p.appendOpenLocked(charge, ts, key, value, headers, c) {
		p.mu.Unlock()
		a.cfg.Pool.Release(buf)
		return nil
	}
	b := p.openLocked(buf, time.Now())
	b.credit = charge
	if !b.Builder.Append(ts, key, value, headers) {
		panic("accumulator: record does not fit in a buffer sized for it")
	}
	b.Records.push(&p.acc.chunks, c)
	p.mu.Unlock()
	return nil
}

// appendWithCredit is Append for a record that fits in the open batch,
// which lacks only bookkeeping credit for it: it reserves a block of
// credit if the pool has it, else the record's own charge (waiting as
// Append does, until Append's deadline), and appends to the batch open then. Every batch's credit
// already covers its records' charges, so one more record's charge covers
// this one in whichever batch is open by then. It reports false, with the reservation
// given back, when that batch no longer takes the record (it was sealed
// meanwhile, or the record does not fit the one opened since): Append
// then opens a batch.
func (p *Partition[C, P, B]) appendWithCredit(ctx context.Context, ts int64, key, value []byte, headers []recordbatch.Header, c C, wait bool, deadline *time.Time) (bool, error) {
	a := p.acc
	n := chargeBlock * a.recCharge
	if !a.res.TryReserve(n) {
		n = a.recCharge
		if err := a.reserve(ctx, p.Topic.Name, n, wait, deadline); err != nil {
			return false, err
		}
	}
	p.mu.Lock()
	done := p.appendOpenLocked(n, ts, key, value, headers, c)
	p.mu.Unlock()
	if !done {
		a.res.Unreserve(n)
	}
	return done, nil
}

// appendOpenLocked appends the record to the open batch, handing the batch
// credit bytes of bookkeeping reserved for it, and reports whether it did:
// false (the credit not taken) when no batch is open or the record does
// not fit it. p.mu is held.
func (p *Partition[C, P, B]) appendOpenLocked(credit int, ts int64, key, value []byte, headers []recordbatch.Header, c C) bool {
	b := p.open
	if b == nil {
		return false
	}
	b.credit += credit
	if !b.Builder.Append(ts, key, value, headers) {
		b.credit -= credit
		return false
	}
	b.Records.push(&p.acc.chunks, c)
	return true
}

// appendBody is Append for a parked record, called by the IO goroutine:
// it never waits for memory and reports false when the pool has none; it
// takes memory the pool holds for it (bufferpool.Holder), which Sends
// cannot. A new
// batch counts its age (linger, delivery timeout) from parkedAt, when its
// first record entered the producer.
func (p *Partition[C, P, B]) appendBody(ts int64, body []byte, c C, parkedAt time.Time, parkCredit *int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.acc
	// The record's bookkeeping moves from the topic's parking charge
	// (parkCharge >= recCharge) when the pool has no room for more: the
	// pool may be full of parked records themselves.
	takeCredit := func(b *Batch[C, P, B]) {
		if !a.credit(b, true) {
			b.credit += a.recCharge
			*parkCredit -= a.recCharge
		}
	}
	if b := p.open; b != nil && (b.Builder.AppendBody(ts, body) ||
		(p.growLocked(b, b.Builder.RecordSize(ts, len(body)), true) && b.Builder.AppendBody(ts, body))) {
		takeCredit(b)
		b.Records.push(&p.acc.chunks, c)
		return true
	}
	size := a.bufferFor(p.lastSize, len(body))
	buf := a.tryAllocate(size, true)
	overdraft := false
	if buf == nil {
		// The pool may be full of parked records themselves: without
		// memory for a batch they could never move and free it. One batch
		// at a time may then live outside the pool, so the bound on record
		// memory is the pool's size plus one batch.
		if !a.overdraft.CompareAndSwap(false, true) {
			return false
		}
		buf, overdraft = make([]byte, size), true
	}
	b := p.openLocked(buf, parkedAt)
	b.overdraft = overdraft
	if !b.Builder.AppendBody(ts, body) {
		panic("accumulator: parked record does not fit in a buffer sized for it")
	}
	if n := a.firstCharge(); a.res != nil && a.tryReserve(n, true) {
		b.credit = n
	}
	takeCredit(b)
	b.Records.push(&p.acc.chunks, c)
	return true
}

// growLocked moves the open batch b into a buffer twice as large (at most
// BatchSize), so that a record of need more bytes fits, with memory taken
// from the pool without waiting (past its hold with held: a parked record
// moving). It reports whether it grew.
func (p *Partition[C, P, B]) growLocked(b *Batch[C, P, B], need int, held bool) bool {
	a := p.acc
	cur := b.Builder.Cap()
	if cur >= a.cfg.BatchSize {
		return false
	}
	size := min(max(2*cur, b.Builder.Len()+need), a.cfg.BatchSize)
	if size < b.Builder.Len()+need {
		return false // even a full-size batch would not take the record: seal
	}
	buf := a.tryAllocate(size, held)
	if buf == nil {
		return false
	}
	b.Builder.Grow(a.builderBuf(buf))
	switch {
	case b.overdraft:
		a.overdraft.Store(false)
	case !b.heap:
		a.cfg.Pool.Release(b.buf) // the whole buffer the pool handed out
	}
	b.buf, b.overdraft, b.heap = buf, false, false
	return true
}

// openLocked seals the open batch, if any, and opens a new one in buf,
// created at created.
func (p *Partition[C, P, B]) openLocked(buf []byte, created time.Time) *Batch[C, P, B] {
	if p.open != nil {
		p.sealLocked()
	}
	a := p.acc
	b := a.newBatch(p, buf, created)
	p.open = b
	p.queued.Add(1)
	a.post(Event[C, P, B]{Kind: Opened, Partition: p, Batch: b, Gen: b.gen.Load(), At: b.Created})
	return b
}

func (p *Partition[C, P, B]) sealLocked() {
	p.lastSize = max(p.open.Builder.Len(), p.lastSize/2)
	p.sealed.push(p.open)
	p.open = nil
	if !p.flagged {
		p.flagged = true
		p.acc.post(Event[C, P, B]{Kind: Sealed, Partition: p})
	}
}

// Seal seals b if it is still this partition's open batch in generation gen
// (the IO goroutine calls it when b has lingered, or on Flush). It reports
// whether it sealed.
func (p *Partition[C, P, B]) Seal(b *Batch[C, P, B], gen uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open != b || b.gen.Load() != gen || b.Records.Len() == 0 {
		return false
	}
	p.sealLocked()
	return true
}

// sealOpen seals the open batch, whatever it is, if it has records.
func (p *Partition[C, P, B]) sealOpen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == nil || p.open.Records.Len() == 0 {
		return false
	}
	p.sealLocked()
	return true
}

// NextSealed removes and returns the oldest sealed batch, or nil. The IO
// goroutine owns the batch from then on.
func (p *Partition[C, P, B]) NextSealed() *Batch[C, P, B] {
	b, _ := p.PopSealed()
	return b
}

// PopSealed is NextSealed that also reports whether another sealed batch
// follows: a drain that took the last one need not look again (a batch
// sealed later posts a Sealed event, as the queue was left empty).
func (p *Partition[C, P, B]) PopSealed() (b *Batch[C, P, B], more bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b = p.sealed.pop()
	if b == nil || p.sealed.len() == 0 {
		p.flagged = false
	}
	if b != nil {
		p.queued.Add(-1)
	}
	return b, p.sealed.len() > 0
}

// PeekSealed returns the oldest sealed batch without removing it, or nil.
func (p *Partition[C, P, B]) PeekSealed() *Batch[C, P, B] {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sealed.peek()
}

// TakeAll removes the open and sealed batches (for Close and for failing a
// partition's records) and returns them, oldest first.
func (p *Partition[C, P, B]) TakeAll(dst []*Batch[C, P, B]) []*Batch[C, P, B] {
	p.mu.Lock()
	defer p.mu.Unlock()
	dst = p.sealed.takeAll(dst)
	if p.open != nil {
		dst = append(dst, p.open)
		p.open = nil
	}
	p.flagged = false
	p.queued.Store(0)
	return dst
}

// sealedQueue is a partition's sealed batches, oldest first. It keeps its
// array when it empties: with thousands of partitions, each seals and
// drains a batch or two at a time, and a queue that dropped its array
// allocated one per batch. An array past maxKeptSealed slots is dropped
// when the queue empties, so that a burst does not pin it.
type sealedQueue[C, P, B any] struct {
	q    []*Batch[C, P, B]
	head int // q[head:] are queued
}

const maxKeptSealed = 64

func (s *sealedQueue[C, P, B]) len() int { return len(s.q) - s.head }

func (s *sealedQueue[C, P, B]) push(b *Batch[C, P, B]) {
	if s.head > 0 && len(s.q) == cap(s.q) && s.head >= len(s.q)/2 {
		// Full, and at least half of it free at the front: move the
		// queued ones down first. (With less free, append grows the
		// array instead: a queue that stays nearly full would otherwise
		// copy itself on every push.)
		n := copy(s.q, s.q[s.head:])
		clear(s.q[n:])
		s.q, s.head = s.q[:n], 0
	}
	s.q = append(s.q, b)
}

func (s *sealedQueue[C, P, B]) peek() *Batch[C, P, B] {
	if s.head == len(s.q) {
		return nil
	}
	return s.q[s.head]
}

func (s *sealedQueue[C, P, B]) pop() *Batch[C, P, B] {
	if s.head == len(s.q) {
		return nil
	}
	b := s.q[s.head]
	s.q[s.head] = nil
	s.head++
	if s.head == len(s.q) {
		s.reset()
	}
	return b
}

// takeAll appends the queued batches to dst and empties the queue.
func (s *sealedQueue[C, P, B]) takeAll(dst []*Batch[C, P, B]) []*Batch[C, P, B] {
	dst = append(dst, s.q[s.head:]...)
	clear(s.q)
	s.reset()
	return dst
}

func (s *sealedQueue[C, P, B]) reset() {
	s.head = 0
	if cap(s.q) > maxKeptSealed {
		s.q = nil
	} else {
		s.q = s.q[:0]
	}
}

// SealOpenIf seals the open batch if it has records and match reports true
// for it (IO goroutine only; match runs under the partition's lock, on a
// batch Sends cannot append to meanwhile, and must not block). It reports
// whether it sealed.
func (p *Partition[C, P, B]) SealOpenIf(match func(b *Batch[C, P, B]) bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == nil || p.open.Records.Len() == 0 || !match(p.open) {
		return false
	}
	p.sealLocked()
	return true
}

// RewriteSealed hands each sealed batch, oldest first, to fn, which returns
// the batch to queue in its place (itself, or a new one holding part of
// its records) or nil to leave it out (IO goroutine only; fn then owns
// what it was given). fn runs without the partition's lock: batches sealed
// meanwhile queue behind the rewritten ones.
func (p *Partition[C, P, B]) RewriteSealed(fn func(b *Batch[C, P, B]) *Batch[C, P, B]) {
	p.mu.Lock()
	taken := p.sealed.takeAll(nil)
	p.mu.Unlock()
	if len(taken) == 0 {
		return
	}
	kept := taken[:0]
	for _, b := range taken {
		if nb := fn(b); nb != nil {
			kept = append(kept, nb)
		}
	}
	p.mu.Lock()
	later := p.sealed.takeAll(nil)
	for _, b := range kept {
		p.sealed.push(b)
	}
	for _, b := range later {
		p.sealed.push(b)
	}
	p.queued.Add(int32(len(kept) - len(taken)))
	if p.sealed.len() == 0 {
		// The IO goroutine looks at an empty queue no more: the next
		// seal must post its event.
		p.flagged = false
	}
	p.mu.Unlock()
}
