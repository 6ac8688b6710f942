package producer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// sealDelays sends n single records through a producer with linger on a
// one-broker cluster, one at a time on an otherwise idle producer, and
// returns, for each, the time from Send to its Produce request reaching
// the broker (read and decoded on the broker's connection goroutine),
// less linger, sorted. A random pause of up to 3 ms before each Send puts
// it at a random phase of the runtime's timers.
func sealDelays(t *testing.T, linger time.Duration, n int) []time.Duration {
	t.Helper()
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("seal", 1))
	arrived := make(chan time.Time, 1)
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Match: func(int32, kmsg.Request) bool {
		arrived <- time.Now()
		return false // only watched
	}})
	defer remove()
	p := newProducer(t, c, Config{Linger: linger})
	ctx := context.Background()
	rec := &Record{Topic: "seal", Value: []byte("v")}
	_, err := p.Send(ctx, rec).Wait(ctx) // connections and metadata in place
	require.NoError(t, err)
	<-arrived
	rng := rand.New(rand.NewPCG(uint64(linger), 35))
	out := make([]time.Duration, 0, n)
	for range n {
		time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Millisecond))))
		start := time.Now()
		f := p.Send(ctx, rec)
		at := <-arrived
		_, err := f.Wait(ctx)
		require.NoError(t, err)
		out = append(out, at.Sub(start)-linger)
	}
	slices.Sort(out)
	return out
}

// A lingered batch goes out when its linger ends, not a millisecond
// later (issue 35: samsa's p95 at linger 1 ms was ~1 ms above kgo's and
// Java's). The IO goroutine's timer used to be set 0–250 µs past the
// deadline (a random jitter), and Go's netpoller sleeps in whole
// milliseconds (epoll_wait's timeout: a remainder under 1 ms sleeps a
// whole one), so a deadline pushed past a millisecond boundary fired
// about 1 ms late whenever nothing else woke the runtime: 34–46 % of
// single records waited linger + 0.9 ms or more (p80 1.46–1.49 ms, p90
// 1.57–1.61 ms beyond linger 1 ms and 5 ms, -race). With the exact
// deadline p80 is 0.34–0.53 ms. p80 is asserted, with five tries (a loaded machine delays a try's wake-ups): on
// this shared machine p95 and p99 move with the load (p99 2–7 ms either
// way); the log has them.
func TestLingeredBatchSentWhenItsLingerEnds(t *testing.T) {
	const bound = 900 * time.Microsecond
	for _, linger := range []time.Duration{time.Millisecond, 5 * time.Millisecond} {
		t.Run(fmt.Sprint(linger), func(t *testing.T) {
			var tries []string
			for range 5 {
				d := sealDelays(t, linger, 400)
				q := func(x float64) time.Duration { return d[int(x*float64(len(d)-1))] }
				tries = append(tries, fmt.Sprintf("p50 %v p80 %v p90 %v p95 %v p99 %v beyond linger", q(.5), q(.8), q(.9), q(.95), q(.99)))
				t.Logf("linger %v: %s", linger, tries[len(tries)-1])
				if q(.8) <= bound {
					return
				}
			}
			t.Errorf("linger %v: the Produce request reached the broker later than linger + %v for more than 20%% of single records in each of 5 tries: %v",
				linger, bound, tries)
		})
	}
}
