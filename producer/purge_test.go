package producer

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestPurgeFailsWhatIsNotWritten: Purge fails the parked records and those
// lingering in an open batch with ErrPurged, at once, lets the request in
// flight finish (its record is delivered), returns how many it failed, and
// leaves the producer usable. With and without idempotence.
func TestPurgeFailsWhatIsNotWritten(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"idempotent", Config{}},
		{"not idempotent", Config{DisableIdempotence: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			require.NoError(t, c.CreateTopic("known", 1))
			var once sync.Once
			arrived := make(chan struct{})
			remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true,
				Match: func(int32, kmsg.Request) bool { once.Do(func() { close(arrived) }); return true }})
			cfg := tc.cfg
			cfg.Linger, cfg.BatchSize, cfg.MaxBlock = time.Minute, 1024, time.Minute
			p := newProducer(t, c, cfg)
			big := bytes.Repeat([]byte("b"), 700)
			// The second record does not fit the first one's batch, which
			// is sealed and written at once; the second lingers.
			inflight := p.Send(context.Background(), &Record{Topic: "known", Value: append([]byte("1:"), big...)})
			lingering := p.Send(context.Background(), &Record{Topic: "known", Value: append([]byte("2:"), big...)})
			select {
			case <-arrived:
			case <-time.After(10 * time.Second):
				t.Fatal("the Produce request never arrived")
			}
			var parked []*Future
			for range 3 {
				parked = append(parked, p.Send(context.Background(), &Record{Topic: "later", Value: []byte("p")}))
			}
			type result struct {
				n   int
				err error
			}
			done := make(chan result, 1)
			go func() {
				n, err := p.Purge(context.Background())
				done <- result{n, err}
			}()
			for _, f := range append([]*Future{lingering}, parked...) {
				_, err := waitFuture(t, f, 10*time.Second) // before the request in flight is answered
				require.ErrorIs(t, err, ErrPurged)
				assert.NotErrorIs(t, err, ErrOutcomeUnknown)
			}
			select {
			case r := <-done:
				t.Fatalf("Purge returned %d, %v with a request in flight", r.n, r.err)
			case <-time.After(50 * time.Millisecond):
			}
			assert.False(t, isDone(inflight), "the written record waits for its answer")
			remove()
			r := <-done
			require.NoError(t, r.err)
			assert.Equal(t, 4, r.n)
			_, err := waitFuture(t, inflight, time.Second) // Purge waited for it
			require.NoError(t, err)

			// Usable afterwards, the purged topic's metadata included.
			require.NoError(t, c.CreateTopic("later", 1))
			again := []*Future{
				p.Send(context.Background(), &Record{Topic: "known", Value: []byte("3")}),
				p.Send(context.Background(), &Record{Topic: "later", Value: []byte("q")}),
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, p.Flush(ctx))
			waitAll(t, again)
			got := partitionValues(t, c, "known", 0)
			require.Len(t, got, 2)
			assert.Equal(t, "1:", got[0][:2])
			assert.Equal(t, "3", got[1])
			assert.Equal(t, []string{"q"}, partitionValues(t, c, "later", 0))
			assert.Zero(t, p.Metrics().Producer.BufferedRecords)
		})
	}
}

// TestPurgeInTransaction: purged records make the transaction abortable:
// the commit is refused, AbortTransaction ends it, and the next transaction
// commits; read_committed sees only its records.
func TestPurgeInTransaction(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("tx", 1))
	p := newProducer(t, c, Config{TransactionalID: "purge-tx", Linger: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.BeginTransaction())
	var fs []*Future
	for range 5 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "tx", Value: []byte("purged")}))
	}
	n, err := p.Purge(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	for _, f := range fs {
		_, err := waitFuture(t, f, time.Second)
		require.ErrorIs(t, err, ErrPurged)
	}
	err = p.CommitTransaction(ctx)
	require.Error(t, err)
	assert.True(t, IsAbortable(err), "%v", err)
	assert.ErrorIs(t, err, ErrPurged)
	require.NoError(t, p.AbortTransaction(ctx))

	require.NoError(t, p.BeginTransaction())
	f := p.Send(context.Background(), &Record{Topic: "tx", Value: []byte("committed")})
	require.NoError(t, p.CommitTransaction(ctx))
	_, err = waitFuture(t, f, time.Second)
	require.NoError(t, err)
	assert.Equal(t, map[int32][]string{0: {"committed"}}, committedValues(t, c, "tx", 1))
}

// TestPurgeClosedAndFromCallback: Purge after Close returns ErrClosed;
// from a callback it would wait for itself and returns ErrFlushInCallback.
func TestPurgeClosedAndFromCallback(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{})
	got := make(chan error, 1)
	p.SendCallback(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(RecordMetadata, error) {
		_, err := p.Purge(context.Background())
		got <- err
	})
	select {
	case err := <-got:
		require.ErrorIs(t, err, ErrFlushInCallback)
	case <-time.After(10 * time.Second):
		t.Fatal("no callback")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := p.Purge(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, p.Close(ctx))
	n, err = p.Purge(ctx)
	require.ErrorIs(t, err, ErrClosed)
	assert.Zero(t, n)
}
