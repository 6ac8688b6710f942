package bufferpool

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHoldKeepsReleasedMemoryForTheHolder: while held, memory released
// with callers waiting goes to neither them nor TryAllocate and TryReserve
// (which fail even with nobody waiting), only to TryAllocateHeld and
// TryReserveHeld; new Allocate calls queue, the waiters' MaxBlock still
// runs, and turning the hold off serves them.
func TestHoldKeepsReleasedMemoryForTheHolder(t *testing.T) {
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
	require.Nil(t, p.TryAllocate(256), "TryAllocate took held memory")
	require.False(t, p.TryReserve(256), "TryReserve took held memory")
	b := p.TryAllocateHeld(256)
	require.NotNil(t, b, "TryAllocateHeld under a hold, with a caller waiting")
	require.True(t, p.TryReserveHeld(256), "TryReserveHeld under a hold")

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

// TestHoldFailsTryAllocateWithNobodyWaiting: a held pool keeps its memory
// for the holder even when no caller waits, and the holder's methods are
// the plain ones once the hold is off: they never jump the queue then.
func TestHoldFailsTryAllocateWithNobodyWaiting(t *testing.T) {
	p, err := New(Options{Size: 1024, PooledSize: 256})
	require.NoError(t, err)
	p.Hold(true)
	require.Nil(t, p.TryAllocate(256))
	require.False(t, p.TryReserve(256))
	require.Equal(t, []byte{}, p.TryAllocate(0), "size 0 needs no memory")
	b := p.TryAllocateHeld(256)
	require.NotNil(t, b)
	p.Hold(false)
	p.Release(b)

	// Not held, with a caller waiting for more than is available: the
	// holder's methods do not take the 256 bytes ahead of it.
	c := p.TryAllocate(768)
	require.NotNil(t, c)
	got := make(chan error, 1)
	go func() {
		buf, err := p.Allocate(context.Background(), 1024, time.Minute)
		if err == nil {
			p.Release(buf)
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return p.Stats().Waiters == 1 }, 5*time.Second, time.Millisecond)
	require.Nil(t, p.TryAllocateHeld(256), "not held: the holder waits its turn too")
	require.False(t, p.TryReserveHeld(256))
	p.Release(c)
	require.NoError(t, <-got)
	require.Equal(t, int64(1024), p.Available())
}
