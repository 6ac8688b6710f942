package bufferpool

// Holder is implemented by pools that can set released memory aside for the
// one user whose progress frees memory. [SimplePool] implements it.
//
// The producer's IO goroutine needs it: records parked for a topic whose
// partitions were unknown hold pool memory, and they free it only by moving
// into batches, which needs memory of its own, taken without waiting
// (TryAllocate). While Sends wait in the pool's queue, every released byte
// would go to them (and, while the topic parks, to parking more records),
// so the parked records could never move and would expire.
type Holder interface {
	// Hold, while on, keeps released memory from the callers waiting in
	// Allocate (and Reserve): it stays available to TryAllocate and
	// TryReserve, which take it even though callers are waiting, and new
	// Allocate calls queue. Turning it off serves the waiting callers. The
	// waiters' MaxBlock and contexts still run meanwhile.
	Hold(on bool)
}

var _ Holder = (*SimplePool)(nil)

// Hold implements [Holder].
func (p *SimplePool) Hold(on bool) {
	p.mu.Lock()
	p.held = on
	if !on && p.waiters.head != nil {
		p.serveLocked()
	}
	p.mu.Unlock()
}
