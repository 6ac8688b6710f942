package producer

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/internal/lifetime"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/sasl"
)

// Tests of Close: it returns, from anywhere, leaves no goroutine or
// connection behind, and completes every record racing it exactly once.

// goroutineStacks returns the stacks of every goroutine.
func goroutineStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

var goroutineHeader = regexp.MustCompile(`^goroutine (\d+) \[([^\]]*)\]`)

// goroutineIDs returns the ids of every goroutine.
func goroutineIDs() map[string]bool {
	ids := map[string]bool{}
	for _, st := range strings.Split(goroutineStacks(), "\n\n") {
		if m := goroutineHeader.FindStringSubmatch(st); m != nil {
			ids[m[1]] = true
		}
	}
	return ids
}

// workingGoroutines returns the stacks of samsa's goroutines (running its
// code, or started by it) that did not exist in before and are still at
// work: blocked, or in any call but the runtime's and sync's. A goroutine
// that has given its last signal (a WaitGroup's Done, a channel's close,
// deferred last) and is only returning is not at work: it is runnable, in
// its own function or in the runtime's and sync's. goleak, which retries
// for about 0.4 s, does not see goroutines that outlive Close by less.
// The test's own goroutines (the hostile broker's) are left out.
func workingGoroutines(before map[string]bool) []string {
	var out []string
	for _, st := range strings.Split(goroutineStacks(), "\n\n") {
		m := goroutineHeader.FindStringSubmatch(st)
		if m == nil || before[m[1]] {
			continue
		}
		var funcs []string
		created := ""
		for _, l := range strings.Split(st, "\n")[1:] {
			if strings.HasPrefix(l, "created by ") {
				created = l
				break
			}
			if l != "" && !strings.HasPrefix(l, "\t") {
				funcs = append(funcs, l)
			}
		}
		ours := strings.Contains(created, "samsa-go/samsa/")
		for _, f := range funcs {
			ours = ours || strings.HasPrefix(f, "github.com/samsa-go/samsa/")
		}
		if !ours || strings.Contains(created, "hostileBroker") || strings.Contains(created, "testing.") {
			continue
		}
		returning := m[2] == "runnable" || m[2] == "running"
		for _, f := range funcs[:max(len(funcs)-1, 0)] { // every frame above the goroutine's own function
			if !strings.HasPrefix(f, "runtime.") && !strings.HasPrefix(f, "sync.") && !strings.HasPrefix(f, "internal/sync.") {
				returning = false
			}
		}
		if !returning {
			out = append(out, st)
		}
	}
	return out
}

// TestCloseFromCallbackReturns: a callback that calls Close (a common way to
// stop on the first error) must not deadlock the producer: Close waits for
// every record to complete, including the one whose callback is running.
func TestCloseFromCallbackReturns(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 1))
	p, err := New(Config{Brokers: c.Addrs()}) // no cleanup Close: it would hang with the bug
	require.NoError(t, err)
	closed := make(chan error, 1)
	p.SendCallback(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(RecordMetadata, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		closed <- p.Close(ctx)
	})
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close called from a callback did not return within 5s (its ctx ended after 0.5s)")
	}
}

// TestCloseLeavesNoDialGoroutine: Close promises that the producer's
// goroutines have exited when it returns; a dial started by the IO goroutine
// must end (and its connection be closed) by then, not after DialTimeout.
func TestCloseLeavesNoDialGoroutine(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var apiVersions atomic.Int32
	// The metadata client's connection comes first; the IO goroutine's
	// own connection to the leader handshakes slowly.
	slow := func(int32, kmsg.Request) bool { return apiVersions.Add(1) >= 2 }
	c.Intercept(testbroker.Interceptor{Keys: []int16{18}, Match: slow, Delay: 1500 * time.Millisecond})
	p, err := New(Config{Brokers: c.Addrs(), DisableIdempotence: true, Linger: -1})
	require.NoError(t, err)
	p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")})
	require.True(t, waitFor(5*time.Second, func() bool {
		return strings.Contains(goroutineStacks(), "producer.(*sink).dial.func")
	}), "the IO goroutine started dialing the leader")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.Close(ctx)
	assert.False(t, strings.Contains(goroutineStacks(), "producer.(*sink).dial.func"), "a dial goroutine outlived Close")
	// Once the slow handshake ends, nothing of the producer may hold a
	// connection to the broker.
	require.True(t, waitFor(5*time.Second, func() bool {
		return !strings.Contains(goroutineStacks(), "producer.(*sink).dial.func")
	}))
	require.True(t, waitFor(2*time.Second, func() bool { return c.Stats().Connections == 0 }),
		"%d connections left open after Close", c.Stats().Connections)
}

// TestSendsRacingCloseCompleteOnce: Sends from many goroutines racing with
// Close (to known and unknown topics, some waiting for memory) all complete
// exactly once (Future.complete panics on a second completion), with
// success or an error wrapping ErrClosed, and Close returns.
func TestSendsRacingCloseCompleteOnce(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 3))
	p := newProducer(t, c, Config{BufferMemory: 256 << 10, BatchSize: 16 << 10})
	const senders, each = 8, 400
	futures := make([][]*Future, senders)
	start := make(chan struct{})
	done := make(chan struct{})
	for g := range senders {
		go func() {
			defer func() { done <- struct{}{} }()
			<-start
			for i := range each {
				topic := "t"
				if i%5 == 0 {
					topic = "unknown"
				}
				futures[g] = append(futures[g], p.Send(context.Background(), &Record{Topic: topic, Value: make([]byte, 500)}))
			}
		}()
	}
	close(start)
	time.Sleep(2 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_ = p.Close(ctx)
	for range senders {
		<-done
	}
	for g := range futures {
		for i, f := range futures[g] {
			md, ok, err := f.Result()
			require.True(t, ok, "sender %d record %d not completed after Close", g, i)
			if err != nil {
				require.ErrorIs(t, err, ErrClosed, "sender %d record %d", g, i)
			} else {
				require.Equal(t, "t", md.Topic)
			}
		}
	}
}

// closingHook calls Flush, Close and Send (each with a 1s context) from
// the first call of the hook method its kind names, on the goroutine the
// producer calls it on, and reports what they returned on done.
type closingHook struct {
	p    atomic.Pointer[Producer]
	kind string
	once atomic.Bool
	done chan closingHookResult
}

type closingHookResult struct {
	flush, close, send error
	closeTook          time.Duration
}

func (h *closingHook) fire(kind string) {
	if kind != h.kind || h.p.Load() == nil || !h.once.CompareAndSwap(false, true) {
		return
	}
	p := h.p.Load()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var r closingHookResult
	r.flush = p.Flush(ctx)
	start := time.Now()
	r.close = p.Close(ctx)
	r.closeTook = time.Since(start)
	_, r.send = p.Send(ctx, &Record{Topic: "hk", Value: []byte("after")}).Wait(ctx)
	h.done <- r
}

func (h *closingHook) OnBatchWritten(BatchWritten)                         { h.fire("batch") }
func (h *closingHook) OnMetadataRefreshed(MetadataRefresh)                 { h.fire("metadata") }
func (h *closingHook) OnBrokerResponseRead(BrokerInfo, ResponseRead)       { h.fire("response") }
func (h *closingHook) OnBrokerRequestWritten(BrokerInfo, RequestWritten)   { h.fire("written") }
func (h *closingHook) OnBrokerConnected(BrokerInfo, time.Duration, error)  { h.fire("connected") }
func (h *closingHook) OnRecordCompleted(context.Context, RecordCompletion) { h.fire("completed") }
func (h *closingHook) onIOGoroutine(p *Producer) bool                      { return goroutineID() == p.ioGoid.Load() }

// TestCloseAndFlushFromProducerGoroutinesReturn: Close, Flush and Send
// called from user code that runs on the producer's own goroutines (hooks
// on the IO goroutine, a connection's reader and writer, the metadata
// goroutine, the completion goroutine; a parked record's partitioner on
// the IO goroutine) must not wait for the goroutine they run on: Flush
// fails at once with ErrFlushInCallback, Close returns at once with
// ErrClosed and closes in the background, and Sends fail with ErrClosed.
// A later Close from the test's goroutine returns once that close is over.
func TestCloseAndFlushFromProducerGoroutinesReturn(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("hk", 1))
	for _, kind := range []string{"batch", "connected", "metadata", "response", "written", "completed", "partitioner"} {
		t.Run(kind, func(t *testing.T) {
			h := &closingHook{kind: kind, done: make(chan closingHookResult, 1)}
			cfg := Config{Brokers: c.Addrs(), Hooks: []Hook{h}, RetryBackoff: 10 * time.Millisecond}
			if kind == "partitioner" {
				// The topic's first record parks (its partitions are
				// unknown in Send); the IO goroutine partitions it.
				cfg.Partitioner = PartitionerFunc(func(*Record, int32) (int32, error) {
					if p := h.p.Load(); p != nil && h.onIOGoroutine(p) {
						h.fire("partitioner")
					}
					return 0, nil
				})
			}
			p, err := New(cfg)
			require.NoError(t, err)
			h.p.Store(p)
			// No Close in a cleanup: it would hang the test binary if
			// Close deadlocked.
			p.Send(context.Background(), &Record{Topic: "hk", Value: []byte("v")})
			var r closingHookResult
			select {
			case r = <-h.done:
			case <-time.After(6 * time.Second):
				t.Fatalf("Flush, Close or Send (ctx with a 1s deadline) called from a %s hook has not returned after 6s", kind)
			}
			assert.ErrorIs(t, r.flush, ErrFlushInCallback)
			assert.ErrorIs(t, r.close, ErrClosed)
			assert.Contains(t, r.close.Error(), "continues in the background")
			assert.Less(t, r.closeTook, 500*time.Millisecond, "Close must not wait for its context")
			assert.ErrorIs(t, r.send, ErrClosed)

			done := make(chan struct{})
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = p.Close(ctx)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("a Close after the %s hook's has not returned after 10s", kind)
			}
		})
	}
}

// blockingHook blocks, in the hook method its kind names, every call until
// released; entered is closed at the first.
type blockingHook struct {
	kind             string
	entered, release chan struct{}
	enter, free      sync.Once
}

func (h *blockingHook) block(kind string) {
	if kind != h.kind {
		return
	}
	h.enter.Do(func() { close(h.entered) })
	<-h.release
}

func (h *blockingHook) unblock() { h.free.Do(func() { close(h.release) }) }

func (h *blockingHook) OnBatchWritten(BatchWritten)                         { h.block("batch") }
func (h *blockingHook) OnBrokerResponseRead(BrokerInfo, ResponseRead)       { h.block("response") }
func (h *blockingHook) OnMetadataRefreshed(MetadataRefresh)                 { h.block("metadata") }
func (h *blockingHook) OnRecordCompleted(context.Context, RecordCompletion) { h.block("completed") }

// TestCloseReturnsByItsContextWhileAHookBlocks: a hook that blocks one of
// the producer's goroutines (the IO goroutine, a connection's reader, the
// metadata goroutine, the completion goroutine) cannot be interrupted, but
// Close(ctx) still returns soon after ctx ends, with an error wrapping
// ctx.Err(), while the hook still blocks. Once the hook returns, every
// future completes exactly once and every goroutine of the producer exits.
func TestCloseReturnsByItsContextWhileAHookBlocks(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 1))
	for _, kind := range []string{"batch", "response", "metadata", "completed"} {
		t.Run(kind, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			h := &blockingHook{kind: kind, entered: make(chan struct{}), release: make(chan struct{})}
			t.Cleanup(h.unblock) // so that a failure does not hang the test binary
			p, err := New(Config{Brokers: c.Addrs(), Hooks: []Hook{h}, RetryBackoff: 10 * time.Millisecond})
			require.NoError(t, err)
			const records = 20
			var calls [records]atomic.Int32
			var completed sync.WaitGroup
			completed.Add(records)
			send := func(i int) {
				p.SendCallback(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(RecordMetadata, error) {
					if calls[i].Add(1) == 1 {
						completed.Done()
					}
				})
			}
			send(0)
			select {
			case <-h.entered:
			case <-time.After(10 * time.Second):
				t.Fatalf("the %s hook was not called", kind)
			}
			for i := 1; i < records; i++ {
				send(i)
			}
			const closeWithin = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
			defer cancel()
			closed := make(chan error, 1)
			start := time.Now()
			go func() { closed <- p.Close(ctx) }()
			select {
			case err := <-closed:
				took := time.Since(start)
				t.Logf("Close returned after %v with the %s hook blocked: %v", took, kind, err)
				require.ErrorIs(t, err, context.DeadlineExceeded)
			case <-time.After(10 * closeWithin):
				h.unblock()
				<-closed
				t.Fatalf("Close (ctx with a %v deadline) had not returned %v later, with the %s hook blocked; it returned once the hook was released",
					closeWithin, 10*closeWithin, kind)
			}
			h.unblock()
			all := make(chan struct{})
			go func() { completed.Wait(); close(all) }()
			select {
			case <-all:
			case <-time.After(30 * time.Second):
				t.Fatal("records not completed after the hook returned")
			}
			for i := range calls {
				require.Equal(t, int32(1), calls[i].Load(), "record %d completed %d times", i, calls[i].Load())
			}
			// The goroutines left running exit once the hook returned.
			require.True(t, waitFor(10*time.Second, func() bool { return goleak.Find(before) == nil }),
				"goroutines left after the hook returned: %v", goleak.Find(before))
		})
	}
}

// TestOwnedMechanismPrintsAsItsMechanism: the producer's wrapper of
// Config.SASL, which makes token refreshes the producer's (Close ends
// them), prints exactly as the user's mechanism does: redacted.
func TestOwnedMechanismPrintsAsItsMechanism(t *testing.T) {
	g := lifetime.NewGroup()
	defer g.Close()
	for _, m := range []sasl.Mechanism{
		sasl.Plain("user", "pw-XYZZY"),
		sasl.OAuthBearer(func(context.Context) (sasl.Token, error) { return sasl.Token{Value: "tok-XYZZY"}, nil }),
	} {
		owned := ownMechanism(m, g)
		require.Equal(t, m.Name(), owned.Name())
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
			require.Equal(t, fmt.Sprintf(verb, m), fmt.Sprintf(verb, owned), verb)
			require.NotContains(t, fmt.Sprintf(verb, owned), "XYZZY", verb)
		}
	}
	require.Nil(t, ownMechanism(nil, g))
}

// TestCloseErrorWhileAHookBlocksCountsRecordsNotCompleted: when Close
// returns because user code blocks the IO goroutine, its error says so and
// counts the records not completed yet (they complete once the hook
// returns), rather than claiming that none were left, or that those
// counted have already failed.
func TestCloseErrorWhileAHookBlocksCountsRecordsNotCompleted(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 1))
	h := &blockingHook{kind: "batch", entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(h.unblock)
	p, err := New(Config{Brokers: c.Addrs(), Hooks: []Hook{h}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	const records = 20
	fs := []*Future{p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")})}
	select {
	case <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the hook was not called")
	}
	for range records - 1 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = p.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "20 records not completed")
	require.Contains(t, err.Error(), "user code")
	h.unblock()
	for i, f := range fs {
		_, ferr := f.Wait(context.Background())
		if i > 0 {
			require.ErrorIs(t, ferr, ErrClosed, "record %d", i)
		}
	}
}

// TestNilContext: Close(nil) and Flush(nil) wait without a bound, as
// Java's close() and flush() without a timeout; they used to panic with a
// nil dereference. A record sent before them is delivered.
func TestNilContext(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{})
	f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")})
	require.NoError(t, p.Flush(nil))
	require.True(t, completedAtOnce(f), "Flush(nil) returned before its record completed")
	g := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("w")})
	require.NoError(t, p.Close(nil))
	_, err := g.Wait(context.Background())
	require.NoError(t, err)
}
