package bufferpool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConcurrentBoundAndLiveness runs many goroutines allocating random sizes
// (some exactly PooledSize, some larger, up to the whole pool) with random
// hold times and waits. It checks the two promises of the pool: outstanding
// bytes never exceed the bound (Size, or Size + largest request - 1 when
// over-allocating), and every Allocate returns, either with a buffer or with
// ErrBufferExhausted or its context's error.
func TestConcurrentBoundAndLiveness(t *testing.T) {
	const (
		size       = 256 << 10
		pooledSize = 16 << 10
		goroutines = 32
	)
	iterations := 200
	if testing.Short() {
		iterations = 50
	}
	for _, over := range []bool{false, true} {
		for _, leak := range []bool{false, true} {
			t.Run(fmt.Sprintf("overAllocate=%v/leakDetection=%v", over, leak), func(t *testing.T) {
				// Size classes up to 64 KiB: requests of 32 KiB and 64 KiB
				// are recycled too.
				p := newPool(t, Options{Size: size, PooledSize: pooledSize, MaxPooledSize: 4 * pooledSize, OverAllocate: over, LeakDetection: leak})
				var (
					outstanding, maxOutstanding atomic.Int64
					largest                     atomic.Int64
					minAvail                    atomic.Int64
					served, exhausted, canceled atomic.Int64
				)
				minAvail.Store(size)
				storeMax := func(v *atomic.Int64, x int64) {
					for {
						m := v.Load()
						if x <= m || v.CompareAndSwap(m, x) {
							return
						}
					}
				}
				observe := func() {
					a := p.Available()
					for {
						m := minAvail.Load()
						if a >= m || minAvail.CompareAndSwap(m, a) {
							return
						}
					}
				}

				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(g), 42))
						for range iterations {
							var n int
							switch rng.IntN(4) {
							case 0:
								n = pooledSize << rng.IntN(3)
							case 1:
								n = 1 + rng.IntN(pooledSize)
							case 2:
								n = pooledSize + rng.IntN(size/4)
							default:
								n = 1 + rng.IntN(size) // up to the whole pool
							}
							storeMax(&largest, int64(n))
							var buf []byte
							var err error
							switch rng.IntN(4) {
							case 0:
								buf = p.TryAllocate(n)
								if buf == nil {
									continue
								}
							case 1: // context deadline, no maxWait of its own
								ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(3000))*time.Microsecond)
								buf, err = p.Allocate(ctx, n, 0)
								cancel()
							default:
								buf, err = p.Allocate(context.Background(), n, time.Duration(rng.IntN(5000))*time.Microsecond)
							}
							switch {
							case err == nil:
								if len(buf) != n {
									t.Errorf("Allocate(%d) returned len %d", n, len(buf))
									return
								}
								served.Add(1)
							case errors.Is(err, ErrBufferExhausted):
								exhausted.Add(1)
								continue
							case errors.Is(err, context.DeadlineExceeded):
								canceled.Add(1)
								continue
							default:
								t.Errorf("Allocate(%d): unexpected error %v", n, err)
								return
							}
							storeMax(&maxOutstanding, outstanding.Add(int64(cap(buf))))
							observe()
							buf[0], buf[len(buf)-1] = 1, 1 // the memory is ours
							if d := rng.IntN(200); d > 150 {
								time.Sleep(time.Duration(d) * time.Microsecond)
							}
							outstanding.Add(-int64(cap(buf)))
							p.Release(buf)
						}
					}()
				}
				done := make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(2 * time.Minute):
					t.Fatalf("goroutines still blocked in Allocate: %+v", p.Stats())
				}

				bound := int64(size)
				if over {
					bound = size + largest.Load() - 1
				}
				t.Logf("served %d, exhausted %d, canceled %d, max outstanding %d of bound %d, min available %d",
					served.Load(), exhausted.Load(), canceled.Load(), maxOutstanding.Load(), bound, minAvail.Load())
				require.LessOrEqual(t, maxOutstanding.Load(), bound)
				require.GreaterOrEqual(t, minAvail.Load(), int64(size)-bound)
				require.Positive(t, served.Load())
				st := p.Stats()
				require.Equal(t, int64(size), st.Available)
				require.Equal(t, int64(size), p.Available())
				require.Zero(t, st.Waiters)
				require.Equal(t, exhausted.Load(), st.Exhausted)
				require.Equal(t, canceled.Load(), st.Canceled)
				require.Zero(t, st.Leaked)
			})
		}
	}
}
