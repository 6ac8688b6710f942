package bufferpool

import (
	"context"
	"time"
)

// Reserver is implemented by pools that can also account bytes that are
// not one of their buffers: memory a user of the pool holds elsewhere on
// its behalf (the producer's per-record and per-batch bookkeeping), so that
// the pool's Size bounds it too. [SimplePool] implements it. A reservation
// counts as handed out until Unreserve, exactly like a buffer of n bytes.
type Reserver interface {
	// TryReserve accounts n bytes as handed out if they are available
	// now, and reports whether it did. It never blocks and never jumps
	// the queue of Allocate calls waiting; a [Holder] pool that is held
	// fails it (see [HeldReserver]).
	TryReserve(n int) bool
	// Reserve is TryReserve that waits as Allocate does, with the same
	// errors.
	Reserve(ctx context.Context, n int, maxWait time.Duration) error
	// Unreserve returns n reserved bytes.
	Unreserve(n int)
}

var _ Reserver = (*SimplePool)(nil)

// TryReserve implements [Reserver]. It fails while callers are waiting and
// while the pool is held (see [SimplePool.Hold]): held bytes go only to
// [SimplePool.TryReserveHeld].
func (p *SimplePool) TryReserve(n int) bool {
	return p.tryReserve(n, false)
}

// tryReserve is TryReserve, or with holder TryReserveHeld.
func (p *SimplePool) tryReserve(n int, holder bool) bool {
	if n <= 0 {
		return true
	}
	if int64(n) > p.size {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mayTakeLocked(holder) || !p.canGrantLocked(n) {
		return false
	}
	p.takeLocked(n, true) // bytes only: never a buffer
	return true
}

// Reserve implements [Reserver]. It waits in the same queue as Allocate.
func (p *SimplePool) Reserve(ctx context.Context, n int, maxWait time.Duration) error {
	if n <= 0 {
		return nil
	}
	_, err := p.allocate(ctx, n, maxWait, true) // bytes only: no buffer comes back
	return err
}

// Unreserve implements [Reserver]. Returning more than was reserved panics,
// as a double Release does.
func (p *SimplePool) Unreserve(n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	if p.availLocked()+int64(n) > p.size {
		p.mu.Unlock()
		panic("bufferpool: Unreserve of more bytes than were reserved")
	}
	p.nonPooled += int64(n)
	if p.waiters.head != nil {
		p.serveLocked()
	}
	p.mu.Unlock()
}
