package producer

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/testbroker"
)

var chaosFull = flag.Bool("chaos.full", false, "run the idempotence chaos test at full size (1 000 000 records)")

// TestIdempotentChaos is issue 5's proof: 8 goroutines send records to 12
// partitions on 3 brokers while connections drop, brokers restart, leaders
// move, and brokers answer NOT_LEADER, REQUEST_TIMED_OUT after appending,
// or throttle. Afterwards every future has completed; every acknowledged
// record is stored exactly once; each goroutine's records are stored in Send
// order within each partition; and no record that failed without
// ErrOutcomeUnknown was stored.
func TestIdempotentChaos(t *testing.T) {
	total := 96_000
	if *chaosFull {
		total = 1_000_000
	}
	if testing.Short() {
		total = 24_000
	}
	const goroutines, partitions = 8, 12
	perG := total / goroutines

	c := newCluster(t, testbroker.Config{Brokers: 3})
	require.NoError(t, c.CreateTopic("chaos", partitions))
	p := newProducer(t, c, Config{
		DeliveryTimeout: 60 * time.Second,
		RequestTimeout:  3 * time.Second,
		Linger:          2 * time.Millisecond,
		// Compression helpers work on the batches while faults strike.
		Compression:            compression.LZ4,
		CompressionConcurrency: 3,
	})

	// Faults that stay on while records flow.
	removers := []func(){
		c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.01, Drop: true}),
		c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.01, After: true, Drop: true}),
		c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.02, ErrorCode: 6}),
		c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.02, After: true, ErrorCode: 7}),
		c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.01, Throttle: 20 * time.Millisecond}),
	}
	removeFaults := func() {
		for _, r := range removers {
			r()
		}
	}
	defer removeFaults()

	// Faults that happen now and then: restarts and leader moves.
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(50+rng.IntN(100)) * time.Millisecond):
			}
			switch rng.IntN(3) {
			case 0:
				id := int32(rng.IntN(3))
				if c.StopBroker(id) == nil {
					time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
					require.NoError(t, c.RestartBroker(id))
				}
			default:
				// MoveLeader fails harmlessly if the target is stopped.
				_ = c.MoveLeader("chaos", int32(rng.IntN(partitions)), int32(rng.IntN(3)))
			}
		}
	})

	type sent struct {
		f *Future
	}
	futures := make([][]*Future, goroutines)
	var senders sync.WaitGroup
	for g := range goroutines {
		senders.Go(func() {
			fs := make([]*Future, perG)
			for i := range fs {
				v := make([]byte, 16)
				binary.BigEndian.PutUint64(v, uint64(g))
				binary.BigEndian.PutUint64(v[8:], uint64(i))
				key := []byte{byte(g), byte(i % 97)}
				fs[i] = p.Send(context.Background(), &Record{Topic: "chaos", Key: key, Value: v})
			}
			futures[g] = fs
		})
	}
	senders.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, p.Flush(ctx), "every future must complete")
	close(stop)
	chaos.Wait()
	removeFaults()

	// What the futures say.
	type outcome struct {
		ok, unknown bool
	}
	outcomes := make([][]outcome, goroutines)
	var okCount, unknownCount, failedCount int
	for g, fs := range futures {
		outcomes[g] = make([]outcome, len(fs))
		for i, f := range fs {
			_, done, err := f.Result()
			require.True(t, done)
			switch {
			case err == nil:
				outcomes[g][i].ok = true
				okCount++
			case errors.Is(err, ErrOutcomeUnknown):
				outcomes[g][i].unknown = true
				unknownCount++
			default:
				failedCount++
				t.Logf("goroutine %d record %d failed: %v", g, i, err)
			}
		}
	}

	// What the broker stored.
	stored := make([][]int, goroutines)
	for g := range stored {
		stored[g] = make([]int, perG)
	}
	for part := range int32(partitions) {
		recs, err := c.Records("chaos", part)
		require.NoError(t, err)
		last := make([]int, goroutines)
		for g := range last {
			last[g] = -1
		}
		for _, r := range recs {
			g := int(binary.BigEndian.Uint64(r.Value))
			i := int(binary.BigEndian.Uint64(r.Value[8:]))
			stored[g][i]++
			require.Greater(t, i, last[g], "partition %d: goroutine %d's record %d stored after its record %d", part, g, i, last[g])
			last[g] = i
		}
	}
	for g := range goroutines {
		for i, o := range outcomes[g] {
			n := stored[g][i]
			switch {
			case o.ok:
				require.Equal(t, 1, n, "acknowledged record %d/%d stored %d times", g, i, n)
			case o.unknown:
				require.LessOrEqual(t, n, 1, "record %d/%d with an unknown outcome stored %d times", g, i, n)
			default:
				require.Equal(t, 0, n, "record %d/%d reported as not written was stored", g, i)
			}
		}
	}
	t.Logf("%d records: %d acknowledged, %d with an unknown outcome, %d failed; stats %+v",
		total, okCount, unknownCount, failedCount, p.Metrics().Producer)
}
