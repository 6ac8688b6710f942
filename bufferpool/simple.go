package bufferpool

import (
	"context"
	"fmt"
	"log/slog"
	"math/bits"
	"sync"
	"time"
	"unsafe"
	"weak"

	"github.com/samsa-go/samsa/internal/freelist"
)

// SimplePool is the default [Pool]: one mutex guards free lists of recycled
// buffers (PooledSize, and each doubling up to MaxPooledSize), the non-pooled
// available bytes and a FIFO queue of waiters, like the Java producer's
// BufferPool. Create it with [New]; the
// zero value is not usable.
type SimplePool struct {
	size         int64
	pooledSize   int
	classes      int // free lists for pooledSize<<k, k < classes
	overAllocate bool
	leakDetect   bool
	logger       *slog.Logger
	self         weak.Pointer[SimplePool] // for leak cleanups, which must not keep the pool alive

	mu sync.Mutex
	// nonPooled is the available memory not held on the free list; it is
	// negative only when the pool over-allocated.
	nonPooled int64
	free      [][]freeBuf // by size class
	freeBytes int64
	freeCount int
	waiters   waitQueue
	held      bool                   // see Hold
	spare     freelist.List[*waiter] // recycled waiter structs
	tracked   map[uintptr]*tracker

	waitTime    time.Duration
	exhausted   int64
	canceled    int64
	leaked      int64
	leakedBytes int64
}

// freeBuf is a recycled buffer, with its tracker when LeakDetection is on.
type freeBuf struct {
	buf []byte
	t   *tracker
}

var _ Pool = (*SimplePool)(nil)

// New returns a pool configured by opts; zero fields take the defaults
// documented on [Options]. It fails only on invalid options, with an error
// naming the field.
func New(opts Options) (*SimplePool, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	p := &SimplePool{
		size:         opts.Size,
		pooledSize:   opts.PooledSize,
		classes:      1,
		overAllocate: opts.OverAllocate,
		leakDetect:   opts.LeakDetection,
		logger:       opts.Logger,
		nonPooled:    opts.Size,
		spare:        freelist.List[*waiter]{Max: maxSpareWaiters},
	}
	for opts.PooledSize<<p.classes <= opts.MaxPooledSize {
		p.classes++
	}
	p.free = make([][]freeBuf, p.classes)
	if p.leakDetect {
		p.self = weak.Make(p)
		p.tracked = make(map[uintptr]*tracker)
	}
	return p, nil
}

// Size returns the pool size in bytes.
func (p *SimplePool) Size() int64 { return p.size }

// PooledSize returns the size of the recycled buffers.
func (p *SimplePool) PooledSize() int { return p.pooledSize }

// Available returns the bytes that can be allocated now, free-listed buffers
// included. It is negative when the pool over-allocated.
func (p *SimplePool) Available() int64 {
	p.mu.Lock()
	a := p.availLocked()
	p.mu.Unlock()
	return a
}

// IsOutOfMemory reports whether Available() <= 0.
func (p *SimplePool) IsOutOfMemory() bool { return p.Available() <= 0 }

// Stats returns a consistent snapshot of the pool's metrics.
func (p *SimplePool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{
		Size:        p.size,
		Available:   p.availLocked(),
		FreeBuffers: p.freeCount,
		Waiters:     p.waiters.n,
		WaitTime:    p.waitTime,
		Exhausted:   p.exhausted,
		Canceled:    p.canceled,
		Leaked:      p.leaked,
		LeakedBytes: p.leakedBytes,
	}
}

// emptyBuf is what a request for 0 bytes gets: non-nil, no memory.
var emptyBuf = make([]byte, 0)

// TryAllocate returns a slice with len == size, or nil if the memory is not
// available now. It never blocks. While Allocate calls are waiting it returns
// nil, so that it cannot take memory from the head of the queue, and while
// the pool is held (see [SimplePool.Hold]) too: held memory goes only to
// [SimplePool.TryAllocateHeld]. Like Allocate, it may return a larger
// recycled buffer.
func (p *SimplePool) TryAllocate(size int) []byte {
	return p.tryAllocate(size, false)
}

// tryAllocate is TryAllocate, or with holder TryAllocateHeld, which passes
// the waiters while the pool is held.
func (p *SimplePool) tryAllocate(size int, holder bool) []byte {
	if size <= 0 || int64(size) > p.size {
		if size == 0 {
			return emptyBuf
		}
		return nil
	}
	p.mu.Lock()
	if !p.mayTakeLocked(holder) || !p.canGrantLocked(size) {
		p.mu.Unlock()
		return nil
	}
	buf := p.takeLocked(size, false)
	p.mu.Unlock()
	if buf == nil {
		buf = p.newBuf(size)
	}
	return buf
}

// Allocate returns a slice with len == size, waiting behind earlier waiters
// until the memory is available, ctx ends or maxWait passes; see
// [Pool.Allocate] for the errors. maxWait <= 0 waits as long as ctx allows.
// Recycled buffers are not zeroed; new ones are. When no recycled buffer of
// size's own class is free, one up to twice size may come back (cap(buf) >
// size, all of it accounted until Release) instead of a new one.
func (p *SimplePool) Allocate(ctx context.Context, size int, maxWait time.Duration) ([]byte, error) {
	return p.allocate(ctx, size, maxWait, false)
}

// allocate is Allocate, or with reserve Reserve's wait: bytes accounted, no
// buffer made (the result is nil or a recycled buffer, for the caller to
// drop).
func (p *SimplePool) allocate(ctx context.Context, size int, maxWait time.Duration, reserve bool) ([]byte, error) {
	if size <= 0 || int64(size) > p.size {
		switch {
		case size == 0:
			return emptyBuf, nil
		case size < 0:
			return nil, fmt.Errorf("bufferpool: allocate %d bytes: negative size", size)
		default:
			return nil, fmt.Errorf("bufferpool: allocate %d bytes from a pool of %d: %w", size, p.size, ErrRequestTooLarge)
		}
	}
	p.mu.Lock()
	if p.waiters.head == nil && !p.held && p.canGrantLocked(size) {
		buf := p.takeLocked(size, reserve)
		p.mu.Unlock()
		if buf == nil && !reserve {
			buf = p.newBuf(size)
		}
		return buf, nil
	}
	w := p.getWaiterLocked(size, reserve)
	p.waiters.pushBack(w)
	p.mu.Unlock()
	return p.wait(ctx, w, maxWait)
}

// wait blocks until w is served, ctx ends or maxWait passes.
func (p *SimplePool) wait(ctx context.Context, w *waiter, maxWait time.Duration) ([]byte, error) {
	start := time.Now()
	var timeout <-chan time.Time
	if maxWait > 0 {
		if w.timer == nil {
			w.timer = time.NewTimer(maxWait)
		} else {
			w.timer.Reset(maxWait)
		}
		timeout = w.timer.C
	}
	signaled, timedOut := false, false
	select {
	case <-w.ready:
		signaled = true
	case <-ctx.Done():
	case <-timeout:
		timedOut = true
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	waited := time.Since(start)

	p.mu.Lock()
	p.waitTime += waited
	if w.granted {
		if !signaled {
			<-w.ready // sent under mu when granted: never blocks
		}
		buf, size, reserve := w.buf, w.size, w.reserve
		p.putWaiterLocked(w)
		p.mu.Unlock()
		if buf == nil && !reserve {
			buf = p.newBuf(size)
		}
		return buf, nil
	}
	wasHead := p.waiters.head == w
	p.waiters.remove(w)
	if wasHead {
		// The next waiter may be smaller and fit now.
		p.serveLocked()
	}
	size := w.size
	avail := p.availLocked()
	p.putWaiterLocked(w)
	if timedOut {
		p.exhausted++
	} else {
		p.canceled++
	}
	p.mu.Unlock()

	if timedOut {
		return nil, fmt.Errorf("bufferpool: waited %v for %d bytes, %d of %d available: %w",
			waited.Round(time.Microsecond), size, avail, p.size, ErrBufferExhausted)
	}
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return nil, fmt.Errorf("bufferpool: waited %v for %d bytes, %d of %d available: %w (%w)",
			waited.Round(time.Microsecond), size, avail, p.size, err, cause)
	}
	return nil, fmt.Errorf("bufferpool: waited %v for %d bytes, %d of %d available: %w",
		waited.Round(time.Microsecond), size, avail, p.size, err)
}

// Release returns buf to the pool; see [Pool.Release]. A buffer of capacity
// PooledSize goes to the free list, any other is left to the garbage
// collector. Releasing a buffer twice or one the pool did not hand out
// corrupts the accounting: with LeakDetection on it panics at once; without
// it, it panics only when the released bytes would exceed the pool size.
func (p *SimplePool) Release(buf []byte) {
	c := cap(buf)
	if c == 0 {
		return
	}
	p.mu.Lock()
	var t *tracker
	if p.leakDetect {
		t = p.tracked[uintptr(unsafe.Pointer(unsafe.SliceData(buf)))]
		if t == nil || t.size != c {
			p.mu.Unlock()
			panic(fmt.Sprintf("bufferpool: Release of a %d-byte buffer this pool did not hand out (or resliced from a later start)", c))
		}
		if t.state != outstanding {
			p.mu.Unlock()
			panic(fmt.Sprintf("bufferpool: second Release of a %d-byte buffer", c))
		}
	}
	if p.availLocked()+int64(c) > p.size {
		p.mu.Unlock()
		panic(fmt.Sprintf("bufferpool: Release of %d bytes would make %d available in a pool of %d: a buffer was released twice or was not from this pool",
			c, p.availLocked()+int64(c), p.size))
	}
	if k, ok := p.classOf(c); ok {
		if t != nil {
			t.state = free
		}
		p.free[k] = append(p.free[k], freeBuf{buf: buf[:c], t: t})
		p.freeBytes += int64(c)
		p.freeCount++
	} else {
		if t != nil {
			t.state = released
		}
		p.nonPooled += int64(c)
	}
	if p.waiters.head != nil {
		p.serveLocked()
	}
	p.mu.Unlock()
}

// mayTakeLocked reports whether a caller that does not wait may take
// memory now: when nobody waits and the pool is not held, and, with holder
// (TryAllocateHeld, TryReserveHeld), whenever the pool is held.
func (p *SimplePool) mayTakeLocked(holder bool) bool {
	if p.held {
		return holder
	}
	return p.waiters.head == nil
}

func (p *SimplePool) availLocked() int64 {
	return p.nonPooled + p.freeBytes
}

// canGrantLocked reports whether size bytes may be handed out now.
func (p *SimplePool) canGrantLocked(size int) bool {
	avail := p.availLocked()
	if p.overAllocate {
		return avail > 0
	}
	return avail >= int64(size)
}

// takeLocked accounts size bytes as handed out; the caller has checked
// canGrantLocked. It returns the recycled buffer to hand out, or nil for the
// caller to make one of size bytes outside the lock. A reservation (reserve
// set) takes only bytes, never a buffer.
//
// A buffer of size's own class comes first, then a recycled buffer of a
// larger class, up to twice size, handed out whole (its whole capacity
// accounted until Release; a producer's batch fills all of it, up to its
// batch.size),
// and only then a new one, dropping recycled buffers when the memory not on
// a free list does not cover size. A pool with batches of two sizes (half
// and all of BatchSize) otherwise kept making buffers of the smaller size
// and, once full, dropping them to make the larger: most of the pool turned
// into garbage, and the heap the garbage collector lets grow with it into
// resident memory.
func (p *SimplePool) takeLocked(size int, reserve bool) []byte {
	if !reserve {
		if k, ok := p.classOf(size); ok && len(p.free[k]) > 0 {
			return p.handOutLocked(k, size)
		}
		if k, ok := p.largerFreeLocked(size); ok {
			return p.handOutLocked(k, size)
		}
	}
	p.dropForLocked(size)
	p.nonPooled -= int64(size)
	return nil
}

// handOutLocked takes a buffer off free list k and returns it with length
// size (at most its capacity).
func (p *SimplePool) handOutLocked(k, size int) []byte {
	fb := p.popFreeLocked(k)
	if fb.t != nil {
		fb.t.state = outstanding
	}
	return fb.buf[:size]
}

// largerFreeLocked returns the smallest non-empty free list whose buffers
// are larger than size, but at most twice as large: a producer's batch
// fills such a buffer (up to its batch.size), where a far larger one handed to a
// small request would hold pool memory that dropping it would have left
// to many.
func (p *SimplePool) largerFreeLocked(size int) (int, bool) {
	for k := range p.classes {
		c := p.pooledSize << k
		if c > 2*size {
			break
		}
		if c > size && len(p.free[k]) > 0 {
			return k, true
		}
	}
	return 0, false
}

// dropForLocked drops recycled buffers until the non-pooled memory covers
// size (or, over-allocating, until none is left): the smallest one that
// covers what is missing, else the largest, and again. So a small
// reservation costs a small buffer, not the largest one.
func (p *SimplePool) dropForLocked(size int) {
	for p.nonPooled < int64(size) && p.freeCount > 0 {
		short := int64(size) - p.nonPooled
		pick := -1
		for k := range p.classes {
			if len(p.free[k]) == 0 {
				continue
			}
			pick = k // the largest non-empty so far
			if int64(p.pooledSize)<<k >= short {
				break
			}
		}
		fb := p.popFreeLocked(pick)
		if fb.t != nil {
			fb.t.state = released
		}
		p.nonPooled += int64(cap(fb.buf))
	}
}

// classOf returns the free list of buffers of exactly size bytes.
func (p *SimplePool) classOf(size int) (int, bool) {
	if size < p.pooledSize || size%p.pooledSize != 0 {
		return 0, false
	}
	m := size / p.pooledSize
	if m&(m-1) != 0 {
		return 0, false
	}
	k := bits.TrailingZeros(uint(m))
	return k, k < p.classes
}

func (p *SimplePool) popFreeLocked(k int) freeBuf {
	last := len(p.free[k]) - 1
	fb := p.free[k][last]
	p.free[k][last] = freeBuf{}
	p.free[k] = p.free[k][:last]
	p.freeBytes -= int64(cap(fb.buf))
	p.freeCount--
	return fb
}

// serveLocked grants memory to waiters from the head of the queue for as
// long as the head's request can be satisfied. A head that does not fit
// blocks the ones behind it: that is what keeps small requests from starving
// a large one.
func (p *SimplePool) serveLocked() {
	if p.held {
		return // Hold: released memory waits for TryAllocateHeld
	}
	for w := p.waiters.head; w != nil && p.canGrantLocked(w.size); w = p.waiters.head {
		p.waiters.remove(w)
		w.buf = p.takeLocked(w.size, w.reserve)
		w.granted = true
		w.ready <- struct{}{}
	}
}

// newBuf makes a buffer for memory already accounted as handed out.
func (p *SimplePool) newBuf(size int) []byte {
	buf := make([]byte, size)
	if p.leakDetect {
		p.track(buf)
	}
	return buf
}
