package testbroker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/bufferpool"
)

const (
	kip72SocketMax = 300 << 10
	kip72Queued    = 600 << 10
)

// TestQueuedMaxBytesMutes: with the memory of queued.max.bytes held by
// stalled requests, the other connections stop reading (muted) instead of
// taking more memory, and every request is served once memory frees up.
func TestQueuedMaxBytesMutes(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1, SocketRequestMaxBytes: kip72SocketMax, QueuedMaxBytes: kip72Queued})
	require.NoError(t, c.CreateTopic("t", 1))
	remove := c.Intercept(Interceptor{Keys: []int16{produceKey}, Stall: true})
	defer remove()

	const conns = 12
	batch := testBatch{n: 200, valueSize: 1000}.build(t) // ~200 KiB
	clients := make([]*wireClient, conns)
	for i := range clients {
		clients[i] = dialBroker(t, c.Addrs()[0], fmt.Sprint("c", i))
		require.NoError(t, clients[i].send(produceRequest(9, -1, "t", map[int32][]byte{0: batch})))
	}
	// 600 KiB of pool, granted while any is free: 4 requests get memory
	// and stall (the 4th while 4 KiB are left), the 8 others wait muted.
	require.Eventually(t, func() bool {
		s := c.Stats()
		return s.Requests[produceKey]+s.MutedReads == conns
	}, 10*time.Second, time.Millisecond)
	s := c.Stats()
	assert.EqualValues(t, 4, s.Requests[produceKey], "%+v", s)
	assert.LessOrEqual(t, s.InFlightRequestBytes, int64(kip72Queued+kip72SocketMax))

	remove()
	for i, w := range clients {
		resp, err := w.recv()
		require.NoError(t, err, "client %d", i)
		assert.Zero(t, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	}
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	assert.EqualValues(t, conns*200, hw)
	// Memory is released just after each response is written.
	require.Eventually(t, func() bool { return c.Stats().InFlightRequestBytes == 0 }, 10*time.Second, time.Millisecond)
	assert.LessOrEqual(t, c.Stats().PeakInFlightRequestBytes, int64(kip72Queued+kip72SocketMax))
}

// TestQueuedMaxBytesBound: many concurrent producers pipeline large
// requests against a small queued.max.bytes. The bytes in flight never
// exceed queued.max.bytes + socket.request.max.bytes, nothing is lost, and
// every request is served.
func TestQueuedMaxBytesBound(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 2, SocketRequestMaxBytes: kip72SocketMax, QueuedMaxBytes: kip72Queued})
	require.NoError(t, c.CreateTopic("t", 4))

	const (
		producers = 12
		requests  = 5
	)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	var mu sync.Mutex
	sent := map[int32]int64{}
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			p := int32(i % 4)
			_, addr := leaderAddr(t, c, "t", p)
			w := dialBroker(t, addr, fmt.Sprint("p", i))
			n := int64(0)
			for range requests { // pipelined: all sent before any read
				records := 20 + r.IntN(230) // 20 KiB to 250 KiB
				if err := w.send(produceRequest(9, -1, "t", map[int32][]byte{p: testBatch{n: records, valueSize: 1000}.build(t)})); err != nil {
					errs <- err
					return
				}
				n += int64(records)
			}
			for range requests {
				resp, err := w.recv()
				if err != nil {
					errs <- err
					return
				}
				if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
					errs <- fmt.Errorf("producer %d: error code %d", i, code)
					return
				}
			}
			mu.Lock()
			sent[p] += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for p, n := range sent {
		hw, err := c.HighWatermark("t", p)
		require.NoError(t, err)
		assert.Equal(t, n, hw, "partition %d: every record appended once", p)
	}
	s := c.Stats()
	t.Logf("peak in-flight request bytes %d (bound %d), muted reads %d", s.PeakInFlightRequestBytes, kip72Queued+kip72SocketMax, s.MutedReads)
	assert.LessOrEqual(t, s.PeakInFlightRequestBytes, int64(kip72Queued+kip72SocketMax))
	require.Eventually(t, func() bool { return c.Stats().InFlightRequestBytes == 0 }, 10*time.Second, time.Millisecond)
}

// TestRequestMemoryWaitHoldsNothing: a muted connection whose wait ends
// (connection closed) holds no memory, and a release wakes a waiter.
func TestRequestMemoryWaitHoldsNothing(t *testing.T) {
	m, err := newRequestMemory(nil, 1000)
	require.NoError(t, err)
	var scratch []byte
	a, err := m.acquire(context.Background(), 1000, &scratch)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = m.acquire(ctx, 10, &scratch)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	inFlight, _, muted := m.stats()
	assert.EqualValues(t, 1000, inFlight)
	assert.EqualValues(t, 1, muted)

	got := make(chan []byte)
	go func() {
		b, err := m.acquire(context.Background(), 600, &scratch)
		assert.NoError(t, err)
		got <- b
	}()
	select {
	case <-got:
		t.Fatal("granted while the pool is empty")
	case <-time.After(20 * time.Millisecond):
	}
	m.release(a, &scratch)
	b := <-got
	assert.Len(t, b, 600)
	m.release(b, &scratch)
	inFlight, peak, _ := m.stats()
	assert.Zero(t, inFlight)
	assert.EqualValues(t, 1000, peak)
}

// countingPool is a plugged-in pool (memory.pool.class.name) that counts
// what the broker takes and gives back.
type countingPool struct {
	*bufferpool.SimplePool
	allocs, releases atomic.Int64
}

func (p *countingPool) TryAllocate(n int) []byte {
	b := p.SimplePool.TryAllocate(n)
	if b != nil {
		p.allocs.Add(1)
	}
	return b
}

func (p *countingPool) Allocate(ctx context.Context, n int, maxWait time.Duration) ([]byte, error) {
	b, err := p.SimplePool.Allocate(ctx, n, maxWait)
	if err == nil {
		p.allocs.Add(1)
	}
	return b, err
}

func (p *countingPool) Release(b []byte) {
	p.releases.Add(1)
	p.SimplePool.Release(b)
}

// TestMemoryPoolPluggable: Config.MemoryPool is KIP-72's
// memory.pool.class.name: every request's memory comes from the plugged-in
// pool and goes back to it, and its size is queued.max.bytes.
func TestMemoryPoolPluggable(t *testing.T) {
	sp, err := bufferpool.New(bufferpool.Options{Size: kip72Queued, OverAllocate: true, LeakDetection: true})
	require.NoError(t, err)
	pool := &countingPool{SimplePool: sp}
	c := newTestCluster(t, Config{Brokers: 1, SocketRequestMaxBytes: kip72SocketMax, MemoryPool: pool})
	require.NoError(t, c.CreateTopic("t", 1))
	w := dialBroker(t, c.Addrs()[0], "p")
	batch := testBatch{n: 10, valueSize: 100}.build(t)
	const n = 5
	for range n {
		resp := w.request(produceRequest(9, 1, "t", map[int32][]byte{0: batch})).(*kmsg.ProduceResponse)
		require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	}
	require.Eventually(t, func() bool { return pool.releases.Load() == n }, 5*time.Second, time.Millisecond)
	assert.EqualValues(t, n, pool.allocs.Load())
	assert.Equal(t, sp.Size(), sp.Available())

	for _, cfg := range []Config{
		{SocketRequestMaxBytes: kip72SocketMax, MemoryPool: pool, QueuedMaxBytes: kip72Queued + 1},
		{SocketRequestMaxBytes: kip72Queued, MemoryPool: pool},
	} {
		_, err := New(cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig)
	}
}
