package producer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/testbroker"
)

// partitionValues returns the values of topic's partition as the broker
// stored them, in offset order, and checks that their idempotent sequences
// run without a gap from 0 (when the records have sequences).
func partitionValues(t *testing.T, c *testbroker.Cluster, topic string, partition int32) []string {
	t.Helper()
	recs, err := c.Records(topic, partition)
	require.NoError(t, err)
	var out []string
	for i, r := range recs {
		if r.Sequence >= 0 {
			require.Equal(t, int32(i), r.Sequence, "record at offset %d: the partition's sequences have a gap", r.Offset)
		}
		out = append(out, string(r.Value))
	}
	return out
}

// TestSendContextFailsRecordNotYetWritten: the ctx given to Send bounds the
// record until a request first carries it. A record whose ctx ends while it
// is parked, waits for memory or lingers in an open batch fails with the
// ctx's error, promptly, and is never written; the records around it are
// delivered in order. Before, ctx bounded only the wait for memory: the
// parked and lingering records were written anyway.
func TestSendContextFailsRecordNotYetWritten(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		// setup prepares the cluster; send sends the watched record with
		// ctx between the unwatched ones and returns them all; after runs
		// once the watched record failed.
		setup func(t *testing.T, c *testbroker.Cluster)
		send  func(t *testing.T, p *Producer, ctx context.Context) (before, watched, after *Future)
		after func(t *testing.T, c *testbroker.Cluster)
		cause error
	}{
		{
			name:  "parked for an unknown topic",
			cfg:   Config{MaxBlock: time.Minute, Linger: time.Millisecond},
			setup: func(t *testing.T, c *testbroker.Cluster) {},
			send: func(t *testing.T, p *Producer, ctx context.Context) (*Future, *Future, *Future) {
				return p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("a")}),
					p.Send(ctx, &Record{Topic: "ctx", Value: []byte("b")}),
					p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("c")})
			},
			after: func(t *testing.T, c *testbroker.Cluster) { require.NoError(t, c.CreateTopic("ctx", 1)) },
			cause: context.Canceled,
		},
		{
			name:  "lingering in an open batch",
			cfg:   Config{Linger: time.Minute},
			setup: func(t *testing.T, c *testbroker.Cluster) { require.NoError(t, c.CreateTopic("ctx", 1)) },
			send: func(t *testing.T, p *Producer, ctx context.Context) (*Future, *Future, *Future) {
				return p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("a")}),
					p.Send(ctx, &Record{Topic: "ctx", Value: []byte("b")}),
					p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("c")})
			},
			after: func(t *testing.T, c *testbroker.Cluster) {},
			cause: context.Canceled,
		},
		{
			name:  "lingering, deadline",
			cfg:   Config{Linger: time.Minute},
			setup: func(t *testing.T, c *testbroker.Cluster) { require.NoError(t, c.CreateTopic("ctx", 1)) },
			send: func(t *testing.T, p *Producer, ctx context.Context) (*Future, *Future, *Future) {
				dl, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
				t.Cleanup(cancel)
				return p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("a")}),
					p.Send(dl, &Record{Topic: "ctx", Value: []byte("b")}),
					p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("c")})
			},
			after: func(t *testing.T, c *testbroker.Cluster) {},
			cause: context.DeadlineExceeded,
		},
		{
			name:  "already ended at Send",
			cfg:   Config{Linger: time.Millisecond},
			setup: func(t *testing.T, c *testbroker.Cluster) { require.NoError(t, c.CreateTopic("ctx", 1)) },
			send: func(t *testing.T, p *Producer, ctx context.Context) (*Future, *Future, *Future) {
				ended, cancel := context.WithCancel(ctx)
				cancel()
				return p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("a")}),
					p.Send(ended, &Record{Topic: "ctx", Value: []byte("b")}),
					p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("c")})
			},
			after: func(t *testing.T, c *testbroker.Cluster) {},
			cause: context.Canceled,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			tc.setup(t, c)
			p := newProducer(t, c, tc.cfg)
			ctx, cancel := context.WithCancel(context.Background())
			before, watched, after := tc.send(t, p, ctx)
			time.Sleep(20 * time.Millisecond) // buffered (or parked) by now
			start := time.Now()
			cancel()
			_, err := waitFuture(t, watched, 10*time.Second)
			require.ErrorIs(t, err, tc.cause)
			assert.NotErrorIs(t, err, ErrOutcomeUnknown, "the record was definitely not written")
			assert.Less(t, time.Since(start), 5*time.Second, "failed when its ctx ended, not after Linger")
			tc.after(t, c)
			for _, f := range []*Future{before, after} {
				_, err := waitFuture(t, f, 20*time.Second)
				require.NoError(t, err)
			}
			assert.Equal(t, []string{"a", "c"}, partitionValues(t, c, "ctx", 0))
		})
	}
}

// TestSendContextWhileWaitingForMemory: a Send blocked on a full pool
// fails with its ctx's error (this held before too) and is never written.
func TestSendContextWhileWaitingForMemory(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("ctx", 1))
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true})
	p := newProducer(t, c, Config{BufferMemory: 64 << 10, BatchSize: 16 << 10, MaxBlock: time.Minute, Linger: -1})
	value := bytes.Repeat([]byte("v"), 8<<10)
	var fs []*Future
	for range 8 {
		if f := p.TrySend(context.Background(), &Record{Topic: "ctx", Value: value}); !isDone(f) {
			fs = append(fs, f)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	blocked := make(chan *Future, 1)
	go func() { blocked <- p.Send(ctx, &Record{Topic: "ctx", Value: append([]byte("late"), value...)}) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-blocked:
		t.Fatal("Send did not wait for memory")
	default:
	}
	cancel()
	f := <-blocked
	_, err := waitFuture(t, f, 10*time.Second)
	require.ErrorIs(t, err, context.Canceled)
	remove()
	for _, f := range fs {
		_, err := waitFuture(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	for _, v := range partitionValues(t, c, "ctx", 0) {
		require.NotContains(t, v, "late")
	}
}

func isDone(f *Future) bool {
	_, ok, _ := f.Result()
	return ok
}

// TestSendContextEndingAfterWriteDoesNotFail: once a request carried the
// record, its ctx no longer matters (the broker may have it): the record
// completes with the broker's answer.
func TestSendContextEndingAfterWriteDoesNotFail(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("ctx", 1))
	var once sync.Once
	arrived := make(chan struct{})
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true,
		Match: func(int32, kmsg.Request) bool { once.Do(func() { close(arrived) }); return true }})
	p := newProducer(t, c, Config{Linger: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	f := p.Send(ctx, &Record{Topic: "ctx", Value: []byte("w")})
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the Produce request never arrived")
	}
	cancel()
	time.Sleep(50 * time.Millisecond)
	assert.False(t, isDone(f), "the record was written: its ctx no longer fails it")
	remove()
	_, err := waitFuture(t, f, 20*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []string{"w"}, partitionValues(t, c, "ctx", 0))
}

// TestCancelledRecordsLeaveSequencesGapless: with idempotence, records whose
// ctx ended in an open batch, or in sealed batches queued behind a request
// the broker holds, are left out before their batches take sequences: the
// partition's records read back have sequences 0..n-1 without a gap, and
// every record not cancelled is there, in Send order.
func TestCancelledRecordsLeaveSequencesGapless(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Config
		stall bool // hold the first Produce request while cancelling
	}{
		{"open batch", Config{Linger: time.Minute}, false},
		{"sealed batches behind a held request", Config{Linger: time.Millisecond, BatchSize: 1024}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			require.NoError(t, c.CreateTopic("seq", 1))
			var remove func()
			arrived := make(chan struct{})
			if tc.stall {
				var once sync.Once
				remove = c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true,
					Match: func(int32, kmsg.Request) bool { once.Do(func() { close(arrived) }); return true }})
			}
			p := newProducer(t, c, tc.cfg)
			value := bytes.Repeat([]byte("x"), 100)
			var fs []*Future
			var want []string
			// One context for every cancelled record: cancelling records
			// one by one, the first would send the others' batch at once
			// (sealed for it), and later ones could be written first.
			shared, cancelShared := context.WithCancel(context.Background())
			for i := range 60 {
				ctx := context.Background()
				v := fmt.Sprint(i)
				if i%3 == 1 {
					ctx = shared
				} else {
					want = append(want, v)
				}
				fs = append(fs, p.Send(ctx, &Record{Topic: "seq", Key: []byte(v), Value: append([]byte(v+":"), value...)}))
				if tc.stall && i == 0 {
					select {
					case <-arrived:
					case <-time.After(10 * time.Second):
						t.Fatal("the Produce request never arrived")
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
			cancelShared()
			for i, f := range fs {
				if i%3 == 1 {
					_, err := waitFuture(t, f, 10*time.Second)
					require.ErrorIs(t, err, context.Canceled, "record %d", i)
				}
			}
			if remove != nil {
				remove()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, p.Flush(ctx))
			for i, f := range fs {
				if i%3 != 1 {
					_, err := waitFuture(t, f, time.Second)
					require.NoError(t, err, "record %d", i)
				}
			}
			recs, err := c.Records("seq", 0)
			require.NoError(t, err)
			var got []string
			for i, r := range recs {
				require.Equal(t, int32(i), r.Sequence, "offset %d: the sequences have a gap", r.Offset)
				got = append(got, string(r.Key))
			}
			assert.Equal(t, want, got)
			assert.Zero(t, p.Metrics().Producer.BufferedRecords)
		})
	}
}

// TestCancelRacingCloseCompletesEveryRecordOnce: contexts ending while
// records are parked, batched, written and failed by Close complete every
// future once (a second completion panics) and leave no goroutine behind
// (the package's goleak check): the AfterFuncs are released.
func TestCancelRacingCloseCompletesEveryRecordOnce(t *testing.T) {
	for round := range 4 {
		c := newCluster(t, testbroker.Config{})
		require.NoError(t, c.CreateTopic("known", 2))
		p := newProducer(t, c, Config{Linger: 2 * time.Millisecond, BatchSize: 2048})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var fs []*Future
		for g := range 4 {
			wg.Go(func() {
				for i := range 300 {
					ctx, cancel := context.WithCancel(context.Background())
					topic := "known"
					if i%5 == 0 {
						topic = fmt.Sprintf("unknown-%d", g)
					}
					f := p.Send(ctx, &Record{Topic: topic, Value: []byte("v")})
					if i%2 == 0 {
						cancel()
					} else {
						defer cancel()
					}
					mu.Lock()
					fs = append(fs, f)
					mu.Unlock()
				}
			})
		}
		wg.Go(func() { _, _ = p.Purge(context.Background()) })
		time.Sleep(time.Duration(round) * 3 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = p.Close(ctx)
		cancel()
		wg.Wait()
		for _, f := range fs {
			_, err := waitFuture(t, f, 10*time.Second)
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrPurged) {
				t.Fatalf("unexpected error %v", err)
			}
		}
	}
}

// TestSendContextSharedCostsNoAllocation: records sent with one context
// that can end share its watch (cancel.go's ctxGroup): a Send costs no
// allocation more than with context.Background(), which costs nothing.
func TestSendContextSharedCostsNoAllocation(t *testing.T) {
	c := newCluster(t, testbroker.Config{Sink: true})
	require.NoError(t, c.CreateTopic("allocs", 4))
	p := newProducer(t, c, Config{})
	shared, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := waitFuture(t, p.Send(shared, &Record{Topic: "allocs", Value: []byte("warm")}), 10*time.Second)
	require.NoError(t, err)
	noop := func(RecordMetadata, error) {}
	rec := &Record{Topic: "allocs", Value: []byte("v")}
	measure := func(ctx context.Context) float64 {
		for range 1000 { // warm: batches, chunks, free lists
			p.SendCallback(ctx, rec, noop)
		}
		return testing.AllocsPerRun(2000, func() { p.SendCallback(ctx, rec, noop) })
	}
	background := measure(context.Background())
	watched := measure(shared)
	assert.LessOrEqual(t, watched, background+0.2, "a shared context that can end: %.2f allocations per Send, %.2f with context.Background()", watched, background)
	require.NoError(t, p.Flush(shared))
}

// sliceErr is an error type that == cannot compare (a slice field).
type sliceErr struct{ causes []error }

func (e sliceErr) Error() string { return "ended: " + e.causes[0].Error() }
func (e sliceErr) Unwrap() error { return e.causes[0] }

// endingCtx is a context of another kind than the standard library's, whose
// error is a sliceErr.
type endingCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newEndingCtx() *endingCtx {
	return &endingCtx{Context: context.Background(), done: make(chan struct{})}
}
func (c *endingCtx) end()                  { c.once.Do(func() { close(c.done) }) }
func (c *endingCtx) Done() <-chan struct{} { return c.done }
func (c *endingCtx) Err() error {
	select {
	case <-c.done:
		return sliceErr{causes: []error{context.Canceled}}
	default:
		return nil
	}
}

// TestSendContextOfAnotherKind: contexts that are not the standard
// library's, with errors == cannot compare, end their records as well; the
// context package's goroutine watching each of them ends with its records
// (the package's goleak check).
func TestSendContextOfAnotherKind(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("ctx", 1))
	p := newProducer(t, c, Config{Linger: time.Minute})
	// The topic's partitions known first, so that the records below share
	// an open batch (not the parking queue).
	warm := p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("warm")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Flush(ctx))
	_, err := waitFuture(t, warm, time.Second)
	require.NoError(t, err)
	a, b := newEndingCtx(), newEndingCtx()
	kept := p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("kept")})
	fa := p.Send(a, &Record{Topic: "ctx", Value: []byte("a")})
	fb := p.Send(b, &Record{Topic: "ctx", Value: []byte("b")})
	written := newEndingCtx()
	fw := p.Send(written, &Record{Topic: "ctx", Value: []byte("w")})
	// Both end before the IO goroutine looks: one batch holds two
	// records whose errors are of the same kind.
	a.end()
	b.end()
	for _, f := range []*Future{fa, fb} {
		_, err := waitFuture(t, f, 10*time.Second)
		require.ErrorIs(t, err, context.Canceled)
	}
	for _, f := range []*Future{kept, fw} {
		_, err := waitFuture(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	written.end() // after its record was written: nothing happens
	assert.Equal(t, []string{"warm", "kept", "w"}, partitionValues(t, c, "ctx", 0))
}

// endingPool is a user's BufferPool that, once armed, makes the next
// Send's buffering wait in Allocate, ends that Send's context there, and
// gives the memory only after the IO goroutine began the sweep the
// context's AfterFunc asked for (sink.failEnded clears Producer.ctxEnded
// as it starts): the record is placed after the sweep looked for it.
type endingPool struct {
	bufferpool.Pool
	p      *Producer
	cancel atomic.Pointer[context.CancelFunc]
}

func (e *endingPool) TryAllocate(size int) []byte {
	if e.cancel.Load() != nil {
		return nil // Send must wait, in Allocate
	}
	return e.Pool.TryAllocate(size)
}

func (e *endingPool) Allocate(ctx context.Context, size int, maxWait time.Duration) ([]byte, error) {
	if cancel := e.cancel.Swap(nil); cancel != nil {
		(*cancel)()
		waitFor(5*time.Second, func() bool {
			g := e.p.lastGroup.Load()
			return g != nil && g.ended.Load() && !e.p.ctxEnded.Load()
		})
		time.Sleep(50 * time.Millisecond) // the sweep's scan is over
	}
	if buf := e.Pool.TryAllocate(size); buf != nil {
		return buf, nil
	}
	return e.Pool.Allocate(ctx, size, maxWait)
}

// TestSendContextEndingWhileBuffering: a record whose ctx ends while Send
// is still buffering it, after the sweep its AfterFunc asked for looked
// for it, fails with ctx's error promptly. Before, nothing swept again:
// the parked record failed with ErrDeliveryTimeout at MaxBlock, the
// lingering one waited for Linger. The same with Config.Spool, where the
// record is spilled (Send does not wait for memory) and the drainer,
// whose append waits, checks again after it (drainOne).
func TestSendContextEndingWhileBuffering(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		create bool
	}{
		{name: "parked for an unknown topic", cfg: Config{MaxBlock: time.Minute, DeliveryTimeout: 2 * time.Minute, Linger: time.Millisecond}},
		{name: "in the open batch", cfg: Config{Linger: time.Minute}, create: true},
	}
	for _, spooled := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/spool=%v", tc.name, spooled), func(t *testing.T) {
				if spooled {
					tc.cfg.Spool = &SpoolConfig{Dir: t.TempDir()}
				}
				c := newCluster(t, testbroker.Config{})
				if tc.create {
					require.NoError(t, c.CreateTopic("ctx", 1))
				}
				sp, err := bufferpool.New(bufferpool.Options{Size: 8 << 20})
				require.NoError(t, err)
				pool := &endingPool{Pool: sp}
				tc.cfg.BufferPool = pool
				p := newProducer(t, c, tc.cfg)
				pool.p = p
				ctx, cancel := context.WithCancel(context.Background())
				pool.cancel.Store(&cancel)
				start := time.Now()
				f := p.Send(ctx, &Record{Topic: "ctx", Value: []byte("b")})
				if spooled {
					// With a spool Send never waits for memory: the
					// record is spilled, and the drainer's append
					// waits instead, then sweeps it (drainOne).
					require.Eventually(t, func() bool { return pool.cancel.Load() == nil }, 5*time.Second, time.Millisecond, "the drainer did not wait for memory")
				} else {
					require.Nil(t, pool.cancel.Load(), "Send did not wait for memory")
				}
				_, err = waitFuture(t, f, 5*time.Second)
				require.ErrorIs(t, err, context.Canceled)
				assert.Less(t, time.Since(start), 5*time.Second, "failed when its ctx ended, not at MaxBlock or after Linger")
				if !tc.create {
					require.NoError(t, c.CreateTopic("ctx", 1))
				}
				fc := p.Send(context.Background(), &Record{Topic: "ctx", Value: []byte("c")})
				require.NoError(t, p.Flush(context.Background())) // past Linger
				_, err = waitFuture(t, fc, 20*time.Second)
				require.NoError(t, err)
				assert.Equal(t, []string{"c"}, partitionValues(t, c, "ctx", 0))
			})
		}
	}
}

// lockSpyCtx is an endingCtx whose Err, once the context ended, reports
// whether it was called with the topic's lock held: user code under a
// samsa lock (invariant 9), which a context of another kind may be.
type lockSpyCtx struct {
	*endingCtx
	topic     func() *topicState
	underLock atomic.Bool
}

func (c *lockSpyCtx) Err() error {
	err := c.endingCtx.Err()
	if err == nil {
		return nil
	}
	if ts := c.topic(); ts != nil {
		took := make(chan struct{})
		go func() {
			ts.acc.OldestParked() // takes the topic's lock
			close(took)
		}()
		select {
		case <-took:
		case <-time.After(200 * time.Millisecond):
			c.underLock.Store(true) // the goroutine ends once the lock is released
		}
	}
	return err
}

// TestSendContextErrNotCalledUnderLock: failing the parked records of a
// context that ended does not call that context's Err with the topic's
// lock held (a user's context is user code: it may block or take locks of
// its own). Before, sink.failEnded's callback asked each failed record's
// context for its error inside Topic.FailParkedIf.
func TestSendContextErrNotCalledUnderLock(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	p := newProducer(t, c, Config{MaxBlock: time.Minute, DeliveryTimeout: 2 * time.Minute})
	ctx := &lockSpyCtx{endingCtx: newEndingCtx(), topic: func() *topicState {
		if ts, ok := p.topics.Load("ctx"); ok {
			return ts.(*topicState)
		}
		return nil
	}}
	f := p.Send(ctx, &Record{Topic: "ctx", Value: []byte("a")})
	require.True(t, waitFor(5*time.Second, func() bool {
		ts := ctx.topic()
		n, _ := ts.acc.Parked()
		return n == 1
	}), "the record was never parked")
	ctx.end()
	_, err := waitFuture(t, f, 10*time.Second)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, ctx.underLock.Load(), "the context's Err ran with the topic's lock held")
}
