package producer

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestDefaultTimestampNotBeforeSend: a record without a Timestamp is
// stamped with the time of its Send, as Java stamps it inside send(): never
// earlier (in milliseconds) than a time.Now the caller read just before
// Send, nor later than one read just after it returned. The coarse clock
// refreshed every millisecond by a goroutine stamped 63–84% of records on
// real Kafka 1 ms or more before Send, up to 14 ms on a loaded machine
// (issue 23 item 9).
func TestDefaultTimestampNotBeforeSend(t *testing.T) {
	const records = 3000
	cases := []struct {
		name    string
		parked  bool // the topic is created after the Sends: they park
		senders int  // goroutines sending at once
	}{{"known topic", false, 1}, {"parked", true, 1}, {"4 goroutines", false, 4}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			if !tc.parked {
				require.NoError(t, c.CreateTopic("ts", 1))
			}
			p := newProducer(t, c, Config{})
			var before, after [records]int64
			fs := make([]*Future, records)
			var wg sync.WaitGroup
			for g := range tc.senders {
				wg.Go(func() {
					for i := g; i < records; i += tc.senders {
						if i%16 == 0 {
							time.Sleep(50 * time.Microsecond) // cross many millisecond boundaries
						}
						before[i] = time.Now().UnixMilli()
						fs[i] = p.Send(context.Background(), &Record{Topic: "ts", Value: []byte(strconv.Itoa(i))})
						after[i] = time.Now().UnixMilli()
					}
				})
			}
			wg.Wait()
			if tc.parked {
				require.NoError(t, c.CreateTopic("ts", 1))
			}
			waitAll(t, fs)
			stored, err := c.Records("ts", 0)
			require.NoError(t, err)
			require.Len(t, stored, records)
			early, late, worst := 0, 0, int64(0)
			for _, r := range stored {
				i, err := strconv.Atoi(string(r.Value))
				require.NoError(t, err)
				if d := before[i] - r.Timestamp; d > 0 {
					early++
					worst = max(worst, d)
				}
				if r.Timestamp > after[i] {
					late++
				}
			}
			require.Zero(t, early, fmt.Sprintf("%d of %d records stamped before their Send, up to %d ms", early, records, worst))
			require.Zero(t, late, "%d of %d records stamped after their Send returned", late, records)
		})
	}
}

// BenchmarkClock is the cost of a record's default timestamp: the clock
// against time.Now, which it replaces, one and two goroutines.
func BenchmarkClock(b *testing.B) {
	c := newClock()
	reads := []struct {
		name string
		read func() int64
	}{{"clock", c.nowMillis}, {"time.Now", func() int64 { return time.Now().UnixMilli() }}}
	for _, r := range reads {
		b.Run(r.name, func(b *testing.B) {
			var sum int64
			for b.Loop() {
				sum += r.read()
			}
			_ = sum
		})
		b.Run(r.name+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				var sum int64
				for pb.Next() {
					sum += r.read()
				}
				_ = sum
			})
		})
	}
}
