package producer

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/bufferpool"
)

// A Config.BufferPool given by the user is user code that samsa calls with
// its own locks held (Partition.growLocked calls TryAllocate under the
// partition's lock) and on its own goroutines (the IO goroutine moves
// parked records, the completion goroutine releases memory). A panic there
// would leave the lock held, so that every later Send to the partition and
// Close hang, or kill the process. guardPool recovers it: samsa's own
// *bufferpool.SimplePool is used as it is, without the cost of a deferred
// recover per call.

// guardPool wraps a user's pool so that none of its methods' panics leave
// samsa: a failed TryAllocate or TryReserve (nil, false), an error for
// Allocate and Reserve (wrapping ErrBufferExhausted: the record got no
// memory), a dropped Release, Unreserve or Hold. Each method's first panic
// is logged at Error with its stack.
type guardPool struct {
	pool   bufferpool.Pool
	size   int64 // Size when wrapped, for a Size that panics
	log    *slog.Logger
	logged [numPoolMethods]atomic.Bool
}

// The pool methods, for guardPool.logged.
const (
	methodTryAllocate = iota
	methodAllocate
	methodRelease
	methodSize
	methodAvailable
	methodIsOutOfMemory
	methodTryReserve
	methodReserve
	methodUnreserve
	methodHold
	methodTryAllocateHeld
	methodTryReserveHeld
	numPoolMethods
)

var poolMethodNames = [numPoolMethods]string{
	"TryAllocate", "Allocate", "Release", "Size", "Available", "IsOutOfMemory",
	"TryReserve", "Reserve", "Unreserve", "Hold", "TryAllocateHeld", "TryReserveHeld",
}

// guardedReserver, guardedHolder and guardedReserverHolder add the
// optional interfaces the user's pool implements, and only those: the
// accumulator charges bookkeeping only to a bufferpool.Reserver, and the IO
// goroutine holds memory only in a bufferpool.Holder that has the held
// methods too (usableHolder): a guarded Holder is one, with the user's
// TryAllocateHeld (and TryReserveHeld), and a user's Holder without them
// is guarded as a pool that is no Holder at all.
type (
	guardedReserver struct {
		*guardPool
		reserverGuard
	}
	guardedHolder struct {
		*guardPool
		holderGuard
	}
	guardedReserverHolder struct {
		*guardPool
		reserverGuard
		holderGuard
	}
	reserverGuard struct {
		g *guardPool
		r bufferpool.Reserver
	}
	holderGuard struct {
		g *guardPool
		h bufferpool.Holder
	}
)

var (
	_ bufferpool.HeldAllocator = guardedHolder{}
	_ bufferpool.HeldAllocator = guardedReserverHolder{}
	_ bufferpool.HeldReserver  = guardedReserverHolder{}
)

// guardUserPool returns pool itself when it is samsa's own
// *bufferpool.SimplePool (or nil), else pool wrapped in a guardPool that
// implements bufferpool.Reserver exactly when pool does, and
// bufferpool.Holder (with the held methods) exactly when usableHolder
// takes pool for one. size is pool's Size, read by Config.withDefaults.
func guardUserPool(pool bufferpool.Pool, size int64, log *slog.Logger) bufferpool.Pool {
	if _, ok := pool.(*bufferpool.SimplePool); ok || pool == nil {
		return pool
	}
	g := &guardPool{pool: pool, size: size, log: log}
	r, isRes := pool.(bufferpool.Reserver)
	h := usableHolder(pool)
	isHold := h != nil
	switch {
	case isRes && isHold:
		return guardedReserverHolder{g, reserverGuard{g, r}, holderGuard{g, h}}
	case isRes:
		return guardedReserver{g, reserverGuard{g, r}}
	case isHold:
		return guardedHolder{g, holderGuard{g, h}}
	}
	return g
}

// recovered logs v, a panic of the pool's method m, the first time m
// panics, to the producer's logger.
func (g *guardPool) recovered(m int, v any) {
	if g.logged[m].Swap(true) {
		return
	}
	g.log.Error("producer: the buffer pool (Config.BufferPool) panicked; the panic was recovered (later panics of the method are not logged)",
		"method", poolMethodNames[m], "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
}

// panicked is the error of a blocking call whose pool panicked with v.
func panicked(m int, v any) error {
	return fmt.Errorf("%w: the buffer pool panicked in %s: %v", ErrBufferExhausted, poolMethodNames[m], v)
}

func (g *guardPool) TryAllocate(size int) (buf []byte) {
	defer func() {
		if v := recover(); v != nil {
			g.recovered(methodTryAllocate, v)
			buf = nil
		}
	}()
	return g.pool.TryAllocate(size)
}

func (g *guardPool) Allocate(ctx context.Context, size int, maxWait time.Duration) (buf []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			g.recovered(methodAllocate, v)
			buf, err = nil, panicked(methodAllocate, v)
		}
	}()
	return g.pool.Allocate(ctx, size, maxWait)
}

func (g *guardPool) Release(buf []byte) {
	defer func() {
		if v := recover(); v != nil {
			g.recovered(methodRelease, v)
		}
	}()
	g.pool.Release(buf)
}

func (g *guardPool) Size() (n int64) {
	defer func() {
		if v := recover(); v != nil {
			g.recovered(methodSize, v)
			n = g.size
		}
	}()
	return g.pool.Size()
}

func (g *guardPool) Available() (n int64) {
	defer func() {
		if v := recover(); v != nil {
			g.recovered(methodAvailable, v)
			n = 0
		}
	}()
	return g.pool.Available()
}

func (g *guardPool) IsOutOfMemory() (oom bool) {
	defer func() {
		if v := recover(); v != nil {
			g.recovered(methodIsOutOfMemory, v)
			oom = true
		}
	}()
	return g.pool.IsOutOfMemory()
}

func (r reserverGuard) TryReserve(n int) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			r.g.recovered(methodTryReserve, v)
			ok = false
		}
	}()
	return r.r.TryReserve(n)
}

func (r reserverGuard) Reserve(ctx context.Context, n int, maxWait time.Duration) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.g.recovered(methodReserve, v)
			err = panicked(methodReserve, v)
		}
	}()
	return r.r.Reserve(ctx, n, maxWait)
}

func (r reserverGuard) Unreserve(n int) {
	defer func() {
		if v := recover(); v != nil {
			r.g.recovered(methodUnreserve, v)
		}
	}()
	r.r.Unreserve(n)
}

func (h holderGuard) Hold(on bool) {
	defer func() {
		if v := recover(); v != nil {
			h.g.recovered(methodHold, v)
		}
	}()
	h.h.Hold(on)
}

func (h holderGuard) TryAllocateHeld(size int) (buf []byte) {
	defer func() {
		if v := recover(); v != nil {
			h.g.recovered(methodTryAllocateHeld, v)
			buf = nil
		}
	}()
	return h.h.(bufferpool.HeldAllocator).TryAllocateHeld(size) // usableHolder checked it
}

func (g guardedReserverHolder) TryReserveHeld(n int) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			g.guardPool.recovered(methodTryReserveHeld, v)
			ok = false
		}
	}()
	return g.holderGuard.h.(bufferpool.HeldReserver).TryReserveHeld(n) // usableHolder checked it
}
