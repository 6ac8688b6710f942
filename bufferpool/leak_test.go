package bufferpool

import (
	"context"
	"github.com/samsa-go/samsa/internal/testutil"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// collectUntil runs the garbage collector until cond holds, a bounded number
// of times: cleanups run on a runtime goroutine some time after a cycle.
func collectUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("after 200 GC cycles: %s", what)
}

// allocateAndDrop allocates in a frame of its own, so that nothing on the
// test's stack keeps the buffers reachable.
//
//go:noinline
func allocateAndDrop(t *testing.T, p *SimplePool, sizes ...int) {
	for _, n := range sizes {
		buf, err := p.Allocate(context.Background(), n, time.Second)
		require.NoError(t, err)
		buf[0] = 1
	}
}

type syncBuffer = testutil.SyncBuffer

func TestLeakedBuffersAreReclaimed(t *testing.T) {
	var log syncBuffer
	p := newPool(t, Options{
		Size:          1 << 20,
		PooledSize:    16384,
		LeakDetection: true,
		Logger:        slog.New(slog.NewTextHandler(&log, nil)),
	})
	// A recycled buffer that is leaked on its second life, plus non-pooled ones.
	b := p.TryAllocate(16384)
	p.Release(b)
	b = nil
	allocateAndDrop(t, p, 16384, 4096, 100000)
	require.Equal(t, int64(1<<20-16384-4096-100000), p.Available())

	collectUntil(t, "3 leaks reclaimed", func() bool { return p.Stats().Leaked == 3 })
	st := p.Stats()
	require.Equal(t, int64(16384+4096+100000), st.LeakedBytes)
	require.Equal(t, p.Size(), st.Available)
	require.Equal(t, p.Size(), p.Available())
	require.Contains(t, log.String(), "without Release")
	require.Contains(t, log.String(), "bytes=4096")
}

func TestReleasedBuffersAreNotCountedAsLeaks(t *testing.T) {
	p := newPool(t, Options{Size: 1 << 20, PooledSize: 16384, LeakDetection: true})
	func() {
		a := p.TryAllocate(4096)
		c := p.TryAllocate(16384)
		big := p.TryAllocate(200000) // drops nothing: the free list is empty
		p.Release(a)
		p.Release(c)
		p.Release(big)
		// Dropping the free-listed buffer to make room, then releasing.
		huge := p.TryAllocate(1<<20 - 100)
		require.Zero(t, p.Stats().FreeBuffers)
		p.Release(huge)
	}()
	// A canary that is leaked shows the cleanups did run.
	allocateAndDrop(t, p, 8192)
	collectUntil(t, "canary reclaimed", func() bool { return p.Stats().Leaked == 1 })
	for range 3 {
		runtime.GC()
	}
	time.Sleep(10 * time.Millisecond)
	st := p.Stats()
	require.Equal(t, int64(1), st.Leaked)
	require.Equal(t, int64(8192), st.LeakedBytes)
	require.Equal(t, p.Size(), st.Available)
}

// TestLeakReclaimServesWaiter protects a producer from blocking forever on
// memory that a lost buffer holds.
func TestLeakReclaimServesWaiter(t *testing.T) {
	p := newPool(t, Options{Size: 64 << 10, PooledSize: 16384, LeakDetection: true})
	allocateAndDrop(t, p, 64<<10)
	require.True(t, p.IsOutOfMemory())
	done := make(chan error, 1)
	go func() {
		buf, err := p.Allocate(context.Background(), 32<<10, 0)
		if err == nil {
			p.Release(buf)
		}
		done <- err
	}()
	waitFor(t, "waiter queued", func() bool { return p.Stats().Waiters == 1 })
	collectUntil(t, "waiter served", func() bool {
		select {
		case err := <-done:
			require.NoError(t, err)
			return true
		default:
			return false
		}
	})
	require.Equal(t, p.Size(), p.Available())
}

// TestDroppedPoolIsCollected guards against the leak tracking keeping a pool
// (and its free list) alive once the pool itself is unreachable.
func TestDroppedPoolIsCollected(t *testing.T) {
	collected := make(chan struct{})
	func() {
		p := newPool(t, Options{Size: 1 << 20, PooledSize: 16384, LeakDetection: true})
		p.Release(p.TryAllocate(16384))
		_ = p.TryAllocate(4096) // outstanding when the pool is dropped
		runtime.AddCleanup(p, func(ch chan struct{}) { close(ch) }, collected)
	}()
	var ok bool
	for range 200 {
		runtime.GC()
		select {
		case <-collected:
			ok = true
		case <-time.After(5 * time.Millisecond):
		}
		if ok {
			break
		}
	}
	require.True(t, ok, "pool not collected after 200 GC cycles")
}
