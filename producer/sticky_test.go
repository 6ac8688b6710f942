package producer

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queues is a fake accumulator load: queue lengths per partition, -1 for a
// partition without a leader.
type queues []atomic.Int64

func newQueues(lengths ...int) queues {
	q := make(queues, len(lengths))
	for i, l := range lengths {
		q[i].Store(int64(l))
	}
	return q
}

func (q queues) load(p int32) int { return int(q[p].Load()) }

func stickyProduced(sp *stickyPartitioner) uint64 { return sp.state.Load() & 0xffffffff }

func TestStickySwitchesAfterBatchSizeBytes(t *testing.T) {
	const batch = 1000
	sp := newStickyPartitioner(batch, false)
	p := sp.partition(6, nil)
	require.True(t, p >= 0 && p < 6)

	// Below batch.size: every record stays on the sticky partition.
	for range 9 {
		sp.appended(p, 100, 6, nil)
		require.Equal(t, p, sp.partition(6, nil))
	}
	require.Equal(t, uint64(900), stickyProduced(sp))

	// Reaching batch.size picks a new sticky partition (possibly the same
	// one, as in Java) and starts counting again.
	sp.appended(p, 100, 6, nil)
	assert.Zero(t, stickyProduced(sp))
	assert.True(t, sp.partition(6, nil) < 6)
}

// A record larger than batch.size switches at once, and the count never
// overflows.
func TestStickyLargeRecordSwitchesAtOnce(t *testing.T) {
	sp := newStickyPartitioner(16384, false)
	p := sp.partition(3, nil)
	sp.appended(p, math.MaxInt/2, 3, nil)
	assert.Zero(t, stickyProduced(sp))
}

// Bytes that a racing Send appended to the previous sticky partition do not
// count toward the new one.
func TestStickyIgnoresStaleAppends(t *testing.T) {
	q := newQueues(0, 0)
	sp := newStickyPartitioner(100, false)
	p := sp.partition(2, q.load)
	sp.appended(1-p, 50, 2, q.load)
	assert.Zero(t, stickyProduced(sp))
	assert.Equal(t, p, sp.partition(2, q.load))
}

func TestStickyPartitionCountChanges(t *testing.T) {
	cases := []struct {
		name      string
		from, to  int32
		wantRange int32
	}{
		{"grows", 1, 8, 8},
		{"shrinks below sticky", 8, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := newStickyPartitioner(100, false)
			for sp.partition(tc.from, nil) != tc.from-1 { // make the sticky one the last
				sp.appended(sp.partition(tc.from, nil), 100, tc.from, nil)
			}
			p := sp.partition(tc.to, nil)
			assert.True(t, p >= 0 && p < tc.wantRange, "partition %d", p)
		})
	}
}

func TestStickyNoPartitions(t *testing.T) {
	sp := newStickyPartitioner(100, false)
	assert.Equal(t, UnknownPartition, sp.partition(0, nil))
	sp.appended(UnknownPartition, 10, 0, nil) // must not panic or count
	assert.Zero(t, stickyProduced(sp))
}

// Over many switches, every partition gets about the same number of bytes:
// the "uniform" of KIP-794.
func TestStickySpreadsUniformly(t *testing.T) {
	const n, batch, records = 8, 1000, 80000 // 8000 switches, ~1000 per partition
	sp := newStickyPartitioner(batch, false)
	var bytes [n]int
	for range records {
		p := sp.partition(n, nil)
		bytes[p] += 100
		sp.appended(p, 100, n, nil)
	}
	want := records * 100 / n
	for p, b := range bytes {
		// ±20% is more than 6 standard deviations of the switch counts.
		assert.InDelta(t, want, b, float64(want)/5, "partition %d got %d bytes", p, b)
	}
}

// With adaptive partitioning, a partition with a short queue is chosen more
// often, and a partition without a leader never.
func TestStickyPrefersLessLoadedPartitions(t *testing.T) {
	// Weights are max+1-queue: 10, 1, 0 (no leader), 1 -> partition 0 is
	// expected 10/12 of the time.
	q := newQueues(0, 9, -1, 9)
	sp := newStickyPartitioner(100, false)
	var picks [4]int
	const trials = 12000
	for range trials {
		p, ok := sp.next(4, q.load)
		require.True(t, ok)
		picks[p]++
	}
	assert.Zero(t, picks[2], "a partition without a leader was picked")
	assert.InDelta(t, trials*10/12, picks[0], trials*0.05)
	assert.InDelta(t, trials/12, picks[1], trials*0.03)
	assert.InDelta(t, trials/12, picks[3], trials*0.03)
}

// Equal queues mean a uniform choice among the partitions with a leader.
func TestStickyEqualLoadIsUniform(t *testing.T) {
	q := newQueues(3, 3, 3, -1)
	sp := newStickyPartitioner(100, false)
	var picks [4]int
	const trials = 9000
	for range trials {
		p, _ := sp.next(4, q.load)
		picks[p]++
	}
	assert.Zero(t, picks[3])
	for p := range 3 {
		assert.InDelta(t, trials/3, picks[p], trials*0.05, "partition %d", p)
	}
}

func TestStickyNoLeaderAnywhere(t *testing.T) {
	q := newQueues(-1, -1, -1)
	sp := newStickyPartitioner(100, false)
	p, ok := sp.next(3, q.load)
	assert.False(t, ok)
	assert.True(t, p >= 0 && p < 3)
	// partition still answers, so records can wait for a leader.
	p = sp.partition(3, q.load)
	assert.True(t, p >= 0 && p < 3)
}

// When the sticky partition loses its leader, the next record moves to a
// partition that has one instead of piling up behind the dead leader.
func TestStickyLeavesPartitionThatLostItsLeader(t *testing.T) {
	q := newQueues(0, 0, 0)
	sp := newStickyPartitioner(1<<20, false)
	p := sp.partition(3, q.load)
	q[p].Store(-1)
	next := sp.partition(3, q.load)
	assert.NotEqual(t, p, next)
	assert.GreaterOrEqual(t, q.load(next), 0)
	assert.Equal(t, next, sp.partition(3, q.load), "and sticks to the new one")
}

// Many goroutines share one topic's sticky partitioner, as concurrent Sends
// do. Run with -race: the state is one atomic word, so there is no data race
// and no lock; every record gets a valid partition and bytes spread out.
func TestStickyConcurrent(t *testing.T) {
	const n, batch, goroutines, per = 6, 2000, 8, 20000
	q := newQueues(make([]int, n)...)
	sp := newStickyPartitioner(batch, false)
	var bytes [n]atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range per {
				p := sp.partition(n, q.load)
				if p < 0 || p >= n {
					t.Errorf("partition %d out of range", p)
					return
				}
				size := 50 + i%100
				q[p].Add(1)
				bytes[p].Add(int64(size))
				sp.appended(p, size, n, q.load)
				q[p].Add(-1)
			}
		})
	}
	wg.Wait()
	var total int64
	for p := range bytes {
		total += bytes[p].Load()
	}
	for p := range bytes {
		// Every partition got a fair part (loose bound: the load feedback
		// and the interleaving make shares vary).
		assert.Greater(t, bytes[p].Load(), total/n/3, "partition %d", p)
	}
}

func TestStickyDoesNotAllocate(t *testing.T) {
	q := newQueues(1, 0, 2, -1, 5)
	load := q.load
	sp := newStickyPartitioner(300, false)
	allocs := testing.AllocsPerRun(1000, func() {
		p := sp.partition(5, load)
		sp.appended(p, 100, 5, load) // switches every third call
	})
	assert.Zero(t, allocs)
}

func BenchmarkSticky(b *testing.B) {
	for _, n := range []int32{6, 1000} {
		q := newQueues(make([]int, n)...)
		load := q.load
		b.Run(fmt.Sprintf("partitions=%d/serial", n), func(b *testing.B) {
			sp := newStickyPartitioner(16384, false)
			b.ReportAllocs()
			for b.Loop() {
				p := sp.partition(n, load)
				sp.appended(p, 100, n, load) // a switch every ~164 records
			}
		})
		b.Run(fmt.Sprintf("partitions=%d/parallel", n), func(b *testing.B) {
			sp := newStickyPartitioner(16384, false)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p := sp.partition(n, load)
					sp.appended(p, 100, n, load)
				}
			})
		})
		b.Run(fmt.Sprintf("partitions=%d/switch", n), func(b *testing.B) {
			sp := newStickyPartitioner(16384, false)
			b.ReportAllocs()
			for b.Loop() {
				sp.next(n, load)
			}
		})
	}
}

// With adaptive partitioning off (partitioner.adaptive.partitioning.enable
// =false) queues weigh nothing: the draw is uniform among the partitions
// with a leader, as Java's nextPartition without load stats.
func TestStickyUniformIgnoresQueues(t *testing.T) {
	q := newQueues(0, 9, -1, 9)
	sp := newStickyPartitioner(100, true)
	var picks [4]int
	const trials = 9000
	for range trials {
		p, ok := sp.next(4, q.load)
		require.True(t, ok)
		picks[p]++
	}
	assert.Zero(t, picks[2], "a partition without a leader was picked")
	for _, p := range []int{0, 1, 3} {
		assert.InDelta(t, trials/3, picks[p], trials*0.05, "partition %d", p)
	}
}

// A partition whose leader is not ready (-2: past
// partitioner.availability.timeout.ms) is left out while another is
// available; when none is, the draw is among the not-ready ones (with a
// leader), not the leaderless ones, and the sticky partition stays put.
func TestStickyLeavesOutUnreadyLeaders(t *testing.T) {
	q := newQueues(0, -2, 0, -2)
	sp := newStickyPartitioner(100, false)
	var picks [4]int
	for range 4000 {
		p, ok := sp.next(4, q.load)
		require.True(t, ok)
		picks[p]++
	}
	assert.Zero(t, picks[1])
	assert.Zero(t, picks[3])
	assert.InDelta(t, 2000, picks[0], 200)

	q = newQueues(-1, -2, -1, -2)
	picks = [4]int{}
	for range 4000 {
		p, ok := sp.next(4, q.load)
		require.False(t, ok)
		picks[p]++
	}
	assert.Zero(t, picks[0]+picks[2], "leaderless partitions drawn while some have a leader")
	assert.InDelta(t, 2000, picks[1], 200)

	// The sticky partition loses its place once its leader is not ready,
	// and sticks to its replacement.
	q = newQueues(0, 0, 0)
	sp = newStickyPartitioner(1<<20, false)
	p := sp.partition(3, q.load)
	q[p].Store(-2)
	next := sp.partition(3, q.load)
	assert.NotEqual(t, p, next)
	assert.Equal(t, next, sp.partition(3, q.load))
	// Every leader not ready: it stays where it is.
	for i := range q {
		q[i].Store(-2)
	}
	assert.Equal(t, next, sp.partition(3, q.load))
	assert.Equal(t, next, sp.partition(3, q.load))
}
