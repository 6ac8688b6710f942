package testbroker

import (
	"encoding/binary"
	"io"
	"math"
	"net"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The live-heap tests measure what KIP-72 promises in real memory, not in
// the broker's own accounting: the Go heap still reachable after a full GC.
// They run alone (not in parallel), in sink mode so that no log keeps
// records, and every client writes the same pre-encoded request, so that
// the clients themselves hold one request's bytes in all.
const (
	heapSocketMax = 1 << 20 // socket.request.max.bytes
	heapQueued    = 4 << 20 // queued.max.bytes
	heapRequest   = 900 << 10
	heapProducers = 64
	// heapPerConn is the documented constant of the bound, per open
	// connection: the conn struct, the socket's runtime state, the small
	// response encoding buffer and the reusable Produce structs (their
	// slices, not the request bytes). Measured: about 2 KiB.
	heapPerConn = 8 << 10
	// heapSlack covers the test's own state: the shared request, the
	// goroutines' bookkeeping, the testing package's output buffers.
	heapSlack = 1 << 20
	// heapFloodSlack replaces heapSlack while the flood runs: a collection
	// counts as live whatever is allocated while it marks, even if dropped
	// at once, and under a flood that is a few requests' worth. Measured
	// peaks sit 0.5 to 3.3 MiB above Q + S.
	heapFloodSlack = 4 << 20
)

// liveHeap is the heap a full collection found reachable: the runtime's
// /gc/heap/live:bytes which, unlike MemStats.HeapAlloc, does not count what
// was allocated after the collection ended. Objects allocated while the
// collection marks count as live even if dropped at once (floating
// garbage); under a flood that is noise, so the smaller figure of two
// consecutive collections is kept (each is an upper bound of what was
// reachable at some point).
func liveHeap() int64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	live := int64(math.MaxInt64)
	for range 2 {
		runtime.GC()
		metrics.Read(sample)
		live = min(live, int64(sample[0].Value.Uint64()))
	}
	return live
}

// encodedProduce returns one Produce request of about heapRequest bytes,
// size prefix included, ready to be written by any number of connections.
func encodedProduce(t *testing.T, clientID string) []byte {
	t.Helper()
	batch := testBatch{n: 90, valueSize: 10 << 10}.build(t)
	req := produceRequest(9, 1, "t", map[int32][]byte{0: batch})
	wire := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, 1)
	require.Less(t, len(wire), heapSocketMax)
	require.Greater(t, len(wire), heapRequest-(20<<10))
	return wire
}

// readResponse reads one response frame into buf (grown as needed) and
// returns it.
func readResponse(nc net.Conn, buf []byte) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return buf, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(nc, buf)
	return buf, err
}

func heapCluster(t *testing.T) *Cluster {
	t.Helper()
	c := newTestCluster(t, Config{Brokers: 1, Sink: true, SocketRequestMaxBytes: heapSocketMax, QueuedMaxBytes: heapQueued})
	require.NoError(t, c.CreateTopic("t", 1))
	return c
}

// TestQueuedMaxBytesLiveHeapFlood floods one broker with 64 producers, each
// pipelining 900 KiB Produce requests, and samples the live heap while they
// run and while requests are stalled with memory exhausted: it never grows
// by more than queued.max.bytes + socket.request.max.bytes plus the
// documented constant (heapPerConn per connection and heapSlack).
func TestQueuedMaxBytesLiveHeapFlood(t *testing.T) {
	c := heapCluster(t)
	wire := encodedProduce(t, "flood")
	base := liveHeap()
	bound := int64(heapQueued+heapSocketMax) + heapProducers*heapPerConn + heapSlack
	floodBound := bound - heapSlack + heapFloodSlack

	conns := make([]net.Conn, heapProducers)
	for i := range conns {
		nc, err := net.DialTimeout("tcp", c.Addrs()[0], 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = nc.Close() })
		conns[i] = nc
	}

	// Phase 1: every request stalls once it has memory; the others are
	// muted. This is the steady state of an exhausted pool.
	remove := c.Intercept(Interceptor{Keys: []int16{produceKey}, Stall: true})
	for _, nc := range conns {
		_, err := nc.Write(wire)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		s := c.Stats()
		return s.Requests[produceKey]+s.MutedReads >= heapProducers
	}, 20*time.Second, 5*time.Millisecond)
	stalled := liveHeap() - base
	remove()
	for _, nc := range conns {
		_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := readResponse(nc, nil)
		require.NoError(t, err)
	}

	// Phase 2: a free-running flood, sampled.
	const perProducer = 12
	var wg sync.WaitGroup
	var failed atomic.Int64
	for _, nc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			go func() {
				for range perProducer {
					if _, err := nc.Write(wire); err != nil {
						return
					}
				}
			}()
			var buf []byte
			var err error
			for range perProducer {
				if buf, err = readResponse(nc, buf); err != nil {
					failed.Add(1)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var peak int64
	samples := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(10 * time.Millisecond):
			peak = max(peak, liveHeap()-base)
			samples++
		}
	}
	require.Zero(t, failed.Load())
	t.Logf("live heap above the idle broker: %d B with requests stalled (bound %d B: Q %d + S %d + %d conns × %d + %d), %d B peak over %d samples of the flood (bound %d B)",
		stalled, bound, heapQueued, heapSocketMax, heapProducers, heapPerConn, heapSlack, peak, samples, floodBound)
	assert.LessOrEqual(t, stalled, bound, "live heap with the pool exhausted")
	assert.LessOrEqual(t, peak, floodBound, "live heap during the flood")
	assert.Positive(t, samples)
	assert.LessOrEqual(t, c.Stats().PeakInFlightRequestBytes, int64(heapQueued+heapSocketMax))
}

// TestQueuedMaxBytesIdleConnsRetainNothing: 32 connections that each sent
// one 900 KiB Produce request and now sit idle keep no request memory alive
// (KIP-72: "memory would be released at the end of request processing").
func TestQueuedMaxBytesIdleConnsRetainNothing(t *testing.T) {
	c := heapCluster(t)
	wire := encodedProduce(t, "idle")
	base := liveHeap()
	const conns = 32
	for range conns {
		nc, err := net.DialTimeout("tcp", c.Addrs()[0], 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = nc.Close() })
		_, err = nc.Write(wire)
		require.NoError(t, err)
		_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := readResponse(nc, nil)
		require.NoError(t, err)
		require.Greater(t, len(resp), 4)
	}
	require.Eventually(t, func() bool { return c.Stats().InFlightRequestBytes == 0 }, 10*time.Second, time.Millisecond)
	retained := liveHeap() - base
	t.Logf("live heap held by %d idle connections: %d B (%d B each)", conns, retained, retained/conns)
	assert.LessOrEqual(t, retained, int64(conns*heapPerConn), "idle connections keep request memory alive")
}
