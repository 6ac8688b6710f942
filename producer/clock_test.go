package producer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClockIsCloseToTheSystemClock: record timestamps from the coarse clock
// stay within a few milliseconds of time.Now, while it refreshes and after
// it went idle.
func TestClockIsCloseToTheSystemClock(t *testing.T) {
	c := newClock()
	go c.run()
	defer c.stop()
	check := func() {
		before := time.Now().UnixMilli()
		got := c.nowMillis()
		after := time.Now().UnixMilli()
		require.GreaterOrEqual(t, got, before-50, "timestamp too old") // generous under -race on a busy machine
		require.LessOrEqual(t, got, after)
	}
	for range 200 {
		check()
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(3 * clockIdle) // the refresh stops
	require.Eventually(t, func() bool { return c.ms.Load() == 0 }, time.Second, time.Millisecond)
	check() // reads the system clock and starts the refresh again
	require.Eventually(t, func() bool { return c.ms.Load() != 0 }, time.Second, time.Millisecond)
	check()
}

func BenchmarkClock(b *testing.B) {
	c := newClock()
	go c.run()
	defer c.stop()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.nowMillis()
		}
	})
}
