package accumulator

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/internal/recordbatch"
)

// Topic is one topic's state in the accumulator: its partitions once
// metadata has arrived, and until then (or while earlier records are still
// parked) its parking queue of uncompressed records, in Send order.
type Topic[C, P, B any] struct {
	Name string

	acc *Accumulator[C, P, B]

	// parts is published by the IO goroutine; nil while the topic's
	// partitions are unknown.
	parts atomic.Pointer[[]*Partition[C, P, B]]
	// parking is set while parked records exist: appends must then park
	// too, so that records keep their Send order.
	parking atomic.Bool
	// failing, when set, is the error Park fails records with at once:
	// the topic is known to be unusable (see SetFailing).
	failing atomic.Pointer[error]

	mu     sync.Mutex // guards the fields below
	chunks [][]byte   // parking memory from the pool, oldest first
	// credit is the pool memory reserved for the parked records'
	// bookkeeping (parkCharge each, reserved in blocks); moving a record
	// hands recCharge of it to the record's batch.
	credit int

	// chunkSize is the size of the next parking chunk: InitialBatchSize
	// at first, doubling per chunk up to BatchSize, as batches grow, so
	// that a record parked for a new topic does not take a whole batch.
	chunkSize int

	parked parkQueue[C]
	// base is when the topic was created; a parked record's time is kept
	// as the monotonic nanoseconds since (parkedRecord.at).
	base time.Time
	// parkedRecords and parkedBytes follow parked (written under mu, read
	// without it by Parked).
	parkedRecords, parkedBytes atomic.Int64
}

// parkQueue is a FIFO of parked records in a linked list of small
// fixed-size segments, so that it grows without ever copying what it holds
// and no Send pays for more than one small segment: a Send that parks never
// moves the records parked before it, nor zeroes a large block (a 512-record
// segment, 53 KB, cost the Send that took it 8 to 30 µs). Emptied segments
// are kept for reuse (a few).
type parkQueue[C any] struct {
	head, tail *parkSegment[C]
	first      int // the oldest record's index in head
	last       int // records in tail
	n          int
	free       *parkSegment[C] // emptied segments, linked by next
	nfree      int
}

type parkSegment[C any] struct {
	recs [parkSegmentLen]parkedRecord[C]
	next *parkSegment[C]
}

// parkSegmentLen is the records per segment: 63 × 64 bytes (a parked
// record with the producer's completion) and the link are 4 040 bytes, a
// small object in the runtime's 4 KiB size class. 64 of them would round
// up to the 4 864-byte class: 12 bytes a record that ParkCharge does not
// cover.
const parkSegmentLen = 63

// keepFreeSegments is how many emptied segments a topic keeps for reuse:
// enough for Sends that park while the IO goroutine moves records, few
// enough (32 KiB) to leave out of the bookkeeping charge.
const keepFreeSegments = 8

func (q *parkQueue[C]) push(r parkedRecord[C]) {
	if q.tail == nil || q.last == parkSegmentLen {
		s := q.free
		if s != nil {
			q.free, s.next = s.next, nil
			q.nfree--
		} else {
			s = new(parkSegment[C])
		}
		if q.tail == nil {
			q.head, q.first = s, 0
		} else {
			q.tail.next = s
		}
		q.tail, q.last = s, 0
	}
	q.tail.recs[q.last] = r
	q.last++
	q.n++
}

// front returns the oldest record, or nil.
func (q *parkQueue[C]) front() *parkedRecord[C] {
	if q.n == 0 {
		return nil
	}
	return &q.head.recs[q.first]
}

// pop drops the oldest record; the queue must not be empty.
func (q *parkQueue[C]) pop() {
	q.head.recs[q.first] = parkedRecord[C]{}
	q.first++
	q.n--
	switch {
	case q.n == 0: // head == tail, every record of it popped
		q.release(q.head)
		q.head, q.tail, q.first, q.last = nil, nil, 0, 0
	case q.first == parkSegmentLen:
		s := q.head
		q.head, q.first = s.next, 0
		q.release(s)
	}
}

// release keeps an emptied (all zero) segment for reuse, up to
// keepFreeSegments; the GC takes the others.
func (q *parkQueue[C]) release(s *parkSegment[C]) {
	if q.nfree >= keepFreeSegments {
		return
	}
	s.next = q.free
	q.free = s
	q.nfree++
}

type parkedRecord[C any] struct {
	ts        int64
	chunk     int32 // index into chunks
	off, n    int32
	partition int32 // as given to Park
	// at is when the record was parked, in nanoseconds since Topic.base:
	// one monotonic clock read instead of time.Now's two (time.Now was a
	// third of Park's median on the test VM), 8 bytes instead of 24, and
	// no *time.Location for the GC to scan.
	at int64
	c  C
}

// NewTopic returns the state of topic name. The producer keeps topics in its
// own map.
func (a *Accumulator[C, P, B]) NewTopic(name string) *Topic[C, P, B] {
	return &Topic[C, P, B]{Name: name, acc: a, base: time.Now()}
}

// Partitions returns the topic's partitions, or nil while they are unknown
// or while records are parked (the caller must then Park). It never blocks.
func (t *Topic[C, P, B]) Partitions() []*Partition[C, P, B] {
	if t.parking.Load() {
		return nil
	}
	if ps := t.parts.Load(); ps != nil {
		return *ps
	}
	return nil
}

// KnownPartitions returns the published partitions, parked records or not;
// nil while unknown. For the IO goroutine.
func (t *Topic[C, P, B]) KnownPartitions() []*Partition[C, P, B] {
	if ps := t.parts.Load(); ps != nil {
		return *ps
	}
	return nil
}

// SetPartitions publishes the topic's partitions (IO goroutine only). The
// slice must not be changed afterwards; publish a new one when the partition
// count grows.
func (t *Topic[C, P, B]) SetPartitions(ps []*Partition[C, P, B]) {
	t.parts.Store(&ps)
}

// SetFailing makes Park fail every record with err, at once, until it is
// called again with nil (IO goroutine only): the topic is known to be
// unusable (not authorized, invalid, or missing for longer than MaxBlock),
// and records for it must not take pool memory that healthy topics need.
// It does not affect records already parked (see FailParked).
func (t *Topic[C, P, B]) SetFailing(err error) {
	if err == nil {
		t.failing.Store(nil)
		return
	}
	t.failing.Store(&err)
}

// Failing returns the error set by SetFailing, or nil.
func (t *Topic[C, P, B]) Failing() error {
	if p := t.failing.Load(); p != nil {
		return *p
	}
	return nil
}

// Park parks a record whose topic has no known partitions yet, in an
// uncompressed form, with memory from the pool (waiting up to MaxBlock in
// all if wait is set: its waits for bookkeeping and for a parking chunk,
// and its retries when another Park took the room, share one deadline). It returns parked=false without error if, once under the
// topic's lock, the partitions turned out to be known and nothing is parked:
// the caller then appends to a partition instead. It fails with the error
// set by SetFailing while one is set. partition is kept for the caller's
// partitioning when the record moves (ParkedRecord.Partition): the producer
// passes the partition the record must go to, or -1 to let its partitioner
// decide.
func (t *Topic[C, P, B]) Park(ctx context.Context, ts int64, key, value []byte, headers []recordbatch.Header, partition int32, c C, wait bool) (parked bool, err error) {
	size := recordbatch.BodySize(key, value, headers)
	a := t.acc
	var spare []byte
	spareCredit := 0
	var deadline time.Time // of every wait for memory: see Accumulator.remaining
	for {
		t.mu.Lock()
		if !t.parking.Load() && t.parts.Load() != nil {
			t.mu.Unlock()
			a.cfg.Pool.Release(spare)
			a.unreserve(spareCredit)
			return false, nil
		}
		if p := t.failing.Load(); p != nil {
			// Checked under the lock: the IO goroutine sets it, then
			// fails what is parked under the lock, so no record slips
			// in between unfailed.
			t.mu.Unlock()
			a.cfg.Pool.Release(spare)
			a.unreserve(spareCredit)
			return false, *p
		}
		if spare != nil {
			t.chunks = append(t.chunks, spare)
			spare = nil
		}
		t.credit += spareCredit
		spareCredit = 0
		if a.res != nil && t.credit < (t.parked.n+1)*a.parkCharge {
			// The record's bookkeeping is charged to the pool too.
			blk := chargeBlock * a.parkCharge
			if !a.res.TryReserve(blk) {
				t.mu.Unlock()
				if err := a.reserve(ctx, t.Name, blk, wait, &deadline); err != nil {
					t.dropIdle()
					return false, err
				}
				spareCredit = blk
				continue
			}
			t.credit += blk
		}
		if n := len(t.chunks); n > 0 && cap(t.chunks[n-1])-len(t.chunks[n-1]) >= size {
			chunk := t.chunks[n-1]
			off := len(chunk)
			t.chunks[n-1] = recordbatch.AppendBody(chunk, key, value, headers)
			t.parked.push(parkedRecord[C]{
				ts: ts, chunk: int32(n - 1), off: int32(off), n: int32(size),
				partition: partition, at: int64(time.Since(t.base)), c: c,
			})
			t.parkedRecords.Add(1)
			t.parkedBytes.Add(int64(size))
			first := !t.parking.Load()
			if first { // cleared only under mu: no atomic write per record
				t.parking.Store(true)
			}
			t.mu.Unlock()
			if first {
				t.acc.post(Event[C, P, B]{Kind: Parked, Topic: t})
			}
			return true, nil
		}
		want := t.nextChunkLocked()
		t.mu.Unlock()
		buf, err := t.acc.allocate(ctx, t.Name, max(want, size), wait, &deadline)
		if err != nil {
			t.dropIdle()
			return false, err
		}
		spare = buf[:0]
	}
}

// dropIdle gives back what a Park that failed for memory leaves behind
// when nothing is parked: the bookkeeping block it reserved and the chunks
// of other Parks that failed the same way. With nothing parked no event
// brings the IO goroutine to resetLocked, and once the topic's partitions
// are known Park is not called again, so they would stay taken.
func (t *Topic[C, P, B]) dropIdle() {
	t.mu.Lock()
	if t.parked.n == 0 && !t.parking.Load() {
		t.resetLocked()
	}
	t.mu.Unlock()
}

// nextChunkLocked returns the size of the next parking chunk and doubles
// the one after it, up to BatchSize.
func (t *Topic[C, P, B]) nextChunkLocked() int {
	cfg := &t.acc.cfg
	if t.chunkSize <= 0 {
		t.chunkSize = cfg.InitialBatchSize
	}
	n := t.chunkSize
	t.chunkSize = min(2*n, cfg.BatchSize)
	return n
}

// ParkedRecord is a parked record handed to MoveParked's function.
type ParkedRecord struct {
	Timestamp int64
	// Body is the record's encoded body (recordbatch.AppendBody); it is
	// valid only during the call.
	Body []byte
	// Partition is the partition given to Park.
	Partition int32
}

// MoveParked moves parked records, oldest first, into partition batches
// (IO goroutine only). place returns the partition of each record, or an
// error to fail it with; fail is then called with the record's
// completion (under Config.KeepFailedCharge the record's ParkCharge stays
// reserved for the caller's ReleaseFailed). Moving stops early when the pool has no memory for a new
// batch; MoveParked then reports done=false and the IO goroutine calls it
// again once memory is released. When every record has moved, the
// topic stops parking and Send appends directly again.
//
// place runs without the topic's lock held (it runs the user's
// partitioner, which may be slow or panic), on a copy of the record's body;
// only the move itself, which keeps Send order, is under the lock.
func (t *Topic[C, P, B]) MoveParked(place func(r ParkedRecord) (*Partition[C, P, B], error), fail func(c C, err error)) (done bool) {
	var body []byte
	for {
		t.mu.Lock()
		r := t.parked.front()
		if r == nil {
			t.resetLocked()
			t.mu.Unlock()
			return true
		}
		rec := *r // stays the front: only the IO goroutine pops
		body = append(body[:0], t.chunks[rec.chunk][rec.off:rec.off+rec.n]...)
		t.mu.Unlock()
		p, err := place(ParkedRecord{Timestamp: rec.ts, Body: body, Partition: rec.partition})
		t.mu.Lock()
		if err != nil {
			fail(rec.c, err)
			t.keepFailedLocked()
		} else if !p.appendBody(rec.ts, body, rec.c, t.timeOf(rec.at), &t.credit) {
			t.mu.Unlock()
			return false
		}
		t.popLocked()
		t.mu.Unlock()
	}
}

// ExpireParked fails, with fail, every record parked at or before deadline
// (IO goroutine only), and returns when the oldest remaining record was
// parked (zero if none remain). A failed record's body memory goes back to
// the pool at once; under Config.KeepFailedCharge its ParkCharge stays
// reserved for the caller's ReleaseFailed.
func (t *Topic[C, P, B]) ExpireParked(deadline time.Time, fail func(c C, parkedAt time.Time)) (oldest time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	last := int64(deadline.Sub(t.base))
	for r := t.parked.front(); r != nil; r = t.parked.front() {
		if r.at > last {
			return t.timeOf(r.at)
		}
		fail(r.c, t.timeOf(r.at))
		t.keepFailedLocked()
		t.popLocked()
	}
	t.resetLocked()
	return time.Time{}
}

// FailParked fails every parked record (on Close, for a failing topic, or
// when a transaction aborts), with the same memory rule as ExpireParked.
func (t *Topic[C, P, B]) FailParked(fail func(c C)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for r := t.parked.front(); r != nil; r = t.parked.front() {
		fail(r.c)
		t.keepFailedLocked()
		t.popLocked()
	}
	t.resetLocked()
}

// Parked returns the number of parked records and their body bytes. Any
// goroutine, without a lock.
func (t *Topic[C, P, B]) Parked() (records, bytes int64) {
	return t.parkedRecords.Load(), t.parkedBytes.Load()
}

// OldestParked returns when the oldest parked record was parked, or the zero
// time if none is.
func (t *Topic[C, P, B]) OldestParked() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.parked.front(); r != nil {
		return t.timeOf(r.at)
	}
	return time.Time{}
}

// timeOf returns the time of parkedRecord.at (with a monotonic reading).
func (t *Topic[C, P, B]) timeOf(at int64) time.Time {
	return t.base.Add(time.Duration(at))
}

// keepFailedLocked takes the charge of the front record, which is failing,
// out of the topic's credit under Config.KeepFailedCharge: it stays
// reserved until the caller's ReleaseFailed. The credit covers it: Park
// keeps at least ParkCharge per parked record.
func (t *Topic[C, P, B]) keepFailedLocked() {
	if a := t.acc; a.res != nil && a.cfg.KeepFailedCharge {
		t.credit -= a.parkCharge
	}
}

// popLocked drops the oldest parked record and releases the chunks that no
// parked record uses any more. Chunk indexes stay valid because a freed chunk
// is only set to nil; the chunk list is emptied by resetLocked.
func (t *Topic[C, P, B]) popLocked() {
	front := t.parked.front()
	done := front.chunk
	t.parkedRecords.Add(-1)
	t.parkedBytes.Add(-int64(front.n))
	t.parked.pop()
	if a := t.acc; a.res != nil {
		// Keep at most one spare block of bookkeeping reserved.
		blk := chargeBlock * a.parkCharge
		if extra := t.credit - t.parked.n*a.parkCharge - blk; extra >= blk {
			a.unreserve(extra)
			t.credit -= extra
		}
	}
	next := t.parked.front()
	if next == nil {
		return // resetLocked frees everything
	}
	for i := done; i < next.chunk; i++ {
		t.acc.cfg.Pool.Release(t.chunks[i])
		t.chunks[i] = nil
	}
}

// resetLocked empties the queue once every record has left it and stops
// parking.
func (t *Topic[C, P, B]) resetLocked() {
	for i, c := range t.chunks {
		if c != nil {
			t.acc.cfg.Pool.Release(c)
			t.chunks[i] = nil
		}
	}
	t.chunks = t.chunks[:0]
	t.chunkSize = 0
	if t.credit > 0 {
		t.acc.unreserve(t.credit)
	}
	t.credit = 0
	t.parking.Store(false)
}

// FailParkedIf fails, with fail, the parked records whose completion match
// reports true, and keeps the others in Send order (IO goroutine only):
// records whose Send context ended, say. match runs under the topic's lock
// and must not block. It returns how many records failed; their memory
// follows ExpireParked's rule.
func (t *Topic[C, P, B]) FailParkedIf(match func(c *C) bool, fail func(c C)) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	front := t.parked.front()
	if front == nil {
		return 0
	}
	oldChunk := front.chunk
	var failed int
	var bytes int64
	t.parked.filter(func(r *parkedRecord[C]) bool {
		if !match(&r.c) {
			return true
		}
		fail(r.c)
		t.keepFailedLocked()
		failed++
		bytes += int64(r.n)
		return false
	})
	if failed == 0 {
		return 0
	}
	t.parkedRecords.Add(-int64(failed))
	t.parkedBytes.Add(-bytes)
	next := t.parked.front()
	if next == nil {
		t.resetLocked()
		return failed
	}
	if a := t.acc; a.res != nil {
		// As popLocked: at most one spare block of bookkeeping stays.
		blk := chargeBlock * a.parkCharge
		if extra := t.credit - t.parked.n*a.parkCharge - blk; extra >= blk {
			a.unreserve(extra)
			t.credit -= extra
		}
	}
	// Chunks before the new front's hold no parked record any more (a
	// failed record's chunk behind it is released as the front passes).
	for i := oldChunk; i < next.chunk; i++ {
		if t.chunks[i] != nil {
			t.acc.cfg.Pool.Release(t.chunks[i])
			t.chunks[i] = nil
		}
	}
	return failed
}

// filter keeps, in order, the records keep reports true for, compacting the
// queue in place; emptied segments are released.
func (q *parkQueue[C]) filter(keep func(r *parkedRecord[C]) bool) {
	if q.n == 0 {
		return
	}
	ws, wi := q.head, q.first // where the next kept record goes
	rs, ri := q.head, q.first // the next record to look at
	kept := 0
	for left := q.n; left > 0; left-- {
		if ri == parkSegmentLen {
			rs, ri = rs.next, 0
		}
		r := &rs.recs[ri]
		ri++
		if !keep(r) {
			continue
		}
		if wi == parkSegmentLen {
			ws, wi = ws.next, 0
		}
		if w := &ws.recs[wi]; w != r {
			*w = *r
		}
		wi++
		kept++
	}
	if kept == 0 {
		for s := q.head; s != nil; {
			next := s.next
			clear(s.recs[:])
			s.next = nil
			q.release(s)
			s = next
		}
		q.head, q.tail, q.first, q.last, q.n = nil, nil, 0, 0, 0
		return
	}
	clear(ws.recs[wi:])
	for s := ws.next; s != nil; {
		next := s.next
		clear(s.recs[:])
		s.next = nil
		q.release(s)
		s = next
	}
	ws.next = nil
	q.tail, q.last, q.n = ws, wi, kept
}
