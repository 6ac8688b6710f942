package producer

import (
	"sync/atomic"
	"time"
)

// clock gives Send a record timestamp in Unix milliseconds without reading
// the system clock per record: on virtual machines time.Now can cost as much
// as the rest of Send. While records flow, its goroutine refreshes the time
// every millisecond; after clockIdle without a reader it stops, and the next
// reader reads the system clock itself and starts it again. A timestamp is
// therefore at most about a millisecond old (more only while the machine is
// too busy to run the refresh on time), which Kafka's millisecond timestamps
// cannot tell apart.
type clock struct {
	ms   atomic.Int64 // 0 while the refresh is stopped
	used atomic.Bool  // a reader came since the last refresh
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

const clockIdle = 100 * time.Millisecond

func newClock() *clock {
	return &clock{wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// nowMillis returns the current time in Unix milliseconds.
func (c *clock) nowMillis() int64 {
	if !c.used.Load() {
		c.used.Store(true) // mostly a read: one write per refresh at most
	}
	if ms := c.ms.Load(); ms != 0 {
		return ms
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return time.Now().UnixMilli()
}

// run is the refresh goroutine; stop ends it.
func (c *clock) run() {
	defer close(c.done)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.wake:
		case <-c.quit:
			return
		}
		c.ms.Store(time.Now().UnixMilli())
		idle := time.Now()
		tick.Reset(time.Millisecond)
	refresh:
		for {
			select {
			case <-c.quit:
				return
			case now := <-tick.C:
				if c.used.Swap(false) {
					idle = now
				} else if now.Sub(idle) > clockIdle {
					c.ms.Store(0)
					break refresh
				}
				c.ms.Store(time.Now().UnixMilli())
			}
		}
	}
}

func (c *clock) stop() {
	close(c.quit)
	<-c.done
}
