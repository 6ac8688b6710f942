package bufferpool

import (
	"context"
	"testing"
)

// FuzzOperations drives a pool with a sequence of TryAllocate, Allocate
// (without waiting) and Release calls decoded from the input, and checks the
// accounting against a simple model after every step.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 10, 0, 20, 2, 0, 1, 255, 3, 0}, false)
	f.Add([]byte{0, 200, 0, 200, 0, 16, 2, 1, 2, 0, 0, 16, 0, 16}, true)
	f.Add([]byte{1, 16, 1, 16, 1, 16, 2, 2, 1, 100, 2, 0, 2, 0}, false)
	f.Fuzz(func(t *testing.T, ops []byte, over bool) {
		const size, pooled = 256, 16
		p := newPool(t, Options{Size: size, PooledSize: pooled, OverAllocate: over, LeakDetection: len(ops)%2 == 0})
		var held [][]byte
		var out int64
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // Allocate must never wait here
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%4, int(ops[i+1])
			switch op {
			case 0, 1:
				n := arg
				if arg%3 == 0 {
					n = pooled
				}
				avail := int64(size) - out
				fits := avail >= int64(n) || (over && avail > 0)
				if n > size {
					fits = false
				}
				var buf []byte
				if op == 0 {
					buf = p.TryAllocate(n)
				} else {
					var err error
					buf, err = p.Allocate(ctx, n, 0)
					if (err == nil) != fits {
						t.Fatalf("Allocate(%d) with %d available: err %v", n, avail, err)
					}
				}
				if n == 0 {
					continue
				}
				if (buf != nil) != fits {
					t.Fatalf("allocate %d with %d available (over %v): got %v", n, avail, over, buf != nil)
				}
				if buf != nil {
					if len(buf) != n {
						t.Fatalf("len %d, want %d", len(buf), n)
					}
					out += int64(cap(buf))
					held = append(held, buf)
				}
			default:
				if len(held) == 0 {
					continue
				}
				k := arg % len(held)
				buf := held[k]
				held = append(held[:k], held[k+1:]...)
				out -= int64(cap(buf))
				p.Release(buf[:arg%(len(buf)+1)])
			}
			if got := p.Available(); got != size-out {
				t.Fatalf("Available %d, want %d", got, size-out)
			}
			if !over && out > size {
				t.Fatalf("strict pool handed out %d bytes", out)
			}
		}
		for _, b := range held {
			p.Release(b)
		}
		if got := p.Available(); got != size {
			t.Fatalf("Available %d after releasing everything", got)
		}
	})
}
