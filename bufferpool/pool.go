package bufferpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Pool is KIP-72's MemoryPool plus the blocking allocation a producer needs.
//
// The producer's Config.BufferPool field has this type, and the test broker
// uses it to bound queued.max.bytes. Any implementation can be plugged in
// there, as Kafka does with memory.pool.class.name; [New] returns the default,
// [SimplePool]. Implementations must be safe for concurrent use. A pool may
// also implement the optional [Reserver], [Holder], [HeldAllocator] and
// [HeldReserver]; the producer uses each only when the pool has it.
type Pool interface {
	// TryAllocate returns a slice with len == size, or nil if the memory is
	// not available now. It never blocks. A size larger than Size() or
	// negative always returns nil; size 0 returns an empty, non-nil slice
	// that needs no Release.
	TryAllocate(size int) []byte

	// Allocate returns a slice with len == size, waiting first in, first
	// out behind earlier waiters until the memory is available, ctx ends, or
	// maxWait passes. maxWait <= 0 means no limit of its own: only ctx bounds
	// the wait. If the memory is available at once, Allocate succeeds even
	// when ctx is already done.
	//
	// Errors: one matching [ErrRequestTooLarge], returned at once, when size
	// exceeds Size(); one matching [ErrBufferExhausted] when maxWait passed,
	// whose message says how long it waited, how much it asked for and how
	// much was available; ctx.Err() wrapped (errors.Is(err,
	// context.Canceled) or context.DeadlineExceeded) when ctx ended first.
	// On error nothing is allocated.
	Allocate(ctx context.Context, size int, maxWait time.Duration) ([]byte, error)

	// Release returns a slice obtained from TryAllocate or Allocate. It may
	// be a reslice buf[:n] of it, but it must keep the original start: the
	// pool accounts by cap(buf). After Release the caller must not touch
	// the slice. A nil or zero-capacity slice is ignored.
	Release(buf []byte)

	// Size returns the total size of the pool in bytes.
	Size() int64

	// Available returns the bytes that can be allocated now. It may be
	// negative when the pool over-allocates.
	Available() int64

	// IsOutOfMemory reports whether Available() <= 0.
	IsOutOfMemory() bool
}

// ErrBufferExhausted is returned (wrapped) by [Pool.Allocate] when maxWait
// passed before the memory was available: the producer was asked to buffer
// more than buffer.memory allows for longer than max.block.ms. The producer
// re-exports this exact value as producer.ErrBufferExhausted, so
// errors.Is(err, ErrBufferExhausted) works from either package.
var ErrBufferExhausted = errors.New("buffer memory exhausted")

// ErrRequestTooLarge is returned (wrapped) at once by [Pool.Allocate] for a
// request larger than the whole pool: waiting could never satisfy it.
var ErrRequestTooLarge = errors.New("request larger than the buffer pool")

// Defaults applied by [New] to zero fields of [Options].
const (
	// DefaultSize is the pool size when Options.Size is 0, like the Java
	// producer's buffer.memory (32 MiB).
	DefaultSize int64 = 32 << 20
	// DefaultPooledSize is the recycled buffer size when
	// Options.PooledSize is 0, like the Java producer's batch.size (16 KiB).
	DefaultPooledSize = 16384
)

// Options configures a [SimplePool]. The zero value is a valid 32 MiB strict
// pool recycling 16 KiB buffers, without leak detection.
type Options struct {
	// Size is the total number of bytes the pool hands out at once
	// (buffer.memory, queued.max.bytes). Default 32 MiB; negative is an
	// error.
	Size int64

	// PooledSize is the size of the recycled buffers (batch.size). Requests
	// of exactly this size reuse buffers from a free list, so steady-state
	// producing allocates no new batch memory. Other sizes are allocated
	// with make and left to the garbage collector on Release. Default
	// 16384; it must not exceed Size.
	PooledSize int

	// MaxPooledSize, when larger than PooledSize, recycles buffers of every
	// doubling of PooledSize up to it too (batches that grow up to a large
	// batch.size). Default: PooledSize only.
	MaxPooledSize int

	// OverAllocate selects KIP-72's mode: a request is granted as soon as
	// any memory is available, so Available may become negative and the
	// bound on outstanding bytes is Size plus the largest request minus
	// one. Large requests then never wait for the pool to drain completely.
	// Default false: the pool never hands out more than Size bytes.
	OverAllocate bool

	// LeakDetection makes the pool notice buffers that are garbage
	// collected without Release, reclaim their bytes and count them in
	// Stats.Leaked. It costs a map look-up per Release and, for sizes other
	// than PooledSize, two small allocations per Allocate; a misuse of
	// Release (a second Release, a foreign buffer) then panics at once.
	// Default false.
	LeakDetection bool

	// Logger receives a warning for every leaked buffer when LeakDetection
	// is on. Default nil: no logging.
	Logger *slog.Logger
}

// Stats is a snapshot of a [SimplePool]'s metrics.
type Stats struct {
	// Size is the pool size in bytes.
	Size int64
	// Available is the bytes that can be allocated now; negative when the
	// pool over-allocated.
	Available int64
	// FreeBuffers is the number of recycled buffers on the free list; their
	// bytes are part of Available.
	FreeBuffers int
	// Waiters is the number of Allocate calls waiting now.
	Waiters int
	// WaitTime is the total time that Allocate calls which have returned
	// spent waiting, whatever their outcome.
	WaitTime time.Duration
	// Exhausted counts Allocate calls that failed with ErrBufferExhausted.
	Exhausted int64
	// Canceled counts Allocate calls that failed because their context
	// ended.
	Canceled int64
	// Leaked counts buffers garbage collected without Release and
	// reclaimed (LeakDetection only).
	Leaked int64
	// LeakedBytes is the capacity of the leaked buffers.
	LeakedBytes int64
}

func (o *Options) validate() error {
	if o.Size < 0 {
		return fmt.Errorf("bufferpool: Options.Size %d: must not be negative", o.Size)
	}
	if o.PooledSize < 0 {
		return fmt.Errorf("bufferpool: Options.PooledSize %d: must not be negative", o.PooledSize)
	}
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.PooledSize == 0 {
		o.PooledSize = DefaultPooledSize
	}
	if int64(o.PooledSize) > o.Size {
		return fmt.Errorf("bufferpool: Options.PooledSize %d: must not exceed Options.Size %d", o.PooledSize, o.Size)
	}
	if o.MaxPooledSize < 0 || int64(o.MaxPooledSize) > o.Size {
		return fmt.Errorf("bufferpool: Options.MaxPooledSize %d: must be in [0, Options.Size %d]", o.MaxPooledSize, o.Size)
	}
	return nil
}
