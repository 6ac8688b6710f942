package bufferpool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func newPool(t testing.TB, opts Options) *SimplePool {
	t.Helper()
	p, err := New(opts)
	require.NoError(t, err)
	return p
}

// waitFor polls cond until it holds, failing the test after a generous bound.
// Only used to wait for another goroutine to reach a state (e.g. to queue).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

type allocResult struct {
	buf []byte
	err error
}

// allocAsync starts Allocate on a goroutine and waits until it is queued.
func allocAsync(t testing.TB, p *SimplePool, ctx context.Context, size int, maxWait time.Duration) <-chan allocResult {
	t.Helper()
	before := p.Stats().Waiters
	ch := make(chan allocResult, 1)
	go func() {
		buf, err := p.Allocate(ctx, size, maxWait)
		ch <- allocResult{buf, err}
	}()
	waitFor(t, fmt.Sprintf("Allocate(%d) to queue", size), func() bool { return p.Stats().Waiters > before })
	return ch
}

// requireNotDone asserts that the Allocate behind ch has not been served:
// it has not returned, and the pool still counts waiters waiting (a grant
// removes the waiter from the queue synchronously, before it returns).
func requireNotDone(t testing.TB, p *SimplePool, waiting int, ch <-chan allocResult) {
	t.Helper()
	require.Equal(t, waiting, p.Stats().Waiters, "waiters still queued")
	select {
	case r := <-ch:
		t.Fatalf("Allocate returned early: len %d, err %v", len(r.buf), r.err)
	default:
	}
}

func recv(t testing.TB, ch <-chan allocResult) allocResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Allocate did not return")
		return allocResult{}
	}
}

func TestNewOptions(t *testing.T) {
	cases := []struct {
		name       string
		opts       Options
		size       int64
		pooledSize int
		errField   string
	}{
		{name: "zero value takes defaults", opts: Options{}, size: DefaultSize, pooledSize: DefaultPooledSize},
		{name: "explicit", opts: Options{Size: 1 << 20, PooledSize: 1024}, size: 1 << 20, pooledSize: 1024},
		{name: "pooled equals size", opts: Options{Size: 4096, PooledSize: 4096}, size: 4096, pooledSize: 4096},
		{name: "negative size", opts: Options{Size: -1}, errField: "Options.Size"},
		{name: "negative pooled size", opts: Options{PooledSize: -1}, errField: "Options.PooledSize"},
		{name: "pooled larger than size", opts: Options{Size: 1000}, errField: "Options.PooledSize"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.opts)
			if tc.errField != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tc.errField)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.size, p.Size())
			require.Equal(t, tc.pooledSize, p.PooledSize())
			require.Equal(t, tc.size, p.Available())
			require.False(t, p.IsOutOfMemory())
		})
	}
}

func TestTryAllocate(t *testing.T) {
	cases := []struct {
		name      string
		over      bool
		hold      []int // allocated first, all must succeed
		size      int
		wantNil   bool
		wantAvail int64 // after the TryAllocate
	}{
		{name: "fits", hold: []int{40}, size: 60, wantAvail: 0},
		{name: "strict refuses beyond bound", hold: []int{41}, size: 60, wantNil: true, wantAvail: 59},
		{name: "over-allocate grants if any byte free", over: true, hold: []int{99}, size: 100, wantAvail: -99},
		{name: "over-allocate refuses when nothing free", over: true, hold: []int{100}, size: 1, wantNil: true, wantAvail: 0},
		{name: "larger than pool", size: 101, wantNil: true, wantAvail: 100},
		{name: "larger than pool over-allocating", over: true, size: 101, wantNil: true, wantAvail: 100},
		{name: "negative", size: -1, wantNil: true, wantAvail: 100},
		{name: "zero is free", hold: []int{100}, size: 0, wantAvail: 0},
		{name: "pooled size", size: 20, wantAvail: 80},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, Options{Size: 100, PooledSize: 20, OverAllocate: tc.over})
			for _, h := range tc.hold {
				require.NotNil(t, p.TryAllocate(h))
			}
			buf := p.TryAllocate(tc.size)
			if tc.wantNil {
				require.Nil(t, buf)
			} else {
				require.NotNil(t, buf)
				require.Len(t, buf, tc.size)
			}
			require.Equal(t, tc.wantAvail, p.Available())
			require.Equal(t, tc.wantAvail <= 0, p.IsOutOfMemory())
			require.Equal(t, tc.wantAvail, p.Stats().Available)
		})
	}
}

func TestReleaseAccountsByCapacity(t *testing.T) {
	p := newPool(t, Options{Size: 1000, PooledSize: 100})
	a := p.TryAllocate(300)
	b := p.TryAllocate(100)
	require.Equal(t, int64(600), p.Available())
	p.Release(a[:7]) // a reslice keeping the start
	p.Release(b[:0])
	require.Equal(t, int64(1000), p.Available())
	p.Release(nil) // ignored
	require.Equal(t, int64(1000), p.Available())
	require.Equal(t, 1, p.Stats().FreeBuffers)
	// The recycled buffer comes back at full length.
	c := p.TryAllocate(100)
	require.Len(t, c, 100)
}

// TestPooledBuffersAreRecycled protects steady-state producing from
// allocating batch memory: a released batch.size buffer is handed out again.
func TestPooledBuffersAreRecycled(t *testing.T) {
	p := newPool(t, Options{Size: 1 << 20, PooledSize: 16384})
	a := p.TryAllocate(16384)
	p.Release(a)
	b, err := p.Allocate(context.Background(), 16384, time.Second)
	require.NoError(t, err)
	require.Equal(t, unsafe.SliceData(a), unsafe.SliceData(b), "Allocate of PooledSize must reuse the released buffer")
	p.Release(b)

	allocs := testing.AllocsPerRun(100, func() {
		buf, _ := p.Allocate(context.Background(), 16384, time.Second)
		p.Release(buf)
		buf = p.TryAllocate(16384)
		p.Release(buf)
	})
	require.Zero(t, allocs)
	require.Equal(t, p.Size(), p.Available())
}

func TestNonPooledRequestDropsFreeBuffers(t *testing.T) {
	p := newPool(t, Options{Size: 100, PooledSize: 20})
	var bufs [][]byte
	for range 5 {
		bufs = append(bufs, p.TryAllocate(20))
	}
	require.True(t, p.IsOutOfMemory())
	for _, b := range bufs {
		p.Release(b)
	}
	require.Equal(t, 5, p.Stats().FreeBuffers)
	big := p.TryAllocate(90)
	require.Len(t, big, 90)
	require.Equal(t, int64(10), p.Available())
	require.Equal(t, 0, p.Stats().FreeBuffers)
	p.Release(big)
	require.Equal(t, int64(100), p.Available())
}

func TestAllocateTooLargeFailsAtOnce(t *testing.T) {
	for _, over := range []bool{false, true} {
		t.Run(fmt.Sprintf("overAllocate=%v", over), func(t *testing.T) {
			p := newPool(t, Options{Size: 100, PooledSize: 10, OverAllocate: over})
			// No deadline at all: it must still return.
			buf, err := p.Allocate(context.Background(), 101, 0)
			require.Nil(t, buf)
			require.ErrorIs(t, err, ErrRequestTooLarge)
			require.Contains(t, err.Error(), "101")
			require.Contains(t, err.Error(), "100")
			require.Zero(t, p.Stats().Waiters)
		})
	}
}

func TestAllocateEdgeSizes(t *testing.T) {
	p := newPool(t, Options{Size: 100, PooledSize: 10})
	buf, err := p.Allocate(context.Background(), 0, 0)
	require.NoError(t, err)
	require.NotNil(t, buf)
	require.Empty(t, buf)
	p.Release(buf)
	_, err = p.Allocate(context.Background(), -5, 0)
	require.Error(t, err)
	require.Equal(t, int64(100), p.Available())
}

func TestAllocateExhausted(t *testing.T) {
	p := newPool(t, Options{Size: 100, PooledSize: 10})
	hold := p.TryAllocate(70)
	buf, err := p.Allocate(context.Background(), 50, 20*time.Millisecond)
	require.Nil(t, buf)
	require.ErrorIs(t, err, ErrBufferExhausted)
	msg := err.Error()
	require.Contains(t, msg, "waited")
	require.Contains(t, msg, "50 bytes")
	require.Contains(t, msg, "30 of 100 available")
	st := p.Stats()
	require.Equal(t, int64(1), st.Exhausted)
	require.Zero(t, st.Canceled)
	require.Zero(t, st.Waiters)
	require.GreaterOrEqual(t, st.WaitTime, 20*time.Millisecond)
	p.Release(hold)
	require.Equal(t, int64(100), p.Available())
}

func TestAllocateContextEnds(t *testing.T) {
	cases := []struct {
		name    string
		ctx     func() (context.Context, func())
		cancel  bool // cancel after queueing
		wantErr error
	}{
		{
			name:    "canceled",
			ctx:     func() (context.Context, func()) { return context.WithCancel(context.Background()) },
			cancel:  true,
			wantErr: context.Canceled,
		},
		{
			name: "deadline earlier than maxWait",
			ctx: func() (context.Context, func()) {
				return context.WithTimeout(context.Background(), 20*time.Millisecond)
			},
			wantErr: context.DeadlineExceeded,
		},
		{
			name: "cause is kept",
			ctx: func() (context.Context, func()) {
				ctx, cancel := context.WithCancelCause(context.Background())
				return ctx, func() { cancel(errShutdown) }
			},
			cancel:  true,
			wantErr: errShutdown,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, Options{Size: 100, PooledSize: 10})
			hold := p.TryAllocate(100)
			ctx, cancel := tc.ctx()
			defer cancel()
			ch := allocAsync(t, p, ctx, 10, time.Hour)
			if tc.cancel {
				cancel()
			}
			r := recv(t, ch)
			require.Nil(t, r.buf)
			require.ErrorIs(t, r.err, tc.wantErr)
			require.NotErrorIs(t, r.err, ErrBufferExhausted)
			st := p.Stats()
			require.Equal(t, int64(1), st.Canceled)
			require.Zero(t, st.Exhausted)
			require.Zero(t, st.Waiters)
			p.Release(hold)
			require.Equal(t, int64(100), p.Available())
		})
	}
}

var errShutdown = errors.New("shutting down")

func TestAllocateSucceedsWithoutWaitingEvenIfContextDone(t *testing.T) {
	p := newPool(t, Options{Size: 100, PooledSize: 10})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	buf, err := p.Allocate(ctx, 10, 0)
	require.NoError(t, err)
	require.Len(t, buf, 10)
}

// TestWaitersServedFIFO protects large requests from starvation: a small
// request behind a large waiter waits even when it would fit.
func TestWaitersServedFIFO(t *testing.T) {
	for _, over := range []bool{false, true} {
		t.Run(fmt.Sprintf("overAllocate=%v", over), func(t *testing.T) {
			p := newPool(t, Options{Size: 100, PooledSize: 10, OverAllocate: over})
			var held [][]byte
			for range 10 {
				held = append(held, p.TryAllocate(10))
			}
			ctx := context.Background()
			large := allocAsync(t, p, ctx, 80, 0)
			small := allocAsync(t, p, ctx, 10, 0)

			p.Release(held[0])
			// 10 bytes free: enough for small, not (strictly) for large.
			if over {
				// Over-allocating, the head is granted as soon as a byte is free.
				r := recv(t, large)
				require.NoError(t, r.err)
				require.Len(t, r.buf, 80)
				requireNotDone(t, p, 1, small)
				require.Equal(t, int64(-70), p.Available())
				require.Nil(t, p.TryAllocate(1))
				for _, b := range held[1:8] {
					p.Release(b)
				}
				requireNotDone(t, p, 1, small) // 0 available
				p.Release(held[8])
				r2 := recv(t, small)
				require.NoError(t, r2.err)
				for _, b := range [][]byte{r.buf, r2.buf, held[9]} {
					p.Release(b)
				}
				require.Equal(t, int64(100), p.Available())
				return
			}
			requireNotDone(t, p, 2, large)
			requireNotDone(t, p, 2, small)
			require.Nil(t, p.TryAllocate(10), "TryAllocate must not jump the queue")
			require.Equal(t, 2, p.Stats().Waiters)
			for _, b := range held[1:7] {
				p.Release(b)
			}
			requireNotDone(t, p, 2, large) // 70 free
			p.Release(held[7])
			r := recv(t, large)
			require.NoError(t, r.err)
			require.Len(t, r.buf, 80)
			requireNotDone(t, p, 1, small) // 0 free
			p.Release(held[8])
			r2 := recv(t, small)
			require.NoError(t, r2.err)
			require.Len(t, r2.buf, 10)
			p.Release(r.buf)
			p.Release(r2.buf)
			p.Release(held[9])
			require.Equal(t, int64(100), p.Available())
			require.Zero(t, p.Stats().Waiters)
		})
	}
}

// TestHeadWaiterGivingUpServesNext protects the queue from stalling: when the
// large head times out, the smaller waiter behind it gets the free memory.
func TestHeadWaiterGivingUpServesNext(t *testing.T) {
	p := newPool(t, Options{Size: 100, PooledSize: 10})
	hold := p.TryAllocate(60)
	large := allocAsync(t, p, context.Background(), 80, 30*time.Millisecond)
	small := allocAsync(t, p, context.Background(), 30, 0)
	r := recv(t, large)
	require.ErrorIs(t, r.err, ErrBufferExhausted)
	r = recv(t, small)
	require.NoError(t, r.err)
	require.Len(t, r.buf, 30)
	p.Release(r.buf)
	p.Release(hold)
	require.Equal(t, int64(100), p.Available())
}

func TestWaiterGetsRecycledBuffer(t *testing.T) {
	p := newPool(t, Options{Size: 30, PooledSize: 10})
	a, b, c := p.TryAllocate(10), p.TryAllocate(10), p.TryAllocate(10)
	ch := allocAsync(t, p, context.Background(), 10, 0)
	p.Release(b)
	r := recv(t, ch)
	require.NoError(t, r.err)
	require.Equal(t, unsafe.SliceData(b), unsafe.SliceData(r.buf))
	for _, buf := range [][]byte{a, c, r.buf} {
		p.Release(buf)
	}
	require.Equal(t, int64(30), p.Available())
}

// TestWaitAllocatesLittle keeps the waiting path to a small constant of
// allocations once its waiter struct and timer are recycled.
func TestWaitAllocatesLittle(t *testing.T) {
	p := newPool(t, Options{Size: 10, PooledSize: 10})
	hold := p.TryAllocate(10)
	allocs := testing.AllocsPerRun(100, func() {
		_, err := p.Allocate(context.Background(), 10, time.Microsecond)
		if !errors.Is(err, ErrBufferExhausted) {
			panic(err)
		}
	})
	// The error value itself (fmt.Errorf with its numbers) allocates about
	// six times, and a timer or runtime bookkeeping now and then one more;
	// the wait itself allocates nothing per call (its waiter is recycled).
	require.LessOrEqual(t, allocs, 8.0)
	p.Release(hold)
}

func TestReleaseMisuse(t *testing.T) {
	t.Run("double release overflowing the pool panics", func(t *testing.T) {
		p := newPool(t, Options{Size: 100, PooledSize: 10})
		a := p.TryAllocate(60)
		p.Release(a)
		require.PanicsWithValue(t,
			"bufferpool: Release of 60 bytes would make 160 available in a pool of 100: a buffer was released twice or was not from this pool",
			func() { p.Release(a) })
		require.Equal(t, int64(100), p.Available(), "a refused Release changes nothing")
	})
	leakCases := []struct {
		name  string
		do    func(p *SimplePool)
		want  string
		avail int64 // unchanged by the refused Release
	}{
		{
			name: "double release of pooled buffer",
			do: func(p *SimplePool) {
				hold := p.TryAllocate(50)
				a := p.TryAllocate(10)
				p.Release(a)
				_ = hold
				p.Release(a)
			},
			want:  "second Release",
			avail: 50,
		},
		{
			name: "double release of non-pooled buffer",
			do: func(p *SimplePool) {
				hold := p.TryAllocate(50)
				a := p.TryAllocate(30)
				p.Release(a)
				_ = hold
				p.Release(a)
			},
			want:  "second Release",
			avail: 50,
		},
		{
			name: "foreign buffer",
			do: func(p *SimplePool) {
				hold := p.TryAllocate(50)
				_ = hold
				p.Release(make([]byte, 30))
			},
			want:  "did not hand out",
			avail: 50,
		},
		{
			name: "resliced from a later start",
			do: func(p *SimplePool) {
				a := p.TryAllocate(30)
				p.Release(a[5:])
			},
			want:  "did not hand out",
			avail: 70,
		},
	}
	for _, tc := range leakCases {
		t.Run("leak detection: "+tc.name, func(t *testing.T) {
			p := newPool(t, Options{Size: 100, PooledSize: 10, LeakDetection: true})
			defer func() {
				r := recover()
				require.NotNil(t, r, "Release must panic")
				require.Contains(t, fmt.Sprint(r), tc.want)
				require.Equal(t, tc.avail, p.Available())
			}()
			tc.do(p)
		})
	}
}

func TestStatsSnapshot(t *testing.T) {
	p := newPool(t, Options{Size: 100, PooledSize: 10})
	a := p.TryAllocate(10)
	p.Release(a)
	hold := p.TryAllocate(95)
	_ = allocAsync(t, p, context.Background(), 50, time.Hour)
	st := p.Stats()
	require.Equal(t, Stats{Size: 100, Available: 5, FreeBuffers: 0, Waiters: 1, WaitTime: st.WaitTime}, st)
	p.Release(hold)
	waitFor(t, "waiter served", func() bool { return p.Stats().Waiters == 0 })
	runtime.Gosched()
}

// TestSizeClassesAreRecycled: with MaxPooledSize, every doubling of
// PooledSize up to it comes back from a free list of its own, and the
// accounting stays exact.
func TestSizeClassesAreRecycled(t *testing.T) {
	p := newPool(t, Options{Size: 1 << 20, PooledSize: 1024, MaxPooledSize: 8192})
	for _, size := range []int{1024, 2048, 4096, 8192} {
		a := p.TryAllocate(size)
		require.NotNil(t, a)
		p.Release(a)
		b := p.TryAllocate(size)
		require.Same(t, unsafe.SliceData(a), unsafe.SliceData(b), "size %d not recycled", size)
		p.Release(b)
	}
	require.Equal(t, 4, p.Stats().FreeBuffers)
	require.Equal(t, p.Size(), p.Available())
	// A size outside the classes takes memory from the free lists.
	big := p.TryAllocate(1 << 20)
	require.NotNil(t, big)
	require.Equal(t, 0, p.Stats().FreeBuffers)
	p.Release(big)
	require.Equal(t, p.Size(), p.Available())
}

// TestLargerRecycledBufferBeforeNewOne: a request whose size has no free
// buffer takes a recycled one up to twice as large, whole, before a new
// one is made, whether or not the pool has memory left (issue 17: making
// half-size buffers and dropping them once the pool was full was most of
// the producer's garbage).
func TestLargerRecycledBufferBeforeNewOne(t *testing.T) {
	p := newPool(t, Options{Size: 1 << 20, PooledSize: 1024, MaxPooledSize: 4096})
	a := p.TryAllocate(2048)
	p.Release(a)
	b := p.TryAllocate(1024)
	require.Same(t, unsafe.SliceData(a), unsafe.SliceData(b))
	require.Len(t, b, 1024)
	require.Equal(t, 2048, cap(b))
	require.Equal(t, p.Size()-2048, p.Available())
	p.Release(b)
	require.Equal(t, p.Size(), p.Available())
}

// TestFullPoolHandsOutLargerRecycledBuffer: with the pool full of recycled
// buffers of other sizes, a request takes a larger recycled buffer whole
// instead of dropping buffers for the garbage collector and making a new
// one, and its whole capacity stays accounted until Release.
func TestFullPoolHandsOutLargerRecycledBuffer(t *testing.T) {
	for _, leak := range []bool{false, true} {
		t.Run(fmt.Sprintf("leak=%v", leak), func(t *testing.T) {
			p := newPool(t, Options{Size: 8192, PooledSize: 1024, MaxPooledSize: 4096, LeakDetection: leak})
			big := p.TryAllocate(4096)
			mid := p.TryAllocate(2048)
			small := p.TryAllocate(2048) // fills the pool; stays out
			require.NotNil(t, big)
			require.NotNil(t, mid)
			require.NotNil(t, small)
			require.Equal(t, int64(0), p.Available())
			p.Release(big)
			p.Release(mid)
			require.Equal(t, 2, p.Stats().FreeBuffers)

			// 1024 has no free list entry and nothing is non-pooled: the
			// smallest larger buffer (2048) is handed out whole.
			got := p.TryAllocate(1024)
			require.Len(t, got, 1024)
			require.Equal(t, 2048, cap(got))
			require.Same(t, unsafe.SliceData(mid), unsafe.SliceData(got))
			require.Equal(t, int64(4096), p.Available(), "the whole 2048 bytes are accounted")
			require.Equal(t, 1, p.Stats().FreeBuffers)

			// A size outside the classes is served the same way.
			odd, err := p.Allocate(context.Background(), 3000, time.Second)
			require.NoError(t, err)
			require.Len(t, odd, 3000)
			require.Equal(t, 4096, cap(odd))
			require.Equal(t, int64(0), p.Available())

			p.Release(got)
			p.Release(odd)
			p.Release(small)
			require.Equal(t, p.Size(), p.Available())
			require.Equal(t, 3, p.Stats().FreeBuffers, "released buffers go back to their own lists")

			// No buffer more than twice the request is handed out: with
			// only a 4096-byte buffer free, a 1024-byte request drops it
			// and takes 1024 of its bytes.
			var held [][]byte
			for _, n := range []int{4096, 2048, 2048} {
				b := p.TryAllocate(n)
				require.NotNil(t, b)
				held = append(held, b)
			}
			p.Release(held[0]) // only a 4096-byte buffer is free
			tiny := p.TryAllocate(1024)
			require.Equal(t, 1024, cap(tiny), "a 4096-byte buffer is dropped, not handed out for 1024 bytes")
			require.Equal(t, int64(3072), p.Available())
			require.Zero(t, p.Stats().FreeBuffers)
			p.Release(tiny)
			p.Release(held[1])
			p.Release(held[2])
			require.Equal(t, p.Size(), p.Available())
			require.Zero(t, p.Stats().Leaked)
		})
	}
}

// TestDropTakesSmallestCoveringBuffer: when recycled buffers must be dropped
// to cover a request, the smallest one that covers what is missing goes,
// not the largest.
func TestDropTakesSmallestCoveringBuffer(t *testing.T) {
	p := newPool(t, Options{Size: 5120, PooledSize: 1024, MaxPooledSize: 4096})
	a := p.TryAllocate(1024)
	b := p.TryAllocate(4096)
	require.Equal(t, int64(0), p.Available())
	p.Release(a)
	p.Release(b)
	// A reservation never takes a buffer: the 1024-byte one is dropped
	// for it, the 4096-byte one stays recycled.
	require.True(t, p.TryReserve(100))
	st := p.Stats()
	require.Equal(t, 1, st.FreeBuffers)
	require.Equal(t, int64(5020), st.Available)
	got := p.TryAllocate(4096)
	require.Same(t, unsafe.SliceData(b), unsafe.SliceData(got), "the large buffer was kept")
	p.Release(got)
	p.Unreserve(100)
	require.Equal(t, p.Size(), p.Available())
}

// TestReserveWaitMakesNoBuffer: a Reserve that waits is granted bytes, not
// a buffer, and the accounting balances.
func TestReserveWaitMakesNoBuffer(t *testing.T) {
	p := newPool(t, Options{Size: 4096, PooledSize: 1024, LeakDetection: true})
	buf := p.TryAllocate(4096)
	done := make(chan error, 1)
	go func() { done <- p.Reserve(context.Background(), 3000, 10*time.Second) }()
	waitFor(t, "Reserve to queue", func() bool { return p.Stats().Waiters == 1 })
	p.Release(buf)
	require.NoError(t, <-done)
	require.Equal(t, int64(1096), p.Available())
	allocs := testing.AllocsPerRun(50, func() {
		require.True(t, p.TryReserve(1000))
		p.Unreserve(1000)
	})
	require.Zero(t, allocs)
	p.Unreserve(3000)
	require.Equal(t, p.Size(), p.Available())
	require.Zero(t, p.Stats().Leaked)
}
