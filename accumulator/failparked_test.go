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
