package bufferpool

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHoldKeepsReleasedMemoryForTryAllocate: while held, memory released
// with callers waiting stays available to TryAllocate and TryReserve (which
// otherwise never jump the queue), new Allocate calls queue, the waiters'
// MaxBlock still runs, and turning the hold off serves them.
func TestHoldKeepsReleasedMemoryForTryAllocate(t *testing.T) {
	p, err := New(Options{Size: 1024, PooledSize: 256})
	require.NoError(t, err)
	a := p.TryAllocate(1024)
	require.NotNil(t, a)

	got := make(chan []byte, 1)
	go func() {
		buf, err := p.Allocate(context.Background(), 512, time.Minute)
		if err == nil {
			got <- buf
		}
	}()
	require.Eventually(t, func() bool { return p.Stats().Waiters == 1 }, 5*time.Second, time.Millisecond)

	p.Hold(true)
	p.Release(a)
	require.Empty(t, got, "a held pool served a waiter")
	b := p.TryAllocate(256)
	require.NotNil(t, b, "TryAllocate under a hold, with a caller waiting")
	require.True(t, p.TryReserve(256), "TryReserve under a hold")

	// A new Allocate queues behind the hold; its MaxBlock still runs.
	_, err = p.Allocate(context.Background(), 1, 20*time.Millisecond)
	require.ErrorIs(t, err, ErrBufferExhausted)

	p.Hold(false)
	select {
	case buf := <-got:
		require.Len(t, buf, 512)
		p.Release(buf)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not served when the hold ended")
	}
	p.Release(b)
	p.Unreserve(256)
	require.Equal(t, int64(1024), p.Available())
}
