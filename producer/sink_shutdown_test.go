package producer

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/accumulator"
	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
)

// TestFailBufferedKeepsOutcomeUnknown: a batch waiting for its retry when
// Close gives up fails with ErrClosed, and with ErrOutcomeUnknown when an
// earlier attempt may have been written (timed out, or its connection
// broke); an error without it says the record was not written.
func TestFailBufferedKeepsOutcomeUnknown(t *testing.T) {
	for _, ambiguous := range []bool{false, true} {
		pool, err := bufferpool.New(bufferpool.Options{Size: 1 << 20})
		require.NoError(t, err)
		p := &Producer{cfg: Config{DisableIdempotence: true}}
		p.completer = newCompleter(p)
		p.acc = accumulator.New[completion, *ioPart, sendState](accumulator.Config{BatchSize: 16384, MaxBatchSize: 1 << 20, Pool: pool})
		ts := &topicState{acc: p.acc.NewTopic("t")}
		p.topics.Store("t", ts)
		ap := p.acc.NewPartition(ts.acc, 0)
		ts.acc.SetPartitions([]*accPartition{ap})
		ip := &ioPart{topic: &ioTopic{name: "t", ts: ts}, acc: ap, leader: 1, readyOn: -1, lastAcked: -1}
		ap.IO = ip
		b := &batch{}
		b.Partition = ap
		b.IO.attempts = 1
		b.IO.ambiguous = ambiguous
		ip.retry = []*batch{b}

		newSink(p, conn.Config{}).failBuffered()

		require.Len(t, p.completer.queue, 1, "one outcome for the batch")
		o := p.completer.queue[0]
		require.ErrorIs(t, o.err, ErrClosed)
		require.Equal(t, ambiguous, errors.Is(o.err, ErrOutcomeUnknown), "ambiguous %v: %v", ambiguous, o.err)
		require.Empty(t, ip.retry)
	}
}

// goexitHook calls runtime.Goexit (as t.FailNow does) on the IO goroutine
// when a topic starts parking: user code that unwinds the goroutine past
// every recover.
type goexitHook struct{ fired atomic.Bool }

func (h *goexitHook) OnTopicParked(string) {
	if h.fired.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
}

// TestIOGoroutineUnwindingWithoutCloseFailsBuffered: when the IO goroutine
// stops without Close (Goexit or a panic in user code on it), its shutdown
// has no Close context: it must not crash on that, it fails what is
// buffered with ErrClosed, Sends from then on fail with ErrClosed, and
// Close still returns.
func TestIOGoroutineUnwindingWithoutCloseFailsBuffered(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("gx", 1))
	h := &goexitHook{}
	p, err := New(Config{Brokers: c.Addrs(), Hooks: []Hook{h}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = p.Send(ctx, &Record{Topic: "gx", Value: []byte("parked")}).Wait(ctx)
	require.ErrorIs(t, err, ErrClosed)
	require.True(t, h.fired.Load())
	select {
	case <-p.ioDone:
	case <-ctx.Done():
		t.Fatal("the IO goroutine did not stop")
	}
	_, err = p.Send(ctx, &Record{Topic: "gx", Value: []byte("after")}).Wait(ctx)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, p.Flush(ctx), ErrClosed)
	require.NoError(t, p.Close(ctx))
}

// TestCloseErrorCountsFailedRecords: when Close's ctx ends first, its error
// says how many records it failed with ErrClosed (issue 22) and still
// wraps ctx's error; each of those records fails with ErrClosed, parked
// (no metadata) or batched (Produce stalled: in flight when the
// connection closes).
func TestCloseErrorCountsFailedRecords(t *testing.T) {
	cases := []struct {
		name    string
		stalled bool // a cluster whose Produce requests stall; else nothing listens
	}{
		{"parked", false},
		{"in flight", true},
	}
	const n = 25
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			brokers := []string{testutil.RefusedAddr(t)}
			if tc.stalled {
				c := newCluster(t, testbroker.Config{Brokers: 1})
				require.NoError(t, c.CreateTopic("t", 1))
				t.Cleanup(c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true}))
				brokers = c.Addrs()
			}
			p, err := New(Config{Brokers: brokers, Logger: slog.New(slog.DiscardHandler), Linger: time.Millisecond})
			require.NoError(t, err)
			fs := make([]*Future, n)
			for i := range fs {
				fs[i] = p.Send(context.Background(), &Record{Topic: "t", Value: []byte("x")})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err = p.Close(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Contains(t, err.Error(), "close: ctx ended with 25 records still buffered; they failed with ErrClosed")
			for i, f := range fs {
				_, ferr := f.Wait(context.Background())
				require.ErrorIs(t, ferr, ErrClosed, "record %d", i)
			}
		})
	}
}
