package producer

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/samsa-go/samsa/accumulator"
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

	goid atomic.Uint64 // the completion goroutine's id, to detect Close from a callback
}

// outcome is a completed batch, or a single record that failed outside a
// batch (a parked record).
type outcome struct {
	batch      *accumulator.Batch[completion]
	baseOffset int64
	appendTime int64 // LogAppendTime in Unix ms, or -1
	err        error

	single *completion
	md     RecordMetadata
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
	p := c.p
	if o.single != nil {
		o.single.deliver(o.md, o.err)
		p.finished(1)
		return
	}
	b := o.batch
	part := b.Partition
	md := RecordMetadata{Topic: part.Topic.Name, Partition: part.ID, Offset: -1}
	if o.err == nil && o.appendTime >= 0 {
		md.Timestamp = timeFromMillis(o.appendTime)
	}
	n := b.Records.Len()
	for i := range n {
		if o.err == nil && o.baseOffset >= 0 {
			md.Offset = o.baseOffset + int64(i)
		}
		b.Records.At(i).deliver(md, o.err)
	}
	p.acc.Free(b)
	p.finished(int64(n))
	if p.memWanted.Load() && p.memWanted.Swap(false) {
		p.acc.Kick() // memory was freed: parked records may move now
	}
}

// stop completes everything queued, then ends the goroutine. The IO
// goroutine must have exited (nothing is pushed after stop).
func (c *completer) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.exited
}

// goroutineID returns the calling goroutine's id, read from its stack
// header ("goroutine 123 [running]:"). It is slow, and used only to tell
// whether Close runs inside a callback.
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
