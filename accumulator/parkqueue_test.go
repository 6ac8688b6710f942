package accumulator

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestParkQueueKeepsOrderAcrossSegments: the parking queue is FIFO across
// its segment boundaries, whatever the interleaving of pushes and pops,
// and what it pops is zeroed (a kept segment pins no completion).
func TestParkQueueKeepsOrderAcrossSegments(t *testing.T) {
	cases := []struct {
		name       string
		push, pop  int // first push push records, then pop pop of them
		push2      int // then push push2 more, and pop everything
		wantFreeAt int // emptied segments kept once the queue is empty
	}{
		{name: "empty", wantFreeAt: 0},
		{name: "one", push: 1, pop: 1, wantFreeAt: 1},
		{name: "one segment", push: parkSegmentLen, pop: parkSegmentLen, wantFreeAt: 1},
		{name: "just over a segment", push: parkSegmentLen + 1, pop: 1, push2: 1, wantFreeAt: 2},
		{name: "pop to a boundary", push: 3 * parkSegmentLen, pop: 2 * parkSegmentLen, push2: parkSegmentLen + 7, wantFreeAt: 3},
		{name: "more than are kept", push: (keepFreeSegments + 2) * parkSegmentLen, pop: 1, wantFreeAt: keepFreeSegments},
		{name: "pop inside a segment", push: 2*parkSegmentLen + 5, pop: parkSegmentLen + 3, push2: 2 * parkSegmentLen, wantFreeAt: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var q parkQueue[*int]
			vals := make([]int, tc.push+tc.push2)
			next, want := 0, 0
			push := func(k int) {
				for range k {
					q.push(parkedRecord[*int]{off: int32(next), c: &vals[next]})
					next++
				}
			}
			pop := func(k int) {
				for range k {
					r := q.front()
					require.NotNil(t, r)
					require.Equal(t, int32(want), r.off)
					require.Same(t, &vals[want], r.c)
					q.pop()
					want++
				}
			}
			push(tc.push)
			pop(tc.pop)
			require.Equal(t, tc.push-tc.pop, q.n)
			push(tc.push2)
			pop(q.n)
			require.Nil(t, q.front())
			require.Zero(t, q.n)
			require.Nil(t, q.head)
			require.Nil(t, q.tail)
			require.Equal(t, tc.wantFreeAt, q.nfree)
			n := 0
			for s := q.free; s != nil; s = s.next {
				for _, r := range s.recs {
					require.Zero(t, r, "a kept segment is zeroed")
				}
				n++
			}
			require.Equal(t, q.nfree, n)
		})
	}
}

// TestParkQueueReusesSegments: a queue that has emptied its segments parks
// as many records again without allocating.
func TestParkQueueReusesSegments(t *testing.T) {
	var q parkQueue[int]
	fill := func() {
		for i := range 3*parkSegmentLen + 1 {
			q.push(parkedRecord[int]{c: i})
		}
		for q.front() != nil {
			q.pop()
		}
	}
	fill()
	require.Equal(t, 4, q.nfree)
	require.Zero(t, testing.AllocsPerRun(20, fill))
}

// TestParkedRecordsKeepSendOrderAcrossSegments: records parked over several
// queue segments and parking chunks come out in Send order whether they
// expire or move, and the topic's memory all goes back to the pool.
func TestParkedRecordsKeepSendOrderAcrossSegments(t *testing.T) {
	a, pool := newAcc(t, 4<<20, 1024, time.Second)
	topic := a.NewTopic("late")
	const n = 5*parkSegmentLen + 3
	for i := range n {
		parked, err := topic.Park(context.Background(), int64(i), nil, []byte(fmt.Sprint(i)), nil, -1, i, true)
		require.NoError(t, err)
		require.True(t, parked)
	}
	require.Greater(t, len(topic.chunks), 1, "the records span several parking chunks")
	records, _ := topic.Parked()
	require.EqualValues(t, n, records)

	// The oldest ones expire (as after MaxBlock), past a segment boundary.
	cut := topic.timeOf(topic.parked.head.next.recs[3].at)
	var expired []int
	topic.ExpireParked(cut, func(c int, _ time.Time) { expired = append(expired, c) })
	require.GreaterOrEqual(t, len(expired), parkSegmentLen+4)
	for i, c := range expired {
		require.Equal(t, i, c)
	}

	ps := []*Partition[int, struct{}, struct{}]{a.NewPartition(topic, 0)}
	topic.SetPartitions(ps)
	require.True(t, topic.MoveParked(func(ParkedRecord) (*Partition[int, struct{}, struct{}], error) { return ps[0], nil }, func(int, error) { t.Fatal("no record fails") }))
	require.Equal(t, n, drainInOrder(t, a, ps[0], len(expired)))
	require.LessOrEqual(t, topic.parked.nfree, keepFreeSegments, "a topic keeps a few emptied segments")
	require.Equal(t, pool.Size(), pool.Available(), "parking chunks and batches went back to the pool")
}

// TestParkedTimeIsWhenParked: a parked record's time, kept as nanoseconds
// since the topic's creation, reads back between the clock before and after
// Park, and ExpireParked fails it at that deadline, not a nanosecond before.
func TestParkedTimeIsWhenParked(t *testing.T) {
	a, pool := newAcc(t, 1<<20, 1024, time.Second)
	topic := a.NewTopic("t")
	before := time.Now()
	_, err := topic.Park(context.Background(), 0, nil, []byte("v"), nil, 0, 7, true)
	require.NoError(t, err)
	after := time.Now()
	at := topic.OldestParked()
	require.False(t, at.Before(before), "parked at %v, before %v", at, before)
	require.False(t, at.After(after), "parked at %v, after %v", at, after)

	var failed []int
	require.Equal(t, at, topic.ExpireParked(at.Add(-time.Nanosecond), func(c int, _ time.Time) { failed = append(failed, c) }))
	require.Empty(t, failed)
	require.True(t, topic.ExpireParked(at, func(c int, parkedAt time.Time) {
		require.Equal(t, at, parkedAt)
		failed = append(failed, c)
	}).IsZero())
	require.Equal(t, []int{7}, failed)
	require.Equal(t, pool.Size(), pool.Available())
}

// TestParkWaitsForTheTopicLock: Park takes the topic's lock once it is
// released, whether the holder lets go at once or long after, with one P
// or several, and parks the record.
func TestParkWaitsForTheTopicLock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		procs int
		hold  time.Duration
	}{
		{"free", 2, 0},
		{"briefly", 2, 5 * time.Microsecond},
		{"long", 2, 20 * time.Millisecond},
		{"one P, long", 1, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
			a, _ := newAcc(t, 1<<20, 1024, time.Second)
			topic := a.NewTopic("late")
			topic.mu.Lock()
			held := time.Now()
			done := make(chan time.Time, 1)
			go func() {
				parked, err := topic.Park(context.Background(), 1, nil, []byte("v"), nil, -1, 7, true)
				if !parked || err != nil {
					t.Errorf("Park: parked %v, err %v", parked, err)
				}
				done <- time.Now()
			}()
			time.Sleep(tc.hold)
			released := time.Now()
			topic.mu.Unlock()
			at := <-done
			require.False(t, at.Before(released), "Park took the lock %v after it was held, before its release", at.Sub(held))
			records, _ := topic.Parked()
			require.EqualValues(t, 1, records)
			topic.FailParked(func(c int) { require.Equal(t, 7, c) })
		})
	}
}
