package testbroker

import (
	"context"
	"sync/atomic"

	"github.com/samsa-go/samsa/bufferpool"
)

// requestMemory is KIP-72's queued.max.bytes on the broker side: the memory
// that the bytes of requests read from sockets live in, shared by every
// connection of every broker.
//
// A connection reads a request's 4-byte size, then asks for exactly that
// many bytes with the non-blocking TryAllocate. When the pool is out of
// memory the connection is "muted": it stops reading from its socket and
// waits in the pool's FIFO queue (Allocate), which
//   - never spins: the waiter sleeps on a channel until a Release serves it;
//   - never deadlocks a connection mid-request: a connection holds no request
//     memory while it waits (it asks only between requests, for a whole
//     request, and releases its previous request first);
//   - keeps each connection's order: a connection reads one request at a
//     time;
//   - is fair: waiters are served first in, first out, and TryAllocate
//     refuses while anyone waits, so no connection can always be last.
//
// The pool over-allocates like Kafka's SimplePool (a request is granted when
// any memory is free), so the bound on request bytes held at once is
// QueuedMaxBytes + SocketRequestMaxBytes.
//
// With the bound off, each connection reuses one growing buffer instead.
type requestMemory struct {
	pool bufferpool.Pool // nil when QueuedMaxBytes <= 0 and no Config.MemoryPool

	inFlight atomic.Int64
	peak     atomic.Int64
	muted    atomic.Int64
}

// newRequestMemory uses pool when set (Config.MemoryPool), else makes a
// SimplePool of queuedMaxBytes in KIP-72's over-allocating mode; neither
// turns the bound off.
func newRequestMemory(pool bufferpool.Pool, queuedMaxBytes int64) (*requestMemory, error) {
	m := new(requestMemory)
	if pool != nil {
		m.pool = pool
		return m, nil
	}
	if queuedMaxBytes <= 0 {
		return m, nil
	}
	pooled := bufferpool.DefaultPooledSize
	if int64(pooled) > queuedMaxBytes {
		pooled = int(queuedMaxBytes)
	}
	p, err := bufferpool.New(bufferpool.Options{Size: queuedMaxBytes, PooledSize: pooled, OverAllocate: true})
	if err != nil {
		return nil, err
	}
	m.pool = p
	return m, nil
}

// maxScratch is the largest per-connection buffer kept between requests
// when the bound is off; a bigger request's buffer is dropped after use.
const maxScratch = 8 << 20

// maxKeptResponse is the largest response encoding buffer a connection
// keeps between requests.
const maxKeptResponse = 64 << 10

// acquire returns a buffer of n bytes for one request. With the pool off it
// reuses *scratch. It blocks (muted) only when the pool is out of memory,
// until memory is released or ctx ends (the connection or cluster closes).
func (m *requestMemory) acquire(ctx context.Context, n int, scratch *[]byte) ([]byte, error) {
	var buf []byte
	if m.pool == nil {
		if cap(*scratch) < n {
			*scratch = make([]byte, n)
		}
		buf = (*scratch)[:n]
	} else if buf = m.pool.TryAllocate(n); buf == nil {
		m.muted.Add(1)
		var err error
		if buf, err = m.pool.Allocate(ctx, n, 0); err != nil {
			return nil, err
		}
	}
	cur := m.inFlight.Add(int64(n))
	for {
		p := m.peak.Load()
		if cur <= p || m.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	return buf, nil
}

// release gives back a buffer from acquire once the request's response has
// been written (or the request dropped).
func (m *requestMemory) release(buf []byte, scratch *[]byte) {
	m.inFlight.Add(-int64(len(buf)))
	if m.pool != nil {
		m.pool.Release(buf)
		return
	}
	if cap(*scratch) > maxScratch {
		*scratch = nil
	}
}

func (m *requestMemory) stats() (inFlight, peak, muted int64) {
	return m.inFlight.Load(), m.peak.Load(), m.muted.Load()
}
