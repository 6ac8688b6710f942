package bufferpool_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/bufferpool"
)

// A producer takes a batch buffer, fills it, and releases it once the batch
// is acknowledged. Buffers of PooledSize are recycled.
func Example() {
	pool, err := bufferpool.New(bufferpool.Options{
		Size:       1 << 20, // buffer.memory
		PooledSize: 16384,   // batch.size
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	batch, err := pool.Allocate(ctx, 16384, 60*time.Second) // max.block.ms
	if err != nil {
		panic(err)
	}
	fmt.Println(len(batch), pool.Available())
	pool.Release(batch)
	fmt.Println(pool.Available(), pool.Stats().FreeBuffers)
	// Output:
	// 16384 1032192
	// 1048576 1
}

// When the pool stays full for maxWait, Allocate fails with an error that
// matches ErrBufferExhausted and says what it waited for.
func Example_exhausted() {
	pool, _ := bufferpool.New(bufferpool.Options{Size: 1000, PooledSize: 100})
	held := pool.TryAllocate(900)
	defer pool.Release(held)

	_, err := pool.Allocate(context.Background(), 500, 10*time.Millisecond)
	fmt.Println(errors.Is(err, bufferpool.ErrBufferExhausted))
	fmt.Println(pool.Stats().Exhausted)

	_, err = pool.Allocate(context.Background(), 5000, 0)
	fmt.Println(errors.Is(err, bufferpool.ErrRequestTooLarge), err)
	// Output:
	// true
	// 1
	// true bufferpool: allocate 5000 bytes from a pool of 1000: request larger than the buffer pool
}

// A server reading requests (the test broker, KIP-72's queued.max.bytes)
// tries first without blocking, then waits in line with the other
// connections until memory is released or the connection closes.
func Example_server() {
	pool, _ := bufferpool.New(bufferpool.Options{Size: 64 << 10, PooledSize: 4096})
	connCtx, closeConn := context.WithCancel(context.Background())
	defer closeConn()

	readRequest := func(size int) ([]byte, error) {
		if buf := pool.TryAllocate(size); buf != nil {
			return buf, nil
		}
		// No spinning: wait first in, first out behind other connections,
		// bounded only by the connection's life (maxWait 0).
		return pool.Allocate(connCtx, size, 0)
	}
	req, err := readRequest(10 << 10)
	if err != nil {
		panic(err)
	}
	defer pool.Release(req) // at the end of request processing
	fmt.Println(len(req), pool.IsOutOfMemory())
	// Output:
	// 10240 false
}

// The Pool interface is what the producer and the test broker accept, so an
// instrumented or custom pool can replace the default.
func Example_custom() {
	base, _ := bufferpool.New(bufferpool.Options{Size: 1 << 20})
	var pool bufferpool.Pool = &countingPool{Pool: base}
	buf := pool.TryAllocate(100)
	pool.Release(buf)
	fmt.Println(pool.(*countingPool).allocations.Load())
	// Output:
	// 1
}

// countingPool wraps a Pool and counts successful TryAllocate calls. Like
// every Pool, it must be safe for concurrent use.
type countingPool struct {
	bufferpool.Pool
	allocations atomic.Int64
}

func (c *countingPool) TryAllocate(size int) []byte {
	buf := c.Pool.TryAllocate(size)
	if buf != nil {
		c.allocations.Add(1)
	}
	return buf
}
