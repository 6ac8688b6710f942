package producer

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
)

// growPanicPool is a user's bufferpool.Pool (the default pool underneath)
// whose TryAllocate panics once armed: a custom pool with a bug.
type growPanicPool struct {
	*bufferpool.SimplePool
	armed atomic.Bool
}

func (p *growPanicPool) TryAllocate(size int) []byte {
	if p.armed.Load() {
		panic("custom pool bug")
	}
	return p.SimplePool.TryAllocate(size)
}

// TestPanickingPoolLeavesNoLockHeld: a custom BufferPool whose TryAllocate
// panics while a batch grows, where it is called with the partition's lock
// held (Partition.growLocked). Send 1 opens the partition's batch and it
// lingers; Send 2's record does not fit, so the batch would grow and the
// pool panics. The panic must not leave Send (nor leave the lock held, so
// that later Sends and Close would hang): Send 2 goes on as if the pool
// had no memory at once (a new batch, from Allocate), both records are
// delivered, Close returns, and the panic is logged once, with its stack.
func TestPanickingPoolLeavesNoLockHeld(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("grow", 1))
	sp, err := bufferpool.New(bufferpool.Options{Size: 8 << 20})
	require.NoError(t, err)
	pool := &growPanicPool{SimplePool: sp}
	var logs testutil.SyncBuffer
	p, err := New(Config{
		Brokers:         c.Addrs(),
		BufferPool:      pool,
		BatchSize:       64 << 10,
		Linger:          5 * time.Second,
		DeliveryTimeout: 60 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	// No Close in a cleanup: with the lock left held it would hang the
	// test binary.

	ctx := context.Background()
	f1 := p.Send(ctx, &Record{Topic: "grow", Value: []byte("small")})
	// Wait until the record sits in an open batch of the known partition.
	require.True(t, waitFor(10*time.Second, func() bool {
		ts, ok := p.topics.Load("grow")
		if !ok {
			return false
		}
		parts := ts.(*topicState).acc.KnownPartitions()
		return len(parts) == 1 && parts[0].Load() == 1
	}), "the first record never reached its partition")

	pool.armed.Store(true)
	var f2 *Future
	require.NotPanics(t, func() {
		f2 = p.Send(ctx, &Record{Topic: "grow", Value: make([]byte, 20<<10)})
	}, "the pool's panic left Send")
	pool.armed.Store(false) // the pool works again
	require.NoError(t, p.Flush(ctx))
	_, err = f1.Wait(ctx)
	require.NoError(t, err)
	_, err = f2.Wait(ctx)
	require.NoError(t, err)

	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Close(cctx) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close(ctx with a 1s deadline) has not returned after 10s: the partition's lock was left held by the panicking pool")
	}
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "the buffer pool (Config.BufferPool) panicked"), "logged once: %s", out)
	require.Contains(t, out, "method=TryAllocate")
	require.Contains(t, out, "custom pool bug")
	require.Contains(t, out, "growLocked", "the stack is logged")
}

// brokenPool is a user's pool all of whose methods panic once armed.
type brokenPool struct {
	*bufferpool.SimplePool
	armed atomic.Bool
}

func (p *brokenPool) check() {
	if p.armed.Load() {
		panic("broken pool")
	}
}

func (p *brokenPool) TryAllocate(n int) []byte { p.check(); return p.SimplePool.TryAllocate(n) }
func (p *brokenPool) Allocate(ctx context.Context, n int, d time.Duration) ([]byte, error) {
	p.check()
	return p.SimplePool.Allocate(ctx, n, d)
}
func (p *brokenPool) Release(b []byte)    { p.check(); p.SimplePool.Release(b) }
func (p *brokenPool) Size() int64         { p.check(); return p.SimplePool.Size() }
func (p *brokenPool) Available() int64    { p.check(); return p.SimplePool.Available() }
func (p *brokenPool) IsOutOfMemory() bool { p.check(); return p.SimplePool.IsOutOfMemory() }
func (p *brokenPool) TryReserve(n int) bool {
	p.check()
	return p.SimplePool.TryReserve(n)
}
func (p *brokenPool) Reserve(ctx context.Context, n int, d time.Duration) error {
	p.check()
	return p.SimplePool.Reserve(ctx, n, d)
}
func (p *brokenPool) Unreserve(n int) { p.check(); p.SimplePool.Unreserve(n) }
func (p *brokenPool) Hold(on bool)    { p.check(); p.SimplePool.Hold(on) }
func (p *brokenPool) TryAllocateHeld(n int) []byte {
	p.check()
	return p.SimplePool.TryAllocateHeld(n)
}
func (p *brokenPool) TryReserveHeld(n int) bool { p.check(); return p.SimplePool.TryReserveHeld(n) }

// onlyPool hides every optional interface of the pool it holds.
type onlyPool struct{ bufferpool.Pool }

// TestGuardedHolderNeedsItsHeldMethods: a user's Holder is held, and
// guarded as one, only with TryAllocateHeld (and TryReserveHeld when it is
// a Reserver), the methods the producer takes held memory with. A wrapper
// that forwards Hold and TryAllocate to a SimplePool but lacks them is
// guarded as no Holder: holding it would refuse the producer's moves their
// own memory (SimplePool's TryAllocate fails while held) until the parked
// records expired.
func TestGuardedHolderNeedsItsHeldMethods(t *testing.T) {
	sp, err := bufferpool.New(bufferpool.Options{Size: 1 << 20})
	require.NoError(t, err)
	forwarding := struct {
		bufferpool.Pool
		bufferpool.Reserver
		bufferpool.Holder
	}{sp, sp, sp}
	require.Nil(t, usableHolder(forwarding), "a Holder without the held methods is never held")
	g := guardUserPool(forwarding, sp.Size(), slog.Default())
	_, isHold := g.(bufferpool.Holder)
	require.False(t, isHold, "guarded as no Holder")
	_, isRes := g.(bufferpool.Reserver)
	require.True(t, isRes)
	require.Nil(t, usableHolder(struct {
		bufferpool.Pool
		bufferpool.Reserver
		bufferpool.Holder
		bufferpool.HeldAllocator
	}{sp, sp, sp, sp}), "a Reserver needs TryReserveHeld too")

	own := guardUserPool(&brokenPool{SimplePool: sp}, sp.Size(), slog.Default())
	require.NotNil(t, usableHolder(own))
	sp.Hold(true)
	defer sp.Hold(false)
	require.Nil(t, own.TryAllocate(10), "a held pool refuses TryAllocate")
	buf := own.(bufferpool.HeldAllocator).TryAllocateHeld(10)
	require.Len(t, buf, 10, "the user's TryAllocateHeld takes held memory")
	require.True(t, own.(bufferpool.HeldReserver).TryReserveHeld(10))
	own.(bufferpool.Reserver).Unreserve(10)
	own.Release(buf)
}

// TestGuardedPoolRecoversEveryMethod: every method of a user's pool is
// called through the guard, which turns a panic into a failure of the
// method's own kind; the guard has the optional interfaces (Reserver,
// Holder) exactly when the user's pool has them, and samsa's own
// SimplePool is not wrapped.
func TestGuardedPoolRecoversEveryMethod(t *testing.T) {
	sp, err := bufferpool.New(bufferpool.Options{Size: 1 << 20})
	require.NoError(t, err)
	require.Same(t, sp, guardUserPool(sp, sp.Size(), slog.Default()).(*bufferpool.SimplePool), "samsa's own pool is used as it is")

	for _, tc := range []struct {
		name          string
		pool          bufferpool.Pool
		isRes, isHold bool
	}{
		{"Pool", onlyPool{sp}, false, false},
		{"Pool+Reserver", struct {
			bufferpool.Pool
			bufferpool.Reserver
		}{sp, sp}, true, false},
		{"Pool+Holder without held methods", struct {
			bufferpool.Pool
			bufferpool.Holder
		}{sp, sp}, false, false},
		{"Pool+Holder", struct {
			bufferpool.Pool
			bufferpool.Holder
			bufferpool.HeldAllocator
		}{sp, sp, sp}, false, true},
	} {
		g := guardUserPool(tc.pool, sp.Size(), slog.Default())
		_, isRes := g.(bufferpool.Reserver)
		_, isHold := g.(bufferpool.Holder)
		require.Equal(t, tc.isRes, isRes, "%s: Reserver", tc.name)
		require.Equal(t, tc.isHold, isHold, "%s: Holder", tc.name)
	}

	var logs testutil.SyncBuffer
	bp := &brokenPool{SimplePool: sp}
	g := guardUserPool(bp, sp.Size(), slog.New(slog.NewTextHandler(&logs, nil)))
	r, ok := g.(bufferpool.Reserver)
	require.True(t, ok)
	h, ok := g.(bufferpool.Holder)
	require.True(t, ok)
	buf := g.TryAllocate(100)
	require.Len(t, buf, 100, "a working pool works through the guard")

	bp.armed.Store(true)
	ctx := context.Background()
	require.NotPanics(t, func() {
		require.Nil(t, g.TryAllocate(10))
		got, err := g.Allocate(ctx, 10, time.Second)
		require.Nil(t, got)
		require.ErrorIs(t, err, ErrBufferExhausted)
		require.ErrorContains(t, err, "the buffer pool panicked in Allocate: broken pool")
		g.Release(buf)
		require.Equal(t, int64(1<<20), g.Size())
		require.Equal(t, int64(0), g.Available())
		require.True(t, g.IsOutOfMemory())
		require.False(t, r.TryReserve(10))
		err = r.Reserve(ctx, 10, time.Second)
		require.ErrorIs(t, err, ErrBufferExhausted)
		require.ErrorContains(t, err, "the buffer pool panicked in Reserve: broken pool")
		r.Unreserve(10)
		h.Hold(true)
		require.Nil(t, g.(bufferpool.HeldAllocator).TryAllocateHeld(10))
		require.False(t, g.(bufferpool.HeldReserver).TryReserveHeld(10))
		g.TryAllocate(10) // a second panic of the same method
	})
	out := logs.String()
	for _, m := range poolMethodNames {
		require.Equal(t, 1, strings.Count(out, "method="+m+" "), "%s's panic logged once: %s", m, out)
	}
	bp.armed.Store(false)
	g.Release(buf)
}
