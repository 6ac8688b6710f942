package accumulator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
)

// TestFailParkedIfKeepsTheOthersInOrder: failing some parked records (those
// whose Send context ended) over several queue segments and parking chunks
// fails exactly them, in Send order, keeps the others in Send order for
// MoveParked, and gives all the memory back, bookkeeping included.
func TestFailParkedIfKeepsTheOthersInOrder(t *testing.T) {
	const n = 5*parkSegmentLen + 3
	cases := []struct {
		name string
		fail func(i int) bool
	}{
		{"every third", func(i int) bool { return i%3 == 1 }},
		{"the front", func(i int) bool { return i == 0 }},
		{"the first two segments", func(i int) bool { return i < 2*parkSegmentLen }},
		{"the last", func(i int) bool { return i == n-1 }},
		{"all", func(int) bool { return true }},
		{"none", func(int) bool { return false }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := bufferpool.New(bufferpool.Options{Size: 4 << 20, PooledSize: 1024})
			require.NoError(t, err)
			a := New[int, struct{}, struct{}](Config{BatchSize: 1024, MaxBatchSize: 1 << 20, Pool: pool, MaxBlock: time.Second,
				ChargeBookkeeping: true, KeepFailedCharge: true})
			topic := a.NewTopic("late")
			for i := range n {
				parked, err := topic.Park(context.Background(), int64(i), nil, []byte(fmt.Sprint(i)), nil, -1, i, true)
				require.NoError(t, err)
				require.True(t, parked)
			}
			require.Greater(t, len(topic.chunks), 1, "the records span several parking chunks")
			var failed, want []int
			for i := range n {
				if tc.fail(i) {
					failed = append(failed, i)
				} else {
					want = append(want, i)
				}
			}
			var got []int
			require.Equal(t, len(failed), topic.FailParkedIf(func(c *int) bool { return tc.fail(*c) }, func(c int) { got = append(got, c) }))
			require.Equal(t, failed, got)
			a.ReleaseFailed(len(failed))
			records, _ := topic.Parked()
			require.EqualValues(t, len(want), records)
			require.Equal(t, len(want) > 0, topic.parking.Load(), "parking only while records are left")

			ps := []*Partition[int, struct{}, struct{}]{a.NewPartition(topic, 0)}
			topic.SetPartitions(ps)
			require.True(t, topic.MoveParked(func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) { return ps[0], nil }, func(int, error) { t.Fatal("no record fails") }))
			var moved []int
			for _, b := range drain(ps[0]) {
				for i, r := range decode(t, b) {
					require.Equal(t, fmt.Sprint(*b.Records.At(i)), string(r.Value))
					moved = append(moved, *b.Records.At(i))
				}
				a.Free(b)
			}
			require.Equal(t, want, moved)
			require.LessOrEqual(t, topic.parked.nfree, keepFreeSegments)
			require.Equal(t, pool.Size(), pool.Available(), "parking chunks, bookkeeping and batches went back to the pool")
		})
	}
}

// TestFailParkedIfReleasesChunksOfFailedRecords: the parking chunks that
// hold only failed records go back to the pool at once, wherever they are
// in the queue, not when the front passes them; the chunks of kept
// records stay. Before, only the chunks before the new front were
// released: those of failed records behind a kept front stayed taken.
func TestFailParkedIfReleasesChunksOfFailedRecords(t *testing.T) {
	const n = 5*parkSegmentLen + 3
	value := make([]byte, 300) // a few records per 1 KiB chunk
	cases := []struct {
		name string
		fail func(i int) bool
	}{
		{"all but the front", func(i int) bool { return i > 0 }},
		{"all but the front and the last", func(i int) bool { return i > 0 && i < n-1 }},
		{"the middle", func(i int) bool { return i > n/4 && i < 3*n/4 }},
		{"every other", func(i int) bool { return i%2 == 1 }},
		{"all but the last", func(i int) bool { return i < n-1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := bufferpool.New(bufferpool.Options{Size: 8 << 20, PooledSize: 1024})
			require.NoError(t, err)
			a := New[int, struct{}, struct{}](Config{BatchSize: 1024, MaxBatchSize: 1 << 20, Pool: pool, MaxBlock: time.Second,
				ChargeBookkeeping: true, KeepFailedCharge: true})
			topic := a.NewTopic("late")
			for i := range n {
				parked, err := topic.Park(context.Background(), int64(i), nil, value, nil, -1, i, true)
				require.NoError(t, err)
				require.True(t, parked)
			}
			failed := topic.FailParkedIf(func(c *int) bool { return tc.fail(*c) }, func(int) {})
			a.ReleaseFailed(failed)

			kept := keptChunks(&topic.parked)
			inUse := 0
			for i, c := range topic.chunks {
				require.Equal(t, kept[int32(i)], c != nil, "chunk %d: taken exactly while a kept record is in it", i)
				inUse += cap(c)
			}
			require.EqualValues(t, inUse+topic.credit, pool.Size()-pool.Available(), "the pool holds the kept chunks and the bookkeeping, nothing more")
			// A Park after a released last chunk takes a new one.
			parked, err := topic.Park(context.Background(), n, nil, value, nil, -1, n, true)
			require.NoError(t, err)
			require.True(t, parked)

			ps := []*Partition[int, struct{}, struct{}]{a.NewPartition(topic, 0)}
			topic.SetPartitions(ps)
			require.True(t, topic.MoveParked(func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) { return ps[0], nil }, func(int, error) { t.Fatal("no record fails") }))
			moved := 0
			for _, b := range drain(ps[0]) {
				moved += b.Records.Len()
				a.Free(b)
			}
			require.Equal(t, n+1-failed, moved)
			require.Equal(t, pool.Size(), pool.Available(), "parking chunks, bookkeeping and batches went back to the pool")
		})
	}
}

// keptChunks returns the parking chunks the records of q are in.
func keptChunks[C any](q *parkQueue[C]) map[int32]bool {
	m := map[int32]bool{}
	s, i := q.head, q.first
	for left := q.n; left > 0; left-- {
		if i == parkSegmentLen {
			s, i = s.next, 0
		}
		m[s.recs[i].chunk] = true
		i++
	}
	return m
}
