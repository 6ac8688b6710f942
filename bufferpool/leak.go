package bufferpool

import (
	"runtime"
	"unsafe"
	"weak"
)

// tracker follows one backing array handed out by a pool with LeakDetection
// on. It lives as long as the array: a recycled buffer keeps its tracker
// through every reuse, so the recycled path allocates nothing. It holds no
// reference to the array (the cleanup would then never run) and only a weak
// one to the pool (a dropped pool is not kept alive by its buffers).
type tracker struct {
	size  int
	addr  uintptr
	state trackState // guarded by the pool's mu
	pool  weak.Pointer[SimplePool]
}

type trackState uint8

const (
	outstanding trackState = iota // handed out, not released
	free                          // on the free list
	released                      // released or dropped: the pool no longer counts it
)

// track registers buf, freshly made for bytes already accounted as handed
// out, so that its collection without Release is noticed.
func (p *SimplePool) track(buf []byte) {
	ptr := unsafe.SliceData(buf)
	t := &tracker{size: cap(buf), addr: uintptr(unsafe.Pointer(ptr)), pool: p.self}
	runtime.AddCleanup(ptr, reclaimLeak, t)
	p.mu.Lock()
	// An entry already at this address belongs to a collected array whose
	// cleanup has not run yet; that cleanup still sees its own tracker.
	p.tracked[t.addr] = t
	p.mu.Unlock()
}

// reclaimLeak runs on the runtime's cleanup goroutine once a tracked array
// has been collected. If the array was still outstanding, it was leaked: its
// bytes return to the pool and the waiters are served.
func reclaimLeak(t *tracker) {
	p := t.pool.Value()
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.tracked[t.addr] == t {
		delete(p.tracked, t.addr)
	}
	leaked := t.state == outstanding
	if leaked {
		t.state = released
		p.nonPooled += int64(t.size)
		p.leaked++
		p.leakedBytes += int64(t.size)
		if p.waiters.head != nil {
			p.serveLocked()
		}
	}
	p.mu.Unlock()
	if leaked && p.logger != nil {
		p.logger.Warn("bufferpool: buffer garbage-collected without Release; its memory was reclaimed", "bytes", t.size)
	}
}
