package producer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestFlushReturnsUnderContinuousSends: Flush covers the records sent
// before it was called, not those sent while it waits. Senders keep sending
// until every Flush has returned (every Produce answer is delayed, so
// records are always outstanding and the producer is never idle, which a
// Flush waiting for an idle producer would wait for in vain); each
// Flush returns, and when it does every record whose Send returned before
// the call is complete. The senders stay below what the broker takes in
// batches of one record: while a Flush waits, every batch is sent at once,
// so a flood of Sends would outgrow the broker and Flush would wait for
// the backlog ahead of its records.
func TestFlushReturnsUnderContinuousSends(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 6))
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Delay: 2 * time.Millisecond})
	defer remove()
	p := newProducer(t, c, Config{Linger: time.Hour})

	var (
		mu   sync.Mutex
		sent []*Future // in Send order, appended once Send returned
	)
	stop := make(chan struct{})
	var senders sync.WaitGroup
	for range 2 {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")})
				mu.Lock()
				sent = append(sent, f)
				mu.Unlock()
				time.Sleep(time.Millisecond) // continuous, well within what the broker takes
			}
		}()
	}
	defer func() {
		close(stop)
		senders.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, p.Flush(ctx))
		mu.Lock()
		defer mu.Unlock()
		waitAll(t, sent)
	}()

	for round := range 5 {
		// Let records pile up, some sealed and in flight, some lingering.
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		before := len(sent)
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := p.Flush(ctx)
		cancel()
		require.NoError(t, err, "round %d: Flush must return while Sends go on", round)
		mu.Lock()
		covered := sent[:before]
		after := len(sent)
		mu.Unlock()
		for i, f := range covered {
			_, done, _ := f.result()
			require.True(t, done, "round %d: record %d was sent before Flush and is not complete", round, i)
		}
		assert.Greater(t, after, before, "round %d: the senders went on during Flush", round)
	}
}

// Concurrent Flushes each return once their own records are complete;
// the second waits for the first's epoch too (its records were sent before
// it as well).
func TestConcurrentFlushes(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 2))
	p := newProducer(t, c, Config{Linger: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var fs []*Future
	for range 100 {
		fs = append(fs, p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}))
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Flush(ctx)
			for j, f := range fs {
				if _, done, _ := f.result(); !done {
					errs[i] = assert.AnError
					t.Errorf("flush %d returned before record %d completed", i, j)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Zero(t, p.Metrics().Producer.BufferedRecords)
	require.NoError(t, p.Flush(ctx), "an idle producer flushes at once")
}
