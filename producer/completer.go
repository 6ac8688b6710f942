package producer

import (
	"bytes"
	"context"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// completer owns the completion goroutine: it completes futures, runs
// callbacks and feeds delivery channels, one record at a time, off the IO
// goroutine so that user code never stalls the network. A batch's memory
// goes back to the pool only after its records are completed, so a slow
// consumer of outcomes slows Send down (through the pool) instead of growing
// memory without bound.
type completer struct {
	p *Producer

	mu      sync.Mutex
	queue   []outcome
	stopped bool
	wake    chan struct{}
	exited  chan struct{}

	goid atomic.Uint64 // the completion goroutine's id: Close, Flush and a waiting Send detect a callback by it
	// progress grows as outcomes are delivered (per outcome, and every 32
	// records of a batch): stop tells a blocked callback from a long queue.
	progress atomic.Uint64
}

// stuckAfter is how long stop, once Close's context has ended, waits for the
// completion goroutine to make progress before it leaves it running.
const stuckAfter = 100 * time.Millisecond

// outcome is a completed batch, or a single record that failed outside a
// batch (a parked record). Either keeps its memory until delivered.
type outcome struct {
	batch      *batch
	baseOffset int64
	appendTime int64 // LogAppendTime in Unix ms, or -1
	err        error

	// single is a parked record that failed; its bookkeeping charge stays
	// reserved (accumulator.Config.KeepFailedCharge) until it is delivered.
	single *completion
	md     RecordMetadata

	// hold: deliver the batch's records but keep the batch, whose request
	// is still in flight (failed at its delivery timeout); the IO goroutine
	// sends a release outcome for it once the answer is in.
	hold bool
	// release: only free the batch (its records were delivered by a hold).
	release bool
}

func newCompleter(p *Producer) *completer {
	return &completer{p: p, wake: make(chan struct{}, 1), exited: make(chan struct{})}
}

func (c *completer) push(o outcome) {
	c.mu.Lock()
	c.queue = append(c.queue, o)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *completer) run() {
	defer close(c.exited)
	c.goid.Store(goroutineID())
	var work []outcome
	for {
		c.mu.Lock()
		work, c.queue = c.queue, work[:0]
		stopped := c.stopped
		c.mu.Unlock()
		for i := range work {
			c.complete(&work[i])
			work[i] = outcome{}
		}
		if len(work) == 0 {
			if stopped {
				return
			}
			<-c.wake
		}
	}
}

func (c *completer) complete(o *outcome) {
	defer c.progress.Add(1)
	p := c.p
	if o.err != nil && p.txn != nil {
		p.txn.recordFailed(o.err) // before the records count as done: Commit sees it
	}
	if o.single != nil {
		if o.err != nil {
			p.failedOf(o.md.Topic, 1)
		}
		p.deliver(o.single, o.md, o.err)
		p.acc.ReleaseFailed(1) // its charge, kept since it failed
		c.freed()
		p.finished(o.single.epoch(), 1)
		return
	}
	b := o.batch
	if o.release {
		c.free(b)
		return
	}
	part := b.Partition
	md := RecordMetadata{Topic: part.Topic.Name, Partition: part.ID, Offset: -1}
	if o.err == nil && o.appendTime >= 0 {
		md.Timestamp = timeFromMillis(o.appendTime)
	}
	n := b.Records.Len()
	if o.err != nil {
		p.batchFailed(b)
	}
	for i := 0; i < n; {
		i = c.deliverFrom(o, md, i)
	}
	odd := oddEpochs(b)
	if !o.hold {
		c.free(b)
	}
	p.finishedBatch(int64(n), odd)
}

// deliverFrom delivers the records of o's batch from index next on, and
// returns the index it stopped at: the end, or the record after one whose
// callback panicked. The panic is recovered and logged, so that one bad
// callback does not kill the process or hold up the other records.
func (c *completer) deliverFrom(o *outcome, md RecordMetadata, next int) (stop int) {
	b := o.batch
	defer func() {
		if v := recover(); v != nil {
			if b.Records.At(next).kind() == kindFuture {
				panic(v) // the producer's own bug, not user code
			}
			c.p.logPanic(v, "topic", md.Topic, "partition", md.Partition)
			stop = next + 1
		}
	}()
	// A batch's records mostly share their millisecond: one time.Time
	// per distinct timestamp, not one per record (time.UnixMilli's
	// divisions cost about a tenth of a small record's whole trip).
	stamp := o.err == nil && md.Timestamp.IsZero() // CreateTime: each record's own
	lastMs := int64(math.MinInt64)
	for n := b.Records.Len(); next < n; next++ {
		if next&31 == 31 {
			c.progress.Add(1)
		}
		if o.err == nil && o.baseOffset >= 0 {
			md.Offset = o.baseOffset + int64(next)
		}
		r := b.Records.At(next)
		if ts := r.ts(); stamp && ts != lastMs {
			lastMs, md.Timestamp = ts, time.UnixMilli(ts)
		}
		r.deliver(md, o.err)
	}
	return next
}

// free gives b's memory back and wakes the IO goroutine if it waits for
// memory to move parked records.
func (c *completer) free(b *batch) {
	c.p.acc.Free(b)
	c.freed()
}

// freed wakes the IO goroutine, if it waits for memory to move parked
// records, after memory went back to the pool.
func (c *completer) freed() {
	if p := c.p; p.memWanted.Load() && p.memWanted.Swap(false) {
		p.acc.Kick() // memory was freed: parked records may move now
	}
}

// stop completes everything queued, then ends the goroutine. The IO
// goroutine must have exited (nothing is pushed after stop). Once ctx has
// ended it waits only while completions make progress: when no outcome was
// delivered for stuckAfter, a callback blocks, and stop returns without
// it. The goroutine then delivers what is queued behind that callback once
// it returns, and exits.
func (c *completer) stop(ctx context.Context) {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case <-c.exited:
		return
	case <-ctx.Done():
	}
	tick := time.NewTicker(stuckAfter)
	defer tick.Stop()
	last := c.progress.Load()
	for {
		select {
		case <-c.exited:
			return
		case <-tick.C:
			n := c.progress.Load()
			if n == last {
				c.p.log.Warn("producer: Close's context ended and a callback has not returned; Close returns without waiting for it",
					"waited", stuckAfter)
				return
			}
			last = n
		}
	}
}

// goroutineID returns the calling goroutine's id, read from its stack
// header ("goroutine 123 [running]:"). It is slow, and used only to tell
// whether Close or Flush runs inside a callback, and whether a Send that
// would wait for memory does.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
