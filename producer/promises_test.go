package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
)

// Issue 12: the producer keeps its promises (every future completes exactly
// once, Close returns, errors tell the truth) under hostile input.

// waitFuture waits for f for at most d and fails the test if it is still
// pending then.
func waitFuture(t *testing.T, f *Future, d time.Duration) (RecordMetadata, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	md, err := f.Wait(ctx)
	if ctx.Err() != nil {
		if _, ok, _ := f.Result(); !ok {
			t.Fatalf("future still pending after %v", d)
		}
	}
	return md, err
}

// A Send racing Close either fails with ErrClosed or is flushed by Close:
// its future never stays pending.
func TestSendRacingCloseFailsOrIsFlushed(t *testing.T) {
	c := newCluster(t, testbroker.Config{MaxMessageBytes: 64 << 20})
	require.NoError(t, c.CreateTopic("race", 1))
	for _, delay := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			p := newProducer(t, c, Config{MaxRequestSize: 16 << 20, BufferMemory: 64 << 20})
			ctx := context.Background()
			_, err := p.Send(ctx, &Record{Topic: "race", Value: []byte("warm")}).Wait(ctx)
			require.NoError(t, err)
			// Many headers make Send slow between its closed check and
			// taking the record: Close runs in that window.
			futs := make(chan *Future, 1)
			go func() { futs <- p.Send(ctx, &Record{Topic: "race", Headers: make([]Header, 3_000_000)}) }()
			time.Sleep(delay)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			p.Close(cctx)
			f := <-futs
			_, err = waitFuture(t, f, 10*time.Second)
			if err != nil {
				require.ErrorIs(t, err, ErrClosed)
			}
		})
	}
}

// Close(ctx) returns when ctx ends even though a callback blocks: what is
// buffered fails with ErrClosed, and the blocked callback is not waited for.
func TestCloseReturnsWhenContextEndsDespiteBlockedCallback(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("slow", 1))
	p := newProducer(t, c, Config{})
	ctx := context.Background()
	release := make(chan struct{})
	entered := make(chan struct{})
	p.SendCallback(ctx, &Record{Topic: "slow", Value: []byte("a")}, func(RecordMetadata, error) {
		close(entered)
		<-release
	})
	<-entered
	// The completion goroutine is stuck: this record's answer queues
	// behind the blocked callback.
	f := p.Send(ctx, &Record{Topic: "slow", Value: []byte("b")})
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Close(cctx) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("Close did not return after its context ended")
	}
	require.ErrorIs(t, futErr(p.Send(ctx, &Record{Topic: "slow"})), ErrClosed)
	close(release)
	_, err := waitFuture(t, f, 10*time.Second)
	if err != nil {
		require.ErrorIs(t, err, ErrClosed)
	}
}

// A partitioner that panics fails only its record, with ErrInvalidRecord,
// whether it runs in Send or for parked records on the IO goroutine; Flush
// and Close still finish and the other records are delivered.
func TestPanickingPartitionerFailsOnlyItsRecord(t *testing.T) {
	for _, parked := range []bool{false, true} {
		t.Run(fmt.Sprintf("parked=%v", parked), func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			if !parked {
				require.NoError(t, c.CreateTopic("boom", 3))
			}
			var calls atomic.Int32
			p := newProducer(t, c, Config{Partitioner: PartitionerFunc(func(rec *Record, n int32) (int32, error) {
				calls.Add(1)
				if string(rec.Key) == "boom" {
					panic("partitioner bug")
				}
				return 0, nil
			})})
			ctx := context.Background()
			var futs []*Future
			require.NotPanics(t, func() {
				for _, k := range []string{"a", "boom", "b"} {
					futs = append(futs, p.Send(ctx, &Record{Topic: "boom", Key: []byte(k)}))
				}
			})
			if parked {
				require.NoError(t, c.CreateTopic("boom", 3))
			}
			for i, f := range futs {
				_, err := waitFuture(t, f, 20*time.Second)
				if i == 1 {
					require.ErrorIs(t, err, ErrInvalidRecord)
					require.Contains(t, err.Error(), "partitioner bug")
				} else {
					require.NoError(t, err)
				}
			}
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, p.Flush(fctx))
			require.NoError(t, p.Close(fctx))
			require.Positive(t, calls.Load())
		})
	}
}

// A panicking callback is recovered and logged; the callbacks of the other
// records still run, and Flush returns.
func TestPanickingCallbackDoesNotStopOtherCompletions(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("cb", 1))
	var logs testutil.SyncBuffer
	p := newProducer(t, c, Config{Linger: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	var ran atomic.Int32
	for i := range 10 {
		p.SendCallback(ctx, &Record{Topic: "cb", Value: []byte{byte(i)}}, func(_ RecordMetadata, err error) {
			ran.Add(1)
			if i == 3 || i == 7 {
				panic("callback bug")
			}
		})
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, p.Flush(fctx))
	require.EqualValues(t, 10, ran.Load())
	require.Contains(t, logs.String(), "callback bug")
	// The completion goroutine still works.
	_, err := waitFuture(t, p.Send(ctx, &Record{Topic: "cb"}), 10*time.Second)
	require.NoError(t, err)
}

type panicSerializer struct{}

func (panicSerializer) Serialize(string, string) ([]byte, error) { panic("serializer bug") }

// A panicking serializer fails its record with ErrInvalidRecord instead of
// crashing the caller.
func TestPanickingSerializerFailsItsRecord(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("ser", 1))
	p := newProducer(t, c, Config{})
	tp := NewTyped[string, string](p, StringSerializer{}, panicSerializer{})
	ctx := context.Background()
	var f *Future
	require.NotPanics(t, func() { f = tp.Send(ctx, "ser", "k", "v") })
	require.ErrorIs(t, futErr(f), ErrInvalidRecord)
	var cbErr error
	require.NotPanics(t, func() {
		tp.SendCallback(ctx, &TypedRecord[string, string]{Topic: "ser"}, func(_ RecordMetadata, err error) { cbErr = err })
	})
	require.ErrorIs(t, cbErr, ErrInvalidRecord)
}

// A Send from a callback while the pool is full does not wait MaxBlock (the
// completion goroutine is the one that frees memory): it fails at once with
// ErrBufferExhausted.
func TestSendFromCallbackDoesNotWaitForMemory(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("full", 1))
	p := newProducer(t, c, Config{BufferMemory: 256 << 10, MaxBlock: 10 * time.Second, Linger: time.Millisecond})
	ctx := context.Background()
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true})
	type inner struct {
		err  error
		took time.Duration
	}
	got := make(chan inner, 1)
	big := make([]byte, 100<<10)
	p.SendCallback(ctx, &Record{Topic: "full", Value: []byte("first")}, func(RecordMetadata, error) {
		start := time.Now()
		err := futErr(p.Send(ctx, &Record{Topic: "full", Value: big}))
		got <- inner{err, time.Since(start)}
	})
	// Fill the pool while Produce is stalled.
	val := make([]byte, 1000)
	for {
		if _, ok, err := p.TrySend(ctx, &Record{Topic: "full", Value: val}).Result(); ok {
			require.ErrorIs(t, err, ErrBufferExhausted)
			break
		}
	}
	remove()
	select {
	case r := <-got:
		require.ErrorIs(t, r.err, ErrBufferExhausted)
		require.Less(t, r.took, 5*time.Second, "Send in a callback waited for memory")
	case <-time.After(30 * time.Second):
		t.Fatal("the callback never ran")
	}
}

// futErr waits for f and returns its error.
func futErr(f *Future) error {
	_, err := f.Wait(context.Background())
	return err
}

// A BatchSize far above MaxRequestSize loses nothing: requests stay within
// MaxRequestSize, and every record is delivered.
func TestBatchSizeAboveMaxRequestSizeLosesNoRecord(t *testing.T) {
	for _, bs := range []int{5 << 20, 8 << 20} {
		t.Run(fmt.Sprint(bs>>20, "MiB"), func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			require.NoError(t, c.CreateTopic("big", 1))
			p := newProducer(t, c, Config{BatchSize: bs, BufferMemory: 32 << 20, Linger: 500 * time.Millisecond})
			ctx := context.Background()
			_, err := p.Send(ctx, &Record{Topic: "big", Value: []byte("warm")}).Wait(ctx)
			require.NoError(t, err)
			val := make([]byte, 1024)
			futs := make([]*Future, 6000)
			for i := range futs {
				futs[i] = p.Send(ctx, &Record{Topic: "big", Value: val})
			}
			waitAll(t, futs)
			recs, err := c.Records("big", 0)
			require.NoError(t, err)
			require.Len(t, recs, len(futs)+1)
		})
	}
}

// A batch in flight past DeliveryTimeout fails at the deadline with
// ErrOutcomeUnknown (not up to RequestTimeout later); its late answer is
// ignored safely, and the partition goes on producing under idempotence.
func TestInflightBatchFailsAtDeliveryTimeout(t *testing.T) {
	for _, idem := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%v", idem), func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			require.NoError(t, c.CreateTopic("late", 1))
			// The retry's answer comes at 5 s, RequestTimeout would end
			// it at 5.4 s: the record must fail at its 3 s deadline,
			// with slack for a loaded machine but well before either.
			const dt, answer = 3 * time.Second, 2500 * time.Millisecond
			p := newProducer(t, c, Config{DeliveryTimeout: dt, RequestTimeout: 2900 * time.Millisecond, Linger: time.Millisecond, DisableIdempotence: !idem})
			ctx := context.Background()
			_, err := p.Send(ctx, &Record{Topic: "late", Value: []byte("warm")}).Wait(ctx)
			require.NoError(t, err)
			// The first attempt is appended and answered REQUEST_TIMED_OUT
			// after 2.5 s; the retry is appended and answered 2.5 s
			// later, past the deadline.
			r1 := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, After: true, Delay: answer, ErrorCode: 7})
			r2 := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, After: true, Delay: answer})
			start := time.Now()
			_, err = waitFuture(t, p.Send(ctx, &Record{Topic: "late", Value: []byte("x")}), 10*time.Second)
			took := time.Since(start)
			require.ErrorIs(t, err, ErrDeliveryTimeout)
			require.ErrorIs(t, err, ErrOutcomeUnknown)
			require.Less(t, took, dt+time.Second, "failed %v after Send, DeliveryTimeout is %v", took, dt)
			r1()
			r2()
			// The late answer arrives; the producer goes on.
			for i := range 3 {
				_, err = waitFuture(t, p.Send(ctx, &Record{Topic: "late", Value: []byte{byte(i)}}), 10*time.Second)
				require.NoError(t, err)
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, p.Close(cctx))
		})
	}
}

// A Produce answer that leaves a partition out is not "definitely not
// written": under idempotence the batch is retried (and stored once),
// otherwise its failure carries ErrOutcomeUnknown.
func TestProduceAnswerMissingPartitionIsOutcomeUnknown(t *testing.T) {
	dropAll := func(resp kmsg.Response) { resp.(*kmsg.ProduceResponse).Topics = nil }
	t.Run("idempotent", func(t *testing.T) {
		c := newCluster(t, testbroker.Config{})
		require.NoError(t, c.CreateTopic("miss", 1))
		p := newProducer(t, c, Config{})
		c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, After: true, Rewrite: dropAll})
		_, err := waitFuture(t, p.Send(context.Background(), &Record{Topic: "miss", Value: []byte("x")}), 10*time.Second)
		require.NoError(t, err)
		recs, err := c.Records("miss", 0)
		require.NoError(t, err)
		require.Len(t, recs, 1)
	})
	t.Run("plain", func(t *testing.T) {
		c := newCluster(t, testbroker.Config{})
		require.NoError(t, c.CreateTopic("miss", 1))
		p := newProducer(t, c, Config{DisableIdempotence: true, DeliveryTimeout: time.Second, RequestTimeout: 500 * time.Millisecond})
		c.Intercept(testbroker.Interceptor{Keys: []int16{0}, After: true, Rewrite: dropAll})
		_, err := waitFuture(t, p.Send(context.Background(), &Record{Topic: "miss", Value: []byte("x")}), 10*time.Second)
		require.ErrorIs(t, err, ErrDeliveryTimeout)
		require.ErrorIs(t, err, ErrOutcomeUnknown)
	})
}

// SendTo with a nil channel is a clear error, not a silently dropped
// outcome.
func TestSendToNilChannelIsAClearError(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	p := newProducer(t, c, Config{})
	require.PanicsWithValue(t, "producer: SendTo needs a non-nil results channel", func() {
		p.SendTo(context.Background(), &Record{Topic: "t"}, nil)
	})
}

// A partitioner's own error is wrapped in ErrInvalidRecord (and still
// matches), in Send and for parked records.
func TestPartitionerErrorWrapsErrInvalidRecord(t *testing.T) {
	errNope := errors.New("nope")
	for _, parked := range []bool{false, true} {
		t.Run(fmt.Sprintf("parked=%v", parked), func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			if !parked {
				require.NoError(t, c.CreateTopic("perr", 1))
			}
			p := newProducer(t, c, Config{Partitioner: PartitionerFunc(func(*Record, int32) (int32, error) { return 0, errNope })})
			f := p.Send(context.Background(), &Record{Topic: "perr"})
			if parked {
				require.NoError(t, c.CreateTopic("perr", 1))
			}
			_, err := waitFuture(t, f, 20*time.Second)
			require.ErrorIs(t, err, ErrInvalidRecord)
			require.ErrorIs(t, err, errNope)
		})
	}
}

// A record that fails because InitProducerId keeps failing says so.
func TestInitProducerIDFailureIsNamed(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("pid", 1))
	c.Intercept(testbroker.Interceptor{Keys: []int16{22}, ErrorCode: 31}) // CLUSTER_AUTHORIZATION_FAILED
	p := newProducer(t, c, Config{DeliveryTimeout: time.Second, RequestTimeout: 500 * time.Millisecond})
	_, err := waitFuture(t, p.Send(context.Background(), &Record{Topic: "pid"}), 10*time.Second)
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.Contains(t, err.Error(), "InitProducerId")
	require.True(t, strings.Contains(err.Error(), "CLUSTER_AUTHORIZATION_FAILED"), err.Error())
}
