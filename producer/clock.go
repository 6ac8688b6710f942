package producer

import (
	"sync/atomic"
	"time"
)

// clock gives Send a record's default timestamp, the time of the call in
// Unix milliseconds, for one read of the monotonic clock instead of
// time.Now's two reads (the wall clock and the monotonic one: on the test
// VM a clock read costs about as much as a fifth of Send).
//
// It keeps the wall clock's current millisecond (ms) and the monotonic time
// up to which ms is still current (until: the next millisecond's start,
// less a margin); a Send whose monotonic reading is before until takes ms,
// and the first Send past it reads time.Now and publishes the next pair.
// So a timestamp is never earlier than a time.Now the caller read before
// Send, nor later than one read after it returned, as Java stamps a record
// inside send() (TestDefaultTimestampNotBeforeSend). There is no goroutine:
// the coarse clock this replaced was refreshed every millisecond by one,
// and stamped 63–84% of records 1 ms or more before their Send (up to 14
// ms on a loaded machine), whenever the refresh came late.
//
// The margin covers the wall clock running at another rate than the
// monotonic one (NTP slews by at most 500 ppm: 0.5 µs in a millisecond).
// Only a step of the wall clock (settimeofday) is not seen until the
// millisecond it was read in ends: Sends within that millisecond take the
// time from before the step.
type clock struct {
	base time.Time // the origin of the monotonic times below
	// seq is odd while a Send publishes ms and until, which readers take
	// only from an even, unchanged seq (a seqlock: the pair stays
	// consistent without a lock or an allocation).
	seq   atomic.Uint64
	ms    atomic.Int64
	until atomic.Int64 // monotonic nanoseconds since base; 0: none yet
}

// clockMargin is how long before a millisecond ends its value stops being
// used: Sends then read time.Now (1% of them while Sends come steadily).
const clockMargin = 10 * time.Microsecond

func newClock() *clock { return &clock{base: time.Now()} }

// nowMillis returns the current time in Unix milliseconds.
func (c *clock) nowMillis() int64 {
	mono := int64(time.Since(c.base)) // one monotonic read
	s := c.seq.Load()
	ms, until := c.ms.Load(), c.until.Load()
	if s&1 == 0 && mono < until && c.seq.Load() == s {
		return ms
	}
	now := time.Now()
	ms = now.UnixMilli()
	if s&1 == 0 && c.seq.CompareAndSwap(s, s+1) { // else another Send publishes
		next := time.UnixMilli(ms + 1)
		c.ms.Store(ms)
		c.until.Store(int64(now.Sub(c.base) + next.Sub(now) - clockMargin))
		c.seq.Store(s + 2)
	}
	return ms
}
