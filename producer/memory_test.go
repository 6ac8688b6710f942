package producer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// Tests of the memory bound: what a record costs, wherever it waits.

// TestParkedRecordTakesLittlePoolMemory: a record parked for a topic whose
// metadata has not arrived takes a parking chunk that starts small and
// grows as more records park, as batches do, not a whole BatchSize: with
// BatchSize 1 MiB and 32 MiB of buffer, one-byte records to 64 new topics
// all fit.
func TestParkedRecordTakesLittlePoolMemory(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{3}, Stall: true}) // metadata never answers
	defer remove()
	p := newProducer(t, c, Config{BatchSize: 1 << 20, BufferMemory: 32 << 20, DeliveryTimeout: time.Minute})
	var fs []*Future
	for i := range 64 {
		f := p.TrySend(context.Background(), &Record{Topic: fmt.Sprintf("new-%d", i), Value: []byte{1}})
		_, done, err := f.Result()
		require.False(t, done, "record %d failed at once: %v", i, err)
		fs = append(fs, f)
	}
	used := bufferUsed(p)
	require.Less(t, used, int64(1<<20), "64 parked one-byte records hold %d bytes of pool memory", used)
	remove()
	for i := range 64 {
		require.NoError(t, c.CreateTopic(fmt.Sprintf("new-%d", i), 1))
	}
	waitAll(t, fs)
}

// TestHugeBatchSizeIsNeverAllocatedUpFront: New accepts a BatchSize of 1 TiB
// (with a buffer to match); records, parked or not, take what they need,
// never BatchSize at once.
func TestHugeBatchSizeIsNeverAllocatedUpFront(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("known", 1))
	p := newProducer(t, c, Config{BatchSize: min(1<<40, math.MaxInt/4), BufferMemory: 2 * min(1<<40, math.MaxInt/4), MaxRequestSize: 1 << 20})
	var fs []*Future
	for _, topic := range []string{"known", "late"} {
		for range 10 {
			fs = append(fs, p.Send(context.Background(), &Record{Topic: topic, Value: []byte("v")}))
		}
	}
	require.NoError(t, c.CreateTopic("late", 1))
	waitAll(t, fs)
	liveHeap := heapNow()
	require.Less(t, liveHeap, uint64(256<<20), "live heap %d MiB", liveHeap>>20)
}

// heapNow returns the live heap after a garbage collection.
func heapNow() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// bookkeepingSlack is the live heap the memory bound allows beyond
// BufferMemory in TestLiveHeapStaysWithinBufferMemory: the producer's fixed
// structures (goroutines, connections, metadata, free lists that are empty
// here) and the runtime's own noise.
const bookkeepingSlack = 3 << 20

// TestLiveHeapStaysWithinBufferMemory: with Produce stalled (or metadata
// never answering, so that records stay parked), Sends of 0-byte records
// fill the pool and then fail with ErrBufferExhausted; the live heap has
// then grown by at most BufferMemory plus a small constant: the records'
// bookkeeping (completions, batches, parking queues) is charged to the pool
// too, whatever the record size.
func TestLiveHeapStaysWithinBufferMemory(t *testing.T) {
	const bufferMemory = 4 << 20
	for _, parked := range []bool{false, true} {
		name := map[bool]string{false: "known topic", true: "parked"}[parked]
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("known", 4))
			p := newProducer(t, c, Config{BufferMemory: bufferMemory, MaxBlock: NoWait, DeliveryTimeout: 5 * time.Minute, RequestTimeout: 4 * time.Minute})
			_, err := p.Send(context.Background(), &Record{Topic: "known", Value: []byte("warm")}).Wait(context.Background())
			require.NoError(t, err)
			topic := "known"
			if parked {
				topic = "late"
				defer c.Intercept(testbroker.Interceptor{Keys: []int16{3}, Stall: true})()
			} else {
				defer c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true})()
			}
			before := heapNow()
			var accepted int
			var exhausted atomic.Int64
			count := func(_ RecordMetadata, err error) {
				if errors.Is(err, ErrBufferExhausted) {
					exhausted.Add(1)
				}
			}
			rec := &Record{Topic: topic}
			for exhausted.Load() < 200 {
				n := exhausted.Load()
				p.SendCallback(context.Background(), rec, count)
				if exhausted.Load() == n {
					accepted++
				}
			}
			time.Sleep(50 * time.Millisecond) // batches sealed and in flight
			grown := int64(heapNow()) - int64(before)
			t.Logf("%s: %d records accepted, live heap grew by %.1f MiB (BufferMemory %d MiB, %.0f B per record)",
				name, accepted, float64(grown)/(1<<20), bufferMemory>>20, float64(grown)/float64(accepted))
			require.Less(t, grown, int64(bufferMemory+bookkeepingSlack),
				"live heap grew by %d bytes for %d records", grown, accepted)
		})
	}
}

// TestNegativeMaxBlockNeverWaits: MaxBlock < 0 is max.block.ms=0: with the
// pool full, Send fails at once with ErrBufferExhausted instead of waiting
// (without limit) for memory.
func TestNegativeMaxBlockNeverWaits(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	defer c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true})()
	p := newProducer(t, c, Config{BufferMemory: 64 << 10, BatchSize: 16 << 10, MaxBlock: -1, Linger: -1})
	done := make(chan error, 1)
	go func() {
		for {
			if _, ok, err := p.Send(context.Background(), &Record{Topic: "t", Value: make([]byte, 1000)}).Result(); ok {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrBufferExhausted)
	case <-time.After(20 * time.Second):
		t.Fatal("Send blocked with MaxBlock < 0 and the pool full")
	}
}
