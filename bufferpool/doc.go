// Package bufferpool bounds the memory that samsa holds for records: the
// producer's buffer.memory and the test broker's queued.max.bytes.
//
// It follows KIP-72's MemoryPool (a non-blocking TryAllocate, Release,
// Size, an Available that may be negative, IsOutOfMemory) and adds what the
// Java producer's BufferPool gives a producer: an Allocate that waits, in
// line, for memory, and a free list of recycled batch.size buffers.
//
// # Getting started
//
// Create a pool with [New]; the zero [Options] give a 32 MiB strict pool
// recycling 16 KiB buffers:
//
//	pool, err := bufferpool.New(bufferpool.Options{
//		Size:       64 << 20, // buffer.memory, default 32 MiB
//		PooledSize: 16384,    // batch.size, default 16384
//	})
//	buf, err := pool.Allocate(ctx, 16384, 60*time.Second) // max.block.ms
//	if err != nil { ... }    // see Errors below
//	defer pool.Release(buf)  // exactly once, when the bytes are done with
//
// Every buffer handed out must be given back with Release exactly once,
// either as returned or resliced with the same start (buf[:n]): the pool
// accounts by cap(buf). A slice grown by append past its capacity is a new
// array and must not be released.
//
// # Waiting for memory
//
// [SimplePool.TryAllocate] never blocks: it returns nil when the memory is
// not available now, and also while Allocate calls are waiting, so that it
// cannot overtake them.
//
// [SimplePool.Allocate] returns at once when the memory is available and
// nobody is waiting. Otherwise it joins a first-in, first-out queue and
// waits until its turn comes and the memory is there, until ctx ends, or
// until maxWait passes; maxWait <= 0 sets no limit of its own, so only ctx
// bounds the wait. Because only the head of the queue is ever served, a
// stream of small requests cannot starve a large one: a small request waits
// behind a large one even when it would fit. A waiter that gives up leaves
// the queue, and the one behind it is served if it fits.
//
// A producer passes its max.block.ms as maxWait and the caller's context as
// ctx; for a max.block.ms of 0 (never block) it calls TryAllocate instead
// and, on nil, returns an error wrapping ErrBufferExhausted itself. A server reading requests (the test broker) calls TryAllocate and,
// when that returns nil, Allocate with the connection's context and
// maxWait 0: it sleeps without spinning, and the connections are served in
// the order they asked.
//
// # Errors
//
// Allocate fails, allocating nothing, with:
//   - an error matching [ErrRequestTooLarge], at once, for a request larger
//     than Size: it could never be satisfied;
//   - an error matching [ErrBufferExhausted] when maxWait passed; the message
//     says how long it waited, how much it asked for and how much was
//     available, e.g. "bufferpool: waited 60s for 16384 bytes, 1200 of
//     33554432 available: buffer memory exhausted";
//   - ctx.Err() wrapped (and context.Cause, if different) when ctx ended
//     first, so errors.Is(err, context.Canceled) works.
//
// Use errors.Is, never string comparison. The producer re-exports
// ErrBufferExhausted as producer.ErrBufferExhausted (the same value).
//
// # Strict pools and over-allocation
//
// By default the pool never hands out more than Size bytes. With
// Options.OverAllocate (KIP-72's behaviour) a request is granted as soon as
// any byte is available, so Available can go negative and the bytes handed
// out are bounded by Size + the largest request - 1. Large requests then
// never wait for the pool to drain completely. Either way a request larger
// than Size fails with ErrRequestTooLarge.
//
// # Recycled buffers
//
// Requests of exactly PooledSize bytes (or of a doubling of it up to
// MaxPooledSize) are served from a free list of released buffers of that
// size, as the Java producer does with batch.size buffers, so steady-state
// producing allocates no batch memory. Recycled buffers are not zeroed:
// their content is whatever the last user left. Other sizes are made with
// make (zeroed) and left to the garbage collector on Release. Free-listed
// buffers count as available. A request whose size has no free-listed
// buffer takes one up to twice as large, whole (cap above the size asked
// for; its whole capacity counts as in use until Release), before a new one
// is made; a new one that the memory not on a free list does not cover
// drops free-listed buffers, the smallest one that covers what is missing
// first. So a pool with batches of several sizes keeps recycling instead of
// turning its buffers into garbage. A pooled allocate + release costs two
// uncontended mutex acquisitions and allocates nothing.
//
// # Leak detection
//
// A buffer that is never released keeps its bytes counted as in use, and the
// pool shrinks for good. With Options.LeakDetection the pool attaches a
// runtime cleanup to every backing array it makes: when one is garbage
// collected without Release, its bytes are reclaimed, waiters are served,
// and Stats.Leaked and Stats.LeakedBytes grow (and Options.Logger gets a
// warning). Detection also makes a second Release, or the Release of a
// buffer the pool did not hand out, panic at once instead of corrupting the
// accounting. It costs a map look-up per Release and, for sizes other than
// PooledSize, a few allocations per Allocate; recycled buffers keep their
// tracker for life and stay allocation-free. Cleanups run some time after a
// collection; arrays under 16 bytes may be batched by the allocator and
// reclaimed late. Without detection a misused Release panics only when it
// would make more than Size bytes available.
//
// # Metrics
//
// [SimplePool.Stats] returns a snapshot: available bytes, free buffers,
// waiters, total time waited, exhaustion and cancellation counts, leaked
// buffers and bytes.
//
// # Plugging in another pool
//
// The producer's Config.BufferPool and the test broker take a [Pool], as
// Kafka takes memory.pool.class.name; the default there is a [SimplePool].
// An implementation must be safe for concurrent use and honour the
// contracts on the interface: len == size, Release accounting by capacity,
// Allocate's errors matching the sentinels of this package.
package bufferpool
