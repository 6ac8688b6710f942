package bufferpool

import "time"

// waiter is one Allocate call waiting for memory. It is recycled through
// SimplePool.spare, so a wait allocates nothing after warm-up: the channel
// and the timer are reused.
type waiter struct {
	size    int
	ready   chan struct{} // 1-buffered; sent under mu when granted
	granted bool          // guarded by mu
	buf     []byte        // a recycled buffer granted with the memory, or nil
	reserve bool          // Reserve's wait: bytes only, no buffer
	timer   *time.Timer   // created on the first wait with a maxWait

	prev, next *waiter
}

// maxSpareWaiters bounds the recycled waiter structs kept by a pool.
const maxSpareWaiters = 64

func (p *SimplePool) getWaiterLocked(size int, reserve bool) *waiter {
	w, ok := p.spare.Get()
	if !ok {
		w = &waiter{ready: make(chan struct{}, 1)}
	}
	w.size, w.reserve = size, reserve
	return w
}

func (p *SimplePool) putWaiterLocked(w *waiter) {
	w.granted = false
	w.buf = nil
	w.size, w.reserve = 0, false
	p.spare.Put(w)
}

// waitQueue is a FIFO of waiters, intrusive so that a waiter that gives up
// leaves it in O(1).
type waitQueue struct {
	head, tail *waiter
	n          int
}

func (q *waitQueue) pushBack(w *waiter) {
	w.prev, w.next = q.tail, nil
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
	q.n++
}

func (q *waitQueue) remove(w *waiter) {
	if w.prev == nil {
		q.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		q.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	q.n--
}
