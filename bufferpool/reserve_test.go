package bufferpool

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestReservationsCountAgainstSize: reserved bytes are handed out like a
// buffer's: they make allocations wait or fail, and Unreserve gives them
// back (serving a waiter), with and without leak detection.
func TestReservationsCountAgainstSize(t *testing.T) {
	for _, leak := range []bool{false, true} {
		p, err := New(Options{Size: 4096, PooledSize: 1024, LeakDetection: leak})
		if err != nil {
			t.Fatal(err)
		}
		if !p.TryReserve(3072) {
			t.Fatal("TryReserve of 3072 bytes of 4096 failed")
		}
		if p.TryReserve(2048) || p.TryAllocate(2048) != nil {
			t.Fatal("more than the pool's size was handed out")
		}
		if got := p.Available(); got != 1024 {
			t.Fatalf("Available %d after reserving 3072 of 4096", got)
		}
		// A waiting reservation is served when memory comes back.
		done := make(chan error, 1)
		go func() { done <- p.Reserve(context.Background(), 2048, 5*time.Second) }()
		time.Sleep(10 * time.Millisecond)
		p.Unreserve(3072)
		if err := <-done; err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		err = p.Reserve(context.Background(), 4096, 10*time.Millisecond)
		if !errors.Is(err, ErrBufferExhausted) {
			t.Fatalf("Reserve over the available memory: %v, want ErrBufferExhausted", err)
		}
		p.Unreserve(2048)
		if got := p.Available(); got != 4096 {
			t.Fatalf("Available %d after every reservation was returned", got)
		}
		if st := p.Stats(); st.Leaked != 0 {
			t.Fatalf("%d buffers taken for leaks", st.Leaked)
		}
	}
}
