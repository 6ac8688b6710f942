package bufferpool

// Holder is implemented by pools that can set released memory aside for the
// one user whose progress frees memory. [SimplePool] implements it.
//
// The producer's IO goroutine needs it: records parked for a topic whose
// partitions were unknown hold pool memory, and they free it only by moving
// into batches, which needs memory of its own, taken without waiting.
// While Sends wait in the pool's queue, every released byte would go to
// them (and, while the topic parks, to parking more records), so the
// parked records could never move and would expire.
type Holder interface {
	// Hold, while on, keeps released memory for the holder: the callers
	// waiting in Allocate (and Reserve) are not served, new Allocate and
	// Reserve calls queue behind them, and TryAllocate and TryReserve
	// fail, so that only the holder's own allocations take the memory
	// (see [HeldAllocator]). Turning it off serves the waiting callers,
	// first in, first out. The waiters' MaxBlock and contexts still run
	// meanwhile.
	Hold(on bool)
}

// HeldAllocator is implemented by [Holder] pools whose held memory the
// holder takes with methods of its own. [SimplePool] implements it.
//
// TryAllocateHeld is TryAllocate for the holder: while the hold is on it
// takes available memory even though callers are waiting (they are not
// served meanwhile, see [Holder]); with the hold off it is TryAllocate,
// which never jumps the queue of waiting callers.
//
// The producer takes the memory for its own progress (moving parked
// records into batches, splitting a batch the broker found too large)
// with TryAllocateHeld, and holds a pool only when it has it (and
// [HeldReserver] too when it is a [Reserver]): a [Holder] without it is
// never held, since its TryAllocate could not tell the holder from the
// callers the hold keeps out (a wrapper that forwards Hold and TryAllocate
// to a [SimplePool] would refuse the holder its own memory).
type HeldAllocator interface {
	TryAllocateHeld(size int) []byte
}

// HeldReserver is [HeldAllocator] for reservations, implemented by
// [Holder] pools that are also a [Reserver]. [SimplePool] implements it.
// TryReserveHeld is TryReserve for the holder: while the hold is on it
// reserves available bytes even though callers are waiting; with the hold
// off it is TryReserve. A [Holder] that is a [Reserver] without it is
// never held by the producer, as for [HeldAllocator].
type HeldReserver interface {
	TryReserveHeld(n int) bool
}

var (
	_ Holder        = (*SimplePool)(nil)
	_ HeldAllocator = (*SimplePool)(nil)
	_ HeldReserver  = (*SimplePool)(nil)
)

// Hold implements [Holder].
func (p *SimplePool) Hold(on bool) {
	p.mu.Lock()
	p.held = on
	if !on && p.waiters.head != nil {
		p.serveLocked()
	}
	p.mu.Unlock()
}

// TryAllocateHeld implements [HeldAllocator]: TryAllocate that, while the
// pool is held, takes the memory even with callers waiting.
func (p *SimplePool) TryAllocateHeld(size int) []byte {
	return p.tryAllocate(size, true)
}

// TryReserveHeld implements [HeldReserver]: TryReserve that, while the pool
// is held, takes the bytes even with callers waiting.
func (p *SimplePool) TryReserveHeld(n int) bool {
	return p.tryReserve(n, true)
}
