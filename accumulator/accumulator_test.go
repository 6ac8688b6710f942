package accumulator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/recordbatch"
)

func newAcc(t testing.TB, poolSize int64, batchSize int, maxBlock time.Duration) (*Accumulator[int, struct{}, struct{}], *bufferpool.SimplePool) {
	t.Helper()
	pool, err := bufferpool.New(bufferpool.Options{Size: poolSize, PooledSize: batchSize})
	require.NoError(t, err)
	return New[int, struct{}, struct{}](Config{BatchSize: batchSize, MaxBatchSize: 1 << 20, Pool: pool, MaxBlock: maxBlock}), pool
}

func known(a *Accumulator[int, struct{}, struct{}], name string, n int) (*Topic[int, struct{}, struct{}], []*Partition[int, struct{}, struct{}]) {
	t := a.NewTopic(name)
	ps := make([]*Partition[int, struct{}, struct{}], n)
	for i := range ps {
		ps[i] = a.NewPartition(t, int32(i))
	}
	t.SetPartitions(ps)
	return t, ps
}

// drain seals and collects every batch of p, oldest first.
func drain(p *Partition[int, struct{}, struct{}]) []*Batch[int, struct{}, struct{}] {
	p.sealOpen()
	var out []*Batch[int, struct{}, struct{}]
	for b := p.NextSealed(); b != nil; b = p.NextSealed() {
		out = append(out, b)
	}
	return out
}

// drainInOrder drains p, checks that its records are next, next+1, … (the
// value fmt.Sprint(i) with completion i), frees the batches and returns the
// number after the last record.
func drainInOrder(t *testing.T, a *Accumulator[int, struct{}, struct{}], p *Partition[int, struct{}, struct{}], next int) int {
	t.Helper()
	for _, b := range drain(p) {
		for i, r := range decode(t, b) {
			require.Equal(t, fmt.Sprint(next), string(r.Value))
			require.Equal(t, next, *b.Records.At(i))
			next++
		}
		a.Free(b)
	}
	return next
}

func decode(t *testing.T, b *Batch[int, struct{}, struct{}]) []recordbatch.Record {
	t.Helper()
	raw, _, err := b.Builder.Finish(nil, nil)
	require.NoError(t, err)
	recordbatch.Stamp(raw, -1, -1, -1)
	dec, err := recordbatch.Decode(raw, 1<<20)
	require.NoError(t, err)
	return dec.Records
}

func TestAppendSealsFullBatchesAndAnnouncesThem(t *testing.T) {
	a, pool := newAcc(t, 1<<20, 1024, time.Second)
	_, ps := known(a, "t", 1)
	value := make([]byte, 100)
	for i := range 30 {
		require.NoError(t, ps[0].Append(context.Background(), int64(i), nil, value, nil, i, true))
	}
	evs := a.Events(nil)
	var opened, sealed int
	for _, e := range evs {
		switch e.Kind {
		case Opened:
			opened++
		case Sealed:
			sealed++
		}
	}
	require.Equal(t, 4, opened, "30 records of ~110 bytes fill 9 per 1 KiB batch")
	require.Equal(t, 1, sealed, "one Sealed event until the IO goroutine takes the batches")
	batches := drain(ps[0])
	require.Len(t, batches, 4)
	next := 0
	for _, b := range batches {
		for i, r := range decode(t, b) {
			require.Equal(t, next, *b.Records.At(i), "completions follow records")
			require.Equal(t, int64(next), r.Timestamp)
			next++
		}
		a.Free(b)
	}
	require.Equal(t, 30, next)
	require.Equal(t, pool.Size(), pool.Available(), "every batch buffer went back to the pool")
}

// TestParkedRecordsMoveInSendOrder: records parked before the topic's
// partitions are known move into batches in Send order, and Sends racing
// with the move never overtake a parked record.
func TestParkedRecordsMoveInSendOrder(t *testing.T) {
	a, pool := newAcc(t, 4<<20, 1024, time.Second)
	topic := a.NewTopic("late")
	for i := range 500 {
		parked, err := topic.Park(context.Background(), int64(i), nil, []byte(fmt.Sprint(i)), nil, 0, i, true)
		require.NoError(t, err)
		require.True(t, parked)
	}
	require.Nil(t, topic.Partitions(), "a parking topic hides its partitions from Send")
	ps := []*Partition[int, struct{}, struct{}]{a.NewPartition(topic, 0)}
	topic.SetPartitions(ps)
	require.Nil(t, topic.Partitions(), "still parking until the records moved")

	// Concurrent Sends park behind the earlier records until the move.
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 500; i < 1000; i++ {
			if parts := topic.Partitions(); parts != nil {
				require.NoError(t, parts[0].Append(context.Background(), int64(i), nil, []byte(fmt.Sprint(i)), nil, i, true))
				continue
			}
			parked, err := topic.Park(context.Background(), int64(i), nil, []byte(fmt.Sprint(i)), nil, 0, i, true)
			require.NoError(t, err)
			if !parked {
				require.NoError(t, topic.Partitions()[0].Append(context.Background(), int64(i), nil, []byte(fmt.Sprint(i)), nil, i, true))
			}
		}
	})
	for {
		done := topic.MoveParked(func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) { return ps[0], nil }, func(int, error) { t.Fatal("no record fails") })
		require.True(t, done)
		if !topic.parking.Load() {
			break
		}
	}
	wg.Wait()
	topic.MoveParked(func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) { return ps[0], nil }, nil)
	require.Equal(t, 1000, drainInOrder(t, a, ps[0], 0))
	require.Equal(t, pool.Size(), pool.Available(), "parking chunks and batches went back to the pool")
}

func TestMoveParkedStopsWhenThePoolIsEmpty(t *testing.T) {
	a, pool := newAcc(t, 4096, 1024, time.Second)
	topic := a.NewTopic("t")
	for i := range 20 {
		_, err := topic.Park(context.Background(), 0, nil, make([]byte, 100), nil, 0, i, true)
		require.NoError(t, err)
	}
	ps := []*Partition[int, struct{}, struct{}]{a.NewPartition(topic, 0)}
	topic.SetPartitions(ps)
	hog := pool.TryAllocate(int(pool.Available()))
	require.NotNil(t, hog)
	// With the pool full of parked records, one batch may live outside the
	// pool; then moving waits for it to be freed.
	require.False(t, topic.MoveParked(func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) { return ps[0], nil }, nil))
	got := 0
	for {
		batches := drain(ps[0])
		for _, b := range batches {
			got += b.NumRecords()
			a.Free(b)
		}
		if topic.MoveParked(func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) { return ps[0], nil }, nil) {
			break
		}
		require.NotEmpty(t, batches, "moving parked records made no progress")
	}
	for _, b := range drain(ps[0]) {
		got += b.NumRecords()
		a.Free(b)
	}
	pool.Release(hog)
	require.Equal(t, 20, got)
	require.Equal(t, pool.Size(), pool.Available())
}

func TestExpireParkedFailsOldRecords(t *testing.T) {
	a, pool := newAcc(t, 1<<20, 1024, time.Second)
	topic := a.NewTopic("t")
	for i := range 10 {
		_, err := topic.Park(context.Background(), 0, nil, []byte("v"), nil, 0, i, true)
		require.NoError(t, err)
	}
	cut := time.Now()
	time.Sleep(2 * time.Millisecond)
	for i := 10; i < 15; i++ {
		_, err := topic.Park(context.Background(), 0, nil, []byte("v"), nil, 0, i, true)
		require.NoError(t, err)
	}
	var failed []int
	oldest := topic.ExpireParked(cut, func(c int, _ time.Time) { failed = append(failed, c) })
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, failed)
	require.True(t, oldest.After(cut))
	topic.FailParked(func(c int) { failed = append(failed, c) })
	require.Len(t, failed, 15)
	require.Equal(t, pool.Size(), pool.Available())
}

func TestAppendWaitsForMemoryThenFails(t *testing.T) {
	a, _ := newAcc(t, 2048, 1024, 50*time.Millisecond)
	_, ps := known(a, "t", 3)
	value := make([]byte, 900)
	require.NoError(t, ps[0].Append(context.Background(), 0, nil, value, nil, 0, true))
	require.NoError(t, ps[1].Append(context.Background(), 0, nil, value, nil, 1, true))
	start := time.Now()
	err := ps[2].Append(context.Background(), 0, nil, value, nil, 2, true)
	require.ErrorIs(t, err, bufferpool.ErrBufferExhausted)
	require.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
	start = time.Now()
	err = ps[2].Append(context.Background(), 0, nil, value, nil, 2, false)
	require.ErrorIs(t, err, bufferpool.ErrBufferExhausted)
	require.Less(t, time.Since(start), 40*time.Millisecond, "a non-waiting append fails at once")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = ps[2].Append(ctx, 0, nil, value, nil, 2, true)
	require.True(t, errors.Is(err, context.Canceled) || errors.Is(err, bufferpool.ErrBufferExhausted), "got %v", err)
}

func TestCheckSize(t *testing.T) {
	a, _ := newAcc(t, 1<<20, 1024, time.Second)
	require.NoError(t, a.CheckSize(1000))
	var tooLarge *RecordTooLargeError
	require.ErrorAs(t, a.CheckSize(1<<20), &tooLarge)
	require.Equal(t, 1<<20, tooLarge.Max)
}

// BenchmarkAppend measures the Send-side append of a 100-byte record to a
// partition's open batch, batches recycled through the pool.
func BenchmarkAppend(b *testing.B) {
	a, _ := newAcc(b, 32<<20, 16384, time.Second)
	_, ps := known(a, "t", 1)
	value := make([]byte, 100)
	ctx := context.Background()
	var evs []Event[int, struct{}, struct{}]
	b.ReportAllocs()
	for b.Loop() {
		if err := ps[0].Append(ctx, 0, nil, value, nil, 0, true); err != nil {
			b.Fatal(err)
		}
		if ps[0].sealed.len() > 0 {
			for bt := ps[0].NextSealed(); bt != nil; bt = ps[0].NextSealed() {
				a.Free(bt)
			}
			evs = a.Events(evs)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// TestBatchesGrowUpToBatchSize: a batch starts at InitialBatchSize and
// doubles up to BatchSize as records come, with pool memory, and then
// seals; every record survives the moves, and all memory goes back.
func TestBatchesGrowUpToBatchSize(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Options{Size: 1 << 20, PooledSize: 1024})
	require.NoError(t, err)
	a := New[int, struct{}, struct{}](Config{BatchSize: 8192, InitialBatchSize: 1024, MaxBatchSize: 1 << 20, Pool: pool, MaxBlock: time.Second})
	_, ps := known(a, "t", 1)
	value := make([]byte, 100)
	for i := range 200 {
		require.NoError(t, ps[0].Append(context.Background(), int64(i), nil, value, nil, i, true))
	}
	batches := drain(ps[0])
	require.Len(t, batches, 3, "200 records of ~107 bytes in batches that grow to 8 KiB")
	next := 0
	for _, b := range batches {
		require.LessOrEqual(t, b.Builder.Cap(), 8192)
		for i, r := range decode(t, b) {
			require.Equal(t, next, *b.Records.At(i))
			require.Equal(t, int64(next), r.Timestamp)
			next++
		}
		a.Free(b)
	}
	require.Equal(t, 200, next)
	require.Equal(t, pool.Size(), pool.Available())
}

// TestNextBatchStartsFromRecentSizes: a partition's next batch starts as
// large as its recent batches got, and one small batch in between (a sticky
// partitioner moving on) only halves that.
func TestNextBatchStartsFromRecentSizes(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Options{Size: 1 << 20, PooledSize: 512, MaxPooledSize: 64 << 10})
	require.NoError(t, err)
	a := New[int, struct{}, struct{}](Config{BatchSize: 64 << 10, InitialBatchSize: 512, MaxBatchSize: 1 << 20, Pool: pool, MaxBlock: time.Second})
	_, ps := known(a, "t", 1)
	value := make([]byte, 100)
	fill := func(records int) int {
		for i := range records {
			require.NoError(t, ps[0].Append(context.Background(), int64(i), nil, value, nil, i, true))
		}
		ps[0].mu.Lock()
		start := ps[0].open.Builder.Cap()
		ps[0].mu.Unlock()
		for _, b := range drain(ps[0]) {
			a.Free(b)
		}
		return start
	}
	require.Equal(t, 512, fill(1), "a partition's first batch starts small")
	fill(400) // grows to 64 KiB
	require.Equal(t, 64<<10, fill(1), "the next batch starts as large as the last one got")
	require.Equal(t, 32<<10, fill(1), "after one small batch, half of that")
	require.Equal(t, 16<<10, fill(1))
	require.Equal(t, pool.Size(), pool.Available())
}

// TestFreeZeroesTheIOSlots: a reused batch struct starts with the zero B,
// whatever the IO goroutine left in it, and a partition keeps its P.
func TestFreeZeroesTheIOSlots(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Options{Size: 1 << 20, PooledSize: 1024})
	require.NoError(t, err)
	a := New[int, *string, []int](Config{BatchSize: 1024, MaxBatchSize: 1 << 20, Pool: pool})
	topic := a.NewTopic("t")
	p := a.NewPartition(topic, 0)
	state := "partition state"
	p.IO = &state
	b := a.NewDetachedBatch(p, 256)
	require.Nil(t, b.IO)
	b.IO = []int{1, 2, 3}
	a.Free(b)
	b2 := a.NewDetachedBatch(p, 256)
	require.Same(t, b, b2, "the batch struct is reused")
	require.Nil(t, b2.IO, "Free zeroes the batch's IO slot")
	require.Same(t, &state, b2.Partition.IO)
	a.Free(b2)
}

// Load tells the partitioner why to avoid a partition: -1 without a
// leader (whatever else), -2 with a leader that is not ready, else the
// queue length; clearing one reason leaves the other.
func TestLoadReportsLeaderlessAndUnready(t *testing.T) {
	a, _ := newAcc(t, 1<<20, 1024, time.Second)
	p := a.NewPartition(a.NewTopic("load"), 0)
	cases := []struct {
		leaderless, unready bool
		want                int
	}{
		{false, false, 0},
		{true, false, -1},
		{false, true, -2},
		{true, true, -1},
	}
	for _, tc := range cases {
		p.SetLeaderless(tc.leaderless)
		p.SetUnready(tc.unready)
		require.Equal(t, tc.want, p.Load(), "leaderless %v, unready %v", tc.leaderless, tc.unready)
	}
	p.SetLeaderless(true)
	p.SetUnready(true)
	p.SetLeaderless(false)
	require.Equal(t, -2, p.Load(), "clearing leaderless keeps unready")
	p.SetUnready(false)
	require.Equal(t, 0, p.Load())
}
