package producer

import (
	"context"
	"fmt"
	"runtime"
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
		_, err, done := f.Result()
		require.False(t, done, "record %d failed at once: %v", i, err)
		fs = append(fs, f)
	}
	used := p.Stats().BufferUsed
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
	p := newProducer(t, c, Config{BatchSize: 1 << 40, BufferMemory: 1 << 41, MaxRequestSize: 1 << 20})
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
